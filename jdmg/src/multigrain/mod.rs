//! Coarse-grain and multigrain correction phases (McCombs et al. §3 "JDcg", §6 "JDmg",
//! §7 load balancing).
//!
//! The projection phase stays fine grain over all P processes. Before the correction
//! phase, an all-to-all moves each selected Ritz vector xᵢ and residual rᵢ from the
//! fine layout to the row layout of the solve group that will solve its correction
//! equation; each group runs BiCGSTAB in parallel on its own communicator (dot
//! products inside the group only); a reverse all-to-all returns εᵢ. With P = k and
//! one process per group this is JDcg; with groups of several processes, JDmg.
//!
//! Load balancing (§4, §7): the first correction phase runs `maxits` steps to measure
//! rates; afterwards group leaders call `decide(maxits, Fastest)` (the paper's optimal
//! step count, bounded by `maxits`) on the leaders' communicator, the fastest groups
//! receive the extreme-most residuals, and every group iterates until T (leaders call
//! `should_continue` and broadcast the decision inside their group).
//!
//! Hierarchical partitioning (§6, "Multigrain algorithm for MPP's"): when the k solve
//! groups all have g processes, the rows are first split into g coarse parts (the
//! layout of every group: the member at position m of each group owns coarse part m),
//! and each coarse part m into k fine sub-parts, sub-part j owned by the member at
//! position m of group j. The k owners of coarse part m form *all-to-all group* m, and
//! the fine↔group exchanges run inside those groups of k processes instead of over
//! all P. Groups of unequal sizes (clusters of clusters, §6 "Multigrain algorithm for
//!
//! The module is split by job: [`groups`] (solve groups, their topology and
//! row layouts), `mover` (the fine↔group all-to-alls), `backend` (the
//! correction phase of the solve groups), [`stats`] (the figures of a run)
//! and `solve` (one multigrain run: setup, the solver loop, re-partitions).
//! A multigrain solve is run by [`crate::Solver`] with
//! [`groups`](crate::Solver::groups).

mod backend;
pub mod groups;
mod mover;
mod params;
pub(crate) mod solve;
pub mod stats;

pub use groups::{
    fine_rank_keys, fine_world, groups_by_key, groups_on, hierarchical_shape, host_key,
    parse_groups,
};
pub use params::{memory_params, Balance, MultigrainParams};
pub use stats::{AlltoallScope, MultigrainStats};
