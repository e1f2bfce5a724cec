//! Singular triplets (σ, u, v), A v = σ u and Aᵀ u = σ v, of a sparse
//! rectangular matrix: the `nsv` largest or smallest, in the two stages of
//! PRIMME_SVDS (Wu, Romero and Stathopoulos, "PRIMME_SVDS: A high-performance
//! preconditioned SVD solver for accurate large-scale computations", SIAM J.
//! Sci. Comput. 39(5), 2017, §2 and §3).
//!
//! 1. **Normal equations.** The eigenpairs (σ², v) of C = AᵀA on the smaller
//!    side (AAᵀ when A is wide) are cheap to find, one product with A and one
//!    with Aᵀ per vector, but their residuals cannot fall below ε‖A‖²: a
//!    triplet built from them, u = Av/‖Av‖, has the residual ‖Cv − σ²v‖/σ, so
//!    small singular values lose accuracy as (‖A‖/σ)².
//! 2. **Augmented matrix.** Every triplet that stage 1 leaves short of the
//!    tolerance is refined on B = [0 A; Aᵀ 0], whose eigenpairs are
//!    (±σ, [u; ±v]/√2) and whose residuals reach ε‖A‖. Its wanted eigenvalues
//!    are interior for the smallest σ (B also has |m − n| zero eigenvalues), so
//!    each triplet is refined alone: the eigenvalue of B closest to stage 1's σ,
//!    from stage 1's [u; v] and with the triplets already final (both signs)
//!    deflated.
//!
//! Stage 1 takes each pair as far as its triplet needs, ‖Cv − σ²v‖ ≤
//! tol·‖A‖·σ, or to C's rounding floor ([`ConvTest::Sqrt`]), so stage 2 runs
//! only for the triplets that floor leaves short. C is formed once when a
//! product with it is cheaper than one with A and one with Aᵀ
//! ([`RectOperator::normal_matrix`]).
//!
//! A triplet converges when ‖Av − σu‖² + ‖Aᵀu − σv‖² ≤ (tol·‖A‖)², with ‖A‖
//! given ([`SvdParams::anorm`]) or estimated by a short Lanczos run on C. The
//! residuals reported are recomputed from the returned vectors.

use crate::params::{BasisSettings, CorrectionSettings, ExecutionSettings, ProblemSettings};
use std::sync::Mutex;

use lblib::SelfComm;
use matrices::CsrMatrix;
use precond::{spmv_block, Operator};
use serde::{Deserialize, Serialize};

use crate::dense::{dot, norm, sym_eig};
use crate::error::JdError;
use crate::params::{ConvTest, InnerSolver, JdParams, PrecondChoice, Target};
use crate::solution::{Outcome, Solution};
use crate::{Problem, Solver};

/// Which end of the singular values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum SvdWhich {
    /// The largest singular values (the default, as SciPy's `svds`).
    #[default]
    Largest,
    /// The smallest singular values.
    Smallest,
}

/// Settings of [`svds`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SvdParams {
    /// Number of singular triplets. Default 6 (SciPy's `k`).
    pub nsv: usize,
    /// Which end. Default `Largest`.
    pub which: SvdWhich,
    /// A triplet converges when ‖Av − σu‖² + ‖Aᵀu − σv‖² ≤ (tol·‖A‖)².
    /// Default 1e-8.
    pub tol: f64,
    /// ‖A‖₂ if known; default None = estimated (see the module docs).
    pub anorm: Option<f64>,
    /// Seed of the start vectors. Default 1.
    pub seed: u64,
    /// Threads of the dense kernels of each eigen-solve and of the products
    /// with C when it is formed. Default 1.
    pub threads: usize,
    /// Block size of stage 1 (PRIMME's `maxBlockSize`). Default 0 = min(nsv, 8).
    pub block: usize,
    /// Budget of products with A (each stage's solves stop there; products
    /// with Aᵀ are as many). Default 10⁷.
    pub max_products: u64,
}

impl Default for SvdParams {
    fn default() -> Self {
        Self {
            nsv: 6,
            which: SvdWhich::Largest,
            tol: 1e-8,
            anorm: None,
            seed: 1,
            threads: 1,
            block: 0,
            max_products: 10_000_000,
        }
    }
}

