//! Generalized symmetric-definite problems K x = λ M x (issue #23, item 1):
//! FEM pairs against their closed-form spectra (1-D to 3-D, multiple
//! eigenvalues included), lund_a/lund_b against a dense generalized
//! eigensolver, on 1 and 2 threads (fine grain), with each inner solver, a
//! checkpoint resume, and an M that is not positive definite. Everything is
//! checked on what comes back: ‖Kx − λMx‖ and ‖XᵀMX − I‖ recomputed from the
//! returned vectors.

mod common;

use jdmg::checkpoint::{Checkpoint, CheckpointRequest, CheckpointSink, Checkpointing};
use jdmg::prelude::*;
use jdmg::{CorrectionSettings, ExecutionSettings, PrecondSettings, ProblemSettings};
use lblib::ThreadComm;
use precond::CsrOperator;

use common::{fem_pair_exact as pair, ghep_errors};

/// The returned pairs are the `nev` wanted ones of `exact` (ascending, or
/// descending for `Largest`), whole multiplets included, with small backward
/// errors and M-orthonormal vectors.
fn assert_ghep(k: &CsrMatrix, m: &CsrMatrix, sol: &Solution, exact: &[f64], what: &str) {
    let nev = sol.eigenvalues.len();
    assert!(
        sol.converged.iter().all(|&c| c),
        "{what}: not all converged"
    );
    let lmax = exact.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    for (j, (&l, &e)) in sol.eigenvalues.iter().zip(exact).enumerate() {
        assert!(
            (l - e).abs() <= 1e-8 * lmax,
            "{what}: eigenvalue {j}: {l} against {e} (all: {:?})",
            &sol.eigenvalues
        );
    }
    let (back, orth) = ghep_errors(k, m, sol);
    for (j, b) in back.iter().enumerate() {
        assert!(*b <= 1e-9, "{what}: pair {j}: backward error {b:e}");
    }
    assert!(orth <= 1e-10, "{what}: ‖XᵀMX − I‖ = {orth:e}");
    assert_eq!(nev, exact.len().min(nev));
    assert!(sol.stats.mass_matvecs > 0, "{what}: M never applied");
}

fn params(nev: usize) -> JdParams {
    JdParams {
        problem: ProblemSettings {
            nev,
            tol: 1e-11,
            ..Default::default()
        },
        ..JdParams::default()
    }
}

