//! Summary facts about a matrix, as printed by `jdmg info`.

use rayon::prelude::*;
use serde::Serialize;

use crate::mm::MmHeader;
use crate::CsrMatrix;

/// What `jdmg info` reports about a matrix (serializable to one JSON object).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MatrixInfo {
    /// Rows.
    pub nrows: usize,
    /// Columns.
    pub ncols: usize,
    /// Stored entries of the (expanded) CSR matrix.
    pub nnz: usize,
    /// Entries in the file as declared by its size line (`None` without a header).
    pub nnz_file: Option<usize>,
    /// Storage of the source: the header's `general` / `symmetric` /
    /// `skew-symmetric`, or `generated` when no header is given.
    pub storage: String,
    /// `coordinate` / `array` from the header, `None` without a header.
    pub format: Option<String>,
    /// `real` / `integer` / `pattern` from the header, `None` without a header.
    pub field: Option<String>,
    /// Square and numerically symmetric: every `a_ij` equals `a_ji` (a missing
    /// entry counts as 0). Checked on the values, not taken from the header.
    pub symmetric: bool,
    /// `max |a_ij - a_ji|` over all stored entries (`None` if not square).
    pub max_asymmetry: Option<f64>,
    /// `max_asymmetry / max |a_ij|` (0 for a zero matrix; `None` if not square).
    pub max_asymmetry_rel: Option<f64>,
    /// `max |a_ij|`.
    pub max_abs: f64,
    /// Gershgorin lower bound `min_i (a_ii - Σ_{j≠i} |a_ij|)` on the (real
    /// parts of the) eigenvalues; `None` if not square or empty.
    pub gershgorin_lower: Option<f64>,
    /// Gershgorin upper bound `max_i (a_ii + Σ_{j≠i} |a_ij|)`.
    pub gershgorin_upper: Option<f64>,
    /// Fewest stored entries in a row.
    pub min_row_nnz: usize,
    /// Most stored entries in a row.
    pub max_row_nnz: usize,
    /// Bytes held by the CSR arrays.
    pub memory_bytes: usize,
}

/// Computes [`MatrixInfo`] for `a`; `header` (if read from a file) supplies the
/// storage kind, format, field and the file's entry count. `O(nnz)`: the
/// bounds in parallel over rows, the asymmetry in one sweep ([`max_asymmetry`]).
pub fn matrix_info(a: &CsrMatrix, header: Option<&MmHeader>) -> MatrixInfo {
    let square = a.nrows() == a.ncols();
    let n = a.nrows();

    #[derive(Clone, Copy)]
    struct Acc {
        max_abs: f64,
        lo: f64,
        hi: f64,
        min_len: usize,
        max_len: usize,
    }
    let init = Acc {
        max_abs: 0.0,
        lo: f64::INFINITY,
        hi: f64::NEG_INFINITY,
        min_len: usize::MAX,
        max_len: 0,
    };
    let acc = (0..n)
        .into_par_iter()
        .fold(
            || init,
            |mut s, i| {
                let (cols, vals) = a.row(i);
                let mut diag = 0.0;
                let mut off = 0.0;
                for (&j, &v) in cols.iter().zip(vals) {
                    let j = j as usize;
                    s.max_abs = s.max_abs.max(v.abs());
                    if j == i {
                        diag += v;
                    } else {
                        off += v.abs();
                    }
                }
                s.lo = s.lo.min(diag - off);
                s.hi = s.hi.max(diag + off);
                s.min_len = s.min_len.min(cols.len());
                s.max_len = s.max_len.max(cols.len());
                s
            },
        )
        .reduce(
            || init,
            |a, b| Acc {
                max_abs: a.max_abs.max(b.max_abs),
                lo: a.lo.min(b.lo),
                hi: a.hi.max(b.hi),
                min_len: a.min_len.min(b.min_len),
                max_len: a.max_len.max(b.max_len),
            },
        );

    let asym = if square { max_asymmetry(a) } else { 0.0 };
    let (max_asymmetry, max_asymmetry_rel) = if square {
        let rel = if acc.max_abs > 0.0 {
            asym / acc.max_abs
        } else {
            0.0
        };
        (Some(asym), Some(rel))
    } else {
        (None, None)
    };
    let gersh = square && n > 0;
    MatrixInfo {
        nrows: a.nrows(),
        ncols: a.ncols(),
        nnz: a.nnz(),
        nnz_file: header.map(|h| h.entries),
        storage: header
            .map_or("generated", |h| h.symmetry.as_str())
            .to_string(),
        format: header.map(|h| h.format.as_str().to_string()),
        field: header.map(|h| h.field.as_str().to_string()),
        symmetric: square && asym == 0.0,
        max_asymmetry,
        max_asymmetry_rel,
        max_abs: acc.max_abs,
        gershgorin_lower: gersh.then_some(acc.lo),
        gershgorin_upper: gersh.then_some(acc.hi),
        min_row_nnz: if n == 0 { 0 } else { acc.min_len },
        max_row_nnz: acc.max_len,
        memory_bytes: a.memory_bytes(),
    }
}

