//! The options of a multigrain solve.

use serde::{Deserialize, Serialize};

use crate::repartition::RepartitionParams;

/// How solve groups share the correction phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Balance {
    /// Every group runs the inner rule of `crate::CorrectionSettings::stop` (no balancing).
    #[default]
    None,
    /// T = time of the fastest group for the phase's optimal m steps (§4,
    /// [`crate::optimal_m`]).
    Fastest,
    /// T = time of the slowest group for m steps.
    Slowest,
}

/// The memory balancing parameters of `jdmg solve --memory-balance`: lblib's
/// defaults (20 major faults/s with under half a CPU is thrashing) sampled every
/// 20 ms, two thrashing samples in a row to recede, since correction phases last
/// tens of milliseconds (lblib's default 0.25 s interval would never sample one).
pub fn memory_params() -> lblib::MemoryParams {
    lblib::MemoryParams {
        sample_interval: 0.02,
        consecutive: 2,
        ..lblib::MemoryParams::default()
    }
}

/// Options of [`solve_multigrain`](crate::solve_multigrain).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MultigrainParams {
    /// Global ranks of each solve group (must cover every rank exactly once).
    pub groups: Vec<Vec<usize>>,
    /// Load balancing of the correction phase. Default `Fastest` (McCombs et al. §4:
    /// T is the fastest group's time; it pays whenever speeds differ).
    pub balance: Balance,
    /// Split the fine-grain rows in proportion to each rank's measured SpMV rate
    /// (otherwise equal nonzeros). Default true. With the hierarchical layout the
    /// rates split each coarse part among its k owners. Timings make the layout,
    /// and so the matvec counts and the last digits, vary from run to run: set it
    /// false for a deterministic solve (`jdmg solve --balance none` does).
    pub rate_weighted_rows: bool,
    /// Hierarchical partitioning when all groups have the same size g ≥ 2
    /// (McCombs et al. §6, "Multigrain algorithm for MPP's"): g coarse parts shared by
    /// all groups, each split into k fine parts, so that the fine↔group all-to-alls
    /// involve only the k owners of one coarse part instead of all P processes. The
    /// fine-grain communicator must then be ordered by [`fine_rank_keys`](super::groups::fine_rank_keys). Ignored
    /// (global all-to-all) for groups of unequal sizes. Default true.
    pub hierarchical: bool,
    /// The rates T and the ranking come from (McCombs et al. §5.1): the average over
    /// each group's last flexible section (default), or LBLIB's instantaneous rate
    /// over the last complete window of `rate_window` seconds, better when loads
    /// change within a phase.
    pub rate_kind: lblib::RateKind,
    /// Window of the instantaneous rates, seconds. Default 0.05.
    pub rate_window: f64,
    /// Shortest span a group's rate is measured over (lblib's
    /// `LbsConfig::min_rate_seconds`): early phases of a few milliseconds add up
    /// until they reach it. Default 0.02 s, several scheduler time slices, so
    /// that a group on a core shared with other work shows its real share.
    pub min_rate_seconds: f64,
    /// Memory (anti-thrashing) balancing of the correction phase (McCombs et al. §5,
    /// ref. \[24\]): a group leader whose process takes major page faults while
    /// its CPU idles leaves the phase early. `None` (default): off.
    pub memory_balance: Option<lblib::MemoryParams>,
    /// Semi-static re-partitioning of the fine rows during the solve
    /// (Boudet et al. §2.1, §4.5; [`crate::repartition`]): on by default, active
    /// only with `rate_weighted_rows` (the rows then follow rates measured in the
    /// projection phase, of `rate_kind` over `rate_window`).
    pub repartition: RepartitionParams,
}

impl Default for MultigrainParams {
    fn default() -> Self {
        Self {
            groups: Vec::new(),
            balance: Balance::Fastest,
            rate_weighted_rows: true,
            hierarchical: true,
            rate_kind: lblib::RateKind::Average,
            rate_window: 0.05,
            min_rate_seconds: 0.02,
            memory_balance: None,
            repartition: RepartitionParams::default(),
        }
    }
}
