//! Spectral transformations: shift-and-invert for interior eigenvalues
//! (SLEPc's `STSINVERT`, ARPACK's mode 3), for A x = λ x and K x = λ M x.
//!
//! **Standard problem.** The eigenvalues of A closest to σ are the largest in
//! magnitude of B = (A − σI)⁻¹, whose eigenvalues θ = 1/(λ − σ) share A's
//! eigenvectors and are well separated where A's are clustered around σ.
//! [`ShiftInvert`] factors A − σI once with a sparse direct method of faer and
//! applies B by two triangular solves; [`crate::Solver::shift_invert`] runs the block
//! Jacobi-Davidson solver on B ([`Target::LargestMagnitude`]) and maps the
//! pairs back: λ = σ + 1/θ, with the true residuals ‖Ax − λx‖ recomputed
//! with A.
//!
//! **Generalized problem** (M symmetric positive definite; SLEPc's STSINVERT
//! for `EPS_GHEP`, ARPACK's mode 3 with `bmat = 'G'`). [`ShiftInvert::pencil`]
//! factors K − σM. The operator (K − σM)⁻¹M is self-adjoint in the M inner
//! product; the solver, which takes symmetric operators, runs on the
//! equivalent symmetric-definite problem
//! M(K − σM)⁻¹M x = ν M x with the mass matrix M (its M-orthonormal basis,
//! [`crate::Problem::with_mass`]): one product applies M, solves with the
//! factors, applies M again. Its pairs are the pencil's, λ = σ + 1/ν
//! (M x = ν (K − σM) x), the vectors come out M-orthonormal, and the true
//! residuals ‖Kx − λMx‖ are recomputed with K and M.
//!
//! **Factorization.** LDLᵀ (faer's sparse Cholesky module, no pivoting; the
//! ordering, minimum degree or nested dissection, that leaves less fill),
//! accepted when a solve with it has a backward error
//! below [`BACKWARD_ERROR_LIMIT`]; else (a zero or unstable pivot of the
//! indefinite matrix) LU with partial pivoting. LDLᵀ gives the inertia: by
//! Sylvester's law the negative pivots of D count the eigenvalues of A (of the
//! pencil (K, M), M positive definite) below σ
//! ([`ShiftInvert::eigenvalues_below`], [`Stats::eigenvalues_below_shift`]).
//! A test solve with a backward error above [`REFINE_ABOVE`] gives every
//! solve a step of iterative refinement, kept only where one step measured
//! along the eigenvector nearest σ would change the product by more than
//! the tolerance allows ([`ShiftInvert::settle_refinement`]).
//!
//! **Several processes** ([`crate::Solver::shift_invert`] with [`crate::Solver::comm`] over the ranks of a
//! [`Comm`]). The eigensolver runs fine grain (vectors split by rows, as
//! [`crate::Solver::comm`]); the factorization is **not distributed**: rank 0
//! factors the whole K − σM (every process passes the same global matrices,
//! as with `Solver::comm`, so no rows move), and every product with the
//! inverse gathers the block's rows to rank 0 ([`Comm::gather_v`]), solves
//! there and scatters the result back ([`Comm::scatter_v`]). Per product of
//! a block of k vectors that is 2·n·k values through rank 0 plus the
//! triangular solves on one process; the factors' memory is on rank 0 alone.
//! Robust and simple for moderate n (the factors fit one node); SLEPc with
//! MUMPS or SuperLU_DIST would distribute the factorization itself.

use crate::params::{CorrectionSettings, PrecondSettings, ProblemSettings};
use std::ops::Range;
use std::time::Instant;

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::ldlt::factor::LdltRegularization;
use faer::linalg::solvers::SolveCore;
use faer::sparse::linalg::cholesky::{
    factorize_symbolic_cholesky, supernodal, LdltRef, SymbolicCholesky, SymbolicCholeskyRaw,
    SymmetricOrdering,
};
use faer::sparse::linalg::solvers::Lu;
use faer::sparse::{SparseColMatRef, SymbolicSparseColMatRef};
use faer::{Conj, MatMut, Par, Side};
use lblib::{Comm, ReduceOp};
use matrices::partition::RowPartition;
use matrices::CsrMatrix;
use precond::dist::DistOptions;
use precond::preconditioners::Jacobi;
use precond::Operator;
use serde::{Deserialize, Serialize};

use crate::checkpoint::CheckpointSink;
use crate::error::JdError;
use crate::jd::{local_rows, run_loop, solved, Hooks, Observer, Problem, Spaces};
use crate::lanczos::LanczosParams;
use crate::params::{ConvTest, Extraction, JdParams, PrecondChoice, SliceMethod, Target};
use crate::setup::{rows, Rows, RowsSpec};
use crate::solution::{IterationEvent, Outcome, Solution, Stats};

mod near;
use near::{NearPairs, NearSearch};

/// Largest backward error ‖Cz − b‖∞ / (‖C‖∞‖z‖∞ + ‖b‖∞) of a test solve with
/// the LDLᵀ factors of C (A − σI or K − σM); above it (an unstable pivot:
/// LDLᵀ does not pivot) LU with partial pivoting is used instead.
pub const BACKWARD_ERROR_LIMIT: f64 = 1e-10;

/// The sparse direct factorization of A − σI (or K − σM) behind a [`ShiftInvert`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FactorKind {
    /// LDLᵀ (symmetric, no pivoting; gives the inertia).
    Ldlt,
    /// LU with partial pivoting.
    Lu,
}

enum Factor {
    Ldlt {
        symbolic: SymbolicCholesky<usize>,
        values: Vec<f64>,
    },
    Lu(Lu<usize, f64>),
}

/// (A − σI)⁻¹ or (K − σM)⁻¹ as an [`Operator`], from a sparse direct
/// factorization (see the module documentation).
pub struct ShiftInvert {
    n: usize,
    sigma: f64,
    factor: Factor,
    below: Option<usize>,
    par: Par,
    /// C and its diagonal shift for one step of iterative refinement in every
    /// solve, when the test solve's backward error exceeds [`REFINE_ABOVE`]
    /// (and [`ShiftInvert::settle_refinement`] keeps it).
    refine: Option<(CsrMatrix, f64)>,
}

/// Power steps of [`ShiftInvert::settle_refinement`] towards the eigenvector
/// nearest the shift.
const NORM_STEPS: usize = 6;

/// A test solve with a larger backward error than this (growth in the
/// pivots of an indefinite C) makes every solve take one step of iterative
/// refinement (Higham, *Accuracy and Stability of Numerical Algorithms*,
/// §12.1): one product with C and one more solve. Without it the errors of
/// the products with (A − σI)⁻¹, of the order of the backward error times
/// the condition of A − σI, bound the residuals the eigensolver can reach
/// (lap3d:20, σ = 0.375, 7.7e-4 from an eigenvalue: backward error 3.4e-13,
/// B's residuals stalled above tol = 1e-8 in 4 000 iterations).
pub const REFINE_ABOVE: f64 = 64.0 * f64::EPSILON;

impl std::fmt::Debug for ShiftInvert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShiftInvert")
            .field("n", &self.n)
            .field("sigma", &self.sigma)
            .field("kind", &self.kind())
            .field("below", &self.below)
            .finish()
    }
}

/// The lower triangle (with the diagonal, shifted by −`shift`) or the whole of
/// C − shift·I as CSC arrays: for a symmetric C the rows of the CSR matrix are
/// its columns.
fn shifted_csc(a: &CsrMatrix, shift: f64, lower: bool) -> (Vec<usize>, Vec<usize>, Vec<f64>) {
    let n = a.nrows();
    let mut ptr = Vec::with_capacity(n + 1);
    let mut idx = Vec::with_capacity(a.nnz() + n);
    let mut val = Vec::with_capacity(a.nnz() + n);
    ptr.push(0);
    for j in 0..n {
        let (cols, vals) = a.row(j);
        let mut diag_done = false;
        for (&i, &v) in cols.iter().zip(vals) {
            let i = i as usize;
            if lower && i < j {
                continue;
            }
            if !diag_done && i >= j {
                if i == j {
                    idx.push(j);
                    val.push(v - shift);
                    diag_done = true;
                    continue;
                }
                idx.push(j);
                val.push(-shift);
                diag_done = true;
            }
            idx.push(i);
            val.push(v);
        }
        if !diag_done {
            idx.push(j);
            val.push(-shift);
        }
        ptr.push(idx.len());
    }
    (ptr, idx, val)
}

/// ‖(C − shift·I)z − b‖∞ / (‖C − shift·I‖∞‖z‖∞ + ‖b‖∞) for the solution z of
/// one solve.
fn backward_error(a: &CsrMatrix, shift: f64, b: &[f64], z: &[f64]) -> f64 {
    let n = a.nrows();
    let mut az = vec![0.0; n];
    a.mul_vec(z, &mut az);
    let norm_a = norm1(a) + shift.abs();
    let inf = |v: &[f64]| v.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let r: Vec<f64> = (0..n).map(|i| az[i] - shift * z[i] - b[i]).collect();
    let den = norm_a * inf(z) + inf(b);
    if den.is_nan() || den <= 0.0 {
        return if inf(&r) == 0.0 { 0.0 } else { f64::INFINITY };
    }
    let e = inf(&r) / den;
    if e.is_nan() {
        f64::INFINITY
    } else {
        e
    }
}

