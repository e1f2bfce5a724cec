//! Least-squares sparse approximate inverse (SPAI with a fixed pattern, in the spirit of
//! ParaSails, Chow 2000; Grote & Huckle 1997 without pattern adaptation).

use std::ops::Range;

use matrices::CsrMatrix;
use rayon::prelude::*;

use super::blocked::{columns, for_column_groups, row_dots, ColumnGroup};
use super::{check_nonneg, shifted_with_diagonal, PrecondError, SpaiParams};
use crate::operator::Preconditioner;

/// A right approximate inverse `M ≈ (A − σI)^{-1}` with the pattern of `A` (plus the
/// diagonal), applied as one sparse product `z = M r`.
///
/// Column `j` of `M` minimizes `‖(A − σI) m_j − e_j‖₂` over vectors with the pattern of
/// column `j` of `A`: a small dense least-squares problem on the rows that those columns
/// touch, solved by Householder QR. Columns are independent (embarrassingly parallel) and
/// need no pivoting, so indefinite shifted matrices are fine; a rank-deficient local
/// problem gets zeros in the dependent components. Optional post-filtering drops
/// `|m_ij| < drop_tol · max_i |m_ij|`. A new shift means recomputing every column
/// (cost per column: one QR of a `|I| x |J|` dense matrix, `2|I||J|²` flops).
#[derive(Debug, Clone)]
pub struct Spai {
    m: CsrMatrix,
    shift: f64,
}

impl Spai {
    /// Computes the approximate inverse of `A − shift·I`, on `params.threads` threads
    /// (columns are split into contiguous chunks; the result does not depend on the
    /// thread count).
    ///
    /// # Errors
    /// [`PrecondError::NotSquare`], [`PrecondError::NonFinite`],
    /// [`PrecondError::NonFiniteShift`], [`PrecondError::InvalidParameter`] (negative or
    /// non-finite `drop_tol`, zero `threads`, or a thread pool that cannot be created),
    /// [`PrecondError::ZeroPivot`] when column `j` of `A − σI` is entirely zero (then no
    /// column of `M` can map onto `e_j`: `row` is `j`; the smallest such `j` is reported).
    pub fn new(a: &CsrMatrix, shift: f64, params: &SpaiParams) -> Result<Self, PrecondError> {
        check_nonneg("drop_tol", params.drop_tol)?;
        if params.threads == 0 {
            return Err(PrecondError::InvalidParameter {
                name: "threads",
                value: 0.0,
            });
        }
        let s = shifted_with_diagonal(a, shift)?;
        let st = s.transpose(); // row k of st = column k of s
        let n = s.nrows();
        let nchunks = if params.threads == 1 {
            1
        } else {
            (4 * params.threads).min(n.max(1))
        };
        let bounds: Vec<usize> = (0..=nchunks).map(|c| c * n / nchunks).collect();
        let run = |c: usize| spai_columns(&st, bounds[c]..bounds[c + 1], params.drop_tol);
        let parts: Vec<Result<ColumnChunk, PrecondError>> = if nchunks == 1 {
            vec![run(0)]
        } else {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(params.threads)
                .build()
                .map_err(|_| PrecondError::InvalidParameter {
                    name: "threads",
                    value: params.threads as f64,
                })?;
            pool.install(|| (0..nchunks).into_par_iter().map(run).collect())
        };
        let mut mt_indptr = Vec::with_capacity(n + 1);
        mt_indptr.push(0);
        let mut mt_indices: Vec<u32> = Vec::with_capacity(st.nnz());
        let mut mt_data: Vec<f64> = Vec::with_capacity(st.nnz());
        for part in parts {
            let part = part?;
            for len in part.lens {
                mt_indptr.push(mt_indptr.last().copied().unwrap_or(0) + len);
            }
            mt_indices.extend_from_slice(&part.indices);
            mt_data.extend_from_slice(&part.data);
        }
        let mt = CsrMatrix::from_parts_unchecked(n, n, mt_indptr, mt_indices, mt_data);
        Ok(Self {
            m: mt.transpose(),
            shift,
        })
    }

    /// The approximate inverse `M` (CSR).
    pub fn matrix(&self) -> &CsrMatrix {
        &self.m
    }

    /// The shift σ `M` was computed for.
    pub fn shift(&self) -> f64 {
        self.shift
    }
}

/// Columns `cols` of `M`, as row lengths and entries of `Mᵀ`.
struct ColumnChunk {
    lens: Vec<usize>,
    indices: Vec<u32>,
    data: Vec<f64>,
}

