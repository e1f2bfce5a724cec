//! Solver parameters (`JdParams`) with documented defaults; serde for CLI configs.

use serde::{Deserialize, Serialize};

/// Which eigenvalues are wanted.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    /// The algebraically smallest (default).
    #[default]
    Smallest,
    /// The algebraically largest.
    Largest,
    /// The ones closest to σ (interior eigenvalues).
    Closest(f64),
    /// The largest in absolute value (ARPACK's `LM`): the target of the
    /// shift-and-invert transformation ([`crate::st`]), whose wanted
    /// eigenvalues 1/(λ − σ) lie at both ends. The wanted set takes values from
    /// both ends, so once it is locked one verification pass at each end looks
    /// for a larger magnitude still missing (unless `Verify::Never` or soft
    /// locking). `"largest_magnitude"` in config files.
    #[serde(rename = "largest_magnitude")]
    LargestMagnitude,
}

/// Convergence test for a Ritz pair (θ, x) with residual r = Ax − θx.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ConvTest {
    /// ‖r‖ ≤ tol·‖A‖ (PRIMME's test; the default). ‖A‖ is estimated by the largest
    /// |Ritz value| seen unless [`JdParams::anorm`] is given.
    #[default]
    Norm,
    /// ‖r‖ ≤ tol·|θ| (SLEPc's default).
    Rel,
    /// ‖r‖ ≤ tol.
    Abs,
    /// ‖r‖ ≤ max(tol·√|θ|, 1e3·ε·‖A‖): the normal equations AᵀA of a singular
    /// value solve ([`crate::svd`]), where the triplet (√θ, Ax/√θ, x) has the
    /// residual ‖r‖/√θ, so tol is the triplet's bound; not below the rounding
    /// of the products.
    Sqrt,
}

/// How long each correction equation is iterated (§3, §4 of McCombs et al.).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum InnerStop {
    /// Until the relative inner residual is ≤ 2^−iter (iter: outer iteration),
    /// at most `maxits` steps (the paper's fixed mode; default).
    #[default]
    Adaptive,
    /// Exactly `maxits` steps (unless the inner residual vanishes).
    Fixed,
    /// For `seconds` of wall time per correction phase (balanced mode), at most
    /// `maxits` steps.
    Time {
        /// Wall seconds per correction phase.
        seconds: f64,
    },
}

/// How the correction equations are solved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum InnerSolver {
    /// Chosen by measured cost (the default; PRIMME's DYNAMIC). Preconditioned
    /// correction equations alternate between GD+k steps (t = −K⁻¹r, no inner
    /// iteration) and block JDQMR, and keep the one whose measured progress per
    /// second is larger (see `jd/dynamic.rs` for the rule); without a
    /// preconditioner, block JDQMR. Solve groups use BiCGSTAB. With `maxits = 0`,
    /// GD+k only. The switches depend on timings, so two runs (or a run and its
    /// resumption from a checkpoint) may take different steps to the same
    /// eigenpairs; choose `Bicgstab` or `Qmrs` for reproducible counters.
    #[default]
    Auto,
    /// Right-preconditioned BiCGSTAB, the paper's solver (McCombs et al. §3):
    /// two matvecs per step, any preconditioner.
    Bicgstab,
    /// Symmetric QMR with JDQMR's dynamic stopping (Stathopoulos; PRIMME's
    /// `inner_solve`): one matvec per step; each solve stops when the estimated
    /// eigenresidual of the corrected vector stops improving, so `maxits` is only a
    /// cap (raise it, e.g. 100). The equations of a block advance together (one
    /// blocked SpMV and preconditioner call per step). Needs a symmetric
    /// preconditioner (none, Jacobi, ILU(0) or FSAI); serial and fine grain only
    /// (solve groups use BiCGSTAB); `InnerStop::Time` is not supported.
    Qmrs,
}