/// Singular triplets and what they cost.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SvdSolution {
    /// How the computation ended: only with [`Outcome::Converged`] are all
    /// `wanted` triplets converged ([`Outcome::BudgetSpent`] when
    /// `max_products` ran out, [`Outcome::Incomplete`] when a singular value
    /// is too small for the tolerance: σ = 0 of a rank-deficient A has no
    /// left vector from stage 1).
    pub outcome: Outcome,
    /// Triplets asked for.
    pub wanted: usize,
    /// Singular values, in target order (descending for `Largest`, ascending
    /// for `Smallest`).
    pub values: Vec<f64>,
    /// Left singular vectors, column-major (`nrows × nsv`).
    #[serde(skip)]
    pub u: Vec<f64>,
    /// Right singular vectors, column-major (`ncols × nsv`).
    #[serde(skip)]
    pub v: Vec<f64>,
    /// (‖Av − σu‖² + ‖Aᵀu − σv‖²)^½ of each triplet, recomputed.
    pub residual_norms: Vec<f64>,
    /// Whether each triplet passed the test.
    pub converged: Vec<bool>,
    /// Rows of A.
    pub nrows: usize,
    /// Columns of A.
    pub ncols: usize,
    /// Counters.
    pub stats: SvdStats,
}

impl SvdSolution {
    /// Whether all wanted triplets converged ([`Outcome::Converged`]).
    pub fn is_converged(&self) -> bool {
        self.outcome == Outcome::Converged
    }

    /// `Ok(self)` when converged, else [`SvdError::NotConverged`] carrying it
    /// (for `?`).
    ///
    /// # Errors
    /// `NotConverged` for any outcome but [`Outcome::Converged`].
    pub fn into_converged(self) -> Result<Self, SvdError> {
        if self.is_converged() {
            Ok(self)
        } else {
            Err(SvdError::NotConverged(Box::new(self)))
        }
    }

    /// Number of converged triplets.
    pub fn nconverged(&self) -> usize {
        self.converged.iter().filter(|&&c| c).count()
    }
    /// Left singular vector `j`.
    pub fn left(&self, j: usize) -> &[f64] {
        &self.u[j * self.nrows..(j + 1) * self.nrows]
    }
    /// Right singular vector `j`.
    pub fn right(&self, j: usize) -> &[f64] {
        &self.v[j * self.ncols..(j + 1) * self.ncols]
    }
}

/// What an SVD cost, by stage.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SvdStats {
    /// Products with A (as many with Aᵀ; a product with a formed C counts as
    /// one of each), all stages.
    pub products: u64,
    /// Products with A in the ‖A‖ estimate.
    pub norm_products: u64,
    /// Products with A in stage 1 (normal equations).
    pub stage1_products: u64,
    /// Products with A in stage 2 (augmented matrix).
    pub stage2_products: u64,
    /// Triplets refined in stage 2.
    pub refined: usize,
    /// Outer iterations of every eigen-solve.
    pub outer_iterations: usize,
    /// ‖A‖ used by the test.
    pub anorm: f64,
    /// The eigen-problem of stage 1: "AtA" or "AAt".
    pub normal_side: String,
    /// Whether stage 1 applied AᵀA as a matrix formed once (cheaper than A
    /// and Aᵀ in turn), not as Aᵀ(A x).
    pub explicit_normal: bool,
    /// Wall-clock seconds.
    pub wall_seconds: f64,
}

