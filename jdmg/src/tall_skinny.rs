//! Tall-skinny products of the outer iteration: `AᵀB` (n×m by n×p) and `A·Y`
//! (n×m by m×p) with n ≫ m, p, on faer's GEMM, and the fused pass of PRIMME's
//! `Num_update_VWXR` (Ritz vectors, residuals and their norms from one sweep
//! over V and W = AV, a row block at a time so that each block of X and R is
//! finished while it is in cache).
//!
//! All matrices are column-major with leading dimension equal to their row count,
//! except where a leading dimension is given.
//!
//! (Hand-written AVX2 kernels that stream the tall operand without packing were
//! tried and measured: on this project's machine, a Zen 4, faer's packed GEMM
//! reads a 64,000×30 basis at 14 GB/s and a 262,144×30 one at 12.6 GB/s, 2.5×
//! faster than the streaming kernels, so faer stays.)

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};

/// Rows per block of the fused passes: a block of X and R (k ≤ 8 columns) stays
/// in the L2 cache between its product and its residual update.
const ROWS: usize = 2048;

/// Below this many rows (times columns of the tall operand) a product stays on
/// the calling thread: splitting it costs more than it saves.
const PAR_MIN_ENTRIES: usize = 1 << 18;

/// Splits the rows `0..n` in two halves and runs `f(r0, r1)` on both, the second
/// on rayon's pool, when `threads > 1` and the tall operand has at least
/// [`PAR_MIN_ENTRIES`] entries (n·m); else `f(0, n)` on this thread. These
/// products are bound by memory bandwidth, so two halves read at twice the rate
/// of one core where the memory system allows.
fn split_rows<F: Fn(usize, usize) + Sync>(n: usize, m: usize, threads: usize, f: F) {
    match split_point(n, m, threads) {
        None => f(0, n),
        Some(mid) => {
            rayon::join(|| f(0, mid), || f(mid, n));
        }
    }
}

/// Where [`split_rows`] splits `0..n`, or None when the product stays on one thread.
fn split_point(n: usize, m: usize, threads: usize) -> Option<usize> {
    if threads < 2 || n.saturating_mul(m) < PAR_MIN_ENTRIES || n < 2 * ROWS {
        return None;
    }
    Some((n / 2).next_multiple_of(8).min(n))
}

/// A raw pointer that the two halves of [`split_rows`] share: each writes only
/// its own rows.
#[derive(Clone, Copy)]
struct Shared(*mut f64);

impl Shared {
    fn ptr(self) -> *mut f64 {
        self.0
    }
}
// SAFETY: the halves of `split_rows` write disjoint rows through it.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

/// `out (m×p) = a (n×m)ᵀ · b (n×p)` (local part of a global inner product), on
/// `threads` threads (the rows split in two halves for large products).
pub fn gemm_tn(
    out: &mut [f64],
    a: &[f64],
    n: usize,
    m: usize,
    b: &[f64],
    p: usize,
    threads: usize,
) {
    if m == 0 || p == 0 {
        return;
    }
    let out = &mut out[..m * p];
    if n == 0 {
        out.fill(0.0);
        return;
    }
    let Some(mid) = split_point(n, m, threads) else {
        tn_rows(out, a, n, 0, n, m, b, p);
        return;
    };
    let mut second = vec![0.0; m * p];
    rayon::join(
        || tn_rows(out, a, n, 0, mid, m, b, p),
        || tn_rows(&mut second, a, n, mid, n, m, b, p),
    );
    out.iter_mut().zip(&second).for_each(|(o, s)| *o += s);
}

/// `out (m×p) = a[r0..r1, :]ᵀ · b[r0..r1, :]` (leading dimension n).
#[allow(clippy::too_many_arguments)]
fn tn_rows(
    out: &mut [f64],
    a: &[f64],
    n: usize,
    r0: usize,
    r1: usize,
    m: usize,
    b: &[f64],
    p: usize,
) {
    let rows = r1 - r0;
    let dst = MatMut::from_column_major_slice_mut(out, m, p);
    let lhs = MatRef::from_column_major_slice_with_stride(&a[r0..], rows, m, n);
    let rhs = MatRef::from_column_major_slice_with_stride(&b[r0..], rows, p, n);
    matmul(dst, Accum::Replace, lhs.transpose(), rhs, 1.0, Par::Seq);
}

