//! Acceptance (issue 6): for every matrix with a dense-LAPACK reference in
//! ../shared/matrices/reference, the 5 smallest and 5 largest eigenvalues at tol 1e-12
//! (conv `norm`) lie within min(‖r‖, ‖r‖²/δ) + (8 + √n)·ε·‖A‖ of the reference (residual and
//! Kato-Temple bounds), matched in order so that no copy of a multiple eigenvalue is
//! missed.
#![allow(clippy::needless_range_loop)] // index-aligned comparisons with references

mod common;

use jdmg::{CorrectionSettings, ExecutionSettings, PrecondSettings, ProblemSettings};
use std::path::Path;

use jdmg::{solve_matrix, InnerSolver, JdParams, PrecondChoice, Target};
use matrices::mm::read_matrix_market;

/// (smallest ascending, largest ascending) from a reference file.
fn reference(dir: &Path, name: &str) -> (Vec<f64>, Vec<f64>) {
    let text = std::fs::read_to_string(dir.join("reference").join(format!("{name}.eig")))
        .unwrap_or_else(|e| panic!("reference for {name}: {e} (set JDMG_MATRICES)"));
    let v: Vec<f64> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())
        .map(|l| l.trim().parse().unwrap())
        .collect();
    let h = v.len() / 2;
    (v[..h].to_vec(), v[h..].to_vec())
}

fn check(name: &str, target: Target, precond: PrecondChoice) {
    check_with(name, target, precond, JdParams::default());
}

/// JDQMR inner solver (symmetric QMR, dynamic stopping) instead of BiCGSTAB.
fn check_qmrs(name: &str, target: Target, precond: PrecondChoice) {
    let base = JdParams {
        correction: CorrectionSettings {
            solver: InnerSolver::Qmrs,
            maxits: Some(100),
            ..Default::default()
        },
        ..JdParams::default()
    };
    check_with(name, target, precond, base);
}

fn check_with(name: &str, target: Target, precond: PrecondChoice, base: JdParams) {
    let dir = matrices::shared::test_dir();
    let a = read_matrix_market(dir.join(format!("{name}.mtx")))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .matrix;
    let (small, large) = reference(&dir, name);
    let all: Vec<f64> = small.iter().chain(&large).copied().collect();
    let anorm = all.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let (want, nev): (Vec<f64>, usize) = match target {
        Target::Smallest => (small.iter().take(5).copied().collect(), 5.min(a.nrows())),
        _ => (
            large.iter().rev().take(5).copied().collect(),
            5.min(a.nrows()),
        ),
    };
    let params = JdParams {
        problem: ProblemSettings {
            nev,
            tol: 1e-12,
            target,
            ..base.problem
        },
        preconditioner: PrecondSettings {
            kind: precond,
            ..base.preconditioner
        },
        execution: ExecutionSettings {
            max_matvecs: Some(400_000),
            ..base.execution
        },
        ..base
    };
    let sol = solve_matrix(&a, &params, None).unwrap_or_else(|e| panic!("{name} {target:?}: {e}"));
    assert_eq!(sol.eigenvalues.len(), nev);
    // The reference's own error (a few ε‖A‖) plus the rounding of our Rayleigh
    // quotient xᵀAx (a sum of n products: about √n ε‖A‖).
    let rounding = (8.0 + (a.nrows() as f64).sqrt()) * f64::EPSILON * anorm;
    // Small matrices list their whole spectrum in both halves of the file.
    let spectrum = if small.len() >= a.nrows() {
        small.clone()
    } else {
        all.clone()
    };
    for (j, (&lam, &r)) in sol.eigenvalues.iter().zip(&sol.residual_norms).enumerate() {
        let exact = want[j];
        // δ: distance to the nearest *other* reference eigenvalue (one copy of `exact`
        // is itself; further copies of a multiple eigenvalue give δ = 0, bound ‖r‖).
        let me = spectrum
            .iter()
            .position(|&o| o == exact)
            .expect("reference value");
        let delta = spectrum
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != me)
            .fold(f64::INFINITY, |d, (_, &o)| d.min((o - exact).abs()));
        let bound = r.min(r * r / delta) + rounding;
        assert!(
            (lam - exact).abs() <= bound,
            "{name} {target:?} #{j}: {lam} vs reference {exact}: |diff| {:.3e} > bound {bound:.3e} (‖r‖ {r:.3e}, δ {delta:.3e})",
            (lam - exact).abs()
        );
        assert!(
            r <= 1e-12 * sol.stats.anorm_estimate.max(anorm) * 1.0001,
            "{name} #{j}: residual {r:.3e}"
        );
    }
    // What the solver returned, not what it reported: true residuals (with the
    // rounding of one product, about √n·ε·‖A‖) and orthonormal vectors.
    common::assert_pairs(&a, &sol, 1e-12 * anorm * 1.0001 + rounding);
}

macro_rules! reference_tests {
    ($($test:ident: $name:literal, $small_pc:expr;)*) => {$(
        mod $test {
            use super::*;
            #[testenv::matrix_test]
            fn smallest() {
                check($name, Target::Smallest, $small_pc);
            }
            #[testenv::matrix_test]
            fn largest() {
                check($name, Target::Largest, PrecondChoice::None);
            }
            #[testenv::matrix_test]
            fn smallest_qmrs() {
                check_qmrs($name, Target::Smallest, $small_pc);
            }
            #[testenv::matrix_test]
            fn largest_qmrs() {
                check_qmrs($name, Target::Largest, PrecondChoice::None);
            }
        }
    )*};
}

reference_tests! {
    bus_1138: "1138_bus", PrecondChoice::None;
    bus_494: "494_bus", PrecondChoice::None;
    lf10: "LF10", PrecondChoice::None;
    lfat5: "LFAT5", PrecondChoice::None;
    bcsstk01: "bcsstk01", PrecondChoice::None;
    bcsstk02: "bcsstk02", PrecondChoice::None;
    bcsstk13: "bcsstk13", PrecondChoice::Jacobi;
    crystm01: "crystm01", PrecondChoice::None;
    gr_30_30: "gr_30_30", PrecondChoice::None;
    lund_a: "lund_a", PrecondChoice::None;
    lund_b: "lund_b", PrecondChoice::None;
    mesh1e1: "mesh1e1", PrecondChoice::None;
    nasa1824: "nasa1824", PrecondChoice::None;
    nos4: "nos4", PrecondChoice::None;
}