/// Why [`svds`] returned no full answer.
#[derive(Debug, thiserror::Error)]
pub enum SvdError {
    /// Parameters or matrix unusable, or an eigen-solve failed.
    #[error(transparent)]
    Solve(#[from] JdError),
    /// A computation that did not converge, made an error by
    /// [`SvdSolution::into_converged`] (the solvers return it as `Ok`, with
    /// its [`Outcome`]): every triplet reached, with its residual.
    #[error("not converged ({}): {} of {} singular triplets after {} products with A", .0.outcome.describe(), .0.nconverged(), .0.wanted, .0.stats.products)]
    NotConverged(Box<SvdSolution>),
}

/// A rectangular operator for [`svds_operator`]: products with A and Aᵀ on
/// blocks of column-major vectors, into caller-owned buffers.
pub trait RectOperator: Sync {
    /// Rows of A.
    fn nrows(&self) -> usize;
    /// Columns of A.
    fn ncols(&self) -> usize;
    /// `y = A x` for `k` vectors (`x`: ncols·k values, `y`: nrows·k).
    fn apply(&self, x: &[f64], y: &mut [f64], k: usize);
    /// `y = Aᵀ x` for `k` vectors (`x`: nrows·k values, `y`: ncols·k).
    fn apply_transpose(&self, x: &[f64], y: &mut [f64], k: usize);
    /// The squared norms of the columns of A (the diagonal of AᵀA), when
    /// cheap: the normal equations' preconditioner. Default None.
    fn column_norms2(&self) -> Option<Vec<f64>> {
        None
    }
    /// The squared norms of the rows of A (the diagonal of AAᵀ). Default None.
    fn row_norms2(&self) -> Option<Vec<f64>> {
        None
    }
    /// AᵀA (AAᵀ when `transpose`) as a sparse matrix, when a product with it
    /// costs less than one with A and one with Aᵀ. Default None: stage 1
    /// applies Aᵀ(A x).
    fn normal_matrix(&self, transpose: bool) -> Option<CsrMatrix> {
        let _ = transpose;
        None
    }
}

/// A sparse matrix with its transpose, as a [`RectOperator`].
pub struct CsrPair<'a> {
    a: &'a CsrMatrix,
    at: CsrMatrix,
}

impl<'a> CsrPair<'a> {
    /// Stores the transpose of `a` beside it.
    pub fn new(a: &'a CsrMatrix) -> Self {
        Self {
            a,
            at: a.transpose(),
        }
    }
}

/// Squared norms of the rows of `a`.
fn rows_norms2(a: &CsrMatrix) -> Vec<f64> {
    (0..a.nrows())
        .map(|r| a.row(r).1.iter().map(|x| x * x).sum())
        .collect()
}

impl RectOperator for CsrPair<'_> {
    fn nrows(&self) -> usize {
        self.a.nrows()
    }
    fn ncols(&self) -> usize {
        self.a.ncols()
    }
    fn apply(&self, x: &[f64], y: &mut [f64], k: usize) {
        spmv_block(self.a, x, y, k);
    }
    fn apply_transpose(&self, x: &[f64], y: &mut [f64], k: usize) {
        spmv_block(&self.at, x, y, k);
    }
    fn column_norms2(&self) -> Option<Vec<f64>> {
        Some(rows_norms2(&self.at))
    }
    fn row_norms2(&self) -> Option<Vec<f64>> {
        Some(rows_norms2(self.a))
    }
    fn normal_matrix(&self, transpose: bool) -> Option<CsrMatrix> {
        let (t, tt) = if transpose {
            (&self.at, self.a)
        } else {
            (self.a, &self.at)
        };
        gram(t, tt)
    }
}

/// TᵀT by Gustavson's row-by-row product (row i of TᵀT = Σ_k Tᵀ(i, k)·T(k, :)),
/// given T and Tᵀ in CSR, or None when it would not pay: forming it costs
/// Σ_k nnz(T(k, :))² multiplications, allowed up to 8·nnz(T), and it is kept
/// only with fewer nonzeros than T and Tᵀ together.
fn gram(t: &CsrMatrix, tt: &CsrMatrix) -> Option<CsrMatrix> {
    let flops: usize = (0..t.nrows()).map(|k| t.row(k).0.len().pow(2)).sum();
    if flops > 8 * t.nnz() {
        return None;
    }
    let n = t.ncols();
    let (mut indptr, mut indices, mut data) = (vec![0usize], Vec::new(), Vec::new());
    let mut acc = vec![0.0; n];
    let mut mark = vec![usize::MAX; n];
    let mut cols: Vec<u32> = Vec::new();
    for i in 0..n {
        cols.clear();
        let (ks, vs) = tt.row(i);
        for (&k, &tik) in ks.iter().zip(vs) {
            let (js, ws) = t.row(k as usize);
            for (&j, &w) in js.iter().zip(ws) {
                let j = j as usize;
                if mark[j] != i {
                    mark[j] = i;
                    acc[j] = 0.0;
                    cols.push(j as u32);
                }
                acc[j] += tik * w;
            }
        }
        cols.sort_unstable();
        for &j in &cols {
            indices.push(j);
            data.push(acc[j as usize]);
        }
        indptr.push(indices.len());
        if indices.len() >= 2 * t.nnz() {
            return None;
        }
    }
    Some(CsrMatrix::from_parts_unchecked(n, n, indptr, indices, data))
}

