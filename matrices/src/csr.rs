//! Compressed sparse row storage shared by every crate of the workspace.

use thiserror::Error;

/// Why a set of CSR arrays was rejected by [`CsrMatrix::new`].
#[derive(Debug, Clone, PartialEq, Error)]
pub enum CsrError {
    #[error("indptr has length {got}, expected nrows + 1 = {expected}")]
    IndptrLength { got: usize, expected: usize },
    #[error("indptr is not non-decreasing at row {row}")]
    IndptrNotMonotone { row: usize },
    #[error("indptr ends at {end} but there are {nnz} stored entries")]
    IndptrEnd { end: usize, nnz: usize },
    #[error("indices ({indices}) and data ({data}) lengths differ")]
    LengthMismatch { indices: usize, data: usize },
    #[error("row {row}: column index {col} out of range (ncols = {ncols})")]
    ColumnOutOfRange {
        row: usize,
        col: usize,
        ncols: usize,
    },
    #[error("row {row}: column indices not strictly increasing at column {col}")]
    UnsortedRow { row: usize, col: usize },
    #[error("dimension {0} exceeds the u32 column-index limit")]
    TooLarge(usize),
}

/// A real sparse matrix in CSR form.
///
/// Invariants (checked by [`CsrMatrix::new`]): `indptr.len() == nrows + 1`,
/// `indptr` non-decreasing from 0 to `nnz`, column indices of each row strictly
/// increasing (sorted, no duplicates) and `< ncols`. Column indices are `u32`
/// to halve index traffic in SpMV, so `ncols <= u32::MAX`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CsrMatrix {
    nrows: usize,
    ncols: usize,
    indptr: Vec<usize>,
    indices: Vec<u32>,
    data: Vec<f64>,
}

impl CsrMatrix {
    /// Builds a matrix from raw CSR arrays, validating every invariant.
    ///
    /// # Errors
    /// A [`CsrError`] naming the first violated invariant.
    pub fn new(
        nrows: usize,
        ncols: usize,
        indptr: Vec<usize>,
        indices: Vec<u32>,
        data: Vec<f64>,
    ) -> Result<Self, CsrError> {
        if ncols > u32::MAX as usize {
            return Err(CsrError::TooLarge(ncols));
        }
        if indptr.len() != nrows + 1 {
            return Err(CsrError::IndptrLength {
                got: indptr.len(),
                expected: nrows + 1,
            });
        }
        if indices.len() != data.len() {
            return Err(CsrError::LengthMismatch {
                indices: indices.len(),
                data: data.len(),
            });
        }
        if indptr[0] != 0 || indptr[nrows] != indices.len() {
            return Err(CsrError::IndptrEnd {
                end: indptr[nrows],
                nnz: indices.len(),
            });
        }
        for row in 0..nrows {
            let (lo, hi) = (indptr[row], indptr[row + 1]);
            if hi < lo || hi > indices.len() {
                return Err(CsrError::IndptrNotMonotone { row });
            }
            let cols = &indices[lo..hi];
            for (p, &c) in cols.iter().enumerate() {
                if c as usize >= ncols {
                    return Err(CsrError::ColumnOutOfRange {
                        row,
                        col: c as usize,
                        ncols,
                    });
                }
                if p > 0 && cols[p - 1] >= c {
                    return Err(CsrError::UnsortedRow {
                        row,
                        col: c as usize,
                    });
                }
            }
        }
        Ok(Self {
            nrows,
            ncols,
            indptr,
            indices,
            data,
        })
    }

    /// Builds a matrix without validation. The caller guarantees the invariants
    /// listed on [`CsrMatrix`]; violating them gives wrong results (never UB:
    /// every access is bounds-checked or validated elsewhere).
    pub fn from_parts_unchecked(
        nrows: usize,
        ncols: usize,
        indptr: Vec<usize>,
        indices: Vec<u32>,
        data: Vec<f64>,
    ) -> Self {
        debug_assert_eq!(indptr.len(), nrows + 1);
        debug_assert_eq!(indices.len(), data.len());
        Self {
            nrows,
            ncols,
            indptr,
            indices,
            data,
        }
    }

