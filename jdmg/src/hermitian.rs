//! Complex Hermitian eigenproblems A x = λ x and K x = λ M x (M Hermitian
//! positive definite), solved by the real solver on the real embedding
//! ([`matrices::complex`]).
//!
//! The embedding of order 2n is real symmetric, its eigenvalues are A's, each
//! twice (x and i·x), and its vectors, read interleaved, are complex vectors of
//! A. So [`Solver`] runs unchanged on it, in every mode (threads, ranks, solve
//! groups, shift-and-invert, intervals, checkpoints), asked for twice the
//! pairs; [`HermitianProblem::recover`] then takes the complex span of the
//! vectors it returned (pairs x, i·x span one complex line), orthonormalizes
//! it in the (M-)inner product, and makes the Rayleigh-Ritz pairs of A on it.
//! Each product with the embedding costs what a complex product costs (one
//! multiply-add per real and imaginary part of each entry).
//!
//! ```
//! use jdmg::hermitian::{solve_hermitian, HermitianProblem};
//! use jdmg::prelude::*;
//!
//! let a = "maglap2d:20:0.1".parse::<matrices::MagSpec>().unwrap().build().unwrap();
//! let params = JdParams {
//!     problem: ProblemSettings { nev: 4, tol: 1e-10, ..Default::default() },
//!     ..JdParams::default()
//! };
//! let sol = solve_hermitian(&a, None, &params)?;
//! assert!(sol.solution.is_converged());
//! let x = sol.eigenvector(0);
//! let mut ax = vec![faer::c64::new(0.0, 0.0); a.nrows()];
//! a.mul_vec(&x, &mut ax);
//! let lam = sol.solution.eigenvalues[0];
//! let r: f64 = ax.iter().zip(&x).map(|(u, v)| (u - v * lam).norm_sqr()).sum();
//! assert!(r.sqrt() < 1e-9 * 8.0);
//! # Ok::<(), JdError>(())
//! ```

use faer::{c64, Mat, Side};
use matrices::complex::{deinterleave, interleave, ComplexCsr};
use matrices::CsrMatrix;

use crate::error::JdError;
use crate::params::{ConvTest, JdParams, Target};
use crate::solution::{Outcome, Solution};
use crate::solver::Solver;

/// The settings of the solve on the real embedding: twice the pairs, and
/// twice any block, basis or restart size given (each complex vector is two
/// real ones); the rest as given.
pub fn embedded_params(params: &JdParams) -> JdParams {
    let mut p = params.clone();
    p.problem.nev = params.problem.nev.saturating_mul(2);
    let b = &mut p.basis;
    b.block = b.block.saturating_mul(2);
    b.max_basis = b.max_basis.saturating_mul(2);
    b.restart_size = b.restart_size.saturating_mul(2);
    p
}

/// Largest relative ‖A − Aᴴ‖ (entrywise, over the largest entry) accepted as
/// Hermitian: the rounding of a matrix assembled in floating point.
pub const HERMITIAN_TOL: f64 = 1e-12;

/// Smallest weight (eigenvalue of the Gram matrix of the complex vectors) of
/// a direction kept by the recovery: a pair x, i·x gives 2 and 0, a vector
/// without its partner 1, rounding about tol².
const KEEP_WEIGHT: f64 = 0.25;

/// Checks that `a` (and `m`) are square, of one order, and Hermitian to
/// [`HERMITIAN_TOL`].
///
/// # Errors
/// [`JdError::InvalidParams`] naming the matrix and what is wrong.
pub fn check_hermitian(a: &ComplexCsr, m: Option<&ComplexCsr>) -> Result<(), JdError> {
    let n = a.nrows();
    for (name, x) in std::iter::once(("A", a)).chain(m.map(|m| ("M", m))) {
        if x.nrows() != x.ncols() || x.nrows() != n {
            return Err(JdError::InvalidParams {
                field: "matrix",
                reason: format!(
                    "{name} is {} x {}: a Hermitian problem needs square matrices of order {n}",
                    x.nrows(),
                    x.ncols()
                ),
            });
        }
        let defect = x.hermitian_defect();
        if defect > HERMITIAN_TOL {
            return Err(JdError::InvalidParams {
                field: "matrix",
                reason: format!(
                    "{name} is not Hermitian: max |a_ij - conj(a_ji)| is {defect:.3e} of the \
                         largest entry (above {HERMITIAN_TOL:e})"
                ),
            });
        }
    }
    Ok(())
}

