//! CSR assembly from parsed chunks by a (parallel) counting sort.

use rayon::prelude::*;

use super::error::MmErrorKind;
use super::header::MmSymmetry;
use super::parse::Entries;
use crate::CsrMatrix;

/// Row boundaries splitting `indptr` into at most `parts` ranges of about
/// equal nonzeros.
fn row_bounds(indptr: &[usize], parts: usize) -> Vec<usize> {
    let nrows = indptr.len() - 1;
    let nnz = indptr[nrows];
    let mut b = vec![0usize];
    for k in 1..parts {
        let target = nnz / parts * k + (nnz % parts) * k / parts;
        let r = indptr.partition_point(|&p| p < target).min(nrows);
        if r > *b.last().unwrap_or(&0) {
            b.push(r);
        }
    }
    if *b.last().unwrap_or(&0) != nrows || b.len() == 1 {
        b.push(nrows);
    }
    b.dedup();
    if b.len() == 1 {
        b.push(nrows);
    }
    b
}

/// One row range's exclusive view of the output arrays and the write cursors
/// of its rows.
struct Part<'a> {
    lo: usize,
    hi: usize,
    base: usize,
    idx: &'a mut [u32],
    val: &'a mut [f64],
    cursor: &'a mut [usize],
}

/// Calls `f(row, col, value)` for every expanded entry of `chunks` in file
/// order (the mirror of an off-diagonal entry right after it).
#[inline(always)]
fn for_each_expanded(
    chunks: &[Entries],
    mirror: bool,
    neg: bool,
    mut f: impl FnMut(usize, u32, f64),
) {
    for ch in chunks {
        for ((&i, &j), &v) in ch.rows.iter().zip(&ch.cols).zip(&ch.vals) {
            f(i as usize, j, v);
            if mirror && i != j {
                f(j as usize, i, if neg { -v } else { v });
            }
        }
    }
}

