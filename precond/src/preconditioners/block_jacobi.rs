//! Block-Jacobi: independent preconditioners of the diagonal blocks.

use std::ops::Range;

use matrices::CsrMatrix;

use super::blocked::OwnScratch;
use super::{build_with_info, BoxedPreconditioner, PrecondError, PrecondKind};
use crate::operator::Preconditioner;

/// `M = blockdiag(M_1, …, M_b)`, where `M_q` is any [`PrecondKind`] built for the diagonal
/// block `(A − σI)[R_q, R_q]` of a row range `R_q`; couplings between blocks are ignored.
///
/// Two uses: ranges over one matrix ([`BlockJacobi::new`]), e.g. one block per thread or
/// per solve-group member; and the distributed case ([`BlockJacobi::local`]) where each
/// rank holds its rows of `A` with global column indices and factors only its own diagonal
/// block, so applying `M` needs no communication. A new shift rebuilds every block.
pub struct BlockJacobi {
    n: usize,
    blocks: Vec<(Range<usize>, BoxedPreconditioner)>,
    perturbed: usize,
    nnz: usize,
    /// Gathered rows of one block (input and output) for `apply_block`.
    scratch: OwnScratch,
}

impl std::fmt::Debug for BlockJacobi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockJacobi")
            .field("n", &self.n)
            .field(
                "blocks",
                &self.blocks.iter().map(|b| b.0.clone()).collect::<Vec<_>>(),
            )
            .field("perturbed", &self.perturbed)
            .finish()
    }
}

/// The square block of `a` with rows `rows` and columns `col0 .. col0 + rows.len()`,
/// renumbered from 0.
///
/// # Errors
/// [`PrecondError::SizeMismatch`] if the rows or columns fall outside `a`.
pub fn diagonal_block(
    a: &CsrMatrix,
    rows: Range<usize>,
    col0: usize,
) -> Result<CsrMatrix, PrecondError> {
    let len = rows.end.saturating_sub(rows.start);
    if rows.end > a.nrows() || rows.start > rows.end {
        return Err(PrecondError::SizeMismatch {
            what: "block rows",
            expected: a.nrows(),
            got: rows.end,
        });
    }
    if col0 + len > a.ncols() {
        return Err(PrecondError::SizeMismatch {
            what: "block columns",
            expected: a.ncols(),
            got: col0 + len,
        });
    }
    let mut indptr = Vec::with_capacity(len + 1);
    let mut indices = Vec::new();
    let mut data = Vec::new();
    indptr.push(0);
    for i in rows {
        let (cols, vals) = a.row(i);
        let lo = cols.partition_point(|&c| (c as usize) < col0);
        let hi = cols.partition_point(|&c| (c as usize) < col0 + len);
        indices.extend(cols[lo..hi].iter().map(|&c| c - col0 as u32));
        data.extend_from_slice(&vals[lo..hi]);
        indptr.push(indices.len());
    }
    Ok(CsrMatrix::from_parts_unchecked(
        len, len, indptr, indices, data,
    ))
}

impl BlockJacobi {
    /// One preconditioner `kind` of `(A − shift·I)[R_q, R_q]` per range. The ranges must
    /// tile `0..n` in order (`ranges[0].start == 0`, each starts where the previous ended,
    /// the last ends at `n`); empty ranges are allowed.
    ///
    /// # Errors
    /// [`PrecondError::NotSquare`], [`PrecondError::SizeMismatch`] (ranges do not tile the
    /// rows), and any error of building `kind` on a block (row numbers are then local to
    /// the block).
    pub fn new(
        a: &CsrMatrix,
        ranges: &[Range<usize>],
        kind: &PrecondKind,
        shift: f64,
    ) -> Result<Self, PrecondError> {
        if a.nrows() != a.ncols() {
            return Err(PrecondError::NotSquare {
                nrows: a.nrows(),
                ncols: a.ncols(),
            });
        }
        let mut next = 0;
        for r in ranges {
            if r.start != next || r.end < r.start {
                return Err(PrecondError::SizeMismatch {
                    what: "block range start",
                    expected: next,
                    got: r.start,
                });
            }
            next = r.end;
        }
        if next != a.nrows() {
            return Err(PrecondError::SizeMismatch {
                what: "block ranges end",
                expected: a.nrows(),
                got: next,
            });
        }
        let mut blocks = Vec::with_capacity(ranges.len());
        let (mut perturbed, mut nnz) = (0, 0);
        for r in ranges {
            let b = diagonal_block(a, r.clone(), r.start)?;
            let (m, info) = build_with_info(kind, &b, shift)?;
            perturbed += info.perturbed_pivots;
            nnz += info.nnz;
            blocks.push((r.clone(), m));
        }
        Ok(Self {
            n: a.nrows(),
            blocks,
            perturbed,
            nnz,
            scratch: OwnScratch::default(),
        })
    }