/// The operator seen tall: `a` applies the m × n factor with m ≥ n (Aᵀ when
/// the caller's A is wide: `swapped`).
struct Oriented<'a> {
    op: &'a dyn RectOperator,
    swapped: bool,
}

impl<'a> Oriented<'a> {
    fn new(op: &'a dyn RectOperator) -> Self {
        Self {
            op,
            swapped: op.nrows() < op.ncols(),
        }
    }
    fn m(&self) -> usize {
        if self.swapped {
            self.op.ncols()
        } else {
            self.op.nrows()
        }
    }
    fn n(&self) -> usize {
        if self.swapped {
            self.op.nrows()
        } else {
            self.op.ncols()
        }
    }
    /// `y = A x` with the tall A.
    fn a(&self, x: &[f64], y: &mut [f64], k: usize) {
        if self.swapped {
            self.op.apply_transpose(x, y, k)
        } else {
            self.op.apply(x, y, k)
        }
    }
    /// `y = Aᵀ x` with the tall A.
    fn at(&self, x: &[f64], y: &mut [f64], k: usize) {
        if self.swapped {
            self.op.apply(x, y, k)
        } else {
            self.op.apply_transpose(x, y, k)
        }
    }
    /// diag(AᵀA) of the tall A, when the operator gives it.
    fn normal_diagonal(&self) -> Option<Vec<f64>> {
        if self.swapped {
            self.op.row_norms2()
        } else {
            self.op.column_norms2()
        }
    }
    /// AᵀA of the tall A as a matrix, when the operator gives it.
    fn normal_matrix(&self) -> Option<CsrMatrix> {
        self.op.normal_matrix(self.swapped)
    }
}

/// C = AᵀA of the tall A, applied as Aᵀ(A x).
struct Normal<'a> {
    o: &'a Oriented<'a>,
    scratch: Mutex<Vec<f64>>,
}

impl<'a> Normal<'a> {
    fn new(o: &'a Oriented<'a>) -> Self {
        Self {
            o,
            scratch: Mutex::new(Vec::new()),
        }
    }
}

impl Operator for Normal<'_> {
    fn nrows(&self) -> usize {
        self.o.n()
    }
    fn apply_block(&self, x: &[f64], y: &mut [f64], k: usize) {
        let mut s = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        let m = self.o.m();
        if s.len() < m * k {
            s.resize(m * k, 0.0);
        }
        self.o.a(x, &mut s[..m * k], k);
        self.o.at(&s[..m * k], y, k);
    }
}

/// C = AᵀA of the tall A: the explicit matrix when the operator gives one
/// ([`RectOperator::normal_matrix`]; products on `threads` threads), else
/// Aᵀ(A x).
enum NormalOp<'a> {
    Explicit(precond::CsrOperator<'a>),
    Implicit(Normal<'a>),
}

impl<'a> NormalOp<'a> {
    fn new(
        o: &'a Oriented<'a>,
        explicit: Option<&'a CsrMatrix>,
        threads: usize,
    ) -> Result<Self, JdError> {
        Ok(match explicit {
            Some(c) => NormalOp::Explicit(
                precond::CsrOperator::new(c, threads)
                    .map_err(|e| JdError::invalid("threads", e))?,
            ),
            None => NormalOp::Implicit(Normal::new(o)),
        })
    }
}

impl Operator for NormalOp<'_> {
    fn nrows(&self) -> usize {
        match self {
            NormalOp::Explicit(c) => c.nrows(),
            NormalOp::Implicit(c) => c.nrows(),
        }
    }
    fn apply_block(&self, x: &[f64], y: &mut [f64], k: usize) {
        match self {
            NormalOp::Explicit(c) => c.apply_block(x, y, k),
            NormalOp::Implicit(c) => c.apply_block(x, y, k),
        }
    }
}