/// Builds the CSR matrix of the parsed entries (chunks in file order).
///
/// Symmetric/skew storage is expanded (mirror `(j, i)` of every off-diagonal
/// entry, negated for skew). Duplicates are summed; rows end up sorted.
/// Entries land in each row in file order, so summation order is deterministic
/// and independent of how the file was chunked.
pub(crate) fn assemble(
    nrows: usize,
    ncols: usize,
    symmetry: MmSymmetry,
    chunks: &[Entries],
) -> Result<CsrMatrix, MmErrorKind> {
    let mirror = symmetry != MmSymmetry::General;
    let neg = symmetry == MmSymmetry::SkewSymmetric;
    let entries: usize = chunks.iter().map(Entries::len).sum();
    let tasks = rayon::current_num_threads().clamp(1, 8);
    // Several row ranges when the input was chunked (or is large), so the
    // parallel passes are exercised whenever the parallel parse is.
    let ranges = if chunks.len() > 1 || entries > 100_000 {
        tasks.max(2)
    } else {
        1
    };

    // 1. Row counts of the expanded entries: each task owns a range of rows
    //    and streams over all entries.
    let mut counts = zeroed::<usize>(nrows)?;
    {
        let step = nrows.div_ceil(ranges).max(1);
        let jobs: Vec<(usize, &mut [usize])> = counts
            .chunks_mut(step)
            .enumerate()
            .map(|(k, c)| (k * step, c))
            .collect();
        jobs.into_par_iter().for_each(|(lo, cnt)| {
            let hi = lo + cnt.len();
            for_each_expanded(chunks, mirror, neg, |r, _, _| {
                if r >= lo && r < hi {
                    cnt[r - lo] += 1;
                }
            });
        });
    }

    // 2. Row pointers; `counts` becomes the write cursor of every row.
    let mut indptr = zeroed::<usize>(nrows + 1)?;
    let mut acc = 0usize;
    for r in 0..nrows {
        indptr[r] = acc;
        let t = counts[r];
        counts[r] = acc;
        acc += t;
    }
    indptr[nrows] = acc;
    let nnz = acc;

    // 3. Scatter: each row range (balanced by nonzeros) is owned by one task,
    //    which streams over all entries and writes only those of its rows.
    let mut idx = vec![0u32; nnz];
    let mut val = vec![0f64; nnz];
    let bounds = row_bounds(&indptr, ranges);
    {
        let mut parts = Vec::with_capacity(bounds.len() - 1);
        let mut idx_rest: &mut [u32] = &mut idx;
        let mut val_rest: &mut [f64] = &mut val;
        let mut cur_rest: &mut [usize] = &mut counts;
        for w in bounds.windows(2) {
            let (lo, hi) = (w[0], w[1]);
            let len = indptr[hi] - indptr[lo];
            let (a, rest) = std::mem::take(&mut idx_rest).split_at_mut(len);
            idx_rest = rest;
            let (v, rest) = std::mem::take(&mut val_rest).split_at_mut(len);
            val_rest = rest;
            let (c, rest) = std::mem::take(&mut cur_rest).split_at_mut(hi - lo);
            cur_rest = rest;
            parts.push(Part {
                lo,
                hi,
                base: indptr[lo],
                idx: a,
                val: v,
                cursor: c,
            });
        }
        parts.into_par_iter().for_each(|p| {
            let Part {
                lo,
                hi,
                base,
                idx,
                val,
                cursor,
            } = p;
            for_each_expanded(chunks, mirror, neg, |r, c, v| {
                if r >= lo && r < hi {
                    let q = &mut cursor[r - lo];
                    idx[*q - base] = c;
                    val[*q - base] = v;
                    *q += 1;
                }
            });
        });
    }
    drop(counts);

    // 4. Sort each row and sum duplicates in place; `lens` gets the new lengths.
    let mut lens = zeroed::<usize>(nrows)?;
    {
        let mut jobs = Vec::new();
        let mut idx_rest: &mut [u32] = &mut idx;
        let mut val_rest: &mut [f64] = &mut val;
        let mut len_rest: &mut [usize] = &mut lens;
        let step = nrows.div_ceil(4 * tasks).max(1024);
        let mut lo = 0;
        while lo < nrows {
            let hi = (lo + step).min(nrows);
            let len = indptr[hi] - indptr[lo];
            let (a, rest) = std::mem::take(&mut idx_rest).split_at_mut(len);
            idx_rest = rest;
            let (v, rest) = std::mem::take(&mut val_rest).split_at_mut(len);
            val_rest = rest;
            let (l, rest) = std::mem::take(&mut len_rest).split_at_mut(hi - lo);
            len_rest = rest;
            jobs.push((lo, hi, a, v, l));
            lo = hi;
        }
        jobs.into_par_iter().for_each(|(lo, hi, idx, val, lens)| {
            let base = indptr[lo];
            let mut scratch: Vec<(u32, f64)> = Vec::new();
            for r in lo..hi {
                let (a, b) = (indptr[r] - base, indptr[r + 1] - base);
                lens[r - lo] = sort_row(&mut idx[a..b], &mut val[a..b], &mut scratch);
            }
        });
    }

    // 5. Close the gaps left by summed duplicates (rare).
    if lens.iter().sum::<usize>() != nnz {
        let mut w = 0usize;
        let mut new_ptr = Vec::with_capacity(nrows + 1);
        new_ptr.push(0);
        for r in 0..nrows {
            let a = indptr[r];
            idx.copy_within(a..a + lens[r], w);
            val.copy_within(a..a + lens[r], w);
            w += lens[r];
            new_ptr.push(w);
        }
        idx.truncate(w);
        val.truncate(w);
        indptr = new_ptr;
    }
    Ok(CsrMatrix::from_parts_unchecked(
        nrows, ncols, indptr, idx, val,
    ))
}

/// A zero-filled vector, or [`MmErrorKind::OutOfMemory`] when it cannot be
/// allocated (huge declared dimensions).
fn zeroed<T: Clone + Default>(n: usize) -> Result<Vec<T>, MmErrorKind> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| MmErrorKind::OutOfMemory {
            bytes: n.saturating_mul(std::mem::size_of::<T>()) as u64,
        })?;
    v.resize(n, T::default());
    Ok(v)
}

/// Sorts one row by column (stable) and sums duplicates into the front of the
/// slices; returns the new length.
fn sort_row(idx: &mut [u32], val: &mut [f64], scratch: &mut Vec<(u32, f64)>) -> usize {
    if idx.windows(2).all(|w| w[0] < w[1]) {
        return idx.len();
    }
    scratch.clear();
    scratch.extend(idx.iter().copied().zip(val.iter().copied()));
    scratch.sort_by_key(|e| e.0);
    let mut w = 0usize;
    for &(c, v) in scratch.iter() {
        if w > 0 && idx[w - 1] == c {
            val[w - 1] += v;
        } else {
            idx[w] = c;
            val[w] = v;
            w += 1;
        }
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_cover_all_rows() {
        let indptr = vec![0, 5, 5, 10, 30, 31];
        let b = row_bounds(&indptr, 3);
        assert_eq!(b[0], 0);
        assert_eq!(*b.last().unwrap(), 5);
        assert!(b.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(row_bounds(&[0], 4), vec![0, 0]);
    }
}