/// The check for copies of a multiple eigenvalue that the block missed: a block
/// method sees at most as many copies of an eigenvalue as its block holds, so a
/// multiplicity larger than the block can leave a wrong set marked converged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Verify {
    /// Verify when some eigenvalue before the last wanted one was locked at least
    /// twice (equal within the residual bounds), with harmonic extraction also
    /// when the last wanted one was: the cases in which missed copies were seen
    /// to change the wanted set (a copy of a triple lost behind the value
    /// beyond it; harmonic solves lost a copy of a 6-fold eigenvalue with a
    /// block of 7); with `Target::LargestMagnitude` always, one pass at each
    /// end of the spectrum. Default.
    #[default]
    Auto,
    /// Always verify.
    Always,
    /// Never verify.
    Never,
}

/// Preconditioner for the correction equations (built by `precond::preconditioners`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum PrecondChoice {
    /// Chosen from what is known (the default). With the matrix (the `solve_matrix`
    /// and `solve_distributed` drivers, the CLI): ILU(0) of A − σI when it passes
    /// [`crate::driver::ilu0_is_stable`] (every pivot has the sign of its diagonal
    /// entry and none was perturbed, and the growth estimate ‖(LU)⁻¹·1‖∞ stays
    /// below [`crate::driver::ILU_GROWTH_LIMIT`] times ‖(A − σI)⁻¹‖'s diagonal
    /// bound), else FSAI of A − σI when it finds A − σI definite and its setup
    /// is bounded ([`crate::driver::fsai_fallback`]), else Jacobi. With an
    /// operator only ([`crate::Problem`]): the
    /// preconditioner given, else Jacobi when the diagonal is given, else none.
    /// Solve groups (`crate::solve_multigrain`) take it as none.
    #[default]
    Auto,
    /// No preconditioner.
    None,
    /// Diagonal (D − θI)⁻¹, refreshed for every Ritz value θ.
    Jacobi,
    /// ILU(0) of A − σI.
    Ilu0,
    /// ILUT(fill, drop_tol) of A − σI (the paper uses ILUT(20, 0)).
    Ilut,
    /// Sparse approximate inverse of A − σI (least squares on A's pattern).
    Spai,
    /// Factorized sparse approximate inverse GᵀG of A − σI (ParaSails' SPD variant).
    Fsai,
}

/// How approximate eigenpairs are extracted from the search space V (the
/// projection step of every outer iteration).
///
/// Standard Rayleigh-Ritz (Galerkin: Vᵀ(AV − θV)y = 0) converges well to
/// extreme eigenvalues, but for interior ones it produces spurious Ritz values
/// near σ (combinations of eigenvectors from both sides of σ) that the solver
/// corrects for nothing. Harmonic Ritz extraction (Morgan 1991; Paige, Parlett
/// and van der Vorst 1995; Sleijpen and van der Vorst 1996 §5, "harmonic Ritz
/// values"; PRIMME's `primme_proj_harmonic`) imposes the Petrov-Galerkin
/// condition W_σᵀ(AVy − θVy) = 0 with W_σ = (A − σI)V instead: its values are
/// Ritz values of (A − σI)⁻¹ and approximate the eigenvalues closest to σ from
/// the outside, so none of them is spurious near σ (see `jd/harmonic.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Extraction {
    /// Harmonic for `Target::Closest(σ)` on a standard problem (no mass
    /// matrix), standard Rayleigh-Ritz otherwise (extreme targets, generalized
    /// problems K x = λ M x, where harmonic extraction pays solves with M).
    /// The default. A harmonic solve whose best wanted
    /// residual has not halved without a lock in 1000 outer iterations (and in
    /// as many as it had run before) goes on with Rayleigh-Ritz (a safeguard; [`crate::Stats::harmonic_stalled_at`]).
    /// [`crate::Stats::extraction`] records the one used (at the end).
    #[default]
    Auto,
    /// Standard Rayleigh-Ritz: the eigenpairs of H = VᵀAV.
    Ritz,
    /// Harmonic Ritz extraction with respect to σ of `Target::Closest(σ)`; the
    /// eigenvalue estimate of each harmonic vector Vy is its Rayleigh quotient.
    /// Kept to the end (no stagnation fallback). With a mass matrix, the test
    /// space is (K − σM)V in the M⁻¹ inner product (solves with M by
    /// conjugate gradients for each new block).
    /// Needs `Target::Closest`: the solve fails with `InvalidParams` for
    /// another target.
    Harmonic,
}

