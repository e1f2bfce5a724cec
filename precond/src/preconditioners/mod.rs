//! Preconditioners: Jacobi, ILU(0), ILUT(p,τ), least-squares SPAI, factorized FSAI and
//! block-Jacobi,
//! plus the [`PrecondKind`] selector and [`build`] used by the eigensolver.
//!
//! Every preconditioner approximates `(A − σI)^{-1}` for a shift `σ` (the JD correction
//! operator uses `σ = θ`, the current Ritz value). What happens when σ changes:
//!
//! | kind | on a new shift |
//! |---|---|
//! | `none` | nothing |
//! | `jacobi` | [`Jacobi::set_shift`]: O(n), no allocation (the unshifted diagonal is kept) |
//! | `ilu0` | [`Ilu0::refactor`]: numeric refactorization on the stored pattern, no allocation after the first |
//! | `ilut` | full refactorization (the dropping pattern depends on the values): [`Ilut::new`] |
//! | `spai` | full recomputation of the least-squares columns: [`Spai::new`] |
//! | `fsai` | full recomputation of the rows of the factor: [`Fsai::new`] |
//!
//! The selector [`build`] always constructs from scratch; callers that keep the
//! concrete type can use the cheaper update paths above.
//!
//! **Tiny pivots.** `A − σI` is indefinite when σ lies inside the spectrum, and an
//! incomplete factorization (or even the diagonal) may then meet a zero or tiny pivot.
//! Instead of failing, a pivot `u` with `|u| ≤ pivot_tol · ‖row_i(A − σI)‖_∞` is replaced
//! by `sign(u) · pivot_tol · ‖row_i(A − σI)‖_∞` (sign `+` for `u = 0`), as in SuperLU's
//! `ReplaceTinyPivot` (default `pivot_tol = √ε ≈ 1.5e-8`). The number of replaced pivots
//! is reported by each preconditioner (`perturbed_pivots()`) and in [`PrecondInfo`].
//! A row that is entirely zero, or `pivot_tol = 0` with an exactly zero pivot, is a
//! [`PrecondError::ZeroPivot`].

mod block_jacobi;
mod blocked;
mod fsai;
mod ilu;
mod jacobi;
mod spai;

pub use block_jacobi::{diagonal_block, BlockJacobi};
pub use fsai::Fsai;
pub use ilu::{DiagonalIlu0, Ilu0, Ilut, LuFactors};
pub use jacobi::Jacobi;
pub use spai::Spai;

use matrices::CsrMatrix;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::operator::{IdentityPreconditioner, Preconditioner};

/// Default relative threshold for tiny-pivot replacement: `√ε` (SuperLU's choice).
pub const DEFAULT_PIVOT_TOL: f64 = 1.490_116_119_384_765_6e-8;

/// Why a preconditioner could not be built.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum PrecondError {
    /// The matrix is not square.
    #[error("matrix is not square: {nrows} x {ncols}")]
    NotSquare {
        /// Rows of the matrix.
        nrows: usize,
        /// Columns of the matrix.
        ncols: usize,
    },
    /// Some dimension does not fit (a refactorization with another matrix, block ranges
    /// that do not tile the rows, a local block outside the column range, ...).
    #[error("size mismatch ({what}): expected {expected}, got {got}")]
    SizeMismatch {
        /// Which dimension.
        what: &'static str,
        /// The value that would fit.
        expected: usize,
        /// The value given.
        got: usize,
    },
    /// A zero pivot that could not be perturbed (the row of `A − σI` is entirely zero,
    /// or pivot perturbation is disabled with `pivot_tol = 0`). For SPAI: column `row`
    /// of `A − σI` is zero.
    #[error("zero pivot in row {row}")]
    ZeroPivot {
        /// Row (0-based, local to the block for block-Jacobi).
        row: usize,
    },
    /// The matrix holds a NaN or infinity at `(row, col)`.
    #[error("non-finite matrix entry at ({row}, {col})")]
    NonFinite {
        /// Row of the entry (0-based).
        row: usize,
        /// Column of the entry (0-based).
        col: usize,
    },
    /// The shift is NaN or infinite.
    #[error("non-finite shift {shift}")]
    NonFiniteShift {
        /// The shift given.
        shift: f64,
    },
    /// The factorization produced a NaN or infinity while eliminating row `row`
    /// (overflow from a badly conditioned incomplete factorization).
    #[error("factorization overflowed in row {row}")]
    FactorOverflow {
        /// Row being eliminated (0-based).
        row: usize,
    },
    /// A parameter is out of its documented range.
    #[error("invalid parameter {name} = {value}")]
    InvalidParameter {
        /// Parameter name.
        name: &'static str,
        /// Value given.
        value: f64,
    },
    /// [`Ilu0::refactor`] got a matrix whose entry `(row, col)` is not in the stored pattern.
    #[error("entry ({row}, {col}) is outside the stored ILU(0) pattern")]
    PatternMismatch {
        /// Row of the entry (0-based).
        row: usize,
        /// Column of the entry (0-based).
        col: usize,
    },
}