/// A complex Hermitian problem and its real embedding (see the module
/// documentation).
pub struct HermitianProblem<'a> {
    recovery: Recovery<'a>,
    embedding: CsrMatrix,
    mass_embedding: Option<CsrMatrix>,
}

/// The complex matrices of a problem whose embedding was solved elsewhere
/// (the CLI solves the embedding it built itself): what
/// [`Recovery::recover`] needs.
#[derive(Clone, Copy)]
pub struct Recovery<'a> {
    /// A (or K).
    pub a: &'a ComplexCsr,
    /// M of K x = λ M x.
    pub m: Option<&'a ComplexCsr>,
    /// The deflation vectors Y of the solve (n rows, column-major, any basis;
    /// empty for none), given to it by [`embed_vectors`]: the pairs are
    /// those of the operator restricted to the complement of Y, and their
    /// residuals are (I − YYᴴ)(A x − λ x) (with M: (I − MYYᴴ)(K x − λ M x),
    /// Y M-orthonormal), as the real solver reports them.
    pub deflation: &'a [c64],
}

impl<'a> HermitianProblem<'a> {
    /// Checks that `a` (and `m`) are square, of one order, and Hermitian, and
    /// builds the real embeddings.
    ///
    /// # Errors
    /// [`JdError::InvalidParams`] for a rectangular matrix, orders that
    /// differ, or a matrix whose max |aᵢⱼ − conj(aⱼᵢ)| exceeds
    /// [`HERMITIAN_TOL`] relative to the largest entry.
    pub fn new(a: &'a ComplexCsr, m: Option<&'a ComplexCsr>) -> Result<Self, JdError> {
        check_hermitian(a, m)?;
        let embed = |x: &ComplexCsr| {
            x.real_embedding().map_err(|e| JdError::InvalidParams {
                field: "matrix",
                reason: format!("the real embedding: {e}"),
            })
        };
        Ok(Self {
            recovery: Recovery {
                a,
                m,
                deflation: &[],
            },
            embedding: embed(a)?,
            mass_embedding: m.map(embed).transpose()?,
        })
    }

    /// The real symmetric embedding of A (order 2n) to hand to [`Solver`].
    pub fn embedding(&self) -> &CsrMatrix {
        &self.embedding
    }

    /// The embedding of M, for [`Solver::mass`].
    pub fn mass_embedding(&self) -> Option<&CsrMatrix> {
        self.mass_embedding.as_ref()
    }

    /// The settings of the embedded solve ([`embedded_params`]).
    pub fn embedded_params(&self, params: &JdParams) -> JdParams {
        embedded_params(params)
    }

    /// [`Recovery::recover`] of this problem.
    ///
    /// # Errors
    /// As [`Recovery::recover`].
    pub fn recover(&self, sol: Solution, params: &JdParams) -> Result<HermitianSolution, JdError> {
        self.recovery.recover(sol, params)
    }
}