/// Parameters of [`crate::solve`]. Every field has a documented default
/// (`JdParams::default()`); [`JdParams::check`] checks what does not depend on
/// the problem, the solvers the rest against the problem size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JdParams {
    /// Number of eigenpairs wanted. Default 4.
    pub nev: usize,
    /// Block size k: Ritz pairs corrected per outer iteration. Default 0 = min(nev, 8)
    /// (a block at least as large as a cluster or multiplicity finds it whole).
    pub block: usize,
    /// Which eigenvalues. Default `Smallest`.
    pub target: Target,
    /// Convergence tolerance. Default 1e-8.
    pub tol: f64,
    /// Convergence test. Default `Norm`.
    pub conv: ConvTest,
    /// ‖A‖ if known (used by `ConvTest::Norm`); default None = estimated.
    pub anorm: Option<f64>,
    /// Maximum basis size. Default 0 = [`default_max_basis`] capped by n (24 for the
    /// default nev = 4: lap3d:64 took 0.90× the time of a 30-column basis with
    /// ILU(0) and GD+k and 0.91× with BiCGSTAB(3) and no preconditioner, side by
    /// side, and the basis of lap3d:100 holds 96 MB less). Hard problems want more:
    /// msc04515 took 41,632 matvecs at 24 and 9,356 at 40. With the default, each
    /// locked pair gives its column back (the default for the pairs still wanted,
    /// not below restart + 2k; see the solver's `basis_cap`); a given size stays.
    pub max_basis: usize,
    /// Basis size after a thick restart (Ritz vectors kept, plus k previous
    /// directions). Default 0 = max_basis / 2.
    pub restart_size: usize,
    /// Keep the previous iteration's Ritz directions at restart (GD+k / LOBPCG-like
    /// thick restart). Default true.
    pub restart_keep_previous: bool,
    /// Stop after this many matrix-vector products (all, inner included). Default 10⁷.
    /// Checked once per outer iteration, after its Rayleigh-Ritz step and before
    /// its correction equations: the solve ends (`Outcome::BudgetSpent`) at the first
    /// check that finds the budget spent, so the total may exceed the budget by
    /// up to one outer iteration's products: the correction equations (at most
    /// `maxits` inner steps each, two products per BiCGSTAB step, one per JDQMR
    /// step; one product per vector for Davidson steps, `maxits` 0), the
    /// products of the new block, and the residuals recomputed for pairs locked
    /// in the iteration (and a verification pass, if one starts). With block k
    /// and BiCGSTAB that is at most k·(2·maxits + 1) plus the locking checks:
    /// `max_matvecs` 10 with k 4, maxits 20, `InnerSolver::Bicgstab` and no
    /// preconditioner ends at 158 on lap3d:20.
    pub max_matvecs: u64,
    /// Stop after this many outer iterations. Default 100,000.
    pub max_outer: usize,
    /// Inner steps cap per correction equation; 0 gives Davidson steps (GD+k).
    /// Default None = [`DEFAULT_MAXITS_QMRS`] for JDQMR and for `Auto`'s JDQMR
    /// phases (a cap only: JDQMR's dynamic rules stop earlier); for BiCGSTAB, 0
    /// (GD+k: t = −K⁻¹r for the whole block in one preconditioner call, PRIMME's
    /// GD+k) when the correction equations are preconditioned, else
    /// [`DEFAULT_MAXITS_BICGSTAB`] (the paper's BiCGSTAB(3)). Solve groups default
    /// to [`crate::optimal_m::DEFAULT_MAXITS_GROUPS`] (balancing times the
    /// correction equations).
    pub maxits: Option<usize>,
    /// Inner stopping rule. Default `Adaptive` (2^−iter; with `Qmrs`: JDQMR's
    /// dynamic rules).
    pub inner: InnerStop,
    /// How the correction equations are solved. Default `Auto` (GD+k and block
    /// JDQMR by measured cost; see [`InnerSolver::Auto`]).
    pub inner_solver: InnerSolver,
    /// Preconditioner. Default `Auto` (ILU(0) when stable, else FSAI or Jacobi; see
    /// [`PrecondChoice::Auto`]).
    pub precond: PrecondChoice,
    /// Shift σ of the preconditioner (A − σI); default None = σ of `Closest(σ)`,
    /// else 0 for `Smallest`, and for `Largest` an upper bound of the spectrum.
    pub precond_shift: Option<f64>,
    /// ILUT fill per row (with `Ilut`). Default 20.
    pub ilut_fill: usize,
    /// ILUT drop tolerance (with `Ilut`). Default 0.
    pub ilut_drop: f64,
    /// Seed of the start vectors (independent of the number of processes). Default 1.
    pub seed: u64,
    /// Lock converged eigenpairs out of the basis (hard locking). Default true.
    pub locking: bool,
    /// Threads used by each process for SpMV and dense kernels. Default 1.
    pub threads: usize,
    /// Verification pass for missed copies of multiple eigenvalues: once `nev`
    /// pairs are locked, a fresh random block orthogonal to them is iterated until
    /// its best Ritz pair is shown to lie beyond the wanted set (or converges
    /// inside it: a missed copy, which is locked, and the pass repeats). Default
    /// `Auto`.
    pub verify: Verify,
    /// Refuse an explicit matrix that is not symmetric ([`crate::JdError::NotSymmetric`]:
    /// some |a_ij − a_ji| above [`crate::symmetry::SYMMETRY_TOL`] times max |a_ij|)
    /// before solving, in the drivers that take a matrix (`solve_matrix`,
    /// `solve_distributed`, `solve_multigrain`, `Solver::shift_invert`). One pass
    /// over the nonzeros. Default true; false skips it (the solver then assumes
    /// symmetry; operators given as a [`crate::Problem`] are never checked).
    pub check_symmetry: bool,
    /// How eigenpairs are extracted from the basis. Default `Auto`: harmonic
    /// Ritz for `Target::Closest(σ)` without a mass matrix, standard
    /// Rayleigh-Ritz otherwise (see [`Extraction`]).
    pub extraction: Extraction,
    /// From this many wanted pairs on, `Target::Smallest` or `Largest` of an
    /// explicit matrix (no shift, start or deflation vectors, checkpoints) is
    /// solved by spectrum slicing over the indices of that end
    /// ([`crate::Solver::indices`]), whose cost per pair does not grow with
    /// nev, instead of one iteration for all of them (its orthogonalization
    /// against the locked pairs grows as n·nev²). Default 200 (lap3d:40,
    /// one thread: at nev 200, 28 s against 32 s; at nev 100, 17 s against
    /// 9 s); 0 never.
    pub slice_from: usize,
}

