//! Small dense kernels of the projection phase: the tall-skinny products (see
//! [`crate::tall_skinny`]), the Rayleigh-Ritz eigenproblem (faer),
//! coefficient-space orthonormalization.

use faer::{MatRef, Par};

pub(crate) use crate::tall_skinny::{
    gemm_nn, gemm_nn_in_place, gemm_sub, gemm_tn, sub_then_tn, ROWS_IN_PLACE as IN_PLACE_ROWS,
};

/// Eigen-decomposition of the symmetric `m×m` matrix `h` (column-major, lower
/// triangle used): eigenvalues ascending and eigenvectors (column-major).
///
/// The matrix is first scaled by a power of two to entries of order one:
/// faer's solver loses accuracy on matrices of tiny norm (eigenvector
/// residuals of 1e-12·‖H‖ at ‖H‖ = 1e-11, as crystm01's projections).
///
/// Returns `None` if the dense solver fails (non-finite input).
pub(crate) fn sym_eig(h: &[f64], m: usize) -> Option<(Vec<f64>, Vec<f64>)> {
    if m == 0 {
        return Some((Vec::new(), Vec::new()));
    }
    if h[..m * m].iter().any(|v| !v.is_finite()) {
        return None;
    }
    let scale = power_of_two_scale(&h[..m * m]);
    let scaled: Vec<f64>;
    let h = if scale == 1.0 {
        &h[..m * m]
    } else {
        scaled = h[..m * m].iter().map(|v| v * scale).collect();
        &scaled
    };
    let a = MatRef::from_column_major_slice(h, m, m);
    let mut u = faer::Mat::<f64>::zeros(m, m);
    let mut s = faer::diag::Diag::<f64>::zeros(m);
    let par = Par::Seq;
    let req = faer::linalg::evd::self_adjoint_evd_scratch::<f64>(
        m,
        faer::linalg::evd::ComputeEigenvectors::Yes,
        par,
        Default::default(),
    );
    let mut buf = faer::dyn_stack::MemBuffer::new(req);
    let stack = faer::dyn_stack::MemStack::new(&mut buf);
    faer::linalg::evd::self_adjoint_evd(
        a,
        s.as_mut(),
        Some(u.as_mut()),
        par,
        stack,
        Default::default(),
    )
    .ok()?;
    let vals: Vec<f64> = (0..m).map(|i| s[i] / scale).collect();
    let mut vecs = vec![0.0; m * m];
    for j in 0..m {
        for i in 0..m {
            vecs[j * m + i] = u[(i, j)];
        }
    }
    Some((vals, vecs))
}

/// The power of two that brings the largest magnitude in `h` into [1, 2)
/// (exact: scaling by it rounds nothing); 1 for a zero matrix.
pub(crate) fn power_of_two_scale(h: &[f64]) -> f64 {
    let max = h.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    if max == 0.0 || !max.is_finite() {
        return 1.0;
    }
    // clamped so that the factor itself is a normal number
    let e = max.log2().floor().clamp(-1000.0, 1000.0);
    2f64.powi(-(e as i32))
}

/// Orthonormalizes the columns of `c` (m×p, column-major) in place by modified
/// Gram-Schmidt applied twice; columns that become dependent (relative norm below
/// `1e-10`) are dropped. Returns the number of columns kept (stored first).
pub(crate) fn orthonormalize_columns(c: &mut [f64], m: usize, p: usize) -> usize {
    let mut kept = 0;
    for j in 0..p {
        if kept != j {
            c.copy_within(j * m..(j + 1) * m, kept * m);
        }
        let norm0 = norm(&c[kept * m..(kept + 1) * m]);
        if norm0 == 0.0 {
            continue;
        }
        for _pass in 0..2 {
            for i in 0..kept {
                let (prev, cur) = c.split_at_mut(kept * m);
                let qi = &prev[i * m..(i + 1) * m];
                let col = &mut cur[..m];
                let d = dot(qi, col);
                axpy(-d, qi, col);
            }
        }
        let col = &mut c[kept * m..(kept + 1) * m];
        let nrm = norm(col);
        if nrm > 1e-10 * norm0 {
            col.iter_mut().for_each(|v| *v /= nrm);
            kept += 1;
        }
    }
    kept
}

/// Dot product of two equal-length local slices (vectorized, no global sum).
pub(crate) fn dot(a: &[f64], b: &[f64]) -> f64 {
    precond::krylov::dot(a, b)
}

/// Euclidean norm of a local slice (no global sum).
pub(crate) fn norm(a: &[f64]) -> f64 {
    dot(a, a).sqrt()
}

