//! Typed errors of the balancer, tracer and memory balancing.
//!
//! LBLIB (McCombs et al., §5.1) keeps a `scope` and a `context` field in every LBS and
//! sets an error code when a call violates them; here each violation is a variant
//! of [`LbError`] carrying what is known.

/// Everything that can go wrong in [`crate::Lbs`], [`crate::Traced::report`] and
/// [`crate::memory`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LbError {
    /// `decide` was called before a timed section ended on these ranks: no rate is
    /// known yet (§5: "one execution of the flexible section should have already
    /// been timed"). Every rank returns this error together.
    #[error("decide before any timed section: no rate on ranks {ranks:?}")]
    DecideBeforeSection {
        /// Ranks (of the balancer's communicator) that had no rate.
        ranks: Vec<usize>,
    },
    /// `decide` was called on these ranks while their section was open (§5: T is
    /// decided *before* entering a section). Every rank returns this error together.
    #[error("decide inside an open section on ranks {ranks:?}")]
    DecideInsideSection {
        /// Ranks whose section was open.
        ranks: Vec<usize>,
    },
    /// `section_start` inside an open section of the same `Lbs` (§5.1 `scope`).
    #[error("section_start inside an open section of the same Lbs (started at t = {started_at})")]
    NestedSection {
        /// Clock reading when the open section started.
        started_at: f64,
    },
    /// `section_end` without an open section.
    #[error("section_end outside a section")]
    EndOutsideSection,
    /// `should_continue` outside a section (§5.1: `lb_continue` must be placed
    /// between `lb_section_start` and `lb_section_end`).
    #[error("should_continue outside a section")]
    ContinueOutsideSection,
    /// `rates`/`index` before any `decide` (§5.1 `context`).
    #[error("rates or index requested before any decide")]
    RatesBeforeDecide,
    /// An operation count that is negative or not finite (or not positive where
    /// a positive count is needed).
    #[error("invalid operation count {ops} for {what}")]
    InvalidOps {
        /// The offending value.
        ops: f64,
        /// Which argument.
        what: &'static str,
    },
    /// The rate selected by `decide` is not positive, so no finite T exists.
    #[error("rate {rate} of rank {rank} is not positive: cannot derive a time limit")]
    NonPositiveRate {
        /// The rate.
        rate: f64,
        /// Its rank.
        rank: usize,
    },
    /// A user-defined `decide` method returned a time that is negative or not finite.
    #[error("user-defined decide method returned time {time}")]
    InvalidTime {
        /// The returned value.
        time: f64,
    },
    /// A section ended with operations done but no time elapsed on the clock.
    #[error("section ended after {ops} operations with no elapsed time")]
    NoElapsedTime {
        /// Operations reported.
        ops: f64,
    },
    /// A configuration field is out of range.
    #[error("invalid parameter {field} = {value}: {reason}")]
    InvalidConfig {
        /// Field name.
        field: &'static str,
        /// Its value.
        value: f64,
        /// What is expected.
        reason: &'static str,
    },
    /// The imbalance report found ranks that traced different numbers of calls
    /// (calls are matched by their order on every rank).
    #[error("traced call counts differ between ranks: {counts:?}")]
    CallCountMismatch {
        /// Number of traced calls on each rank.
        counts: Vec<u64>,
    },
    /// The imbalance report found ranks that gave different labels to the same call.
    #[error("traced call labels differ between ranks (label hashes {hashes:?})")]
    LabelMismatch {
        /// Hash of each rank's label sequence.
        hashes: Vec<u64>,
    },
    /// A solve-group member learned that its leader's balancer call failed (the
    /// leader itself returns the underlying error). See [`crate::lbs::GroupLbs`].
    #[error("the group leader's balancer call {call} failed")]
    GroupLeaderFailed {
        /// Which call.
        call: &'static str,
    },
    /// `GroupLbs::new` was given a leaders' communicator on a non-leader, or none
    /// on the leader (group rank 0).
    #[error("group rank {group_rank}: leaders communicator {}", if *has_leaders { "given to a non-leader" } else { "missing on the leader" })]
    LeaderMismatch {
        /// Rank in the group.
        group_rank: usize,
        /// Whether a leaders' communicator was given.
        has_leaders: bool,
    },
    /// Reading system counters for memory balancing failed.
    #[error("cannot read system counters ({what}): errno {errno}")]
    Readings {
        /// Which reading.
        what: &'static str,
        /// OS error number.
        errno: i32,
    },
}
