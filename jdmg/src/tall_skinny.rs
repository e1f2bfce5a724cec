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

/// `out (m×p) = a (n×m)ᵀ · b (n×p)` (local part of a global inner product).
pub fn gemm_tn(out: &mut [f64], a: &[f64], n: usize, m: usize, b: &[f64], p: usize) {
    if m == 0 || p == 0 {
        return;
    }
    if n == 0 {
        out[..m * p].fill(0.0);
        return;
    }
    let dst = MatMut::from_column_major_slice_mut(&mut out[..m * p], m, p);
    let lhs = MatRef::from_column_major_slice(&a[..n * m], n, m);
    let rhs = MatRef::from_column_major_slice(&b[..n * p], n, p);
    matmul(dst, Accum::Replace, lhs.transpose(), rhs, 1.0, Par::Seq);
}

/// `out (n×p) = a (n×m) · y (m×p)`.
pub fn gemm_nn(out: &mut [f64], a: &[f64], n: usize, m: usize, y: &[f64], p: usize) {
    nn_strided(&mut out[..n * p], n, a, n, n, m, y, p, Update::Set);
}

/// `c (n×p) −= a (n×m) · y (m×p)`.
pub fn gemm_sub(c: &mut [f64], a: &[f64], n: usize, m: usize, y: &[f64], p: usize) {
    nn_strided(&mut c[..n * p], n, a, n, n, m, y, p, Update::Sub);
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

/// `out (n×p, leading dimension ldo) (= | += | −=) a (n×m, leading dimension lda) · y (m×p)`.
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
) {
    let p = theta.len();
    norms[..p].fill(0.0);
    if n == 0 || p == 0 {
        return;
    }
    let mut r0 = 0;
    while r0 < n {
        let rows = ROWS.min(n - r0);
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
pub fn gemm_nn_in_place(a: &mut [f64], n: usize, m: usize, y: &[f64], p: usize, buf: &mut [f64]) {
    debug_assert!(p <= m || n == 0);
    if n == 0 || p == 0 {
        return;
    }
    let mut r0 = 0;
    while r0 < n {
        let rows = ROWS_IN_PLACE.min(n - r0);
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
        for &(n, m, p) in &[
            (1, 1, 1),
            (7, 3, 5),
            (2 * ROWS + 13, 9, 6),
            (ROWS, 30, 4),
            (100, 0, 3),
        ] {
            let a = data(n * m, 1);
            let b = data(n * p, 2);
            let y = data(m * p, 3);
            let mut o = vec![1.0; m * p];
            gemm_tn(&mut o, &a, n, m, &b, p);
            close(&o, &naive_tn(&a, n, m, &b, p), n as f64);
            let mut o = vec![1.0; n * p];
            gemm_nn(&mut o, &a, n, m, &y, p);
            let want = naive_nn(&a, n, m, &y, p);
            close(&o, &want, m as f64);
            let mut c = want.clone();
            gemm_sub(&mut c, &a, n, m, &y, p);
            close(&c, &vec![0.0; n * p], m as f64);
            if p <= m {
                let mut ip = a.clone();
                let mut buf = vec![0.0; ROWS_IN_PLACE * p];
                gemm_nn_in_place(&mut ip, n, m, &y, p, &mut buf);
                close(&ip[..n * p], &want, m as f64);
            }
        }
    }

    #[test]
    fn ritz_residuals_in_one_pass() {
        let (n, m, p) = (ROWS + 77, 8, 3);
        let v = data(n * m, 4);
        let w = data(n * m, 5);
        let y = data(m * p, 6);
        let theta = [0.5, -1.0, 2.0];
        let (mut x, mut r, mut nr) = (vec![0.0; n * p], vec![0.0; n * p], vec![0.0; p]);
        ritz_residuals(&mut x, &mut r, &mut nr, &v, &w, n, m, &y, &theta);
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