impl Default for JdParams {
    fn default() -> Self {
        Self {
            nev: 4,
            block: 0,
            target: Target::Smallest,
            tol: 1e-8,
            conv: ConvTest::Norm,
            anorm: None,
            max_basis: 0,
            restart_size: 0,
            restart_keep_previous: true,
            max_matvecs: 10_000_000,
            max_outer: 100_000,
            maxits: None,
            inner: InnerStop::Adaptive,
            inner_solver: InnerSolver::Auto,
            precond: PrecondChoice::Auto,
            precond_shift: None,
            ilut_fill: 20,
            ilut_drop: 0.0,
            seed: 1,
            locking: true,
            threads: 1,
            verify: Verify::Auto,
            check_symmetry: true,
            extraction: Extraction::Auto,
            slice_from: 200,
        }
    }
}

/// Inner step cap of BiCGSTAB when `maxits` is not given.
pub const DEFAULT_MAXITS_BICGSTAB: usize = 3;
/// Inner step cap of JDQMR when `maxits` is not given.
pub const DEFAULT_MAXITS_QMRS: usize = 40;

/// Default block size cap: `block = 0` means min(nev, this).
pub const DEFAULT_BLOCK_CAP: usize = 8;
/// Smallest default maximum basis size for blocks of 3 or more below
/// [`LARGE_PROBLEM_ROWS`] rows (see [`default_max_basis`]).
pub const MIN_DEFAULT_BASIS: usize = 24;
/// Default maximum basis size per block column: max_basis = this·k + nev.
pub const DEFAULT_BASIS_PER_BLOCK: usize = 5;

