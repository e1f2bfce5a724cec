//! The "optimal" number of inner steps m of McCombs et al. §4.
//!
//! The paper iterates BiCGSTAB to the guideline threshold 2^−iter (iter = outer
//! iteration) and turns that threshold into a step count with the classical
//! Conjugate Gradient bound ‖e_j‖ ≤ 2 ρ^j ‖e_0‖, ρ = (√κ − 1)/(√κ + 1): m is the
//! smallest count whose bound reaches 2^−iter, capped by `maxits` (its runs used
//! m = 150). In a balanced correction phase T is the time the fastest solve group
//! needs for m steps (`lb_decide(optits, LB_USE_FASTEST)`); unbalanced, every
//! group runs at most m steps (stopping earlier at 2^−iter).
//!
//! The rule, as implemented:
//! * κ of the projected correction operator (I − xxᵀ)(A − θI)(I − xxᵀ) for the Ritz
//!   value θ: the spread max(‖A‖, max|θ_j − θ|) over the gap to the nearest Ritz
//!   value of another cluster (Ritz values within [`CLUSTER`]·spread of θ are taken
//!   as copies of its eigenvalue: the residual has little along them), the gap
//!   bounded below by the residual norm ‖r‖ (an early, inaccurate pair should not
//!   ask for a long solve);
//! * the CG bound counts products with the operator; a BiCGSTAB step applies it
//!   twice, so m = ⌈j_CG / 2⌉;
//! * a solve never has to go below its absolute floor (0.1·tol, where it stops),
//!   so the reduction asked is max(2^−iter, floor/‖r‖);
//! * m is clamped to `[1, maxits]`.

/// Inner step cap of BiCGSTAB in solve groups (coarse grain / multigrain) when
/// `maxits` is not given: the paper's m = 150 (McCombs et al. §4, Table 1 runs).
pub const DEFAULT_MAXITS_GROUPS: usize = 150;

/// Relative distance (to the spectral spread) under which Ritz values count as one
/// cluster in [`kappa_estimate`]: κ stays below 1/CLUSTER unless the residual is
/// smaller still.
pub const CLUSTER: f64 = 1e-3;

/// Products with the operator per BiCGSTAB step.
const PRODUCTS_PER_STEP: f64 = 2.0;

/// Estimated condition number of the correction equation of the Ritz value
/// `theta` (scaled units), given every current Ritz value `ritz` (which may
/// include `theta` itself), a norm estimate `anorm` and the residual norm
/// `rnorm` of the pair. At least 1.
pub fn kappa_estimate(theta: f64, ritz: &[f64], anorm: f64, rnorm: f64) -> f64 {
    let mut spread = anorm.abs();
    for &t in ritz {
        spread = spread.max((t - theta).abs());
    }
    // Ritz values closer than CLUSTER·spread approximate the same eigenvalue
    // (copies of a multiple one): the residual has little along them
    let mut gap = f64::INFINITY;
    for &t in ritz {
        let d = (t - theta).abs();
        if d > CLUSTER * spread {
            gap = gap.min(d);
        }
    }
    // no other Ritz value: the residual alone bounds the gap
    let gap = if gap.is_finite() {
        gap.max(rnorm.abs())
    } else {
        rnorm.abs()
    };
    if !(gap.is_finite() && gap > 0.0 && spread.is_finite()) {
        return 1.0;
    }
    (spread / gap).max(1.0)
}

/// The smallest BiCGSTAB step count m whose CG bound 2ρ^(2m) reaches 2^−`iter`
/// for condition number `kappa`, clamped to `[1, maxits]` (McCombs et al. §4).
/// `maxits = 0` gives 0 (Davidson steps).
pub fn optimal_steps(iter: usize, kappa: f64, maxits: usize) -> usize {
    optimal_steps_to(0.5f64.powi(iter.min(2000) as i32), kappa, maxits)
}

