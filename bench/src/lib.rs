//! Benchmark and experiment harness for jdmg (see `bench/README` sections in the
//! top-level README).

/// Median of the finite values of `v` (the mean of the middle two for an even
/// count); NaN when there is none. The one median of every bench binary.
pub fn median<T: std::borrow::Borrow<f64>>(v: impl IntoIterator<Item = T>) -> f64 {
    let mut s: Vec<f64> = v
        .into_iter()
        .map(|x| *x.borrow())
        .filter(|x| x.is_finite())
        .collect();
    s.sort_by(f64::total_cmp);
    let k = s.len();
    match k {
        0 => f64::NAN,
        _ if k % 2 == 1 => s[k / 2],
        _ => 0.5 * (s[k / 2 - 1] + s[k / 2]),
    }
}

pub mod reproduce;