impl Recovery<'_> {
    /// The complex eigenpairs from the embedded solve `sol` (its eigenvectors
    /// whole: one process, or gathered with [`crate::gather_eigenvectors`]):
    /// the Rayleigh-Ritz pairs of A on the complex span of its vectors, as
    /// many as it has pairs, halved, chosen by `params.problem.target`. The
    /// residuals ‖A x − λ M x‖ are recomputed, the convergence test is the
    /// solve's (`params.problem.conv`), and the outcome is the solve's, or
    /// [`Outcome::Incomplete`] when a pair misses the test here.
    ///
    /// # Errors
    /// [`JdError::InvalidParams`] when `sol` does not hold whole vectors of
    /// the embedding; [`JdError::Factorization`] when a dense eigensolve
    /// fails.
    pub fn recover(&self, sol: Solution, params: &JdParams) -> Result<HermitianSolution, JdError> {
        let n = self.a.nrows();
        let p = sol.eigenvalues.len();
        if sol.n_local != 2 * n || sol.eigenvectors.len() != 2 * n * p {
            return Err(JdError::InvalidParams {
                field: "solution",
                reason: format!(
                    "the embedded solution holds {} rows of {p} vectors; the recovery needs all {} rows",
                    sol.n_local,
                    2 * n
                ),
            });
        }
        let x = Mat::from_fn(n, p, |i, j| {
            let w = sol.eigenvector(j);
            c64::new(w[2 * i], w[2 * i + 1])
        });
        let q = self.orthonormal_span(&x)?;
        let y = self.deflation_basis()?;
        let keep = p.div_ceil(2);
        let anorm = params.problem.anorm.unwrap_or(out_anorm(&sol));
        let test = Test {
            params,
            anorm,
            mnorm: self.m.map_or(1.0, ComplexCsr::norm1),
            pencil: self.m.is_some(),
            deflation: y.as_ref(),
        };
        let mut pairs = self.pairs_on(&q, keep, &test)?;
        let mut extra_products = 2 * q.ncols() as u64 + pairs.values.len() as u64;
        if pairs.passed < pairs.values.len() {
            // Rayleigh-Ritz mixes the vectors of a tight cluster, whose
            // residuals then add up: one step on the span of Q and the
            // residual vectors brings them back under the test.
            let wide = self.widened(&q, &pairs.residuals, y.as_ref())?;
            let refined = self.pairs_on(&wide, keep, &test)?;
            extra_products += 2 * wide.ncols() as u64 + refined.values.len() as u64;
            if refined.passed >= pairs.passed {
                pairs = refined;
            }
        }
        let kept = pairs.values.len();
        let mut out = sol;
        out.wanted = out.wanted.div_ceil(2);
        out.eigenvectors = Vec::with_capacity(2 * n * kept);
        for j in 0..kept {
            let mut col: Vec<c64> = (0..n).map(|i| pairs.vectors[(i, j)]).collect();
            fix_phase(&mut col);
            out.eigenvectors
                .extend(col.iter().flat_map(|v| [v.re, v.im]));
        }
        out.converged = (0..kept)
            .map(|j| pairs.norms[j] <= test.allowed(pairs.values[j]))
            .collect();
        out.eigenvalues = pairs.values;
        out.residual_norms = pairs.norms;
        if out.outcome == Outcome::Converged
            && (out.converged.iter().any(|c| !c) || kept < out.wanted)
        {
            out.outcome = Outcome::Incomplete;
        }
        out.stats.matvecs += extra_products;
        halve_counts(&mut out.stats);
        Ok(HermitianSolution { solution: out, n })
    }

    /// The `keep` Rayleigh-Ritz pairs of A on the (M-)orthonormal basis `q`
    /// wanted first by the target, with their residual vectors A z − θ M z.
    fn pairs_on(&self, q: &Mat<c64>, keep: usize, test: &Test<'_>) -> Result<Pairs, JdError> {
        let (theta, z) = self.rayleigh_ritz(q)?;
        let order = target_order(&theta, test.params.problem.target);
        let keep = keep.min(order.len());
        let vectors = Mat::from_fn(q.nrows(), keep, |i, j| z[(i, order[j])]);
        let values: Vec<f64> = order[..keep].iter().map(|&j| theta[j]).collect();
        let az = mul_mat(self.a, &vectors);
        let mz = match self.m {
            Some(m) => mul_mat(m, &vectors),
            None => vectors.clone(),
        };
        let mut residuals =
            Mat::from_fn(q.nrows(), keep, |i, j| az[(i, j)] - mz[(i, j)] * values[j]);
        if let Some((y, my)) = test.deflation {
            residuals = &residuals - my * (y.adjoint() * &residuals);
        }
        let norms: Vec<f64> = (0..keep).map(|j| residuals.col(j).norm_l2()).collect();
        let passed = (0..keep)
            .filter(|&j| norms[j] <= test.allowed(values[j]))
            .count();
        Ok(Pairs {
            values,
            vectors,
            residuals,
            norms,
            passed,
        })
    }

    /// An (M-)orthonormal basis of the span of `q` and `r` (the part of each
    /// column of `r` (M-)orthogonal to `q` and to the deflation basis `y`,
    /// normalized).
    fn widened(
        &self,
        q: &Mat<c64>,
        r: &Mat<c64>,
        y: Option<&Deflation>,
    ) -> Result<Mat<c64>, JdError> {
        let mq = match self.m {
            Some(m) => mul_mat(m, q),
            None => q.clone(),
        };
        let mut rest = r - q * (mq.adjoint() * r);
        if let Some((y, my)) = y {
            rest = &rest - y * (my.adjoint() * &rest);
        }
        for j in 0..rest.ncols() {
            let norm = match self.m {
                Some(m) => {
                    let col = Mat::from_fn(rest.nrows(), 1, |i, _| rest[(i, j)]);
                    let mcol = mul_mat(m, &col);
                    (col.adjoint() * &mcol)[(0, 0)].re.max(0.0).sqrt()
                }
                None => rest.col(j).norm_l2(),
            };
            if norm > 0.0 {
                for i in 0..rest.nrows() {
                    rest[(i, j)] *= 1.0 / norm;
                }
            }
        }
        let both = Mat::from_fn(q.nrows(), q.ncols() + rest.ncols(), |i, j| {
            if j < q.ncols() {
                q[(i, j)]
            } else {
                rest[(i, j - q.ncols())]
            }
        });
        match self.m {
            Some(m) => span_basis(&both, &mul_mat(m, &both)),
            None => span_basis(&both, &both),
        }
    }

    /// An (M-)orthonormal basis Y of the deflation vectors and M Y (Y again
    /// without M); None without deflation vectors.
    ///
    /// # Errors
    /// [`JdError::InvalidParams`] when their length is not a multiple of n;
    /// as [`span_basis`].
    fn deflation_basis(&self) -> Result<Option<Deflation>, JdError> {
        let n = self.a.nrows();
        if self.deflation.is_empty() {
            return Ok(None);
        }
        if n == 0 || !self.deflation.len().is_multiple_of(n) {
            return Err(JdError::InvalidParams {
                field: "deflation",
                reason: format!(
                    "{} complex numbers are not whole vectors of {n} rows",
                    self.deflation.len()
                ),
            });
        }
        let y = Mat::from_fn(n, self.deflation.len() / n, |i, j| {
            self.deflation[i + j * n]
        });
        let y = self.orthonormal_span(&y)?;
        let my = match self.m {
            Some(m) => mul_mat(m, &y),
            None => y.clone(),
        };
        Ok(Some((y, my)))
    }

    /// An (M-)orthonormal basis of the complex span of the columns of `x`.
    fn orthonormal_span(&self, x: &Mat<c64>) -> Result<Mat<c64>, JdError> {
        match self.m {
            Some(m) => span_basis(x, &mul_mat(m, x)),
            None => span_basis(x, x),
        }
    }

    /// The Ritz values and vectors of A (of the pencil with M) on the
    /// (M-)orthonormal basis `q`.
    fn rayleigh_ritz(&self, q: &Mat<c64>) -> Result<(Vec<f64>, Mat<c64>), JdError> {
        let aq = mul_mat(self.a, q);
        let h = q.adjoint() * &aq;
        // scaled by a power of two to entries of order one (crate::dense::sym_eig)
        let moduli: Vec<f64> = (0..h.ncols())
            .flat_map(|j| (0..h.nrows()).map(move |i| (i, j)))
            .map(|(i, j)| h[(i, j)].norm())
            .collect();
        let scale = crate::dense::power_of_two_scale(&moduli);
        let hh = Mat::from_fn(h.nrows(), h.ncols(), |i, j| {
            (h[(i, j)] + h[(j, i)].conj()) * (0.5 * scale)
        });
        let eig = hh
            .self_adjoint_eigen(Side::Lower)
            .map_err(|e| JdError::Factorization(format!("projected Hermitian matrix: {e:?}")))?;
        let theta = (0..hh.nrows())
            .map(|j| eig.S().column_vector()[j].re / scale)
            .collect();
        Ok((theta, q * eig.U()))
    }
}

