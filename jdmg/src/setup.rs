//! The setup of a solve on a CSR matrix, in one place for the serial,
//! fine-grain and solve-group paths: the checks of the matrix, the operator of
//! this process's rows, their diagonal, the preconditioner (its kind, its shift
//! and its stability test), and the choice of the correction equations'
//! preconditioner ([`inner_for`]).

use std::ops::Range;
use std::time::Instant;

use lblib::Comm;
use matrices::partition::RowPartition;
use matrices::CsrMatrix;
use precond::dist::{DistCsrOperator, DistOptions};
use precond::preconditioners::{
    BoxedPreconditioner, DiagonalIlu0, Ilu0, IlutParams, PivotParams, SpaiParams,
};
use precond::spmv::CsrOperator;
use precond::{Operator, PrecondKind, Preconditioner};

use crate::correction::Inner;
use crate::error::JdError;
use crate::params::{JdParams, PrecondChoice, Target};
use crate::solution::Solution;

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

/// The shift σ₀ of the built preconditioner of K − σ₀M (see [`crate::generalized`]).
pub fn mass_precond_shift(params: &JdParams) -> f64 {
    params
        .preconditioner
        .shift
        .unwrap_or(match params.problem.target {
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

/// The preconditioner kind of a parameter set (`None` for none and Jacobi, which
/// the solver applies itself with the current Ritz value as shift; ILU(0) for
/// `Auto`, which [`build_preconditioner`] keeps only when it is stable).
pub fn precond_kind(params: &JdParams) -> Option<PrecondKind> {
    match params.preconditioner.kind {
        PrecondChoice::None | PrecondChoice::Jacobi => None,
        PrecondChoice::Ilu0 | PrecondChoice::Auto => {
            Some(PrecondKind::Ilu0(PivotParams::default()))
        }
        PrecondChoice::Ilut => Some(PrecondKind::Ilut(IlutParams {
            fill: params.preconditioner.ilut_fill,
            drop_tol: params.preconditioner.ilut_drop,
            ..IlutParams::default()
        })),
        PrecondChoice::Spai => Some(PrecondKind::Spai(SpaiParams::default())),
        PrecondChoice::Fsai => Some(PrecondKind::Fsai),
    }
}

/// Shift σ of the preconditioner A − σI (see [`crate::PrecondSettings::shift`]).
pub fn precond_shift(params: &JdParams, a: &CsrMatrix) -> f64 {
    params
        .preconditioner
        .shift
        .unwrap_or(match params.problem.target {
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
/// FSAI when [`fsai_fallback`] builds one, else `None` (the solver then applies
/// Jacobi); a failed factorization also falls through. ILU(0) keeps the general
/// storage for blocks of one column, the symmetric one (when exactly symmetric)
/// otherwise (see `ilu0_factors`).
///
/// # Errors
/// [`JdError::Preconditioner`] with the factorization's message (not for `Auto`).
pub fn build_preconditioner(
    params: &JdParams,
    a_local: &CsrMatrix,
    shift: f64,
) -> Result<Option<BoxedPreconditioner>, JdError> {
    Ok(built(params, a_local, shift)?.map(Built::boxed))
}

/// A preconditioner of [`built`]: ILU(0) apart, which a solve on the whole
/// matrix may turn into [`DiagonalIlu0`].
enum Built {
    Ilu0(Box<Ilu0>),
    Other(BoxedPreconditioner),
}

impl Built {
    fn boxed(self) -> BoxedPreconditioner {
        match self {
            Built::Ilu0(f) => f,
            Built::Other(p) => p,
        }
    }
}

/// [`build_preconditioner`] before boxing.
fn built(params: &JdParams, a_local: &CsrMatrix, shift: f64) -> Result<Option<Built>, JdError> {
    if params.preconditioner.kind == PrecondChoice::Auto {
        let ilu = ilu0_factors(params, a_local, shift, &PivotParams::default())
            .ok()
            .filter(|f| ilu0_is_stable(f, a_local, shift));
        if let Some(f) = ilu {
            return Ok(Some(Built::Ilu0(Box::new(f))));
        }
        return Ok(fsai_fallback(a_local, shift).map(|f| Built::Other(Box::new(f))));
    }
    let built = match precond_kind(params) {
        None => return Ok(None),
        Some(PrecondKind::Ilu0(p)) => {
            ilu0_factors(params, a_local, shift, &p).map(|f| Built::Ilu0(Box::new(f)))
        }
        Some(kind) => precond::build(&kind, a_local, shift).map(Built::Other),
    };
    built
        .map(Some)
        .map_err(|e| JdError::Preconditioner(e.to_string()))
}

/// A preconditioner that may borrow the matrix of the rows it serves.
pub(crate) type RowsPreconditioner<'m> = Box<dyn Preconditioner + Send + Sync + 'm>;

/// [`build_preconditioner`] for the whole matrix `a`: an ILU(0) that fills
/// nothing inside the pattern of `a` is kept as its pivots, reading its
/// off-diagonal entries from `a` ([`DiagonalIlu0`]: 40 MB less on lap3d:100).
fn build_sharing<'m>(
    params: &JdParams,
    a: &'m CsrMatrix,
    shift: f64,
) -> Result<Option<RowsPreconditioner<'m>>, JdError> {
    Ok(built(params, a, shift)?.map(|b| match b {
        Built::Ilu0(f) => match DiagonalIlu0::from_ilu0(&f, a) {
            Some(d) => Box::new(d) as RowsPreconditioner<'m>,
            None => f,
        },
        Built::Other(p) => p,
    }))
}

/// ILU(0) of `a − shift·I` in the storage that suits the solve's applications:
/// the general one (`L` and `U`, [`Ilu0::new_general`]) for blocks of one column,
/// whose corrections apply the preconditioner to one vector at a time, else
/// [`Ilu0::new`] (`U` and `D` only for an exactly symmetric matrix). One vector
/// is latency-bound, and the symmetric storage's forward sweep scatters into
/// later rows where the general one gathers: one application took 0.291 against
/// 0.444 ms on lap3d:40, 1.41 against 1.95 ms on lap3d:64 and 1.47 against 1.64
/// ms on stencil27:48; for blocks of 4 both take the same time, and the
/// symmetric storage has half the entries.
///
/// # Errors
/// As [`Ilu0::new`].
pub fn ilu0_factors(
    params: &JdParams,
    a: &CsrMatrix,
    shift: f64,
    pivots: &PivotParams,
) -> Result<Ilu0, precond::preconditioners::PrecondError> {
    if params.block_size() == 1 {
        Ilu0::new_general(a, shift, pivots)
    } else {
        Ilu0::new(a, shift, pivots)
    }
}

/// Bound of [`fsai_fallback`]'s setup cost, in flops per stored nonzero of the
/// matrix (about this many half-products with it). bcsstk38, whose rows reach
/// 600 entries, needs 612.
pub const FSAI_SETUP_LIMIT: f64 = 1000.0;

/// The preconditioner of [`PrecondChoice::Auto`] where ILU(0) is unstable: FSAI of
/// `a − shift·I` (Kolotilina and Yeremin's factorized approximate inverse GᵀG,
/// symmetric positive definite by construction) when every row's local system
/// was definite (no negative sign: the shifted matrix is, as far as FSAI can
/// tell, positive definite) and its setup costs at most [`FSAI_SETUP_LIMIT`]
/// flops per nonzero; else None (Jacobi).
///
/// Why not Jacobi first: the Jacobi correction (D − θI)⁻¹r is exact on a row
/// without off-diagonal entries, so it cancels the Ritz vector's component along
/// that unit vector instead of adding one, and an eigenvalue whose eigenvectors
/// are such unit vectors is never found. bcsstk15 has six such rows (eigenvalue
/// 1, its smallest): Jacobi returned 734.9, 823.4, 847.5 and 1329.9, FSAI returns
/// the cluster at 1 in 74 matvecs; on msc04515 FSAI needs 1,678 matvecs against
/// Jacobi's 18,495. On the indefinite nasa1824 and bcsstm34 FSAI has negative
/// signs and fails to converge, so they keep Jacobi.
pub fn fsai_fallback(a: &CsrMatrix, shift: f64) -> Option<precond::preconditioners::Fsai> {
    let nnz = a.nnz().max(1) as f64;
    if precond::preconditioners::Fsai::setup_flops(a) > FSAI_SETUP_LIMIT * nnz {
        return None;
    }
    precond::preconditioners::Fsai::new(a, shift)
        .ok()
        .filter(|f| f.negative_signs() == 0)
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

/// `InvalidParams` for a matrix that is not square, then the symmetry check
/// ([`crate::symmetry::check_symmetric`]).
///
/// # Errors
/// `InvalidParams` or `NotSymmetric`.
pub(crate) fn check_matrix(a: &CsrMatrix, params: &JdParams) -> Result<(), JdError> {
    if a.nrows() != a.ncols() {
        return Err(JdError::invalid(
            "matrix",
            format!(
                "the matrix must be square, got {} x {}",
                a.nrows(),
                a.ncols()
            ),
        ));
    }
    crate::symmetry::check_symmetric(a, params)
}

/// The operator of one process's rows: the whole matrix on one process, the
/// rows of a partition (with halo exchanges on its communicator) otherwise.
// one per solve (or solve group): the size of the variants does not matter
#[allow(clippy::large_enum_variant)]
pub(crate) enum RowOperator<'m, 'c, C: Comm + ?Sized> {
    /// One process: the plain CSR product.
    Whole(CsrOperator<'m>),
    /// This rank's rows of a row partition.
    Rows(DistCsrOperator<'c, C>),
}

impl<C: Comm + ?Sized> Operator for RowOperator<'_, '_, C> {
    fn nrows(&self) -> usize {
        match self {
            Self::Whole(a) => a.nrows(),
            Self::Rows(a) => a.nrows(),
        }
    }

    fn apply_block(&self, x: &[f64], y: &mut [f64], k: usize) {
        match self {
            Self::Whole(a) => a.apply_block(x, y, k),
            Self::Rows(a) => a.apply_block(x, y, k),
        }
    }

    fn work_per_vector(&self) -> f64 {
        match self {
            Self::Whole(a) => a.work_per_vector(),
            Self::Rows(a) => a.work_per_vector(),
        }
    }
}

/// What a solve needs of one process's rows of a CSR matrix.
pub(crate) struct Rows<'m, 'c, C: Comm + ?Sized> {
    /// The operator of the rows.
    pub op: RowOperator<'m, 'c, C>,
    /// The global rows held.
    pub range: Range<usize>,
    /// Their diagonal entries, for Jacobi: `None` beside a built preconditioner
    /// unless Jacobi is asked (see [`inner_for`]).
    pub diag: Option<Vec<f64>>,
    /// The preconditioner of their diagonal block (block Jacobi across
    /// processes), when asked and the choice builds one.
    pub pc: Option<RowsPreconditioner<'m>>,
    /// Seconds building it.
    pub setup_seconds: f64,
}

/// How [`rows`] builds the operator and preconditioner of one process's rows.
pub(crate) struct RowsSpec<'p> {
    /// The row partition over the communicator (`None`: the whole matrix on
    /// one process).
    pub part: Option<&'p RowPartition>,
    /// Threads, overlap and the largest block of the products.
    pub opts: DistOptions,
    /// Build the preconditioner of `params` with this shift (`None`: none).
    pub precond: Option<f64>,
    /// The matrix whose rows the preconditioner approximates, when not `a`
    /// (K − σ₀M for K x = λ M x; the same partition).
    pub precond_of: Option<&'p CsrMatrix>,
    /// The argument named by errors (`matrix`, `partition`, `groups`).
    pub field: &'static str,
}

/// The operator, diagonal and preconditioner of this process's rows of `a`
/// (see [`RowsSpec`]). Collective over `comm` with a partition.
///
/// # Errors
/// `InvalidParams` (named `spec.field`) when the operator cannot be built;
/// `Preconditioner` as [`build_preconditioner`].
pub(crate) fn rows<'m, 'c, C: Comm + ?Sized>(
    a: &'m CsrMatrix,
    comm: &'c C,
    params: &JdParams,
    spec: RowsSpec<'_>,
) -> Result<Rows<'m, 'c, C>, JdError> {
    let field = spec.field;
    let (op, range, local) = match spec.part {
        None => {
            let op =
                CsrOperator::new(a, spec.opts.threads).map_err(|e| JdError::invalid(field, e))?;
            (RowOperator::Whole(op), 0..a.nrows(), None)
        }
        Some(part) => {
            let range = part.range(comm.rank());
            let local = a.row_slice(range.start, range.end);
            let op = DistCsrOperator::new(&local, part, comm, spec.opts)
                .map_err(|e| JdError::invalid(field, e))?;
            (RowOperator::Rows(op), range, Some(local))
        }
    };
    let t0 = Instant::now();
    let pc = match (spec.precond, &local, spec.precond_of) {
        (None, _, _) => None,
        (Some(shift), None, None) => build_sharing(params, a, shift)?,
        (Some(shift), None, Some(of)) => {
            build_preconditioner(params, of, shift)?.map(|p| p as RowsPreconditioner<'m>)
        }
        (Some(shift), Some(l), of) => {
            let other = of.map(|m| m.row_slice(range.start, range.end));
            let l = other.as_ref().unwrap_or(l);
            let block = precond::preconditioners::diagonal_block(l, 0..l.nrows(), range.start)
                .map_err(|e| JdError::Preconditioner(e.to_string()))?;
            build_preconditioner(params, &block, shift)?.map(|p| p as RowsPreconditioner<'m>)
        }
    };
    let setup_seconds = t0.elapsed().as_secs_f64();
    // The diagonal serves Jacobi only (`inner_for`): not kept beside a built
    // preconditioner (8 MB on a 10⁶-row problem).
    let diag =
        (pc.is_none() || params.preconditioner.kind == PrecondChoice::Jacobi).then(
            || match &local {
                None => a.diagonal(),
                Some(l) => (0..l.nrows()).map(|i| l.get(i, range.start + i)).collect(),
            },
        );
    Ok(Rows {
        op,
        range,
        diag,
        pc,
        setup_seconds,
    })
}

/// The preconditioner of the correction equations (shift in the units of
/// the preconditioner's operator), the one choice of the serial, fine-grain
/// and solve-group paths: a given preconditioner unless `Jacobi` is asked,
/// else Jacobi on the diagonal with `Jacobi` or `Auto` (diag(K) − σ·diag(M)
/// with the diagonal `mdiag` of a mass matrix), else none.
pub(crate) fn inner_for<'a>(
    choice: PrecondChoice,
    diag: Option<&'a [f64]>,
    mdiag: Option<&'a [f64]>,
    pc: Option<&'a (dyn Preconditioner + Send + Sync)>,
    shift: f64,
) -> Inner<'a> {
    match (choice, diag, pc) {
        (c, _, Some(pc)) if c != PrecondChoice::Jacobi => Inner::Shifted { pc, shift },
        (PrecondChoice::Jacobi | PrecondChoice::Auto, Some(diag), _) => match mdiag {
            Some(mdiag) => Inner::MassDiagonal { diag, mdiag, shift },
            None => Inner::Diagonal { diag, shift },
        },
        _ => Inner::Identity,
    }
}

/// Records the preconditioner setup time in a solution.
pub(crate) fn with_setup(r: Result<Solution, JdError>, setup: f64) -> Result<Solution, JdError> {
    r.map(|mut s| {
        s.stats.setup_seconds = setup;
        s
    })
}

/// M's rows on this process of the partition of every slice's solve
/// (balanced by K's nonzeros; the whole of M on one process), for products
/// with blocks of up to `max_block` columns; None without M.
pub(crate) fn mass_rows<'m, 'c, C: Comm + ?Sized>(
    k: &CsrMatrix,
    mass: Option<&'m CsrMatrix>,
    comm: &'c C,
    params: &JdParams,
    max_block: usize,
) -> Result<Option<Rows<'m, 'c, C>>, JdError> {
    let Some(m) = mass else {
        return Ok(None);
    };
    let part = if comm.size() > 1 {
        Some(
            matrices::partition::RowPartition::balanced_by_nnz(k, comm.size())
                .map_err(|e| JdError::invalid("partition", e))?,
        )
    } else {
        None
    };
    rows(
        m,
        comm,
        params,
        RowsSpec {
            part: part.as_ref(),
            opts: precond::dist::DistOptions {
                threads: params.execution.threads,
                overlap: false,
                max_block: max_block.max(1),
            },
            precond: None,
            precond_of: None,
            field: "mass",
        },
    )
    .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::{PrecondSettings, ProblemSettings};
    use matrices::generate::{generate, GenSpec};
    use precond::preconditioners::Fsai;

    #[test]
    fn fsai_fallback_is_for_definite_matrices_only() {
        // Eigenvalues of lap2d:20 lie in (0, 8).
        let a = generate(&"lap2d:20".parse::<GenSpec>().unwrap()).unwrap();
        assert_eq!(fsai_fallback(&a, 0.0).unwrap().negative_signs(), 0);
        // A − 6I is indefinite: FSAI's local systems say so, Jacobi is kept.
        assert!(Fsai::new(&a, 6.0).unwrap().negative_signs() > 0);
        assert!(fsai_fallback(&a, 6.0).is_none());
    }

    #[test]
    fn fsai_fallback_refuses_a_cubic_setup() {
        // An arrow matrix: its last row couples to every other, |P| = n.
        let n = 400;
        let mut t: Vec<(usize, usize, f64)> = (0..n).map(|i| (i, i, 4.0 * n as f64)).collect();
        for i in 0..n - 1 {
            t.extend([(n - 1, i, 1.0), (i, n - 1, 1.0)]);
        }
        let a = CsrMatrix::from_triplets(n, n, &t).unwrap();
        assert!(Fsai::setup_flops(&a) > FSAI_SETUP_LIMIT * a.nnz() as f64);
        assert!(Fsai::new(&a, 0.0).is_ok());
        assert!(fsai_fallback(&a, 0.0).is_none());
    }

    #[test]
    fn whole_matrix_ilu0_reads_a_seven_point_stencil_in_place() {
        let comm = lblib::SelfComm::new();
        let spec = || RowsSpec {
            part: None,
            opts: DistOptions::default(),
            precond: Some(0.3),
            precond_of: None,
            field: "matrix",
        };
        let p = JdParams::default();
        for (name, in_place) in [("lap3d:8", true), ("stencil27:6", false)] {
            let a = generate(&name.parse::<GenSpec>().unwrap()).unwrap();
            let f = ilu0_factors(&p, &a, 0.3, &PivotParams::default()).unwrap();
            assert_eq!(
                DiagonalIlu0::from_ilu0(&f, &a).is_some(),
                in_place,
                "{name}"
            );
            // Either way the rows' preconditioner is that ILU(0), to rounding;
            // no diagonal is kept beside it.
            let r = rows(&a, &comm, &p, spec()).unwrap();
            assert!(r.diag.is_none());
            let (n, k) = (a.nrows(), 4);
            let x: Vec<f64> = (0..n * k).map(|i| ((i * 7) % 11) as f64 - 5.0).collect();
            let (mut zr, mut zf) = (vec![0.0; n * k], vec![0.0; n * k]);
            r.pc.unwrap().apply_block(&x, &mut zr, k);
            f.apply_block(&x, &mut zf, k);
            let scale = zf.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            for (u, v) in zr.iter().zip(&zf) {
                assert!((u - v).abs() <= 1e-12 * scale, "{name}: {u} vs {v}");
            }
        }
    }

    #[test]
    fn ilu0_is_stored_for_the_block_size() {
        let a = generate(&"lap2d:12".parse::<GenSpec>().unwrap()).unwrap();
        let n = a.nrows();
        let single = JdParams {
            problem: ProblemSettings {
                nev: 1,
                ..Default::default()
            },
            ..JdParams::default()
        };
        let p = PivotParams::default();
        let general = ilu0_factors(&single, &a, 0.0, &p).unwrap();
        let sym = ilu0_factors(&JdParams::default(), &a, 0.0, &p).unwrap();
        // L, U and the diagonal against U and the diagonal: the same factorization.
        assert_eq!(general.factors().nnz(), a.nnz());
        assert_eq!(sym.factors().nnz(), (a.nnz() + n) / 2);
        let r: Vec<f64> = (0..n).map(|i| ((i * 7) % 11) as f64 - 5.0).collect();
        let (mut zg, mut zs) = (vec![0.0; n], vec![0.0; n]);
        general.factors().solve(&r, &mut zg);
        sym.factors().solve(&r, &mut zs);
        let scale = zs.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        for (g, s) in zg.iter().zip(&zs) {
            assert!((g - s).abs() <= 1e-13 * scale, "{g} vs {s}");
        }
        // An explicit ILU(0) follows the same rule.
        let explicit = JdParams {
            preconditioner: PrecondSettings {
                kind: PrecondChoice::Ilu0,
                ..single.preconditioner
            },
            ..single
        };
        let m = build_preconditioner(&explicit, &a, 0.0).unwrap().unwrap();
        let mut zm = vec![0.0; n];
        m.apply_block(&r, &mut zm, 1);
        assert_eq!(zm, zg);
    }
}