/// Rows from which [`default_max_basis`] drops its floor for small blocks to
/// [`MIN_LARGE_BASIS`].
pub const LARGE_PROBLEM_ROWS: usize = 20_000;
/// The floor of [`default_max_basis`] from [`LARGE_PROBLEM_ROWS`] rows on.
pub const MIN_LARGE_BASIS: usize = 8;

/// The default maximum basis for blocks of `k` columns and `nev` wanted pairs
/// of a problem of `n` rows: max(5·k + nev, floor), the floor being
/// min(12 + 4·k, [`MIN_DEFAULT_BASIS`]) below [`LARGE_PROBLEM_ROWS`] rows
/// (16 for k = 1, 20 for k = 2, 24 from k = 3 on) and [`MIN_LARGE_BASIS`] from
/// there on (8 for k = 1, 12 for k = 2, 18 for k = 3; 24 for the default nev = 4
/// either way).
///
/// Each basis column costs about four passes over n doubles per outer
/// iteration, for the k new vectors. On small matrices those passes run in
/// cache and the larger basis saves matvecs on hard problems: with nev = 1 a
/// basis of 16 took 0.70–1.00× the time of 24 on lap3d:40, stencil27:48,
/// lap2d:300, msc04515, bcsstk13/15, crystm01 and 1138_bus, and msc04515 needs
/// 729 matvecs at 16 against 898 at 8. From about 20,000 rows on they stream
/// from memory and the same matvecs cost more: nev = 1 at 8 against 16 took
/// 0.75–0.96× the time on lap3d:28/32/64, stencil27:32/48 and lap2d:150, the
/// same on lap2d:200/300 (medians of 3); nev = 2 at 12 against 20, 0.87–0.93×
/// on lap3d:64, stencil27:48 and lap2d:300; nev = 3 at 18 against 24, 0.97–1.03×
/// (lap3d:40 0.85×).
pub fn default_max_basis(k: usize, nev: usize, n: usize) -> usize {
    let floor = if n >= LARGE_PROBLEM_ROWS {
        MIN_LARGE_BASIS
    } else {
        (12 + 4 * k).min(MIN_DEFAULT_BASIS)
    };
    (DEFAULT_BASIS_PER_BLOCK * k + nev).max(floor)
}

/// Parameters resolved against the problem size n.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Sizes {
    pub k: usize,
    pub max_basis: usize,
    pub restart: usize,
}

impl JdParams {
    /// The block size k before the problem caps it at n: `block`, or min(nev,
    /// [`DEFAULT_BLOCK_CAP`]) when 0.
    pub fn block_size(&self) -> usize {
        if self.block == 0 {
            self.nev.min(DEFAULT_BLOCK_CAP)
        } else {
            self.block
        }
    }

    /// A copy with the defaults that depend on other fields filled in: `Auto`
    /// becomes BiCGSTAB (solve groups), and the inner step cap of the solver.
    pub fn resolved(&self) -> JdParams {
        let mut p = self.clone();
        if p.inner_solver == InnerSolver::Auto {
            p.inner_solver = InnerSolver::Bicgstab;
        }
        p.maxits.get_or_insert(match p.inner_solver {
            InnerSolver::Qmrs => DEFAULT_MAXITS_QMRS,
            _ => DEFAULT_MAXITS_BICGSTAB,
        });
        p
    }