/// A basis of the complex span of the columns of `x`, orthonormal in the
/// inner product whose Gram matrix is xᴴ·`mx` (`mx` = M x, or x itself): the
/// eigenvectors of the Gram matrix with weight above [`KEEP_WEIGHT`], scaled.
///
/// # Errors
/// [`JdError::Factorization`] when the dense eigensolve fails.
pub(crate) fn span_basis(x: &Mat<c64>, mx: &Mat<c64>) -> Result<Mat<c64>, JdError> {
    let gram = x.adjoint() * mx;
    let eig = gram.self_adjoint_eigen(Side::Lower).map_err(|e| {
        JdError::Factorization(format!("Gram matrix of the complex vectors: {e:?}"))
    })?;
    let (u, s) = (eig.U(), eig.S().column_vector());
    let kept: Vec<usize> = (0..s.nrows()).filter(|&j| s[j].re > KEEP_WEIGHT).collect();
    let mut q = Mat::zeros(x.nrows(), kept.len());
    for (c, &j) in kept.iter().enumerate() {
        let w = x * u.col(j);
        let scale = 1.0 / s[j].re.sqrt();
        for i in 0..x.nrows() {
            q[(i, c)] = w[i] * scale;
        }
    }
    Ok(q)
}

/// `a` times each column of `x`.
pub(crate) fn mul_mat(a: &ComplexCsr, x: &Mat<c64>) -> Mat<c64> {
    let mut y = Mat::zeros(a.nrows(), x.ncols());
    let mut out = vec![c64::new(0.0, 0.0); a.nrows()];
    for j in 0..x.ncols() {
        let col: Vec<c64> = (0..x.nrows()).map(|i| x[(i, j)]).collect();
        a.mul_vec(&col, &mut out);
        for (i, v) in out.iter().enumerate() {
            y[(i, j)] = *v;
        }
    }
    y
}

