//! jdmg: block Jacobi-Davidson for large sparse symmetric eigenproblems
//! (`seeds/003`, §3), in fine-grain, coarse-grain and multigrain modes.
#![warn(missing_docs)]

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
mod scaling;
pub mod solution;

pub use driver::{solve_distributed, solve_matrix, solve_matrix_on};
pub use input::AsCsr;
pub use jd::{solve, Problem};
pub use multigrain::{
    fine_rank_keys, parse_groups, solve_multigrain, AlltoallScope, Balance, MultigrainParams,
    MultigrainStats,
};
pub use params::{ConvTest, InnerSolver, InnerStop, JdParams, PrecondChoice, Target, Verify};
pub use solution::{InnerStops, IterationEvent, JdError, Solution, Stats};