/// `InvalidParams` for a non-square or empty matrix, a mass matrix of another
/// size or a non-finite σ; `NonFinite` for a NaN/Inf entry. The checks every
/// process makes before rank 0 factors.
fn check_input(k: &CsrMatrix, m: Option<&CsrMatrix>, sigma: f64) -> Result<(), JdError> {
    let n = k.nrows();
    if n != k.ncols() || n == 0 {
        return Err(JdError::invalid(
            "matrix",
            format!(
                "shift-and-invert needs a square, non-empty matrix, got {} x {}",
                k.nrows(),
                k.ncols()
            ),
        ));
    }
    if let Some(m) = m {
        if m.nrows() != n || m.ncols() != n {
            return Err(JdError::invalid(
                "mass",
                format!(
                    "M is {} x {}, K is {n} x {n}: they must have the same size",
                    m.nrows(),
                    m.ncols()
                ),
            ));
        }
        if m.data().iter().any(|v| !v.is_finite()) {
            return Err(JdError::NonFinite("mass matrix"));
        }
    }
    if !sigma.is_finite() {
        return Err(JdError::invalid(
            "target",
            format!("the shift σ must be finite, got {sigma}"),
        ));
    }
    if k.data().iter().any(|v| !v.is_finite()) {
        return Err(JdError::NonFinite("matrix"));
    }
    Ok(())
}

impl ShiftInvert {
    /// Factors A − σI (LDLᵀ, else LU; see the module documentation) with
    /// `threads` threads.
    ///
    /// # Errors
    /// `InvalidParams` for a non-square matrix or a non-finite σ; `NonFinite`
    /// for a NaN/Inf entry; `Factorization` when both factorizations fail
    /// (A − σI singular: σ is an eigenvalue to working precision) or run out
    /// of memory.
    pub fn new(a: &CsrMatrix, sigma: f64, threads: usize) -> Result<Self, JdError> {
        Self::pencil_or(a, None, sigma, None, threads)
    }

    /// Factors A − σI with the factorization `kind` only (LDLᵀ refused when its
    /// backward error exceeds [`BACKWARD_ERROR_LIMIT`]).
    ///
    /// # Errors
    /// As [`ShiftInvert::new`], for this factorization.
    pub fn with_kind(
        a: &CsrMatrix,
        sigma: f64,
        kind: FactorKind,
        threads: usize,
    ) -> Result<Self, JdError> {
        Self::pencil_or(a, None, sigma, Some(kind), threads)
    }

    /// Factors K − σM (LDLᵀ, else LU) for the generalized problem
    /// K x = λ M x: the operator is then (K − σM)⁻¹, and with LDLᵀ
    /// [`ShiftInvert::eigenvalues_below`] counts the pencil's eigenvalues
    /// below σ (Sylvester's law of inertia, M positive definite). The
    /// symmetric operator of the solve is M(K − σM)⁻¹M (module documentation).
    ///
    /// # Errors
    /// As [`ShiftInvert::new`]; `InvalidParams` when M's size differs from K's.
    pub fn pencil(
        k: &CsrMatrix,
        m: &CsrMatrix,
        sigma: f64,
        threads: usize,
    ) -> Result<Self, JdError> {
        Self::pencil_or(k, Some(m), sigma, None, threads)
    }

    /// [`ShiftInvert::pencil`] with the factorization `kind` only.
    ///
    /// # Errors
    /// As [`ShiftInvert::pencil`], for this factorization.
    pub fn pencil_with_kind(
        k: &CsrMatrix,
        m: &CsrMatrix,
        sigma: f64,
        kind: FactorKind,
        threads: usize,
    ) -> Result<Self, JdError> {
        Self::pencil_or(k, Some(m), sigma, Some(kind), threads)
    }

    /// K − σM (M = I when `m` is None) by `kind`, or LDLᵀ then LU.
    fn pencil_or(
        k: &CsrMatrix,
        m: Option<&CsrMatrix>,
        sigma: f64,
        kind: Option<FactorKind>,
        threads: usize,
    ) -> Result<Self, JdError> {
        check_input(k, m, sigma)?;
        // C and the shift of its diagonal: (A, σ), or (K − σM, 0).
        let shifted;
        let (c, shift, what) = match m {
            None => (k, sigma, "A − σI"),
            Some(m) => {
                shifted = crate::setup::shifted_pair(k, m, sigma)?;
                (&shifted, 0.0, "K − σM")
            }
        };
        match kind {
            Some(kind) => Self::factor(c, shift, sigma, what, kind, threads),
            None => match Self::factor(c, shift, sigma, what, FactorKind::Ldlt, threads) {
                Ok(s) => Ok(s),
                Err(JdError::Factorization(_)) => {
                    Self::factor(c, shift, sigma, what, FactorKind::Lu, threads)
                }
                Err(e) => Err(e),
            },
        }
    }

    /// Factors C − shift·I by `kind` (`what` names it in errors; `sigma` is
    /// the shift reported), then checks a test solve.
    fn factor(
        a: &CsrMatrix,
        shift: f64,
        sigma: f64,
        what: &str,
        kind: FactorKind,
        threads: usize,
    ) -> Result<Self, JdError> {
        let n = a.nrows();
        let par = if threads > 1 {
            Par::rayon(threads)
        } else {
            Par::Seq
        };
        let fail = |how: &str, e: &dyn std::fmt::Display| {
            JdError::Factorization(format!("{how} of {what} (σ = {sigma}): {e}"))
        };
        let (factor, below) = match kind {
            FactorKind::Ldlt => {
                let (ptr, idx, val) = shifted_csc(a, shift, true);
                let sym = SymbolicSparseColMatRef::new_checked(n, n, &ptr, None, &idx);
                let mat = SparseColMatRef::new(sym, &val);
                let symbolic =
                    symbolic_ldlt(a, sym).map_err(|e| fail("symbolic LDLᵀ", &format!("{e:?}")))?;
                let mut values = vec![0.0; symbolic.len_val()];
                let mut mem = MemBuffer::try_new(
                    symbolic.factorize_numeric_ldlt_scratch::<f64>(par, Default::default()),
                )
                .map_err(|e| fail("LDLᵀ", &format!("{e:?}")))?;
                symbolic
                    .factorize_numeric_ldlt(
                        &mut values,
                        mat,
                        Side::Lower,
                        LdltRegularization::default(),
                        par,
                        MemStack::new(&mut mem),
                        Default::default(),
                    )
                    .map_err(|e| fail("LDLᵀ", &e))?;
                let d = ldlt_pivots(&symbolic, &values);
                if d.iter().any(|p| *p == 0.0 || !p.is_finite()) {
                    return Err(fail("LDLᵀ", &"a zero or non-finite pivot"));
                }
                let below = d.iter().filter(|p| **p < 0.0).count();
                (Factor::Ldlt { symbolic, values }, Some(below))
            }
            FactorKind::Lu => {
                let (ptr, idx, val) = shifted_csc(a, shift, false);
                let sym = SymbolicSparseColMatRef::new_checked(n, n, &ptr, None, &idx);
                let mat = SparseColMatRef::new(sym, &val);
                let lu = mat.sp_lu().map_err(|e| fail("LU", &format!("{e:?}")))?;
                (Factor::Lu(lu), None)
            }
        };
        let mut st = Self {
            n,
            sigma,
            factor,
            below,
            par,
            refine: None,
        };
        // A test solve: b = (C − shift·I)·x for a fixed x, then the backward error.
        let x: Vec<f64> = (0..n).map(|i| ((i + 1) as f64).sin()).collect();
        let mut b = vec![0.0; n];
        a.mul_vec(&x, &mut b);
        b.iter_mut().zip(&x).for_each(|(b, x)| *b -= shift * x);
        let mut z = vec![0.0; n];
        st.apply_block(&b, &mut z, 1);
        let err = backward_error(a, shift, &b, &z);
        if kind == FactorKind::Ldlt && (err.is_nan() || err > BACKWARD_ERROR_LIMIT) {
            return Err(fail(
                "LDLᵀ",
                &format!("backward error {err:.1e} (an unstable pivot)"),
            ));
        }
        if z.iter().any(|v| !v.is_finite()) {
            return Err(fail(
                "LU",
                &format!("{what} is singular to working precision"),
            ));
        }
        if err > REFINE_ABOVE {
            st.refine = Some((a.clone(), shift));
        }
        Ok(st)
    }

    /// Drops the refinement step of every solve where the products are
    /// accurate enough without it for B's pairs to reach the relative
    /// residual `tol`. The error of a product is the rounding of the solve
    /// amplified by C⁻¹, most along the eigenvector of the eigenvalue nearest
    /// the shift; six power steps (single solves) turn a start
    /// vector towards it, and one refinement step on that vector measures the
    /// error: the step stays when the correction exceeds tol/16 of the
    /// solution (Higham, *Accuracy and Stability of Numerical Algorithms*,
    /// §12.1). A refinement step halves the speed of every product; the pairs'
    /// residuals are tested on the true problem whichever way.
    pub fn settle_refinement(&mut self, tol: f64) {
        let Some((c, shift)) = self.refine.take() else {
            return;
        };
        let n = self.n;
        let mut x: Vec<f64> = (0..n).map(|i| ((i as f64) * 0.7 + 0.3).sin()).collect();
        let mut y = vec![0.0; n];
        for _ in 0..NORM_STEPS {
            let norm = crate::dense::dot(&x, &x).sqrt();
            if !(norm > 0.0 && norm.is_finite()) {
                break;
            }
            x.iter_mut().for_each(|v| *v /= norm);
            self.apply_block(&x, &mut y, 1);
            std::mem::swap(&mut x, &mut y);
        }
        // x = C⁻¹ y now: its residual y − (C − shift·I)x, and the correction
        let mut r = vec![0.0; n];
        c.mul_vec(&x, &mut r);
        r.iter_mut()
            .zip(&x)
            .zip(&y)
            .for_each(|((r, x), y)| *r = y - (*r - shift * x));
        let mut d = vec![0.0; n];
        self.apply_block(&r, &mut d, 1);
        let change = (crate::dense::dot(&d, &d) / crate::dense::dot(&x, &x)).sqrt();
        if !(change.is_finite() && change <= tol / 16.0) {
            self.refine = Some((c, shift));
        }
    }