/// Parameters of [`Jacobi`] and [`Ilu0`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PivotParams {
    /// Relative tiny-pivot threshold (see the module docs). Default [`DEFAULT_PIVOT_TOL`];
    /// `0` disables perturbation (zero pivots are then errors). Must be finite and `>= 0`.
    pub pivot_tol: f64,
    /// ILU only (Jacobi ignores it): Manteuffel's diagonal shift `α` — the incomplete
    /// factorization is computed for `A − σI` with its diagonal multiplied by `1 + α`,
    /// which restores stability when plain ILU(0) meets negative pivots on an SPD matrix
    /// (bcsstk13: 79 negative pivots with `α = 0`, none with `α = 0.2`). Default 0 (plain
    /// ILU(0), as in the paper). Must be finite and `>= 0`.
    pub diag_shift: f64,
}

impl Default for PivotParams {
    fn default() -> Self {
        Self {
            pivot_tol: DEFAULT_PIVOT_TOL,
            diag_shift: 0.0,
        }
    }
}

/// Parameters of ILUT(p, τ) (Saad, *Iterative Methods for Sparse Linear Systems*, §10.4;
/// the paper's NASASRB runs use ILUT(20, 0)).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct IlutParams {
    /// `p`: at most this many off-diagonal entries are kept in each row of `L` and in
    /// each row of `U` (the largest in magnitude; SPARSKIT's `lfil`). Default 20.
    pub fill: usize,
    /// `τ`: entries smaller than `τ · ‖row_i(A − σI)‖₂` are dropped. Default 0 (drop only by count).
    pub drop_tol: f64,
    /// Tiny-pivot threshold, as in [`PivotParams`]. Default [`DEFAULT_PIVOT_TOL`].
    pub pivot_tol: f64,
    /// Diagonal shift `α`, as in [`PivotParams::diag_shift`]. Default 0.
    pub diag_shift: f64,
}

impl Default for IlutParams {
    fn default() -> Self {
        Self {
            fill: 20,
            drop_tol: 0.0,
            pivot_tol: DEFAULT_PIVOT_TOL,
            diag_shift: 0.0,
        }
    }
}

/// Parameters of the least-squares sparse approximate inverse [`Spai`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SpaiParams {
    /// After the least-squares solve, entries of column `j` of `M` smaller than
    /// `drop_tol · max_i |m_ij|` are removed (ParaSails' post-filtering). Default 0 (keep all).
    pub drop_tol: f64,
    /// Threads computing the columns (a rayon pool of this size is created for the
    /// construction when `> 1`). Default 1. Must be `>= 1`.
    pub threads: usize,
}

impl Default for SpaiParams {
    fn default() -> Self {
        Self {
            drop_tol: 0.0,
            threads: 1,
        }
    }
}

/// Which preconditioner to build (serde: internally tagged by `kind`, lowercase names,
/// parameters flattened and defaulted, e.g. `{"kind": "ilut", "fill": 20}`).
///
/// [`std::str::FromStr`] also accepts the short CLI forms `none`, `jacobi`, `ilu0`,
/// `ilu0(0.2)` (with diagonal shift α), `ilut`, `ilut(20,0)`, `ilut(20,1e-4)`,
/// `ilut(20,0,0.2)`, `spai` and `fsai`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum PrecondKind {
    /// No preconditioning (`M = I`).
    None,
    /// Diagonal scaling, [`Jacobi`].
    Jacobi(PivotParams),
    /// Incomplete LU with the pattern of `A`, [`Ilu0`].
    Ilu0(PivotParams),
    /// Dual-threshold incomplete LU, [`Ilut`].
    Ilut(IlutParams),
    /// Least-squares sparse approximate inverse on the pattern of `A`, [`Spai`].
    Spai(SpaiParams),
    /// Factorized sparse approximate inverse `GᵀG` (symmetric `A`), [`Fsai`].
    Fsai,
}

