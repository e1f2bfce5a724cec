//! Algorithm 2.1 of Boudet et al. §2.1 (Algorithm 4.2 of Mehaut and Robert §4.2):
//! optimal distribution of `M` equal, independent chunks over `p` processors.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use serde::{Deserialize, Serialize};

use super::{makespan, strictly_less, validate_times, AllocError};

/// An allocation of equal chunks to processors (`000` §2.1, Table 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Allocation {
    /// `counts[i]`: number of chunks given to processor `i` (0-based).
    pub counts: Vec<usize>,
    /// Execution time `max_i counts[i] * t_i` (Table 1, last column), in the
    /// units of the cycle-times.
    pub cost: f64,
}

impl Allocation {
    fn new(counts: Vec<usize>, times: &[f64]) -> Self {
        let cost = makespan(&counts, times);
        Self { counts, cost }
    }

    /// Total number of chunks `sum_i counts[i]`.
    pub fn total(&self) -> usize {
        self.counts.iter().sum()
    }
}

/// The initialization step of Algorithm 2.1 (`000` §2.1):
/// `c_i = floor( (1/t_i) / (sum_k 1/t_k) * M )`, so that `c_i t_i` is nearly
/// constant and `sum c_i <= M` (and `sum c_i >= M - p`).
///
/// For `t = (3, 5, 8)`, `M = 78` this is `(39, 23, 14)` with cost 117
/// (Table 1, row "Init, m = 76"). `M = 0` is valid and gives all zeros.
///
/// # Errors
/// [`AllocError::Empty`] / [`AllocError::BadTime`] if `times` is empty or has
/// a non-positive or non-finite entry.
pub fn optimal_chunks_init(times: &[f64], m: usize) -> Result<Allocation, AllocError> {
    validate_times(times, "times")?;
    let inv_sum: f64 = times.iter().map(|t| 1.0 / t).sum();
    let mut counts: Vec<usize> = times
        .iter()
        .map(|t| {
            // A tiny relative nudge so that exact ratios (e.g. 40.0 computed as
            // 39.99999999) are not floored one below; the sum is re-checked below.
            let share = (1.0 / t) / inv_sum * m as f64;
            (share * (1.0 + 1e-12)).floor() as usize
        })
        .collect();
    // Never exceed M, whatever rounding did (the paper's invariant sum <= M).
    let mut total: usize = counts.iter().sum();
    while total > m {
        // Remove from the processor with the largest c_i t_i (lowest index on ties).
        let mut worst = 0;
        for i in 1..counts.len() {
            if strictly_less(
                counts[worst] as f64 * times[worst],
                counts[i] as f64 * times[i],
            ) {
                worst = i;
            }
        }
        counts[worst] -= 1;
        total -= 1;
    }
    Ok(Allocation::new(counts, times))
}

/// Algorithm 2.1 of `000` §2.1 (naive `O(p^2)` version): the init step of
/// [`optimal_chunks_init`], then, while `sum c_i < M`, increment the `c_k`
/// minimizing `t_k (c_k + 1)` (lowest index on ties). Proposition 1 of the
/// paper: the result minimizes `max_i c_i t_i`.
///
/// For `t = (3, 5, 8)`, `M = 78`: `(40, 24, 14)`, cost 120 (Table 1).
///
/// # Errors
/// As [`optimal_chunks_init`].
pub fn optimal_chunks(times: &[f64], m: usize) -> Result<Allocation, AllocError> {
    let Allocation { mut counts, .. } = optimal_chunks_init(times, m)?;
    let mut total: usize = counts.iter().sum();
    while total < m {
        let mut k = 0;
        for i in 1..counts.len() {
            if strictly_less(
                times[i] * (counts[i] + 1) as f64,
                times[k] * (counts[k] + 1) as f64,
            ) {
                k = i;
            }
        }
        counts[k] += 1;
        total += 1;
    }
    Ok(Allocation::new(counts, times))
}

/// Heap key: next finishing time `t_k (c_k + 1)` then processor index, both
/// ascending (wrapped in [`Reverse`] for the max-heap).
#[derive(Debug, Clone, Copy)]
struct Next {
    finish: f64,
    index: usize,
}

impl PartialEq for Next {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Next {}
impl PartialOrd for Next {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Next {
    fn cmp(&self, other: &Self) -> Ordering {
        if strictly_less(self.finish, other.finish) {
            Ordering::Less
        } else if strictly_less(other.finish, self.finish) {
            Ordering::Greater
        } else {
            self.index.cmp(&other.index)
        }
    }
}

/// The `O(p log p)` variant of Algorithm 2.1 mentioned in `000` §2.1,
/// footnote 1: same init step, then the at most `p` increments pop the
/// smallest `t_k (c_k + 1)` from a binary heap. Same result (same tie rule)
/// as [`optimal_chunks`].
///
/// # Errors
/// As [`optimal_chunks_init`].
pub fn optimal_chunks_heap(times: &[f64], m: usize) -> Result<Allocation, AllocError> {
    let Allocation { mut counts, .. } = optimal_chunks_init(times, m)?;
    let mut total: usize = counts.iter().sum();
    let mut heap: BinaryHeap<Reverse<Next>> = counts
        .iter()
        .zip(times)
        .enumerate()
        .map(|(index, (&c, &t))| {
            Reverse(Next {
                finish: t * (c + 1) as f64,
                index,
            })
        })
        .collect();
    while total < m {
        // The heap always holds one entry per processor, so it cannot be empty.
        let Some(Reverse(Next { index, .. })) = heap.pop() else {
            break;
        };
        counts[index] += 1;
        total += 1;
        heap.push(Reverse(Next {
            finish: times[index] * (counts[index] + 1) as f64,
            index,
        }));
    }
    Ok(Allocation::new(counts, times))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heap_and_naive_agree_on_small_cases() {
        let cases: [&[f64]; 4] = [
            &[3.0, 5.0, 8.0],
            &[1.0],
            &[2.0, 2.0, 2.0],
            &[7.0, 1.5, 3.25, 9.0],
        ];
        for t in cases {
            for m in 0..60 {
                let a = optimal_chunks(t, m).unwrap();
                let b = optimal_chunks_heap(t, m).unwrap();
                assert_eq!(a, b, "t={t:?} m={m}");
                assert_eq!(a.total(), m);
            }
        }
    }
}
