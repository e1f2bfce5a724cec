//! Generalized symmetric-definite problems K x = λ M x from explicit matrices
//! (SLEPc's `EPS_GHEP`, `scipy.sparse.linalg.eigsh(K, M=M)`): [`crate::Solver::mass`] with any
//! entry point. Inside the solver see
//! [`crate::Problem::with_mass`] (M-orthonormal basis, residual Kx − θMx,
//! M projectors in the correction equation) and the convergence rule there:
//! ‖Kx − θMx‖₂ ≤ tol·(‖K‖ + |θ|·‖M‖)·‖x‖₂.
//!
//! Checks before the solve: K and M square and of the same size, both
//! symmetric (`crate::ProblemSettings::check_symmetry`), M's diagonal positive
//! ([`crate::JdError::MassNotPositiveDefinite`], as is any xᵀMx ≤ 0 met later).
//!
//! **Preconditioners.** The built ones (`Ilu0`, `Auto`'s ILU(0), `Ilut`,
//! `Spai`, `Fsai`) are built from the matrix K − σ₀M, σ₀ =
//! `crate::PrecondSettings::shift` when given, else σ for `Closest(σ)` and 0
//! otherwise (ILU of K, the usual choice for the lowest modes of a stiffness
//! matrix); Jacobi follows each equation's shift θ as diag(K) − θ·diag(M).
//! A user preconditioner of one's own [`crate::Problem`] is told the shift θ
//! of K − θM through `Preconditioner::apply_block_shifted`.
//!
//! Shift-and-invert ([`crate::Solver::shift_invert`] with [`crate::Solver::mass`], K − σM
//! factored) and solve groups ([`crate::Solver::groups`], M's rows in every
//! group's layout) take a mass matrix too.

pub use crate::setup::{check_pair, mass_precond_shift, shifted_pair};
