//! Checks of what a solve returned, recomputed from the eigenvectors (never the
//! solver's own report): true residuals ‖Ax − λx‖ and orthonormality ‖XᵀX − I‖.
#![allow(dead_code)]

use jdmg::Solution;
use matrices::generate::{fem_pair, generalized_eigenvalues, GenSpec};
use matrices::CsrMatrix;

/// Largest true residual norm ‖A x_j − λ_j x_j‖ of the returned pairs.
pub fn true_residuals(a: &CsrMatrix, sol: &Solution) -> Vec<f64> {
    let n = a.nrows();
    let mut ax = vec![0.0; n];
    (0..sol.eigenvalues.len())
        .map(|j| {
            let x = sol.eigenvector(j);
            a.mul_vec(x, &mut ax);
            let lam = sol.eigenvalues[j];
            ax.iter()
                .zip(x)
                .map(|(y, x)| (y - lam * x).powi(2))
                .sum::<f64>()
                .sqrt()
        })
        .collect()
}

/// |xᵢᵀxⱼ − δᵢⱼ| for the returned eigenvectors i and j.
fn gram_error(sol: &Solution, i: usize, j: usize) -> f64 {
    let d: f64 = sol
        .eigenvector(i)
        .iter()
        .zip(sol.eigenvector(j))
        .map(|(a, b)| a * b)
        .sum();
    (d - if i == j { 1.0 } else { 0.0 }).abs()
}

/// max |XᵀX − I| over the returned eigenvectors.
pub fn orthonormality_error(sol: &Solution) -> f64 {
    let p = sol.eigenvalues.len();
    let mut worst = 0.0f64;
    for i in 0..p {
        for j in 0..=i {
            worst = worst.max(gram_error(sol, i, j));
        }
    }
    worst
}

/// Asserts that every returned pair has a true residual ≤ `bound`; returns them.
fn assert_residuals(a: &CsrMatrix, sol: &Solution, bound: f64) -> Vec<f64> {
    let r = true_residuals(a, sol);
    for (j, rj) in r.iter().enumerate() {
        assert!(
            *rj <= bound,
            "pair {j}: true residual ‖Ax − λx‖ = {rj:e} > {bound:e} (reported {:e})",
            sol.residual_norms[j]
        );
    }
    r
}

/// Asserts that every returned pair has a true residual ≤ `bound` and that the
/// eigenvectors are orthonormal to 1e-10 (three copies of one vector would fail).
pub fn assert_pairs(a: &CsrMatrix, sol: &Solution, bound: f64) {
    assert_residuals(a, sol, bound);
    let o = orthonormality_error(sol);
    assert!(o <= 1e-10, "‖XᵀX − I‖ = {o:e}");
}

/// [`assert_pairs`] for the pairs of an interval solve, whose slices are solved
/// apart: eigenvectors of one eigenvalue orthonormal to 1e-10, those of distinct
/// eigenvalues to 1e-10 + (rᵢ + rⱼ)/|λᵢ − λⱼ| (true residuals), the bound of
/// separate solves, which is what slices further apart than neighbours are held
/// to (`jdmg::slicing`). Three copies of one vector still fail: copies share
/// their eigenvalue.
pub fn assert_sliced_pairs(a: &CsrMatrix, sol: &Solution, bound: f64) {
    let r = assert_residuals(a, sol, bound);
    let lam = &sol.eigenvalues;
    for i in 0..lam.len() {
        for j in 0..=i {
            let gap = (lam[i] - lam[j]).abs();
            let allowed = if i == j || gap == 0.0 {
                1e-10
            } else {
                1e-10 + (r[i] + r[j]) / gap
            };
            let err = gram_error(sol, i, j);
            assert!(
                err <= allowed,
                "x{i}ᵀx{j} off by {err:e} > {allowed:e} (λ {} and {})",
                lam[i],
                lam[j]
            );
        }
    }
}

/// A = Q diag(values·scale) Qᵀ (row-major, n = values.len()) with Q the product of
/// the Givens rotations `(i, j, angle)`, made exactly symmetric: a matrix with a
/// planted spectrum (multiplicities and clusters as the values say).
pub fn planted(values: &[f64], scale: f64, rotations: &[(usize, usize, f64)]) -> Vec<f64> {
    let n = values.len();
    let mut a = vec![0.0; n * n];
    for (i, v) in values.iter().enumerate() {
        a[i * n + i] = v * scale;
    }
    for &(i, j, t) in rotations {
        let (c, s) = (t.cos(), t.sin());
        // rows i, j, then columns i, j: G A Gᵀ
        for k in 0..n {
            let (x, y) = (a[i * n + k], a[j * n + k]);
            a[i * n + k] = c * x - s * y;
            a[j * n + k] = s * x + c * y;
        }
        for k in 0..n {
            let (x, y) = (a[k * n + i], a[k * n + j]);
            a[k * n + i] = c * x - s * y;
            a[k * n + j] = s * x + c * y;
        }
    }
    for i in 0..n {
        for j in 0..i {
            let m = 0.5 * (a[i * n + j] + a[j * n + i]);
            a[i * n + j] = m;
            a[j * n + i] = m;
        }
    }
    a
}

/// A FEM stiffness/mass pair from its generator spec and its exact generalized
/// eigenvalues.
pub fn fem_pair_exact(spec: &str) -> (CsrMatrix, CsrMatrix, Vec<f64>) {
    let s: GenSpec = spec.parse().unwrap();
    let (k, m) = fem_pair(&s).unwrap();
    (k, m, generalized_eigenvalues(&s).unwrap())
}

/// lund_a and lund_b (K and M of the Harwell-Boeing LUND pencil) from the shared
/// matrices, for a `#[testenv::matrix_test]`.
pub fn lund_pair() -> (CsrMatrix, CsrMatrix) {
    let dir = matrices::shared::test_dir();
    let read = |name: &str| {
        matrices::mm::read_matrix_market(dir.join(format!("{name}.mtx")))
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .matrix
    };
    (read("lund_a"), read("lund_b"))
}

/// The eigenvalues of lap3d:n (the 7-point Laplacian on an n³ grid,
/// Dirichlet): Σ_d 2 − 2cos(i_d π/(n+1)), all of them, ascending.
pub fn lap3d_spectrum(n: usize) -> Vec<f64> {
    let h = std::f64::consts::PI / (n + 1) as f64;
    let c: Vec<f64> = (1..=n).map(|i| 2.0 - 2.0 * (h * i as f64).cos()).collect();
    let mut all = Vec::with_capacity(n * n * n);
    for a in &c {
        for b in &c {
            for d in &c {
                all.push(a + b + d);
            }
        }
    }
    all.sort_by(f64::total_cmp);
    all
}

/// ‖A‖₁ (a bound of ‖A‖₂ for a symmetric A).
pub fn norm1(a: &CsrMatrix) -> f64 {
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
pub fn ghep_errors(k: &CsrMatrix, m: &CsrMatrix, sol: &Solution) -> (Vec<f64>, f64) {
    let (kn, mn) = (norm1(k), norm1(m));
    ghep_residuals(k, m, sol, |lam| kn + lam.abs() * mn)
}

/// ‖Kx − λMx‖/(scale(λ)·‖x‖) of the returned pairs and max |XᵀMX − I|, from the
/// returned vectors.
pub fn ghep_residuals(
    k: &CsrMatrix,
    m: &CsrMatrix,
    sol: &Solution,
    scale: impl Fn(f64) -> f64,
) -> (Vec<f64>, f64) {
    let n = k.nrows();
    let p = sol.eigenvalues.len();
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
        back.push(r / (scale(lam) * xn));
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
