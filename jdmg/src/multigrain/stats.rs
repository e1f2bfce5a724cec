//! The figures of a multigrain solve ([`MultigrainStats`]) and of its
//! re-partitions ([`RepartitionStats`]): plain data, reported in
//! [`crate::Solution::multigrain`] and in `jdmg solve --json`.

use serde::{Deserialize, Serialize};

/// Which processes take part in the fine↔group all-to-alls (McCombs et al. §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum AlltoallScope {
    /// One all-to-all-v over all P processes (independent fine and group
    /// partitionings; unequal or user-chosen groups, or `hierarchical: false`).
    #[default]
    Global,
    /// Hierarchical partitioning: all-to-alls inside all-to-all groups of k processes
    /// (the owners of one coarse part), "Multigrain algorithm for MPP's".
    Hierarchical,
}

/// Per-run figures of the multigrain correction phases.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MultigrainStats {
    /// Number of solve groups.
    pub groups: usize,
    /// This process's group.
    pub my_group: usize,
    /// Inner steps done by each group (summed over phases).
    pub group_inner_steps: Vec<u64>,
    /// Latest measured rate (steps per second) of each group, from lblib.
    pub group_rates: Vec<f64>,
    /// The groups' rates at every balanced phase (one row per phase), to follow
    /// changing loads over iterations.
    pub group_rate_history: Vec<Vec<f64>>,
    /// Time limit T of each balanced phase.
    pub time_limits: Vec<f64>,
    /// Seconds spent in the fine↔group all-to-alls.
    pub alltoall_seconds: f64,
    /// Global or hierarchical all-to-alls (§6).
    pub alltoall_scope: AlltoallScope,
    /// Processes taking part in each of this process's all-to-alls (k when
    /// hierarchical, P when global).
    pub alltoall_group_size: usize,
    /// f64 values this process sent to other processes in all fine↔group
    /// exchanges (values it keeps for itself are not counted).
    pub alltoall_values_sent: u64,
    /// [`MultigrainStats::alltoall_values_sent`] summed over all processes.
    pub alltoall_values_sent_total: u64,
    /// Hierarchical scheme: seconds this process waited in the all-to-alls beyond
    /// the quickest member of its all-to-all group (the §4 imbalance metric, traced on
    /// the all-to-all group: these calls are synchronous but not fine-grain
    /// collectives, §7.1). 0 in the global scheme, where the all-to-all is a traced
    /// fine-grain collective.
    pub alltoall_imbalance_seconds: f64,
    /// [`MultigrainStats::alltoall_imbalance_seconds`] summed over all processes.
    pub alltoall_imbalance_seconds_total: f64,
    /// Correction phases run.
    pub phases: usize,
    /// The optimal step count m of every correction phase (McCombs et al. §4), that
    /// of the extreme-most pair; balanced, T is the fastest group's time for m
    /// steps per equation it holds.
    pub optimal_steps: Vec<usize>,
    /// Each group's flexible-phase seconds in every correction phase (one row per
    /// phase; groups without an equation show their idle 0), to set against T.
    pub phase_seconds: Vec<Vec<f64>>,
    /// Which rates the balancer used.
    pub rate_kind: lblib::RateKind,
    /// Start-up SpMV rate of each fine-grain rank (nonzeros per second) that
    /// weighted the rows; empty when rows were split by equal nonzeros.
    pub startup_rates: Vec<f64>,
    /// Fine-grain rows of each rank at the end of the solve (after any
    /// re-partition; the start-up rows are `repartition.events[0].rows_before`).
    pub fine_rows: Vec<usize>,
    /// Memory balancing counters of this process's group leader (zero without
    /// `memory_balance`): samples, thrashing samples, phases cut short.
    pub memory: lblib::memory::MemoryStats,
    /// [`MultigrainStats::memory`] summed over all group leaders.
    pub memory_total: lblib::memory::MemoryStats,
    /// Major page faults of every fine-grain rank during the solve (getrusage).
    pub major_faults: Vec<u64>,
    /// Balancer calls that failed (`lblib::LbError` messages); the phase went on
    /// with the previous decision.
    pub balancer_errors: Vec<String>,
    /// Semi-static re-partitions of the fine rows (Boudet et al. §4.5): count,
    /// seconds, values moved, imbalance before and after each.
    pub repartition: RepartitionStats,
}

impl MultigrainStats {
    /// The §4 %imbalance of a run: the imbalance of the traced fine-grain
    /// collectives (`fine`, the report of the `lblib::Traced` world passed to
    /// [`solve_multigrain`](crate::solve_multigrain)) plus, with the hierarchical scheme, the waits in the
    /// all-to-all groups, over the total wall-clock time of all processes. Equal to
    /// `fine.imbalance_percent` in the global scheme.
    pub fn imbalance_percent(&self, fine: &lblib::ImbalanceReport) -> f64 {
        if fine.wall_seconds_total > 0.0 {
            100.0 * (fine.imbalance_seconds_total + self.alltoall_imbalance_seconds_total)
                / fine.wall_seconds_total
        } else {
            fine.imbalance_percent
        }
    }
}

/// One re-partition.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RepartitionEvent {
    /// Outer iterations done when it happened.
    pub outer_iteration: usize,
    /// Imbalance of the projection phase at the measured rates before (the check that
    /// triggered it).
    pub imbalance_before: f64,
    /// Imbalance predicted for the new rows from the same rates.
    pub imbalance_predicted: f64,
    /// Imbalance measured at the next check (`None` when the solve ended first).
    pub imbalance_after: Option<f64>,
    /// Each rank's measured rate (nonzeros of its group rows per busy second of
    /// its correction phases).
    pub rates: Vec<f64>,
    /// Fine rows of each rank before and after.
    pub rows_before: Vec<usize>,
    /// Fine rows of each rank after.
    pub rows_after: Vec<usize>,
    /// Seconds of this re-partition (layout, data movement, rebuild), this rank.
    pub seconds: f64,
    /// f64 values all ranks sent to other ranks.
    pub values_moved: u64,
}

/// Figures of semi-static re-partitioning in one solve (`--json`:
/// `multigrain.repartition`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RepartitionStats {
    /// Whether re-partitioning was active.
    pub active: bool,
    /// Checks of the measured imbalance done.
    pub checks: usize,
    /// Imbalance measured at every check.
    pub measured_imbalance: Vec<f64>,
    /// Each fine rank's share of its core over the stretch before every check
    /// (one row per check; NaN where it could not be read), with
    /// `RepartitionParams::core_share`; empty without.
    pub core_shares: Vec<Vec<f64>>,
    /// Re-partitions done.
    pub count: usize,
    /// Seconds spent in them on this rank (measure, move, rebuild).
    pub seconds: f64,
    /// f64 values this rank sent to others in them.
    pub values_sent: u64,
    /// Values sent by all ranks in them.
    pub values_sent_total: u64,
    /// One entry per re-partition.
    pub events: Vec<RepartitionEvent>,
    /// Rate measurements that failed (lblib errors); the check was skipped.
    pub errors: Vec<String>,
}