    /// Whether every solve takes a step of iterative refinement.
    pub fn refines(&self) -> bool {
        self.refine.is_some()
    }

    /// The shift σ.
    pub fn sigma(&self) -> f64 {
        self.sigma
    }

    /// The factorization used.
    pub fn kind(&self) -> FactorKind {
        match self.factor {
            Factor::Ldlt { .. } => FactorKind::Ldlt,
            Factor::Lu(_) => FactorKind::Lu,
        }
    }

    /// The number of eigenvalues of A (of the pencil (K, M)) below σ (the
    /// negative pivots of the LDLᵀ factorization); None with LU.
    pub fn eigenvalues_below(&self) -> Option<usize> {
        self.below
    }
}

/// Bytes the LDLᵀ factorization of K − σM (A − σI without M) will hold, from
/// its symbolic factorization (the ordering of `symbolic_ldlt`; the pattern
/// does not depend on σ): the factor's values and the numeric step's
/// scratch (lap3d:40: 0.2 s for the estimate, both orderings tried, against
/// 0.4 s for the numeric factorization).
/// For a memory check before the factorization. None when the symbolic
/// factorization fails or the sizes differ.
pub fn factor_bytes(k: &CsrMatrix, mass: Option<&CsrMatrix>) -> Option<u64> {
    let n = k.nrows();
    let pattern;
    let c = match mass {
        None => k,
        Some(m) => {
            pattern = crate::setup::shifted_pair(k, m, 1.0).ok()?;
            &pattern
        }
    };
    let (ptr, idx, _) = shifted_csc(c, 1.0, true);
    let sym = SymbolicSparseColMatRef::new_checked(n, n, &ptr, None, &idx);
    let symbolic = symbolic_ldlt(c, sym).ok()?;
    let values = symbolic.len_val() as u64;
    let scratch = symbolic
        .factorize_numeric_ldlt_scratch::<f64>(Par::Seq, Default::default())
        .unaligned_bytes_required() as u64;
    Some(values.saturating_mul(8).saturating_add(scratch))
}

/// Rows of the parts that nested dissection leaves unsplit.
const DISSECTION_LEAF: usize = 64;

/// The symbolic LDLᵀ factorization of `sym`, the lower triangle of `a`'s
/// pattern with its diagonal, under whichever of two orderings leaves fewer
/// entries in L: approximate minimum degree or nested dissection
/// ([`matrices::ordering::nested_dissection`]). Nested dissection wins on
/// 3-D grids (lap3d:30: 5.4 M entries against 7.6 M, the numeric
/// factorization 2× and a solve 1.35× faster; lap3d:40: 17.7 M against
/// 26.5 M), minimum degree on 2-D grids and wide stencils (stencil27:30:
/// 18.0 M against 19.6 M). Both symbolic steps together cost a tenth of a
/// numeric one.
///
/// # Errors
/// faer's, when neither symbolic factorization succeeds.
fn symbolic_ldlt(
    a: &CsrMatrix,
    sym: SymbolicSparseColMatRef<'_, usize>,
) -> Result<SymbolicCholesky<usize>, faer::sparse::FaerError> {
    let amd =
        factorize_symbolic_cholesky(sym, Side::Lower, SymmetricOrdering::Amd, Default::default());
    let n = a.nrows();
    let order = matrices::ordering::nested_dissection(a, DISSECTION_LEAF);
    let mut inverse = vec![0; n];
    order.iter().enumerate().for_each(|(k, &v)| inverse[v] = k);
    let perm = faer::perm::PermRef::new_checked(&order, &inverse, n);
    let nd = factorize_symbolic_cholesky(
        sym,
        Side::Lower,
        SymmetricOrdering::Custom(perm),
        Default::default(),
    );
    match (amd, nd) {
        (Ok(amd), Ok(nd)) => Ok(if nd.len_val() < amd.len_val() {
            nd
        } else {
            amd
        }),
        (Ok(f), Err(_)) | (Err(_), Ok(f)) => Ok(f),
        (Err(e), Err(_)) => Err(e),
    }
}

/// The diagonal D of LDLᵀ factors (in the factorization's order).
fn ldlt_pivots(symbolic: &SymbolicCholesky<usize>, values: &[f64]) -> Vec<f64> {
    match symbolic.raw() {
        SymbolicCholeskyRaw::Simplicial(s) => {
            // Column j of L starts with its diagonal entry, which holds d_j.
            let ptr = s.col_ptr();
            (0..s.nrows()).map(|j| values[ptr[j]]).collect()
        }
        SymbolicCholeskyRaw::Supernodal(s) => {
            let f = supernodal::SupernodalLdltRef::new(s, values);
            let mut d = Vec::with_capacity(s.nrows());
            for k in 0..s.n_supernodes() {
                let v = f.supernode(k).val();
                d.extend((0..v.ncols()).map(|i| v[(i, i)]));
            }
            d
        }
    }
}

impl Operator for ShiftInvert {
    fn nrows(&self) -> usize {
        self.n
    }

    /// y = (A − σI)⁻¹ x (or (K − σM)⁻¹ x) for the k columns, by the factors.
    fn apply_block(&self, x: &[f64], y: &mut [f64], k: usize) {
        let n = self.n;
        y[..n * k].copy_from_slice(&x[..n * k]);
        self.solve_in_place(&mut y[..n * k], k);
        if let Some((c, shift)) = &self.refine {
            // r = x − (C − shift·I) y, then y += (C − shift·I)⁻¹ r
            let mut r = vec![0.0; n * k];
            for j in 0..k {
                let col = j * n..(j + 1) * n;
                c.mul_vec(&y[col.clone()], &mut r[col.clone()]);
                for i in col {
                    r[i] = x[i] - (r[i] - shift * y[i]);
                }
            }
            self.solve_in_place(&mut r, k);
            y[..n * k].iter_mut().zip(&r).for_each(|(y, d)| *y += d);
        }
    }
}

impl ShiftInvert {
    /// y ← C⁻¹ y for the k columns, by the factors.
    fn solve_in_place(&self, y: &mut [f64], k: usize) {
        let n = self.n;
        let rhs = MatMut::from_column_major_slice_mut(&mut y[..n * k], n, k);
        match &self.factor {
            Factor::Ldlt { symbolic, values } => {
                let mut mem = MemBuffer::new(symbolic.solve_in_place_scratch::<f64>(k, self.par));
                LdltRef::new(symbolic, values).solve_in_place_with_conj(
                    Conj::No,
                    rhs,
                    self.par,
                    MemStack::new(&mut mem),
                );
            }
            Factor::Lu(lu) => lu.solve_in_place_with_conj(Conj::No, rhs),
        }
    }
}

/// The inverse of the factors on rank 0 applied to blocks whose rows are
/// distributed over `comm` (rank r holds `counts[r]` consecutive rows): the
/// block is gathered on rank 0, solved there and scattered back (module
/// documentation). On one process, the solve itself.
struct RootSolve<'a, C: ?Sized> {
    /// The factors (rank 0 only).
    inv: Option<&'a ShiftInvert>,
    comm: &'a C,
    /// Rows of every rank, and their first global row.
    counts: Vec<usize>,
    offsets: Vec<usize>,
}

impl<C: Comm + ?Sized> Operator for RootSolve<'_, C> {
    fn nrows(&self) -> usize {
        self.counts[self.comm.rank()]
    }

    /// y = C⁻¹ x, collective over `comm` (a gather to and a scatter from rank 0).
    fn apply_block(&self, x: &[f64], y: &mut [f64], k: usize) {
        let nl = self.nrows();
        let (x, y) = (&x[..nl * k], &mut y[..nl * k]);
        if self.comm.size() == 1 {
            if let Some(inv) = self.inv {
                inv.apply_block(x, y, k);
            }
            return;
        }
        // rank r's piece: its counts[r] × k column-major block
        let sizes: Vec<usize> = self.counts.iter().map(|c| c * k).collect();
        match self.inv {
            Some(inv) => {
                let n = inv.n;
                let mut packed = vec![0.0; n * k];
                self.comm.gather_v(x, &sizes, &mut packed, 0);
                let mut global = vec![0.0; n * k];
                let mut sol = vec![0.0; n * k];
                for (&c, &o) in self.counts.iter().zip(&self.offsets) {
                    for j in 0..k {
                        global[j * n + o..j * n + o + c]
                            .copy_from_slice(&packed[o * k + j * c..o * k + (j + 1) * c]);
                    }
                }
                inv.apply_block(&global, &mut sol, k);
                for (&c, &o) in self.counts.iter().zip(&self.offsets) {
                    for j in 0..k {
                        packed[o * k + j * c..o * k + (j + 1) * c]
                            .copy_from_slice(&sol[j * n + o..j * n + o + c]);
                    }
                }
                self.comm.scatter_v(&packed, &sizes, y, 0);
            }
            None => {
                self.comm.gather_v(x, &sizes, &mut [], 0);
                self.comm.scatter_v(&[], &sizes, y, 0);
            }
        }
    }
}

