//! Checks of a problem and its parameters made before the solve starts:
//! preconditioner choices that would be silently ignored, and processes that
//! disagree on the parameters shaping the collectives.

use super::*;

/// `InvalidParams` instead of a silently ignored choice (without a correction
/// backend, which takes the choice itself):
/// - `Jacobi` without the diagonal ([`Problem::with_diagonal`]);
/// - `Jacobi` beside a given preconditioner (one of the two would be ignored;
///   `PrecondChoice::None` uses the given one);
/// - `Ilu0`, `Ilut`, `Spai` or `Fsai` without a preconditioner given: they
///   are built from the CSR matrix by [`crate::solve_matrix`] and
///   [`crate::solve_distributed`]; a [`Problem`] of one's own (matrix-free)
///   passes its own with [`Problem::with_preconditioner`].
pub(super) fn check_precond<A: Operator + ?Sized, C: Comm + ?Sized>(
    pb: &Problem<'_, A, C>,
    prm: &JdParams,
) -> Result<(), JdError> {
    let bad = |m: String| Err(JdError::invalid("precond", m));
    match prm.preconditioner.kind {
        // Auto: the given preconditioner, else Jacobi on a given diagonal, else none.
        PrecondChoice::None | PrecondChoice::Auto => Ok(()),
        PrecondChoice::Jacobi if pb.precond.is_some() => bad(
            "precond = Jacobi with a preconditioner given (Problem::with_preconditioner): one \
             would be ignored; PrecondChoice::None uses the given one"
                .into(),
        ),
        PrecondChoice::Jacobi if pb.diagonal.is_none() => {
            bad("precond = Jacobi needs the diagonal of A (Problem::with_diagonal)".into())
        }
        PrecondChoice::Jacobi => Ok(()),
        other if pb.precond.is_none() => bad(format!(
            "precond = {other:?} is built from a CSR matrix by solve_matrix and \
             solve_distributed; a Problem of its own needs it given \
             (Problem::with_preconditioner)"
        )),
        _ => Ok(()),
    }
}

/// `InvalidParams` on every process when the processes disagree on nev, the
/// block or the basis size (the collectives' buffer sizes follow them: a
/// mismatch used to panic inside `all_reduce`). One global max of 6 values.
pub(super) fn check_agreement<A: Operator + ?Sized, C: Comm + ?Sized>(
    pb: &Problem<'_, A, C>,
    prm: &JdParams,
    sz: &Sizes,
) -> Result<(), JdError> {
    if pb.comm.size() < 2 {
        return Ok(());
    }
    let (nev, k, mb) = (prm.problem.nev as f64, sz.k as f64, sz.max_basis as f64);
    let mut buf = [nev, -nev, k, -k, mb, -mb];
    pb.comm.all_reduce(&mut buf, ReduceOp::Max);
    for (i, name) in [(0, "nev"), (2, "block"), (4, "max_basis")] {
        if buf[i] != -buf[i + 1] {
            return Err(JdError::invalid(
                name,
                format!(
                    "the processes disagree: {name} between {} and {} (every process must pass the same parameters)",
                    -buf[i + 1],
                    buf[i]
                ),
            ));
        }
    }
    Ok(())
}
