//! The one entry point of every solve: [`Solver`], a builder in the style of
//! argmin's `Executor`. It takes the problem (a CSR matrix, or a [`Problem`]
//! of one's own operator) and the parameters, any number of hooks (observers,
//! checkpoint sinks, a checkpoint to resume from), and where to run (one
//! process, the ranks of a communicator, or multigrain solve groups), then
//! [`run`](Solver::run)s the one solver loop of [`crate::jd`].
//!
//! ```
//! use jdmg::prelude::*;
//! use std::ops::ControlFlow;
//!
//! let a = matrices::generate::generate(&"lap3d:8".parse().unwrap()).unwrap();
//! let params = JdParams {
//!     problem: ProblemSettings { nev: 3, tol: 1e-10, ..Default::default() },
//!     ..JdParams::default()
//! };
//! let mut residuals = Vec::new();
//! let mut watch = |ev: &IterationEvent| {
//!     residuals.push(ev.residual_norms.clone());
//!     ControlFlow::Continue(())
//! };
//! let sol = Solver::new(&a, &params).observer(&mut watch).run()?;
//! assert_eq!(sol.nconverged(), 3);
//! assert!(!residuals.is_empty());
//! # Ok::<(), JdError>(())
//! ```
//!
//! Serial, fine-grain ([`Solver::comm`]) and multigrain ([`Solver::groups`])
//! solves all take every hook: solve groups get the observer, checkpoints
//! (written and resumed), JDQMR (`InnerSolver::Qmrs`) and the internal scaling
//! like the other two. The functions [`crate::solve_matrix`],
//! [`crate::solve_distributed`], [`crate::solve`], … are one-line shorthands
//! for common builders.

use std::ops::ControlFlow;

use lblib::{Comm, SelfComm};
use matrices::partition::RowPartition;
use precond::dist::DistOptions;
use precond::Operator;

use crate::checkpoint::{Checkpoint, CheckpointRequest, CheckpointSink, Checkpointing};
use crate::error::JdError;
use crate::input::AsCsr;
use crate::jd::{local_rows, run_loop, solved, Hooks, Observer, Problem, Spaces};
use crate::multigrain::groups::fine_world;
use crate::multigrain::solve::{run as multigrain_run, Caller};
use crate::multigrain::MultigrainParams;
use crate::params::{JdParams, Target};
use crate::repartition::RepartitionEvent;
use crate::setup::{check_matrix, precond_shift, rows, with_setup, RowsSpec};
use crate::slicing::{Range, SliceParams};
use crate::solution::{IterationEvent, Solution, Stats};

/// A solve on a CSR matrix (any [`AsCsr`]): on one process, over the ranks
/// of `comm` (fine grain), or with solve groups (multigrain). See
/// [`Solver::new`].
pub struct OnMatrix<'h, M: ?Sized, C = SelfComm, B = SelfComm> {
    a: &'h M,
    comm: Option<&'h C>,
    groups: Option<(&'h B, &'h MultigrainParams)>,
    spaces: Spaces<'h>,
    mass: Option<&'h matrices::CsrMatrix>,
    /// σ of shift-and-invert ([`Solver::shift_invert`]).
    shift: Option<f64>,
    /// [a, b] of an interval solve ([`Solver::interval`]) and its slicing.
    interval: Option<(Range, SliceParams)>,
}

/// A solve on a [`Problem`] of one's own (matrix-free). See
/// [`Solver::problem`].
pub struct OnProblem<'h, 'p, A: ?Sized, C: ?Sized> {
    pb: &'h Problem<'p, A, C>,
}

/// The one solver entry point: the problem, the parameters and the hooks,
/// then [`run`](Solver::run) (see the module documentation).
pub struct Solver<'h, I> {
    input: I,
    params: &'h JdParams,
    observers: Vec<Observer<'h>>,
    sinks: Vec<&'h mut dyn CheckpointSink>,
    resume: Option<&'h Checkpoint>,
    repartitions: Vec<&'h mut dyn FnMut(&RepartitionEvent)>,
}

