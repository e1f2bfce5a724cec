//! Step (8) of block Jacobi-Davidson: the correction equations
//! (I − QQᵀ)(A − θI)(I − QQᵀ) t = −r (McCombs et al. §3, eq. (1)) and the
//! methods that solve them, each in its file:
//!
//! * [`equation`]: one equation at a time, right-preconditioned BiCGSTAB (the
//!   paper's solver) or JDQMR, with the oblique projection of Sleijpen and
//!   van der Vorst; the projected operator and preconditioner all methods use.
//! * [`jdqmr`]: symmetric QMR with the dynamic stopping rules of Stathopoulos'
//!   JDQMR (PRIMME's `inner_solve.c`).
//! * [`block_jdqmr`]: the equations of a block solved together (one block
//!   product and one global sum per step for all of them).
//! * [`gdk`]: GD+k steps, t = −K⁻¹r for the whole block (PRIMME's GD+k): no
//!   equation, one preconditioner call.
//! * [`one_by_one`]: the equations of the block one after the other, with
//!   [`CorrectionSolver`].
//! * [`dynamic`]: the default choice between GD+k and block JDQMR by measured
//!   progress per second (PRIMME's DYNAMIC method).
//! * the solve groups of the multigrain mode (McCombs et al. §4,
//!   [`crate::multigrain`]), which share the equations among groups of
//!   processes.
//!
//! Every method is a [`Correction`]: the loop ([`crate::jd`]) holds one, chosen
//! once by [`for_params`] (or given, for solve groups), and hands it a [`Step`]
//! per outer iteration. A serial or fine-grain solve never passes through the
//! multigrain code.

pub(crate) mod block_jdqmr;
pub(crate) mod dynamic;
pub(crate) mod equation;
pub(crate) mod gdk;
pub(crate) mod jdqmr;
pub(crate) mod one_by_one;

pub(crate) use equation::*;

use lblib::Comm;
use precond::{Operator, Scalar};

use crate::params::{InnerSolver, InnerStop};
use crate::solution::Stats;
use jdqmr::{QmrSetup, QmrStop};

/// What every method is told about the selected pairs of one correction
/// phase.
pub(crate) struct CorrectionCtx<'x> {
    /// Shift of each correction equation.
    pub shifts: Vec<f64>,
    /// Absolute inner-residual floor of each equation (no need to go below).
    pub floors: Vec<f64>,
    /// Relative inner threshold 2^−iter.
    pub rel: f64,
    pub maxits: usize,
    pub inner: InnerStop,
    /// Ritz value and residual norm of each selected pair, every current Ritz value
    /// and the norm estimate, all in scaled units (for McCombs et al. §4's optimal m).
    pub thetas: Vec<f64>,
    pub rnorms: Vec<f64>,
    pub ritz: &'x [f64],
    pub anorm: f64,
    /// The internal scale s of the operator (see [`crate::scaling`]): the
    /// solve groups multiply their products by it.
    pub scale: f64,
    /// The internal scale of the mass matrix M of K x = λ M x (the solve groups
    /// multiply their products with M by it); None for a standard problem.
    pub mass_scale: Option<f64>,
    /// JDQMR's setup of each selected pair (`InnerSolver::Qmrs` only, else
    /// empty).
    pub qmr: Vec<QmrSetup>,
}

/// The operator of the correction equations on this process's rows and what
/// their projections remove: everything a method that solves them here (not
/// in solve groups) needs besides the pairs. Vectors hold `T`s; shifts,
/// Ritz values and norms are real (the problem is Hermitian).
pub(crate) struct Space<'x, T: Scalar = f64> {
    /// A times its internal scale.
    pub op: &'x dyn Operator<T>,
    /// Locked and deflation vectors (n × `nl`), projected out.
    pub locked: &'x [T],
    pub nl: usize,
    /// M, M·X_locked and M·X of K x = λ M x.
    pub mass: Option<MassCtx<'x, T>>,
    /// The preconditioner of each equation, for its shift.
    pub inners: Vec<Inner<'x, T>>,
    /// The eigenvalue scale: a shift divided by it is in the preconditioner's
    /// units.
    pub ev_scale: f64,
    pub threads: usize,
    /// Scratch lent by the loop: n × s entries of each from `at` on are free
    /// (the basis's next columns).
    pub scratch: &'x mut Vec<T>,
    pub spare: &'x mut Vec<T>,
    pub at: usize,
}

/// One correction phase: the `s = ctx.shifts.len()` selected pairs (Ritz
/// vectors `x`, residuals `r`, n × s each) and where their corrections go.
pub(crate) struct Step<'x, T: Scalar = f64> {
    pub ctx: CorrectionCtx<'x>,
    pub x: &'x [T],
    /// The residuals; a method may overwrite them.
    pub r: &'x mut Vec<T>,
    /// Receives the corrections in its first s columns (fine layout).
    pub t: &'x mut Vec<T>,
    pub space: Space<'x, T>,
}

