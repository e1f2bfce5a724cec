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
    /// |Ritz value| seen unless [`crate::ProblemSettings::anorm`] is given.
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
    /// Chosen by counted cost (the default; PRIMME's DYNAMIC, with the work
    /// counted instead of timed). Preconditioned correction equations
    /// alternate between GD+k steps (t = −K⁻¹r, no inner iteration) and block
    /// JDQMR, and keep the one whose progress per unit of work is larger: the
    /// words of memory its products, basis passes and inner steps move (see
    /// `correction/dynamic.rs` for the rule); without a preconditioner, block
    /// JDQMR. Solve groups use BiCGSTAB. With `maxits = 0`, GD+k only. The
    /// choice does not depend on the machine's speed or load: the same call
    /// takes the same steps. A run resumed from a checkpoint starts the choice
    /// afresh, so its steps may differ from those of the run without a stop.
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

/// Parameters of a solve ([`crate::Solver`]), grouped by the stage they
/// set: the problem, the basis and its restart, the correction equations, the
/// preconditioner and the execution. Every field has a documented default
/// (`JdParams::default()`) and means the same in every mode (one process,
/// threads, MPI, solve groups, shift-and-invert); [`JdParams::check`] checks
/// what does not depend on the problem, the solvers the rest against the
/// problem size.
///
/// In config files and JSON each group is a table (`[basis]` then `max_basis
/// = 40`, or `{"basis": {"max_basis": 40}}`). Every setting also has a flat
/// name, read at the top level into its group ([`JdParams::FLAT_KEYS`]:
/// `max_basis = 40`, `precond = "ilu0"` for `preconditioner.kind`): the keys
/// of earlier config files and the keywords of the Python `eigsh`.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct JdParams {
    /// What is wanted and when a pair counts as converged.
    pub problem: ProblemSettings,
    /// The search space: its block, size and restart, how pairs are extracted
    /// from it and locked, and its start.
    pub basis: BasisSettings,
    /// The correction equations: how they are solved and for how long.
    pub correction: CorrectionSettings,
    /// The preconditioner of the correction equations.
    pub preconditioner: PrecondSettings,
    /// How the solve runs: threads, budgets and the switch to spectrum slicing.
    pub execution: ExecutionSettings,
}

/// What is wanted and when a pair counts as converged. Part of [`JdParams`]
/// (`[problem]` in config files).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProblemSettings {
    /// Number of eigenpairs wanted. Default 4.
    pub nev: usize,
    /// Which eigenvalues. Default `Smallest`.
    pub target: Target,
    /// Convergence tolerance. Default 1e-8.
    pub tol: f64,
    /// Convergence test. Default `Norm`.
    pub conv: ConvTest,
    /// ‖A‖ if known (used by `ConvTest::Norm`); default None = estimated.
    pub anorm: Option<f64>,
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
}

impl Default for ProblemSettings {
    fn default() -> Self {
        Self {
            nev: 4,
            target: Target::Smallest,
            tol: 1e-8,
            conv: ConvTest::Norm,
            anorm: None,
            verify: Verify::Auto,
            check_symmetry: true,
        }
    }
}

/// The search space: its block, size and restart, how pairs are extracted
/// from it and locked, and its start. Part of [`JdParams`] (`[basis]` in
/// config files).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BasisSettings {
    /// Block size k: Ritz pairs corrected per outer iteration. Default 0 = min(nev, 8)
    /// (a block at least as large as a cluster or multiplicity finds it whole).
    pub block: usize,
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
    /// How eigenpairs are extracted from the basis. Default `Auto`: harmonic
    /// Ritz for `Target::Closest(σ)` without a mass matrix, standard
    /// Rayleigh-Ritz otherwise (see [`Extraction`]).
    pub extraction: Extraction,
    /// Lock converged eigenpairs out of the basis (hard locking). Default true.
    pub locking: bool,
    /// Seed of the start vectors (independent of the number of processes). Default 1.
    pub seed: u64,
}