/// Computes the columns `cols` of the SPAI of the matrix whose transpose is `st`.
fn spai_columns(
    st: &CsrMatrix,
    cols: Range<usize>,
    drop_tol: f64,
) -> Result<ColumnChunk, PrecondError> {
    let n = st.nrows();
    let mut ipos = vec![usize::MAX; n];
    let mut rows: Vec<u32> = Vec::new();
    let mut jcols: Vec<u32> = Vec::new();
    let mut dense: Vec<f64> = Vec::new();
    let mut rhs: Vec<f64> = Vec::new();
    let mut sol: Vec<f64> = Vec::new();
    let mut out = ColumnChunk {
        lens: Vec::with_capacity(cols.len()),
        indices: Vec::new(),
        data: Vec::new(),
    };
    for j in cols {
        jcols.clear();
        jcols.extend(
            st.row(j)
                .0
                .iter()
                .copied()
                .filter(|&k| st.row(k as usize).1.iter().any(|&v| v != 0.0)),
        );
        if jcols.is_empty() || st.row(j).1.iter().all(|&v| v == 0.0) {
            return Err(PrecondError::ZeroPivot { row: j });
        }
        // Row set I: rows touched by the columns in J, plus j.
        rows.clear();
        for &k in &jcols {
            for &i in st.row(k as usize).0 {
                if ipos[i as usize] == usize::MAX {
                    ipos[i as usize] = rows.len();
                    rows.push(i);
                }
            }
        }
        if ipos[j] == usize::MAX {
            ipos[j] = rows.len();
            rows.push(j as u32);
        }
        let m = rows.len();
        let kk = jcols.len();
        dense.clear();
        dense.resize(m * kk, 0.0);
        for (c, &k) in jcols.iter().enumerate() {
            let (ri, rv) = st.row(k as usize);
            for (&i, &v) in ri.iter().zip(rv) {
                dense[c * m + ipos[i as usize]] = v;
            }
        }
        rhs.clear();
        rhs.resize(m, 0.0);
        rhs[ipos[j]] = 1.0;
        sol.clear();
        sol.resize(kk, 0.0);
        householder_lstsq(&mut dense, m, kk, &mut rhs, &mut sol);
        for &i in &rows {
            ipos[i as usize] = usize::MAX;
        }
        let vmax = sol.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        let thr = drop_tol * vmax;
        let before = out.indices.len();
        for (&k, &v) in jcols.iter().zip(&sol) {
            if v != 0.0 && v.abs() >= thr {
                if !v.is_finite() {
                    return Err(PrecondError::FactorOverflow { row: j });
                }
                out.indices.push(k);
                out.data.push(v);
            }
        }
        out.lens.push(out.indices.len() - before);
    }
    Ok(out)
}

/// Solves `min ‖A x − b‖₂` for a dense column-major `m x k` matrix by Householder QR
/// (overwrites `a` and `b`). Components whose `R` diagonal is negligible
/// (`≤ 1e-14 · max |R_ii|`) are set to zero.
fn householder_lstsq(a: &mut [f64], m: usize, k: usize, b: &mut [f64], x: &mut [f64]) {
    let r = m.min(k);
    for c in 0..r {
        let (head, tail) = a.split_at_mut((c + 1) * m);
        let col = &mut head[c * m..];
        let norm = col[c..].iter().map(|v| v * v).sum::<f64>().sqrt();
        if norm == 0.0 {
            continue;
        }
        let alpha = if col[c] > 0.0 { -norm } else { norm };
        col[c] -= alpha; // v = x - alpha e1, stored in col[c..]
        let vnorm2 = col[c..].iter().map(|v| v * v).sum::<f64>();
        if vnorm2 > 0.0 {
            for other in tail.chunks_exact_mut(m) {
                let d = col[c..]
                    .iter()
                    .zip(&other[c..])
                    .map(|(p, q)| p * q)
                    .sum::<f64>()
                    * 2.0
                    / vnorm2;
                for (o, v) in other[c..].iter_mut().zip(&col[c..]) {
                    *o -= d * v;
                }
            }
            let d = col[c..]
                .iter()
                .zip(&b[c..])
                .map(|(p, q)| p * q)
                .sum::<f64>()
                * 2.0
                / vnorm2;
            for (o, v) in b[c..].iter_mut().zip(&col[c..]) {
                *o -= d * v;
            }
        }
        col[c] = alpha; // R diagonal
    }
    let rmax = (0..r).fold(0.0f64, |acc, c| acc.max(a[c * m + c].abs()));
    x.fill(0.0);
    for c in (0..r).rev() {
        let d = a[c * m + c];
        if d.abs() <= 1e-14 * rmax || d == 0.0 {
            x[c] = 0.0;
            continue;
        }
        let mut s = b[c];
        for q in c + 1..r {
            s -= a[q * m + c] * x[q];
        }
        x[c] = s / d;
    }
}

impl Preconditioner for Spai {
    fn nrows(&self) -> usize {
        self.m.nrows()
    }
    fn work_per_vector(&self) -> f64 {
        1.5 * self.m.nnz() as f64 + 2.0 * self.m.nrows() as f64
    }

