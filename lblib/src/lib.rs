//! lblib: flexible-phase load balancing (the LBLIB of McCombs et al., §2, §4, §5):
//! the [`Lbs`] balancer, the imbalance tracer and memory balancing, on any
//! [`Comm`] of the `lbcomm` crate.
//!
//! | paper | item |
//! |---|---|
//! | McCombs et al. §5 LBLIB (`lb_new_lbstruct`, `lb_section_start/end`, `lb_decide`, `lb_continue`, `lb_get_rates/index`) | [`Lbs`], [`Method`], [`RateKind`], [`LbsConfig`] |
//! | McCombs et al. §5.1 scope/context rules | [`LbError`] |
//! | McCombs et al. §7 group leaders | [`lbs::GroupLbs`], [`lbs::group_continue`] |
//! | McCombs et al. §4 %imbalance | [`Traced`], [`ImbalanceReport`] |
//! | McCombs et al. §4–5 and ref. \[24\] memory balancing | [`memory`] |
//! | McCombs et al. §2 a non-eigensolver flexible phase | [`demo`] (simulated annealing) |
//! | a thread's share of a time-sliced core (Linux scheduler statistics) | [`sched`] |
//!
//! The communicators ([`Comm`], [`SelfComm`], [`ThreadComm`], `MpiComm` with the
//! feature `mpi`, the [`Slowed`] and [`Delayed`] wrappers) live in `lbcomm` and are
//! re-exported here, so that `use lblib::{Comm, Lbs}` is enough to balance a loop.
//! Dense kernels laid out on the rates `Lbs` measures are the `hetdense` crate.
//!
//! The paper: 003, McCombs et al.: J. R. McCombs, R. T. Mills, A. Stathopoulos,
//! *Dynamic Load Balancing of an Iterative Eigensolver on Grids of Heterogeneous
//! Clusters*.

pub mod demo;
pub mod error;
pub mod lbs;
pub mod memory;
pub mod sched;
pub mod tracer;

pub use error::LbError;
/// `MpiComm` and `mpi::init` (feature `mpi`), from `lbcomm`.
#[cfg(feature = "mpi")]
pub use lbcomm::mpi;
#[cfg(feature = "mpi")]
pub use lbcomm::MpiComm;
pub use lbcomm::{
    forward_collectives, ClockMode, Comm, Delayed, ReduceOp, SelfComm, SlowdownBasis, Slowed,
    ThreadComm, ThreadConfig,
};
pub use lbs::{Lbs, LbsConfig, Method, RateKind};
pub use memory::{Advice, MemoryBalancer, MemoryParams, ProcReadings, Reading, SystemReadings};
pub use tracer::{ImbalanceReport, Traced};

/// The README's code blocks, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