impl Default for BasisSettings {
    fn default() -> Self {
        Self {
            block: 0,
            max_basis: 0,
            restart_size: 0,
            restart_keep_previous: true,
            extraction: Extraction::Auto,
            locking: true,
            seed: 1,
        }
    }
}

/// The correction equations: how they are solved and for how long. Part of
/// [`JdParams`] (`[correction]` in config files).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CorrectionSettings {
    /// How the correction equations are solved. Default `Auto` (GD+k and block
    /// JDQMR by measured cost; see [`InnerSolver::Auto`]).
    pub solver: InnerSolver,
    /// Inner stopping rule. Default `Adaptive` (2^−iter; with `Qmrs`: JDQMR's
    /// dynamic rules).
    pub stop: InnerStop,
    /// Inner steps cap per correction equation; 0 gives Davidson steps (GD+k).
    /// Default None = [`DEFAULT_MAXITS_QMRS`] for JDQMR and for `Auto`'s JDQMR
    /// phases (a cap only: JDQMR's dynamic rules stop earlier); for BiCGSTAB, 0
    /// (GD+k: t = −K⁻¹r for the whole block in one preconditioner call, PRIMME's
    /// GD+k) when the correction equations are preconditioned, else
    /// [`DEFAULT_MAXITS_BICGSTAB`] (the paper's BiCGSTAB(3)). Solve groups default
    /// to [`crate::optimal_m::DEFAULT_MAXITS_GROUPS`] (balancing times the
    /// correction equations).
    pub maxits: Option<usize>,
}

impl Default for CorrectionSettings {
    fn default() -> Self {
        Self {
            solver: InnerSolver::Auto,
            stop: InnerStop::Adaptive,
            maxits: None,
        }
    }
}

/// The preconditioner of the correction equations. Part of [`JdParams`]
/// (`[preconditioner]` in config files).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PrecondSettings {
    /// Preconditioner. Default `Auto` (ILU(0) when stable, else FSAI or Jacobi; see
    /// [`PrecondChoice::Auto`]).
    pub kind: PrecondChoice,
    /// Shift σ of the preconditioner (A − σI); default None = σ of `Closest(σ)`,
    /// else 0 for `Smallest`, and for `Largest` an upper bound of the spectrum.
    pub shift: Option<f64>,
    /// ILUT fill per row (with `Ilut`). Default 20.
    pub ilut_fill: usize,
    /// ILUT drop tolerance (with `Ilut`). Default 0.
    pub ilut_drop: f64,
}

impl Default for PrecondSettings {
    fn default() -> Self {
        Self {
            kind: PrecondChoice::Auto,
            shift: None,
            ilut_fill: 20,
            ilut_drop: 0.0,
        }
    }
}

/// How the solve runs: threads, budgets and the switch to spectrum slicing.
/// Part of [`JdParams`] (`[execution]` in config files).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExecutionSettings {
    /// Threads used by each process for SpMV and dense kernels. Default 1.
    pub threads: usize,
    /// Stop after this many matrix-vector products (all, inner included).
    /// Default None: scaled with the problem, max(10⁵, 10·n·nev) for order n
    /// and nev wanted pairs (ARPACK's `maxiter` is 10·n restarts; see
    /// [`ExecutionSettings::matvec_budget`]). Checked once per outer
    /// iteration, after its Rayleigh-Ritz step and before its correction
    /// equations: the solve ends (`Outcome::BudgetSpent`) at the first
    /// check that finds the budget spent, so the total may exceed the budget by
    /// up to one outer iteration's products: the correction equations (at most
    /// `maxits` inner steps each, two products per BiCGSTAB step, one per JDQMR
    /// step; one product per vector for Davidson steps, `maxits` 0), the
    /// products of the new block, and the residuals recomputed for pairs locked
    /// in the iteration (and a verification pass, if one starts). With block k
    /// and BiCGSTAB that is at most k·(2·maxits + 1) plus the locking checks:
    /// `max_matvecs` 10 with k 4, maxits 20, `InnerSolver::Bicgstab` and no
    /// preconditioner ends at 158 on lap3d:20.
    pub max_matvecs: Option<u64>,
    /// Stop after this many outer iterations. Default None: max(10⁵, 10·n)
    /// ([`ExecutionSettings::outer_budget`]).
    pub max_outer: Option<usize>,
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