/// B = [0 A; Aᵀ 0] on vectors [u; v], A the tall one.
struct Augmented<'a> {
    o: &'a Oriented<'a>,
}

impl Operator for Augmented<'_> {
    fn nrows(&self) -> usize {
        self.o.m() + self.o.n()
    }
    fn apply_block(&self, x: &[f64], y: &mut [f64], k: usize) {
        let (m, len) = (self.o.m(), self.nrows());
        for c in 0..k {
            let (xu, xv) = x[c * len..(c + 1) * len].split_at(m);
            let (yu, yv) = y[c * len..(c + 1) * len].split_at_mut(m);
            self.o.a(xv, yu, 1);
            self.o.at(xu, yv, 1);
        }
    }
}

/// The `nsv` largest or smallest singular triplets of `a` (any shape), in two
/// stages (normal equations, then the augmented matrix; PRIMME_SVDS, Wu,
/// Romero and Stathopoulos 2017, §3), on one process.
///
/// # Errors
/// [`SvdError::Solve`] with `InvalidParams` for `nsv` of 0 or above
/// min(rows, columns), a tolerance not in (0, 1), a bad `anorm`, an empty
/// matrix or one holding NaN/Inf. A budget spent, or a singular value too
/// small for the tolerance, is an outcome of the solution
/// ([`SvdSolution::outcome`]), with every triplet reached.
pub fn svds(a: &CsrMatrix, params: &SvdParams) -> Result<SvdSolution, SvdError> {
    if a.data().iter().any(|x| !x.is_finite()) {
        return Err(JdError::NonFinite("the matrix").into());
    }
    svds_operator(&CsrPair::new(a), params)
}

/// [`svds`] of an operator given by its products with A and Aᵀ (matrix-free).
/// Without [`RectOperator::column_norms2`] stage 1 runs unpreconditioned.
///
/// # Errors
/// As [`svds`]; a non-finite product shows as `NonFinite`.
pub fn svds_operator(a: &dyn RectOperator, params: &SvdParams) -> Result<SvdSolution, SvdError> {
    let t0 = std::time::Instant::now();
    check(a, params)?;
    let o = Oriented::new(a);
    let explicit = o.normal_matrix();
    let normal = NormalOp::new(&o, explicit.as_ref(), params.threads)?;
    let mut stats = SvdStats {
        normal_side: if o.swapped { "AAt" } else { "AtA" }.into(),
        explicit_normal: explicit.is_some(),
        ..SvdStats::default()
    };
    let anorm = match params.anorm {
        Some(x) => x,
        None => {
            let (est, products) = norm_estimate(&normal, params.seed);
            stats.norm_products = products;
            if est > 0.0 {
                est
            } else {
                1.0
            }
        }
    };
    stats.anorm = anorm;
    let diag = match &explicit {
        Some(c) => Some(c.diagonal()),
        None => o.normal_diagonal(),
    };
    let (mut vals, vs) = stage1(&normal, diag, params, anorm, &mut stats)?;
    let (m, n, nsv) = (o.m(), o.n(), vals.len());
    let mut us = vec![0.0; m * nsv];
    let mut vs = vs;
    for j in 0..nsv {
        vals[j] = left_from_right(&o, &vs[j * n..(j + 1) * n], &mut us[j * m..(j + 1) * m]);
    }
    let limit = params.tol * anorm;
    let mut res: Vec<f64> = (0..nsv)
        .map(|j| {
            triplet_residual(
                &o,
                vals[j],
                &us[j * m..(j + 1) * m],
                &vs[j * n..(j + 1) * n],
            )
        })
        .collect();
    let mut done: Vec<bool> = res.iter().map(|&r| r <= limit).collect();
    let order = target_order(&vals, params.which);
    for &j in &order {
        if done[j] {
            continue;
        }
        let finals: Vec<usize> = order.iter().copied().filter(|&i| done[i]).collect();
        let refined = stage2(&o, params, anorm, vals[j], &us, &vs, j, &finals, &mut stats)?;
        if let Some(Triplet { sigma, u, v }) = refined {
            let r = triplet_residual(&o, sigma, &u, &v);
            if r < res[j] {
                vals[j] = sigma;
                us[j * m..(j + 1) * m].copy_from_slice(&u);
                vs[j * n..(j + 1) * n].copy_from_slice(&v);
                res[j] = r;
                done[j] = r <= limit;
            }
        }
    }
    stats.products = stats.norm_products + stats.stage1_products + stats.stage2_products;
    stats.wall_seconds = t0.elapsed().as_secs_f64();
    let order = target_order(&vals, params.which);
    let pick = |src: &[f64], len: usize| -> Vec<f64> {
        order
            .iter()
            .flat_map(|&j| src[j * len..(j + 1) * len].iter().copied())
            .collect()
    };
    let (u, v) = (pick(&us, m), pick(&vs, n));
    let (u, v) = if o.swapped { (v, u) } else { (u, v) };
    let all = order.iter().filter(|&&j| done[j]).count() >= params.nsv;
    let sol = SvdSolution {
        outcome: if all {
            Outcome::Converged
        } else if stats.products >= params.max_products {
            Outcome::BudgetSpent
        } else {
            Outcome::Incomplete
        },
        wanted: params.nsv,
        values: order.iter().map(|&j| vals[j]).collect(),
        u,
        v,
        residual_norms: order.iter().map(|&j| res[j]).collect(),
        converged: order.iter().map(|&j| done[j]).collect(),
        nrows: a.nrows(),
        ncols: a.ncols(),
        stats,
    };
    Ok(sol)
}