    /// The same as [`JdParams::resolved`], for serial and fine-grain correction
    /// equations that are `preconditioned` or not: `Auto` stays (dynamic) when
    /// preconditioned and becomes `Qmrs` when not (with `InnerStop::Time`,
    /// `Bicgstab`); BiCGSTAB's default cap is 0 (GD+k) with a preconditioner (see
    /// [`JdParams::maxits`]).
    pub fn resolved_for(&self, preconditioned: bool) -> JdParams {
        let mut p = self.clone();
        if p.inner_solver == InnerSolver::Auto {
            if matches!(p.inner, InnerStop::Time { .. }) {
                p.inner_solver = InnerSolver::Bicgstab;
            } else if !preconditioned {
                p.inner_solver = InnerSolver::Qmrs;
            }
        }
        p.maxits.get_or_insert(match p.inner_solver {
            InnerSolver::Qmrs | InnerSolver::Auto => DEFAULT_MAXITS_QMRS,
            _ if preconditioned => 0,
            _ => DEFAULT_MAXITS_BICGSTAB,
        });
        p
    }

    /// The inner step cap (after [`JdParams::resolved`]; BiCGSTAB's default before).
    pub fn maxits(&self) -> usize {
        self.maxits.unwrap_or(DEFAULT_MAXITS_BICGSTAB)
    }

    /// Checks the parameters that do not depend on the problem (every check
    /// of the solvers but those against the dimension n): positive finite
    /// `tol` and `anorm`, a finite target σ and preconditioner shift, a
    /// finite `ilut_drop` ≥ 0, a time budget ≥ 0 (with BiCGSTAB), at least one
    /// thread, `Extraction::Harmonic` only with `Target::Closest`.
    ///
    /// # Errors
    /// [`crate::JdError::InvalidParams`] naming the offending field.
    pub fn check(&self) -> Result<(), crate::JdError> {
        let bad = |field: &'static str, m: String| Err(crate::JdError::invalid(field, m));
        if !(self.tol.is_finite() && self.tol > 0.0) {
            return bad(
                "tol",
                format!("tol must be positive and finite, got {}", self.tol),
            );
        }
        if let Target::Closest(s) = self.target {
            if !s.is_finite() {
                return bad("target", format!("target σ must be finite, got {s}"));
            }
        }
        if let Some(a) = self.anorm {
            if !(a.is_finite() && a > 0.0) {
                return bad(
                    "anorm",
                    format!("anorm must be positive and finite, got {a}"),
                );
            }
        }
        if let InnerStop::Time { seconds } = self.inner {
            if !(seconds.is_finite() && seconds >= 0.0) {
                return bad(
                    "inner",
                    format!("inner time budget must be >= 0, got {seconds}"),
                );
            }
        }
        if self.inner_solver == InnerSolver::Qmrs && matches!(self.inner, InnerStop::Time { .. }) {
            return bad("inner", "inner = time needs inner_solver = bicgstab".into());
        }
        if self.threads == 0 {
            return bad("threads", "threads must be at least 1".into());
        }
        // every preconditioner refuses a non-finite shift, Jacobi included
        if let Some(s) = self.precond_shift {
            if !s.is_finite() {
                return bad(
                    "precond_shift",
                    format!("precond_shift must be finite, got {s}"),
                );
            }
        }
        if self.extraction == Extraction::Harmonic && !matches!(self.target, Target::Closest(_)) {
            return bad(
                "extraction",
                "harmonic extraction needs a target σ (Target::Closest)".into(),
            );
        }
        if !(self.ilut_drop.is_finite() && self.ilut_drop >= 0.0) {
            return bad(
                "ilut_drop",
                format!("ilut_drop must be finite and >= 0, got {}", self.ilut_drop),
            );
        }
        Ok(())
    }

