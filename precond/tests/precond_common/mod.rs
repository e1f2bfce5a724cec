//! Shared helpers of the `krylov_*` / `precond_*` integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

use matrices::CsrMatrix;
use precond::Operator;

/// Test-only operator: serial `CsrMatrix::mul_vec` per vector.
pub struct CsrOp<'a>(pub &'a CsrMatrix);

impl Operator for CsrOp<'_> {
    fn nrows(&self) -> usize {
        self.0.nrows()
    }
    fn apply_block(&self, x: &[f64], y: &mut [f64], k: usize) {
        let n = self.0.nrows();
        for j in 0..k {
            self.0
                .mul_vec(&x[j * n..(j + 1) * n], &mut y[j * n..(j + 1) * n]);
        }
    }
}

/// 3D 7-point Dirichlet Laplacian on a `g x g x g` grid (6 on the diagonal, -1 off),
/// from `matrices::generate` (`lap3d:g`).
pub fn laplace3d(g: usize) -> CsrMatrix {
    let spec: matrices::generate::GenSpec = format!("lap3d:{g}").parse().unwrap();
    matrices::generate::generate(&spec).unwrap()
}

/// The shared matrix directory, for a `#[testenv::matrix_test]`
/// ([`matrices::shared::test_dir`]: panics when it is missing).
pub fn shared_dir() -> PathBuf {
    matrices::shared::test_dir()
}

/// Reads a shared MatrixMarket matrix with `matrices::mm` (symmetric storage expanded).
pub fn read_shared(dir: &std::path::Path, name: &str) -> CsrMatrix {
    let path = dir.join(format!("{name}.mtx"));
    matrices::mm::read_matrix_market(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .matrix
}

/// `‖b − A x‖ / ‖b‖`.
pub fn rel_residual(a: &CsrMatrix, x: &[f64], b: &[f64]) -> f64 {
    let mut ax = vec![0.0; b.len()];
    a.mul_vec(x, &mut ax);
    let r: f64 = ax
        .iter()
        .zip(b)
        .map(|(p, q)| (q - p) * (q - p))
        .sum::<f64>()
        .sqrt();
    r / b.iter().map(|v| v * v).sum::<f64>().sqrt()
}

/// `b = A · ones`.
pub fn rhs_ones(a: &CsrMatrix) -> Vec<f64> {
    let mut b = vec![0.0; a.nrows()];
    a.mul_vec(&vec![1.0; a.ncols()], &mut b);
    b
}
