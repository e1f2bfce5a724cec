//! Results, statistics and events of the eigensolver (the errors are in
//! [`crate::error`]).

use serde::{Deserialize, Serialize};

/// Counters and timings of one solve (every quantity users tune by).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Stats {
    /// Outer (projection + correction) iterations.
    pub outer_iterations: usize,
    /// Matrix-vector products with A, counted per vector (inner solves included).
    pub matvecs: u64,
    /// Preconditioner applications, per vector.
    pub precond_applications: u64,
    /// Inner solver steps (BiCGSTAB or QMRs) over all correction equations.
    pub inner_steps: u64,
    /// Why the JDQMR inner solves stopped (all zero with BiCGSTAB): the counts tell
    /// whether `maxits` caps them (`steps`) or the dynamic rules do.
    pub inner_stops: InnerStops,
    /// Outer iterations whose correction was a GD+k step (t = −K⁻¹r).
    pub gdk_iterations: usize,
    /// Outer iterations whose correction was a block JDQMR solve.
    pub jdqmr_iterations: usize,
    /// Switches between the two under `InnerSolver::Auto` (progress per counted
    /// work).
    pub method_switches: usize,
    /// Global reductions (all-reduce calls) issued by the solver.
    pub global_sums: u64,
    /// Thick restarts.
    pub restarts: usize,
    /// Eigenpairs locked.
    pub locked: usize,
    /// Vectors replaced by random ones after orthogonalization lost them.
    pub replaced_vectors: usize,
    /// Seconds in the projection phase (orthogonalization, matvecs, Rayleigh-Ritz,
    /// residuals).
    pub projection_seconds: f64,
    /// Seconds in the correction phase (inner solves).
    pub correction_seconds: f64,
    /// Seconds building the preconditioner.
    pub setup_seconds: f64,
    /// Seconds in products with A (the inner solves' included).
    pub spmv_seconds: f64,
    /// Seconds applying the preconditioner (the inner solves' included).
    pub precond_seconds: f64,
    /// Seconds of the projection and correction phases outside products with A and
    /// the preconditioner: orthogonalization, Rayleigh-Ritz, Ritz vectors and
    /// residuals, restarts, inner-solver vector work.
    pub dense_seconds: f64,
    /// The projection phase's seconds by step (see [`PhaseSeconds`]).
    pub phases: PhaseSeconds,
    /// Passes over the basis: reads of the n×m arrays V or W = AV (a block
    /// product, a restart's transformation). Per outer iteration:
    /// `basis_passes / outer_iterations`.
    pub basis_passes: u64,
    /// Total seconds.
    pub wall_seconds: f64,
    /// Final estimate of ‖A‖ used by the `norm` convergence test.
    pub anorm_estimate: f64,
    /// The inner solver used.
    pub inner_solver: crate::params::InnerSolver,
    /// The inner step cap used.
    pub maxits: usize,
    /// Internal scale s (a power of two): the solver worked with s·A because ‖A‖
    /// was outside [1e-100, 1e100]; 0 in a default value means 1.
    pub scale: f64,
    /// Verification passes for missed copies of multiple eigenvalues run.
    pub verification_passes: usize,
    /// Missed copies those passes found (and locked).
    pub missed_copies: usize,
    /// Clusters of locked pairs refined again because their residuals made a
    /// floor under a later pair's (see the locking floor in `jd`).
    pub floor_refinements: usize,
    /// None: no verification was needed (`Verify::Auto`) or asked; Some(true): the
    /// wanted set was verified; Some(false): a pass was cut short by the budget.
    pub verified: Option<bool>,
    /// Deflation vectors the basis was kept orthogonal to (after dropping the
    /// linearly dependent ones; [`crate::Problem::with_deflation`]).
    pub deflation_vectors: usize,
    /// Start vectors that entered the basis ([`crate::Problem::with_initial`]).
    pub initial_vectors: usize,
    /// Products with the mass matrix M, per vector (0 for a standard problem;
    /// [`crate::Problem::with_mass`]).
    pub mass_matvecs: u64,
    /// Shift-and-invert ([`crate::st`]): the number of eigenvalues of A below σ,
    /// from the inertia of the LDLᵀ factorization of A − σI (the count of
    /// negative pivots, Sylvester's law); None when the factorization does not
    /// give it (LU) or without a spectral transformation.
    pub eigenvalues_below_shift: Option<usize>,
    /// The extraction the solve used: `Ritz` or `Harmonic` (what
    /// [`crate::params::Extraction::Auto`] chose; `Auto` only in a default value).
    pub extraction: crate::params::Extraction,
    /// The outer iteration at which `Extraction::Auto`'s harmonic extraction
    /// stagnated (the best wanted residual not halved without a lock in 1000
    /// outer iterations, and in as many as before) and the solve went on with Rayleigh-Ritz (`extraction` then says
    /// `Ritz`); None when it did not.
    pub harmonic_stalled_at: Option<usize>,
    /// The inertia certificate of a solve for the eigenvalues closest to σ
    /// (see [`crate::certify`]): how many eigenvalues lie nearer to σ than the
    /// farthest returned ones, and how many of them a shift-and-invert repair
    /// found; None when it did not run (no explicit matrix, deflation
    /// vectors, `Verify::Never`, another target).
    pub certificate: Option<Certificate>,
    /// What an interval solve ([`crate::Solver::interval`]) counted by inertia
    /// and how it sliced the interval; None for other solves.
    pub interval: Option<IntervalReport>,
}