/// Visits every off-diagonal pair {(i, j), (j, i)} of a square matrix once, in
/// one sweep over the rows: `pair(a_ij, Some(a_ji))` for an upper entry (i < j)
/// whose mirror is stored, `pair(a_ij, None)` for one whose mirror is not, and
/// `pair(a_ji, None)` for a lower entry that mirrors no upper entry. A cursor
/// per row walks its lower part: the mirror (j, i) of an upper entry (i, j) is
/// where row j's cursor points once it has passed row j's entries left of
/// column i (which rows before i did not mirror), so every lookup is O(1)
/// instead of a binary search into another row (rows are sorted, a
/// [`CsrMatrix`] invariant).
pub fn for_each_mirror_pair(a: &CsrMatrix, mut pair: impl FnMut(f64, Option<f64>)) {
    let n = a.nrows().min(a.ncols());
    let (indptr, indices, data) = (a.indptr(), a.indices(), a.data());
    let mut next: Vec<usize> = indptr[..n].to_vec();
    for i in 0..n {
        let lo = indptr[i];
        let row = &indices[lo..indptr[i + 1]];
        let first_upper = row.partition_point(|&c| c as usize <= i);
        for (q, &c) in row.iter().enumerate().skip(first_upper) {
            let j = c as usize;
            let (mut p, end) = (next[j], indptr[j + 1]);
            while p < end && (indices[p] as usize) < i {
                pair(data[p], None);
                p += 1;
            }
            let mirror = (p < end && indices[p] as usize == i).then(|| {
                p += 1;
                data[p - 1]
            });
            next[j] = p;
            pair(data[lo + q], mirror);
        }
    }
    for r in 0..n {
        for p in next[r]..indptr[r + 1] {
            if indices[p] as usize >= r {
                break;
            }
            pair(data[p], None);
        }
    }
}

/// `max |a_ij − a_ji|` of a square matrix (a missing entry counts as 0), by
/// [`for_each_mirror_pair`].
pub fn max_asymmetry(a: &CsrMatrix) -> f64 {
    let mut asym = 0.0f64;
    for_each_mirror_pair(a, |v, m| asym = asym.max((v - m.unwrap_or(0.0)).abs()));
    asym
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_nonsymmetric() {
        // [[4, 1], [3, -2]]
        let a =
            CsrMatrix::from_triplets(2, 2, &[(0, 0, 4.0), (0, 1, 1.0), (1, 0, 3.0), (1, 1, -2.0)])
                .unwrap();
        let info = matrix_info(&a, None);
        assert_eq!(info.storage, "generated");
        assert!(!info.symmetric);
        assert_eq!(info.max_asymmetry, Some(2.0));
        assert_eq!(info.max_asymmetry_rel, Some(0.5));
        assert_eq!(info.gershgorin_lower, Some(-5.0));
        assert_eq!(info.gershgorin_upper, Some(5.0));
        assert_eq!((info.min_row_nnz, info.max_row_nnz), (2, 2));
        assert_eq!(info.memory_bytes, 3 * 8 + 4 * 4 + 4 * 8);
    }

    /// The sweep against the definition, on random patterns with mirrored,
    /// perturbed and missing entries.
    #[test]
    fn asymmetry_sweep_matches_the_definition() {
        let mut seed = 7u64;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for n in [1usize, 2, 5, 17, 40] {
            for _ in 0..20 {
                let mut t = Vec::new();
                for _ in 0..3 * n {
                    let (i, j) = ((rnd() % n as u64) as usize, (rnd() % n as u64) as usize);
                    let v = (rnd() % 7) as f64 - 3.0;
                    t.push((i, j, v));
                    match rnd() % 3 {
                        0 => t.push((j, i, v)),
                        1 => t.push((j, i, v + 0.5)),
                        _ => {}
                    }
                }
                let a = CsrMatrix::from_triplets(n, n, &t).unwrap();
                let mut want = 0.0f64;
                for i in 0..n {
                    for j in 0..n {
                        want = want.max((a.get(i, j) - a.get(j, i)).abs());
                    }
                }
                assert_eq!(max_asymmetry(&a), want, "n = {n}");
            }
        }
    }

    #[test]
    fn rectangular_has_no_bounds() {
        let a = CsrMatrix::from_triplets(1, 2, &[(0, 1, -7.0)]).unwrap();
        let info = matrix_info(&a, None);
        assert!(!info.symmetric);
        assert_eq!(info.max_asymmetry, None);
        assert_eq!(info.gershgorin_lower, None);
        assert_eq!(info.max_abs, 7.0);
    }
}