impl Default for ExecutionSettings {
    fn default() -> Self {
        Self {
            threads: 1,
            max_matvecs: None,
            max_outer: None,
            slice_from: 200,
        }
    }
}

/// The least product budget of [`ExecutionSettings::matvec_budget`].
pub const MIN_MATVEC_BUDGET: u64 = 100_000;
/// Products per row and wanted pair of [`ExecutionSettings::matvec_budget`].
pub const MATVECS_PER_ROW_AND_PAIR: u64 = 10;
/// The least outer-iteration budget of [`ExecutionSettings::outer_budget`].
pub const MIN_OUTER_BUDGET: usize = 100_000;

impl ExecutionSettings {
    /// The product budget of a problem of order `n` with `nev` wanted pairs:
    /// `max_matvecs`, else max([`MIN_MATVEC_BUDGET`], 10·n·nev). Solves of
    /// large problems take far fewer, inner steps included (lap3d:64, 4
    /// pairs: 455 for 262,144 rows); one that cannot converge (the smallest
    /// magnitudes of an indefinite matrix without a shift) stops in
    /// proportion to its size instead of after a fixed count.
    #[must_use]
    pub fn matvec_budget(&self, n: usize, nev: usize) -> u64 {
        self.max_matvecs.unwrap_or_else(|| {
            MATVECS_PER_ROW_AND_PAIR
                .saturating_mul(n as u64)
                .saturating_mul(nev.max(1) as u64)
                .max(MIN_MATVEC_BUDGET)
        })
    }

    /// The outer-iteration budget of a problem of order `n`: `max_outer`,
    /// else max([`MIN_OUTER_BUDGET`], 10·n): 10·n as ARPACK's `maxiter` for
    /// large n; small problems keep room for the slow GD+k iterations of
    /// interior targets (lap2d:30 at σ = 1 takes over 10⁴).
    #[must_use]
    pub fn outer_budget(&self, n: usize) -> usize {
        self.max_outer
            .unwrap_or_else(|| n.saturating_mul(10).max(MIN_OUTER_BUDGET))
    }
}

impl JdParams {
    /// The flat name of every setting and its place: (flat name, group, key
    /// in the group).
    pub const FLAT_KEYS: [(&'static str, &'static str, &'static str); 25] = [
        ("nev", "problem", "nev"),
        ("target", "problem", "target"),
        ("tol", "problem", "tol"),
        ("conv", "problem", "conv"),
        ("anorm", "problem", "anorm"),
        ("verify", "problem", "verify"),
        ("check_symmetry", "problem", "check_symmetry"),
        ("block", "basis", "block"),
        ("max_basis", "basis", "max_basis"),
        ("restart_size", "basis", "restart_size"),
        ("restart_keep_previous", "basis", "restart_keep_previous"),
        ("extraction", "basis", "extraction"),
        ("locking", "basis", "locking"),
        ("seed", "basis", "seed"),
        ("inner_solver", "correction", "solver"),
        ("inner", "correction", "stop"),
        ("maxits", "correction", "maxits"),
        ("precond", "preconditioner", "kind"),
        ("precond_shift", "preconditioner", "shift"),
        ("ilut_fill", "preconditioner", "ilut_fill"),
        ("ilut_drop", "preconditioner", "ilut_drop"),
        ("threads", "execution", "threads"),
        ("max_matvecs", "execution", "max_matvecs"),
        ("max_outer", "execution", "max_outer"),
        ("slice_from", "execution", "slice_from"),
    ];
}

/// The wire form of [`JdParams`]: one table per group.
#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct GroupedParams {
    problem: ProblemSettings,
    basis: BasisSettings,
    correction: CorrectionSettings,
    preconditioner: PrecondSettings,
    execution: ExecutionSettings,
}