    /// Builds a matrix from (row, col, value) triplets; duplicates are summed.
    ///
    /// # Errors
    /// [`CsrError::ColumnOutOfRange`] if a triplet lies outside `nrows x ncols`.
    pub fn from_triplets(
        nrows: usize,
        ncols: usize,
        triplets: &[(usize, usize, f64)],
    ) -> Result<Self, CsrError> {
        if ncols > u32::MAX as usize {
            return Err(CsrError::TooLarge(ncols));
        }
        let mut counts = vec![0usize; nrows + 1];
        for &(r, c, _) in triplets {
            if r >= nrows || c >= ncols {
                return Err(CsrError::ColumnOutOfRange {
                    row: r,
                    col: c,
                    ncols,
                });
            }
            counts[r + 1] += 1;
        }
        for i in 0..nrows {
            counts[i + 1] += counts[i];
        }
        let mut next = counts.clone();
        let mut idx = vec![0u32; triplets.len()];
        let mut val = vec![0f64; triplets.len()];
        for &(r, c, v) in triplets {
            idx[next[r]] = c as u32;
            val[next[r]] = v;
            next[r] += 1;
        }
        Ok(Self::compress_rows(nrows, ncols, &counts, idx, val))
    }

    /// Sorts each row of raw row-grouped arrays by column and sums duplicates.
    pub(crate) fn compress_rows(
        nrows: usize,
        ncols: usize,
        rowptr: &[usize],
        mut idx: Vec<u32>,
        mut val: Vec<f64>,
    ) -> Self {
        let mut indptr = Vec::with_capacity(nrows + 1);
        indptr.push(0);
        let mut w = 0usize;
        let mut perm: Vec<(u32, f64)> = Vec::new();
        for r in 0..nrows {
            let (lo, hi) = (rowptr[r], rowptr[r + 1]);
            perm.clear();
            perm.extend(idx[lo..hi].iter().copied().zip(val[lo..hi].iter().copied()));
            if !perm.windows(2).all(|p| p[0].0 < p[1].0) {
                perm.sort_by_key(|p| p.0);
            }
            let row_start = w;
            for &(c, v) in &perm {
                if w > row_start && idx[w - 1] == c {
                    val[w - 1] += v;
                } else {
                    idx[w] = c;
                    val[w] = v;
                    w += 1;
                }
            }
            indptr.push(w);
        }
        idx.truncate(w);
        val.truncate(w);
        Self {
            nrows,
            ncols,
            indptr,
            indices: idx,
            data: val,
        }
    }

    /// An `n x n` identity matrix.
    pub fn identity(n: usize) -> Self {
        Self {
            nrows: n,
            ncols: n,
            indptr: (0..=n).collect(),
            indices: (0..n as u32).collect(),
            data: vec![1.0; n],
        }
    }

