//! Generalized symmetric-definite problems K x = λ M x from explicit matrices
//! (SLEPc's `EPS_GHEP`, `scipy.sparse.linalg.eigsh(K, M=M)`): the drivers of
//! [`crate::driver`] with a mass matrix. Inside the solver see
//! [`crate::Problem::with_mass`] (M-orthonormal basis, residual Kx − θMx,
//! M projectors in the correction equation) and the convergence rule there:
//! ‖Kx − θMx‖₂ ≤ tol·(‖K‖ + |θ|·‖M‖)·‖x‖₂.
//!
//! Checks before the solve: K and M square and of the same size, both
//! symmetric (`JdParams::check_symmetry`), M's diagonal positive
//! ([`JdError::MassNotPositiveDefinite`], as is any xᵀMx ≤ 0 met later).
//!
//! **Preconditioners.** The built ones (`Ilu0`, `Auto`'s ILU(0), `Ilut`,
//! `Spai`, `Fsai`) are built from the matrix K − σ₀M, σ₀ =
//! `JdParams::precond_shift` when given, else σ for `Closest(σ)` and 0
//! otherwise (ILU of K, the usual choice for the lowest modes of a stiffness
//! matrix); Jacobi follows each equation's shift θ as diag(K) − θ·diag(M).
//! A user preconditioner of one's own [`crate::Problem`] is told the shift θ
//! of K − θM through `Preconditioner::apply_block_shifted`.
//!
//! Shift-and-invert ([`crate::Solver::shift_invert`] with [`crate::Solver::mass`], K − σM
//! factored) and solve groups ([`crate::Solver::groups`], M's rows in every
//! group's layout) take a mass matrix too.

use lblib::Comm;
use matrices::CsrMatrix;

use crate::checkpoint::Checkpointing;
use crate::jd::{Observer, Spaces};
use crate::params::JdParams;
pub use crate::setup::{check_pair, mass_precond_shift, shifted_pair};
use crate::solution::{JdError, Solution};
use crate::solver::Solver;

/// [`crate::solve_matrix_with`] for K x = λ M x: on one process,
/// `params.threads` threads; `Solver::new(k, params).mass(m)` with the hooks
/// given. The eigenvectors are M-orthonormal.
///
/// # Errors
/// As [`crate::Solver::run`], plus those of [`check_pair`].
pub fn solve_matrix_generalized(
    k: &CsrMatrix,
    m: &CsrMatrix,
    params: &JdParams,
    observer: Option<Observer<'_>>,
    ck: Checkpointing<'_>,
    spaces: Spaces<'_>,
) -> Result<Solution, JdError> {
    Solver::new(k, params)
        .mass(m)
        .observer_opt(observer)
        .checkpointing(ck)
        .spaces(spaces)
        .run()
}

/// [`crate::solve_distributed_with`] for K x = λ M x: K and M (whole, the
/// same on every process) are partitioned alike (rows balanced by K's
/// nonzeros); fine grain over `comm`. `Solver::new(k, params).mass(m).comm(comm)`
/// with the hooks given.
///
/// # Errors
/// As [`crate::Solver::run`], plus those of [`check_pair`].
pub fn solve_distributed_generalized<C: Comm>(
    k: &CsrMatrix,
    m: &CsrMatrix,
    comm: &C,
    params: &JdParams,
    observer: Option<Observer<'_>>,
    ck: Checkpointing<'_>,
    spaces: Spaces<'_>,
) -> Result<Solution, JdError> {
    Solver::new(k, params)
        .mass(m)
        .comm(comm)
        .observer_opt(observer)
        .checkpointing(ck)
        .spaces(spaces)
        .run()
}