/// Reads the grouped form and the flat names (each moved into its group; a
/// setting given both ways, or an unknown key, is an error that names the
/// grouped key).
impl<'de> Deserialize<'de> for JdParams {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut v = serde_json::Value::deserialize(d)?;
        group_flat_keys(&mut v).map_err(D::Error::custom)?;
        let g = GroupedParams::deserialize(v).map_err(D::Error::custom)?;
        Ok(JdParams {
            problem: g.problem,
            basis: g.basis,
            correction: g.correction,
            preconditioner: g.preconditioner,
            execution: g.execution,
        })
    }
}

/// Moves the flat names ([`JdParams::FLAT_KEYS`]) at the top of the object
/// `v` into their groups.
///
/// # Errors
/// A message naming the key when it is given both flat and in its group, or
/// when a top-level key is neither a group nor a flat key.
fn group_flat_keys(v: &mut serde_json::Value) -> Result<(), String> {
    let Some(obj) = v.as_object_mut() else {
        return Ok(()); // the typed pass reports the wrong type
    };
    const GROUPS: [&str; 5] = [
        "problem",
        "basis",
        "correction",
        "preconditioner",
        "execution",
    ];
    let keys: Vec<String> = obj.keys().cloned().collect();
    for key in keys {
        if GROUPS.contains(&key.as_str()) {
            if !obj[&key].is_object() {
                return Err(format!("`{key}` must be a table of settings"));
            }
            continue;
        }
        let Some(&(_, group, new)) = JdParams::FLAT_KEYS.iter().find(|(old, ..)| *old == key)
        else {
            let hint = JdParams::FLAT_KEYS
                .iter()
                .find(|(_, _, new)| *new == key)
                .map(|(_, g, n)| format!(" (did you mean `{g}.{n}`?)"))
                .unwrap_or_default();
            return Err(format!(
                "unknown key `{key}`{hint}: the settings are the groups {}",
                GROUPS.map(|g| format!("`{g}`")).join(", ")
            ));
        };
        let value = obj.remove(&key).unwrap_or_default();
        let table = obj
            .entry(group)
            .or_insert_with(|| serde_json::Value::Object(Default::default()));
        let Some(table) = table.as_object_mut() else {
            return Err(format!("`{group}` must be a table of settings"));
        };
        if table.contains_key(new) {
            return Err(format!(
                "`{key}` is given twice: flat and as `{group}.{new}` (keep `{group}.{new}`)"
            ));
        }
        table.insert(new.to_string(), value);
    }
    Ok(())
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
        if self.basis.block == 0 {
            self.problem.nev.min(DEFAULT_BLOCK_CAP)
        } else {
            self.basis.block
        }
    }

    /// A copy with the defaults that depend on other fields filled in: `Auto`
    /// becomes BiCGSTAB (solve groups), and the inner step cap of the solver.
    pub fn resolved(&self) -> JdParams {
        let mut p = self.clone();
        if p.correction.solver == InnerSolver::Auto {
            p.correction.solver = InnerSolver::Bicgstab;
        }
        p.correction
            .maxits
            .get_or_insert(match p.correction.solver {
                InnerSolver::Qmrs => DEFAULT_MAXITS_QMRS,
                _ => DEFAULT_MAXITS_BICGSTAB,
            });
        p
    }

    /// The same as [`JdParams::resolved`], for serial and fine-grain correction
    /// equations that are `preconditioned` or not: `Auto` stays (dynamic) when
    /// preconditioned and becomes `Qmrs` when not (with `InnerStop::Time`,
    /// `Bicgstab`); BiCGSTAB's default cap is 0 (GD+k) with a preconditioner (see
    /// [`crate::CorrectionSettings::maxits`]).
    pub fn resolved_for(&self, preconditioned: bool) -> JdParams {
        let mut p = self.clone();
        if p.correction.solver == InnerSolver::Auto {
            if matches!(p.correction.stop, InnerStop::Time { .. }) {
                p.correction.solver = InnerSolver::Bicgstab;
            } else if !preconditioned {
                p.correction.solver = InnerSolver::Qmrs;
            }
        }
        p.correction
            .maxits
            .get_or_insert(match p.correction.solver {
                InnerSolver::Qmrs | InnerSolver::Auto => DEFAULT_MAXITS_QMRS,
                _ if preconditioned => 0,
                _ => DEFAULT_MAXITS_BICGSTAB,
            });
        p
    }

    /// The inner step cap (after [`JdParams::resolved`]; BiCGSTAB's default before).
    pub fn maxits(&self) -> usize {
        self.correction.maxits.unwrap_or(DEFAULT_MAXITS_BICGSTAB)
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
        if !(self.problem.tol.is_finite() && self.problem.tol > 0.0) {
            return bad(
                "tol",
                format!("tol must be positive and finite, got {}", self.problem.tol),
            );
        }
        if let Target::Closest(s) = self.problem.target {
            if !s.is_finite() {
                return bad("target", format!("target σ must be finite, got {s}"));
            }
        }
        if let Some(a) = self.problem.anorm {
            if !(a.is_finite() && a > 0.0) {
                return bad(
                    "anorm",
                    format!("anorm must be positive and finite, got {a}"),
                );
            }
        }
        if let InnerStop::Time { seconds } = self.correction.stop {
            if !(seconds.is_finite() && seconds >= 0.0) {
                return bad(
                    "inner",
                    format!("inner time budget must be >= 0, got {seconds}"),
                );
            }
        }
        if self.correction.solver == InnerSolver::Qmrs
            && matches!(self.correction.stop, InnerStop::Time { .. })
        {
            return bad("inner", "inner = time needs inner_solver = bicgstab".into());
        }
        if self.execution.threads == 0 {
            return bad("threads", "threads must be at least 1".into());
        }
        // every preconditioner refuses a non-finite shift, Jacobi included
        if let Some(s) = self.preconditioner.shift {
            if !s.is_finite() {
                return bad(
                    "precond_shift",
                    format!("precond_shift must be finite, got {s}"),
                );
            }
        }
        if self.basis.extraction == Extraction::Harmonic
            && !matches!(self.problem.target, Target::Closest(_))
        {
            return bad(
                "extraction",
                "harmonic extraction needs a target σ (Target::Closest)".into(),
            );
        }
        if !(self.preconditioner.ilut_drop.is_finite() && self.preconditioner.ilut_drop >= 0.0) {
            return bad(
                "ilut_drop",
                format!(
                    "ilut_drop must be finite and >= 0, got {}",
                    self.preconditioner.ilut_drop
                ),
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
        if self.problem.nev == 0 {
            return bad("nev", "nev must be at least 1".into());
        }
        if self.problem.nev > n {
            return bad(
                "nev",
                format!(
                    "nev = {} exceeds the matrix dimension n = {n}",
                    self.problem.nev
                ),
            );
        }
        self.check()?;
        let k = self.block_size().min(n);
        let mut max_basis = if self.basis.max_basis == 0 {
            default_max_basis(k, self.problem.nev, n)
        } else {
            self.basis.max_basis
        };
        max_basis = max_basis.min(n);
        if max_basis < 2 * k && max_basis < n {
            return bad(
                "max_basis",
                format!("max_basis = {max_basis} must be at least twice the block size k = {k}"),
            );
        }
        let restart = if self.basis.restart_size == 0 {
            max_basis / 2
        } else {
            self.basis.restart_size
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
    /// The most eigenvalues a slice holds (default 150): fewer cost more
    /// factorizations (one per slice and one per cut) and more solves per
    /// eigenvalue, more cost more orthogonalization per slice (n·cᵢ² per
    /// restart). With the shift at each slice's centre, lap3d:30 on
    /// [0, 0.8] (293 eigenvalues) takes 7.7–8.1 s with 150 against 8.7–9.7 s
    /// with 96; lap2d:300 on [0, 0.03] (201) the same with either.
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
            per_slice: 150,
            method: SliceMethod::Lanczos,
            split: GroupSplit::Rates,
        }
    }
}

/// The method that finds a slice's eigenvalues, the largest in magnitude of
/// B = (A − σI)⁻¹ (of (K − σM)⁻¹M) with σ at the slice's centre.
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
            problem: ProblemSettings {
                nev: 1,
                ..Default::default()
            },
            ..JdParams::default()
        };
        assert_eq!(p.resolve(large).unwrap().max_basis, 8);
        assert_eq!(p.resolve(large).unwrap().restart, 4);
        assert_eq!(p.resolve(small).unwrap().max_basis, 16);
        // Capped by n.
        assert_eq!(p.resolve(10).unwrap().max_basis, 10);
    }
}