/// Seconds of the outer iteration's steps (Sleijpen and van der Vorst's JD loop,
/// seed 003 §2: steps (1)-(7)), each with its own products with A. Their sum is
/// at most `projection_seconds`, which also holds the selection, the locking
/// bookkeeping and the method choice. For tuning the basis size: the steps that
/// read the whole basis (orthogonalization, extension, residuals, restart) grow
/// with it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PhaseSeconds {
    /// The new block made orthonormal against the locked vectors and the basis
    /// (block classical Gram-Schmidt with the DGKS test, CGS2 inside the block).
    pub orthogonalization: f64,
    /// The block appended: W_T = A·T and the new columns of H = VᵀAV.
    pub extension: f64,
    /// The projected eigenproblem (Rayleigh-Ritz, or harmonic Ritz).
    pub rayleigh_ritz: f64,
    /// Ritz vectors, residuals and their norms of the selected pairs (one pass
    /// over V and W; none after a restart that put them in the basis's first
    /// columns).
    pub residuals: f64,
    /// Thick restarts (V·C, W·C) and the removal of locked vectors from the basis.
    pub restart: f64,
    /// True residuals of lock candidates (explicit products with A).
    pub lock_checks: f64,
}

impl PhaseSeconds {
    /// The steps as the text report names them, in the order of [`Self::values`].
    pub const NAMES: [&'static str; 6] = [
        "orthogonalization",
        "extension",
        "Rayleigh-Ritz",
        "residuals",
        "restart",
        "lock checks",
    ];

    /// The steps' seconds, in the order of the fields.
    pub fn values(&self) -> [f64; 6] {
        [
            self.orthogonalization,
            self.extension,
            self.rayleigh_ritz,
            self.residuals,
            self.restart,
            self.lock_checks,
        ]
    }

    /// The inverse of [`Self::values`].
    pub fn from_values(v: [f64; 6]) -> Self {
        let [orthogonalization, extension, rayleigh_ritz, residuals, restart, lock_checks] = v;
        Self {
            orthogonalization,
            extension,
            rayleigh_ritz,
            residuals,
            restart,
            lock_checks,
        }
    }
}

/// Counts of JDQMR inner-solve endings (`crate::params::InnerSolver::Qmrs`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct InnerStops {
    /// The `maxits` cap.
    pub steps: u64,
    /// Linear residual below ε‖A‖.
    pub linear: u64,
    /// The estimated eigenresidual stopped improving faster than the linear one.
    pub stagnation: u64,
    /// The estimated Rayleigh quotient moved away from the target.
    pub ritz: u64,
    /// The estimated eigenresidual passed the outer test.
    pub converged: u64,
    /// The estimated eigenresidual fell below 0.1‖r‖.
    pub reduced: u64,
    /// A vanishing or non-finite recurrence coefficient.
    pub breakdown: u64,
}

/// Computed eigenpairs. Eigenvalues are ordered by the target (ascending for
/// `Smallest` and `Closest`, by distance to σ for `Closest`; descending for
/// `Largest`); eigenvector `j` is `eigenvectors[j*n_local..(j+1)*n_local]`
/// (this process's rows). Eigenvectors hold `T`s (`f64`; complex ones come
/// from [`crate::hermitian`]).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Solution<T: precond::Scalar = f64> {
    /// How the solve ended: only with [`Outcome::Converged`] are all `wanted`
    /// pairs here and converged.
    pub outcome: Outcome,
    /// Eigenpairs asked for (the eigenvalues of a [`Outcome::BudgetSpent`] or
    /// [`Outcome::Stopped`] solve may be fewer).
    pub wanted: usize,
    /// Eigenvalues (or estimates, see `converged`), in target order.
    pub eigenvalues: Vec<f64>,
    /// True residual norms ‖A x − λ x‖ (recomputed with explicit matvecs).
    pub residual_norms: Vec<f64>,
    /// Whether each pair passed the convergence test.
    pub converged: Vec<bool>,
    /// Eigenvectors, column-major: this process's rows of each (see `n_local`).
    #[serde(skip)]
    pub eigenvectors: Vec<T>,
    /// Local rows per eigenvector.
    pub n_local: usize,
    /// Global index of this process's first row (0 on one process).
    pub row_offset: usize,
    /// Solve groups, balancing and all-to-all figures of a multigrain solve
    /// ([`crate::solve_multigrain`]); None for the other entry points.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multigrain: Option<crate::multigrain::stats::MultigrainStats>,
    /// Counters and timings.
    pub stats: Stats,
}