impl<'h, M: AsCsr + ?Sized> Solver<'h, OnMatrix<'h, M>> {
    /// A solve of the matrix `a` (a [`matrices::CsrMatrix`], a
    /// `sprs::CsMat<f64>` or a faer sparse matrix) on one process, with
    /// `params.threads` threads; the operator, its diagonal and the
    /// preconditioner of `params.precond` are built from it. Add
    /// [`comm`](Solver::comm) or [`groups`](Solver::groups) to run on several
    /// processes.
    pub fn new(a: &'h M, params: &'h JdParams) -> Self {
        Self {
            input: OnMatrix {
                a,
                comm: None,
                groups: None,
                spaces: Spaces::default(),
                mass: None,
                shift: None,
                interval: None,
            },
            params,
            observers: Vec::new(),
            sinks: Vec::new(),
            resume: None,
            repartitions: Vec::new(),
        }
    }
}

impl<'h, 'p, A: Operator + ?Sized, C: Comm + ?Sized> Solver<'h, OnProblem<'h, 'p, A, C>> {
    /// A solve of a problem of one's own: an operator on this process's rows,
    /// on its communicator, with its diagonal, preconditioner and spaces
    /// (see [`Problem`]). Collective over `pb.comm`.
    pub fn problem(pb: &'h Problem<'p, A, C>, params: &'h JdParams) -> Self {
        Self {
            input: OnProblem { pb },
            params,
            observers: Vec::new(),
            sinks: Vec::new(),
            resume: None,
            repartitions: Vec::new(),
        }
    }

    /// Runs the solve.
    ///
    /// # Errors
    /// As [`Solver::run`] of a matrix, but for the checks of the matrix.
    pub fn run(self) -> Result<Solution, JdError> {
        let mut hooks = HookSet {
            observers: self.observers,
            sinks: self.sinks,
        };
        let (mut observer, mut sink) = hooks.both();
        let hooks = Hooks {
            observer: observer.as_deref_mut().map(|o| o as Observer<'_>),
            sink: sink.as_mut().map(|s| s as &mut dyn CheckpointSink),
            resume: self.resume,
            ..Hooks::default()
        };
        solved(run_loop::<_, _, ()>(self.input.pb, self.params, hooks))
    }
}

impl<'h, I> Solver<'h, I> {
    /// Adds an observer: it sees an [`IterationEvent`] after every outer
    /// iteration (progress, residual history); returning
    /// `ControlFlow::Break(())` stops the solve, which returns the pairs so far
    /// with [`crate::Outcome::Stopped`]. Observers are called in the order added; any
    /// one's break stops. With several processes, give it on the processes
    /// that should watch (every process sees the same events).
    pub fn observer(
        mut self,
        observer: &'h mut dyn FnMut(&IterationEvent) -> ControlFlow<()>,
    ) -> Self {
        self.observers.push(observer);
        self
    }

    /// [`Solver::observer`] when `observer` is given.
    pub fn observer_opt<'o: 'h>(mut self, observer: Option<Observer<'o>>) -> Self {
        if let Some(o) = observer {
            self.observers.push(o);
        }
        self
    }

    /// The sink and the checkpoint to resume from of `ck` (each when given):
    /// [`Solver::checkpoint`] and [`Solver::resume`].
    pub fn checkpointing<'c: 'h>(mut self, ck: Checkpointing<'c>) -> Self {
        if let Some(s) = ck.sink {
            self.sinks.push(s);
        }
        if ck.resume.is_some() {
            self.resume = ck.resume;
        }
        self
    }

    /// Adds a checkpoint sink ([`crate::checkpoint`]): polled at the top of
    /// every outer iteration, the largest request of all sinks and processes
    /// is granted; every sink receives every checkpoint. Collective: give
    /// sinks on every process or on none.
    pub fn checkpoint(mut self, sink: &'h mut dyn CheckpointSink) -> Self {
        self.sinks.push(sink);
        self
    }

    /// Starts from this process's checkpoint instead of random vectors: the
    /// solve takes the steps the interrupted one would have taken (see
    /// [`crate::checkpoint`]). Collective: a checkpoint on every process.
    pub fn resume(mut self, checkpoint: &'h Checkpoint) -> Self {
        self.resume = Some(checkpoint);
        self
    }

    /// Adds a watcher of the re-partitions of a multigrain solve
    /// ([`Solver::groups`] with rate-weighted rows; Boudet et al. §4.5): it is
    /// told of every one (imbalance before and predicted, rows before and
    /// after, values moved) once the rows have moved, on every process it is
    /// given on. Serial and fine-grain solves never re-partition.
    pub fn on_repartition(mut self, watcher: &'h mut dyn FnMut(&RepartitionEvent)) -> Self {
        self.repartitions.push(watcher);
        self
    }