fn check(a: &dyn RectOperator, p: &SvdParams) -> Result<(), JdError> {
    let small = a.nrows().min(a.ncols());
    if small == 0 {
        return Err(JdError::invalid(
            "matrix",
            format!("A is {} x {}: empty", a.nrows(), a.ncols()),
        ));
    }
    if p.nsv == 0 || p.nsv > small {
        return Err(JdError::invalid(
            "nsv",
            format!(
                "nsv must be in 1..={small} (the smaller side of a {} x {} matrix), got {}",
                a.nrows(),
                a.ncols(),
                p.nsv
            ),
        ));
    }
    if !(p.tol > 0.0 && p.tol < 1.0) {
        return Err(JdError::invalid(
            "tol",
            format!("tol must be in (0, 1), got {}", p.tol),
        ));
    }
    if let Some(x) = p.anorm {
        if !(x.is_finite() && x > 0.0) {
            return Err(JdError::invalid(
                "anorm",
                format!("anorm must be positive and finite, got {x}"),
            ));
        }
    }
    if p.threads == 0 {
        return Err(JdError::invalid("threads", "threads must be at least 1"));
    }
    Ok(())
}

/// Triplet indices in target order: descending σ for `Largest`, ascending for
/// `Smallest`.
fn target_order(vals: &[f64], which: SvdWhich) -> Vec<usize> {
    let mut order: Vec<usize> = (0..vals.len()).collect();
    match which {
        SvdWhich::Largest => order.sort_by(|&i, &j| vals[j].total_cmp(&vals[i])),
        SvdWhich::Smallest => order.sort_by(|&i, &j| vals[i].total_cmp(&vals[j])),
    }
    order
}

