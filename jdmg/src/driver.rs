//! Convenience drivers: build the operator and preconditioner of a CSR matrix and
//! call [`crate::solve`].

use std::time::Instant;

use lblib::{Comm, SelfComm};
use matrices::CsrMatrix;
use precond::preconditioners::{BoxedPreconditioner, Ilu0, IlutParams, PivotParams, SpaiParams};
use precond::spmv::CsrOperator;
use precond::PrecondKind;

use crate::checkpoint::Checkpointing;
use crate::jd::{solve_resumable, Observer, Problem, Spaces};
use crate::params::{JdParams, PrecondChoice, Target};
use crate::solution::{JdError, Solution};

/// Gershgorin interval [lo, hi] of the rows of `a` (a bound of the spectrum).
pub fn gershgorin(a: &CsrMatrix) -> (f64, f64) {
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for i in 0..a.nrows() {
        let (cols, vals) = a.row(i);
        let mut d = 0.0;
        let mut off = 0.0;
        for (&c, &v) in cols.iter().zip(vals) {
            if c as usize == i {
                d = v;
            } else {
                off += v.abs();
            }
        }
        lo = lo.min(d - off);
        hi = hi.max(d + off);
    }
    (lo, hi)
}

/// The preconditioner kind of a parameter set (`None` for none and Jacobi, which
/// the solver applies itself with the current Ritz value as shift; ILU(0) for
/// `Auto`, which [`build_preconditioner`] keeps only when it is stable).
pub fn precond_kind(params: &JdParams) -> Option<PrecondKind> {
    match params.precond {
        PrecondChoice::None | PrecondChoice::Jacobi => None,
        PrecondChoice::Ilu0 | PrecondChoice::Auto => {
            Some(PrecondKind::Ilu0(PivotParams::default()))
        }
        PrecondChoice::Ilut => Some(PrecondKind::Ilut(IlutParams {
            fill: params.ilut_fill,
            drop_tol: params.ilut_drop,
            ..IlutParams::default()
        })),
        PrecondChoice::Spai => Some(PrecondKind::Spai(SpaiParams::default())),
        PrecondChoice::Fsai => Some(PrecondKind::Fsai),
    }
}

/// Shift σ of the preconditioner A − σI (see [`JdParams::precond_shift`]).
pub fn precond_shift(params: &JdParams, a: &CsrMatrix) -> f64 {
    params.precond_shift.unwrap_or(match params.target {
        Target::Closest(s) => s,
        Target::Smallest => 0.0,
        Target::Largest => gershgorin(a).1,
        Target::LargestMagnitude => {
            let (lo, hi) = gershgorin(a);
            if hi.abs() >= lo.abs() {
                hi
            } else {
                lo
            }
        }
    })
}

/// Builds the preconditioner of `a_local` (a square diagonal block) for `params`.
/// With [`PrecondChoice::Auto`], ILU(0) when [`ilu0_is_stable`] accepts it, else
/// `None` (the solver then applies Jacobi); a failed factorization also gives
/// `None` there.
///
/// # Errors
/// [`JdError::Preconditioner`] with the factorization's message (not for `Auto`).
pub fn build_preconditioner(
    params: &JdParams,
    a_local: &CsrMatrix,
    shift: f64,
) -> Result<Option<BoxedPreconditioner>, JdError> {
    if params.precond == PrecondChoice::Auto {
        let ilu = Ilu0::new(a_local, shift, &PivotParams::default()).ok();
        return Ok(ilu
            .filter(|f| ilu0_is_stable(f, a_local, shift))
            .map(|f| Box::new(f) as BoxedPreconditioner));
    }
    match precond_kind(params) {
        None => Ok(None),
        Some(kind) => precond::build(&kind, a_local, shift)
            .map(Some)
            .map_err(|e| JdError::Preconditioner(e.to_string())),
    }
}

/// Bound of [`ilu0_is_stable`]'s growth test.
pub const ILU_GROWTH_LIMIT: f64 = 1e6;