    pub fn nrows(&self) -> usize {
        self.nrows
    }
    pub fn ncols(&self) -> usize {
        self.ncols
    }
    /// Number of stored entries.
    pub fn nnz(&self) -> usize {
        self.data.len()
    }
    pub fn indptr(&self) -> &[usize] {
        &self.indptr
    }
    pub fn indices(&self) -> &[u32] {
        &self.indices
    }
    pub fn data(&self) -> &[f64] {
        &self.data
    }
    /// Mutable values (the sparsity pattern stays fixed).
    pub fn data_mut(&mut self) -> &mut [f64] {
        &mut self.data
    }
    /// Column indices and values of row `i`.
    pub fn row(&self, i: usize) -> (&[u32], &[f64]) {
        let (lo, hi) = (self.indptr[i], self.indptr[i + 1]);
        (&self.indices[lo..hi], &self.data[lo..hi])
    }
    /// Decomposes into `(nrows, ncols, indptr, indices, data)`.
    pub fn into_parts(self) -> (usize, usize, Vec<usize>, Vec<u32>, Vec<f64>) {
        (self.nrows, self.ncols, self.indptr, self.indices, self.data)
    }
    /// Entry `(i, j)`, zero when not stored.
    pub fn get(&self, i: usize, j: usize) -> f64 {
        let (cols, vals) = self.row(i);
        match cols.binary_search(&(j as u32)) {
            Ok(p) => vals[p],
            Err(_) => 0.0,
        }
    }
    /// The diagonal (zeros where not stored).
    pub fn diagonal(&self) -> Vec<f64> {
        (0..self.nrows.min(self.ncols))
            .map(|i| self.get(i, i))
            .collect()
    }
    /// Memory held by the three arrays, in bytes.
    pub fn memory_bytes(&self) -> usize {
        self.indptr.len() * std::mem::size_of::<usize>()
            + self.indices.len() * std::mem::size_of::<u32>()
            + self.data.len() * std::mem::size_of::<f64>()
    }
    /// Plain serial `y = A x` (reference implementation; fast kernels live in `precond`).
    pub fn mul_vec(&self, x: &[f64], y: &mut [f64]) {
        assert_eq!(x.len(), self.ncols, "mul_vec: x has wrong length");
        assert_eq!(y.len(), self.nrows, "mul_vec: y has wrong length");
        for (i, yi) in y.iter_mut().enumerate() {
            let (cols, vals) = self.row(i);
            *yi = cols
                .iter()
                .zip(vals)
                .map(|(&c, &v)| v * x[c as usize])
                .sum();
        }
    }
    /// The transpose, in CSR form.
    pub fn transpose(&self) -> Self {
        let mut counts = vec![0usize; self.ncols + 1];
        for &c in &self.indices {
            counts[c as usize + 1] += 1;
        }
        for i in 0..self.ncols {
            counts[i + 1] += counts[i];
        }
        let mut next = counts.clone();
        let mut idx = vec![0u32; self.nnz()];
        let mut val = vec![0f64; self.nnz()];
        for r in 0..self.nrows {
            let (cols, vals) = self.row(r);
            for (&c, &v) in cols.iter().zip(vals) {
                let p = &mut next[c as usize];
                idx[*p] = r as u32;
                val[*p] = v;
                *p += 1;
            }
        }
        Self {
            nrows: self.ncols,
            ncols: self.nrows,
            indptr: counts,
            indices: idx,
            data: val,
        }
    }
    /// Rows `lo..hi` as a new `(hi - lo) x ncols` matrix (global column indices kept).
    pub fn row_slice(&self, lo: usize, hi: usize) -> Self {
        let (a, b) = (self.indptr[lo], self.indptr[hi]);
        Self {
            nrows: hi - lo,
            ncols: self.ncols,
            indptr: self.indptr[lo..=hi].iter().map(|p| p - a).collect(),
            indices: self.indices[a..b].to_vec(),
            data: self.data[a..b].to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triplets_sum_duplicates_and_sort() {
        let a =
            CsrMatrix::from_triplets(2, 3, &[(0, 2, 1.0), (0, 0, 2.0), (0, 2, 3.0), (1, 1, 5.0)])
                .unwrap();
        assert_eq!(a.indptr(), &[0, 2, 3]);
        assert_eq!(a.indices(), &[0, 2, 1]);
        assert_eq!(a.data(), &[2.0, 4.0, 5.0]);
        assert_eq!(a.get(0, 2), 4.0);
        assert_eq!(a.get(1, 0), 0.0);
        let t = a.transpose();
        assert_eq!(t.get(2, 0), 4.0);
        assert_eq!(t.nrows(), 3);
    }

    #[test]
    fn new_rejects_unsorted() {
        let e = CsrMatrix::new(1, 3, vec![0, 2], vec![2, 1], vec![1.0, 1.0]).unwrap_err();
        assert_eq!(e, CsrError::UnsortedRow { row: 0, col: 1 });
    }
}