/// ‖A‖₂ from 30 steps of Lanczos on C = AᵀA (full reorthogonalization), and
/// the products with A it took: the largest eigenvalue of QᵀCQ approaches
/// ‖A‖₂² from below, fast for the extreme end.
fn norm_estimate(op: &NormalOp, seed: u64) -> (f64, u64) {
    let n = op.nrows();
    let steps = n.min(30);
    let mut q = vec![0.0; n * steps];
    let mut cq = vec![0.0; n * steps];
    crate::random::fill(&mut q[..n], seed, 0, 0);
    let mut done = 0;
    for j in 0..steps {
        let nq = norm(&q[j * n..(j + 1) * n]);
        if nq == 0.0 {
            break;
        }
        q[j * n..(j + 1) * n].iter_mut().for_each(|x| *x /= nq);
        let (qs, cqs) = (&q[..(j + 1) * n], &mut cq[j * n..(j + 1) * n]);
        op.apply(&qs[j * n..], cqs);
        done = j + 1;
        if j + 1 == steps {
            break;
        }
        let (head, next) = q.split_at_mut((j + 1) * n);
        let w = &mut next[..n];
        w.copy_from_slice(&cq[j * n..(j + 1) * n]);
        let before = norm(w);
        for _ in 0..2 {
            for i in 0..=j {
                let c = dot(&head[i * n..(i + 1) * n], w);
                w.iter_mut()
                    .zip(&head[i * n..(i + 1) * n])
                    .for_each(|(w, q)| *w -= c * q);
            }
        }
        if norm(w) <= 1e-12 * before {
            break;
        }
    }
    let mut h = vec![0.0; done * done];
    for c in 0..done {
        for r in 0..done {
            let hr = dot(&q[r * n..(r + 1) * n], &cq[c * n..(c + 1) * n]);
            let hc = dot(&q[c * n..(c + 1) * n], &cq[r * n..(r + 1) * n]);
            h[c * done + r] = 0.5 * (hr + hc);
        }
    }
    let top = sym_eig(&h, done).map_or(0.0, |(v, _)| v.last().copied().unwrap_or(0.0));
    (top.max(0.0).sqrt(), done as u64)
}

/// Runs one eigen-solve and takes its pairs, converged or not: a budget spent
/// leaves the best estimates, which the triplet test then judges.
fn eigen_solve<A: Operator + ?Sized>(
    pb: &Problem<'_, A, SelfComm>,
    jd: &JdParams,
) -> Result<Solution, JdError> {
    Solver::problem(pb, jd).run()
}

/// The settings of every eigen-solve of an SVD: JDQMR inner solves (what
/// `Auto` takes without a preconditioner, fixed here for every operator).
fn eigen_params(
    params: &SvdParams,
    nev: usize,
    target: Target,
    conv: ConvTest,
    tol: f64,
) -> JdParams {
    JdParams {
        problem: ProblemSettings {
            nev,
            target,
            tol,
            conv,
            ..Default::default()
        },
        basis: BasisSettings {
            seed: params.seed,
            ..Default::default()
        },
        correction: CorrectionSettings {
            solver: InnerSolver::Qmrs,
            ..Default::default()
        },
        execution: ExecutionSettings {
            threads: params.threads,
            max_matvecs: Some(params.max_products),
            ..Default::default()
        },
        ..JdParams::default()
    }
}

/// Stage 1: the `nsv` wanted eigenpairs (σ², v) of C = AᵀA, Jacobi
/// preconditioned by diag(C) (the squared column norms), each to the
/// residual its triplet needs, ‖Cv − σ²v‖ ≤ tol·‖A‖·σ, or to the rounding
/// floor of C ([`ConvTest::Sqrt`]); what the floor leaves short is stage
/// 2's. Returns σ and V.
fn stage1(
    op: &NormalOp,
    diag: Option<Vec<f64>>,
    params: &SvdParams,
    anorm: f64,
    stats: &mut SvdStats,
) -> Result<(Vec<f64>, Vec<f64>), JdError> {
    let n = op.nrows();
    let diag = diag.filter(|d| d.len() == n && d.iter().all(|x| x.is_finite()));
    let comm = SelfComm::new();
    let mut pb = Problem::new(op, &comm)?;
    if let Some(d) = &diag {
        pb = pb.with_diagonal(d)?;
    }
    let target = match params.which {
        SvdWhich::Largest => Target::Largest,
        SvdWhich::Smallest => Target::Smallest,
    };
    let mut jd = eigen_params(
        params,
        params.nsv,
        target,
        ConvTest::Sqrt,
        params.tol * anorm,
    );
    jd.problem.anorm = Some(anorm * anorm);
    jd.basis.block = params.block;
    jd.preconditioner.kind = if diag.is_some() {
        PrecondChoice::Jacobi
    } else {
        PrecondChoice::None
    };
    let sol = eigen_solve(&pb, &jd)?;
    stats.stage1_products += sol.stats.matvecs;
    stats.outer_iterations += sol.stats.outer_iterations;
    let k = sol.eigenvalues.len().min(params.nsv);
    let sigma = sol.eigenvalues[..k]
        .iter()
        .map(|l| l.max(0.0).sqrt())
        .collect();
    Ok((sigma, sol.eigenvectors[..k * n].to_vec()))
}

