//! lbcomm: the [`Comm`] abstraction over processes (DESIGN.md, "Backends"), its
//! backends and its wrappers. The balancer (`lblib`), the distributed SpMV and Krylov
//! solvers (`precond`) and the eigensolver (`jdmg`) communicate only through it.
//!
//! | item | what |
//! |---|---|
//! | [`Comm`], [`ReduceOp`], [`SelfComm`] | the trait (rank, size, split, all-reduce, all-gather, broadcast, all-to-all(v), rooted gather(v)/scatter(v), barrier, wall time) and its one-process backend |
//! | [`ThreadComm`], [`ThreadConfig`], [`ClockMode`] | N ranks as threads of one process, with per-rank slowdowns and virtual, manual or real clocks |
//! | `MpiComm`, `mpi::init` (feature `mpi`) | rsmpi, `Threading::Funneled` |
//! | [`Slowed`], [`SlowdownBasis`] | emulate a slower node on any `Comm` by sleeping (McCombs et al., §4 and §7 experiments) |
//! | [`Delayed`] | emulate a slow link: a fixed latency on every collective |
//! | [`cputime`] | the CPU-time clock of the calling thread |
//! | [`forward_collectives!`] | forward every collective of a wrapper to the communicator it wraps |

pub mod comm;
pub mod cputime;
pub mod delayed;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod slowed;
pub mod thread;

pub use comm::{Comm, ReduceOp, SelfComm};
pub use delayed::Delayed;
#[cfg(feature = "mpi")]
pub use mpi::MpiComm;
pub use slowed::{SlowdownBasis, Slowed};
pub use thread::{ClockMode, ThreadComm, ThreadConfig};

/// The README's code blocks, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
