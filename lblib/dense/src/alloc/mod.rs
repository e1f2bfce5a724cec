//! Rate-driven allocation algorithms (Boudet et al. §2, Mehaut and Robert §4 and §7).
//!
//! Everything here is a pure function of measured *cycle-times* (the time a
//! processor needs for one unit of work, i.e. the inverse of the rate that
//! [`crate`]'s balancer measures). No communication, no I/O.
//!
//! | paper | item |
//! |---|---|
//! | `000` §2.1 Algorithm 2.1 (= `001` §4.2 Algorithm 4.2) | [`optimal_chunks`], [`optimal_chunks_init`], [`optimal_chunks_heap`] |
//! | `000` §2.2 dynamic programming, Table 2/3 | [`incremental_dp`], [`IncrementalDp`] |
//! | `000` §2.2 "reverse" slice layout for LU/QR | [`IncrementalDp::slice_layout`], [`cyclic_slice_layout`] |
//! | `000` §4.4 optimized distribution | [`optimized_dp`], [`optimized_lu_schedule`] |
//! | `000` §4.1 LU task graph, §4.3 Maheswaran–Siegel remapping, Figures 11–12 cost model | [`LuTaskGraph`], [`maheswaran_siegel`], [`machine_costs`], [`compare_schedules`] |
//! | `000` §3 Tables 4, 5; §2.2 Figure 2 | [`predicted_times`], [`PredictedTimes`], [`simulate_lu`], [`update_loads`] |
//! | `000` §2.1, §4.5 semi-static strategy | [`reallocate_remaining`] |
//! | `001` §4.3–4.4 2D grids | [`grid_2d_rational`], [`best_grid_arrangement`], [`grid_2d_panel`], [`kalinov_lastovetsky`], [`panel_column_order`] |
//! | `001` §4.5 collections of clusters | [`two_level_allocation`], [`cluster_dynamic_allocation`] |
//!
//! Conventions: processors are 0-based indices into the `times` slice (the
//! papers number them from 1); ties are broken towards the lowest index,
//! which reproduces the papers' tables (e.g. chunk 8 of `000` Table 2).

mod chunks;
mod clusters;
mod dp;
mod grid2d;
mod predict;
mod remap;
mod semistatic;

pub use chunks::{optimal_chunks, optimal_chunks_heap, optimal_chunks_init, Allocation};
pub use clusters::{
    cluster_dynamic_allocation, two_level_allocation, ClusterTimeRule, TwoLevelAllocation,
    TwoLevelParams,
};
pub use dp::{
    cyclic_slice_layout, incremental_dp, incremental_dp_from, optimized_dp, optimized_lu_schedule,
    IncrementalDp, OptimizedLuSchedule,
};
pub use grid2d::{
    best_grid_arrangement, grid_2d_panel, grid_2d_rational, kalinov_lastovetsky,
    panel_column_order, Grid2dPanel, Grid2dParams, Grid2dRational, GridArrangement,
    KalinovLastovetsky,
};
pub use predict::{predicted_times, pure_cyclic_layout, simulate_lu, update_loads, PredictedTimes};
pub use remap::{
    compare_schedules, critical_paths, list_schedule, machine_costs, maheswaran_siegel,
    optimized_mapping, priority_order, static_mapping, EvaluatedSchedule, LuCostModel, LuTask,
    LuTaskGraph, MachineCosts, Remap, ScheduleComparison, TaskMapping,
};
pub use semistatic::{reallocate_remaining, BlockMove, Reallocation};