    /// [`Solver::resume`] when `checkpoint` is given.
    pub fn resume_from(mut self, checkpoint: Option<&'h Checkpoint>) -> Self {
        self.resume = checkpoint;
        self
    }
}

impl<'h, M: AsCsr + ?Sized, C: Comm, B: Comm> Solver<'h, OnMatrix<'h, M, C, B>> {
    /// Start vectors and deflation vectors (n × p column-major blocks of the
    /// global rows, see [`Spaces`]; with several processes every process
    /// passes the same blocks and keeps its rows). With solve groups the groups'
    /// correction equations are projected against the deflation vectors too.
    pub fn spaces(mut self, spaces: Spaces<'h>) -> Self {
        self.input.spaces = spaces;
        self
    }

    /// The generalized problem K x = λ M x with this mass matrix M (symmetric
    /// positive definite, the size of the matrix K; partitioned as K). The
    /// eigenvectors come out M-orthonormal; built preconditioners approximate
    /// K − σ₀M (see [`crate::generalized`]). Serial, fine grain and solve
    /// groups (each group solves its correction equations with M's rows in
    /// its own layout, as the fine-grain path does).
    pub fn mass(mut self, m: &'h matrices::CsrMatrix) -> Self {
        self.input.mass = Some(m);
        self
    }

    /// Shift-and-invert (SLEPc's `STSINVERT`, ARPACK's mode 3; see
    /// [`crate::st`]): the `params.nev` eigenpairs closest to `sigma`, of A or
    /// with [`mass`](Solver::mass) of the pencil (K, M). A − σI (K − σM) is
    /// factored once by a sparse direct method (on rank 0 with
    /// [`comm`](Solver::comm)), and the solver runs on B = (A − σI)⁻¹
    /// (M(K − σM)⁻¹M with mass M) for its eigenvalues of largest magnitude,
    /// θ = 1/(λ − σ), mapped back to λ = σ + 1/θ with the true residuals
    /// ‖Ax − λx‖ (‖Kx − λMx‖/‖x‖₂) recomputed from the vectors.
    ///
    /// `params.target`, `precond`, `precond_shift` and `extraction` are not
    /// used (B's wanted eigenvalues are its extreme ones: Rayleigh-Ritz, no
    /// preconditioner). `tol` and `conv` apply to the true residuals:
    /// ‖Kx − λMx‖/‖x‖ ≤ tol·(‖K‖ + |λ|‖M‖) (`Norm`; ‖·‖ the 1-norm, ‖K‖ =
    /// `anorm` when given; M = 0 for Ax = λx), ≤ tol·|λ| (`Rel`), ≤ tol
    /// (`Abs`): B's tolerance is derived from it (for Ax = λx, Ax − λx =
    /// −(A − σI)(Bx − θx)/θ), and a pencil's pairs that miss it are refined
    /// from their vectors with a tighter one. `maxits` defaults to 0 (GD+k
    /// steps t = −r); every other parameter is used. The result carries the
    /// inertia certificate of [`crate::certify`] (unless `verify` is
    /// `Never`). The eigenvalues come ordered by distance to σ;
    /// `stats.matvecs` counts products with B (each one forward and one
    /// backward substitution), `stats.setup_seconds` the factorization and
    /// `stats.eigenvalues_below_shift` the inertia (from LDLᵀ). Observers see
    /// the Ritz values mapped back; checkpoints hold the state on B and resume
    /// only with the same σ, matrices and parameters (the operator's
    /// fingerprint includes the factors). Start and deflation vectors are
    /// used as given. With [`groups`](Solver::groups) the solve runs fine
    /// grain over every process of the groups: its corrections are GD+k steps
    /// t = −r, with no equations for the groups to share (`maxits` > 0 is
    /// refused there).
    ///
    /// A σ at an eigenvalue to working precision (or within ε/tol of the
    /// spectrum's scale) is not refused: the pairs there are found first by
    /// subspace inverse iteration (their true residuals checked), and the
    /// others by the loop on B restricted to their complement, where
    /// rounding along the near-null vectors no longer swamps them.
    pub fn shift_invert(mut self, sigma: f64) -> Self {
        self.input.shift = Some(sigma);
        self
    }

    /// Every eigenpair in [`lower`, `upper`] (of A, or of the pencil with
    /// [`mass`](Solver::mass)), ascending, certified complete by Sylvester's
    /// inertia: spectrum slicing, each slice by shift-and-invert at its centre
    /// (see [`crate::slicing`], which says what is counted and how the
    /// interval is cut). `params.nev` and `params.target` are not used;
    /// `stats.interval` reports the count and the slices. With
    /// [`comm`](Solver::comm) every slice runs fine grain over all the
    /// processes; with [`groups`](Solver::groups) (two or more) each group
    /// solves its own slices, their shares set by measured rates
    /// ([`crate::slice_groups`], `SliceParams::split`), and every process
    /// gets its rows of all the pairs. Not with
    /// [`shift_invert`](Solver::shift_invert), start vectors, checkpoints or
    /// a resume (`InvalidParams`).
    pub fn interval(mut self, lower: f64, upper: f64, slicing: SliceParams) -> Self {
        self.input.interval = Some((Range::Values(lower, upper), slicing));
        self
    }

    /// The eigenpairs λ_first ≤ … ≤ λ_last of the ascending spectrum (0-based
    /// indices, multiplicities counted; SciPy's `subset_by_index`), as
    /// [`interval`](Solver::interval) on bounds found by inertia: a search
    /// over LDLᵀ counts brackets the indices, then the interval's pairs of
    /// those indices are returned. `stats.interval` gives the bracket and
    /// `first_index`. `InvalidParams` unless first ≤ last < n.
    pub fn indices(mut self, first: usize, last: usize, slicing: SliceParams) -> Self {
        self.input.interval = Some((Range::Indices(first, last), slicing));
        self
    }

    /// Fine grain (McCombs et al. §3) over the processes of `comm`: the rows
    /// of A and of every block vector are split over them (balanced by
    /// nonzeros); every process passes the same global matrix and keeps its
    /// rows. The preconditioner is block Jacobi: each process factors its
    /// own diagonal block. With [`groups`](Solver::groups), `comm` is the
    /// fine-grain communicator of the multigrain solve. Collective; the
    /// eigenvectors of the result hold this process's rows.
    pub fn comm<C2: Comm>(self, comm: &'h C2) -> Solver<'h, OnMatrix<'h, M, C2, B>> {
        let OnMatrix {
            a,
            groups,
            spaces,
            mass,
            shift,
            interval,
            ..
        } = self.input;
        Solver {
            input: OnMatrix {
                a,
                comm: Some(comm),
                groups,
                spaces,
                mass,
                shift,
                interval,
            },
            params: self.params,
            observers: self.observers,
            sinks: self.sinks,
            resume: self.resume,
            repartitions: self.repartitions,
        }
    }

    /// Multigrain (or coarse grain, one process per group) solve groups
    /// (McCombs et al. §6): the projection runs fine grain, the correction
    /// equations in the groups of `mg.groups` (ranks of `base`), balanced by
    /// `mg.balance`. `base` creates the groups' communicators; the fine-grain
    /// one is [`comm`](Solver::comm) when given (it must then be `base` split
    /// by [`crate::fine_rank_keys`], e.g. [`crate::fine_world`]), else
    /// `fine_world(base, groups, mg.hierarchical, 0.0)`. A checkpoint holds
    /// this process's fine rows: a resumed solve keeps the rows of its
    /// checkpoints. Collective over `base`.
    pub fn groups<B2: Comm>(
        self,
        base: &'h B2,
        mg: &'h MultigrainParams,
    ) -> Solver<'h, OnMatrix<'h, M, C, B2>> {
        let OnMatrix {
            a,
            comm,
            spaces,
            mass,
            shift,
            interval,
            ..
        } = self.input;
        Solver {
            input: OnMatrix {
                a,
                comm,
                groups: Some((base, mg)),
                spaces,
                mass,
                shift,
                interval,
            },
            params: self.params,
            observers: self.observers,
            sinks: self.sinks,
            resume: self.resume,
            repartitions: self.repartitions,
        }
    }

    /// Runs the solve.
    ///
    /// # Errors
    /// `InvalidParams` for inconsistent parameters (processes disagreeing on
    /// nev, block or basis size; a `precond` choice the problem cannot
    /// honour), a non-square matrix, a bad partition, bad groups or spaces;
    /// `NotSymmetric` (unless `params.check_symmetry` is false);
    /// `Preconditioner` when the factorization fails; `NonFinite` when
    /// NaN/Inf appear; `Checkpoint` when the checkpoint to resume from does
    /// not fit (on every process when on one). A solve that runs out of
    /// `max_matvecs` or `max_outer`, or that an observer or a sink stops, is
    /// not an error: its solution says so ([`crate::Outcome`]) and holds the
    /// pairs so far.
    pub fn run(self) -> Result<Solution, JdError> {
        // Many pairs at one end: slices over their indices.
        let by_index = self.slices_by_index()?;
        let descending = by_index.is_some() && self.params.problem.target == Target::Largest;
        let interval = self
            .input
            .interval
            .or(by_index.map(|(i, j)| (Range::Indices(i, j), SliceParams::default())));
        match interval {
            Some((range, slicing)) => self.run_interval(range, slicing, descending),
            None => self.run_nev(),
        }
    }

    /// The indices (first, last) of the `params.nev` pairs at one end when
    /// they are to be found by slices over their indices (`params.slice_from`
    /// or more, and nothing that slices refuse); `None` otherwise.
    ///
    /// # Errors
    /// As [`AsCsr::as_csr`] when the matrix's size is needed.
    fn slices_by_index(&self) -> Result<Option<(usize, usize)>, JdError> {
        let OnMatrix {
            a,
            spaces,
            shift,
            interval,
            ..
        } = &self.input;
        let nev = self.params.problem.nev;
        let n = if self.params.execution.slice_from > 0
            && nev >= self.params.execution.slice_from
            && matches!(
                self.params.problem.target,
                Target::Smallest | Target::Largest
            ) {
            a.as_csr()?.nrows()
        } else {
            0
        };
        let by_index = match self.params.problem.target {
            Target::Smallest => Some((0, nev.wrapping_sub(1))),
            Target::Largest => Some((n.wrapping_sub(nev), n.wrapping_sub(1))),
            _ => None,
        }
        .filter(|_| {
            interval.is_none()
                && shift.is_none()
                && self.params.execution.slice_from > 0
                && nev >= self.params.execution.slice_from
                && nev <= n
                && self.sinks.is_empty()
                && self.resume.is_none()
                && spaces.initial.is_empty()
                && spaces.deflation.is_empty()
        });
        Ok(by_index)
    }

    /// The pairs of `range` by spectrum slicing ([`crate::slicing`]; over the
    /// solve groups by [`crate::slice_groups`] when there are two or more),
    /// in descending order when `descending`.
    ///
    /// # Errors
    /// `InvalidParams` with a shift, a checkpoint sink or a resume; otherwise
    /// as the slicing.
    fn run_interval(
        self,
        range: Range,
        slicing: SliceParams,
        descending: bool,
    ) -> Result<Solution, JdError> {
        let OnMatrix {
            a,
            comm,
            groups,
            spaces,
            mass,
            shift,
            ..
        } = self.input;
        let refused = if shift.is_some() {
            Some("an interval solve shifts and inverts at every slice's centre: no shift_invert")
        } else if !self.sinks.is_empty() || self.resume.is_some() {
            Some("an interval solve takes no checkpoints and resumes none")
        } else {
            None
        };
        if let Some(why) = refused {
            return Err(JdError::invalid("interval", why));
        }
        let mut hooks = HookSet {
            observers: self.observers,
            sinks: Vec::new(),
        };
        let (mut observer, _) = hooks.both();
        let observer = observer.as_deref_mut().map(|o| o as Observer<'_>);
        let csr = a.as_csr()?;
        let run = |c: &dyn Comm, observer| {
            crate::slicing::run(
                &csr,
                mass,
                range,
                c,
                self.params,
                &slicing,
                spaces,
                observer,
            )
        };
        let res = match (groups, comm) {
            // slices spread over the solve groups, by their rates
            (Some((base, mg)), world) if mg.groups.len() > 1 => crate::slice_groups::run(
                &csr,
                mass,
                range,
                base,
                world.map_or(base as &dyn Comm, |w| w as &dyn Comm),
                &mg.groups,
                self.params,
                &slicing,
                spaces,
            ),
            (_, Some(c)) => run(c, observer),
            (Some((base, mg)), None) => {
                let w = fine_world(base, Some(&mg.groups), mg.hierarchical, 0.0);
                run(&w, observer)
            }
            (None, None) => run(&SelfComm::new(), observer),
        };
        if descending {
            crate::slicing::descending(res)
        } else {
            res
        }
    }

    /// The `params.nev` pairs of `params.target` (or closest to the shift of
    /// shift-and-invert): serial, fine grain or in solve groups, with the
    /// inertia certificate around σ when there is one.
    ///
    /// # Errors
    /// See [`Solver::run`].
    fn run_nev(self) -> Result<Solution, JdError> {
        let OnMatrix {
            a,
            comm,
            groups,
            spaces,
            mass,
            shift,
            ..
        } = self.input;
        let mut hooks = HookSet {
            observers: self.observers,
            sinks: self.sinks,
        };
        let (mut observer, mut sink) = hooks.both();
        let observer = observer.as_deref_mut().map(|o| o as Observer<'_>);
        let sink = sink.as_mut().map(|s| s as &mut dyn CheckpointSink);
        let params = self.params;
        let csr = a.as_csr()?;
        let hooks = Hooks {
            observer,
            sink,
            resume: self.resume,
            ..Hooks::default()
        };
        // The eigenvalues closest to σ get the inertia certificate.
        let sigma = shift.or(match params.problem.target {
            Target::Closest(s) => Some(s),
            _ => None,
        });
        let certified = |res: Result<Solution, JdError>, comm: &dyn Comm| match sigma {
            Some(s) => crate::certify::certify(res, &csr, mass, comm, params, spaces, s),
            None => res,
        };
        match (groups, comm, shift) {
            // Shift-and-invert's corrections are t = −r (GD+k steps): no
            // equations for solve groups to share, so it runs fine grain over
            // every process of the groups.
            (Some(_), _, Some(_)) if params.correction.maxits.is_some_and(|m| m > 0) => {
                Err(JdError::invalid(
                    "shift",
                    "shift-and-invert with solve groups takes GD+k steps (maxits = 0): its \
                 correction equations would need the factors in every group",
                ))
            }
            (Some((base, mg)), world, Some(sigma)) => match world {
                Some(w) => certified(
                    crate::st::run(&csr, mass, sigma, w, params, spaces, hooks),
                    w,
                ),
                None => {
                    let w = fine_world(base, Some(&mg.groups), mg.hierarchical, 0.0);
                    certified(
                        crate::st::run(&csr, mass, sigma, &w, params, spaces, hooks),
                        &w,
                    )
                }
            },
            (None, Some(c), Some(sigma)) => certified(
                crate::st::run(&csr, mass, sigma, c, params, spaces, hooks),
                c,
            ),
            (None, None, Some(sigma)) => {
                let c = SelfComm::new();
                certified(
                    crate::st::run(&csr, mass, sigma, &c, params, spaces, hooks),
                    &c,
                )
            }
            (Some((base, mg)), world, None) => {
                let Hooks {
                    observer,
                    sink,
                    resume,
                    ..
                } = hooks;
                let caller = Caller {
                    observer,
                    sink,
                    resume,
                    on_repartition: self.repartitions,
                    spaces,
                };
                match world {
                    Some(w) => {
                        certified(multigrain_run(&csr, mass, w, base, params, mg, caller), w)
                    }
                    None => {
                        let w = fine_world(base, Some(&mg.groups), mg.hierarchical, 0.0);
                        certified(multigrain_run(&csr, mass, &w, base, params, mg, caller), &w)
                    }
                }
            }
            (None, Some(c), None) => {
                certified(fine(&csr, c, params, Fine { spaces, mass }, hooks), c)
            }
            (None, None, None) => {
                let c = SelfComm::new();
                certified(fine(&csr, &c, params, Fine { spaces, mass }, hooks), &c)
            }
        }
    }
}

/// What a serial or fine-grain solve takes besides the matrix.
struct Fine<'h> {
    spaces: Spaces<'h>,
    /// M of K x = λ M x (partitioned as K).
    mass: Option<&'h matrices::CsrMatrix>,
}