/// `out (n×p) = a (n×m) · y (m×p)`, on `threads` threads.
pub fn gemm_nn(
    out: &mut [f64],
    a: &[f64],
    n: usize,
    m: usize,
    y: &[f64],
    p: usize,
    threads: usize,
) {
    nn_par(&mut out[..n * p], a, n, m, y, p, Update::Set, threads);
}

/// `c (n×p) −= a (n×m) · y (m×p)`, on `threads` threads.
pub fn gemm_sub(c: &mut [f64], a: &[f64], n: usize, m: usize, y: &[f64], p: usize, threads: usize) {
    nn_par(&mut c[..n * p], a, n, m, y, p, Update::Sub, threads);
}

/// How [`nn_strided`] writes its product into `out`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Update {
    /// `out = a·y`.
    Set,
    /// `out += a·y`.
    Add,
    /// `out −= a·y`.
    Sub,
}

/// `out (n×p, leading dimension ldo) (= | += | −=) a (n×m, leading dimension lda) · y (m×p)`,
/// on the calling thread.
#[allow(clippy::too_many_arguments)]
pub fn nn_strided(
    out: &mut [f64],
    ldo: usize,
    a: &[f64],
    lda: usize,
    n: usize,
    m: usize,
    y: &[f64],
    p: usize,
    update: Update,
) {
    if n == 0 || p == 0 {
        return;
    }
    if m == 0 {
        if update == Update::Set {
            for j in 0..p {
                out[j * ldo..j * ldo + n].fill(0.0);
            }
        }
        return;
    }
    let dst = MatMut::from_column_major_slice_with_stride_mut(out, n, p, ldo);
    let lhs = MatRef::from_column_major_slice_with_stride(a, n, m, lda);
    let rhs = MatRef::from_column_major_slice(&y[..m * p], m, p);
    let (accum, alpha) = match update {
        Update::Set => (Accum::Replace, 1.0),
        Update::Add => (Accum::Add, 1.0),
        Update::Sub => (Accum::Add, -1.0),
    };
    matmul(dst, accum, lhs, rhs, alpha, Par::Seq);
}

/// [`nn_strided`] with leading dimensions n, its rows split over `threads`.
#[allow(clippy::too_many_arguments)]
fn nn_par(
    out: &mut [f64],
    a: &[f64],
    n: usize,
    m: usize,
    y: &[f64],
    p: usize,
    update: Update,
    threads: usize,
) {
    let len = out.len();
    let o = Shared(out.as_mut_ptr());
    split_rows(n, m, threads, |r0, r1| {
        // SAFETY: rows r0..r1 of every column belong to this half only; `len`
        // bounds the slice as the caller's `out` does.
        let out = unsafe { std::slice::from_raw_parts_mut(o.ptr(), len) };
        nn_strided(&mut out[r0..], n, &a[r0..], n, r1 - r0, m, y, p, update);
    });
}

/// The middle of classical Gram-Schmidt twice, in one sweep over the basis:
/// `c (n×p) −= a (n×m) · y (m×p)` (the first pass's update), then
/// `out (m×p) = b (n×m)ᵀ · c` (the second pass's coefficients, local part),
/// a row block at a time, so that each block of `a` and `b` is read from
/// memory once for both products (`b` is `a`, or M·a for an M inner
/// product). Three reads of the basis per CGS2 instead of four. On
/// `threads` threads as [`gemm_tn`].
#[allow(clippy::too_many_arguments)]
pub fn sub_then_tn(
    c: &mut [f64],
    a: &[f64],
    b: &[f64],
    n: usize,
    m: usize,
    y: &[f64],
    p: usize,
    out: &mut [f64],
    threads: usize,
) {
    if m == 0 || p == 0 {
        return;
    }
    let out = &mut out[..m * p];
    out.fill(0.0);
    if n == 0 {
        return;
    }
    let Some(mid) = split_point(n, m, threads) else {
        sub_tn_rows(c, a, b, n, 0, n, m, y, p, out);
        return;
    };
    let len = c.len();
    let cs = Shared(c.as_mut_ptr());
    let mut second = vec![0.0; m * p];
    rayon::join(
        || {
            // SAFETY: this half reads and writes rows 0..mid of `c` only.
            let c = unsafe { std::slice::from_raw_parts_mut(cs.ptr(), len) };
            sub_tn_rows(c, a, b, n, 0, mid, m, y, p, out)
        },
        || {
            // SAFETY: this half reads and writes rows mid..n of `c` only.
            let c = unsafe { std::slice::from_raw_parts_mut(cs.ptr(), len) };
            sub_tn_rows(c, a, b, n, mid, n, m, y, p, &mut second)
        },
    );
    out.iter_mut().zip(&second).for_each(|(o, s)| *o += s);
}