/// How a solve ended ([`Solution::outcome`]). Running out of budget or being
/// asked to stop is not an error: the solution then holds the pairs converged
/// so far and the best estimates of the rest (`converged == false`, with their
/// residual norms), as PRIMME and SLEPc return them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Every wanted pair passed the convergence test, and the checks that
    /// follow it (verification of multiplicities, inertia certificate,
    /// interval count) found none missing.
    #[default]
    Converged,
    /// `max_matvecs` or `max_outer` ran out first
    /// ([`crate::ExecutionSettings::max_matvecs`]).
    BudgetSpent,
    /// The iteration ended, but the checks after it found pairs missing or
    /// short: an inertia count says that pairs are missing and the repair did
    /// not find them all (an interval or a certified interior solve;
    /// [`crate::certify`]), or shift-and-invert pairs still miss the user's
    /// test on their true residuals after the refinement ([`crate::st`]).
    Incomplete,
    /// An observer or a checkpoint sink asked to stop (a signal handler's
    /// observer among them; [`crate::Solver::observer`]).
    Stopped,
}

impl Outcome {
    /// A short phrase for messages: "converged", "budget spent", ….
    pub fn describe(self) -> &'static str {
        match self {
            Outcome::Converged => "converged",
            Outcome::BudgetSpent => "budget spent",
            Outcome::Incomplete => "pairs missing or short after the checks",
            Outcome::Stopped => "stopped",
        }
    }
}

impl Solution {
    /// Whether every wanted pair is here and converged ([`Outcome::Converged`]).
    pub fn is_converged(&self) -> bool {
        self.outcome == Outcome::Converged
    }

    /// Number of pairs that passed the convergence test.
    pub fn nconverged(&self) -> usize {
        self.converged.iter().filter(|&&c| c).count()
    }
    /// The global rows this process holds.
    pub fn rows(&self) -> std::ops::Range<usize> {
        self.row_offset..self.row_offset + self.n_local
    }
    /// Eigenvector j (local rows).
    pub fn eigenvector(&self, j: usize) -> &[f64] {
        &self.eigenvectors[j * self.n_local..(j + 1) * self.n_local]
    }
}

/// Per-iteration event for observers (progress, convergence history).
#[derive(Debug, Clone, Serialize)]
pub struct IterationEvent {
    /// Outer iterations so far (1 at the first event).
    pub outer_iteration: usize,
    /// Matrix-vector products so far.
    pub matvecs: u64,
    /// Basis size after this iteration's projection.
    pub basis_size: usize,
    /// Eigenpairs locked so far.
    pub nconverged: usize,
    /// Ritz values of the current block (targeted, unconverged first).
    pub ritz_values: Vec<f64>,
    /// Their residual norms.
    pub residual_norms: Vec<f64>,
    /// Inner steps of each correction equation of this iteration.
    pub inner_steps: Vec<usize>,
    /// Seconds since the solve started.
    pub elapsed_seconds: f64,
}

/// What the inertia certificate of an interior solve found
/// ([`crate::Stats::certificate`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Certificate {
    /// The radius r: eigenvalues counted in (σ − r, σ + r).
    pub radius: f64,
    /// Their number, from the inertia of two LDLᵀ factorizations.
    pub count: usize,
    /// Of them, missing from the solve and found by the shift-and-invert
    /// repair.
    pub repaired: usize,
    /// Seconds of the factorizations and the repair.
    pub seconds: f64,
}

/// What an interval solve counted and did ([`crate::Stats::interval`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct IntervalReport {
    /// The interval's lower end, as asked.
    pub lower: f64,
    /// Its upper end.
    pub upper: f64,
    /// The ends where the inertia counted, a little outside [lower, upper]:
    /// every eigenvalue in [counted_lower, counted_upper) is returned.
    pub counted_lower: f64,
    /// See `counted_lower`.
    pub counted_upper: f64,
    /// Eigenvalues in it by inertia, multiplicities included: the number of
    /// pairs returned.
    pub count: usize,
    /// Slices holding at least one eigenvalue (each one shift-and-invert solve).
    pub slices: usize,
    /// LDLᵀ factorizations for the counts (the two ends and every cut).
    pub counts: usize,
    /// Slices solved a second time for more pairs (a first solve missed some).
    pub retried: usize,
    /// Seconds of the counts.
    pub count_seconds: f64,
    /// Eigenvalues below `counted_lower`, by inertia.
    pub below: usize,
    /// For an index range ([`crate::slicing::Range::Indices`]): the first index returned
    /// (0-based, ascending); `lower` and `upper` are then the bracket found
    /// by inertia, and `count` the pairs returned.
    pub first_index: Option<usize>,
    /// Solve groups the slices were spread over (0: every slice over all
    /// the processes).
    pub groups: usize,
    /// With groups: (slowest − mean)/slowest of the groups' seconds in the
    /// last round, in percent (0 when all finish together).
    pub imbalance_percent: f64,
}
