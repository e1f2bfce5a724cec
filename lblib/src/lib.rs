//! lblib: flexible-phase load balancing (the LBLIB of `seeds/003`, §2, §4, §5),
//! the [`Comm`] abstraction over processes, and rate-driven allocation.
//!
//! | paper | item |
//! |---|---|
//! | DESIGN.md "Backends" | [`Comm`], [`SelfComm`], [`ThreadComm`], `MpiComm` (feature `mpi`), [`Slowed`] |
//! | `003` §5 LBLIB (`lb_new_lbstruct`, `lb_section_start/end`, `lb_decide`, `lb_continue`, `lb_get_rates/index`) | [`Lbs`], [`Method`], [`RateKind`], [`LbsConfig`] |
//! | `003` §5.1 scope/context rules | [`LbError`] |
//! | `003` §7 group leaders | [`lbs::GroupLbs`], [`lbs::group_continue`] |
//! | `003` §4 %imbalance | [`Traced`], [`ImbalanceReport`] |
//! | `003` §4–5 and ref. \[24\] memory balancing | [`memory`] |
//! | `003` §2 a non-eigensolver flexible phase | [`demo`] (simulated annealing) |
//! | `000`, `001` allocation from rates (feature `dense`) | `dense::alloc` |

pub mod comm;
pub mod cputime;
pub mod delayed;
pub mod demo;
#[cfg(feature = "dense")]
pub mod dense;
pub mod error;
pub mod lbs;
pub mod memory;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod slowed;
pub mod thread;
pub mod tracer;

pub use comm::{Comm, ReduceOp, SelfComm};
pub use delayed::Delayed;
pub use error::LbError;
pub use lbs::{Lbs, LbsConfig, Method, RateKind};
pub use memory::{Advice, MemoryBalancer, MemoryParams, ProcReadings, Reading, SystemReadings};
#[cfg(feature = "mpi")]
pub use mpi::MpiComm;
pub use slowed::{SlowdownBasis, Slowed};
pub use thread::{ClockMode, ThreadComm, ThreadConfig};
pub use tracer::{ImbalanceReport, Traced};

/// The README's code blocks, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
