//! Internal scaling of the operator, so that any finite matrix whose eigenvalues
//! fit in f64 is solved: squared residual norms of a matrix scaled by 1e-200
//! underflow to 0 and those of one scaled by 1e200 overflow, so the solver works
//! with s·A for a power of two s that brings ‖A‖ near 1, and reports λ/s.

use std::cell::Cell;

use precond::Operator;

/// Below this estimate of ‖A‖ the operator is scaled up.
pub(crate) const SCALE_BELOW: f64 = 1e-100;
/// Above this estimate of ‖A‖ the operator is scaled down.
pub(crate) const SCALE_ABOVE: f64 = 1e100;

/// `s·A` for a power of two `s` (exact: no rounding is added); `s = 1` until
/// [`ScaledOperator::set_scale`].
pub(crate) struct ScaledOperator<'a, A: ?Sized> {
    pub a: &'a A,
    s: Cell<f64>,
    /// Seconds spent in `apply_block` so far.
    seconds: Cell<f64>,
}

impl<'a, A: Operator + ?Sized> ScaledOperator<'a, A> {
    pub fn new(a: &'a A) -> Self {
        Self {
            a,
            s: Cell::new(1.0),
            seconds: Cell::new(0.0),
        }
    }
    /// Seconds spent in products since the last call (then reset).
    pub fn take_seconds(&self) -> f64 {
        self.seconds.replace(0.0)
    }
    pub fn scale(&self) -> f64 {
        self.s.get()
    }
    pub fn set_scale(&self, s: f64) {
        self.s.set(s);
    }
}

impl<A: Operator + ?Sized> Operator for ScaledOperator<'_, A> {
    fn nrows(&self) -> usize {
        self.a.nrows()
    }
    fn work_per_vector(&self) -> f64 {
        self.a.work_per_vector()
    }
    fn apply_block(&self, x: &[f64], y: &mut [f64], k: usize) {
        let t0 = std::time::Instant::now();
        self.a.apply_block(x, y, k);
        let s = self.s.get();
        if s != 1.0 {
            y.iter_mut().for_each(|v| *v *= s);
        }
        self.seconds
            .set(self.seconds.get() + t0.elapsed().as_secs_f64());
    }
}

/// The power of two that brings `estimate` (a rough ‖A‖) to about 1, or 1 when
/// `estimate` is 0, not finite, or already inside [`SCALE_BELOW`, `SCALE_ABOVE`].
/// The exponent stays within ±[`MAX_SCALE_EXP`], so that the scale is a normal
/// number: an estimate of 1e-310 (subnormal entries) gets 2^1000, which brings
/// ‖A‖ to about 1e-9, inside the safe range (2^1030 would be infinite).
pub(crate) fn scale_for(estimate: f64) -> f64 {
    if !(estimate.is_finite() && estimate > 0.0) || (SCALE_BELOW..=SCALE_ABOVE).contains(&estimate)
    {
        return 1.0;
    }
    let e = (estimate.log2().round() as i32).clamp(-MAX_SCALE_EXP, MAX_SCALE_EXP);
    2f64.powi(-e)
}

/// Largest |exponent| of the internal scale (see [`scale_for`]).
const MAX_SCALE_EXP: i32 = 1000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_is_a_power_of_two_only_outside_the_safe_range() {
        assert_eq!(scale_for(12.0), 1.0);
        assert_eq!(scale_for(0.0), 1.0);
        assert_eq!(scale_for(f64::NAN), 1.0);
        let s = scale_for(4e-200);
        assert_eq!(s.log2().fract(), 0.0);
        assert!((s * 4e-200 - 1.0).abs() < 1.0);
        let s = scale_for(3e300);
        assert!((0.5..2.0).contains(&(s * 3e300)));
        // subnormal: the largest normal power of two the range allows, finite
        let s = scale_for(1e-310);
        assert_eq!(s, 2f64.powi(1000));
        assert!((SCALE_BELOW..=SCALE_ABOVE).contains(&(s * 1e-310)));
        assert_eq!(scale_for(f64::MIN_POSITIVE / 4.0), 2f64.powi(1000));
    }
}