/// What the loop measured since the last outer iteration, for a method that
/// chooses by progress per unit of work ([`dynamic`]).
pub(crate) struct Progress {
    /// The convergence potential of the wanted pairs.
    pub phi: f64,
    pub counts: dynamic::Counts,
}

/// Step (8) of block Jacobi-Davidson, whatever the method: GD+k, one equation
/// at a time (BiCGSTAB or JDQMR), block JDQMR, the dynamic choice between GD+k
/// and block JDQMR, or the solve groups of the multigrain mode. Vectors hold
/// `T`s (`f64`; the methods are written for real problems so far).
///
/// A method holds the communicator of its collectives (the processes sharing
/// the rows of the loop's vectors, or, for solve groups, its own).
pub(crate) trait Correction<T: Scalar = f64> {
    /// Writes the corrections of the selected pairs into the first columns
    /// of `step.t`; returns the inner steps per pair. Collective.
    fn correct(&mut self, step: Step<'_, T>, stats: &mut Stats) -> Vec<usize>;
    /// A vector (fine layout) was locked.
    fn on_lock(&mut self, _x: &[T], _stats: &mut Stats) {}
    /// The `q` orthonormalized deflation vectors `y` (fine layout), told at
    /// every entry of the loop.
    fn on_deflation(&mut self, _y: &[T], _q: usize, _stats: &mut Stats) {}
    /// The progress of an outer iteration. Collective.
    fn observe(&mut self, _progress: &Progress, _stats: &mut Stats) {}
    /// A new pass (verification) starts from a fresh block.
    fn new_pass(&mut self) {}
    /// Scratch of n × kmax entries that holds nothing between phases.
    fn idle_scratch(&mut self) -> Option<&mut [T]> {
        None
    }
    /// The equations go to solve groups (the basis keeps `max_basis` and the
    /// restart order of the paper).
    fn by_solve_groups(&self) -> bool {
        false
    }
}

impl<T: Scalar, M: Correction<T> + ?Sized> Correction<T> for &mut M {
    fn correct(&mut self, step: Step<'_, T>, stats: &mut Stats) -> Vec<usize> {
        (**self).correct(step, stats)
    }
    fn on_lock(&mut self, x: &[T], stats: &mut Stats) {
        (**self).on_lock(x, stats)
    }
    fn on_deflation(&mut self, y: &[T], q: usize, stats: &mut Stats) {
        (**self).on_deflation(y, q, stats)
    }
    fn observe(&mut self, progress: &Progress, stats: &mut Stats) {
        (**self).observe(progress, stats)
    }
    fn new_pass(&mut self) {
        (**self).new_pass()
    }
    fn idle_scratch(&mut self) -> Option<&mut [T]> {
        (**self).idle_scratch()
    }
    fn by_solve_groups(&self) -> bool {
        (**self).by_solve_groups()
    }
}

/// The method of a serial or fine-grain solve over `comm` (`n` local rows, blocks of at
/// most `kmax` equations, `max_locked` vectors projected out): GD+k when
/// `maxits = 0`; for `Auto`, the dynamic choice (its work clock weighs the
/// products of A, K⁻¹ and M by `work`); block JDQMR for `Qmrs`; otherwise
/// `solver` one equation at a time.
pub(crate) fn for_params<'c, C: Comm + ?Sized>(
    comm: &'c C,
    solver: InnerSolver,
    maxits: usize,
    n: usize,
    kmax: usize,
    max_locked: usize,
    work: dynamic::WorkClock,
) -> Box<dyn Correction + 'c> {
    match solver {
        _ if maxits == 0 => Box::new(gdk::Gdk),
        InnerSolver::Auto => Box::new(dynamic::Auto::new(comm, work, n, kmax)),
        InnerSolver::Qmrs => Box::new(block_jdqmr::Blocked::new(comm, n, kmax)),
        kind => Box::new(one_by_one::OneByOne::new(comm, kind, n, max_locked)),
    }
}

impl Stats {
    /// Adds one correction equation's counters.
    pub(crate) fn add_equation(&mut self, o: &EquationOutcome) {
        self.matvecs += o.matvecs;
        self.precond_applications += o.precond_applies;
        self.precond_seconds += o.precond_seconds;
        self.global_sums += o.global_sums;
        self.mass_matvecs += o.mass_matvecs;
        self.inner_steps += o.steps as u64;
        if let Some(stop) = o.qmr_stop {
            let st = &mut self.inner_stops;
            *match stop {
                QmrStop::Steps => &mut st.steps,
                QmrStop::Linear => &mut st.linear,
                QmrStop::Stagnation => &mut st.stagnation,
                QmrStop::Ritz => &mut st.ritz,
                QmrStop::Converged => &mut st.converged,
                QmrStop::Reduced => &mut st.reduced,
                QmrStop::Breakdown => &mut st.breakdown,
            } += 1;
        }
    }
}