impl Default for PrecondKind {
    /// Jacobi with default parameters.
    fn default() -> Self {
        PrecondKind::Jacobi(PivotParams::default())
    }
}

impl PrecondKind {
    /// The lowercase name (`none|jacobi|ilu0|ilut|spai|fsai`).
    pub fn name(&self) -> &'static str {
        match self {
            PrecondKind::None => "none",
            PrecondKind::Jacobi(_) => "jacobi",
            PrecondKind::Ilu0(_) => "ilu0",
            PrecondKind::Ilut(_) => "ilut",
            PrecondKind::Spai(_) => "spai",
            PrecondKind::Fsai => "fsai",
        }
    }
}

impl std::fmt::Display for PrecondKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PrecondKind::Ilu0(p) if p.diag_shift != 0.0 => write!(f, "ilu0({})", p.diag_shift),
            PrecondKind::Ilut(p) if p.diag_shift != 0.0 => {
                write!(f, "ilut({},{},{})", p.fill, p.drop_tol, p.diag_shift)
            }
            PrecondKind::Ilut(p) => write!(f, "ilut({},{})", p.fill, p.drop_tol),
            k => f.write_str(k.name()),
        }
    }
}

/// Error of `PrecondKind::from_str`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown preconditioner {0:?} (expected none|jacobi|ilu0|ilu0(a)|ilut|ilut(p,tau[,a])|spai|fsai)")]
pub struct ParseKindError(pub String);

impl std::str::FromStr for PrecondKind {
    type Err = ParseKindError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim().to_ascii_lowercase();
        let err = || ParseKindError(s.to_string());
        Ok(match t.as_str() {
            "none" => PrecondKind::None,
            "jacobi" => PrecondKind::Jacobi(PivotParams::default()),
            "ilu0" => PrecondKind::Ilu0(PivotParams::default()),
            "ilut" => PrecondKind::Ilut(IlutParams::default()),
            "spai" => PrecondKind::Spai(SpaiParams::default()),
            "fsai" => PrecondKind::Fsai,
            _ => {
                if let Some(inner) = t.strip_prefix("ilu0(").and_then(|r| r.strip_suffix(')')) {
                    let diag_shift = inner.trim().parse::<f64>().map_err(|_| err())?;
                    return Ok(PrecondKind::Ilu0(PivotParams {
                        diag_shift,
                        ..PivotParams::default()
                    }));
                }
                let inner = t
                    .strip_prefix("ilut(")
                    .and_then(|r| r.strip_suffix(')'))
                    .ok_or_else(err)?;
                let parts: Vec<&str> = inner.split(',').map(str::trim).collect();
                if parts.len() != 2 && parts.len() != 3 {
                    return Err(err());
                }
                let fill = parts[0].parse::<usize>().map_err(|_| err())?;
                let drop_tol = parts[1].parse::<f64>().map_err(|_| err())?;
                let diag_shift = match parts.get(2) {
                    Some(a) => a.parse::<f64>().map_err(|_| err())?,
                    None => 0.0,
                };
                PrecondKind::Ilut(IlutParams {
                    fill,
                    drop_tol,
                    diag_shift,
                    ..IlutParams::default()
                })
            }
        })
    }
}

/// What [`build_with_info`] reports about the preconditioner it built.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrecondInfo {
    /// Lowercase kind name.
    pub kind: String,
    /// Stored nonzeros of the preconditioner (factors, inverse, or diagonal length).
    pub nnz: usize,
    /// Pivots replaced by the tiny-pivot rule (see the module docs).
    pub perturbed_pivots: usize,
}

/// A boxed preconditioner as returned by [`build`].
pub type BoxedPreconditioner = Box<dyn Preconditioner + Send + Sync>;

/// Builds the preconditioner `kind` for `A − shift·I`.
///
/// Every kind is constructed from scratch (see the module docs for the cheaper update
/// paths of the concrete types). `none` gives an [`IdentityPreconditioner`].
///
/// Symmetric `M` (needed by CG): `none`, `jacobi`, `ilu0` (symmetric `A`; SPD only with
/// positive pivots), `fsai` (SPD when `A − σI` is). `ilut` and `spai` are not symmetric:
/// use BiCGSTAB or GMRES with them.
///
/// # Errors
/// [`PrecondError::NotSquare`], [`PrecondError::NonFinite`] (entry of `A`),
/// [`PrecondError::NonFiniteShift`], [`PrecondError::ZeroPivot`],
/// [`PrecondError::FactorOverflow`], [`PrecondError::InvalidParameter`].
pub fn build(
    kind: &PrecondKind,
    a: &CsrMatrix,
    shift: f64,
) -> Result<BoxedPreconditioner, PrecondError> {
    build_with_info(kind, a, shift).map(|(m, _)| m)
}

