//! Matrices from the Rust ecosystem accepted directly: [`crate::solve_matrix`]
//! takes a `matrices::CsrMatrix`, a `sprs::CsMat<f64>` (CSR or CSC) or a faer
//! sparse matrix (`SparseRowMatRef` / `SparseColMatRef` with `usize` indices).

use std::borrow::Cow;

use faer::sparse::{SparseColMatRef, SparseRowMatRef};
use matrices::CsrMatrix;

use crate::error::JdError;

/// A sparse matrix the solver can take: converted to (or borrowed as) CSR.
pub trait AsCsr {
    /// This matrix in CSR form.
    ///
    /// # Errors
    /// `InvalidParams` when the conversion fails (dimension over u32, bad indices).
    fn as_csr(&self) -> Result<Cow<'_, CsrMatrix>, JdError>;
}

fn from_triplets(n: usize, m: usize, t: &[(usize, usize, f64)]) -> Result<CsrMatrix, JdError> {
    CsrMatrix::from_triplets(n, m, t).map_err(|e| JdError::invalid("matrix", e))
}

impl AsCsr for CsrMatrix {
    fn as_csr(&self) -> Result<Cow<'_, CsrMatrix>, JdError> {
        Ok(Cow::Borrowed(self))
    }
}

impl AsCsr for sprs::CsMat<f64> {
    fn as_csr(&self) -> Result<Cow<'_, CsrMatrix>, JdError> {
        let t: Vec<(usize, usize, f64)> = self.iter().map(|(&v, (i, j))| (i, j, v)).collect();
        from_triplets(self.rows(), self.cols(), &t).map(Cow::Owned)
    }
}

impl AsCsr for SparseRowMatRef<'_, usize, f64> {
    fn as_csr(&self) -> Result<Cow<'_, CsrMatrix>, JdError> {
        let mut t = Vec::new();
        for i in 0..self.nrows() {
            let cols = self.col_idx_of_row_raw(i);
            for (&j, &v) in cols.iter().zip(self.val_of_row(i)) {
                t.push((i, j, v));
            }
        }
        from_triplets(self.nrows(), self.ncols(), &t).map(Cow::Owned)
    }
}

impl AsCsr for SparseColMatRef<'_, usize, f64> {
    fn as_csr(&self) -> Result<Cow<'_, CsrMatrix>, JdError> {
        let mut t = Vec::new();
        for j in 0..self.ncols() {
            let rows = self.row_idx_of_col_raw(j);
            for (&i, &v) in rows.iter().zip(self.val_of_col(j)) {
                t.push((i, j, v));
            }
        }
        from_triplets(self.nrows(), self.ncols(), &t).map(Cow::Owned)
    }
}

impl<T: AsCsr + ?Sized> AsCsr for &T {
    fn as_csr(&self) -> Result<Cow<'_, CsrMatrix>, JdError> {
        (**self).as_csr()
    }
}