/// [`sub_then_tn`] on the rows `start..end`, adding to `out`.
#[allow(clippy::too_many_arguments)]
fn sub_tn_rows(
    c: &mut [f64],
    a: &[f64],
    b: &[f64],
    n: usize,
    start: usize,
    end: usize,
    m: usize,
    y: &[f64],
    p: usize,
    out: &mut [f64],
) {
    // a block of a and b stays in the L2 cache between the two products
    let step = ((SWEEP_BYTES / 8) / (2 * m)).clamp(64, ROWS) / 8 * 8;
    let mut r0 = start;
    while r0 < end {
        let rows = step.min(end - r0);
        nn_strided(&mut c[r0..], n, &a[r0..], n, rows, m, y, p, Update::Sub);
        let dst = MatMut::from_column_major_slice_mut(out, m, p);
        let lhs = MatRef::from_column_major_slice_with_stride(&b[r0..], rows, m, n);
        let rhs = MatRef::from_column_major_slice_with_stride(&c[r0..], rows, p, n);
        matmul(dst, Accum::Add, lhs.transpose(), rhs, 1.0, Par::Seq);
        r0 += rows;
    }
}

/// Bytes of the tall operands that one row block of [`sub_then_tn`] reads
/// (half an L2 cache of 2 MiB).
const SWEEP_BYTES: usize = 1 << 20;

/// Ritz vectors, residuals and residual norms in one pass over V and W = AV
/// (PRIMME's `Num_update_VWXR`): `x = v·y`, `r = w·y − x·diag(theta)` and
/// `norms[j] = ‖r_j‖²` (local part), for `v`, `w` n×m, `y` m×p.
#[allow(clippy::too_many_arguments)]
pub fn ritz_residuals(
    x: &mut [f64],
    r: &mut [f64],
    norms: &mut [f64],
    v: &[f64],
    w: &[f64],
    n: usize,
    m: usize,
    y: &[f64],
    theta: &[f64],
    threads: usize,
) {
    let p = theta.len();
    norms[..p].fill(0.0);
    if n == 0 || p == 0 {
        return;
    }
    let (xl, rl) = (x.len(), r.len());
    let (xs, rs) = (Shared(x.as_mut_ptr()), Shared(r.as_mut_ptr()));
    let partial = std::sync::Mutex::new(vec![0.0; p]);
    split_rows(n, m, threads, |a, b| {
        // SAFETY: each half writes rows a..b of X and R only.
        let (x, r) = unsafe {
            (
                std::slice::from_raw_parts_mut(xs.ptr(), xl),
                std::slice::from_raw_parts_mut(rs.ptr(), rl),
            )
        };
        let mut nr = vec![0.0; p];
        ritz_rows(x, r, &mut nr, v, w, n, a, b, m, y, theta);
        let mut acc = partial.lock().unwrap_or_else(|e| e.into_inner());
        acc.iter_mut().zip(&nr).for_each(|(t, v)| *t += v);
    });
    let acc = partial.into_inner().unwrap_or_else(|e| e.into_inner());
    norms[..p].copy_from_slice(&acc);
}

