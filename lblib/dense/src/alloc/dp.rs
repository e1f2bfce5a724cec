//! The incremental dynamic programming of Boudet et al. §2.2 (Tables 2 and 3),
//! the "reverse" slice layout for LU/QR, and the optimized distribution of
//! Boudet et al. §4.4 (fastest processor takes every factor task and the update
//! just before it).

use serde::{Deserialize, Serialize};

use super::{at_least, makespan, strictly_less, validate_times, AllocError, Allocation};

/// Result of the incremental dynamic programming of `000` §2.2 (Table 2):
/// the optimal allocation for every number of chunks up to `B`, built one
/// chunk at a time.
///
/// Chunk `k` (1-based, after the `initial` chunks) goes to `owners[k-1]`,
/// chosen so that the cost of the new allocation is minimal (lowest index on
/// ties). With `initial` all zeros this is Table 2/3 of the paper; the
/// optimized distribution of `000` §4.4 starts from `initial = (2, 0, ..., 0)`
/// on the fastest processor ([`optimized_dp`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IncrementalDp {
    /// Cycle-times the table was computed for.
    pub times: Vec<f64>,
    /// Counts before the first chunk of the table (zeros for `000` §2.2).
    pub initial: Vec<usize>,
    /// `owners[k]`: processor (0-based) receiving chunk `k + 1` ("Selected
    /// processor" of Table 2, shifted by one row; Table 3 second line).
    pub owners: Vec<usize>,
    /// `exec_times[k] = max_i c_i t_i` after chunk `k + 1`.
    pub exec_times: Vec<f64>,
    /// `costs[k] = exec_times[k] / (sum_i c_i)`: the paper's cost, the
    /// average time per chunk, after chunk `k + 1` (Table 2 "Cost" column:
    /// 3, 2.5, 2, 2, 1.8, 1.67, 1.71, 1.87, 1.67, 1.6 for `t = (3, 5, 8)`).
    /// The sum includes the `initial` chunks.
    pub costs: Vec<f64>,
}

impl IncrementalDp {
    /// Number of chunks computed by the table (excluding `initial`).
    pub fn len(&self) -> usize {
        self.owners.len()
    }

    /// True when the table holds no chunk.
    pub fn is_empty(&self) -> bool {
        self.owners.is_empty()
    }

    /// Counts `(c_1, ..., c_p)` after the first `n` chunks of the table
    /// (including `initial`); `n` is clamped to [`len`](Self::len).
    pub fn counts_after(&self, n: usize) -> Vec<usize> {
        let mut c = self.initial.clone();
        for &o in &self.owners[..n.min(self.owners.len())] {
            c[o] += 1;
        }
        c
    }

    /// The allocation after the first `n` chunks as an [`Allocation`]
    /// (`cost` is the execution time `max_i c_i t_i`).
    pub fn allocation_after(&self, n: usize) -> Allocation {
        let counts = self.counts_after(n);
        let cost = makespan(&counts, &self.times);
        Allocation { counts, cost }
    }

    /// The LU/QR slice layout of `000` §2.2: the owners read in reverse
    /// order, so that the last `s` blocks of a slice are exactly the optimal
    /// allocation for `s` chunks, for every `s`. For `t = (3, 5, 8)` and
    /// `B = 10`: `(3, 2, 1, 1, 2, 1, 3, 1, 2, 1)` (1-based).
    pub fn slice_layout(&self) -> Vec<usize> {
        self.owners.iter().rev().copied().collect()
    }
}

/// Index of the fastest processor (smallest cycle-time, lowest index on ties).
pub(crate) fn fastest(times: &[f64]) -> usize {
    let mut f = 0;
    for (i, &t) in times.iter().enumerate() {
        if strictly_less(t, times[f]) {
            f = i;
        }
    }
    f
}

/// The incremental dynamic programming of `000` §2.2: for every number of
/// chunks `1..=b`, add one chunk to the processor that minimizes
/// `cost(C) = max_i c_i t_i / sum_i c_i` (lowest index on ties). Proposition 2
/// of the paper (from its reference \[3\]): every prefix is an optimal
/// allocation. `O(p b)`.
///
/// # Errors
/// [`AllocError::Empty`] / [`AllocError::BadTime`] for bad `times`;
/// [`AllocError::TooSmall`] if `b == 0`.
pub fn incremental_dp(times: &[f64], b: usize) -> Result<IncrementalDp, AllocError> {
    validate_times(times, "times")?;
    incremental_dp_from(times, &vec![0; times.len()], b)
}

