//! jdmg: block Jacobi-Davidson for large sparse symmetric eigenproblems
//! (`seeds/003`, §3), in fine-grain, coarse-grain and multigrain modes.
#![warn(missing_docs)]

pub mod checkpoint;
mod correction;
mod dense;
pub mod driver;
pub mod input;
pub mod jd;
mod jdqmr;
pub mod multigrain;
pub mod optimal_m;
pub mod params;
mod random;
pub mod repartition;
mod scaling;
pub mod solution;
pub mod tall_skinny;

pub use checkpoint::{
    Checkpoint, CheckpointError, CheckpointRequest, CheckpointSink, Checkpointing,
};
pub use driver::{
    solve_distributed, solve_distributed_resumable, solve_matrix, solve_matrix_on,
    solve_matrix_resumable,
};
pub use input::AsCsr;
pub use jd::{solve, solve_resumable, Problem};
pub use multigrain::{
    fine_rank_keys, parse_groups, solve_multigrain, AlltoallScope, Balance, MultigrainParams,
    MultigrainStats,
};
pub use params::{ConvTest, InnerSolver, InnerStop, JdParams, PrecondChoice, Target, Verify};
pub use repartition::{RepartitionEvent, RepartitionParams, RepartitionStats};
pub use solution::{InnerStops, IterationEvent, JdError, Solution, Stats};