/// [`optimal_steps`] for a residual reduction `reduction` in (0, 1] instead of
/// 2^−iter (a solve that only has to reach an absolute floor needs less). A
/// reduction of 1 or more gives 1 step; NaN or ≤ 0 gives `maxits`.
pub fn optimal_steps_to(reduction: f64, kappa: f64, maxits: usize) -> usize {
    if maxits == 0 {
        return 0;
    }
    if reduction.is_nan() || reduction <= 0.0 {
        return maxits;
    }
    if reduction >= 1.0 {
        return 1;
    }
    let kappa = if kappa.is_finite() {
        kappa.max(1.0)
    } else {
        1e300
    };
    let sk = kappa.sqrt();
    let rho = (sk - 1.0) / (sk + 1.0);
    if rho <= 0.0 {
        return 1;
    }
    // 2 ρ^j ≤ reduction  ⇔  j ≥ ln(2 / reduction) / (−ln ρ)
    let need = (2.0 / reduction).ln();
    let lr = -rho.ln();
    if !(lr > 0.0 && lr.is_finite()) {
        return maxits;
    }
    let j = need / lr;
    let m = (j / PRODUCTS_PER_STEP).ceil();
    if !m.is_finite() || m >= maxits as f64 {
        maxits
    } else {
        (m as usize).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CG bound itself: 2ρ^(2m) ≤ 2^−iter at m, and not at m − 1.
    #[test]
    fn steps_reach_the_threshold_and_no_fewer_do() {
        for &kappa in &[2.0, 40.0, 400.0, 1e4, 1e6] {
            for iter in [1usize, 3, 10, 25] {
                let m = optimal_steps(iter, kappa, usize::MAX);
                let sk = f64::sqrt(kappa);
                let rho = (sk - 1.0) / (sk + 1.0);
                let bound = |m: usize| 2.0 * rho.powi(2 * m as i32);
                let goal = 0.5f64.powi(iter as i32);
                assert!(
                    bound(m) <= goal * (1.0 + 1e-12),
                    "κ {kappa} iter {iter} m {m}"
                );
                if m > 1 {
                    assert!(
                        bound(m - 1) > goal,
                        "κ {kappa} iter {iter}: m {m} not minimal"
                    );
                }
            }
        }
    }

    /// m grows with the outer iteration and with κ, and maxits caps it.
    #[test]
    fn grows_with_iteration_and_conditioning_capped_by_maxits() {
        // lap3d:30-like: ‖A‖ 12, gap 0.03 → κ 400, √κ = 20, −ln ρ ≈ 0.1.
        assert_eq!(optimal_steps(1, 400.0, 150), 7);
        assert_eq!(optimal_steps(10, 400.0, 150), 39);
        assert_eq!(optimal_steps(40, 400.0, 150), 142);
        assert_eq!(optimal_steps(60, 400.0, 150), 150);
        assert_eq!(optimal_steps(10, 1e8, 150), 150);
        assert_eq!(optimal_steps(10, 1.0, 150), 1);
        assert_eq!(optimal_steps(10, f64::NAN, 150), 150);
        assert_eq!(optimal_steps(5, 400.0, 0), 0);
        // an absolute floor close to the residual needs fewer steps than 2^−40
        assert_eq!(optimal_steps_to(0.5f64.powi(40), 400.0, 150), 142);
        assert_eq!(optimal_steps_to(0.01, 400.0, 150), 27);
        assert_eq!(optimal_steps_to(1.5, 400.0, 150), 1);
        assert_eq!(optimal_steps_to(f64::NAN, 400.0, 150), 150);
    }

    #[test]
    fn kappa_from_spread_over_gap_with_the_residual_as_floor() {
        let ritz = [0.1, 0.3, 0.35, 2.0];
        // θ = 0.3: nearest other Ritz value 0.35 (gap 0.05), spread max(12, 1.7) = 12
        assert!((kappa_estimate(0.3, &ritz, 12.0, 1e-6) - 240.0).abs() < 1e-9);
        // a residual larger than the gap bounds κ
        assert!((kappa_estimate(0.3, &ritz, 12.0, 0.5) - 24.0).abs() < 1e-9);
        // copies within CLUSTER·spread do not count: the gap is to 2.0
        let copies = [0.3, 0.3 + 1e-6, 0.3 + 2e-6, 2.0];
        assert!((kappa_estimate(0.3, &copies, 12.0, 1e-8) - 12.0 / 1.7).abs() < 1e-9);
        // a lone Ritz value: κ = spread / ‖r‖
        assert!((kappa_estimate(1.0, &[1.0], 10.0, 0.1) - 100.0).abs() < 1e-9);
        assert_eq!(kappa_estimate(1.0, &[1.0], 10.0, 0.0), 1.0);
    }
}