/// The dynamic programming of [`incremental_dp`] started from the allocation
/// `initial` instead of zero, adding chunks until `b` chunks are allocated in
/// total (so `b - sum(initial)` table rows). `000` §4.4 uses
/// `initial = (2, 0, ..., 0)` on the fastest processor.
///
/// # Errors
/// As [`incremental_dp`]; [`AllocError::LengthMismatch`] if `initial` and
/// `times` differ in length; [`AllocError::TooSmall`] if `b < sum(initial)`
/// or `b == 0`.
pub fn incremental_dp_from(
    times: &[f64],
    initial: &[usize],
    b: usize,
) -> Result<IncrementalDp, AllocError> {
    validate_times(times, "times")?;
    if initial.len() != times.len() {
        return Err(AllocError::LengthMismatch {
            what: "initial counts",
            got: initial.len(),
            expected: times.len(),
        });
    }
    at_least("number of chunks B", b, 1)?;
    let start: usize = initial.iter().sum();
    at_least("number of chunks B (including the initial ones)", b, start)?;
    let rows = b - start;
    let mut counts = initial.to_vec();
    // loads[i] = c_i t_i, kept sorted-free: the max over others is recomputed
    // from the two largest loads, so each row costs O(p).
    let mut owners = Vec::with_capacity(rows);
    let mut exec_times = Vec::with_capacity(rows);
    let mut costs = Vec::with_capacity(rows);
    for n in start + 1..=b {
        let loads: Vec<f64> = counts
            .iter()
            .zip(times)
            .map(|(&c, &t)| c as f64 * t)
            .collect();
        // Largest and second-largest current loads, to get max over j != i.
        let (mut m1, mut i1, mut m2) = (f64::NEG_INFINITY, usize::MAX, f64::NEG_INFINITY);
        for (i, &l) in loads.iter().enumerate() {
            if l > m1 {
                m2 = m1;
                m1 = l;
                i1 = i;
            } else if l > m2 {
                m2 = l;
            }
        }
        let mut best = 0;
        let mut best_exec = f64::INFINITY;
        for i in 0..times.len() {
            let others = if i == i1 { m2 } else { m1 };
            let exec = (loads[i] + times[i]).max(others).max(0.0);
            if strictly_less(exec, best_exec) {
                best = i;
                best_exec = exec;
            }
        }
        counts[best] += 1;
        owners.push(best);
        exec_times.push(best_exec);
        costs.push(best_exec / n as f64);
    }
    Ok(IncrementalDp {
        times: times.to_vec(),
        initial: initial.to_vec(),
        owners,
        exec_times,
        costs,
    })
}

/// The heterogeneous cyclic(B) column-block layout of `000` §2.2–2.3: slices
/// of `b` blocks, each laid out with [`IncrementalDp::slice_layout`], repeated
/// over `n_blocks` blocks. Returns the owner (0-based) of every block.
///
/// Rule for a partial slice (when `b` does not divide `n_blocks`): slices are
/// aligned on the *last* block, i.e. `owner(j) = owners[(n_blocks - 1 - j) mod b]`,
/// so the partial slice comes first and is the tail of a full slice. Then
/// every trailing set of blocks `{j, ..., n-1}` (what remains to be updated
/// at step `j`) consists of full, optimally balanced slices plus an optimal
/// DP prefix. When `b` divides `n_blocks` this is exactly the paper's layout.
///
/// # Errors
/// As [`incremental_dp`]; [`AllocError::TooSmall`] if `n_blocks == 0`.
pub fn cyclic_slice_layout(
    times: &[f64],
    b: usize,
    n_blocks: usize,
) -> Result<Vec<usize>, AllocError> {
    at_least("number of blocks", n_blocks, 1)?;
    let dp = incremental_dp(times, b)?;
    Ok(layout_from_owners(&dp.owners, n_blocks))
}

/// End-aligned periodic layout from a DP owner sequence (see [`cyclic_slice_layout`]).
pub(crate) fn layout_from_owners(owners: &[usize], n_blocks: usize) -> Vec<usize> {
    let b = owners.len();
    (0..n_blocks)
        .map(|j| owners[(n_blocks - 1 - j) % b])
        .collect()
}