/// The serial (one process) and fine-grain solve of `a` (and `on.mass`) over
/// `comm`.
fn fine<C: Comm>(
    a: &matrices::CsrMatrix,
    comm: &C,
    params: &JdParams,
    on: Fine<'_>,
    hooks: Hooks<'_>,
) -> Result<Solution, JdError> {
    let Fine { spaces, mass } = on;
    check_matrix(a, params)?;
    if let Some(m) = mass {
        crate::setup::check_pair(a, m, params)?;
    }
    // K − σ₀M for the preconditioner of a generalized problem.
    let shifted = match mass {
        Some(m) if crate::setup::precond_kind(params).is_some() => Some(
            crate::setup::shifted_pair(a, m, crate::setup::mass_precond_shift(params))?,
        ),
        _ => None,
    };
    let n = a.nrows();
    let part = if comm.size() > 1 {
        Some(
            RowPartition::balanced_by_nnz(a, comm.size())
                .map_err(|e| JdError::invalid("partition", e))?,
        )
    } else {
        None
    };
    let sizes = params.resolve(n)?;
    let spec = RowsSpec {
        part: part.as_ref(),
        opts: DistOptions {
            threads: params.execution.threads,
            overlap: false,
            max_block: sizes.max_basis,
        },
        precond: match mass {
            None => Some(precond_shift(params, a)),
            Some(_) => shifted.as_ref().map(|_| 0.0),
        },
        field: if part.is_some() {
            "partition"
        } else {
            "matrix"
        },
        precond_of: shifted.as_ref(),
    };
    let r = rows(a, comm, params, spec)?;
    let mr = match mass {
        Some(m) => {
            let spec = RowsSpec {
                part: part.as_ref(),
                opts: DistOptions {
                    threads: params.execution.threads,
                    overlap: false,
                    max_block: sizes.max_basis,
                },
                precond: None,
                field: "mass",
                precond_of: None,
            };
            Some(rows(m, comm, params, spec)?)
        }
        None => None,
    };
    drop(shifted);
    let initial = local_rows("initial", spaces.initial, n, r.range.clone())?;
    let deflation = local_rows("deflation", spaces.deflation, n, r.range.clone())?;
    let pb = Problem {
        a: &r.op,
        comm,
        n_global: n,
        row_offset: r.range.start,
        diagonal: r.diag.as_deref(),
        precond: r.pc.as_deref().map(|p| p as _),
        spaces: Spaces::default(),
        mass: None,
        deflate_locked: false,
    }
    .with_initial(&initial)?
    .with_deflation(&deflation)?;
    let pb = match &mr {
        Some(mr) => pb
            .with_mass(&mr.op)?
            .with_mass_diagonal(mr.diag.as_deref().unwrap_or_default())?,
        None => pb,
    };
    with_setup(
        solved(run_loop::<_, _, ()>(&pb, params, hooks)),
        r.setup_seconds,
    )
}

