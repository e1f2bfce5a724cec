//! Singular triplets of a complex sparse matrix by [`crate::svds`] on its real
//! embedding ([`matrices::complex`]).
//!
//! The embedding of an m×n complex A is the real 2m×2n matrix with A's
//! singular values, each twice, and the embedding of Aᴴ is its transpose. So
//! the real two-stage method runs on it asked for twice the triplets; the
//! complex triplets come back from the complex span Q of the vectors of the
//! smaller side (the right ones for a tall A): the thin SVD of A·Q (of Aᴴ·Q
//! for a wide A) gives σ and both vectors, whose residuals are recomputed.

use faer::{c64, Mat};
use matrices::complex::{deinterleave, ComplexCsr};

use crate::error::JdError;
use crate::hermitian::{fix_phase, mul_mat, span_basis};
use crate::solution::Outcome;
use crate::svd::{svds, SvdError, SvdParams, SvdSolution, SvdWhich};

/// The `params.nsv` largest or smallest singular triplets of the complex `a`
/// (any shape), on one process. The returned [`SvdSolution`] holds the
/// vectors interleaved (`u`: 2·nrows real numbers per vector, the memory of
/// `nrows` [`c64`]; read them with [`matrices::complex::deinterleave`]);
/// `nrows` and `ncols` are A's.
///
/// # Errors
/// As [`svds`]; [`JdError::Factorization`] when a dense SVD of the recovery
/// fails.
pub fn svds_complex(a: &ComplexCsr, params: &SvdParams) -> Result<SvdSolution, SvdError> {
    let (m, n) = (a.nrows(), a.ncols());
    if params.nsv == 0 || params.nsv > m.min(n) {
        return Err(JdError::InvalidParams {
            field: "nsv",
            reason: format!("{} is not in 1..={}", params.nsv, m.min(n)),
        }
        .into());
    }
    let embedding = a.real_embedding().map_err(|e| JdError::InvalidParams {
        field: "matrix",
        reason: format!("the real embedding: {e}"),
    })?;
    let inner = SvdParams {
        nsv: params.nsv * 2,
        block: params.block.saturating_mul(2),
        ..params.clone()
    };
    let real = svds(&embedding, &inner)?;
    let tall = m >= n;
    let (side, p) = (if tall { n } else { m }, real.values.len());
    let x = Mat::from_fn(side, p, |i, j| {
        let w = if tall { real.right(j) } else { real.left(j) };
        c64::new(w[2 * i], w[2 * i + 1])
    });
    let q = span_basis(&x, &x)?;
    let adjoint = (!tall).then(|| a.adjoint());
    let b = mul_mat(adjoint.as_ref().unwrap_or(a), &q);
    let svd = b
        .thin_svd()
        .map_err(|e| JdError::Factorization(format!("the SVD of A·Q: {e:?}")))?;
    let sigma: Vec<f64> = (0..q.ncols())
        .map(|j| svd.S().column_vector()[j].re)
        .collect();
    let mut order: Vec<usize> = (0..sigma.len()).collect();
    match params.which {
        SvdWhich::Largest => order.sort_by(|&i, &j| sigma[j].total_cmp(&sigma[i])),
        SvdWhich::Smallest => order.sort_by(|&i, &j| sigma[i].total_cmp(&sigma[j])),
    }
    let keep = p.div_ceil(2).min(order.len());
    // B = A Q = U Σ Wᴴ: u = U, v = Q W (wide: the roles of u and v swap).
    let (near, far) = (&q * svd.V(), svd.U().to_owned());
    let (vs, us) = if tall { (near, far) } else { (far, near) };
    let mut out = real;
    out.values = order[..keep].iter().map(|&j| sigma[j]).collect();
    out.u = Vec::with_capacity(2 * m * keep);
    out.v = Vec::with_capacity(2 * n * keep);
    for &j in &order[..keep] {
        let mut v: Vec<c64> = (0..n).map(|i| vs[(i, j)]).collect();
        let mut u: Vec<c64> = (0..m).map(|i| us[(i, j)]).collect();
        // One phase for both vectors keeps A v = σ u.
        let before = v.clone();
        fix_phase(&mut v);
        let phase = phase_between(&before, &v);
        for z in u.iter_mut() {
            *z *= phase;
        }
        out.v.extend(v.iter().flat_map(|z| [z.re, z.im]));
        out.u.extend(u.iter().flat_map(|z| [z.re, z.im]));
    }
    out.nrows = m;
    out.ncols = n;
    out.wanted = params.nsv;
    let ah = a.adjoint();
    out.residual_norms = (0..keep)
        .map(|j| {
            let u = deinterleave(&out.u[2 * m * j..2 * m * (j + 1)]);
            let v = deinterleave(&out.v[2 * n * j..2 * n * (j + 1)]);
            triplet_residual(a, &ah, out.values[j], &u, &v)
        })
        .collect();
    let bound = params.tol * out.stats.anorm;
    out.converged = out.residual_norms.iter().map(|&r| r <= bound).collect();
    if out.outcome == Outcome::Converged && (out.converged.iter().any(|c| !c) || keep < params.nsv)
    {
        out.outcome = Outcome::Incomplete;
    }
    out.stats.products += 2 * keep as u64 + q.ncols() as u64;
    Ok(out)
}

/// The unit scalar c with `after = c·before` (1 for a zero vector).
fn phase_between(before: &[c64], after: &[c64]) -> c64 {
    let (k, b) = before
        .iter()
        .enumerate()
        .max_by(|x, y| x.1.norm_sqr().total_cmp(&y.1.norm_sqr()))
        .map_or((0, c64::new(0.0, 0.0)), |(k, b)| (k, *b));
    if b.norm() > 0.0 {
        after[k] / b
    } else {
        c64::new(1.0, 0.0)
    }
}

/// (‖Av − σu‖² + ‖Aᴴu − σv‖²)^½.
fn triplet_residual(a: &ComplexCsr, ah: &ComplexCsr, sigma: f64, u: &[c64], v: &[c64]) -> f64 {
    let mut av = vec![c64::new(0.0, 0.0); a.nrows()];
    let mut ahu = vec![c64::new(0.0, 0.0); a.ncols()];
    a.mul_vec(v, &mut av);
    ah.mul_vec(u, &mut ahu);
    let left: f64 = av
        .iter()
        .zip(u)
        .map(|(x, y)| (x - y * sigma).norm_sqr())
        .sum();
    let right: f64 = ahu
        .iter()
        .zip(v)
        .map(|(x, y)| (x - y * sigma).norm_sqr())
        .sum();
    (left + right).sqrt()
}