    /// The local diagonal block of a row-distributed matrix: `a_local` holds this rank's
    /// rows with global column indices, whose global numbers start at `first_row`; the
    /// block is `a_local[:, first_row .. first_row + a_local.nrows()]`, preconditioned
    /// with `kind` for shift `shift`.
    ///
    /// # Errors
    /// [`PrecondError::SizeMismatch`] if the block's columns exceed `a_local.ncols()`;
    /// any error of building `kind` on the block.
    pub fn local(
        a_local: &CsrMatrix,
        first_row: usize,
        kind: &PrecondKind,
        shift: f64,
    ) -> Result<Self, PrecondError> {
        let n = a_local.nrows();
        let b = diagonal_block(a_local, 0..n, first_row)?;
        let (m, info) = build_with_info(kind, &b, shift)?;
        Ok(Self {
            n,
            blocks: vec![(0..n, m)],
            perturbed: info.perturbed_pivots,
            nnz: info.nnz,
            scratch: OwnScratch::default(),
        })
    }

    /// Number of blocks.
    pub fn num_blocks(&self) -> usize {
        self.blocks.len()
    }

    /// Pivots replaced by the tiny-pivot rule, summed over blocks.
    pub fn perturbed_pivots(&self) -> usize {
        self.perturbed
    }

    /// Stored nonzeros, summed over blocks (as reported by [`super::PrecondInfo::nnz`]).
    pub fn nnz(&self) -> usize {
        self.nnz
    }
}

impl Preconditioner for BlockJacobi {
    fn nrows(&self) -> usize {
        self.n
    }
    /// The blocks' work, and a gather and scatter of the rows with several.
    fn work_per_vector(&self) -> f64 {
        let blocks: f64 = self.blocks.iter().map(|(_, m)| m.work_per_vector()).sum();
        blocks
            + if self.blocks.len() > 1 {
                4.0 * self.n as f64
            } else {
                0.0
            }
    }

    /// `z = M^{-1} r` for `k` vectors: every block preconditioner gets one `apply_block`
    /// call with all `k` vectors (so blocked kernels such as ILU's apply). With one block
    /// the vectors are passed as they are; with several, the rows of each block are
    /// gathered into a contiguous `len × k` scratch copy and the result scattered back
    /// (scratch allocated on the first apply and reused).
    fn apply_block(&self, r: &[f64], z: &mut [f64], k: usize) {
        let n = self.n;
        assert_eq!(r.len(), n * k, "BlockJacobi: r has wrong length");
        assert_eq!(z.len(), n * k, "BlockJacobi: z has wrong length");
        if n == 0 || k == 0 {
            return;
        }
        if let [(range, m)] = self.blocks.as_slice() {
            debug_assert_eq!(range.len(), n);
            return m.apply_block(r, z, k);
        }
        let maxlen = self.blocks.iter().map(|b| b.0.len()).max().unwrap_or(0);
        self.scratch.with(2 * maxlen * k, |buf| {
            for (range, m) in &self.blocks {
                let len = range.len();
                if len == 0 {
                    continue;
                }
                let (rs, zs) = buf.split_at_mut(maxlen * k);
                let (rs, zs) = (&mut rs[..len * k], &mut zs[..len * k]);
                for j in 0..k {
                    rs[j * len..(j + 1) * len]
                        .copy_from_slice(&r[j * n + range.start..j * n + range.end]);
                }
                m.apply_block(rs, zs, k);
                for j in 0..k {
                    z[j * n + range.start..j * n + range.end]
                        .copy_from_slice(&zs[j * len..(j + 1) * len]);
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preconditioners::PivotParams;

    #[test]
    fn block_jacobi_equals_blockwise_exact_solve() {
        // Tridiagonal 6x6; two blocks of 3 factored by ILU(0) (exact on tridiagonal blocks).
        let mut t = Vec::new();
        for i in 0..6 {
            t.push((i, i, 3.0));
            if i > 0 {
                t.push((i, i - 1, -1.0));
                t.push((i - 1, i, -1.0));
            }
        }
        let a = CsrMatrix::from_triplets(6, 6, &t).unwrap();
        let kind = PrecondKind::Ilu0(PivotParams::default());
        let m = BlockJacobi::new(&a, &[0..3, 3..6], &kind, 1.0).unwrap();
        assert_eq!(m.num_blocks(), 2);
        // Block (A - I)[0..3,0..3] = tridiag(-1, 2, -1); x = (1,1,1) -> b = (1, 0, 1).
        let mut z = [0.0; 6];
        m.apply(&[1.0, 0.0, 1.0, 1.0, 0.0, 1.0], &mut z);
        for v in z {
            assert!((v - 1.0).abs() < 1e-14);
        }
        assert!(matches!(
            BlockJacobi::new(&a, &[0..2, 3..6], &kind, 0.0),
            Err(PrecondError::SizeMismatch {
                expected: 2,
                got: 3,
                ..
            })
        ));
        // Local block of rows 3..6 (global columns) = same block.
        let local = a.row_slice(3, 6);
        let ml = BlockJacobi::local(&local, 3, &kind, 1.0).unwrap();
        let mut zl = [0.0; 3];
        ml.apply(&[1.0, 0.0, 1.0], &mut zl);
        assert!(zl.iter().all(|v| (v - 1.0).abs() < 1e-14));
    }
}