/// The dynamic programming of the optimized distribution of `000` §4.4: the
/// fastest processor executes every factor task and the update immediately
/// preceding it, so each level of the task graph starts from
/// `C = (2, 0, ..., 0)` on the fastest processor; the rest is the usual DP up
/// to `b` tasks in total. Also the "dynamic strategy" of `001` §4.5 (first
/// two panels to the fastest cluster): for `t = (3, 5, 8)`, `b = 10` the
/// reversed owners give `85335385` after the two fixed `33`.
///
/// # Errors
/// As [`incremental_dp`]; [`AllocError::TooSmall`] if `b < 2`.
pub fn optimized_dp(times: &[f64], b: usize) -> Result<IncrementalDp, AllocError> {
    validate_times(times, "times")?;
    at_least("number of tasks B of the optimized distribution", b, 2)?;
    let mut initial = vec![0; times.len()];
    initial[fastest(times)] = 2;
    incremental_dp_from(times, &initial, b)
}

/// The optimized LU/QR schedule of `000` §4.4 for `n` column blocks.
///
/// Every factor task `F(k)` and the update `U(k-1, k)` before it run on the
/// fastest processor; the other updates `U(k, j)`, `j >= k + 2`, run on the
/// static owner of column `j`, laid out by the reversed [`optimized_dp`] so
/// that at level `k` (updates of step `k` plus the factor of step `k + 1`)
/// the loads are the optimized DP allocation for `n - k` tasks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OptimizedLuSchedule {
    /// The fastest processor (runs every factor task).
    pub fastest: usize,
    /// Static (home) owner of each column block. Columns 0 and 1 belong to
    /// the fastest processor; column `j >= 2` to `dp.owners[n - 1 - j]`.
    pub column_owner: Vec<usize>,
    /// The optimized DP for `b = n` tasks.
    pub dp: IncrementalDp,
}

impl OptimizedLuSchedule {
    /// Number of column blocks.
    pub fn n_blocks(&self) -> usize {
        self.column_owner.len()
    }

    /// Processor running update `U(k, j)` (`k < j < n`): the fastest one for
    /// `j == k + 1`, else the home of column `j`. `None` if `(k, j)` is not an
    /// update task.
    pub fn update_owner(&self, k: usize, j: usize) -> Option<usize> {
        if j <= k || j >= self.n_blocks() {
            None
        } else if j == k + 1 {
            Some(self.fastest)
        } else {
            Some(self.column_owner[j])
        }
    }

    /// Per-processor task counts of level `k < n - 1`: the updates of step
    /// `k` plus the factor task of step `k + 1` (`000` §4.4: "balance all the
    /// update tasks of a given level together with the factor task of the
    /// next level"). `None` for `k >= n - 1`.
    pub fn level_counts(&self, k: usize) -> Option<Vec<usize>> {
        let n = self.n_blocks();
        if k + 1 >= n {
            return None;
        }
        let mut c = vec![0; self.dp.times.len()];
        c[self.fastest] += 2;
        for j in k + 2..n {
            c[self.column_owner[j]] += 1;
        }
        Some(c)
    }

    /// Predicted time with unit tasks and no communication cost: the factor
    /// `F(0)` on the fastest processor, then for every level `k = 0..n-2` the
    /// execution time `max_i c_i t_i` of [`level_counts`](Self::level_counts).
    /// Compare with [`crate::alloc::simulate_lu`] for the static layouts.
    pub fn predicted_time(&self) -> f64 {
        let times = &self.dp.times;
        let mut total = times[self.fastest];
        for k in 0..self.n_blocks().saturating_sub(1) {
            if let Some(c) = self.level_counts(k) {
                total += makespan(&c, times);
            }
        }
        total
    }
}

/// Builds the [`OptimizedLuSchedule`] of `000` §4.4 for `n_blocks` column
/// blocks.
///
/// # Errors
/// As [`optimized_dp`] (with `b = n_blocks`, so `n_blocks >= 2`).
pub fn optimized_lu_schedule(
    times: &[f64],
    n_blocks: usize,
) -> Result<OptimizedLuSchedule, AllocError> {
    let dp = optimized_dp(times, n_blocks)?;
    let f = fastest(times);
    let n = n_blocks;
    let column_owner = (0..n)
        .map(|j| if j < 2 { f } else { dp.owners[n - 1 - j] })
        .collect();
    Ok(OptimizedLuSchedule {
        fastest: f,
        column_owner,
        dp,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dp_rejects_zero_b() {
        assert!(matches!(
            incremental_dp(&[1.0], 0),
            Err(AllocError::TooSmall { got: 0, .. })
        ));
    }

    #[test]
    fn dp_exec_times_match_counts() {
        let t = [3.0, 5.0, 8.0, 2.5];
        let dp = incremental_dp(&t, 40).unwrap();
        for n in 1..=40 {
            let a = dp.allocation_after(n);
            assert_eq!(a.counts.iter().sum::<usize>(), n);
            assert!((a.cost - dp.exec_times[n - 1]).abs() < 1e-12);
        }
    }
}