/// `y += alpha * x`.
pub(crate) fn axpy(alpha: f64, x: &[f64], y: &mut [f64]) {
    y.iter_mut().zip(x).for_each(|(yi, xi)| *yi += alpha * xi);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sym_eig_of_2x2() {
        // [[2,1],[1,2]] has eigenvalues 1 and 3.
        let (vals, vecs) = sym_eig(&[2.0, 1.0, 1.0, 2.0], 2).unwrap();
        assert!((vals[0] - 1.0).abs() < 1e-14 && (vals[1] - 3.0).abs() < 1e-14);
        let v0 = &vecs[0..2];
        assert!(
            (v0[0] + v0[1]).abs() < 1e-14,
            "eigenvector of 1 is (1,-1)/√2"
        );
    }

    #[test]
    fn sym_eig_of_a_tiny_scaled_matrix_with_multiple_eigenvalues() {
        // The 2-D Laplacian on a 16×16 grid (eigenvalues of multiplicity 2) times
        // 1e-12, as crystm01's projected matrices: residuals of every eigenvector
        // and the closed-form eigenvalues to a few ε‖H‖.
        let (g, scale) = (16, 1e-12);
        let m = g * g;
        let mut h = vec![0.0; m * m];
        for i in 0..g {
            for j in 0..g {
                let r = i * g + j;
                h[r * m + r] = 4.0 * scale;
                for (di, dj) in [(1, 0), (0, 1)] {
                    if i + di < g && j + dj < g {
                        let c = (i + di) * g + j + dj;
                        h[r * m + c] = -scale;
                        h[c * m + r] = -scale;
                    }
                }
            }
        }
        let (vals, vecs) = sym_eig(&h, m).unwrap();
        let norm = 8.0 * scale;
        let one_d = |k: usize| 2.0 - 2.0 * (k as f64 * std::f64::consts::PI / (g + 1) as f64).cos();
        let mut want: Vec<f64> = (1..=g)
            .flat_map(|a| (1..=g).map(move |b| (one_d(a) + one_d(b)) * scale))
            .collect();
        want.sort_by(f64::total_cmp);
        for (k, (&l, &w)) in vals.iter().zip(&want).enumerate() {
            assert!((l - w).abs() <= 1e-13 * norm, "eigenvalue {k}: {l} vs {w}");
            let u = &vecs[k * m..(k + 1) * m];
            let res = (0..m)
                .map(|r| {
                    let hu: f64 = (0..m).map(|c| h[c * m + r] * u[c]).sum();
                    (hu - l * u[r]).powi(2)
                })
                .sum::<f64>()
                .sqrt();
            assert!(res <= 1e-13 * norm, "eigenvector {k}: residual {res:e}");
        }
    }

    #[test]
    fn gemm_shapes() {
        // a = [[1,2],[3,4],[5,6]] (3×2), y = [[1],[1]] -> [3,7,11]
        let a = [1.0, 3.0, 5.0, 2.0, 4.0, 6.0];
        let mut out = [0.0; 3];
        gemm_nn(&mut out, &a, 3, 2, &[1.0, 1.0], 1, 1);
        assert_eq!(out, [3.0, 7.0, 11.0]);
        let mut g = [0.0; 4];
        gemm_tn(&mut g, &a, 3, 2, &a, 2, 1);
        assert_eq!(g, [35.0, 44.0, 44.0, 56.0]);
        let mut c = [3.0, 7.0, 11.0];
        gemm_sub(&mut c, &a, 3, 2, &[1.0, 1.0], 1, 1);
        assert_eq!(c, [0.0; 3]);
    }

    #[test]
    fn in_place_product_equals_out_of_place() {
        // More rows than one block, and a ragged last block.
        let (n, m, p) = (2 * IN_PLACE_ROWS + 37, 5, 3);
        let a: Vec<f64> = (0..n * m)
            .map(|i| ((i * 7919) % 1009) as f64 / 1009.0)
            .collect();
        let y: Vec<f64> = (0..m * p).map(|i| (i as f64 * 0.37).cos()).collect();
        let mut want = vec![0.0; n * p];
        gemm_nn(&mut want, &a, n, m, &y, p, 1);
        let mut got = a.clone();
        let mut buf = vec![0.0; IN_PLACE_ROWS * p];
        gemm_nn_in_place(&mut got, n, m, &y, p, &mut buf, 2);
        let err = got[..n * p]
            .iter()
            .zip(&want)
            .fold(0.0f64, |e, (g, w)| e.max((g - w).abs()));
        assert!(err < 1e-13, "in-place product differs by {err:e}");
    }

    #[test]
    fn mgs_drops_dependent() {
        let mut c = vec![1.0, 0.0, 0.0, 2.0, 0.0, 0.0, 1.0, 1.0, 0.0];
        let kept = orthonormalize_columns(&mut c, 3, 3);
        assert_eq!(kept, 2);
        assert!(dot(&c[0..3], &c[3..6]).abs() < 1e-15);
        assert!((norm(&c[3..6]) - 1.0).abs() < 1e-15);
    }
}