/// Errors of the allocation algorithms: every bad input is reported with what
/// is known about it, never by a panic.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AllocError {
    /// The list of cycle-times (processors, grid rows/columns or clusters) is empty.
    #[error("no processors: the list of {what} is empty")]
    Empty {
        /// Which list was empty.
        what: &'static str,
    },
    /// A cycle-time is zero, negative, infinite or NaN.
    #[error("cycle-time {what}[{index}] = {value} is not a positive finite number")]
    BadTime {
        /// Which list the value belongs to.
        what: &'static str,
        /// Position of the offending value (row-major for grids).
        index: usize,
        /// The offending value.
        value: f64,
    },
    /// A count (number of chunks `B`, panel size, number of blocks, ...) is
    /// below the minimum that makes the request meaningful (usually 1).
    #[error("{what} must be at least {min}, got {got}")]
    TooSmall {
        /// Which count.
        what: &'static str,
        /// Value received.
        got: usize,
        /// Smallest meaningful value.
        min: usize,
    },
    /// A grid of cycle-times is ragged.
    #[error("grid row {row} has {len} entries, expected {expected}")]
    RaggedGrid {
        /// Offending row.
        row: usize,
        /// Its length.
        len: usize,
        /// Length of row 0.
        expected: usize,
    },
    /// Two inputs that must have equal lengths do not.
    #[error("{what}: got {got} entries, expected {expected}")]
    LengthMismatch {
        /// What was mismatched.
        what: &'static str,
        /// Length received.
        got: usize,
        /// Length expected.
        expected: usize,
    },
    /// A processor index is out of range.
    #[error("owner {owner} of block {block} is out of range for {p} processors")]
    BadOwner {
        /// Block whose owner is wrong.
        block: usize,
        /// The owner given.
        owner: usize,
        /// Number of processors.
        p: usize,
    },
    /// A block index is beyond the matrix.
    #[error("block index {index} is beyond the {n} blocks of the matrix")]
    BlockOutOfRange {
        /// Index given.
        index: usize,
        /// Number of blocks.
        n: usize,
    },
    /// An exhaustive search would exceed the configured limit.
    #[error("{what} would enumerate {count} candidates, above the limit {limit}")]
    TooLarge {
        /// Which search.
        what: &'static str,
        /// Number of candidates it would visit (saturating).
        count: u128,
        /// The configured limit.
        limit: u128,
    },
}

/// Checks that `times` is non-empty and every entry is positive and finite.
pub(crate) fn validate_times(times: &[f64], what: &'static str) -> Result<(), AllocError> {
    if times.is_empty() {
        return Err(AllocError::Empty { what });
    }
    for (index, &value) in times.iter().enumerate() {
        if !(value.is_finite() && value > 0.0) {
            return Err(AllocError::BadTime { what, index, value });
        }
    }
    Ok(())
}

/// Returns [`AllocError::TooSmall`] unless `got >= min`.
pub(crate) fn at_least(what: &'static str, got: usize, min: usize) -> Result<(), AllocError> {
    if got < min {
        Err(AllocError::TooSmall { what, got, min })
    } else {
        Ok(())
    }
}

/// `max_i c_i t_i`: the execution time of an allocation (`000` §2.1, Table 1 last column).
pub(crate) fn makespan(counts: &[usize], times: &[f64]) -> f64 {
    counts
        .iter()
        .zip(times)
        .map(|(&c, &t)| c as f64 * t)
        .fold(0.0, f64::max)
}

/// Relative tolerance under which two costs are considered tied; ties go to
/// the lowest processor index.
pub(crate) const TIE_EPS: f64 = 1e-12;

/// `a < b` beyond the tie tolerance.
pub(crate) fn strictly_less(a: f64, b: f64) -> bool {
    if !(a.is_finite() && b.is_finite()) {
        return a < b;
    }
    a < b - TIE_EPS * b.abs().max(a.abs()).max(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validate_rejects_bad_times() {
        assert_eq!(
            validate_times(&[], "times"),
            Err(AllocError::Empty { what: "times" })
        );
        assert!(matches!(
            validate_times(&[1.0, 0.0], "times"),
            Err(AllocError::BadTime { index: 1, .. })
        ));
        assert!(matches!(
            validate_times(&[f64::NAN], "times"),
            Err(AllocError::BadTime { index: 0, .. })
        ));
        assert!(validate_times(&[3.0, 5.0], "times").is_ok());
    }
}
