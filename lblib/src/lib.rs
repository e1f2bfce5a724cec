//! lblib: flexible-phase load balancing (the LBLIB of McCombs et al., §2, §4, §5),
//! the [`Comm`] abstraction over processes, and rate-driven allocation.
//!
//! | paper | item |
//! |---|---|
//! | DESIGN.md "Backends" | [`Comm`], [`SelfComm`], [`ThreadComm`], `MpiComm` (feature `mpi`), [`Slowed`] |
//! | McCombs et al. §5 LBLIB (`lb_new_lbstruct`, `lb_section_start/end`, `lb_decide`, `lb_continue`, `lb_get_rates/index`) | [`Lbs`], [`Method`], [`RateKind`], [`LbsConfig`] |
//! | McCombs et al. §5.1 scope/context rules | [`LbError`] |
//! | McCombs et al. §7 group leaders | [`lbs::GroupLbs`], [`lbs::group_continue`] |
//! | McCombs et al. §4 %imbalance | [`Traced`], [`ImbalanceReport`] |
//! | McCombs et al. §4–5 and ref. \[24\] memory balancing | [`memory`] |
//! | McCombs et al. §2 a non-eigensolver flexible phase | [`demo`] (simulated annealing) |
//! | Boudet et al., Mehaut and Robert: allocation from rates (feature `dense`) | `dense::alloc` |
//!
//! The papers, cited by first authors or (in `dense`) by number:
//!
//! * 003, McCombs et al.: J. R. McCombs, R. T. Mills, A. Stathopoulos, *Dynamic
//!   Load Balancing of an Iterative Eigensolver on Grids of Heterogeneous Clusters*.
//! * 000, Boudet et al.: V. Boudet, F. Rastello, Y. Robert, *A Proposal for a
//!   Heterogeneous Cluster ScaLAPACK (Dense Linear Solvers)*.
//! * 001, Mehaut and Robert: J.-F. Mehaut, Y. Robert, *Algorithms and Tools for
//!   (Distributed) Heterogeneous Computing: A Prospective Report*.
//! * 002, Barbosa et al.: J. Barbosa, C. Morais, P. Tadeu, *Data Parallel
//!   Scheduling of Operations in Linear Algebra on Heterogeneous Clusters*.
//! * 004, Beaumont et al.: O. Beaumont, L. Eyraud-Dubois, M. Vérité, *2D Static
//!   Resource Allocation for Compressed Linear Algebra and Communication
//!   Constraints*.

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