/// Like [`build`], also returning a [`PrecondInfo`] (nonzeros, perturbed pivots).
///
/// # Errors
/// As [`build`].
pub fn build_with_info(
    kind: &PrecondKind,
    a: &CsrMatrix,
    shift: f64,
) -> Result<(BoxedPreconditioner, PrecondInfo), PrecondError> {
    let info = |nnz, perturbed_pivots| PrecondInfo {
        kind: kind.name().to_string(),
        nnz,
        perturbed_pivots,
    };
    Ok(match kind {
        PrecondKind::None => {
            check_square_finite(a, shift)?;
            (
                Box::new(IdentityPreconditioner { n: a.nrows() }),
                info(0, 0),
            )
        }
        PrecondKind::Jacobi(p) => {
            let m = Jacobi::new(a, shift, p)?;
            let i = info(m.nrows(), m.perturbed_pivots());
            (Box::new(m), i)
        }
        PrecondKind::Ilu0(p) => {
            let m = Ilu0::new(a, shift, p)?;
            let i = info(m.factors().nnz(), m.perturbed_pivots());
            (Box::new(m), i)
        }
        PrecondKind::Ilut(p) => {
            let m = Ilut::new(a, shift, p)?;
            let i = info(m.factors().nnz(), m.perturbed_pivots());
            (Box::new(m), i)
        }
        PrecondKind::Spai(p) => {
            let m = Spai::new(a, shift, p)?;
            let i = info(m.matrix().nnz(), 0);
            (Box::new(m), i)
        }
        PrecondKind::Fsai => {
            let m = Fsai::new(a, shift)?;
            let i = info(m.factor().nnz(), 0);
            (Box::new(m), i)
        }
    })
}

/// Checks that `a` is square with finite entries and that `shift` is finite.
pub(crate) fn check_square_finite(a: &CsrMatrix, shift: f64) -> Result<(), PrecondError> {
    if a.nrows() != a.ncols() {
        return Err(PrecondError::NotSquare {
            nrows: a.nrows(),
            ncols: a.ncols(),
        });
    }
    if !shift.is_finite() {
        return Err(PrecondError::NonFiniteShift { shift });
    }
    for i in 0..a.nrows() {
        let (cols, vals) = a.row(i);
        if let Some(p) = vals.iter().position(|v| !v.is_finite()) {
            return Err(PrecondError::NonFinite {
                row: i,
                col: cols[p] as usize,
            });
        }
    }
    Ok(())
}

/// Checks that a pivot tolerance is finite and non-negative.
pub(crate) fn check_pivot_tol(pivot_tol: f64) -> Result<(), PrecondError> {
    check_nonneg("pivot_tol", pivot_tol)
}

/// Checks that a parameter is finite and non-negative.
pub(crate) fn check_nonneg(name: &'static str, value: f64) -> Result<(), PrecondError> {
    if !(value.is_finite() && value >= 0.0) {
        return Err(PrecondError::InvalidParameter { name, value });
    }
    Ok(())
}

/// `A − shift·I` with every diagonal entry present in the pattern (inserted as
/// `−shift` where `A` stores none). Validates squareness and finiteness first.
pub(crate) fn shifted_with_diagonal(a: &CsrMatrix, shift: f64) -> Result<CsrMatrix, PrecondError> {
    check_square_finite(a, shift)?;
    let n = a.nrows();
    let mut indptr = Vec::with_capacity(n + 1);
    let mut indices = Vec::with_capacity(a.nnz() + n);
    let mut data = Vec::with_capacity(a.nnz() + n);
    indptr.push(0);
    for i in 0..n {
        let (cols, vals) = a.row(i);
        let mut placed = false;
        for (&c, &v) in cols.iter().zip(vals) {
            let c_us = c as usize;
            if !placed && c_us > i {
                indices.push(i as u32);
                data.push(-shift);
                placed = true;
            }
            if c_us == i {
                data.push(v - shift);
                placed = true;
            } else {
                data.push(v);
            }
            indices.push(c);
        }
        if !placed {
            indices.push(i as u32);
            data.push(-shift);
        }
        indptr.push(indices.len());
    }
    Ok(CsrMatrix::from_parts_unchecked(n, n, indptr, indices, data))
}

