//! Generalized symmetric-definite problems K x = λ M x (issue #23, item 1):
//! FEM pairs against their closed-form spectra (1-D to 3-D, multiple
//! eigenvalues included), lund_a/lund_b against a dense generalized
//! eigensolver, on 1 and 2 threads (fine grain), with each inner solver, a
//! checkpoint resume, and an M that is not positive definite. Everything is
//! checked on what comes back: ‖Kx − λMx‖ and ‖XᵀMX − I‖ recomputed from the
//! returned vectors.

use jdmg::checkpoint::{Checkpoint, CheckpointRequest, CheckpointSink, Checkpointing};
use jdmg::prelude::*;
use jdmg::{solve_distributed_generalized, solve_matrix_generalized};
use matrices::generate::{fem_pair, generalized_eigenvalues, GenSpec};
use precond::CsrOperator;

fn pair(spec: &str) -> (CsrMatrix, CsrMatrix, Vec<f64>) {
    let s: GenSpec = spec.parse().unwrap();
    let (k, m) = fem_pair(&s).unwrap();
    (k, m, generalized_eigenvalues(&s).unwrap())
}

/// ‖A‖₁ (a bound of ‖A‖₂ for a symmetric A).
fn norm1(a: &CsrMatrix) -> f64 {
    let mut col = vec![0.0f64; a.ncols()];
    for i in 0..a.nrows() {
        let (c, v) = a.row(i);
        for (&j, &x) in c.iter().zip(v) {
            col[j as usize] += x.abs();
        }
    }
    col.into_iter().fold(0.0, f64::max)
}

/// Backward errors ‖Kx − λMx‖/((‖K‖ + |λ|‖M‖)‖x‖) of the returned pairs and
/// max |XᵀMX − I|, from the returned vectors.
fn ghep_errors(k: &CsrMatrix, m: &CsrMatrix, sol: &Solution) -> (Vec<f64>, f64) {
    let n = k.nrows();
    let p = sol.eigenvalues.len();
    let (kn, mn) = (norm1(k), norm1(m));
    let mut kx = vec![0.0; n];
    let mut mx = vec![0.0; n * p];
    let mut back = Vec::new();
    for j in 0..p {
        let x = sol.eigenvector(j);
        k.mul_vec(x, &mut kx);
        m.mul_vec(x, &mut mx[j * n..(j + 1) * n]);
        let lam = sol.eigenvalues[j];
        let r: f64 = kx
            .iter()
            .zip(&mx[j * n..(j + 1) * n])
            .map(|(a, b)| (a - lam * b).powi(2))
            .sum::<f64>()
            .sqrt();
        let xn = x.iter().map(|v| v * v).sum::<f64>().sqrt();
        back.push(r / ((kn + lam.abs() * mn) * xn));
    }
    let mut worst = 0.0f64;
    for i in 0..p {
        for j in 0..p {
            let d: f64 = sol
                .eigenvector(i)
                .iter()
                .zip(&mx[j * n..(j + 1) * n])
                .map(|(a, b)| a * b)
                .sum();
            worst = worst.max((d - if i == j { 1.0 } else { 0.0 }).abs());
        }
    }
    (back, worst)
}

/// The returned pairs are the `nev` wanted ones of `exact` (ascending, or
/// descending for `Largest`), whole multiplets included, with small backward
/// errors and M-orthonormal vectors.
fn assert_ghep(k: &CsrMatrix, m: &CsrMatrix, sol: &Solution, exact: &[f64], what: &str) {
    let nev = sol.eigenvalues.len();
    assert!(sol.converged.iter().all(|&c| c), "{what}: not all converged");
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
        nev,
        tol: 1e-11,
        ..JdParams::default()
    }
}

fn solve(k: &CsrMatrix, m: &CsrMatrix, prm: &JdParams) -> Solution {
    solve_matrix_generalized(k, m, prm, None, Checkpointing::default(), Spaces::default())
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