/// M C⁻¹ M: the symmetric operator of the generalized shift-and-invert
/// (module documentation); without M, C⁻¹.
struct Sandwich<'a> {
    inv: &'a dyn Operator,
    mass: Option<&'a dyn Operator>,
}

impl Operator for Sandwich<'_> {
    fn nrows(&self) -> usize {
        self.inv.nrows()
    }

    fn apply_block(&self, x: &[f64], y: &mut [f64], k: usize) {
        match self.mass {
            None => self.inv.apply_block(x, y, k),
            Some(m) => {
                let nk = self.nrows() * k;
                let mut t = vec![0.0; nk];
                m.apply_block(x, &mut t, k);
                let mut u = vec![0.0; nk];
                self.inv.apply_block(&t, &mut u, k);
                m.apply_block(&u, y, k);
            }
        }
    }
}

/// Pseudo-inverse of the symmetric k×k `s` (column-major) by its
/// eigendecomposition, dropping eigenvalues below 1e-12 of the largest (a
/// rank-deficient block of deflation vectors); None when `s` holds NaN/Inf.
fn sym_pinv(s: &[f64], k: usize) -> Option<Vec<f64>> {
    let (w, q) = crate::dense::sym_eig(s, k)?;
    let wmax = w.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    let mut out = vec![0.0; k * k];
    for (l, &v) in w.iter().enumerate() {
        if v.abs() <= 1e-12 * wmax {
            continue;
        }
        let ql = &q[l * k..(l + 1) * k];
        for j in 0..k {
            for i in 0..k {
                out[j * k + i] += ql[i] * ql[j] / v;
            }
        }
    }
    Some(out)
}

/// `c = Xᵀ Y` for local row blocks X (nl×a) and Y (nl×b), summed over the
/// processes: a×b, column-major. Collective.
fn cross<C: Comm + ?Sized>(
    x: &[f64],
    a: usize,
    y: &[f64],
    b: usize,
    nl: usize,
    comm: &C,
) -> Vec<f64> {
    let mut c = vec![0.0; a * b];
    for j in 0..b {
        for i in 0..a {
            c[j * a + i] = crate::dense::dot(&x[i * nl..(i + 1) * nl], &y[j * nl..(j + 1) * nl]);
        }
    }
    comm.all_reduce(&mut c, ReduceOp::Sum);
    c
}

/// `y −= X·c` for a local row block X (nl×a) and c (a×b).
fn sub_times(y: &mut [f64], x: &[f64], a: usize, c: &[f64], b: usize, nl: usize) {
    for j in 0..b {
        let yj = &mut y[j * nl..(j + 1) * nl];
        for i in 0..a {
            crate::dense::axpy(-c[j * a + i], &x[i * nl..(i + 1) * nl], yj);
        }
    }
}

/// Deflation vectors Y of a shift-and-invert solve (this process's rows) and
/// U = M·Y (Y without M): the problem is restricted to {x : Uᵀx = 0}, i.e.
/// YᵀMx = 0, with the Galerkin condition (I − U(YᵀU)⁻¹Yᵀ)(K − λM)x = 0 —
/// the problem the Jacobi-Davidson loop solves with deflation vectors, for
/// any Y (an invariant subspace or not).
struct DeflationSpace {
    y: Vec<f64>,
    u: Vec<f64>,
    k: usize,
    nl: usize,
    /// (YᵀU)⁻¹.
    g_inv: Vec<f64>,
}

impl DeflationSpace {
    /// From the local rows of Y (`nl` rows, `y.len()/nl` columns) and M's rows.
    /// Collective.
    ///
    /// # Errors
    /// `NonFinite` for NaN/Inf in YᵀMY.
    fn new<C: Comm + ?Sized>(
        y: &[f64],
        nl: usize,
        m: Option<&dyn Operator>,
        comm: &C,
    ) -> Result<Self, JdError> {
        let k = y.len().checked_div(nl).unwrap_or(0);
        let u = match m {
            Some(m) => {
                let mut u = vec![0.0; nl * k];
                m.apply_block(y, &mut u, k);
                u
            }
            None => y.to_vec(),
        };
        let g = cross(y, k, &u, k, nl, comm);
        let g_inv = sym_pinv(&g, k).ok_or(JdError::NonFinite("the deflation vectors' YᵀMY"))?;
        Ok(Self {
            y: y.to_vec(),
            u,
            k,
            nl,
            g_inv,
        })
    }

    /// `r ← (I − U(YᵀU)⁻¹Yᵀ) r` for `p` local columns. Collective.
    fn project<C: Comm + ?Sized>(&self, r: &mut [f64], p: usize, comm: &C) {
        let c = cross(&self.y, self.k, r, p, self.nl, comm);
        let mut d = vec![0.0; self.k * p];
        crate::tall_skinny::gemm_nn(&mut d, &self.g_inv, self.k, self.k, &c, p, 1);
        sub_times(r, &self.u, self.k, &d, p, self.nl);
    }
}

/// The inverse of (K − σM) restricted to {x : Uᵀx = 0} ([`DeflationSpace`]):
/// y = F b − Z S⁻¹ Uᵀ F b with F = (K − σM)⁻¹, Z = F U and S = UᵀZ, which
/// solves (K − σM) y = b − U c with Uᵀy = 0 (a bordered system by its Schur
/// complement; symmetric as F is). Its eigenpairs (with M) on that space are
/// those of the deflated pencil, shifted and inverted. One solve with F and
/// one global sum per block, after k solves to set up.
struct DeflatedInverse<'a, C: ?Sized> {
    inv: &'a dyn Operator,
    u: &'a [f64],
    z: Vec<f64>,
    s_inv: Vec<f64>,
    k: usize,
    comm: &'a C,
}

impl<'a, C: Comm + ?Sized> DeflatedInverse<'a, C> {
    /// Z = F U and S⁻¹ (pseudo-inverse). Collective.
    ///
    /// # Errors
    /// `NonFinite` for NaN/Inf in UᵀFU.
    fn new(inv: &'a dyn Operator, space: &'a DeflationSpace, comm: &'a C) -> Result<Self, JdError> {
        let (k, nl) = (space.k, space.nl);
        let mut z = vec![0.0; nl * k];
        inv.apply_block(&space.u, &mut z, k);
        let s = cross(&space.u, k, &z, k, nl, comm);
        let s_inv = sym_pinv(&s, k).ok_or(JdError::NonFinite("Uᵀ(K − σM)⁻¹U of the deflation"))?;
        Ok(Self {
            inv,
            u: &space.u,
            z,
            s_inv,
            k,
            comm,
        })
    }
}

impl<C: Comm + ?Sized> Operator for DeflatedInverse<'_, C> {
    fn nrows(&self) -> usize {
        self.inv.nrows()
    }

    /// Collective (the solve, and one global sum).
    fn apply_block(&self, x: &[f64], y: &mut [f64], b: usize) {
        let nl = self.nrows();
        self.inv.apply_block(x, y, b);
        let c = cross(self.u, self.k, &y[..nl * b], b, nl, self.comm);
        let mut d = vec![0.0; self.k * b];
        crate::tall_skinny::gemm_nn(&mut d, &self.s_inv, self.k, self.k, &c, b, 1);
        sub_times(&mut y[..nl * b], &self.z, self.k, &d, b, nl);
    }
}

/// Shift-and-invert for A x = λ x (`mass` None) or K x = λ M x over the
/// processes of `comm` (one process with `SelfComm`): the solve behind
/// [`crate::Solver::shift_invert`], whose documentation says what it takes and
/// returns. Every process passes the same global matrices and the same
/// `spaces`, and keeps its rows (balanced by K's nonzeros). Rank 0 factors
/// K − σM with `params.threads` threads and solves for every process (module
/// documentation). The solver loop runs on B with `hooks` (the observer sees
/// the Ritz values mapped back, σ + 1/θ; checkpoints hold the state on B).
/// Collective.
///
/// # Errors
/// `InvalidParams` (a non-square matrix, M of another size, a non-finite σ,
/// bad spaces, inconsistent parameters), `NotSymmetric`,
/// `MassNotPositiveDefinite`, `NonFinite` — on every process alike;
/// `Factorization` when rank 0 cannot factor (on every process, with rank
/// 0's message); as [`crate::Solver::run`] for the solve.
pub(crate) fn run<C: Comm + ?Sized>(
    k: &CsrMatrix,
    mass: Option<&CsrMatrix>,
    sigma: f64,
    comm: &C,
    params: &JdParams,
    spaces: Spaces<'_>,
    hooks: Hooks<'_>,
) -> Result<Solution, JdError> {
    run_with(
        k,
        mass,
        sigma,
        comm,
        params,
        spaces,
        hooks,
        SliceMethod::Davidson,
    )
}

