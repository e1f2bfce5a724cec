//! lblib: flexible-phase load balancing (the LBLIB of `seeds/003`, §2, §4, §5),
//! the [`Comm`] abstraction over processes, and rate-driven allocation.

pub mod alloc;
pub mod comm;

pub use comm::{Comm, ReduceOp, SelfComm};
