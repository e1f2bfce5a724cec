//! Predicted execution times of Boudet et al. §3 (Tables 4 and 5, Figures 6–9):
//! `t_cyclic`, `t_optimal`, `t_theoretical`, and a unit-task level simulator
//! to compare column-block layouts.

use serde::{Deserialize, Serialize};

use super::{at_least, incremental_dp, validate_times, AllocError};

/// Predicted average time per column block for a set of cycle-times, as in
/// the tables of `000` §3 (Table 4 for *lip*, Table 5 for *lhpc*).
///
/// All three figures are "time per column block" in the units of the
/// cycle-times:
/// * `per_b[B-1]` = `cost(C_B) = max_i c_i t_i / B` of the DP allocation for
///   `B` chunks (rows "B = 1" .. "B = 9" of the tables); this is
///   `t_theoretical` for slice size `B`;
/// * `t_optimal = 1 / sum_i (1/t_i)` (row "B = ∞");
/// * `t_cyclic = t_q / p`, `q` the slowest processor (row "Cyclic(p)").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PredictedTimes {
    /// Cycle-times the figures were computed for.
    pub times: Vec<f64>,
    /// `per_b[B-1]`: average time per block of the DP allocation for `B` chunks.
    pub per_b: Vec<f64>,
    /// `selected[B-1]`: processor chosen for chunk `B` (tables' second column).
    pub selected: Vec<usize>,
    /// `1 / sum_i 1/t_i`: the perfectly balanced time per block.
    pub t_optimal: f64,
    /// `t_q / p`: time per block of the purely cyclic distribution, imposed
    /// by the slowest processor `q`.
    pub t_cyclic: f64,
    /// Index of the slowest processor `q` (lowest index on ties).
    pub slowest: usize,
}

impl PredictedTimes {
    /// `t_theoretical` for slice size `b` (`000` §3:
    /// `max_i c_i t_i / B`); `None` if `b` is 0 or beyond the computed range.
    pub fn t_theoretical(&self, b: usize) -> Option<f64> {
        b.checked_sub(1).and_then(|i| self.per_b.get(i)).copied()
    }

    /// `t_cyclic / t_optimal = (t_q / p) * sum_i 1/t_i`: the best speed-up a
    /// heterogeneous distribution can give over cyclic(p) (`000` §3, ratio
    /// printed under Figures 6–9; 1.6 for *lip* LU).
    pub fn cyclic_over_optimal(&self) -> f64 {
        self.t_cyclic / self.t_optimal
    }

    /// `t_cyclic / t_theoretical(b)`: predicted speed-up of the hetero(B)
    /// distribution over cyclic(p). `None` as for [`t_theoretical`](Self::t_theoretical).
    pub fn cyclic_over_theoretical(&self, b: usize) -> Option<f64> {
        self.t_theoretical(b).map(|t| self.t_cyclic / t)
    }

    /// The paper's formulas scaled to a *measured* cyclic(p) time:
    /// `t_optimal ≈ 1/(sum 1/t_i) * p/t_q * t_cyclic(p)` and
    /// `t_theoretical ≈ max c_i t_i / B * p/t_q * t_cyclic(p)`. Returns
    /// `(t_optimal, t_theoretical(b))`, `None` if `b` is out of range.
    pub fn scaled_to_measured(&self, measured_cyclic: f64, b: usize) -> Option<(f64, f64)> {
        let th = self.t_theoretical(b)?;
        let scale = measured_cyclic / self.t_cyclic;
        Some((self.t_optimal * scale, th * scale))
    }
}