/// [`run_scaled`] on a pencil whose M has a norm far from 1 (outside the
/// internal scaling's range, e.g. M × 1e-300): M is multiplied by the power of
/// two that brings ‖M‖₁ near 1 (exactly, no rounding), σ divided by it, and
/// the result mapped back: λ = c·λ' and X = √c·X' (M-orthonormal for the
/// user's M); the residuals ‖Kx − λMx‖/‖x‖ do not change.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_with<C: Comm + ?Sized>(
    k: &CsrMatrix,
    mass: Option<&CsrMatrix>,
    sigma: f64,
    comm: &C,
    params: &JdParams,
    spaces: Spaces<'_>,
    hooks: Hooks<'_>,
    method: SliceMethod,
) -> Result<Solution, JdError> {
    let c = mass.map_or(1.0, |m| crate::scaling::scale_for(norm1(m)));
    let (Some(m), false) = (mass, c == 1.0) else {
        return run_scaled(k, mass, sigma, comm, params, spaces, hooks, method);
    };
    let mut ms = m.clone();
    ms.data_mut().iter_mut().for_each(|v| *v *= c);
    let back = |mut s: Solution| {
        s.eigenvalues.iter_mut().for_each(|l| *l *= c);
        let f = c.sqrt();
        s.eigenvectors.iter_mut().for_each(|x| *x *= f);
        s
    };
    let r = run_scaled(k, Some(&ms), sigma / c, comm, params, spaces, hooks, method);
    r.map(back)
}

/// The checks of a shift-and-invert solve's input: K (and M) as matrices and
/// as a pair, and σ against them.
///
/// # Errors
/// `InvalidParams` or `NotSymmetric` naming what is wrong.
fn check_all(
    k: &CsrMatrix,
    mass: Option<&CsrMatrix>,
    sigma: f64,
    params: &JdParams,
) -> Result<(), JdError> {
    crate::setup::check_matrix(k, params)?;
    if let Some(m) = mass {
        crate::setup::check_pair(k, m, params)?;
    }
    check_input(k, mass, sigma)
}

/// The rows of each process over `comm` (balanced by nonzeros), None on one
/// process.
///
/// # Errors
/// `InvalidParams` when the matrix cannot be partitioned.
fn rows_partition<C: Comm + ?Sized>(
    k: &CsrMatrix,
    comm: &C,
) -> Result<Option<RowPartition>, JdError> {
    if comm.size() == 1 {
        return Ok(None);
    }
    RowPartition::balanced_by_nnz(k, comm.size())
        .map(Some)
        .map_err(|e| JdError::invalid("partition", e))
}

/// [`run`] for the eigenvalues nearest σ, by `method` on B: with
/// `Lanczos`, a solve from no start vectors, without deflation vectors or
/// checkpoints, runs block thick-restart Lanczos ([`crate::lanczos`]; the
/// observer sees no iterations), the others the Davidson loop.
#[allow(clippy::too_many_arguments)]
fn run_scaled<C: Comm + ?Sized>(
    k: &CsrMatrix,
    mass: Option<&CsrMatrix>,
    sigma: f64,
    comm: &C,
    params: &JdParams,
    spaces: Spaces<'_>,
    hooks: Hooks<'_>,
    method: SliceMethod,
) -> Result<Solution, JdError> {
    check_all(k, mass, sigma, params)?;
    let n = k.nrows();
    // The user's test on the true residuals, and B's test that meets it.
    let test = TrueTest::new(k, mass, sigma, params);
    let b_tol = b_params(params, &test).problem.tol;
    let (inv, below, setup) = factor_on_root(k, mass, sigma, comm, params, b_tol)?;
    let part = rows_partition(k, comm)?;
    let (kr, mr) = pencil_rows(k, mass, comm, params, part.as_ref())?;
    let (counts, offsets) = rank_rows(part.as_ref(), comm.size(), n);
    let root = RootSolve {
        inv: inv.as_ref(),
        comm,
        counts,
        offsets,
    };
    let mjacobi = mass_jacobi(mass, kr.range.clone())?;
    let range = kr.range.clone();
    let initial = local_rows("initial", spaces.initial, n, range.clone())?;
    let deflation = local_rows("deflation", spaces.deflation, n, range)?;
    let mass_rows = mr.as_ref().map(|r| &r.op as &dyn Operator);
    let space = (!deflation.is_empty())
        .then(|| DeflationSpace::new(&deflation, kr.range.len(), mass_rows, comm))
        .transpose()?;
    let deflated = match &space {
        Some(sp) => Some(DeflatedInverse::new(&root, sp, comm)?),
        None => None,
    };
    let user_inv: &dyn Operator = match &deflated {
        Some(d) => d,
        None => &root,
    };
    // Pairs numerically at σ are found first, and the loop runs on the
    // inverse restricted to their complement (see `near`).
    let (near, probe) = NearSearch {
        inv: user_inv,
        k: &kr.op,
        m: mass_rows,
        comm,
        sigma,
        n,
        row_offset: kr.range.start,
        seed: params.basis.seed,
    }
    .find(
        &test,
        NearSearch::<C>::radius(&test, b_params(params, &test).problem.tol),
        params.problem.nev,
    );
    if let Some(z) = near.as_ref().filter(|z| z.lam.len() >= params.problem.nev) {
        let mut s = near_only(z, &test, kr.range.clone(), below, setup);
        s.stats.matvecs += probe;
        s.wanted = params.problem.nev;
        return Ok(s);
    }
    let (mut all_deflation, near_space, near_inverse);
    let (inv, space, deflation): (&dyn Operator, _, &[f64]) = match &near {
        Some(z) => {
            all_deflation = deflation.clone();
            all_deflation.extend_from_slice(&z.x);
            near_space = DeflationSpace::new(&all_deflation, kr.range.len(), mass_rows, comm)?;
            near_inverse = DeflatedInverse::new(&root, &near_space, comm)?;
            (&near_inverse, Some(&near_space), &all_deflation)
        }
        None => (user_inv, space.as_ref(), &deflation),
    };
    let mut left = params.clone();
    left.problem.nev -= near.as_ref().map_or(0, |z| z.lam.len());
    let p = b_params(&left, &test);
    let op = Sandwich {
        inv,
        mass: mass_rows,
    };
    let back = move |t: f64| sigma + 1.0 / t;
    let (observer, sink, resume) = (hooks.observer, hooks.sink, hooks.resume);
    let mut mapped = observer.map(|obs| {
        move |ev: &IterationEvent| {
            let mut ev = ev.clone();
            ev.ritz_values.iter_mut().for_each(|t| *t = back(*t));
            obs(&ev)
        }
    });
    let hooks = Hooks {
        observer: mapped.as_mut().map(|o| o as Observer<'_>),
        sink: sink.map(|s| -> &mut dyn CheckpointSink { s }),
        resume,
        shift: Some(sigma),
        ..Hooks::default()
    };
    let pencil = Pencil {
        sigma,
        k: &kr.op,
        m: mass_rows,
        comm,
        below,
        setup,
        deflation: space,
    };
    let krylov = method == SliceMethod::Lanczos
        && deflation.is_empty()
        && hooks.sink.is_none()
        && hooks.resume.is_none();
    let on_b = OnB {
        root: inv,
        op: &op,
        mr: mr.as_ref(),
        mjacobi: mjacobi.as_ref(),
        pencil: &pencil,
        deflation,
        comm,
        n,
        n_local: kr.range.len(),
        row_offset: kr.range.start,
        krylov,
    };
    let sol = test.judge(on_b.solve(&p, &initial, hooks))?;
    let mut out = match sol.outcome {
        Outcome::Converged | Outcome::BudgetSpent if !sol.eigenvalues.is_empty() => {
            on_b.refine(&test, &left, p, sol)?
        }
        _ => sol,
    };
    out.stats.matvecs += probe;
    Ok(match &near {
        None => out,
        Some(z) => Solution {
            wanted: params.problem.nev,
            ..with_near(out, z, &test)
        },
    })
}

/// The pairs at σ ([`near`]) put in front of the loop's pairs `s` (they are
/// the nearest).
fn with_near(mut s: Solution, z: &NearPairs, test: &TrueTest) -> Solution {
    let p = s.eigenvalues.len();
    let mut x = z.x.clone();
    x.extend_from_slice(&s.eigenvectors[..s.n_local * p]);
    s.eigenvectors = x;
    s.eigenvalues.splice(0..0, z.lam.iter().copied());
    s.residual_norms.splice(0..0, z.res.iter().copied());
    let ok = z
        .lam
        .iter()
        .zip(&z.res)
        .map(|(&l, &r)| r <= test.allowed(l));
    s.converged.splice(0..0, ok);
    if s.is_converged() && s.nconverged() < s.eigenvalues.len() {
        s.outcome = Outcome::Incomplete;
    }
    s
}

/// The solution when the pairs at σ are all that was asked for (`nev` of
/// them or fewer when more were found: the nearest).
fn near_only(
    z: &NearPairs,
    test: &TrueTest,
    rows: Range<usize>,
    below: Option<usize>,
    setup: f64,
) -> Solution {
    let empty = Solution {
        wanted: z.lam.len(),
        n_local: rows.len(),
        row_offset: rows.start,
        stats: Stats {
            eigenvalues_below_shift: below,
            setup_seconds: setup,
            ..Stats::default()
        },
        ..Solution::default()
    };
    with_near(empty, z, test)
}

/// Rank 0 factors K − σM (A − σI without M) with `params.threads` threads;
/// every process gets the outcome: the factors (rank 0 only), the inertia
/// and the seconds. Collective.
///
/// # Errors
/// `Factorization` on every process when rank 0 cannot factor.
#[allow(clippy::type_complexity)]
fn factor_on_root<C: Comm + ?Sized>(
    k: &CsrMatrix,
    mass: Option<&CsrMatrix>,
    sigma: f64,
    comm: &C,
    params: &JdParams,
    b_tol: f64,
) -> Result<(Option<ShiftInvert>, Option<usize>, f64), JdError> {
    let t0 = Instant::now();
    let factored = (comm.rank() == 0).then(|| {
        let mut f = match mass {
            None => ShiftInvert::new(k, sigma, params.execution.threads),
            Some(m) => ShiftInvert::pencil(k, m, sigma, params.execution.threads),
        }?;
        f.settle_refinement(b_tol);
        Ok(f)
    });
    let setup = t0.elapsed().as_secs_f64();
    share_factorization(comm, factored, setup)
}

/// This process's rows of K (for the true residuals) and of M (for the
/// products and residuals) under `part` (all rows without).
///
/// # Errors
/// As [`JdParams::resolve`] and [`rows`].
#[allow(clippy::type_complexity)]
fn pencil_rows<'m, 'c, C: Comm + ?Sized>(
    k: &'m CsrMatrix,
    mass: Option<&'m CsrMatrix>,
    comm: &'c C,
    params: &JdParams,
    part: Option<&RowPartition>,
) -> Result<(Rows<'m, 'c, C>, Option<Rows<'m, 'c, C>>), JdError> {
    let max_block = params.resolve(k.nrows())?.max_basis;
    let spec = |field| RowsSpec {
        part,
        opts: DistOptions {
            threads: params.execution.threads,
            overlap: false,
            max_block,
        },
        precond: None,
        precond_of: None,
        field,
    };
    let kr = rows(k, comm, params, spec("matrix"))?;
    let mr = match mass {
        Some(m) => Some(rows(m, comm, params, spec("mass"))?),
        None => None,
    };
    Ok((kr, mr))
}

/// The number of rows of every rank under `part` and their first global rows
/// (all `n` rows on one process without a partition).
fn rank_rows(part: Option<&RowPartition>, size: usize, n: usize) -> (Vec<usize>, Vec<usize>) {
    match part {
        Some(p) => (0..size)
            .map(|r| {
                let rg = p.range(r);
                (rg.len(), rg.start)
            })
            .unzip(),
        None => (vec![n], vec![0]),
    }
}

/// The settings of a solve on B = (A − σI)⁻¹ (or (K − σM)⁻¹M) from the
/// caller's `params`: no preconditioner (B's products are already solves with
/// the factors), GD+k steps unless `maxits` is given, and ‖B‖ estimated, not
/// taken from `anorm` (which is A's). The target and the rest are the caller's.
pub fn settings_on_b(params: &JdParams) -> JdParams {
    JdParams {
        problem: ProblemSettings {
            anorm: None,
            ..params.problem
        },
        correction: CorrectionSettings {
            // B's wanted eigenvalues are well separated: plain GD+k steps t = −r (a
            // block Krylov method) beat BiCGSTAB(3) corrections, each of whose steps
            // costs two solves (diag(1..1000), σ = 500.3, nev 4: 56 against 144
            // products with B).
            maxits: params.correction.maxits.or(Some(0)),
            ..params.correction
        },
        preconditioner: PrecondSettings {
            kind: PrecondChoice::None,
            shift: None,
            ..params.preconditioner
        },
        ..params.clone()
    }
}

/// The parameters of the solve on B: [`settings_on_b`] with B's largest
/// eigenvalues in magnitude (A's nearest σ), Ritz extraction, and B's
/// relative tolerance where `test` gives one a priori.
fn b_params(params: &JdParams, test: &TrueTest) -> JdParams {
    let mut p = settings_on_b(params);
    p.problem.target = Target::LargestMagnitude;
    // B's wanted eigenvalues are its extreme ones.
    p.basis.extraction = Extraction::Ritz;
    if let Some(tol) = test.a_priori() {
        p.problem.conv = ConvTest::Rel;
        p.problem.tol = tol;
    }
    p
}

/// diag(M)⁻¹ on the global rows `range`: the preconditioner of a pencil's
/// solve on B (`None` without M). B's residual for a pencil is M(Bx − νx):
/// GD+k steps t = −r would weigh the correction by M (lund_b: κ(M) = 3·10⁴,
/// 11 810 products for 4 pairs of n = 147). diag(M)⁻¹ takes most of that
/// weight off (κ 144 left).
///
/// # Errors
/// `InvalidParams` when Jacobi refuses M's diagonal.
fn mass_jacobi(mass: Option<&CsrMatrix>, range: Range<usize>) -> Result<Option<Jacobi>, JdError> {
    match mass {
        Some(m) => Ok(Some(
            Jacobi::from_diagonal(&m.diagonal()[range])
                .map_err(|e| JdError::invalid("mass", e.to_string()))?,
        )),
        None => Ok(None),
    }
}

/// The solves on B of one [`run_with`] and what they share.
struct OnB<'a, C: Comm + ?Sized> {
    /// (K − σM)⁻¹, restricted to the deflation space when there is one.
    root: &'a dyn Operator,
    op: &'a Sandwich<'a>,
    /// M's rows (`None` for A x = λ x).
    mr: Option<&'a Rows<'a, 'a, C>>,
    mjacobi: Option<&'a Jacobi>,
    pencil: &'a Pencil<'a, C>,
    deflation: &'a [f64],
    comm: &'a C,
    n: usize,
    n_local: usize,
    row_offset: usize,
    /// Solves from no start vectors run Lanczos.
    krylov: bool,
}