/// u = Av/‖Av‖; returns σ = ‖Av‖ (u = 0 when Av = 0).
fn left_from_right(o: &Oriented, v: &[f64], u: &mut [f64]) -> f64 {
    o.a(v, u, 1);
    let s = norm(u);
    if s > 0.0 {
        u.iter_mut().for_each(|x| *x /= s);
    }
    s
}

/// (‖Av − σu‖² + ‖Aᵀu − σv‖²)^½.
fn triplet_residual(o: &Oriented, sigma: f64, u: &[f64], v: &[f64]) -> f64 {
    let mut av = vec![0.0; o.m()];
    let mut atu = vec![0.0; o.n()];
    o.a(v, &mut av, 1);
    o.at(u, &mut atu, 1);
    let r1: f64 = av.iter().zip(u).map(|(a, u)| (a - sigma * u).powi(2)).sum();
    let r2: f64 = atu
        .iter()
        .zip(v)
        .map(|(a, v)| (a - sigma * v).powi(2))
        .sum();
    (r1 + r2).sqrt()
}

/// A singular triplet of the tall A: A v = σ u, Aᵀ u = σ v.
struct Triplet {
    sigma: f64,
    u: Vec<f64>,
    v: Vec<f64>,
}

/// Stage 2 for triplet `j`: the eigenpair of B = [0 A; Aᵀ 0] closest to
/// `sigma0`, from [u_j; v_j]/√2, with [u_i; ±v_i]/√2 of the `finals`
/// deflated, to ‖Bx − θx‖ ≤ tol·‖A‖/2. Returns (σ, u, v) with unit u, v and
/// σ = uᵀAv ≥ 0, or None when the pair has no part on one side.
#[allow(clippy::too_many_arguments)]
fn stage2(
    o: &Oriented,
    params: &SvdParams,
    anorm: f64,
    sigma0: f64,
    us: &[f64],
    vs: &[f64],
    j: usize,
    finals: &[usize],
    stats: &mut SvdStats,
) -> Result<Option<Triplet>, JdError> {
    let (m, n) = (o.m(), o.n());
    let h = std::f64::consts::FRAC_1_SQRT_2;
    let stacked = |i: usize, sign: f64| {
        let u = us[i * m..(i + 1) * m].iter().map(move |x| h * x);
        u.chain(vs[i * n..(i + 1) * n].iter().map(move |x| sign * h * x))
    };
    let x0: Vec<f64> = stacked(j, 1.0).collect();
    let y: Vec<f64> = finals
        .iter()
        .flat_map(|&i| stacked(i, 1.0).chain(stacked(i, -1.0)))
        .collect();
    let op = Augmented { o };
    let comm = SelfComm::new();
    let pb = Problem::new(&op, &comm)?
        .with_initial(&x0)?
        .with_deflation(&y)?;
    let mut jd = eigen_params(
        params,
        1,
        Target::Closest(sigma0),
        ConvTest::Abs,
        0.5 * params.tol * anorm,
    );
    jd.problem.anorm = Some(anorm);
    jd.preconditioner.kind = PrecondChoice::None;
    let sol = eigen_solve(&pb, &jd)?;
    stats.stage2_products += sol.stats.matvecs;
    stats.outer_iterations += sol.stats.outer_iterations;
    stats.refined += 1;
    if sol.eigenvectors.len() < m + n {
        return Ok(None);
    }
    let (u, v) = sol.eigenvectors[..m + n].split_at(m);
    let (nu, nv) = (norm(u), norm(v));
    if nu == 0.0 || nv == 0.0 {
        return Ok(None);
    }
    let u: Vec<f64> = u.iter().map(|x| x / nu).collect();
    let mut v: Vec<f64> = v.iter().map(|x| x / nv).collect();
    let mut av = vec![0.0; m];
    o.a(&v, &mut av, 1);
    let mut sigma = dot(&u, &av);
    if sigma < 0.0 {
        sigma = -sigma;
        v.iter_mut().for_each(|x| *x = -*x);
    }
    Ok(Some(Triplet { sigma, u, v }))
}
