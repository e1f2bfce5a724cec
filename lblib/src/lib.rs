//! lblib: flexible-phase load balancing (the LBLIB of `seeds/003`, §2, §4, §5),
//! the [`Comm`] abstraction over processes, and rate-driven allocation.
//!
//! | paper | item |
//! |---|---|
//! | DESIGN.md "Backends" | [`Comm`], [`SelfComm`], [`ThreadComm`], `MpiComm` (feature `mpi`) |

pub mod alloc;
pub mod comm;
pub mod cputime;
pub mod thread;

pub use comm::{Comm, ReduceOp, SelfComm};
pub use thread::{ClockMode, ThreadComm, ThreadConfig};