impl<C: Comm + ?Sized> OnB<'_, C> {
    /// One Lanczos solve on B for `p.nev` pairs, mapped back; `None` where n
    /// leaves its Krylov space no room. Collective.
    fn lanczos(&self, p: &JdParams) -> Option<Result<Solution, JdError>> {
        let n = self.n;
        let block = p.block_size().min(p.problem.nev).max(1);
        let ncv = match p.basis.max_basis {
            0 => LanczosParams::basis_for(p.problem.nev, block, n)?,
            mb => mb.max(p.problem.nev + 2 * block).min(n.checked_sub(block)?),
        };
        if ncv < p.problem.nev + 2 * block {
            return None;
        }
        let t0 = Instant::now();
        let out = crate::lanczos::solve(
            self.root,
            self.mr.map(|r| &r.op as &dyn Operator),
            self.comm,
            self.row_offset,
            LanczosParams {
                nev: p.problem.nev,
                block,
                ncv,
                tol: p.problem.tol,
                max_products: p.execution.matvec_budget(n, p.problem.nev),
                seed: p.basis.seed,
                threads: p.execution.threads,
            },
        );
        let stats = Stats {
            matvecs: out.products,
            outer_iterations: out.restarts + 1,
            restarts: out.restarts,
            global_sums: out.global_sums,
            spmv_seconds: out.solve_seconds,
            projection_seconds: out.solve_seconds + out.ortho_seconds + out.dense_seconds,
            dense_seconds: out.dense_seconds,
            wall_seconds: t0.elapsed().as_secs_f64(),
            ..Stats::default()
        };
        let all = out.values.len() == p.problem.nev && out.converged.iter().all(|&c| c);
        let s = Solution {
            outcome: if all {
                Outcome::Converged
            } else {
                Outcome::BudgetSpent
            },
            wanted: p.problem.nev,
            eigenvalues: out.values,
            residual_norms: out.residuals,
            converged: out.converged,
            eigenvectors: out.vectors,
            n_local: self.n_local,
            row_offset: self.row_offset,
            multigrain: None,
            stats,
        };
        let mut s = self.pencil.map_back(self.pencil.polish(s, self.root));
        // map_back counts two products with M per product with B (the
        // Davidson loop's operator); Lanczos takes one per basis column
        s.stats.mass_matvecs =
            s.stats.mass_matvecs.saturating_sub(2 * out.products) + out.mass_products;
        Some(Ok(s))
    }

    /// One solve on B from the local start vectors `x0`, its pairs mapped
    /// back. Collective.
    ///
    /// # Errors
    /// As [`run_loop`].
    fn solve(&self, p: &JdParams, x0: &[f64], hooks: Hooks<'_>) -> Result<Solution, JdError> {
        if self.krylov && x0.is_empty() {
            if let Some(r) = self.lanczos(p) {
                return r;
            }
        }
        let pb = Problem::new(self.op, self.comm)?
            .with_initial(x0)?
            .with_deflation(self.deflation)?;
        let mut pb = match (self.mr, self.mjacobi) {
            (Some(r), Some(j)) => pb
                .with_mass(&r.op)?
                .with_mass_diagonal(r.diag.as_deref().unwrap_or_default())?
                .with_preconditioner(j)?,
            _ => pb,
        };
        pb.deflate_locked = true;
        let pencil = self.pencil;
        let back = |s: Solution| pencil.map_back(pencil.polish(s, self.root));
        solved(run_loop::<_, _, ()>(&pb, p, hooks)).map(|s| match s.outcome {
            Outcome::Stopped => pencil.map_back(s),
            _ => back(s),
        })
    }

    /// Refinement of `sol`, the solve on B with parameters `p`: B's test does
    /// not bound the true residuals of a pencil (‖Kx − λMx‖ ≤
    /// ‖K − σM‖‖M⁻¹‖‖r_B‖/|ν|, and ‖M⁻¹‖ is not known), nor under
    /// ConvTest::Rel: the solve goes on from its vectors with B's tolerance
    /// tightened by the worst ratio found, until every pair meets the user's
    /// `test` or the user's budget of products is spent: then
    /// [`Outcome::Converged`], else the last solve's outcome when it ended
    /// early and [`Outcome::Incomplete`] when it did not. Collective.
    ///
    /// # Errors
    /// As [`Self::solve`].
    fn refine(
        &self,
        test: &TrueTest,
        params: &JdParams,
        mut p: JdParams,
        mut sol: Solution,
    ) -> Result<Solution, JdError> {
        for _ in 0..REFINEMENTS {
            let worst = test.worst_ratio(&sol);
            let left = params
                .execution
                .matvec_budget(self.n, params.problem.nev)
                .saturating_sub(sol.stats.matvecs);
            if worst <= 1.0 || left == 0 {
                break;
            }
            p.problem.tol = (p.problem.tol / (2.0 * worst).min(1e6)).max(1e3 * f64::EPSILON);
            p.execution.max_matvecs = Some(left.min(2 * sol.stats.matvecs + REFINEMENT_MATVECS));
            let counts = sol.stats.clone();
            let x0 = std::mem::take(&mut sol.eigenvectors);
            let mut next = test.judge(self.solve(&p, &x0, Hooks::default()))?;
            for (j, c) in next.converged.iter_mut().enumerate() {
                *c = next.residual_norms[j] <= test.allowed(next.eigenvalues[j]);
            }
            next.stats.matvecs += counts.matvecs;
            next.stats.mass_matvecs += counts.mass_matvecs;
            next.stats.outer_iterations += counts.outer_iterations;
            next.stats.wall_seconds += counts.wall_seconds;
            sol = next;
        }
        if test.worst_ratio(&sol) > 1.0 || sol.eigenvalues.len() < params.problem.nev {
            for (j, c) in sol.converged.iter_mut().enumerate() {
                *c = *c && sol.residual_norms[j] <= test.allowed(sol.eigenvalues[j]);
            }
            if sol.is_converged() {
                sol.outcome = Outcome::Incomplete;
            }
        } else {
            sol.outcome = Outcome::Converged;
        }
        sol.wanted = params.problem.nev;
        Ok(sol)
    }
}

