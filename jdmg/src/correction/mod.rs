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
//! * GD+k steps, t = −K⁻¹r for the whole block (PRIMME's GD+k): no equation,
//!   one preconditioner call by the loop itself (`jd/correct.rs`).
//! * [`dynamic`]: the default choice between GD+k and block JDQMR by measured
//!   progress per second (PRIMME's DYNAMIC method).
//! * [`CorrectionBackend`]: the equations solved elsewhere, by the solve
//!   groups of the multigrain mode (McCombs et al. §4,
//!   [`crate::multigrain`]), which share them among groups of processes.
//!
//! The loop ([`crate::jd`]) picks one per outer iteration; a serial or
//! fine-grain solve never passes through the multigrain code.

pub(crate) mod block_jdqmr;
pub(crate) mod dynamic;
pub(crate) mod equation;
pub(crate) mod jdqmr;

pub(crate) use equation::*;

use crate::params::InnerStop;
use crate::solution::Stats;
use jdqmr::QmrSetup;

/// Inputs of one correction phase handed to a [`CorrectionBackend`].
pub(crate) struct CorrectionCtx<'x> {
    /// Selected pairs, extreme-most first: Ritz vectors and residuals (fine layout).
    pub x: &'x [f64],
    pub r: &'x [f64],
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
    /// backend multiplies its products by it.
    pub scale: f64,
    /// The internal scale of the mass matrix M of K x = λ M x (the backend
    /// multiplies its products with M by it); None for a standard problem.
    pub mass_scale: Option<f64>,
    /// JDQMR's setup of each selected pair (`InnerSolver::Qmrs` only, else
    /// empty).
    pub qmr: Vec<QmrSetup>,
}

/// Step (8) done elsewhere (coarse-grain / multigrain solve groups).
pub(crate) trait CorrectionBackend {
    /// Writes the corrections of the `ctx.shifts.len()` selected pairs into the
    /// first columns of `t` (fine layout); returns inner steps per pair.
    fn correct_block(
        &mut self,
        ctx: &CorrectionCtx<'_>,
        t: &mut [f64],
        stats: &mut Stats,
    ) -> Vec<usize>;
    /// A vector (fine layout) was locked: keep a copy in the backend's layout.
    fn on_lock(&mut self, x: &[f64], stats: &mut Stats);
    /// The `q` orthonormalized deflation vectors `y` (fine layout), told at
    /// every entry of the loop: a backend keeps them, once, like locked vectors.
    fn on_deflation(&mut self, y: &[f64], q: usize, stats: &mut Stats);
}
