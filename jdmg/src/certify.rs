//! The completeness certificate of an interior solve (`Target::Closest(σ)`)
//! by Sylvester's law of inertia, and its repair by shift-and-invert.
//!
//! An exterior solve can check that no eigenvalue was missed from inside the
//! wanted set with a Krylov probe (min-max makes its evidence sure). Around an
//! interior σ there is no such principle: a search space built from one
//! vector (block size 1, a preconditioner that is a polynomial in A) holds
//! one copy of each multiple eigenvalue, and a verification pass from a
//! random vector converges wherever its Krylov space is good, not
//! necessarily near σ (lap3d:10, σ = 1.09, nev 9, block 1 locked one of the
//! six copies of 1.0888, and its pass converged to 0.716). Counting settles
//! it: with the LDLᵀ factorizations of A − (σ − r)I and A − (σ + r)I, the
//! numbers of negative pivots differ by the number of eigenvalues in
//! (σ − r, σ + r) (Sylvester's law of inertia; for K x = λ M x with M positive
//! definite, of K − (σ ± r)M). This is how SLEPc's spectrum slicing certifies
//! its counts (Campos and Roman, "Strategies for spectrum slicing based on
//! restarted Lanczos methods", 2012, §2).
//!
//! The radius r lies just inside the boundary of the returned set: below the
//! cluster of the farthest returned values by more than their error bounds,
//! above every returned value nearer to σ by as much. Every eigenvalue in
//! (σ − r, σ + r) must then be among the returned ones. When some are not,
//! a shift-and-invert solve at σ deflated by the returned eigenvectors finds
//! exactly the missing ones (they are the nearest to σ in the orthogonal
//! complement), and the returned set is rebuilt from both.

use crate::params::{BasisSettings, ProblemSettings};
use lblib::{Comm, ReduceOp};
use matrices::CsrMatrix;
use std::time::Instant;

use crate::error::JdError;
use crate::jd::{Hooks, Spaces};
use crate::params::{JdParams, Verify};
pub use crate::solution::Certificate;
use crate::solution::{Outcome, Solution};
use crate::st::{FactorKind, ShiftInvert};

/// The number of eigenvalues of A (of (K, M)) below `shift`, from the LDLᵀ
/// factorization of A − shift·I on rank 0, shared; None when LDLᵀ is not
/// backward stable there (it does not pivot) or fails. Collective.
pub(crate) fn count_below<C: Comm + ?Sized>(
    k: &CsrMatrix,
    mass: Option<&CsrMatrix>,
    shift: f64,
    threads: usize,
    comm: &C,
) -> Option<usize> {
    let mut head = [0u64];
    if comm.rank() == 0 {
        let f = match mass {
            None => ShiftInvert::with_kind(k, shift, FactorKind::Ldlt, threads),
            Some(m) => ShiftInvert::pencil_with_kind(k, m, shift, FactorKind::Ldlt, threads),
        };
        head[0] = f
            .ok()
            .and_then(|f| f.eigenvalues_below())
            .map_or(0, |b| b as u64 + 1);
    }
    comm.broadcast_u64(&mut head, 0);
    (head[0] > 0).then(|| (head[0] - 1) as usize)
}

/// The radius of the certificate for returned eigenvalues `lam` with error
/// bounds `bound` around σ, and how many returned values lie inside it;
/// None when nothing is returned.
///
/// The returned distances are grouped from the farthest inwards while
/// neighbours are closer than 2δ (δ: four times the largest bound, at least
/// the rounding level `floor`); r is the nearest of that boundary cluster less δ.
fn radius(sigma: f64, lam: &[f64], bound: &[f64], floor: f64) -> Option<(f64, usize)> {
    let mut keys: Vec<f64> = lam.iter().map(|l| (l - sigma).abs()).collect();
    keys.sort_by(f64::total_cmp);
    keys.last()?;
    let delta = (4.0 * bound.iter().copied().fold(0.0, f64::max)).max(floor);
    let mut lo = keys.len() - 1;
    while lo > 0 && keys[lo] - keys[lo - 1] <= 2.0 * delta {
        lo -= 1;
    }
    let r = keys[lo] - delta;
    (r > 0.0).then_some((r, lo))
}

/// The global n × p block of this process's rows `x` (n_local × p, rows
/// from `offset`): every process gets every row (one global sum). Collective.
pub(crate) fn global_block<C: Comm + ?Sized>(
    comm: &C,
    x: &[f64],
    n_local: usize,
    offset: usize,
    n: usize,
    p: usize,
) -> Vec<f64> {
    let mut g = vec![0.0; n * p];
    for j in 0..p {
        g[j * n + offset..j * n + offset + n_local]
            .copy_from_slice(&x[j * n_local..(j + 1) * n_local]);
    }
    if comm.size() > 1 {
        comm.all_reduce(&mut g, ReduceOp::Sum);
    }
    g
}