/// Refinement rounds of a shift-and-invert solve whose true residuals miss
/// the user's test (see [`run`]).
const REFINEMENTS: usize = 3;
/// A refinement round's budget: twice the products of the solve it refines,
/// and this many more.
const REFINEMENT_MATVECS: u64 = 2000;

/// The user's convergence test on the true residuals of shift-and-invert
/// pairs: ‖Kx − λMx‖/‖x‖ ≤ tol·(‖K‖ + |λ|‖M‖) (`ConvTest::Norm`, M = I for
/// Ax = λx; ‖·‖ the 1-norm, an upper bound of the 2-norm, unless
/// `params.anorm` gives ‖K‖), ≤ tol·|λ| (`Rel`), ≤ tol (`Abs`).
struct TrueTest {
    conv: ConvTest,
    tol: f64,
    knorm: f64,
    mnorm: f64,
    sigma: f64,
    pencil: bool,
}

impl TrueTest {
    fn new(k: &CsrMatrix, mass: Option<&CsrMatrix>, sigma: f64, params: &JdParams) -> Self {
        Self {
            conv: params.problem.conv,
            tol: params.problem.tol,
            knorm: params.problem.anorm.unwrap_or_else(|| norm1(k)),
            mnorm: mass.map_or(0.0, norm1),
            sigma,
            pencil: mass.is_some(),
        }
    }

    /// The largest residual the test allows at λ.
    fn allowed(&self, lam: f64) -> f64 {
        match self.conv {
            ConvTest::Norm => self.tol * (self.knorm + lam.abs() * self.mnorm),
            ConvTest::Rel => self.tol * lam.abs(),
            ConvTest::Abs => self.tol,
            ConvTest::Sqrt => (self.tol * lam.abs().sqrt()).max(1e3 * f64::EPSILON * self.knorm),
        }
    }

    /// Under `Norm` or `Abs`, B's relative tolerance (`ConvTest::Rel` on B)
    /// for the test: for A x = λ x, Ax − λx = −(A − σI)(Bx − θx)/θ, so
    /// ‖Bx − θx‖ ≤ t·|θ| gives ‖Ax − λx‖ ≤ t·‖A − σI‖ ≤ t·(‖A‖₁ + |σ|), a
    /// guarantee. For a pencil the same t (with ‖K‖₁ + |σ|‖M‖₁) leaves a factor
    /// ‖M⁻¹‖‖M‖ that the refinement takes care of. No smaller than B's
    /// rounding floor, 1e3·ε.
    fn a_priori(&self) -> Option<f64> {
        let allowed = match self.conv {
            ConvTest::Norm => self.tol * (self.knorm + self.sigma.abs() * self.mnorm),
            ConvTest::Abs => self.tol,
            ConvTest::Rel | ConvTest::Sqrt => return None,
        };
        let c = self.knorm + self.sigma.abs() * self.mnorm.max(f64::from(!self.pencil));
        Some((allowed / c).max(1e3 * f64::EPSILON))
    }

    /// The largest ratio of a true residual to what the test allows.
    fn worst_ratio(&self, s: &Solution) -> f64 {
        s.eigenvalues
            .iter()
            .zip(&s.residual_norms)
            .map(|(&l, &r)| r / self.allowed(l))
            .fold(0.0, f64::max)
    }

    /// `r`, the pairs of a solve that ran out of its budget judged by this
    /// test on their true residuals.
    ///
    /// # Errors
    /// `r`'s error.
    fn judge(&self, r: Result<Solution, JdError>) -> Result<Solution, JdError> {
        let mut s = r?;
        if s.outcome == Outcome::BudgetSpent {
            for (j, c) in s.converged.iter_mut().enumerate() {
                *c = s.residual_norms[j] <= self.allowed(s.eigenvalues[j]);
            }
        }
        Ok(s)
    }
}

/// The 1-norm of a symmetric matrix (its largest absolute row sum).
pub(crate) fn norm1(a: &CsrMatrix) -> f64 {
    (0..a.nrows())
        .map(|i| a.row(i).1.iter().map(|v| v.abs()).sum::<f64>())
        .fold(0.0, f64::max)
}

/// Shares rank 0's factorization outcome with every process (two
/// broadcasts, three for an error's message): the factors (rank 0 only), the
/// inertia and the seconds, or the same `Factorization` error everywhere.
#[allow(clippy::type_complexity)]
fn share_factorization<C: Comm + ?Sized>(
    comm: &C,
    factored: Option<Result<ShiftInvert, JdError>>,
    seconds: f64,
) -> Result<(Option<ShiftInvert>, Option<usize>, f64), JdError> {
    // [ok, inertia + 1 (0: none), message bytes], [seconds]
    let mut head = [0u64; 3];
    let mut msg = Vec::new();
    match &factored {
        Some(Ok(s)) => head = [1, s.below.map_or(0, |b| b as u64 + 1), 0],
        Some(Err(e)) => {
            msg = e.to_string().into_bytes();
            head[2] = msg.len() as u64;
        }
        None => {}
    }
    if comm.size() == 1 {
        return match factored {
            Some(Ok(s)) => {
                let below = s.below;
                Ok((Some(s), below, seconds))
            }
            Some(Err(e)) => Err(e),
            None => Err(JdError::Factorization("no factorization".into())),
        };
    }
    comm.broadcast_u64(&mut head, 0);
    let mut secs = [seconds];
    comm.broadcast(&mut secs, 0);
    if head[0] == 1 {
        let below = (head[1] > 0).then(|| (head[1] - 1) as usize);
        let inv = factored.and_then(Result::ok);
        return Ok((inv, below, secs[0]));
    }
    let mut bytes: Vec<u64> = msg.iter().map(|&b| u64::from(b)).collect();
    bytes.resize(head[2] as usize, 0);
    comm.broadcast_u64(&mut bytes, 0);
    match factored {
        Some(Err(e)) => Err(e),
        _ => {
            let text: Vec<u8> = bytes.iter().map(|&b| b as u8).collect();
            Err(JdError::Factorization(format!(
                "on rank 0: {}",
                String::from_utf8_lossy(&text)
            )))
        }
    }
}

/// What maps the pairs of the transformed problem back: λ = σ + 1/θ, true
/// residuals with K (and M) on this process's rows, the inertia and the
/// factorization's seconds.
struct Pencil<'a, C: ?Sized> {
    sigma: f64,
    k: &'a dyn Operator,
    m: Option<&'a dyn Operator>,
    comm: &'a C,
    below: Option<usize>,
    setup: f64,
    /// Residuals are projected on the deflation space's complement.
    deflation: Option<&'a DeflationSpace>,
}