/// The embedding's counts of eigenvalues and vectors as counts of the
/// complex problem's (each of its eigenvalues is the embedding's twice, and
/// each complex start or deflation vector two real ones).
fn halve_counts(stats: &mut crate::solution::Stats) {
    stats.locked = stats.locked.div_ceil(2);
    stats.missed_copies = stats.missed_copies.div_ceil(2);
    stats.initial_vectors = stats.initial_vectors.div_ceil(2);
    stats.deflation_vectors = stats.deflation_vectors.div_ceil(2);
    if let Some(c) = stats.certificate.as_mut() {
        c.count /= 2;
        c.repaired = c.repaired.div_ceil(2);
    }
    if let Some(i) = stats.interval.as_mut() {
        i.count /= 2;
        i.below /= 2;
        i.first_index = i.first_index.map(|f| f / 2);
    }
}

/// Rayleigh-Ritz pairs of the recovery, wanted first, with their residuals.
struct Pairs {
    values: Vec<f64>,
    vectors: Mat<c64>,
    residuals: Mat<c64>,
    norms: Vec<f64>,
    /// How many pass the test.
    passed: usize,
}

/// An (M-)orthonormal deflation basis Y and M Y.
type Deflation = (Mat<c64>, Mat<c64>);

/// The convergence test of the recovered pairs: the solve's.
struct Test<'p> {
    params: &'p JdParams,
    anorm: f64,
    mnorm: f64,
    pencil: bool,
    /// The deflation basis Y and M Y, whose components the residuals lose.
    deflation: Option<&'p Deflation>,
}

impl Test<'_> {
    /// The residual the test `params.problem.conv` allows at λ: ‖K‖ + |λ|‖M‖
    /// in place of ‖A‖ for a pencil, as the real solver has it.
    fn allowed(&self, lam: f64) -> f64 {
        let tol = self.params.problem.tol;
        match self.params.problem.conv {
            ConvTest::Norm if self.pencil => tol * (self.anorm + lam.abs() * self.mnorm),
            ConvTest::Norm => tol * self.anorm,
            ConvTest::Rel => tol * lam.abs() * self.mnorm,
            ConvTest::Abs => tol,
            ConvTest::Sqrt => (tol * lam.abs().sqrt()).max(1e3 * f64::EPSILON * self.anorm),
        }
    }
}