/// The observers and sinks of a [`Solver`], combined into one of each.
struct HookSet<'h> {
    observers: Vec<Observer<'h>>,
    sinks: Vec<&'h mut dyn CheckpointSink>,
}

/// Every observer in turn; any one's break stops.
struct Observers<'s, 'h>(&'s mut Vec<Observer<'h>>);

/// Every sink: the largest request is granted, every sink saves.
struct Sinks<'s, 'h>(&'s mut Vec<&'h mut dyn CheckpointSink>);

impl CheckpointSink for Sinks<'_, '_> {
    fn poll(&mut self, stats: &Stats) -> CheckpointRequest {
        // every sink is polled (a poll may be collective), Continue < Save < SaveAndStop
        self.0
            .iter_mut()
            .map(|s| s.poll(stats))
            .fold(CheckpointRequest::Continue, CheckpointRequest::max)
    }

    fn save(&mut self, checkpoint: &Checkpoint, last: bool) {
        for s in self.0.iter_mut() {
            s.save(checkpoint, last);
        }
    }
}

impl<'h> HookSet<'h> {
    /// The observer closure and the sink of the hooks (`None` without any).
    #[allow(clippy::type_complexity)]
    fn both(
        &mut self,
    ) -> (
        Option<Box<dyn FnMut(&IterationEvent) -> ControlFlow<()> + '_>>,
        Option<Sinks<'_, 'h>>,
    ) {
        let observers = (!self.observers.is_empty()).then(|| {
            let all = Observers(&mut self.observers);
            Box::new(move |ev: &IterationEvent| {
                let mut flow = ControlFlow::Continue(());
                for o in all.0.iter_mut() {
                    if o(ev).is_break() {
                        flow = ControlFlow::Break(());
                    }
                }
                flow
            }) as Box<dyn FnMut(&IterationEvent) -> ControlFlow<()> + '_>
        });
        let sinks = (!self.sinks.is_empty()).then_some(Sinks(&mut self.sinks));
        (observers, sinks)
    }
}