/// Computes the [`PredictedTimes`] of `000` §3 for slice sizes `1..=max_b`.
///
/// # Errors
/// [`AllocError::Empty`] / [`AllocError::BadTime`] for bad `times`;
/// [`AllocError::TooSmall`] if `max_b == 0`.
pub fn predicted_times(times: &[f64], max_b: usize) -> Result<PredictedTimes, AllocError> {
    validate_times(times, "times")?;
    let dp = incremental_dp(times, max_b)?;
    let inv_sum: f64 = times.iter().map(|t| 1.0 / t).sum();
    let mut slowest = 0;
    for (i, &t) in times.iter().enumerate() {
        if t > times[slowest] {
            slowest = i;
        }
    }
    Ok(PredictedTimes {
        times: times.to_vec(),
        per_b: dp.costs.clone(),
        selected: dp.owners.clone(),
        t_optimal: 1.0 / inv_sum,
        t_cyclic: times[slowest] / times.len() as f64,
        slowest,
    })
}

/// The purely cyclic column-block layout of ScaLAPACK's CYCLIC(r) over `p`
/// processors: `owner(j) = j mod p` (`000` §2.2, the baseline of Tables 4–5).
///
/// # Errors
/// [`AllocError::TooSmall`] if `p == 0`.
pub fn pure_cyclic_layout(p: usize, n_blocks: usize) -> Result<Vec<usize>, AllocError> {
    at_least("number of processors", p, 1)?;
    Ok((0..n_blocks).map(|j| j % p).collect())
}

/// Predicted LU/QR time of a static column-block layout with unit tasks and
/// no communication (the computation model of `000` §2.2 and §4.3): at each
/// step `k` the owner of block `k` factors it (`t_owner`), then every
/// processor updates its blocks `j > k` (`max_i c_i(k) t_i`); steps are
/// synchronous. `owners[j]` is the processor (0-based) of block `j`.
///
/// # Errors
/// Bad `times` as in [`predicted_times`]; [`AllocError::BadOwner`] if an
/// owner is not a valid index.
pub fn simulate_lu(times: &[f64], owners: &[usize]) -> Result<f64, AllocError> {
    validate_times(times, "times")?;
    let p = times.len();
    if let Some((block, &owner)) = owners.iter().enumerate().find(|(_, &o)| o >= p) {
        return Err(AllocError::BadOwner { block, owner, p });
    }
    // Walk the steps backwards so the suffix counts are built incrementally.
    let mut counts = vec![0usize; p];
    let mut total = 0.0;
    for k in (0..owners.len()).rev() {
        let update = counts
            .iter()
            .zip(times)
            .map(|(&c, &t)| c as f64 * t)
            .fold(0.0, f64::max);
        total += times[owners[k]] + update;
        counts[owners[k]] += 1;
    }
    Ok(total)
}

/// Update work of every processor at LU/QR step `k` (0-based) of a static
/// column-block layout: `load_i = t_i * #{j > k : owners[j] = i}` (`000`
/// §2.2, Figure 2). With the matrix-product allocation `(40, 24, 14)` of
/// `t = (3, 5, 8)` laid out contiguously over 78 blocks, step 33 (1-based)
/// gives `(21, 120, 112)`: "processor 1 has 7 updates and works for
/// 7 x 3 = 21 units of time, while processor 2 works 24 x 5 = 120".
///
/// # Errors
/// Bad `times` as in [`predicted_times`]; [`AllocError::BadOwner`] for an
/// invalid owner; [`AllocError::BlockOutOfRange`] if `k >= owners.len()`.
pub fn update_loads(times: &[f64], owners: &[usize], k: usize) -> Result<Vec<f64>, AllocError> {
    validate_times(times, "times")?;
    let p = times.len();
    if let Some((block, &owner)) = owners.iter().enumerate().find(|(_, &o)| o >= p) {
        return Err(AllocError::BadOwner { block, owner, p });
    }
    if k >= owners.len() {
        return Err(AllocError::BlockOutOfRange {
            index: k,
            n: owners.len(),
        });
    }
    let mut loads = vec![0.0; p];
    for &o in &owners[k + 1..] {
        loads[o] += times[o];
    }
    Ok(loads)
}