/// The tiny-pivot rule of the module docs: returns the (possibly replaced) pivot and
/// whether it was replaced.
///
/// # Errors
/// [`PrecondError::ZeroPivot`] if `row_norm == 0` or (`pivot_tol == 0` and `u == 0`).
pub(crate) fn guard_pivot(
    u: f64,
    row_norm: f64,
    pivot_tol: f64,
    row: usize,
) -> Result<(f64, bool), PrecondError> {
    if !u.is_finite() {
        return Err(PrecondError::FactorOverflow { row });
    }
    let thr = pivot_tol * row_norm;
    if u.abs() > thr && u != 0.0 {
        return Ok((u, false));
    }
    if thr == 0.0 {
        return Err(PrecondError::ZeroPivot { row });
    }
    Ok((if u < 0.0 { -thr } else { thr }, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_parses_and_serializes() {
        assert_eq!(
            "ilu0".parse::<PrecondKind>().unwrap(),
            PrecondKind::Ilu0(PivotParams::default())
        );
        let k: PrecondKind = "ILUT(10, 1e-3)".parse().unwrap();
        match k {
            PrecondKind::Ilut(p) => {
                assert_eq!(p.fill, 10);
                assert_eq!(p.drop_tol, 1e-3);
            }
            _ => panic!("wrong kind"),
        }
        assert!("ilu1".parse::<PrecondKind>().is_err());
        assert!("ilut(1,2,3,4)".parse::<PrecondKind>().is_err());
        assert_eq!(k.to_string(), "ilut(10,0.001)");
        let k: PrecondKind = "ilu0(0.2)".parse().unwrap();
        assert_eq!(
            k,
            PrecondKind::Ilu0(PivotParams {
                diag_shift: 0.2,
                ..PivotParams::default()
            })
        );
        assert_eq!(k.to_string(), "ilu0(0.2)");
        assert_eq!(
            "ilut(20,0,0.5)".parse::<PrecondKind>().unwrap().to_string(),
            "ilut(20,0,0.5)"
        );
        // serde: lowercase tag, defaulted parameters.
        let k: PrecondKind = serde_json::from_str(r#"{"kind":"ilut","fill":5}"#).unwrap();
        assert_eq!(
            k,
            PrecondKind::Ilut(IlutParams {
                fill: 5,
                ..IlutParams::default()
            })
        );
        let k: PrecondKind = serde_json::from_str(r#"{"kind":"none"}"#).unwrap();
        assert_eq!(k, PrecondKind::None);
        let d = serde_json::to_string(&PrecondKind::default()).unwrap();
        assert_eq!(
            serde_json::from_str::<PrecondKind>(&d).unwrap(),
            PrecondKind::default()
        );
    }

    #[test]
    fn shifted_inserts_missing_diagonal() {
        let a = CsrMatrix::from_triplets(3, 3, &[(0, 1, 2.0), (1, 1, 5.0), (2, 0, 1.0)]).unwrap();
        let s = shifted_with_diagonal(&a, 1.0).unwrap();
        assert_eq!(s.get(0, 0), -1.0);
        assert_eq!(s.get(0, 1), 2.0);
        assert_eq!(s.get(1, 1), 4.0);
        assert_eq!(s.get(2, 2), -1.0);
        assert_eq!(s.get(2, 0), 1.0);
        assert_eq!(s.nnz(), 5);
        assert_eq!(s.indices(), &[0, 1, 1, 0, 2]);
    }

    #[test]
    fn pivot_guard() {
        assert_eq!(guard_pivot(2.0, 1.0, 1e-8, 0).unwrap(), (2.0, false));
        assert_eq!(guard_pivot(0.0, 2.0, 0.5, 0).unwrap(), (1.0, true));
        assert_eq!(guard_pivot(-1e-20, 2.0, 0.5, 0).unwrap(), (-1.0, true));
        assert_eq!(
            guard_pivot(0.0, 0.0, 0.5, 3),
            Err(PrecondError::ZeroPivot { row: 3 })
        );
        assert_eq!(
            guard_pivot(0.0, 1.0, 0.0, 4),
            Err(PrecondError::ZeroPivot { row: 4 })
        );
    }
}
