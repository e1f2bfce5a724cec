//! Spectral transformations: shift-and-invert for interior eigenvalues
//! (SLEPc's `STSINVERT`, ARPACK's mode 3).
//!
//! The eigenvalues of A closest to σ are the largest in magnitude of
//! B = (A − σI)⁻¹, whose eigenvalues θ = 1/(λ − σ) share A's eigenvectors and
//! are well separated where A's are clustered around σ. [`ShiftInvert`] factors
//! A − σI once with a sparse direct method of faer and applies B by two
//! triangular solves; [`solve_shift_invert`] runs the block Jacobi-Davidson
//! solver on B ([`Target::LargestMagnitude`]) and maps the pairs back:
//! λ = σ + 1/θ, with the true residuals ‖Ax − λx‖ recomputed with A.
//!
//! The factorization is LDLᵀ (faer's sparse Cholesky module, fill-reducing AMD
//! ordering, no pivoting), accepted when a solve with it has a backward error
//! below [`BACKWARD_ERROR_LIMIT`]; else (a zero or unstable pivot of the
//! indefinite A − σI) LU with partial pivoting. LDLᵀ gives the inertia: by
//! Sylvester's law the negative pivots of D count the eigenvalues of A below σ
//! ([`ShiftInvert::eigenvalues_below`], [`Stats::eigenvalues_below_shift`]).
//!
//! The problem K x = λ M x will factor K − σM the same way (B = (K − σM)⁻¹M,
//! M-symmetric): the factorization takes the shifted matrix from
//! [`ShiftInvert::new`]'s arguments, the solver the mass matrix when it has it.

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
use lblib::SelfComm;
use matrices::CsrMatrix;
use precond::Operator;
use serde::{Deserialize, Serialize};

use crate::error::JdError;
use crate::jd::{Observer, Problem, Spaces};
use crate::params::{Extraction, JdParams, PrecondChoice, Target};
use crate::solution::{IterationEvent, Solution, Stats};
use crate::solver::Solver;

/// Largest backward error ‖(A − σI)z − b‖∞ / (‖A − σI‖∞‖z‖∞ + ‖b‖∞) of a test
/// solve with the LDLᵀ factors; above it (an unstable pivot: LDLᵀ does not
/// pivot) LU with partial pivoting is used instead.
pub const BACKWARD_ERROR_LIMIT: f64 = 1e-10;

/// The sparse direct factorization of A − σI behind a [`ShiftInvert`].
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

/// B = (A − σI)⁻¹ as an [`Operator`], from a sparse direct factorization of
/// A − σI (see the module documentation).
pub struct ShiftInvert {
    n: usize,
    sigma: f64,
    factor: Factor,
    below: Option<usize>,
    par: Par,
}

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

/// The lower triangle (with the diagonal, shifted by −σ) or the whole of
/// A − σI as CSC arrays: for a symmetric A the rows of the CSR matrix are its
/// columns.
fn shifted_csc(a: &CsrMatrix, sigma: f64, lower: bool) -> (Vec<usize>, Vec<usize>, Vec<f64>) {
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
                    val.push(v - sigma);
                    diag_done = true;
                    continue;
                }
                idx.push(j);
                val.push(-sigma);
                diag_done = true;
            }
            idx.push(i);
            val.push(v);
        }
        if !diag_done {
            idx.push(j);
            val.push(-sigma);
        }
        ptr.push(idx.len());
    }
    (ptr, idx, val)
}

