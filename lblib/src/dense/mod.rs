//! Dense linear algebra on measured rates (feature `dense`, brings in faer).
//!
//! | paper | item |
//! |---|---|
//! | `000` §2–§4, `001` §4.3–4.5 allocation from cycle-times | [`alloc`] |

pub mod alloc;
pub mod sched;
