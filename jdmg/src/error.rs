//! The errors of a solve and of checkpoints: a leaf module that the solver,
//! the checkpoints and the input conversions all use.

use std::path::PathBuf;

use thiserror::Error;

use crate::solution::Solution;

/// Largest relative asymmetry max |a_ij − a_ji| / max |a_ij| accepted: far above
/// the rounding of an assembled or computed matrix (a few ε), far below what
/// moves eigenvalues at the tolerances the solver reaches.
pub const SYMMETRY_TOL: f64 = 1e-12;

/// Why a checkpoint could not be written, read or used.
#[derive(Debug, Error)]
pub enum CheckpointError {
    /// Reading or writing the file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The data does not start with [`MAGIC`](crate::checkpoint::MAGIC): not a jdmg checkpoint.
    #[error("not a jdmg checkpoint (the file does not start with JDMGCKPT)")]
    BadMagic,
    /// Written in another format version.
    #[error("checkpoint format version {found}; this jdmg reads version {expected}")]
    Version {
        /// Version in the file.
        found: u32,
        /// [`FORMAT_VERSION`](crate::checkpoint::FORMAT_VERSION).
        expected: u32,
    },
    /// The stored CRC-32 differs from that of the content: corrupt or truncated.
    #[error("checksum mismatch (stored {stored:08x}, computed {computed:08x}): the checkpoint is corrupt or truncated")]
    Checksum {
        /// CRC-32 stored in the file.
        stored: u32,
        /// CRC-32 of the content read.
        computed: u32,
    },
    /// The checksum holds but the content cannot be decoded (or is inconsistent).
    #[error("malformed checkpoint: {0}")]
    Malformed(String),
    /// The checkpoint belongs to another problem, process layout or parameters.
    #[error("the checkpoint does not match this run: {what} is {checkpoint} in the checkpoint, {current} here")]
    Mismatch {
        /// What differs (e.g. "the matrix dimension n").
        what: String,
        /// Its value in the checkpoint.
        checkpoint: String,
        /// Its value in this run.
        current: String,
    },
}

/// Why a solve did not return a full solution.
#[derive(Debug, Error)]
pub enum JdError {
    /// Parameters inconsistent with the problem.
    #[error("invalid {field}: {reason}")]
    InvalidParams {
        /// The offending `JdParams` field, or the argument (`matrix`, `groups`,
        /// `diagonal`, …).
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The preconditioner could not be built.
    #[error("preconditioner: {0}")]
    Preconditioner(String),
    /// A non-finite value appeared (bad matrix entries or breakdown).
    #[error("non-finite value in {0}")]
    NonFinite(&'static str),
    /// A solve that did not converge, made an error by
    /// [`Solution::into_converged`] (the solvers return such a solution as
    /// `Ok`, with its [`crate::Outcome`]): the pairs converged so far and the
    /// best estimates of the rest.
    #[error("not converged ({}): {} of {} eigenpairs after {} matvecs", .0.outcome.describe(), .0.nconverged(), .0.wanted, .0.stats.matvecs)]
    NotConverged(Box<Solution>),
    /// A checkpoint to resume from does not fit this solve (see
    /// [`crate::checkpoint::Checkpoint::check_compatible`]).
    #[error("resume: {0}")]
    Checkpoint(#[from] CheckpointError),
    /// The matrix is not symmetric ([`crate::ProblemSettings::check_symmetry`]): jdmg
    /// solves symmetric problems only.
    #[error("the matrix is not symmetric: max |a_ij - a_ji| = {max_asymmetry:.3e}, relative {relative:.3e} (above {tol:e}); jdmg solves symmetric problems (the setting check_symmetry = false skips the check)", tol = SYMMETRY_TOL)]
    NotSymmetric {
        /// max |a_ij − a_ji|.
        max_asymmetry: f64,
        /// The same divided by max |a_ij|.
        relative: f64,
    },
    /// A sparse direct factorization failed (the shift-and-invert
    /// transformation, [`crate::st`]): K − σI is singular to working precision
    /// (σ an eigenvalue), or the factorization ran out of memory.
    #[error("factorization: {0}")]
    Factorization(String),
    /// The mass matrix M of a generalized problem ([`crate::Problem::with_mass`])
    /// is not positive definite: the solve met a vector x with xᵀMx ≤ 0, or an
    /// explicit M has a diagonal entry ≤ 0.
    #[error("the mass matrix M is not positive definite: {what} (K x = λ M x needs M symmetric positive definite)")]
    MassNotPositiveDefinite {
        /// Where it showed.
        what: String,
    },
}

impl JdError {
    /// [`JdError::InvalidParams`] for `field`.
    pub fn invalid(field: &'static str, reason: impl std::fmt::Display) -> Self {
        JdError::InvalidParams {
            field,
            reason: reason.to_string(),
        }
    }
}

impl Solution {
    /// `Ok(self)` when converged, else [`JdError::NotConverged`] carrying
    /// it: for callers that treat an early end as a failure (`?`).
    ///
    /// # Errors
    /// `NotConverged` for any outcome but [`crate::Outcome::Converged`].
    pub fn into_converged(self) -> Result<Self, JdError> {
        if self.is_converged() {
            Ok(self)
        } else {
            Err(JdError::NotConverged(Box::new(self)))
        }
    }
}