/// ‖(A − σI)z − b‖∞ / (‖A − σI‖∞‖z‖∞ + ‖b‖∞) for the solution z of one solve.
fn backward_error(a: &CsrMatrix, sigma: f64, b: &[f64], z: &[f64]) -> f64 {
    let n = a.nrows();
    let mut az = vec![0.0; n];
    a.mul_vec(z, &mut az);
    let mut norm_a = 0.0f64;
    for i in 0..n {
        let (_, vals) = a.row(i);
        let row: f64 = vals.iter().map(|v| v.abs()).sum::<f64>() + sigma.abs();
        norm_a = norm_a.max(row);
    }
    let inf = |v: &[f64]| v.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let r: Vec<f64> = (0..n).map(|i| az[i] - sigma * z[i] - b[i]).collect();
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

impl ShiftInvert {
    /// Factors A − σI (LDLᵀ, else LU; see the module documentation) with
    /// `threads` threads.
    ///
    /// # Errors
    /// `InvalidParams` for a non-square matrix or a non-finite σ;
    /// `Factorization` when both factorizations fail (A − σI singular: σ is an
    /// eigenvalue to working precision) or run out of memory.
    pub fn new(a: &CsrMatrix, sigma: f64, threads: usize) -> Result<Self, JdError> {
        match Self::with_kind(a, sigma, FactorKind::Ldlt, threads) {
            Ok(s) => Ok(s),
            Err(JdError::Factorization(_)) => Self::with_kind(a, sigma, FactorKind::Lu, threads),
            Err(e) => Err(e),
        }
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
        let n = a.nrows();
        if n != a.ncols() || n == 0 {
            return Err(JdError::invalid(
                "matrix",
                format!(
                    "shift-and-invert needs a square, non-empty matrix, got {} x {}",
                    a.nrows(),
                    a.ncols()
                ),
            ));
        }
        if !sigma.is_finite() {
            return Err(JdError::invalid(
                "target",
                format!("the shift σ must be finite, got {sigma}"),
            ));
        }
        if a.data().iter().any(|v| !v.is_finite()) {
            return Err(JdError::NonFinite("matrix"));
        }
        let par = if threads > 1 {
            Par::rayon(threads)
        } else {
            Par::Seq
        };
        let fail = |what: &str, e: &dyn std::fmt::Display| {
            JdError::Factorization(format!("{what} of A − σI (σ = {sigma}): {e}"))
        };
        let (factor, below) = match kind {
            FactorKind::Ldlt => {
                let (ptr, idx, val) = shifted_csc(a, sigma, true);
                let sym = SymbolicSparseColMatRef::new_checked(n, n, &ptr, None, &idx);
                let mat = SparseColMatRef::new(sym, &val);
                let symbolic = factorize_symbolic_cholesky(
                    sym,
                    Side::Lower,
                    SymmetricOrdering::Amd,
                    Default::default(),
                )
                .map_err(|e| fail("symbolic LDLᵀ", &format!("{e:?}")))?;
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
                let (ptr, idx, val) = shifted_csc(a, sigma, false);
                let sym = SymbolicSparseColMatRef::new_checked(n, n, &ptr, None, &idx);
                let mat = SparseColMatRef::new(sym, &val);
                let lu = mat.sp_lu().map_err(|e| fail("LU", &format!("{e:?}")))?;
                (Factor::Lu(lu), None)
            }
        };
        let st = Self {
            n,
            sigma,
            factor,
            below,
            par,
        };
        // A test solve: b = (A − σI)·x for a fixed x, then the backward error.
        let x: Vec<f64> = (0..n).map(|i| ((i + 1) as f64).sin()).collect();
        let mut b = vec![0.0; n];
        a.mul_vec(&x, &mut b);
        b.iter_mut().zip(&x).for_each(|(b, x)| *b -= sigma * x);
        let mut z = vec![0.0; n];
        st.apply_block(&b, &mut z, 1);
        let err = backward_error(a, sigma, &b, &z);
        if kind == FactorKind::Ldlt && (err.is_nan() || err > BACKWARD_ERROR_LIMIT) {
            return Err(fail(
                "LDLᵀ",
                &format!("backward error {err:.1e} (an unstable pivot)"),
            ));
        }
        if z.iter().any(|v| !v.is_finite()) {
            return Err(fail("LU", &"A − σI is singular to working precision"));
        }
        Ok(st)
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

    /// The number of eigenvalues of A below σ (the negative pivots of the LDLᵀ
    /// factorization); None with LU.
    pub fn eigenvalues_below(&self) -> Option<usize> {
        self.below
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

    /// y = (A − σI)⁻¹ x for the k columns, by the factors.
    fn apply_block(&self, x: &[f64], y: &mut [f64], k: usize) {
        let n = self.n;
        y[..n * k].copy_from_slice(&x[..n * k]);
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

/// The `nev` eigenpairs of the symmetric matrix `a` closest to `sigma` by
/// shift-and-invert (see the module documentation), with the start and
/// deflation vectors of `spaces` (n × p blocks, as in
/// [`crate::solve_matrix_with`]).
///
/// `params.target`, `precond`, `precond_shift`, `anorm` and `extraction` are
/// not used (the solver runs on B with [`Target::LargestMagnitude`], standard
/// Rayleigh-Ritz extraction, no preconditioner; `tol`
/// and `conv` apply to B's residuals ‖Bx − θx‖); `maxits` defaults to 0 (GD+k
/// steps t = −r); every other parameter is used. The
/// eigenvalues come ordered by distance to σ, with true residuals ‖Ax − λx‖;
/// `stats.matvecs` counts products with B (each one forward and one backward
/// substitution), `stats.setup_seconds` the factorization and
/// `stats.eigenvalues_below_shift` the inertia. The observer sees the Ritz
/// values mapped back, σ + 1/θ.
///
/// # Errors
/// As [`crate::solve_matrix`] and [`ShiftInvert::new`]; with
/// `NotConverged`/`Stopped` the partial solution is mapped back the same way.
pub fn solve_shift_invert(
    a: &CsrMatrix,
    sigma: f64,
    params: &JdParams,
    observer: Option<Observer<'_>>,
    spaces: Spaces<'_>,
) -> Result<Solution, JdError> {
    crate::setup::check_matrix(a, params)?;
    let t0 = Instant::now();
    let b = ShiftInvert::new(a, sigma, params.threads)?;
    let setup = t0.elapsed().as_secs_f64();
    let p = JdParams {
        target: Target::LargestMagnitude,
        precond: PrecondChoice::None,
        precond_shift: None,
        anorm: None,
        // B's wanted eigenvalues are well separated: plain GD+k steps t = −r (a
        // block Krylov method) beat BiCGSTAB(3) corrections, each of whose steps
        // costs two solves (diag(1..1000), σ = 500.3, nev 4: 56 against 144
        // products with B).
        maxits: params.maxits.or(Some(0)),
        // B's wanted eigenvalues are its extreme ones.
        extraction: Extraction::Ritz,
        ..params.clone()
    };
    let comm = SelfComm::new();
    let pb = Problem::new(&b, &comm)?
        .with_initial(spaces.initial)?
        .with_deflation(spaces.deflation)?;
    let back = |t: f64| sigma + 1.0 / t;
    let res = match observer {
        Some(obs) => {
            let mut mapped = |ev: &IterationEvent| {
                let mut ev = ev.clone();
                ev.ritz_values.iter_mut().for_each(|t| *t = back(*t));
                obs(&ev)
            };
            Solver::problem(&pb, &p).observer(&mut mapped).run()
        }
        None => Solver::problem(&pb, &p).run(),
    };
    let finish = |mut s: Solution| -> Solution {
        map_back(a, &b, &mut s);
        s.stats.setup_seconds = setup;
        s
    };
    match res {
        Ok(s) => Ok(finish(s)),
        Err(JdError::NotConverged { wanted, partial }) => Err(JdError::NotConverged {
            wanted,
            partial: Box::new(finish(*partial)),
        }),
        Err(JdError::Stopped { wanted, partial }) => Err(JdError::Stopped {
            wanted,
            partial: Box::new(finish(*partial)),
        }),
        Err(e) => Err(e),
    }
}

/// Maps the pairs of B back to A: λ = σ + 1/θ, true residuals ‖Ax − λx‖ (with
/// x normalized), the inertia into the statistics.
fn map_back(a: &CsrMatrix, b: &ShiftInvert, s: &mut Solution) {
    let n = a.nrows();
    let mut ax = vec![0.0; n];
    for j in 0..s.eigenvalues.len() {
        let theta = s.eigenvalues[j];
        let lam = b.sigma + 1.0 / theta;
        let x = &s.eigenvectors[j * n..(j + 1) * n];
        a.mul_vec(x, &mut ax);
        let xx: f64 = x.iter().map(|v| v * v).sum();
        let r: f64 = ax
            .iter()
            .zip(x)
            .map(|(y, x)| (y - lam * x).powi(2))
            .sum::<f64>()
            .sqrt();
        s.eigenvalues[j] = lam;
        s.residual_norms[j] = if xx > 0.0 { r / xx.sqrt() } else { f64::NAN };
    }
    s.stats = Stats {
        eigenvalues_below_shift: b.below,
        ..std::mem::take(&mut s.stats)
    };
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