    /// `z = M r` for `k` vectors, reading `M` once per group of up to 8 vectors (one
    /// sequential sum per vector and row, the same for every group size).
    fn apply_block(&self, r: &[f64], z: &mut [f64], k: usize) {
        let n = self.m.nrows();
        assert_eq!(r.len(), n * k, "SPAI: r has wrong length");
        assert_eq!(z.len(), n * k, "SPAI: z has wrong length");
        if n == 0 {
            return;
        }
        for_column_groups(k, &mut SpaiGroup { m: &self.m, r, z });
    }
}

/// One group of vectors of [`Spai`]'s `apply_block`.
struct SpaiGroup<'a> {
    m: &'a CsrMatrix,
    r: &'a [f64],
    z: &'a mut [f64],
}

impl ColumnGroup for SpaiGroup<'_> {
    fn run<const K: usize>(&mut self, j0: usize) {
        let n = self.m.nrows();
        let (indptr, indices, data) = (self.m.indptr(), self.m.indices(), self.m.data());
        let rc = columns::<K>(self.r, n, j0);
        let z = &mut self.z[j0 * n..(j0 + K) * n];
        for i in 0..n {
            let (lo, hi) = (indptr[i], indptr[i + 1]);
            let s = row_dots::<K>(&indices[lo..hi], &data[lo..hi], &rc);
            for j in 0..K {
                z[j * n + i] = s[j];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lstsq_matches_normal_equations() {
        // A = [[1,0],[1,1],[0,2]] (column-major), b = [1,2,3]; x = (AᵀA)^{-1} Aᵀ b.
        let mut a = vec![1.0, 1.0, 0.0, 0.0, 1.0, 2.0];
        let mut b = vec![1.0, 2.0, 3.0];
        let mut x = vec![0.0; 2];
        householder_lstsq(&mut a, 3, 2, &mut b, &mut x);
        // AᵀA = [[2,1],[1,5]], Aᵀb = [3, 8] -> x = [7/9, 13/9]
        assert!((x[0] - 7.0 / 9.0).abs() < 1e-14, "{x:?}");
        assert!((x[1] - 13.0 / 9.0).abs() < 1e-14, "{x:?}");
    }

    #[test]
    fn spai_threads_do_not_change_the_result() {
        let n = 50;
        let mut t = Vec::new();
        for i in 0..n {
            t.push((i, i, 4.0 + (i % 3) as f64));
            if i > 0 {
                t.push((i, i - 1, -1.0));
                t.push((i - 1, i, -1.5));
            }
            if i >= 7 {
                t.push((i, i - 7, 0.5));
            }
        }
        let a = CsrMatrix::from_triplets(n, n, &t).unwrap();
        let one = Spai::new(&a, 0.3, &SpaiParams::default()).unwrap();
        let three = Spai::new(
            &a,
            0.3,
            &SpaiParams {
                threads: 3,
                ..SpaiParams::default()
            },
        )
        .unwrap();
        assert_eq!(one.matrix(), three.matrix());
        // ‖A M − I‖_F is below that of M = 0 (which is √n).
        let mut e = 0.0;
        let mut col = vec![0.0; n];
        let mut am = vec![0.0; n];
        let mt = one.matrix().transpose();
        let shifted = super::super::shifted_with_diagonal(&a, 0.3).unwrap();
        for j in 0..n {
            col.fill(0.0);
            let (c, v) = mt.row(j);
            for (&c, &v) in c.iter().zip(v) {
                col[c as usize] = v;
            }
            shifted.mul_vec(&col, &mut am);
            am[j] -= 1.0;
            e += am.iter().map(|x| x * x).sum::<f64>();
        }
        assert!(e.sqrt() < 0.5 * (n as f64).sqrt(), "{}", e.sqrt());
    }

    #[test]
    fn spai_of_diagonal_and_full_pattern() {
        let a = CsrMatrix::from_triplets(3, 3, &[(0, 0, 2.0), (1, 1, 4.0), (2, 2, -0.5)]).unwrap();
        let m = Spai::new(&a, 0.0, &SpaiParams::default()).unwrap();
        assert_eq!(m.matrix().data(), &[0.5, 0.25, -2.0]);
        // Dense pattern: M is the exact inverse.
        let a =
            CsrMatrix::from_triplets(2, 2, &[(0, 0, 2.0), (0, 1, 1.0), (1, 0, 1.0), (1, 1, 3.0)])
                .unwrap();
        let m = Spai::new(&a, 1.0, &SpaiParams::default()).unwrap();
        // (A - I)^{-1} = [[1,1],[1,2]]^{-1} = [[2,-1],[-1,1]]
        let mut z = [0.0; 2];
        m.apply(&[1.0, 0.0], &mut z);
        assert!(
            (z[0] - 2.0).abs() < 1e-13 && (z[1] + 1.0).abs() < 1e-13,
            "{z:?}"
        );
        let zero = CsrMatrix::from_triplets(2, 2, &[(0, 0, 1.0)]).unwrap();
        assert_eq!(
            Spai::new(&zero, 0.0, &SpaiParams::default()).unwrap_err(),
            PrecondError::ZeroPivot { row: 1 }
        );
    }
}