impl<C: Comm + ?Sized> Pencil<'_, C> {
    /// For K x = λ M x, one step of subspace inverse iteration on the pairs of
    /// B, then Rayleigh-Ritz on the pencil: Y = (K − σM)⁻¹ M X, the pairs of
    /// (YᵀKY, YᵀMY) (Parlett, *The Symmetric Eigenvalue Problem*, §11.4 and
    /// §14.1). The M-orthonormal basis of the solve carries errors of
    /// ε·κ(M) in every direction, which K turns into true residuals of
    /// ε·κ(M)·‖K‖ (lund, κ(M) = 3·10⁴: 12 times tol = 1e-12); the step damps
    /// each direction by (λ − σ)/(λⱼ − σ), the far ones most. Collective (one
    /// product with the inverse, two with M and one with K, two global sums of
    /// p² values). Returns the pairs unchanged without M, or when the Gram
    /// matrix YᵀMY is not numerically positive definite.
    fn polish(&self, mut s: Solution, inv: &dyn Operator) -> Solution {
        let Some(m) = self.m else {
            return s;
        };
        let (nl, p) = (s.n_local, s.eigenvalues.len());
        if p == 0 {
            return s;
        }
        let x = &s.eigenvectors[..nl * p];
        let mut mx = vec![0.0; nl * p];
        m.apply_block(x, &mut mx, p);
        let mut y = vec![0.0; nl * p];
        inv.apply_block(&mx, &mut y, p);
        // y_j ≈ ν_j x_j: scaled back to the size of x_j for a Gram matrix near I
        for (j, &nu) in s.eigenvalues.iter().enumerate() {
            if nu != 0.0 && nu.is_finite() {
                y[j * nl..(j + 1) * nl].iter_mut().for_each(|v| *v /= nu);
            }
        }
        let (mut ky, mut my) = (vec![0.0; nl * p], vec![0.0; nl * p]);
        self.k.apply_block(&y, &mut ky, p);
        m.apply_block(&y, &mut my, p);
        // [H | G], column-major p×p each
        let mut hg = vec![0.0; 2 * p * p];
        for i in 0..p {
            let yi = &y[i * nl..(i + 1) * nl];
            for j in 0..p {
                let c = j * nl..(j + 1) * nl;
                hg[j * p + i] = crate::dense::dot(yi, &ky[c.clone()]);
                hg[p * p + j * p + i] = crate::dense::dot(yi, &my[c]);
            }
        }
        self.comm.all_reduce(&mut hg, ReduceOp::Sum);
        let (h, g) = hg.split_at(p * p);
        // G = Q diag(w) Qᵀ, W = Q diag(w)^(-1/2): WᵀGW = I
        let Some((w, q)) = crate::dense::sym_eig(g, p) else {
            return s;
        };
        let wmax = w.iter().fold(0.0f64, |a, &b| a.max(b));
        if !wmax.is_finite() || w.iter().any(|&v| v <= 1e3 * f64::EPSILON * wmax) {
            return s;
        }
        let mut wm = q;
        for (j, &v) in w.iter().enumerate() {
            wm[j * p..(j + 1) * p]
                .iter_mut()
                .for_each(|e| *e /= v.sqrt());
        }
        let mul = |a: &[f64], ta: bool, b: &[f64]| -> Vec<f64> {
            let mut c = vec![0.0; p * p];
            for j in 0..p {
                for i in 0..p {
                    c[j * p + i] = (0..p)
                        .map(|l| if ta { a[i * p + l] } else { a[l * p + i] } * b[j * p + l])
                        .sum();
                }
            }
            c
        };
        let c = mul(&wm, true, &mul(h, false, &wm));
        let Some((lam, u)) = crate::dense::sym_eig(&c, p) else {
            return s;
        };
        let sv = mul(&wm, false, &u);
        let mut order: Vec<usize> = (0..p).collect();
        order.sort_by(|&a, &b| {
            (lam[a] - self.sigma)
                .abs()
                .total_cmp(&(lam[b] - self.sigma).abs())
        });
        let out = &mut s.eigenvectors[..nl * p];
        out.iter_mut().for_each(|v| *v = 0.0);
        for (jn, &j) in order.iter().enumerate() {
            let col = &mut out[jn * nl..(jn + 1) * nl];
            for l in 0..p {
                crate::dense::axpy(sv[j * p + l], &y[l * nl..(l + 1) * nl], col);
            }
            s.eigenvalues[jn] = 1.0 / (lam[j] - self.sigma);
        }
        s.stats.matvecs += p as u64;
        s
    }

    /// Maps the pairs of B back: λ = σ + 1/θ, true residuals ‖Kx − λMx‖/‖x‖₂
    /// (global sums over the processes; collective), the inertia and the
    /// factorization's seconds into the statistics; with M, the two products
    /// with M inside each product with B into `mass_matvecs`.
    fn map_back(&self, mut s: Solution) -> Solution {
        let nl = s.n_local;
        let p = s.eigenvalues.len();
        let mut kx = vec![0.0; nl * p];
        let mut mx = vec![0.0; nl * p];
        if p > 0 {
            let x = &s.eigenvectors[..nl * p];
            self.k.apply_block(x, &mut kx, p);
            match self.m {
                Some(m) => m.apply_block(x, &mut mx, p),
                None => mx.copy_from_slice(x),
            }
        }
        // kx ← Kx − λMx, projected with deflation vectors
        for j in 0..p {
            let lam = self.sigma + 1.0 / s.eigenvalues[j];
            let c = j * nl..(j + 1) * nl;
            kx[c.clone()]
                .iter_mut()
                .zip(&mx[c])
                .for_each(|(a, b)| *a -= lam * b);
            s.eigenvalues[j] = lam;
        }
        if let Some(d) = self.deflation {
            d.project(&mut kx, p, self.comm);
        }
        let mut sums = vec![0.0; 2 * p];
        for j in 0..p {
            let c = j * nl..(j + 1) * nl;
            let x = &s.eigenvectors[c.clone()];
            sums[2 * j] = kx[c].iter().map(|a| a * a).sum();
            sums[2 * j + 1] = x.iter().map(|v| v * v).sum();
        }
        self.comm.all_reduce(&mut sums, ReduceOp::Sum);
        for j in 0..p {
            let (r, xx) = (sums[2 * j], sums[2 * j + 1]);
            s.residual_norms[j] = if xx > 0.0 { (r / xx).sqrt() } else { f64::NAN };
        }
        let extra_mass = if self.m.is_some() {
            2 * s.stats.matvecs
        } else {
            0
        };
        s.stats = Stats {
            eigenvalues_below_shift: self.below,
            setup_seconds: self.setup,
            mass_matvecs: s.stats.mass_matvecs + extra_mass,
            ..std::mem::take(&mut s.stats)
        };
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lap1d(n: usize) -> CsrMatrix {
        let mut t = Vec::new();
        for i in 0..n {
            t.push((i, i, 2.0));
            if i + 1 < n {
                t.push((i, i + 1, -1.0));
                t.push((i + 1, i, -1.0));
            }
        }
        CsrMatrix::from_triplets(n, n, &t).unwrap()
    }

    /// The refinement step stays at a shift 1e-10 from an eigenvalue (the
    /// rounding of a solve amplified 10¹⁰ along its eigenvector) for a tight
    /// tolerance, and goes between two eigenvalues (‖C⁻¹‖ ≈ 16) or for a
    /// loose one.
    #[test]
    fn refinement_stays_only_where_the_products_need_it() {
        let n = 50;
        let a = lap1d(n);
        let lam = |k: usize| 2.0 - 2.0 * (k as f64 * std::f64::consts::PI / (n + 1) as f64).cos();
        for (sigma, keeps) in [(lam(20) + 1e-10, true), (0.5 * (lam(20) + lam(21)), false)] {
            let mut b = ShiftInvert::with_kind(&a, sigma, FactorKind::Ldlt, 1).unwrap();
            b.refine = Some((a.clone(), sigma));
            b.settle_refinement(1e-10);
            assert_eq!(b.refines(), keeps, "σ = {sigma}");
            b.settle_refinement(1.0);
            assert!(!b.refines());
        }
    }

    #[test]
    fn shift_invert_applies_the_inverse_and_counts_the_inertia() {
        let n = 50;
        let a = lap1d(n);
        let sigma = 1.3;
        for kind in [FactorKind::Ldlt, FactorKind::Lu] {
            let b = ShiftInvert::with_kind(&a, sigma, kind, 1).unwrap();
            assert_eq!(b.kind(), kind);
            let x: Vec<f64> = (0..2 * n).map(|i| (i as f64 * 0.37).cos()).collect();
            let mut y = vec![0.0; 2 * n];
            b.apply_block(&x, &mut y, 2);
            for c in 0..2 {
                let mut ay = vec![0.0; n];
                a.mul_vec(&y[c * n..(c + 1) * n], &mut ay);
                for i in 0..n {
                    let r = ay[i] - sigma * y[c * n + i] - x[c * n + i];
                    assert!(r.abs() < 1e-10, "{kind:?} column {c} row {i}: {r:e}");
                }
            }
        }
        // Eigenvalues 2 − 2cos(jπ/51) below 1.3.
        let below = (1..=n)
            .filter(|&j| 2.0 - 2.0 * (j as f64 * std::f64::consts::PI / 51.0).cos() < sigma)
            .count();
        let b = ShiftInvert::new(&a, sigma, 1).unwrap();
        assert_eq!(b.kind(), FactorKind::Ldlt);
        assert_eq!(b.eigenvalues_below(), Some(below));
    }

    #[test]
    fn a_zero_pivot_falls_back_to_lu_and_a_singular_shift_is_an_error() {
        // [[0, 1], [1, 0]]: LDLᵀ without pivoting meets a zero pivot.
        let a = CsrMatrix::from_triplets(2, 2, &[(0, 1, 1.0), (1, 0, 1.0)]).unwrap();
        let b = ShiftInvert::new(&a, 0.0, 1).unwrap();
        assert_eq!(b.kind(), FactorKind::Lu);
        assert_eq!(b.eigenvalues_below(), None);
        // diag(1, 2) shifted by 2 is singular.
        let d = CsrMatrix::from_triplets(2, 2, &[(0, 0, 1.0), (1, 1, 2.0)]).unwrap();
        assert!(matches!(
            ShiftInvert::new(&d, 2.0, 1),
            Err(JdError::Factorization(_))
        ));
    }
}