/// [`ritz_residuals`] on the rows `start..end`, adding the squared norms of those
/// rows to `norms`.
#[allow(clippy::too_many_arguments)]
fn ritz_rows(
    x: &mut [f64],
    r: &mut [f64],
    norms: &mut [f64],
    v: &[f64],
    w: &[f64],
    n: usize,
    start: usize,
    end: usize,
    m: usize,
    y: &[f64],
    theta: &[f64],
) {
    let p = theta.len();
    let mut r0 = start;
    while r0 < end {
        let rows = ROWS.min(end - r0);
        nn_strided(&mut x[r0..], n, &v[r0..], n, rows, m, y, p, Update::Set);
        nn_strided(&mut r[r0..], n, &w[r0..], n, rows, m, y, p, Update::Set);
        for j in 0..p {
            let (xs, rs) = (
                &x[j * n + r0..j * n + r0 + rows],
                &mut r[j * n + r0..j * n + r0 + rows],
            );
            let th = theta[j];
            rs.iter_mut().zip(xs).for_each(|(ri, xi)| *ri -= th * xi);
            norms[j] += crate::dense::dot(rs, rs);
        }
        r0 += rows;
    }
}

/// `a[:, ..p] = a (n×m) · y (m×p)` in place (p ≤ m), one row block at a time
/// through `buf` (at least `ROWS_IN_PLACE · p` long): a basis transformation
/// without a second n×m array (each output row depends only on the same row).
/// With `threads > 1` the second half of the rows goes through a buffer of its
/// own.
pub fn gemm_nn_in_place(
    a: &mut [f64],
    n: usize,
    m: usize,
    y: &[f64],
    p: usize,
    buf: &mut [f64],
    threads: usize,
) {
    debug_assert!(p <= m || n == 0);
    if n == 0 || p == 0 {
        return;
    }
    let len = a.len();
    let (ap, bp) = (Shared(a.as_mut_ptr()), Shared(buf.as_mut_ptr()));
    let blen = buf.len();
    split_rows(n, m, threads, |r0, r1| {
        // SAFETY: each half reads and writes rows r0..r1 of `a` only; the first
        // half uses the caller's buffer, the second one of its own.
        let a = unsafe { std::slice::from_raw_parts_mut(ap.ptr(), len) };
        if r0 == 0 {
            let buf = unsafe { std::slice::from_raw_parts_mut(bp.ptr(), blen) };
            in_place_rows(a, n, r0, r1, m, y, p, buf);
        } else {
            let mut own = vec![0.0; ROWS_IN_PLACE * p];
            in_place_rows(a, n, r0, r1, m, y, p, &mut own);
        }
    });
}

/// [`gemm_nn_in_place`] on the rows `start..end`.
#[allow(clippy::too_many_arguments)]
fn in_place_rows(
    a: &mut [f64],
    n: usize,
    start: usize,
    end: usize,
    m: usize,
    y: &[f64],
    p: usize,
    buf: &mut [f64],
) {
    let mut r0 = start;
    while r0 < end {
        let rows = ROWS_IN_PLACE.min(end - r0);
        nn_strided(
            &mut buf[..rows * p],
            rows,
            &a[r0..],
            n,
            rows,
            m,
            y,
            p,
            Update::Set,
        );
        for j in 0..p {
            a[j * n + r0..j * n + r0 + rows].copy_from_slice(&buf[j * rows..(j + 1) * rows]);
        }
        r0 += rows;
    }
}

/// Rows per block of [`gemm_nn_in_place`]: the block's result stays in the L2
/// cache between the product and the copy back.
pub const ROWS_IN_PLACE: usize = 1024;

#[cfg(test)]
mod tests {
    use super::*;

    fn data(len: usize, seed: u64) -> Vec<f64> {
        (0..len)
            .map(|i| (((i as u64 + 1) * (seed * 2654435761 + 7919)) % 1009) as f64 / 1009.0 - 0.5)
            .collect()
    }

    fn naive_tn(a: &[f64], n: usize, m: usize, b: &[f64], p: usize) -> Vec<f64> {
        let mut o = vec![0.0; m * p];
        for j in 0..p {
            for i in 0..m {
                o[j * m + i] = (0..n).map(|r| a[i * n + r] * b[j * n + r]).sum();
            }
        }
        o
    }

    fn naive_nn(a: &[f64], n: usize, m: usize, y: &[f64], p: usize) -> Vec<f64> {
        let mut o = vec![0.0; n * p];
        for j in 0..p {
            for i in 0..m {
                for r in 0..n {
                    o[j * n + r] += a[i * n + r] * y[j * m + i];
                }
            }
        }
        o
    }