/// ‖A‖ as the embedded solve estimated it, or its largest |eigenvalue|.
fn out_anorm(sol: &Solution) -> f64 {
    sol.eigenvalues
        .iter()
        .fold(sol.stats.anorm_estimate, |m, t| m.max(t.abs()))
}

/// Indices of `theta` in the order of the target (wanted first).
fn target_order(theta: &[f64], target: Target) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..theta.len()).collect();
    let key = |l: f64| match target {
        Target::Smallest => l,
        Target::Largest => -l,
        Target::Closest(s) => (l - s).abs(),
        Target::LargestMagnitude => -l.abs(),
    };
    idx.sort_by(|&a, &b| key(theta[a]).total_cmp(&key(theta[b])));
    idx
}

/// The real vectors of the embedding for the complex vectors `z` (n rows,
/// column-major): each z interleaved, then i·z interleaved, 2 columns per
/// vector. The embedding's eigenvalues are A's twice, on x and i·x, so a
/// complex start or deflation block goes to the embedded solve in this form
/// ([`crate::Spaces`]), and a deflation block then removes both copies.
///
/// # Panics
/// When `z.len()` is not a multiple of `n` (contract violation).
pub fn embed_vectors(z: &[c64], n: usize) -> Vec<f64> {
    assert!(
        n > 0 && z.len().is_multiple_of(n),
        "embed_vectors: {} entries for n = {n}",
        z.len()
    );
    let mut out = Vec::with_capacity(4 * z.len());
    for col in z.chunks_exact(n) {
        out.extend(interleave(col));
        out.extend(col.iter().flat_map(|v| [-v.im, v.re]));
    }
    out
}

/// Multiplies `x` by the unit scalar that makes its largest entry real and
/// positive (eigenvectors are defined up to such a phase).
pub(crate) fn fix_phase(x: &mut [c64]) {
    let Some(big) = x
        .iter()
        .copied()
        .max_by(|a, b| a.norm_sqr().total_cmp(&b.norm_sqr()))
    else {
        return;
    };
    if big.norm() > 0.0 {
        let phase = big.conj() / big.norm();
        for v in x.iter_mut() {
            *v *= phase;
        }
    }
}

/// Complex eigenpairs: [`Solution`] with complex eigenvectors stored
/// interleaved (`n_local` = 2n real numbers per vector, the memory of `n`
/// [`c64`]); the counters are those of the embedded solve plus the products
/// of the recovery.
#[derive(Debug, Clone)]
pub struct HermitianSolution {
    /// Eigenvalues, residuals, outcome, counters; eigenvectors interleaved.
    pub solution: Solution,
    /// Order of the complex problem.
    pub n: usize,
}

impl HermitianSolution {
    /// Eigenvector `j` as complex numbers.
    pub fn eigenvector(&self, j: usize) -> Vec<c64> {
        deinterleave(&self.solution.eigenvectors[2 * self.n * j..2 * self.n * (j + 1)])
    }
}

/// The eigenpairs of the Hermitian `a` (with `m`: of K x = λ M x) asked for
/// by `params`, on one process with `params.execution.threads` threads: a
/// shorthand for [`HermitianProblem::new`], [`Solver`] on the embedding and
/// [`HermitianProblem::recover`].
///
/// # Errors
/// As [`HermitianProblem::new`], [`Solver::run`] and
/// [`HermitianProblem::recover`].
pub fn solve_hermitian(
    a: &ComplexCsr,
    m: Option<&ComplexCsr>,
    params: &JdParams,
) -> Result<HermitianSolution, JdError> {
    let pb = HermitianProblem::new(a, m)?;
    let inner = pb.embedded_params(params);
    let solver = Solver::new(pb.embedding(), &inner);
    let sol = match pb.mass_embedding() {
        Some(me) => solver.mass(me).run()?,
        None => solver.run()?,
    };
    pb.recover(sol, params)
}