    /// Checks the parameters against the global dimension `n` and resolves the
    /// size defaults.
    ///
    /// # Errors
    /// [`crate::JdError::InvalidParams`] naming the offending field.
    pub(crate) fn resolve(&self, n: usize) -> Result<Sizes, crate::JdError> {
        let bad = |field: &'static str, m: String| Err(crate::JdError::invalid(field, m));
        if n == 0 {
            return bad("matrix", "the matrix is empty (n = 0)".into());
        }
        if self.nev == 0 {
            return bad("nev", "nev must be at least 1".into());
        }
        if self.nev > n {
            return bad(
                "nev",
                format!("nev = {} exceeds the matrix dimension n = {n}", self.nev),
            );
        }
        self.check()?;
        let k = self.block_size().min(n);
        let mut max_basis = if self.max_basis == 0 {
            default_max_basis(k, self.nev, n)
        } else {
            self.max_basis
        };
        max_basis = max_basis.min(n);
        if max_basis < 2 * k && max_basis < n {
            return bad(
                "max_basis",
                format!("max_basis = {max_basis} must be at least twice the block size k = {k}"),
            );
        }
        let restart = if self.restart_size == 0 {
            max_basis / 2
        } else {
            self.restart_size
        };
        // On small problems (max_basis = n < 2k) the bounds cross: keep the lower.
        let lo = k.min(max_basis);
        let hi = max_basis.saturating_sub(k).max(1).max(lo);
        let restart = restart.clamp(lo, hi);
        Ok(Sizes {
            k,
            max_basis,
            restart,
        })
    }
}

/// How an interval is cut into slices ([`crate::Solver::interval`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SliceParams {
    /// The most eigenvalues a slice holds (default 96): fewer cost more
    /// factorizations (one per slice and one per cut) and more solves per
    /// eigenvalue, more cost more orthogonalization per slice (n·cᵢ² per
    /// restart).
    pub per_slice: usize,
    /// The method on each slice's B = (A − σI)⁻¹ (default Lanczos).
    pub method: SliceMethod,
    /// With solve groups: how the interval is shared among them (default
    /// by measured rates; see [`crate::slice_groups`]).
    pub split: GroupSplit,
}

impl Default for SliceParams {
    fn default() -> Self {
        Self {
            per_slice: 96,
            method: SliceMethod::Lanczos,
            split: GroupSplit::Rates,
        }
    }
}

/// The method that finds a slice's eigenvalues, the largest of B = (A − σI)⁻¹
/// (of (K − σM)⁻¹M) with σ at the slice's lower end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SliceMethod {
    /// Block thick-restart Lanczos (Krylov-Schur) with full
    /// reorthogonalization: one solve with the factors and one product with
    /// M per basis column.
    #[default]
    Lanczos,
    /// The block Davidson loop of [`crate::Solver::run`] on B (GD+k steps, a
    /// Rayleigh-Ritz projection per block), also what a second solve from
    /// the first one's vectors runs.
    Davidson,
}

/// How the interval is shared among solve groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupSplit {
    /// Shares proportional to the rates of a flexible phase (default).
    #[default]
    Rates,
    /// Equal counts per group, one round.
    Equal,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_basis_shrinks_for_small_blocks_of_large_problems() {
        let small = LARGE_PROBLEM_ROWS - 1;
        let large = LARGE_PROBLEM_ROWS;
        // (k, nev, below the threshold, from it on)
        for (k, nev, below, above) in [
            (1, 1, 16, 8),
            (2, 2, 20, 12),
            (3, 3, 24, 18),
            (4, 4, 24, 24),
            (8, 10, 50, 50),
        ] {
            assert_eq!(default_max_basis(k, nev, small), below, "k = {k}");
            assert_eq!(default_max_basis(k, nev, large), above, "k = {k}");
        }
        let p = JdParams {
            nev: 1,
            ..JdParams::default()
        };
        assert_eq!(p.resolve(large).unwrap().max_basis, 8);
        assert_eq!(p.resolve(large).unwrap().restart, 4);
        assert_eq!(p.resolve(small).unwrap().max_basis, 16);
        // Capped by n.
        assert_eq!(p.resolve(10).unwrap().max_basis, 10);
    }
}