/// Certifies by inertia that a converged solve for the eigenvalues closest to
/// `sigma` (`Target::Closest(σ)`, or shift-and-invert at σ) of the explicit
/// matrix `k` (with `mass`: of the pencil) returned every eigenvalue nearer
/// to σ than its farthest ones (see the module documentation), and repairs it
/// when it did not. Runs unless `params.verify` is `Never`, for solves without
/// deflation vectors of the caller's (the count would include their
/// eigenvalues); a solve that did not converge is returned as it is.
/// Collective over `comm`, the processes sharing the rows of the vectors.
///
/// When the count and the returned set disagree and the repair does not find
/// the missing eigenvalues, the solution is returned with
/// [`crate::Outcome::Incomplete`] and every pair flagged not converged.
///
/// # Errors
/// As [`crate::Solver::shift_invert`] for the repair.
pub(crate) fn certify<C: Comm + ?Sized>(
    res: Result<Solution, JdError>,
    k: &CsrMatrix,
    mass: Option<&CsrMatrix>,
    comm: &C,
    params: &JdParams,
    spaces: Spaces<'_>,
    sigma: f64,
) -> Result<Solution, JdError> {
    let mut sol = res?;
    if params.problem.verify == Verify::Never
        || !spaces.deflation.is_empty()
        || sol.eigenvalues.is_empty()
        || !sol.is_converged()
        || sol.nconverged() < sol.eigenvalues.len()
    {
        return Ok(sol);
    }
    let t0 = Instant::now();
    let p = sol.eigenvalues.len();
    sort_by_distance(&mut sol, sigma);
    let Some(first) = count(&sol, k, mass, comm, params, sigma) else {
        return Ok(sol);
    };
    let mut cert = Certificate {
        radius: first.radius,
        count: first.count,
        repaired: 0,
        seconds: 0.0,
    };
    if first.count < first.inside {
        // more returned than exist: duplicates among the returned vectors
        return Ok(not_certified(sol, cert, t0));
    }
    if first.count > first.inside {
        // Missed eigenvalues: the whole set anew by shift-and-invert, then
        // counted again around its own boundary.
        let missing = first.count - first.inside;
        let found = match repair(&sol, k, mass, comm, params, sigma) {
            Ok(found) if found.is_converged() && found.nconverged() == p => found,
            Ok(_) => return Ok(not_certified(sol, cert, t0)),
            Err(e) => return Err(e),
        };
        let stats = std::mem::take(&mut sol.stats);
        sol = Solution { stats, ..found };
        match count(&sol, k, mass, comm, params, sigma) {
            Some(c) if c.count == c.inside => {
                cert.radius = c.radius;
                cert.count = c.count;
            }
            Some(c) => {
                cert.radius = c.radius;
                cert.count = c.count;
                return Ok(not_certified(sol, cert, t0));
            }
            None => {}
        }
        sol.stats.missed_copies += missing;
        cert.repaired = missing;
    }
    cert.seconds = t0.elapsed().as_secs_f64();
    sol.stats.wall_seconds += cert.seconds;
    sol.stats.verified = Some(true);
    sol.stats.certificate = Some(cert);
    Ok(sol)
}

/// The count of [`count`]: eigenvalues in (σ − radius, σ + radius) by
/// inertia, and returned pairs inside.
struct Count {
    radius: f64,
    count: usize,
    inside: usize,
}

/// Counts the eigenvalues inside the radius of `sol`'s pairs (in order of
/// distance to σ) by inertia; None when there is no radius or LDLᵀ gives no
/// inertia at its ends. Collective.
fn count<C: Comm + ?Sized>(
    sol: &Solution,
    k: &CsrMatrix,
    mass: Option<&CsrMatrix>,
    comm: &C,
    params: &JdParams,
    sigma: f64,
) -> Option<Count> {
    let bound = error_bounds(sol, mass.is_some(), comm);
    let scale = sol.stats.anorm_estimate.max(sigma.abs());
    let floor = 64.0 * f64::EPSILON * scale;
    let (r, inside) = radius(sigma, &sol.eigenvalues, &bound, floor)?;
    let lo = count_below(k, mass, sigma - r, params.execution.threads, comm)?;
    let hi = count_below(k, mass, sigma + r, params.execution.threads, comm)?;
    Some(Count {
        radius: r,
        count: hi.saturating_sub(lo),
        inside,
    })
}