/// Whether the ILU(0) factors `f` of `a − shift·I` are safe to precondition with
/// (the test behind [`PrecondChoice::Auto`]; Chow and Saad, "Experimental study
/// of ILU preconditioners for indefinite matrices", 1997, measure the same
/// things): no pivot was perturbed, every pivot u_ii has the sign of the diagonal
/// entry a_ii − σ (an incomplete factorization of a definite matrix that meets a
/// pivot of the other sign has broken down: bcsstk13 meets 79), and the growth
/// estimate ‖(LU)⁻¹·1‖∞ is at most [`ILU_GROWTH_LIMIT`] times max_i 1/|a_ii − σ|
/// (unstable triangular factors blow up where A⁻¹ does not).
pub fn ilu0_is_stable(f: &Ilu0, a: &CsrMatrix, shift: f64) -> bool {
    let n = a.nrows();
    if f.perturbed_pivots() > 0 {
        return false;
    }
    let lu = f.factors();
    let mut inv_diag = 0.0f64;
    for i in 0..n {
        let d = a.get(i, i) - shift;
        let u = lu.pivot(i);
        if d == 0.0 || u.signum() != d.signum() || !u.is_finite() {
            return false;
        }
        inv_diag = inv_diag.max(1.0 / d.abs());
    }
    let ones = vec![1.0; n];
    let mut z = vec![0.0; n];
    lu.solve(&ones, &mut z);
    let growth = z.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    growth.is_finite() && growth <= ILU_GROWTH_LIMIT * inv_diag.max(f64::MIN_POSITIVE)
}

/// Solves on one process: `params.threads` threads for SpMV and dense kernels.
/// `a` is a [`CsrMatrix`], a `sprs::CsMat<f64>` or a faer sparse matrix (see
/// [`crate::input::AsCsr`]): `jdmg::solve_matrix(&csmat, &JdParams::default(), None)`.
///
/// # Errors
/// As [`crate::solve`], plus `InvalidParams` for a non-square matrix and
/// `Preconditioner` when the factorization fails.
pub fn solve_matrix<M: crate::input::AsCsr + ?Sized>(
    a: &M,
    params: &JdParams,
    observer: Option<Observer<'_>>,
) -> Result<Solution, JdError> {
    solve_matrix_resumable(a, params, observer, Checkpointing::default())
}

/// [`solve_matrix`] with checkpoints: written to `ck.sink`, resumed from
/// `ck.resume` (see [`crate::solve_resumable`]).
///
/// # Errors
/// As [`solve_matrix`], plus `Checkpoint` when `ck.resume` does not fit.
pub fn solve_matrix_resumable<M: crate::input::AsCsr + ?Sized>(
    a: &M,
    params: &JdParams,
    observer: Option<Observer<'_>>,
    ck: Checkpointing<'_>,
) -> Result<Solution, JdError> {
    solve_matrix_with(a, params, observer, ck, Spaces::default())
}

/// [`solve_matrix_resumable`] with start vectors and deflation vectors
/// (`spaces`: n × p column-major blocks, see [`Spaces`]).
///
/// # Errors
/// As [`solve_matrix_resumable`], plus `InvalidParams` when a block of
/// `spaces` is not a whole number of vectors of n rows or holds NaN/Inf.
pub fn solve_matrix_with<M: crate::input::AsCsr + ?Sized>(
    a: &M,
    params: &JdParams,
    observer: Option<Observer<'_>>,
    ck: Checkpointing<'_>,
    spaces: Spaces<'_>,
) -> Result<Solution, JdError> {
    let comm = SelfComm::new();
    let csr = a.as_csr()?;
    solve_on(&csr, &comm, params, observer, ck, spaces)
}

/// Like [`solve_matrix`] on a one-process communicator `comm` (for tracing).
///
/// # Errors
/// As [`solve_matrix`].
pub fn solve_matrix_on<C: Comm + ?Sized>(
    a: &CsrMatrix,
    comm: &C,
    params: &JdParams,
    observer: Option<Observer<'_>>,
) -> Result<Solution, JdError> {
    solve_on(
        a,
        comm,
        params,
        observer,
        Checkpointing::default(),
        Spaces::default(),
    )
}

