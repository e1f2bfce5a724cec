//! A complex sparse matrix as an [`Operator<c64>`]: the product of a
//! [`ComplexCsr`] with blocks of complex vectors, for complex Hermitian
//! problems solved in complex arithmetic.

use faer::c64;
use matrices::ComplexCsr;

use crate::operator::Operator;

/// `y = A x` with a complex CSR matrix on this process's rows (serial; no
/// halo). Does not allocate.
#[derive(Debug, Clone, Copy)]
pub struct ComplexCsrOperator<'a> {
    a: &'a ComplexCsr,
}

impl<'a> ComplexCsrOperator<'a> {
    /// The operator of the square matrix `a`.
    ///
    /// # Panics
    /// When `a` is not square (a programming error: the readers and
    /// generators give square matrices for eigenproblems).
    pub fn new(a: &'a ComplexCsr) -> Self {
        assert_eq!(a.nrows(), a.ncols(), "ComplexCsrOperator: not square");
        Self { a }
    }
}

impl Operator<c64> for ComplexCsrOperator<'_> {
    fn nrows(&self) -> usize {
        self.a.nrows()
    }

    fn apply_block(&self, x: &[c64], y: &mut [c64], k: usize) {
        let n = self.a.nrows();
        for (xj, yj) in x.chunks_exact(n).zip(y.chunks_exact_mut(n)).take(k) {
            self.a.mul_vec(xj, yj);
        }
    }

    /// A value is two words, an index half of one: 2.5 per stored entry,
    /// and 4 per row (x and y).
    fn work_per_vector(&self) -> f64 {
        2.5 * self.a.nnz() as f64 + 4.0 * self.a.nrows() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::{dot, Scalar};
    use crate::CsrOperator;
    use matrices::complex::{deinterleave, interleave};
    use matrices::MagSpec;

    /// A block of two complex vectors times the magnetic Laplacian equals
    /// the real embedding's product on the interleaved vectors, and
    /// ⟨x, Ax⟩ is real (A is Hermitian).
    #[test]
    fn complex_product_matches_the_real_embedding() {
        let a: MagSpec = "maglap2d:7x5:0.23".parse().unwrap();
        let a = a.build().unwrap();
        let n = a.nrows();
        let x: Vec<c64> = (0..2 * n)
            .map(|i| c64::new((i as f64 * 0.37).sin(), (i as f64 * 0.11).cos()))
            .collect();
        let mut y = vec![c64::default(); 2 * n];
        let op = ComplexCsrOperator::new(&a);
        op.apply_block(&x, &mut y, 2);
        let emb = a.real_embedding().unwrap();
        let eop = CsrOperator::new(&emb, 1).unwrap();
        for j in 0..2 {
            let xe = interleave(&x[j * n..(j + 1) * n]);
            let mut ye = vec![0.0; 2 * n];
            eop.apply(&xe, &mut ye);
            let want = deinterleave(&ye);
            let err = y[j * n..(j + 1) * n]
                .iter()
                .zip(&want)
                .map(|(u, v)| (*u - *v).abs2())
                .fold(0.0f64, f64::max);
            assert!(err < 1e-26, "column {j}: {err:e}");
            let q = dot(&x[j * n..(j + 1) * n], &y[j * n..(j + 1) * n]);
            assert!(q.im.abs() < 1e-12 * q.re.abs(), "xᴴAx = {q}");
            assert!(q.re > 0.0, "H is positive definite: {q}");
        }
        assert_eq!(Scalar::conj(c64::new(1.0, 2.0)), c64::new(1.0, -2.0));
        assert_eq!(c64::new(3.0, 4.0).abs2(), 25.0);
        assert!(op.work_per_vector() > 0.0);
    }
}