fn solve(k: &CsrMatrix, m: &CsrMatrix, prm: &JdParams) -> Solution {
    jdmg::Solver::new(k, prm)
        .mass(m)
        .run()
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn fem1d_smallest() {
    let (k, m, ex) = pair("fem1d:200");
    let sol = solve(&k, &m, &params(5));
    assert_ghep(&k, &m, &sol, &ex[..5], "fem1d:200");
}

#[test]
fn fem2d_smallest_with_double_eigenvalues() {
    // λ₂ = λ₃ (and λ₅ = λ₆) on the square.
    let (k, m, ex) = pair("fem2d:30");
    assert!((ex[1] - ex[2]).abs() < 1e-9 * ex[1]);
    let sol = solve(&k, &m, &params(6));
    assert_ghep(&k, &m, &sol, &ex[..6], "fem2d:30");
}

#[test]
fn fem3d_smallest_with_a_triple_eigenvalue() {
    let (k, m, ex) = pair("fem3d:12");
    assert!((ex[1] - ex[3]).abs() < 1e-9 * ex[1]);
    let sol = solve(&k, &m, &params(4));
    assert_ghep(&k, &m, &sol, &ex[..4], "fem3d:12");
}

/// Each correction method on a 2-D pair with a double eigenvalue: BiCGSTAB,
/// JDQMR (block JDQMR's choice runs one equation at a time with M), GD+k
/// (maxits 0), and the default (dynamic GD+k/JDQMR), with ILU(0) of K, Jacobi
/// diag(K) − θ·diag(M) and no preconditioner; 1 and 2 threads.
#[test]
fn every_inner_solver_and_preconditioner() {
    let (k, m, ex) = pair("fem2d:24");
    for (inner, maxits) in [
        (InnerSolver::Bicgstab, None),
        (InnerSolver::Qmrs, None),
        (InnerSolver::Auto, Some(0)),
        (InnerSolver::Auto, None),
    ] {
        for pc in [
            PrecondChoice::Ilu0,
            PrecondChoice::Jacobi,
            PrecondChoice::None,
        ] {
            for threads in [1, 2] {
                let prm = JdParams {
                    correction: CorrectionSettings {
                        solver: inner,
                        maxits,
                        ..params(5).correction
                    },
                    preconditioner: PrecondSettings {
                        kind: pc,
                        ..params(5).preconditioner
                    },
                    execution: ExecutionSettings {
                        threads,
                        max_matvecs: Some(200_000),
                        ..params(5).execution
                    },
                    ..params(5)
                };
                let sol = solve(&k, &m, &prm);
                let what = format!("{inner:?} maxits {maxits:?} {pc:?} threads {threads}");
                assert_ghep(&k, &m, &sol, &ex[..5], &what);
                if maxits == Some(0) {
                    assert_eq!(sol.stats.inner_steps, 0, "{what}");
                }
            }
        }
    }
}

#[test]
fn largest_eigenvalues() {
    let (k, m, ex) = pair("fem2d:12");
    let top: Vec<f64> = ex.iter().rev().take(4).copied().collect();
    let prm = JdParams {
        problem: ProblemSettings {
            target: Target::Largest,
            ..params(4).problem
        },
        preconditioner: PrecondSettings {
            kind: PrecondChoice::None,
            ..params(4).preconditioner
        },
        ..params(4)
    };
    let sol = solve(&k, &m, &prm);
    assert_ghep(&k, &m, &sol, &top, "fem2d:12 largest");
}

/// Fine grain on 2 ranks (K and M partitioned alike): the same eigenvalues,
/// M-orthonormal gathered vectors.
#[test]
fn fine_grain_on_two_ranks() {
    let (k, m, ex) = pair("fem3d:10");
    let prm = params(4);
    let out = ThreadComm::run(2, |comm| {
        let r = jdmg::Solver::new(&k, &prm).mass(&m).comm(&comm).run();
        jdmg::gather_eigenvectors(&comm, k.nrows(), r).unwrap_or_else(|e| panic!("{e}"))
    });
    for (r, sol) in out.iter().enumerate() {
        assert_ghep(&k, &m, sol, &ex[..4], &format!("rank {r}"));
    }
}

/// lund_a/lund_b (Harwell-Boeing LUND, 147 rows, ‖K‖ ≈ 2.2e8, cond(M) ≈ 3e4)
/// against the dense generalized eigensolver (LAPACK dsygvd through
/// scipy.linalg.eigh(A, B)), smallest and largest.
#[testenv::matrix_test]
fn lund_against_dense_lapack() {
    let (k, m) = common::lund_pair();
    let smallest = [
        208.23664951572565,
        574.2561377081882,
        1399.1279219419757,
        1790.6882009045573,
        2263.515624893198,
    ];
    let largest = [
        2204623.635108604,
        1328524.8238092097,
        657507.917831911,
        416860.9287369802,
        373135.76651747024,
    ];
    for (target, refs) in [(Target::Smallest, &smallest), (Target::Largest, &largest)] {
        for inner in [InnerSolver::Auto, InnerSolver::Bicgstab] {
            let prm = JdParams {
                problem: ProblemSettings {
                    target,
                    tol: 1e-12,
                    ..params(5).problem
                },
                correction: CorrectionSettings {
                    solver: inner,
                    ..params(5).correction
                },
                ..params(5)
            };
            let sol = solve(&k, &m, &prm);
            let what = format!("lund {target:?} {inner:?}");
            for (j, (&l, &e)) in sol.eigenvalues.iter().zip(refs.iter()).enumerate() {
                assert!(
                    (l - e).abs() <= 1e-8 * e.abs(),
                    "{what}: eigenvalue {j}: {l} against {e}"
                );
            }
            let (back, orth) = ghep_errors(&k, &m, &sol);
            assert!(
                back.iter().all(|&b| b <= 1e-10),
                "{what}: backward errors {back:?}"
            );
            assert!(orth <= 1e-9, "{what}: ‖XᵀMX − I‖ = {orth:e}");
        }
    }
}

/// Deflation against the first two eigenvectors: the next eigenpairs, and the
/// results M-orthogonal to the deflation vectors.
#[test]
fn deflation_is_m_orthogonal() {
    let (k, m, ex) = pair("fem1d:150");
    let first = solve(&k, &m, &params(2));
    let spaces = Spaces {
        deflation: &first.eigenvectors,
        ..Spaces::default()
    };
    let sol = jdmg::Solver::new(&k, &params(3))
        .mass(&m)
        .spaces(spaces)
        .run()
        .unwrap();
    assert_ghep(&k, &m, &sol, &ex[2..5], "deflated");
    let n = k.nrows();
    let mut my = vec![0.0; n];
    for i in 0..2 {
        m.mul_vec(first.eigenvector(i), &mut my);
        for j in 0..3 {
            let d: f64 = my.iter().zip(sol.eigenvector(j)).map(|(a, b)| a * b).sum();
            assert!(d.abs() < 1e-9, "yᵀMx = {d:e}");
        }
    }
}

/// Through the library's `Problem::with_mass` (any operator).
#[test]
fn problem_with_mass_operator() {
    let (k, m, ex) = pair("fem2d:16");
    let kop = CsrOperator::new(&k, 1).unwrap();
    let mop = CsrOperator::new(&m, 1).unwrap();
    let comm = SelfComm::new();
    let pb = Problem::new(&kop, &comm).unwrap().with_mass(&mop).unwrap();
    let prm = JdParams {
        preconditioner: PrecondSettings {
            kind: PrecondChoice::None,
            ..params(4).preconditioner
        },
        ..params(4)
    };
    let sol = jdmg::solve(&pb, &prm, None).unwrap();
    assert_ghep(&k, &m, &sol, &ex[..4], "Problem::with_mass");
}

/// An M that is not positive definite is refused with its typed error: a
/// negative diagonal entry (explicit M), and an indefinite M with a positive
/// diagonal met through xᵀMx ≤ 0 (matrix-free).
#[test]
fn mass_not_positive_definite_is_refused() {
    let (k, m, _) = pair("fem1d:50");
    let n = k.nrows();
    let mut t: Vec<(usize, usize, f64)> = (0..n).map(|i| (i, i, 1.0)).collect();
    t[7].2 = -1.0;
    let bad = CsrMatrix::from_triplets(n, n, &t).unwrap();
    let e = jdmg::Solver::new(&k, &params(2))
        .mass(&bad)
        .run()
        .unwrap_err();
    assert!(matches!(e, JdError::MassNotPositiveDefinite { .. }), "{e}");
    // M = I − 1.5·e eᵀ/n: diagonal 1 − 1.5/n > 0, eigenvalue −0.5 along e.
    struct Indefinite(usize);
    impl Operator for Indefinite {
        fn nrows(&self) -> usize {
            self.0
        }
        fn apply_block(&self, x: &[f64], y: &mut [f64], k: usize) {
            let n = self.0;
            for j in 0..k {
                let (xj, yj) = (&x[j * n..(j + 1) * n], &mut y[j * n..(j + 1) * n]);
                let s: f64 = xj.iter().sum::<f64>() * 1.5 / n as f64;
                yj.iter_mut().zip(xj).for_each(|(y, x)| *y = x - s);
            }
        }
    }
    let kop = CsrOperator::new(&k, 1).unwrap();
    let mop = Indefinite(n);
    let comm = SelfComm::new();
    let ones = vec![1.0; n];
    // A start vector along e: xᵀMx < 0 at once.
    let pb = Problem::new(&kop, &comm)
        .unwrap()
        .with_mass(&mop)
        .unwrap()
        .with_initial(&ones)
        .unwrap();
    let e = jdmg::solve(&pb, &params(2), None).unwrap_err();
    assert!(matches!(e, JdError::MassNotPositiveDefinite { .. }), "{e}");
    let _ = m;
}

/// K and M of different sizes, or an M that is not symmetric: InvalidParams.
#[test]
fn mismatched_or_unsymmetric_mass_is_refused() {
    let (k, _, _) = pair("fem1d:20");
    let (_, m2, _) = pair("fem1d:21");
    let e = jdmg::Solver::new(&k, &params(2))
        .mass(&m2)
        .run()
        .unwrap_err();
    assert!(
        matches!(e, JdError::InvalidParams { field: "mass", .. }),
        "{e}"
    );
    let n = k.nrows();
    let mut t: Vec<(usize, usize, f64)> = (0..n).map(|i| (i, i, 1.0)).collect();
    t.push((0, 1, 0.5));
    let unsym = CsrMatrix::from_triplets(n, n, &t).unwrap();
    let e = jdmg::Solver::new(&k, &params(2))
        .mass(&unsym)
        .run()
        .unwrap_err();
    assert!(
        matches!(e, JdError::InvalidParams { field: "mass", .. }),
        "{e}"
    );
}

/// Takes a checkpoint at outer iteration `at` and stops.
struct StopAt {
    at: usize,
    taken: Option<Checkpoint>,
}

impl CheckpointSink for StopAt {
    fn poll(&mut self, stats: &Stats) -> CheckpointRequest {
        if stats.outer_iterations == self.at {
            CheckpointRequest::SaveAndStop
        } else {
            CheckpointRequest::Continue
        }
    }
    fn save(&mut self, ck: &Checkpoint, _last: bool) {
        self.taken = Some(ck.clone());
    }
}

/// A checkpoint of a generalized solve records M; the resume (through the
/// file format) reaches the same eigenvalues, and a resume without M, or
/// with another M, is refused.
#[test]
fn checkpoint_resume_with_mass() {
    let (k, m, ex) = pair("fem2d:20");
    let prm = params(4);
    let mut sink = StopAt { at: 4, taken: None };
    let ck = Checkpointing {
        resume: None,
        sink: Some(&mut sink),
    };
    let e = jdmg::Solver::new(&k, &prm)
        .mass(&m)
        .checkpointing(ck)
        .run()
        .unwrap();
    assert_eq!(e.outcome, jdmg::Outcome::Stopped);
    let taken = sink.taken.expect("a checkpoint");
    assert!(taken.mass_fingerprint.is_some());
    let taken = Checkpoint::from_bytes(&taken.to_bytes()).unwrap();
    assert!(taken.mass_fingerprint.is_some());
    let resume = Checkpointing {
        resume: Some(&taken),
        sink: None,
    };
    let sol = jdmg::Solver::new(&k, &prm)
        .mass(&m)
        .checkpointing(resume)
        .run()
        .unwrap();
    assert_ghep(&k, &m, &sol, &ex[..4], "resumed");
    assert!(sol.stats.outer_iterations > 4);
    // Without M: refused.
    let resume = Checkpointing {
        resume: Some(&taken),
        sink: None,
    };
    let e = jdmg::Solver::new(&k, &prm)
        .checkpointing(resume)
        .run()
        .unwrap_err();
    assert!(matches!(e, JdError::Checkpoint(_)), "{e}");
    assert!(e.to_string().contains("mass matrix"), "{e}");
    // Another M (scaled): refused.
    let mut m2 = m.clone();
    m2.data_mut().iter_mut().for_each(|v| *v *= 2.0);
    let resume = Checkpointing {
        resume: Some(&taken),
        sink: None,
    };
    let e = jdmg::Solver::new(&k, &prm)
        .mass(&m2)
        .checkpointing(resume)
        .run()
        .unwrap_err();
    assert!(matches!(e, JdError::Checkpoint(_)), "{e}");
}

/// An interior target: the 3 eigenvalues closest to σ (ILU of K − σM, Jacobi
/// diag(K) − θ·diag(M)).
#[test]
fn closest_to_an_interior_shift() {
    let (k, m, ex) = pair("fem1d:120");
    let sigma = 0.5 * (ex[9] + ex[10]) + 0.1 * (ex[10] - ex[9]);
    let mut want: Vec<f64> = ex.clone();
    want.sort_by(|a, b| (a - sigma).abs().total_cmp(&(b - sigma).abs()));
    want.truncate(3);
    for pc in [PrecondChoice::Ilu0, PrecondChoice::Jacobi] {
        let prm = JdParams {
            problem: ProblemSettings {
                target: Target::Closest(sigma),
                ..params(3).problem
            },
            preconditioner: PrecondSettings {
                kind: pc,
                ..params(3).preconditioner
            },
            execution: ExecutionSettings {
                max_matvecs: Some(200_000),
                ..params(3).execution
            },
            ..params(3)
        };
        let sol = solve(&k, &m, &prm);
        assert_ghep(&k, &m, &sol, &want, &format!("closest {pc:?}"));
    }
}

/// A budget that runs out: the partial solution's estimates carry their true
/// residuals ‖Kx − θMx‖/‖x‖ (from K·V and M·V, recomputed here).
#[test]
fn partial_results_carry_true_residuals() {
    let (k, m, _) = pair("fem2d:30");
    let prm = JdParams {
        preconditioner: PrecondSettings {
            kind: PrecondChoice::None,
            ..params(4).preconditioner
        },
        execution: ExecutionSettings {
            max_matvecs: Some(60),
            ..params(4).execution
        },
        ..params(4)
    };
    let partial = jdmg::Solver::new(&k, &prm).mass(&m).run().unwrap();
    assert_eq!(partial.outcome, jdmg::Outcome::BudgetSpent);
    let n = k.nrows();
    let (mut kx, mut mx) = (vec![0.0; n], vec![0.0; n]);
    for j in 0..partial.eigenvalues.len() {
        let x = partial.eigenvector(j);
        k.mul_vec(x, &mut kx);
        m.mul_vec(x, &mut mx);
        let lam = partial.eigenvalues[j];
        let r = kx
            .iter()
            .zip(&mx)
            .map(|(a, b)| (a - lam * b).powi(2))
            .sum::<f64>()
            .sqrt()
            / x.iter().map(|v| v * v).sum::<f64>().sqrt();
        let rep = partial.residual_norms[j];
        assert!(
            (r - rep).abs() <= 1e-6 * r.max(1e-12) + 1e-10,
            "estimate {j}: reported {rep:e}, true {r:e}"
        );
    }
}

/// M scaled by 10^±100 to 10^±300: the eigenvalues scale by the inverse, the
/// vectors stay M-orthonormal, and a positive definite M is never refused.
#[test]
fn mass_matrix_at_extreme_scales() {
    let (k, m, ex) = pair("fem2d:8");
    for scale in [1e-300, 1e-200, 1e-100, 1e100, 1e200, 1e300] {
        let mut ms = m.clone();
        ms.data_mut().iter_mut().for_each(|v| *v *= scale);
        let sol = jdmg::Solver::new(&k, &params(3))
            .mass(&ms)
            .run()
            .unwrap_or_else(|e| panic!("M × {scale:e}: {e}"));
        let want: Vec<f64> = ex[..3].iter().map(|l| l / scale).collect();
        assert_ghep(&k, &ms, &sol, &want, &format!("M × {scale:e}"));
        // Shift-and-invert at σ = 30 in the original units: the 3 closest.
        let p = params(3);
        let sol = jdmg::Solver::new(&k, &p)
            .mass(&ms)
            .shift_invert(30.0 / scale)
            .run()
            .unwrap_or_else(|e| panic!("M × {scale:e}, shift-and-invert: {e}"));
        let mut near: Vec<f64> = ex.clone();
        near.sort_by(|a, b| (a - 30.0).abs().total_cmp(&(b - 30.0).abs()));
        let mut got: Vec<f64> = sol.eigenvalues.iter().map(|l| l * scale).collect();
        got.sort_by(f64::total_cmp);
        near.truncate(3);
        near.sort_by(f64::total_cmp);
        for (g, w) in got.iter().zip(&near) {
            assert!(
                (g - w).abs() <= 1e-8 * w,
                "M × {scale:e}, shift-and-invert: {got:?} vs {near:?}"
            );
        }
        let (_, orth) = ghep_errors(&k, &ms, &sol);
        assert!(
            orth <= 1e-10,
            "M × {scale:e}, shift-and-invert: ‖XᵀMX − I‖ = {orth:e}"
        );
    }
}