fn solve_on<C: Comm + ?Sized>(
    a: &CsrMatrix,
    comm: &C,
    params: &JdParams,
    observer: Option<Observer<'_>>,
    ck: Checkpointing<'_>,
    spaces: Spaces<'_>,
) -> Result<Solution, JdError> {
    check_square(a)?;
    crate::symmetry::check_symmetric(a, params)?;
    let op = CsrOperator::new(a, params.threads).map_err(|e| JdError::invalid("matrix", e))?;
    let diag = a.diagonal();
    let t0 = Instant::now();
    let pc = build_preconditioner(params, a, precond_shift(params, a))?;
    let setup = t0.elapsed().as_secs_f64();
    let pb = Problem {
        a: &op,
        comm,
        n_global: a.nrows(),
        row_offset: 0,
        diagonal: Some(&diag),
        precond: pc.as_deref(),
        spaces: Spaces::default(),
        mass: None,
    }
    .with_initial(spaces.initial)?
    .with_deflation(spaces.deflation)?;
    with_setup(solve_resumable(&pb, params, observer, ck), setup)
}

/// Records the preconditioner setup time in a solution or in the partial solution
/// of `NotConverged`.
pub(crate) fn with_setup(r: Result<Solution, JdError>, setup: f64) -> Result<Solution, JdError> {
    match r {
        Ok(mut s) => {
            s.stats.setup_seconds = setup;
            Ok(s)
        }
        Err(JdError::NotConverged {
            wanted,
            mut partial,
        }) => {
            partial.stats.setup_seconds = setup;
            Err(JdError::NotConverged { wanted, partial })
        }
        Err(JdError::Stopped {
            wanted,
            mut partial,
        }) => {
            partial.stats.setup_seconds = setup;
            Err(JdError::Stopped { wanted, partial })
        }
        Err(e) => Err(e),
    }
}

/// Fine-grain distributed solve (McCombs et al. §3): rows of A and of every block
/// vector are split over the processes of `comm` (balanced by nonzeros); each
/// process passes the same global matrix `a` and keeps only its rows. The
/// preconditioner is block-Jacobi: each process factors its own diagonal block.
/// Start vectors depend only on the seed and global row indices, so the result
/// does not depend on the number of processes (up to rounding).
///
/// Collective over `comm`. Eigenvectors in the result hold this process's rows
/// (`row_range` of the returned partition).
///
/// # Errors
/// As [`solve_matrix`], plus `InvalidParams` when the partition or halo plan
/// cannot be built.
pub fn solve_distributed<C: Comm + ?Sized>(
    a: &CsrMatrix,
    comm: &C,
    params: &JdParams,
    observer: Option<Observer<'_>>,
) -> Result<Solution, JdError> {
    solve_distributed_resumable(a, comm, params, observer, Checkpointing::default())
}

/// [`solve_distributed`] with checkpoints: every process writes its rows to
/// its `ck.sink` and resumes from its own `ck.resume` (see
/// [`crate::solve_resumable`]); a checkpoint resumes only with the same number
/// of processes (the rows are split the same way).
///
/// # Errors
/// As [`solve_distributed`], plus `Checkpoint` when some process's
/// `ck.resume` does not fit (on every process).
pub fn solve_distributed_resumable<C: Comm + ?Sized>(
    a: &CsrMatrix,
    comm: &C,
    params: &JdParams,
    observer: Option<Observer<'_>>,
    ck: Checkpointing<'_>,
) -> Result<Solution, JdError> {
    solve_distributed_with(a, comm, params, observer, ck, Spaces::default())
}