/// Error bounds of the returned eigenvalues of `sol`: ‖r‖ for a unit x;
/// with M (`pencil`), the residual ‖Kx − λMx‖/‖x‖ scaled by ‖x‖² (x
/// M-normalized: ‖x‖² ≈ 1/ρ_M(x)). One global sum. Collective.
pub(crate) fn error_bounds<C: Comm + ?Sized>(sol: &Solution, pencil: bool, comm: &C) -> Vec<f64> {
    let p = sol.eigenvalues.len();
    let nl = sol.n_local;
    let mut sq = vec![0.0; p];
    for (j, s) in sq.iter_mut().enumerate() {
        let x = &sol.eigenvectors[j * nl..(j + 1) * nl];
        *s = crate::dense::dot(x, x);
    }
    if comm.size() > 1 {
        comm.all_reduce(&mut sq, ReduceOp::Sum);
    }
    sol.residual_norms
        .iter()
        .zip(&sq)
        .map(|(r, s)| if pencil { r * s.max(1.0) } else { *r })
        .collect()
}

/// Puts the pairs of `sol` in order of distance to σ (stable).
fn sort_by_distance(sol: &mut Solution, sigma: f64) {
    let p = sol.eigenvalues.len();
    let nl = sol.n_local;
    let mut idx: Vec<usize> = (0..p).collect();
    idx.sort_by(|&a, &b| {
        (sol.eigenvalues[a] - sigma)
            .abs()
            .total_cmp(&(sol.eigenvalues[b] - sigma).abs())
    });
    if idx.iter().enumerate().all(|(i, &j)| i == j) {
        return;
    }
    sol.eigenvalues = idx.iter().map(|&j| sol.eigenvalues[j]).collect();
    sol.residual_norms = idx.iter().map(|&j| sol.residual_norms[j]).collect();
    sol.converged = idx.iter().map(|&j| sol.converged[j]).collect();
    sol.eigenvectors = idx
        .iter()
        .flat_map(|&j| sol.eigenvectors[j * nl..(j + 1) * nl].to_vec())
        .collect();
}

/// The solution of a failed certificate: [`Outcome::Incomplete`], every pair
/// flagged.
fn not_certified(mut sol: Solution, mut cert: Certificate, t0: Instant) -> Solution {
    cert.seconds = t0.elapsed().as_secs_f64();
    sol.stats.wall_seconds += cert.seconds;
    sol.converged.iter_mut().for_each(|c| *c = false);
    sol.stats.verified = Some(false);
    sol.stats.certificate = Some(cert);
    sol.outcome = Outcome::Incomplete;
    sol
}

/// The pairs of `sol` anew by shift-and-invert at σ, started from its
/// vectors: one solve, so that the vectors are orthonormal (returned pairs
/// kept beside new ones would be orthogonal only to residual over gap), and
/// an exterior one for (A − σI)⁻¹, whose verification is sure. Deflating the
/// returned vectors instead would bound the accuracy of the new pairs by
/// their residuals: Yᵀ(A − λI)x = ((A − λI)Y)ᵀx. Collective.
fn repair<C: Comm + ?Sized>(
    sol: &Solution,
    k: &CsrMatrix,
    mass: Option<&CsrMatrix>,
    comm: &C,
    params: &JdParams,
    sigma: f64,
) -> Result<Solution, JdError> {
    let p = sol.eigenvalues.len();
    let x0 = global_block(
        comm,
        &sol.eigenvectors,
        sol.n_local,
        sol.row_offset,
        k.nrows(),
        p,
    );
    // The repaired pairs meet the solve's own test (its estimate of ‖A‖);
    // hard locking, whose verification finds copies soft locking may miss.
    let sub = JdParams {
        problem: ProblemSettings {
            nev: p,
            anorm: params
                .problem
                .anorm
                .or(Some(sol.stats.anorm_estimate))
                .filter(|a| *a > 0.0),
            ..params.problem
        },
        basis: BasisSettings {
            locking: true,
            block: 0,
            max_basis: 0,
            restart_size: 0,
            ..params.basis
        },
        ..params.clone()
    };
    let spaces = Spaces {
        initial: &x0,
        deflation: &[],
    };
    let mut found = crate::st::run(k, mass, sigma, comm, &sub, spaces, Hooks::default())?;
    sort_by_distance(&mut found, sigma);
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn radius_stops_short_of_the_farthest_cluster() {
        // σ = 1: distances 0.1, 0.3, 0.5 0.5 (a double at the boundary)
        let lam = [1.1, 0.7, 1.5, 0.5];
        let (r, inside) = radius(1.0, &lam, &[1e-9; 4], 1e-14).unwrap();
        assert!((r - (0.5 - 4e-9)).abs() < 1e-15, "{r}");
        assert_eq!(inside, 2);
        // one cluster only: r just below it, nothing inside
        let (r, inside) = radius(1.0, &[1.5, 0.5], &[1e-9; 2], 1e-14).unwrap();
        assert!(r > 0.49 && r < 0.5);
        assert_eq!(inside, 0);
    }
}
