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
//! Shift-and-invert ([`crate::st::solve_shift_invert_generalized`], K − σM
//! factored) and solve groups ([`crate::Solver::groups`], M's rows in every
//! group's layout) take a mass matrix too.

use lblib::Comm;
use matrices::CsrMatrix;

use crate::checkpoint::Checkpointing;
use crate::jd::{Observer, Spaces};
use crate::params::{JdParams, Target};
use crate::solution::{JdError, Solution};
use crate::solver::Solver;

/// Checks of a pair (K, M): square, same size, symmetric, M's diagonal > 0.
///
/// # Errors
/// `InvalidParams`, `NotSymmetric` (naming M in the message of
/// `InvalidParams` for M), `MassNotPositiveDefinite`.
pub fn check_pair(k: &CsrMatrix, m: &CsrMatrix, params: &JdParams) -> Result<(), JdError> {
    if k.nrows() != k.ncols() {
        return Err(JdError::invalid(
            "matrix",
            format!("K is {}×{}, not square", k.nrows(), k.ncols()),
        ));
    }
    if m.nrows() != m.ncols() || m.nrows() != k.nrows() {
        return Err(JdError::invalid(
            "mass",
            format!(
                "M is {}×{}, K is {}×{}: they must have the same size",
                m.nrows(),
                m.ncols(),
                k.nrows(),
                k.ncols()
            ),
        ));
    }
    crate::symmetry::check_symmetric(k, params)?;
    crate::symmetry::check_symmetric(m, params).map_err(|e| match e {
        JdError::NotSymmetric {
            max_asymmetry,
            relative,
        } => JdError::invalid(
            "mass",
            format!(
                "the mass matrix M is not symmetric: max |m_ij - m_ji| = {max_asymmetry:.3e}, \
                 relative {relative:.3e}"
            ),
        ),
        e => e,
    })?;
    if let Some((i, d)) = m
        .diagonal()
        .into_iter()
        .enumerate()
        .find(|&(_, d)| d <= 0.0 || d.is_nan())
    {
        return Err(JdError::MassNotPositiveDefinite {
            what: format!("diagonal entry m_{0}{0} = {d:e} (row {0})", i + 1),
        });
    }
    Ok(())
}

/// The shift σ₀ of the built preconditioner of K − σ₀M (module doc).
pub fn mass_precond_shift(params: &JdParams) -> f64 {
    params.precond_shift.unwrap_or(match params.target {
        Target::Closest(s) => s,
        _ => 0.0,
    })
}

/// K − σM (the sparsity pattern of K + M).
///
/// # Errors
/// `InvalidParams` when the sizes differ.
pub fn shifted_pair(k: &CsrMatrix, m: &CsrMatrix, sigma: f64) -> Result<CsrMatrix, JdError> {
    if sigma == 0.0 {
        return Ok(k.clone());
    }
    let mut t = Vec::with_capacity(k.nnz() + m.nnz());
    for (mat, f) in [(k, 1.0), (m, -sigma)] {
        for i in 0..mat.nrows() {
            let (cols, vals) = mat.row(i);
            t.extend(cols.iter().zip(vals).map(|(&j, &v)| (i, j as usize, f * v)));
        }
    }
    CsrMatrix::from_triplets(k.nrows(), k.ncols(), &t).map_err(|e| JdError::invalid("mass", e))
}

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