/// [`solve_distributed_resumable`] with start vectors and deflation vectors:
/// every process passes the same global n × p blocks (like the matrix) and
/// keeps its rows.
///
/// # Errors
/// As [`solve_distributed_resumable`] and [`solve_matrix_with`].
pub fn solve_distributed_with<C: Comm + ?Sized>(
    a: &CsrMatrix,
    comm: &C,
    params: &JdParams,
    observer: Option<Observer<'_>>,
    ck: Checkpointing<'_>,
    spaces: Spaces<'_>,
) -> Result<Solution, JdError> {
    use matrices::partition::RowPartition;
    use precond::dist::{DistCsrOperator, DistOptions};
    check_square(a)?;
    crate::symmetry::check_symmetric(a, params)?;
    let invalid = |e: &dyn std::fmt::Display| JdError::invalid("partition", e);
    let part = RowPartition::balanced_by_nnz(a, comm.size()).map_err(|e| invalid(&e))?;
    let range = part.range(comm.rank());
    let local = a.row_slice(range.start, range.end);
    let sizes = params.resolve(a.nrows())?;
    let opts = DistOptions {
        threads: params.threads,
        overlap: false,
        max_block: sizes.max_basis,
    };
    let op = DistCsrOperator::new(&local, &part, comm, opts).map_err(|e| invalid(&e))?;
    let diag: Vec<f64> = (0..local.nrows())
        .map(|i| local.get(i, range.start + i))
        .collect();
    let t0 = Instant::now();
    let block = precond::preconditioners::diagonal_block(&local, 0..local.nrows(), range.start)
        .map_err(|e| JdError::Preconditioner(e.to_string()))?;
    let pc = build_preconditioner(params, &block, precond_shift(params, a))?;
    // Only the preconditioner needed the diagonal block: free it for the solve.
    drop(block);
    let setup = t0.elapsed().as_secs_f64();
    let initial = crate::jd::local_rows("initial", spaces.initial, a.nrows(), range.clone())?;
    let deflation = crate::jd::local_rows("deflation", spaces.deflation, a.nrows(), range.clone())?;
    let pb = Problem {
        a: &op,
        comm,
        n_global: a.nrows(),
        row_offset: range.start,
        diagonal: Some(&diag),
        precond: pc.as_deref(),
        spaces: Spaces::default(),
        mass: None,
    };
    let pb = pb.with_initial(&initial)?.with_deflation(&deflation)?;
    with_setup(solve_resumable(&pb, params, observer, ck), setup)
}

/// `InvalidParams` for a matrix that is not square.
fn check_square(a: &CsrMatrix) -> Result<(), JdError> {
    if a.nrows() == a.ncols() {
        return Ok(());
    }
    Err(JdError::invalid(
        "matrix",
        format!(
            "the matrix must be square, got {} x {}",
            a.nrows(),
            a.ncols()
        ),
    ))
}

/// Collects the whole eigenvectors of a distributed solve on every process:
/// `r`, the outcome of [`solve_distributed`] (or [`crate::solve_multigrain`])
/// on this process of `comm`, whose rank order is the order of the row
/// blocks, becomes the same outcome with `eigenvectors` of all `n` rows
/// (`n_local = n`, `row_offset = 0`). The partial solutions of
/// `NotConverged` and `Stopped` are gathered too; other errors pass through.
/// Collective (when `r` is `Ok`, `NotConverged` or `Stopped` on every
/// process, as the solvers return).
///
/// # Errors
/// `r`'s error, with its partial solution gathered.
pub fn gather_eigenvectors<C: Comm + ?Sized>(
    comm: &C,
    n: usize,
    r: Result<Solution, JdError>,
) -> Result<Solution, JdError> {
    let (mut s, boxed, stopped) = match r {
        Ok(s) => (s, false, false),
        Err(JdError::NotConverged { partial, .. }) => (*partial, true, false),
        Err(JdError::Stopped { partial, .. }) => (*partial, true, true),
        Err(e) => return Err(e),
    };
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
    if boxed {
        let wanted = s.eigenvalues.len();
        let partial = Box::new(s);
        Err(if stopped {
            JdError::Stopped { wanted, partial }
        } else {
            JdError::NotConverged { wanted, partial }
        })
    } else {
        Ok(s)
    }
}
