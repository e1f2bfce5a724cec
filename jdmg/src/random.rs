//! Start vectors that do not depend on the number of processes: entry (i, j) is a
//! hash of (seed, global row i, column j).

/// SplitMix64 finalizer.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Uniform value in [−0.5, 0.5) for global row `row` of vector `col`.
pub(crate) fn entry(seed: u64, row: usize, col: u64) -> f64 {
    let h = mix(mix(seed ^ mix(col.wrapping_mul(0xA24B_AED4_963E_E407))) ^ row as u64);
    (h >> 11) as f64 / (1u64 << 53) as f64 - 0.5
}

/// Fills `out` (local rows starting at global row `row_offset`) with vector `col`.
pub(crate) fn fill(out: &mut [f64], seed: u64, row_offset: usize, col: u64) {
    for (i, v) in out.iter_mut().enumerate() {
        *v = entry(seed, row_offset + i, col);
    }
}