#[cfg(test)]
mod serde_tests {
    use super::*;

    fn read(json: &str) -> Result<JdParams, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    #[test]
    fn grouped_form_round_trips() {
        let p = JdParams {
            problem: ProblemSettings {
                nev: 7,
                target: Target::Closest(1.5),
                ..Default::default()
            },
            correction: CorrectionSettings {
                solver: InnerSolver::Qmrs,
                stop: InnerStop::Time { seconds: 0.25 },
                maxits: Some(12),
            },
            preconditioner: PrecondSettings {
                kind: PrecondChoice::Ilut,
                shift: Some(-2.0),
                ..Default::default()
            },
            ..JdParams::default()
        };
        let json = serde_json::to_string(&p).unwrap();
        assert!(json.starts_with(r#"{"problem":{"nev":7"#), "{json}");
        assert_eq!(read(&json).unwrap(), p);
        assert_eq!(read("{}").unwrap(), JdParams::default());
    }

    #[test]
    fn flat_names_go_to_their_groups() {
        let p = read(
            r#"{"nev": 3, "precond": "jacobi", "precond_shift": 1.0, "inner_solver": "qmrs",
                "inner": "fixed", "max_basis": 30, "threads": 2, "basis": {"seed": 9}}"#,
        )
        .unwrap();
        assert_eq!(p.problem.nev, 3);
        assert_eq!(p.preconditioner.kind, PrecondChoice::Jacobi);
        assert_eq!(p.preconditioner.shift, Some(1.0));
        assert_eq!(p.correction.solver, InnerSolver::Qmrs);
        assert_eq!(p.correction.stop, InnerStop::Fixed);
        assert_eq!(p.basis.max_basis, 30);
        assert_eq!(p.basis.seed, 9);
        assert_eq!(p.execution.threads, 2);
        // Every flat name lands on a key its group knows.
        for (flat, group, key) in JdParams::FLAT_KEYS {
            let v = serde_json::to_value(JdParams::default()).unwrap();
            let value = &v[group][key];
            let optional = ["anorm", "maxits", "shift", "max_matvecs", "max_outer"];
            assert!(!value.is_null() || optional.contains(&key), "{key}");
            let one = serde_json::json!({ flat: value });
            assert_eq!(
                serde_json::from_value::<JdParams>(one).unwrap(),
                JdParams::default()
            );
        }
    }

    #[test]
    fn unknown_and_doubled_keys_name_the_grouped_key() {
        let e = read(r#"{"nev": 3, "problem": {"nev": 4}}"#).unwrap_err();
        assert!(
            e.contains("`nev` is given twice") && e.contains("problem.nev"),
            "{e}"
        );
        let e = read(r#"{"kind": "ilu0"}"#).unwrap_err();
        assert!(
            e.contains("unknown key `kind`") && e.contains("preconditioner.kind"),
            "{e}"
        );
        let e = read(r#"{"nevv": 3}"#).unwrap_err();
        assert!(e.contains("unknown key `nevv`"), "{e}");
        let e = read(r#"{"problem": {"nevv": 3}}"#).unwrap_err();
        assert!(e.contains("nevv"), "{e}");
        let e = read(r#"{"basis": 3}"#).unwrap_err();
        assert!(e.contains("basis"), "{e}");
    }
}