    fn close(a: &[f64], b: &[f64], scale: f64) {
        let e = a
            .iter()
            .zip(b)
            .fold(0.0f64, |e, (x, y)| e.max((x - y).abs()));
        assert!(e <= 1e-12 * scale, "differs by {e:e}");
    }

    #[test]
    fn products_match_naive_ones_on_ragged_shapes() {
        for &(n, m, p, t) in &[
            (1, 1, 1, 1),
            (7, 3, 5, 2),
            (2 * ROWS + 13, 9, 6, 1),
            (ROWS, 30, 4, 2),
            (100, 0, 3, 2),
            // Large enough to split over two threads (n·m ≥ PAR_MIN_ENTRIES).
            (40_009, 8, 3, 1),
            (40_009, 8, 3, 2),
        ] {
            let a = data(n * m, 1);
            let b = data(n * p, 2);
            let y = data(m * p, 3);
            let mut o = vec![1.0; m * p];
            gemm_tn(&mut o, &a, n, m, &b, p, t);
            close(&o, &naive_tn(&a, n, m, &b, p), n as f64);
            let mut o = vec![1.0; n * p];
            gemm_nn(&mut o, &a, n, m, &y, p, t);
            let want = naive_nn(&a, n, m, &y, p);
            close(&o, &want, m as f64);
            let mut c = want.clone();
            gemm_sub(&mut c, &a, n, m, &y, p, t);
            close(&c, &vec![0.0; n * p], m as f64);
            if p <= m {
                let mut ip = a.clone();
                let mut buf = vec![0.0; ROWS_IN_PLACE * p];
                gemm_nn_in_place(&mut ip, n, m, &y, p, &mut buf, t);
                close(&ip[..n * p], &want, m as f64);
            }
        }
    }

    #[test]
    fn sub_then_tn_matches_its_two_products() {
        // row blocks of 64 to ROWS rows: short, ragged and split over threads
        for &(n, m, p, t) in &[
            (1, 1, 1, 1),
            (77, 5, 3, 1),
            (3 * ROWS + 13, 9, 8, 1),
            (40_009, 300, 8, 2),
            (100, 0, 3, 2),
        ] {
            let a = data(n * m, 1);
            let b = data(n * m, 4);
            let c0 = data(n * p, 2);
            let y = data(m * p, 3);
            let mut c = c0.clone();
            let mut out = vec![7.0; m * p];
            sub_then_tn(&mut c, &a, &b, n, m, &y, p, &mut out, t);
            let mut want_c = c0.clone();
            let ay = naive_nn(&a, n, m, &y, p);
            want_c.iter_mut().zip(&ay).for_each(|(w, v)| *w -= v);
            close(&c, &want_c, m as f64);
            close(&out, &naive_tn(&b, n, m, &want_c, p), (n * m) as f64);
        }
    }

    #[test]
    fn ritz_residuals_in_one_pass() {
        for (n, t) in [(ROWS + 77, 1), (40_009, 2)] {
            ritz_residuals_case(n, t);
        }
    }

    fn ritz_residuals_case(n: usize, t: usize) {
        let (m, p) = (8, 3);
        let v = data(n * m, 4);
        let w = data(n * m, 5);
        let y = data(m * p, 6);
        let theta = [0.5, -1.0, 2.0];
        let (mut x, mut r, mut nr) = (vec![0.0; n * p], vec![0.0; n * p], vec![0.0; p]);
        assert!(t == 1 || n * m >= PAR_MIN_ENTRIES);
        ritz_residuals(&mut x, &mut r, &mut nr, &v, &w, n, m, &y, &theta, t);
        let xw = naive_nn(&v, n, m, &y, p);
        let mut rw = naive_nn(&w, n, m, &y, p);
        for j in 0..p {
            for q in 0..n {
                rw[j * n + q] -= theta[j] * xw[j * n + q];
            }
            let want: f64 = rw[j * n..(j + 1) * n].iter().map(|v| v * v).sum();
            assert!((nr[j] - want).abs() <= 1e-12 * want);
        }
        close(&x, &xw, m as f64);
        close(&r, &rw, m as f64);
    }
}
