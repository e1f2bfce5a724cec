//! Solve groups (multigrain and coarse grain, McCombs et al. §3, §6) with a
//! mass matrix K x = λ M x (issue #23): each group solves its correction
//! equations (I − MQQᵀ)(K − θM)(I − QQᵀM) t = −r with M's rows in its own
//! layout. On FEM pairs with multiple eigenvalues, the groups' eigenvalues
//! against the fine-grain generalized solve and the closed form; ‖Kx − λMx‖
//! and ‖XᵀMX − I‖ recomputed from the gathered vectors.

use jdmg::prelude::*;
use jdmg::{Balance, MultigrainParams};
use jdmg::{
    BasisSettings, CorrectionSettings, ExecutionSettings, PrecondSettings, ProblemSettings,
};
use lblib::{Comm, ThreadComm};
mod common;

use common::fem_pair_exact as pair;

/// max over pairs of ‖Kx − λMx‖/(|λ|·‖x‖) and max |XᵀMX − I|, whole vectors.
fn errors(k: &CsrMatrix, m: &CsrMatrix, sol: &Solution) -> (f64, f64) {
    let (r, o) = common::ghep_residuals(k, m, sol, f64::abs);
    (r.into_iter().fold(0.0, f64::max), o)
}

/// Solve groups on `ranks` thread ranks in `groups` equal groups (hierarchical
/// layout, no balancing: deterministic), gathered on every rank.
fn grouped(
    k: &CsrMatrix,
    m: &CsrMatrix,
    prm: &JdParams,
    ranks: usize,
    groups: usize,
) -> Vec<Solution> {
    let g = jdmg::parse_groups("equal", ranks, groups).unwrap();
    ThreadComm::run(ranks, |comm| {
        let mg = MultigrainParams {
            groups: g.clone(),
            balance: Balance::None,
            rate_weighted_rows: false,
            hierarchical: true,
            ..MultigrainParams::default()
        };
        let world = jdmg::fine_world(&comm, Some(&g), true, 0.0);
        let r = Solver::new(k, prm)
            .mass(m)
            .comm(&world)
            .groups(&comm, &mg)
            .run();
        jdmg::gather_eigenvectors(&world, k.nrows(), r).unwrap_or_else(|e| panic!("{e}"))
    })
}

/// fem2d:16 (double eigenvalues λ₂ = λ₃): multigrain (4 ranks, 2 groups of
/// 2) and coarse grain (2 ranks, one per group), without a preconditioner,
/// with Jacobi diag(K) − θ·diag(M) and with ILU(0) of K: the fine-grain
/// generalized eigenvalues, M-orthonormal vectors, small residuals.
#[test]
fn solve_groups_match_the_fine_grain_generalized_eigenvalues() {
    let (k, m, ex) = pair("fem2d:16");
    assert!((ex[1] - ex[2]).abs() < 1e-9 * ex[1]);
    let nev = 4;
    let base = JdParams {
        problem: ProblemSettings {
            nev,
            tol: 1e-10,
            ..Default::default()
        },
        basis: BasisSettings {
            block: 2,
            ..Default::default()
        },
        correction: CorrectionSettings {
            maxits: Some(40),
            ..Default::default()
        },
        execution: ExecutionSettings {
            max_matvecs: Some(400_000),
            ..Default::default()
        },
        ..JdParams::default()
    };
    let fine = ThreadComm::run(2, |comm| {
        jdmg::Solver::new(&k, &base)
            .mass(&m)
            .comm(&comm)
            .checkpointing(Default::default())
            .run()
            .unwrap_or_else(|e| panic!("{e}"))
            .eigenvalues
    });
    for (l, e) in fine[0].iter().zip(&ex) {
        assert!((l - e).abs() <= 1e-8 * e, "fine grain: {l} against {e}");
    }
    for precond in [
        PrecondChoice::None,
        PrecondChoice::Jacobi,
        PrecondChoice::Ilu0,
    ] {
        let prm = JdParams {
            preconditioner: PrecondSettings {
                kind: precond,
                ..base.preconditioner
            },
            ..base.clone()
        };
        for (ranks, groups) in [(4, 2), (2, 2)] {
            let out = grouped(&k, &m, &prm, ranks, groups);
            for (r, sol) in out.iter().enumerate() {
                let what = format!("{precond:?}, {ranks} ranks in {groups} groups, rank {r}");
                assert!(sol.converged.iter().all(|&c| c), "{what}: not converged");
                assert_eq!(sol.eigenvalues.len(), nev, "{what}");
                for (l, f) in sol.eigenvalues.iter().zip(&fine[0]) {
                    assert!((l - f).abs() <= 1e-8 * f, "{what}: {l} against {f}");
                }
                let (res, orth) = errors(&k, &m, sol);
                assert!(res <= 1e-8, "{what}: ‖Kx − λMx‖/(|λ|‖x‖) = {res:e}");
                assert!(orth <= 1e-9, "{what}: ‖XᵀMX − I‖ = {orth:e}");
                assert!(sol.stats.mass_matvecs > 0, "{what}");
                let mg = sol.multigrain.as_ref().expect("multigrain stats");
                assert_eq!(mg.groups, groups, "{what}");
                // the groups solved correction equations (not only GD steps)
                assert!(mg.group_inner_steps.iter().sum::<u64>() > 0, "{what}");
            }
        }
    }
    let _ = Comm::size(&lblib::SelfComm::new());
}

/// fem3d:6 (a triple λ₂ = λ₃ = λ₄) on 4 ranks in 4 groups (JDcg), the
/// largest eigenvalues too: against the closed form.
#[test]
fn coarse_grain_fem3d_smallest_and_largest() {
    let (k, m, ex) = pair("fem3d:6");
    for (target, want) in [
        (Target::Smallest, ex[..4].to_vec()),
        (Target::Largest, ex.iter().rev().take(3).copied().collect()),
    ] {
        let prm = JdParams {
            problem: ProblemSettings {
                nev: want.len(),
                target,
                tol: 1e-10,
                ..Default::default()
            },
            basis: BasisSettings {
                block: 2,
                ..Default::default()
            },
            correction: CorrectionSettings {
                maxits: Some(40),
                ..Default::default()
            },
            execution: ExecutionSettings {
                max_matvecs: Some(400_000),
                ..Default::default()
            },
            ..JdParams::default()
        };
        for sol in grouped(&k, &m, &prm, 4, 4) {
            for (l, e) in sol.eigenvalues.iter().zip(&want) {
                assert!((l - e).abs() <= 1e-8 * e, "{target:?}: {l} against {e}");
            }
            let (res, orth) = errors(&k, &m, &sol);
            assert!(res <= 1e-8 && orth <= 1e-9, "{target:?}: {res:e} {orth:e}");
        }
    }
}
