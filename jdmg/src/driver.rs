//! Shorthands for common [`Solver`] builders (each one line over it), and
//! [`gather_eigenvectors`]. The setup of a matrix (operator, diagonal,
//! preconditioner) is in one place, re-exported here.

use lblib::Comm;
use matrices::CsrMatrix;

use crate::error::JdError;
use crate::input::AsCsr;
use crate::jd::{Observer, Problem};
use crate::multigrain::MultigrainParams;
use crate::params::JdParams;
pub use crate::setup::{
    build_preconditioner, fsai_fallback, gershgorin, ilu0_is_stable, precond_kind, precond_shift,
    FSAI_SETUP_LIMIT, ILU_GROWTH_LIMIT,
};
use crate::solution::Solution;
use crate::solver::Solver;

/// Solves on one process: `params.threads` threads for SpMV and dense kernels.
/// `a` is a [`CsrMatrix`], a `sprs::CsMat<f64>` or a faer sparse matrix (see
/// [`crate::input::AsCsr`]): `jdmg::solve_matrix(&csmat, &JdParams::default(), None)`.
/// `Solver::new(a, params).observer_opt(observer).run()`.
///
/// # Errors
/// As [`Solver::run`].
pub fn solve_matrix<M: AsCsr + ?Sized>(
    a: &M,
    params: &JdParams,
    observer: Option<Observer<'_>>,
) -> Result<Solution, JdError> {
    Solver::new(a, params).observer_opt(observer).run()
}

/// Fine-grain distributed solve (McCombs et al. §3) over the processes of
/// `comm`: `Solver::new(a, params).comm(comm)` (see [`Solver::comm`]). Start
/// vectors depend only on the seed and global row indices, so the result does
/// not depend on the number of processes (up to rounding). Collective;
/// eigenvectors in the result hold this process's rows.
///
/// # Errors
/// As [`Solver::run`].
pub fn solve_distributed<C: Comm>(
    a: &CsrMatrix,
    comm: &C,
    params: &JdParams,
    observer: Option<Observer<'_>>,
) -> Result<Solution, JdError> {
    Solver::new(a, params)
        .comm(comm)
        .observer_opt(observer)
        .run()
}

/// Solves for `params.nev` eigenpairs of the symmetric operator of `pb`:
/// `Solver::problem(pb, params).observer_opt(observer).run()`. Collective
/// over `pb.comm`: every process calls it with its own rows.
///
/// # Errors
/// As [`Solver::run`].
pub fn solve<A: precond::Operator + ?Sized, C: Comm + ?Sized>(
    pb: &Problem<'_, A, C>,
    params: &JdParams,
    observer: Option<Observer<'_>>,
) -> Result<Solution, JdError> {
    Solver::problem(pb, params).observer_opt(observer).run()
}

/// Multigrain (or coarse-grain, one process per group) block JD:
/// `Solver::new(a, params).comm(world).groups(base, mg)` (see
/// [`Solver::groups`]). `world` carries the fine-grain collectives (wrap it in
/// `lblib::Traced` to measure imbalance) and must be `base` split by
/// [`crate::fine_rank_keys`] ([`crate::fine_world`]). Collective.
///
/// # Errors
/// As [`Solver::run`].
pub fn solve_multigrain<W: Comm, B: Comm>(
    a: &CsrMatrix,
    world: &W,
    base: &B,
    params: &JdParams,
    mg: &MultigrainParams,
) -> Result<Solution, JdError> {
    Solver::new(a, params).comm(world).groups(base, mg).run()
}

/// Collects the whole eigenvectors of a distributed solve on every process:
/// `r`, the outcome of [`solve_distributed`] (or [`crate::solve_multigrain`])
/// on this process of `comm`, whose rank order is the order of the row
/// blocks, becomes the same outcome with `eigenvectors` of all `n` rows
/// (`n_local = n`, `row_offset = 0`), whatever its [`crate::Outcome`]; an
/// error passes through. Collective (when `r` is `Ok` on every process, as the
/// solvers return).
///
/// # Errors
/// `r`'s error.
pub fn gather_eigenvectors<C: Comm + ?Sized>(
    comm: &C,
    n: usize,
    r: Result<Solution, JdError>,
) -> Result<Solution, JdError> {
    let mut s = r?;
    let nloc = s.n_local;
    let nvec = s.eigenvalues.len();
    let mut counts = vec![0u64; comm.size()];
    comm.all_gather_u64(&[nloc as u64], &mut counts);
    let counts: Vec<usize> = counts.iter().map(|&c| c as usize).collect();
    let mut full = vec![0.0; n * nvec];
    let mut col = vec![0.0; n];
    for j in 0..nvec {
        comm.all_gather_v(s.eigenvector(j), &counts, &mut col);
        full[j * n..(j + 1) * n].copy_from_slice(&col);
    }
    s.eigenvectors = full;
    s.n_local = n;
    s.row_offset = 0;
    Ok(s)
}
