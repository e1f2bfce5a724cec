//! Block Jacobi-Davidson (`seeds/003` §3, Algorithm Block JD) in fine-grain form:
//! every block vector is split by rows over the processes of `comm`, projections
//! take one global sum per iteration.
//!
//! Per outer iteration: (1) orthogonalize the new block against the locked
//! vectors and the basis (block classical Gram-Schmidt, twice, then within the
//! block; dependent vectors are replaced by random ones); (2) W = AT;
//! (3–4) extend H = VᵀAV with one global sum; (5) Rayleigh-Ritz; (6–7) Ritz
//! vectors and residuals of the targeted pairs; convergence test, locking,
//! thick restart (keeping the previous Ritz directions, GD+k style);
//! (8) correction equations by preconditioned BiCGSTAB.

use std::time::Instant;

use faer::Par;
use lblib::{Comm, ReduceOp};
use precond::krylov::Bicgstab;
use precond::{Operator, Preconditioner};

use crate::correction::{
    project_out, usable_correction, Inner, ProjectedOperator, ProjectedPreconditioner,
};
use crate::dense::{gemm_nn, gemm_sub, gemm_tn, orthonormalize_columns, sym_eig};
use crate::jdqmr::{JdQmr, QmrSetup, QmrStop};
use crate::params::{ConvTest, InnerSolver, InnerStop, JdParams, Sizes, Target, Verify};
use crate::random;
use crate::scaling::{scale_for, ScaledOperator};
use crate::solution::{IterationEvent, JdError, Solution, Stats};

/// The problem as seen by one process.
pub struct Problem<'a, A: ?Sized, C: ?Sized> {
    /// A applied to this process's rows (distributed operators exchange halos).
    pub a: &'a A,
    /// Processes sharing the rows of every vector.
    pub comm: &'a C,
    /// Global dimension.
    pub n_global: usize,
    /// Global index of this process's first row.
    pub row_offset: usize,
    /// Local diagonal of A (needed by the Jacobi preconditioner).
    pub diagonal: Option<&'a [f64]>,
    /// A preconditioner of A − σI on the local rows (block-Jacobi across processes).
    pub precond: Option<&'a (dyn Preconditioner + Send + Sync)>,
}

/// Observer of per-iteration events.
pub type Observer<'o> = &'o mut dyn FnMut(&IterationEvent);

/// Inputs of one correction phase handed to a [`CorrectionBackend`].
pub(crate) struct CorrectionCtx<'x> {
    /// Selected pairs, extreme-most first: Ritz vectors and residuals (fine layout).
    pub x: &'x [f64],
    pub r: &'x [f64],
    /// Shift of each correction equation.
    pub shifts: Vec<f64>,
    /// Absolute inner-residual floor of each equation (no need to go below).
    pub floors: Vec<f64>,
    /// Relative inner threshold 2^−iter.
    pub rel: f64,
    pub maxits: usize,
    pub inner: InnerStop,
}

/// Step (8) done elsewhere (coarse-grain / multigrain solve groups).
pub(crate) trait CorrectionBackend {
    /// Writes the corrections of the `ctx.shifts.len()` selected pairs into the
    /// first columns of `t` (fine layout); returns inner steps per pair.
    fn correct_block(
        &mut self,
        ctx: &CorrectionCtx<'_>,
        t: &mut [f64],
        stats: &mut Stats,
    ) -> Vec<usize>;
    /// A vector (fine layout) was locked: keep a copy in the backend's layout.
    fn on_lock(&mut self, x: &[f64], stats: &mut Stats);
}

struct State<'p, 'a, 'b, A: ?Sized, C: ?Sized> {
    backend: Option<&'b mut dyn CorrectionBackend>,
    pb: &'p Problem<'a, A, C>,
    /// `pb.a` times the internal scale (see [`crate::scaling`]).
    op: ScaledOperator<'a, A>,
    scale_decided: bool,
    /// `prm.target` in scaled units.
    target: Target,
    /// Pairs to lock before the next check: `nev`, then one more per verification.
    goal: usize,
    /// Inside a verification pass (`Verify`), started at this outer iteration.
    verifying: Option<usize>,
    prm: &'p JdParams,
    sz: Sizes,
    n: usize,
    par: Par,
    // locked eigenpairs
    xl: Vec<f64>,
    lam: Vec<f64>,
    res: Vec<f64>,
    // basis, AV and projected matrix (ld = max_basis)
    v: Vec<f64>,
    w: Vec<f64>,
    /// Same size as `v`: target of basis transformations (swapped in).
    scratch: Vec<f64>,
    h: Vec<f64>,
    m: usize,
    // new block and its image
    t: Vec<f64>,
    wt: Vec<f64>,
    // previous Ritz coefficients (m_prev × kp) for GD+k restarts
    prev: Vec<f64>,
    prev_m: usize,
    prev_k: usize,
    anorm: f64,
    stats: Stats,
    random_cols: u64,
    /// Basis repairs done while the basis spans the whole space.
    full_repairs: usize,
    /// [X_locked, x] of the current correction (`qbuf_locked` locked columns valid)
    /// and its right-hand side: reused so that corrections do not allocate.
    qbuf: Vec<f64>,
    qbuf_locked: usize,
    rhs_buf: Vec<f64>,
    start: Instant,
}

/// The p×p identity, column-major.
fn identity(p: usize) -> Vec<f64> {
    let mut c = vec![0.0; p * p];
    for j in 0..p {
        c[j * p + j] = 1.0;
    }
    c
}

/// JDQMR's extra stop: the estimated eigenresidual fell below this fraction of
/// ‖r‖ (PRIMME's JDQMR_ETol uses 0.1).
const QMR_ETOL: f64 = 0.1;

/// Outer iterations of a verification pass before its early stop may apply (the
/// random block needs a few products for its lowest components to show).
const VERIFY_MIN_OUTER: usize = 3;

/// The inner solver's work space.
enum InnerKrylov {
    Bicgstab(Box<Bicgstab>),
    Qmrs(JdQmr),
}

/// Outcome of [`State::orthogonalize_column`].
enum Column {
    Kept,
    Dependent,
    Cancelled,
}

/// A targeted Ritz pair needing a correction.
struct Sel {
    theta: f64,
    rnorm: f64,
}

/// Solves for `params.nev` eigenpairs of the symmetric operator of `pb`.
///
/// Collective over `pb.comm`: every process calls it with its own rows.
///
/// # Errors
/// `InvalidParams` for inconsistent parameters, `NonFinite` when NaN/Inf appear,
/// `NotConverged { partial }` when `max_matvecs` or `max_outer` run out (the
/// partial solution carries locked pairs and the best current estimates).
pub fn solve<A: Operator + ?Sized, C: Comm + ?Sized>(
    pb: &Problem<'_, A, C>,
    params: &JdParams,
    observer: Option<Observer<'_>>,
) -> Result<Solution, JdError> {
    solve_with(pb, params, observer, None)
}

/// [`solve`] with the correction phase delegated to `backend` when given.
pub(crate) fn solve_with<A: Operator + ?Sized, C: Comm + ?Sized>(
    pb: &Problem<'_, A, C>,
    params: &JdParams,
    mut observer: Option<Observer<'_>>,
    backend: Option<&mut dyn CorrectionBackend>,
) -> Result<Solution, JdError> {
    let sz = params.resolve(pb.n_global)?;
    if backend.is_some() && params.inner_solver == InnerSolver::Qmrs {
        return Err(JdError::InvalidParams(
            "inner_solver = qmrs is for serial and fine-grain solves; solve groups use bicgstab"
                .into(),
        ));
    }
    let n = pb.a.nrows();
    let mut st = State::new(pb, params, sz, n);
    st.backend = backend;
    let result = st.run(&mut observer);
    st.stats.wall_seconds = st.start.elapsed().as_secs_f64();
    st.stats.anorm_estimate = st.anorm / st.op.scale();
    result
        .map(|mut s| {
            s.stats = st.stats.clone();
            s
        })
        .map_err(|e| match e {
            JdError::NotConverged {
                wanted,
                mut partial,
            } => {
                partial.stats = st.stats.clone();
                JdError::NotConverged { wanted, partial }
            }
            e => e,
        })
}

impl<'p, 'a, 'b, A: Operator + ?Sized, C: Comm + ?Sized> State<'p, 'a, 'b, A, C> {
    fn new(pb: &'p Problem<'a, A, C>, prm: &'p JdParams, sz: Sizes, n: usize) -> Self {
        let mb = sz.max_basis;
        // Dense tall-skinny kernels run on the calling thread: they are bound by
        // memory bandwidth, and a second rayon pool beside the SpMV pool made 2-thread
        // runs on a loaded 2-core machine up to 8x slower (bench/eigbench).
        let par = Par::Seq;
        Self {
            backend: None,
            pb,
            op: ScaledOperator::new(pb.a),
            scale_decided: false,
            target: prm.target,
            goal: prm.nev,
            verifying: None,
            prm,
            sz,
            n,
            par,
            xl: Vec::with_capacity(n * prm.nev),
            lam: Vec::new(),
            res: Vec::new(),
            v: vec![0.0; n * mb],
            w: vec![0.0; n * mb],
            scratch: vec![0.0; n * mb],
            h: vec![0.0; mb * mb],
            m: 0,
            t: vec![0.0; n * sz.k],
            wt: vec![0.0; n * sz.k],
            prev: Vec::new(),
            prev_m: 0,
            prev_k: 0,
            anorm: prm.anorm.unwrap_or(0.0),
            stats: Stats {
                scale: 1.0,
                ..Stats::default()
            },
            random_cols: 0,
            full_repairs: 0,
            qbuf: Vec::with_capacity(n * (prm.nev + 1)),
            qbuf_locked: 0,
            rhs_buf: Vec::with_capacity(n),
            start: Instant::now(),
        }
    }

    fn nl(&self) -> usize {
        self.lam.len()
    }

    fn allreduce(&mut self, buf: &mut [f64]) {
        self.pb.comm.all_reduce(buf, ReduceOp::Sum);
        self.stats.global_sums += 1;
    }

    fn fill_random(&mut self, col: usize) {
        let id = self.random_cols;
        self.random_cols += 1;
        let n = self.n;
        random::fill(
            &mut self.t[col * n..(col + 1) * n],
            self.prm.seed,
            self.pb.row_offset,
            id,
        );
    }

    /// Target order of Ritz values: indices into `theta`.
    fn order(&self, theta: &[f64]) -> Vec<usize> {
        let mut idx: Vec<usize> = (0..theta.len()).collect();
        match self.target {
            Target::Smallest => idx.sort_by(|&a, &b| theta[a].total_cmp(&theta[b])),
            Target::Largest => idx.sort_by(|&a, &b| theta[b].total_cmp(&theta[a])),
            Target::Closest(s) => {
                idx.sort_by(|&a, &b| (theta[a] - s).abs().total_cmp(&(theta[b] - s).abs()))
            }
        }
        idx
    }

    fn tol_for(&self, theta: f64) -> f64 {
        match self.prm.conv {
            ConvTest::Norm => self.prm.tol * self.anorm.max(f64::MIN_POSITIVE),
            ConvTest::Rel => self.prm.tol * theta.abs(),
            ConvTest::Abs => self.prm.tol * self.op.scale(),
        }
    }

    /// Orthonormalizes the first `b` columns of `t` against the locked vectors,
    /// the basis and each other. Returns how many columns survive.
    ///
    /// Block classical Gram-Schmidt against [X V] twice (each pass reads X and V
    /// once and costs one global sum; the first also carries the original norms),
    /// then CGS2 inside the block.
    fn orthogonalize_block(&mut self, b: usize) -> usize {
        let (n, nl, m) = (self.n, self.nl(), self.m);
        let room = self.pb.n_global.saturating_sub(nl + m);
        let b = b.min(room);
        if b == 0 {
            return 0;
        }
        let mut norms0 = vec![0.0; b];
        // Columns whose first pass cancelled more than half their norm: orthogonalized
        // again against everything below (rounding left along X and V is amplified
        // relative to what remains).
        let mut cancelled = vec![false; b];
        let mut buf = vec![0.0; (nl + m) * b + b];
        for pass in 0..2 {
            let (cx, rest) = buf.split_at_mut(nl * b);
            let (cv, nr) = rest.split_at_mut(m * b);
            gemm_tn(cx, &self.xl, n, nl, &self.t, b, self.par);
            gemm_tn(cv, &self.v, n, m, &self.t, b, self.par);
            let len = if pass == 0 {
                for (j, v) in nr.iter_mut().enumerate() {
                    let col = &self.t[j * n..(j + 1) * n];
                    *v = crate::dense::dot(col, col);
                }
                buf.len()
            } else {
                (nl + m) * b
            };
            self.allreduce(&mut buf[..len]);
            if pass == 0 {
                for (j, v) in norms0.iter_mut().enumerate() {
                    *v = buf[(nl + m) * b + j].sqrt();
                }
            }
            let (cx, rest) = buf.split_at(nl * b);
            let cv = &rest[..m * b];
            gemm_sub(&mut self.t, &self.xl, n, nl, cx, b, self.par);
            gemm_sub(&mut self.t, &self.v, n, m, cv, b, self.par);
            if pass == 0 {
                // DGKS test: a second pass is needed only when some column lost
                // most of its norm (cancellation); one global sum decides.
                let mut after: Vec<f64> = (0..b)
                    .map(|j| {
                        crate::dense::dot(&self.t[j * n..(j + 1) * n], &self.t[j * n..(j + 1) * n])
                    })
                    .collect();
                self.allreduce(&mut after);
                for (j, (a, n0)) in after.iter().zip(&norms0).enumerate() {
                    cancelled[j] = a.sqrt() < 0.5 * n0;
                }
                if !cancelled.iter().any(|&c| c) {
                    break;
                }
            }
        }
        // Within the block: CGS2 column by column, replacing dependent vectors.
        let mut kept = 0;
        for (j, &nb) in norms0.iter().enumerate() {
            if kept != j {
                self.t.copy_within(j * n..(j + 1) * n, kept * n);
            }
            let mut norm_before = nb;
            let mut full = cancelled[j];
            let mut tries = 0;
            loop {
                match self.orthogonalize_column(kept, full, norm_before) {
                    Column::Kept => {
                        kept += 1;
                        break;
                    }
                    Column::Cancelled if !full => {
                        full = true;
                        continue;
                    }
                    _ => {}
                }
                tries += 1;
                if tries > 3 {
                    break;
                }
                self.stats.replaced_vectors += 1;
                self.fill_random(kept);
                full = true;
                norm_before = f64::NAN; // measured inside for random vectors
            }
        }
        kept
    }

    /// Orthogonalizes column `j` of `t` against t[0..j] (and, when `full`, also
    /// against X and V) with two passes, and normalizes it. `Dependent` when what
    /// is left is below 1e-8 of `norm_before` or the second pass still cancelled half
    /// of it (DGKS: rounding dominates); `Cancelled` when a block-only pass cancelled
    /// half the norm (the caller redoes it with `full`).
    fn orthogonalize_column(&mut self, j: usize, full: bool, norm_before: f64) -> Column {
        let (n, nl, m) = (self.n, self.nl(), self.m);
        let ld = if full { nl + m + j } else { j };
        let mut c = vec![0.0; ld + 1];
        let mut norm0 = norm_before;
        let mut pass_norms = [0.0f64; 2];
        for (pass, pass_norm) in pass_norms.iter_mut().enumerate() {
            {
                let (prev, cur) = self.t.split_at_mut(j * n);
                let col = &cur[..n];
                let mut off = 0;
                if full {
                    gemm_tn(&mut c[..nl], &self.xl, n, nl, col, 1, self.par);
                    gemm_tn(&mut c[nl..nl + m], &self.v, n, m, col, 1, self.par);
                    off = nl + m;
                }
                gemm_tn(&mut c[off..off + j], prev, n, j, col, 1, self.par);
                c[ld] = crate::dense::dot(col, col);
            }
            self.allreduce(&mut c);
            *pass_norm = c[ld].sqrt();
            if pass == 0 && !norm0.is_finite() {
                norm0 = *pass_norm;
            }
            let (prev, cur) = self.t.split_at_mut(j * n);
            let col = &mut cur[..n];
            let mut off = 0;
            if full {
                gemm_sub(col, &self.xl, n, nl, &c[..nl], 1, self.par);
                gemm_sub(col, &self.v, n, m, &c[nl..nl + m], 1, self.par);
                off = nl + m;
            }
            gemm_sub(col, prev, n, j, &c[off..off + j], 1, self.par);
        }
        let mut nn = [crate::dense::dot(
            &self.t[j * n..(j + 1) * n],
            &self.t[j * n..(j + 1) * n],
        )];
        self.allreduce(&mut nn);
        let nrm = nn[0].sqrt();
        if !(nrm.is_finite() && nrm > 1e-8 * norm0 && nrm > 0.0) {
            return Column::Dependent;
        }
        if nrm < 0.5 * pass_norms[1] && full {
            return Column::Dependent;
        }
        if nrm < 0.5 * pass_norms[0] && !full {
            return Column::Cancelled;
        }
        self.t[j * n..(j + 1) * n]
            .iter_mut()
            .for_each(|v| *v /= nrm);
        Column::Kept
    }

    /// Chooses the internal scale from the first block product W = AT (T
    /// orthonormal): max|w| · √n estimates ‖A‖ within a small factor.
    fn decide_scale(&mut self, b: usize) -> Result<(), JdError> {
        self.scale_decided = true;
        let n = self.n;
        let mut mx = [self.wt[..n * b].iter().fold(0.0f64, |a, v| a.max(v.abs()))];
        self.pb.comm.all_reduce(&mut mx, ReduceOp::Max);
        self.stats.global_sums += 1;
        let estimate = mx[0] * (self.pb.n_global as f64).sqrt();
        let s = scale_for(estimate);
        if s == 1.0 {
            return Ok(());
        }
        if self.backend.is_some() {
            return Err(JdError::InvalidParams(format!(
                "the matrix norm (about {estimate:e}) is outside [{:e}, {:e}]; solve groups \
                 need a matrix scaled into that range",
                crate::scaling::SCALE_BELOW,
                crate::scaling::SCALE_ABOVE
            )));
        }
        self.op.set_scale(s);
        self.wt[..n * b].iter_mut().for_each(|v| *v *= s);
        if let Some(a) = self.prm.anorm {
            self.anorm = a * s;
        }
        if let Target::Closest(sigma) = self.target {
            self.target = Target::Closest(sigma * s);
        }
        self.stats.scale = s;
        Ok(())
    }

    /// Appends the first `b` columns of `t` (orthonormalized) to the basis.
    fn extend_basis(&mut self, b: usize) -> Result<(), JdError> {
        let (n, m, mb) = (self.n, self.m, self.sz.max_basis);
        self.op
            .apply_block(&self.t[..n * b], &mut self.wt[..n * b], b);
        self.stats.matvecs += b as u64;
        if !self.scale_decided {
            self.decide_scale(b)?;
        }
        // G = [V T]^T W_T, one global sum.
        let ld = m + b;
        let mut gv = vec![0.0; m * b + b * b];
        {
            let (a, c) = gv.split_at_mut(m * b);
            gemm_tn(a, &self.v, n, m, &self.wt, b, self.par);
            gemm_tn(c, &self.t, n, b, &self.wt, b, self.par);
        }
        self.allreduce(&mut gv);
        let mut g = vec![0.0; ld * b];
        for j in 0..b {
            g[j * ld..j * ld + m].copy_from_slice(&gv[j * m..(j + 1) * m]);
            g[j * ld + m..(j + 1) * ld].copy_from_slice(&gv[m * b + j * b..m * b + (j + 1) * b]);
        }
        for j in 0..b {
            for i in 0..ld {
                let val = if i >= m {
                    0.5 * (g[j * ld + i] + g[(i - m) * ld + m + j])
                } else {
                    g[j * ld + i]
                };
                self.h[(m + j) * mb + i] = val;
                self.h[i * mb + m + j] = val;
            }
        }
        self.v[m * n..(m + b) * n].copy_from_slice(&self.t[..n * b]);
        self.w[m * n..(m + b) * n].copy_from_slice(&self.wt[..n * b]);
        self.m += b;
        Ok(())
    }

    /// Compact copy of the m×m projected matrix.
    fn h_compact(&self) -> Vec<f64> {
        let (m, mb) = (self.m, self.sz.max_basis);
        let mut hc = vec![0.0; m * m];
        for j in 0..m {
            hc[j * m..(j + 1) * m].copy_from_slice(&self.h[j * mb..j * mb + m]);
        }
        hc
    }

    /// Replaces the basis by V·C (C: m×p with orthonormal columns), W by W·C and
    /// H by CᵀHC.
    fn transform_basis(&mut self, c: &[f64], p: usize) {
        let (n, m, mb) = (self.n, self.m, self.sz.max_basis);
        let mut nv = std::mem::take(&mut self.scratch);
        gemm_nn(&mut nv, &self.v, n, m, c, p, self.par);
        std::mem::swap(&mut self.v, &mut nv);
        gemm_nn(&mut nv, &self.w, n, m, c, p, self.par);
        std::mem::swap(&mut self.w, &mut nv);
        self.scratch = nv;
        let hc = self.h_compact();
        let mut hcc = vec![0.0; m * p];
        gemm_nn(&mut hcc, &hc, m, m, c, p, Par::Seq);
        let mut newh = vec![0.0; p * p];
        gemm_tn(&mut newh, c, m, p, &hcc, p, Par::Seq);
        for j in 0..p {
            for i in 0..p {
                self.h[j * mb + i] = 0.5 * (newh[j * p + i] + newh[i * p + j]);
            }
        }
        self.m = p;
    }

    fn run(&mut self, observer: &mut Option<Observer<'_>>) -> Result<Solution, JdError> {
        let (n, k) = (self.n, self.sz.k);
        let nev = self.prm.nev;
        for j in 0..k {
            self.fill_random(j);
        }
        let mut b = k;
        let mut solver = match self.prm.inner_solver {
            InnerSolver::Bicgstab => InnerKrylov::Bicgstab(Box::new(Bicgstab::new(n))),
            InnerSolver::Qmrs => InnerKrylov::Qmrs(JdQmr::new(n)),
        };
        let mut xsel = vec![0.0; n * k];
        let mut rsel = vec![0.0; n * k];
        let mut last_ritz: Vec<(f64, f64)>;
        loop {
            // (1)-(4): orthogonalize the new block and extend the basis.
            let tp = Instant::now();
            let kept = self.orthogonalize_block(b);
            if kept > 0 {
                self.extend_basis(kept)?;
            }
            // (5) Rayleigh-Ritz.
            let m = self.m;
            let hc = self.h_compact();
            let (theta_raw, y_raw) =
                sym_eig(&hc, m).ok_or(JdError::NonFinite("projected matrix H"))?;
            let ord = self.order(&theta_raw);
            let theta: Vec<f64> = ord.iter().map(|&i| theta_raw[i]).collect();
            let mut y = vec![0.0; m * m];
            debug_assert_eq!(m, self.m);
            for (p, &i) in ord.iter().enumerate() {
                y[p * m..(p + 1) * m].copy_from_slice(&y_raw[i * m..(i + 1) * m]);
            }
            if self.prm.anorm.is_none() {
                let mx = theta.iter().fold(0.0f64, |a, t| a.max(t.abs()));
                self.anorm = self.anorm.max(mx);
            }
            self.stats.outer_iterations += 1;
            let basis_full = self.nl() + m >= self.pb.n_global;
            // (6)-(7) residuals of targeted pairs, in batches, with locking.
            let remaining = self.goal.saturating_sub(self.nl());
            let mut sel: Vec<Sel> = Vec::new();
            let mut lock: Vec<(usize, f64, f64)> = Vec::new(); // (position, theta, true rnorm)
            let mut lock_x: Vec<f64> = Vec::new();
            let mut wanted_converged = 0;
            let mut in_order = true;
            let mut pos = 0;
            let mut ritz_seen: Vec<(f64, f64)> = Vec::new();
            while sel.len() < k && pos < m {
                let cnt = (k - sel.len())
                    .min(m - pos)
                    .max(if pos < remaining { 1 } else { 0 });
                let cnt = cnt.max(1).min(m - pos);
                let ycols = &y[pos * m..(pos + cnt) * m];
                let mut xb = vec![0.0; n * cnt];
                let mut rb = vec![0.0; n * cnt];
                gemm_nn(&mut xb, &self.v, n, m, ycols, cnt, self.par);
                gemm_nn(&mut rb, &self.w, n, m, ycols, cnt, self.par);
                let mut nrm = vec![0.0; cnt];
                for j in 0..cnt {
                    let th = theta[pos + j];
                    let (xj, rj) = (&xb[j * n..(j + 1) * n], &mut rb[j * n..(j + 1) * n]);
                    rj.iter_mut().zip(xj).for_each(|(r, x)| *r -= th * x);
                    nrm[j] = crate::dense::dot(rj, rj);
                }
                self.allreduce(&mut nrm);
                for j in 0..cnt {
                    let p = pos + j;
                    let th = theta[p];
                    let rn = nrm[j].sqrt();
                    if !rn.is_finite() {
                        return Err(JdError::NonFinite("residual"));
                    }
                    ritz_seen.push((th, rn));
                    let wanted = p < remaining;
                    let conv = rn <= self.tol_for(th) || basis_full;
                    // Lock in target order only: a converged pair behind an unconverged
                    // one waits (without being corrected), so that a missed copy of a
                    // clustered or multiple eigenvalue cannot be overtaken.
                    in_order &= conv;
                    if conv && wanted {
                        wanted_converged += 1;
                        if self.prm.locking && in_order {
                            lock.push((p, th, rn));
                            lock_x.extend_from_slice(&xb[j * n..(j + 1) * n]);
                        }
                        continue;
                    }
                    if conv || sel.len() >= k {
                        continue;
                    }
                    let s = sel.len();
                    xsel[s * n..(s + 1) * n].copy_from_slice(&xb[j * n..(j + 1) * n]);
                    rsel[s * n..(s + 1) * n].copy_from_slice(&rb[j * n..(j + 1) * n]);
                    sel.push(Sel {
                        theta: th,
                        rnorm: rn,
                    });
                }
                pos += cnt;
            }
            last_ritz = ritz_seen.clone();
            if let (Some(since), Some(&(th, rn))) = (self.verifying, ritz_seen.first()) {
                // The verification basis's best pair lies beyond the wanted set.
                let (wk, wr) = self.wanted_boundary();
                if self.stats.outer_iterations >= since + VERIFY_MIN_OUTER
                    && self.key(th) - rn > wk + wr
                {
                    self.stats.verified = Some(true);
                    self.stats.projection_seconds += tp.elapsed().as_secs_f64();
                    self.emit(observer, &ritz_seen, &[]);
                    return Ok(self.finish(&[]));
                }
            }
            let mut m_cur = m;
            let mut y_cur = std::mem::take(&mut y);
            // Verify lock candidates with true residuals (explicit matvecs).
            if !lock.is_empty() {
                let nlk = lock.len();
                let mut ax = vec![0.0; n * nlk];
                self.op.apply_block(&lock_x, &mut ax, nlk);
                self.stats.matvecs += nlk as u64;
                // Explicit Rayleigh quotients ρ = xᵀAx / xᵀx (more accurate than θ
                // from H), then true residuals ‖Ax − ρx‖.
                let mut rq = vec![0.0; 2 * nlk];
                for j in 0..nlk {
                    let (xj, aj) = (&lock_x[j * n..(j + 1) * n], &ax[j * n..(j + 1) * n]);
                    rq[2 * j] = crate::dense::dot(xj, aj);
                    rq[2 * j + 1] = crate::dense::dot(xj, xj);
                }
                self.allreduce(&mut rq);
                let mut nrm = vec![0.0; nlk];
                for (j, item) in lock.iter_mut().enumerate() {
                    if rq[2 * j + 1] > 0.0 && rq[2 * j].is_finite() {
                        item.1 = rq[2 * j] / rq[2 * j + 1];
                    }
                    let th = item.1;
                    let (xj, aj) = (&lock_x[j * n..(j + 1) * n], &mut ax[j * n..(j + 1) * n]);
                    aj.iter_mut().zip(xj).for_each(|(a, x)| *a -= th * x);
                    nrm[j] = crate::dense::dot(aj, aj);
                }
                self.allreduce(&mut nrm);
                let mut accepted = Vec::new();
                // With the whole space in the basis the Ritz pairs are exact up to
                // rounding: accept them once the basis has been repaired twice.
                let full_ok = basis_full && self.full_repairs >= 2;
                for (j, item) in lock.iter_mut().enumerate() {
                    item.2 = nrm[j].sqrt();
                    if item.2 <= self.tol_for(item.1) || full_ok {
                        accepted.push(j);
                    }
                }
                if accepted.len() < lock.len() {
                    if basis_full {
                        // Rounding has eroded V's orthonormality or W = AV: rebuild
                        // both and H, then redo Rayleigh-Ritz without new vectors.
                        self.repair_basis();
                        self.full_repairs += 1;
                        self.stats.projection_seconds += tp.elapsed().as_secs_f64();
                        b = 0;
                        continue;
                    }
                    // The recurrence residual lied (drift): refresh W = AV once.
                    self.refresh_w();
                }
                let mut locked_pos = Vec::new();
                for &j in &accepted {
                    let (p, th, rn) = lock[j];
                    if let Some(be) = self.backend.as_mut() {
                        be.on_lock(&lock_x[j * n..(j + 1) * n], &mut self.stats);
                    }
                    self.xl.extend_from_slice(&lock_x[j * n..(j + 1) * n]);
                    self.lam.push(th);
                    self.res.push(rn);
                    locked_pos.push(p);
                }
                self.stats.locked = self.nl();
                if self.nl() >= self.goal {
                    self.stats.projection_seconds += tp.elapsed().as_secs_f64();
                    self.emit(observer, &ritz_seen, &[]);
                    if self.next_verification() {
                        return Ok(self.finish(&[]));
                    }
                    b = self.fresh_block();
                    continue;
                }
                if !locked_pos.is_empty() {
                    // Remove locked directions: V <- V Y[:, rest].
                    let rest: Vec<usize> = (0..m).filter(|p| !locked_pos.contains(p)).collect();
                    let mut c = vec![0.0; m * rest.len()];
                    for (q, &p) in rest.iter().enumerate() {
                        c[q * m..(q + 1) * m].copy_from_slice(&y_cur[p * m..(p + 1) * m]);
                    }
                    self.transform_basis(&c, rest.len());
                    self.prev_k = 0;
                    // The new basis consists of the remaining Ritz vectors, in order.
                    m_cur = rest.len();
                    y_cur = identity(m_cur);
                }
            } else if !self.prm.locking && wanted_converged >= nev {
                // Soft mode: all wanted pairs converged at once.
                let mut xs = vec![0.0; n * nev];
                gemm_nn(&mut xs, &self.v, n, m, &y_cur[..m * nev], nev, self.par);
                self.xl = xs;
                self.lam = theta[..nev].to_vec();
                self.res = ritz_seen.iter().take(nev).map(|r| r.1).collect();
                self.stats.projection_seconds += tp.elapsed().as_secs_f64();
                return Ok(self.finish(&[]));
            }
            if basis_full && sel.is_empty() {
                // Nothing left to add: every Ritz pair is exact.
                self.stats.projection_seconds += tp.elapsed().as_secs_f64();
                return Ok(self.finish(&[]));
            }
            // Thick restart (GD+k) when the next block does not fit.
            let bnext = sel.len().max(1);
            if self.m + bnext > self.sz.max_basis && self.m > 0 {
                self.restart(&y_cur, m_cur);
            } else {
                // remember this iteration's Ritz coefficients for the next restart
                let kp = k.min(m_cur);
                self.prev = y_cur[..m_cur * kp].to_vec();
                self.prev_m = m_cur;
                self.prev_k = kp;
            }
            self.stats.projection_seconds += tp.elapsed().as_secs_f64();
            // Budget checks.
            if self.stats.matvecs >= self.prm.max_matvecs
                || self.stats.outer_iterations >= self.prm.max_outer
            {
                self.emit(observer, &ritz_seen, &[]);
                return Err(self.not_converged(&last_ritz));
            }
            // (8) correction equations.
            let tc = Instant::now();
            let mut steps = Vec::with_capacity(sel.len());
            if let Some(be) = self.backend.take() {
                let ns = sel.len();
                let ctx = CorrectionCtx {
                    x: &xsel[..n * ns],
                    r: &rsel[..n * ns],
                    shifts: sel.iter().map(|s| self.shift_for(s)).collect(),
                    floors: sel.iter().map(|s| 0.1 * self.tol_for(s.theta)).collect(),
                    rel: 0.5f64.powi(self.stats.outer_iterations.min(1000) as i32),
                    maxits: self.prm.maxits,
                    inner: self.prm.inner,
                };
                steps = be.correct_block(&ctx, &mut self.t, &mut self.stats);
                self.backend = Some(be);
            } else {
                for (i, s) in sel.iter().enumerate() {
                    let st = self.correct(
                        &mut solver,
                        &xsel[i * n..(i + 1) * n],
                        &rsel[i * n..(i + 1) * n],
                        s,
                        i,
                    );
                    steps.push(st);
                }
            }
            b = sel.len();
            if b == 0 {
                // Only unwanted converged pairs are targeted: add random directions.
                b = 1;
                self.fill_random(0);
            }
            self.stats.correction_seconds += tc.elapsed().as_secs_f64();
            self.emit(observer, &ritz_seen, &steps);
        }
    }

    /// Sort key of an eigenvalue: smaller is wanted first.
    fn key(&self, l: f64) -> f64 {
        match self.target {
            Target::Smallest => l,
            Target::Largest => -l,
            Target::Closest(s) => (l - s).abs(),
        }
    }

    /// Key and residual norm of the `nev`-th best locked pair (the boundary of the
    /// wanted set).
    fn wanted_boundary(&self) -> (f64, f64) {
        let mut items: Vec<(f64, f64)> = self
            .lam
            .iter()
            .zip(&self.res)
            .map(|(&l, &r)| (self.key(l), r))
            .collect();
        items.sort_by(|a, b| a.0.total_cmp(&b.0));
        let i = self.prm.nev.min(items.len()).saturating_sub(1);
        items.get(i).copied().unwrap_or((f64::INFINITY, 0.0))
    }

    /// Largest number of locked eigenvalues equal within their residual bounds.
    fn largest_locked_cluster(&self) -> usize {
        let mut items: Vec<(f64, f64)> = self
            .lam
            .iter()
            .copied()
            .zip(self.res.iter().copied())
            .collect();
        items.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (mut best, mut run) = (0, 0);
        for i in 0..items.len() {
            let near = i > 0 && {
                let (a, b) = (items[i - 1], items[i]);
                let tol = a.1 + b.1 + 4.0 * f64::EPSILON * self.anorm.max(a.0.abs()).max(b.0.abs());
                (b.0 - a.0).abs() <= tol
            };
            run = if near { run + 1 } else { 1 };
            best = best.max(run);
        }
        best
    }

    /// Called when `goal` pairs are locked: decides whether the solve is done
    /// (true) or a (further) verification pass starts (false).
    ///
    /// A block Krylov method finds at most k copies of a multiple eigenvalue, so
    /// copies can be missed only when some locked eigenvalue appears at least k
    /// times (`Verify::Auto`). A pass iterates a fresh random block orthogonal to
    /// the locked vectors; the pair it locks is a missed copy when it lies inside
    /// the wanted set beyond its residual bounds, and then another pass follows.
    fn next_verification(&mut self) -> bool {
        if self.verifying.is_some() {
            let j = self.nl() - 1;
            let (kn, rn) = (self.key(self.lam[j]), self.res[j]);
            // The boundary of the wanted set among the pairs locked before this one.
            let (lam_new, res_new) = (self.lam.pop(), self.res.pop());
            let (wk, wr) = self.wanted_boundary();
            self.lam.extend(lam_new);
            self.res.extend(res_new);
            if kn >= wk - (wr + rn) {
                self.stats.verified = Some(true);
                return true;
            }
            self.stats.missed_copies += 1;
        } else {
            let start = match self.prm.verify {
                Verify::Never => false,
                Verify::Always => true,
                Verify::Auto => self.largest_locked_cluster() >= self.sz.k,
            };
            if !start || !self.prm.locking {
                return true;
            }
        }
        if self.nl() >= self.pb.n_global {
            self.stats.verified = Some(true);
            return true;
        }
        self.stats.verification_passes += 1;
        self.stats.verified = Some(false);
        self.verifying = Some(self.stats.outer_iterations);
        self.goal = self.nl() + 1;
        false
    }

    /// Discards the basis and fills the new block with random vectors (the start of
    /// a verification pass); returns the block size.
    fn fresh_block(&mut self) -> usize {
        self.m = 0;
        self.prev_k = 0;
        self.full_repairs = 0;
        for j in 0..self.sz.k {
            self.fill_random(j);
        }
        self.sz.k
    }

    /// Re-orthonormalizes V (CGS2 column by column), recomputes W = AV and
    /// H = VᵀW (one global sum for H).
    fn repair_basis(&mut self) {
        let (n, m, mb) = (self.n, self.m, self.sz.max_basis);
        let mut c = vec![0.0; m + 1];
        let mut kept = 0;
        for j in 0..m {
            if kept != j {
                self.v.copy_within(j * n..(j + 1) * n, kept * n);
            }
            for _pass in 0..2 {
                let (prev, cur) = self.v.split_at_mut(kept * n);
                let col = &mut cur[..n];
                gemm_tn(&mut c[..kept], prev, n, kept, col, 1, self.par);
                c[kept] = 0.0;
                self.pb
                    .comm
                    .all_reduce(&mut c[..kept.max(1)], ReduceOp::Sum);
                self.stats.global_sums += 1;
                gemm_sub(col, prev, n, kept, &c[..kept], 1, self.par);
            }
            let mut nn = [crate::dense::dot(
                &self.v[kept * n..(kept + 1) * n],
                &self.v[kept * n..(kept + 1) * n],
            )];
            self.allreduce(&mut nn);
            let nrm = nn[0].sqrt();
            if nrm > 1e-8 {
                self.v[kept * n..(kept + 1) * n]
                    .iter_mut()
                    .for_each(|v| *v /= nrm);
                kept += 1;
            }
        }
        self.m = kept;
        self.refresh_w();
        let m = self.m;
        let mut g = vec![0.0; m * m];
        gemm_tn(&mut g, &self.v, n, m, &self.w, m, self.par);
        self.allreduce(&mut g);
        for j in 0..m {
            for i in 0..m {
                self.h[j * mb + i] = 0.5 * (g[j * m + i] + g[i * m + j]);
            }
        }
        self.prev_k = 0;
    }

    /// Recomputes W = AV explicitly (removes drift of the recurrence).
    fn refresh_w(&mut self) {
        let (n, m) = (self.n, self.m);
        if m == 0 {
            return;
        }
        let mut w = std::mem::take(&mut self.w);
        self.op.apply_block(&self.v[..n * m], &mut w[..n * m], m);
        self.w = w;
        self.stats.matvecs += m as u64;
    }

    /// Thick restart: keep `restart` Ritz vectors plus the previous iteration's
    /// Ritz directions (GD+k), orthonormalized in coefficient space.
    fn restart(&mut self, y: &[f64], m: usize) {
        let keep = self.sz.restart.min(m);
        let kp = if self.prm.restart_keep_previous && self.prev_k > 0 && self.prev_m <= m {
            self.prev_k
        } else {
            0
        };
        let p = keep + kp;
        let mut c = vec![0.0; m * p];
        c[..m * keep].copy_from_slice(&y[..m * keep]);
        for j in 0..kp {
            let dst = &mut c[(keep + j) * m..(keep + j + 1) * m];
            dst[..self.prev_m].copy_from_slice(&self.prev[j * self.prev_m..(j + 1) * self.prev_m]);
        }
        let p = orthonormalize_columns(&mut c, m, p)
            .min(self.sz.max_basis - self.sz.k.min(self.sz.max_basis - 1));
        self.transform_basis(&c[..m * p], p);
        self.stats.restarts += 1;
        // In the new basis the current Ritz vectors are the first unit vectors.
        let kk = self.sz.k.min(p);
        self.prev = vec![0.0; p * kk];
        for j in 0..kk {
            self.prev[j * p + j] = 1.0;
        }
        self.prev_m = p;
        self.prev_k = kk;
    }

    /// Shift of the correction equation: θ, or σ of `Closest(σ)` while the residual
    /// is still large (JD's usual safeguard for interior targets).
    fn shift_for(&self, s: &Sel) -> f64 {
        match self.target {
            Target::Closest(sigma) if s.rnorm > 1e-2 * self.anorm.max(f64::MIN_POSITIVE) => sigma,
            _ => s.theta,
        }
    }

    /// Solves the correction equation for one targeted pair into column `slot` of t.
    /// Returns the inner steps taken.
    fn correct(
        &mut self,
        solver: &mut InnerKrylov,
        x: &[f64],
        r: &[f64],
        s: &Sel,
        slot: usize,
    ) -> usize {
        let n = self.n;
        let nl = self.nl();
        // Q = [X_locked, x] in a buffer kept across corrections: the locked part is
        // copied again only after a lock, x every time.
        let mut q = std::mem::take(&mut self.qbuf);
        if self.qbuf_locked != nl || q.len() < n * nl {
            q.clear();
            q.extend_from_slice(&self.xl[..n * nl]);
            self.qbuf_locked = nl;
        }
        q.truncate(n * nl);
        q.extend_from_slice(x);
        let nq = nl + 1;
        let shift = self.shift_for(s);
        let inner = match (self.prm.precond, self.pb.diagonal, self.pb.precond) {
            (crate::params::PrecondChoice::None, _, _) => Inner::Identity,
            (crate::params::PrecondChoice::Jacobi, Some(d), _) => {
                // (D − θ/s)⁻¹ = s (sD − θ)⁻¹: proportional to the preconditioner of
                // the scaled operator, which the Krylov solvers do not mind.
                Inner::Diagonal {
                    diag: d,
                    shift: shift / self.op.scale(),
                }
            }
            (_, _, Some(m)) => Inner::Built(m),
            _ => Inner::Identity,
        };
        let op = ProjectedOperator {
            a: &self.op,
            comm: self.pb.comm,
            q: &q,
            nq,
            n,
            shift,
            coef: std::cell::RefCell::new(vec![0.0; nq]),
            global_sums: std::cell::Cell::new(0),
        };
        let mut pc = ProjectedPreconditioner {
            inner,
            comm: self.pb.comm,
            q: &q,
            nq,
            n,
            kx: Vec::new(),
            mu: 0.0,
            coef: std::cell::RefCell::new(vec![0.0; nq]),
            global_sums: std::cell::Cell::new(0),
        };
        pc.prepare();
        if !matches!(pc.inner, Inner::Identity) {
            self.stats.precond_applications += 1;
        }
        let mut rhs = std::mem::take(&mut self.rhs_buf);
        rhs.clear();
        rhs.extend(r.iter().map(|v| -v));
        let mut coef = vec![0.0; nq];
        project_out(&q, n, nq, &mut rhs, &mut coef, self.pb.comm);
        self.stats.global_sums += 1;
        let maxits = self.prm.maxits;
        let floor = 0.1 * self.tol_for(s.theta);
        let (steps, ok) = match solver {
            InnerKrylov::Bicgstab(solver) => {
                let r0 = solver.start(&op, self.pb.comm, &rhs, None);
                let it = self.stats.outer_iterations.min(1000) as i32;
                let rel = 0.5f64.powi(it);
                let t_start = self.pb.comm.wtime();
                let mut steps = 0;
                if r0 > 0.0 && maxits > 0 {
                    // A breakdown ends the solve; the best iterate is kept by the solver.
                    while let Ok(rn) = solver.step(&op, &pc, self.pb.comm) {
                        steps += 1;
                        let done = match self.prm.inner {
                            InnerStop::Adaptive => rn <= rel * r0 || rn <= floor,
                            InnerStop::Fixed => rn == 0.0,
                            InnerStop::Time { seconds } => {
                                let elapsed = self.pb.comm.wtime() - t_start;
                                let mut flag = [f64::from(u8::from(elapsed >= seconds))];
                                self.pb.comm.broadcast(&mut flag, 0);
                                self.stats.global_sums += 1;
                                flag[0] > 0.0
                            }
                        };
                        if done || steps >= maxits {
                            break;
                        }
                    }
                }
                let after = solver.stats();
                // `start` resets the solver's counters: `after` covers this equation only.
                self.stats.matvecs += after.matvecs as u64;
                self.stats.precond_applications += after.precond_applies as u64;
                self.stats.global_sums += after.global_sums as u64;
                let tcol = &mut self.t[slot * n..(slot + 1) * n];
                let sol = solver.solution();
                let ok = usable_correction(steps, sol);
                if ok {
                    tcol.copy_from_slice(sol);
                }
                (steps, ok)
            }
            InnerKrylov::Qmrs(solver) => {
                // QMRs solves for s with right-hand side r; the correction is −s.
                rhs.iter_mut().for_each(|v| *v = -*v);
                let mut rn = [crate::dense::dot(&rhs, &rhs)];
                self.pb.comm.all_reduce(&mut rn, ReduceOp::Sum);
                self.stats.global_sums += 1;
                let setup = QmrSetup {
                    theta: s.theta,
                    shift,
                    target: self.target,
                    maxits,
                    conv_tol: self.tol_for(s.theta),
                    ltol: f64::EPSILON * self.anorm.max(s.theta.abs()),
                    etol_factor: QMR_ETOL,
                    fixed: self.prm.inner == InnerStop::Fixed,
                };
                let out = solver.solve(&op, &pc, self.pb.comm, &rhs, rn[0].sqrt(), &setup);
                let st = &mut self.stats.inner_stops;
                *match out.stop {
                    QmrStop::Steps => &mut st.steps,
                    QmrStop::Linear => &mut st.linear,
                    QmrStop::Stagnation => &mut st.stagnation,
                    QmrStop::Ritz => &mut st.ritz,
                    QmrStop::Converged => &mut st.converged,
                    QmrStop::Reduced => &mut st.reduced,
                    QmrStop::Breakdown => &mut st.breakdown,
                } += 1;
                self.stats.matvecs += out.matvecs;
                self.stats.precond_applications += if matches!(pc.inner, Inner::Identity) {
                    0
                } else {
                    out.precond_applies
                };
                self.stats.global_sums += out.global_sums;
                let tcol = &mut self.t[slot * n..(slot + 1) * n];
                let sol = solver.solution();
                let ok = usable_correction(out.steps, sol);
                if ok {
                    tcol.iter_mut().zip(sol).for_each(|(t, s)| *t = -s);
                } else {
                    rhs.iter_mut().for_each(|v| *v = -*v);
                }
                (out.steps, ok)
            }
        };
        self.stats.inner_steps += steps as u64;
        self.stats.global_sums += op.global_sums.get() + pc.global_sums.get();
        if !ok {
            // Davidson step: t = (I − QQᵀ) K⁻¹ (−r).
            let tcol = &mut self.t[slot * n..(slot + 1) * n];
            pc.apply(&rhs, tcol);
            if !matches!(pc.inner, Inner::Identity) {
                self.stats.precond_applications += 1;
            }
        }
        self.qbuf = q;
        self.rhs_buf = rhs;
        steps
    }

    fn emit(&mut self, observer: &mut Option<Observer<'_>>, ritz: &[(f64, f64)], steps: &[usize]) {
        if let Some(obs) = observer.as_mut() {
            let ev = IterationEvent {
                outer_iteration: self.stats.outer_iterations,
                matvecs: self.stats.matvecs,
                basis_size: self.m,
                nconverged: self.nl(),
                ritz_values: ritz.iter().map(|r| r.0 / self.op.scale()).collect(),
                residual_norms: ritz.iter().map(|r| r.1 / self.op.scale()).collect(),
                inner_steps: steps.to_vec(),
                elapsed_seconds: self.start.elapsed().as_secs_f64(),
            };
            obs(&ev);
        }
    }

    /// Assembles the solution from the locked pairs (plus `extra` estimates),
    /// ordered by the target.
    fn finish(&mut self, extra: &[(f64, f64, bool)]) -> Solution {
        let n = self.n;
        let mut items: Vec<(f64, f64, bool, usize)> = (0..self.nl())
            .map(|j| (self.lam[j], self.res[j], true, j))
            .collect();
        let base = self.nl();
        for (i, e) in extra.iter().enumerate() {
            items.push((e.0, e.1, e.2, base + i));
        }
        items.sort_by(|a, b| self.key(a.0).total_cmp(&self.key(b.0)));
        items.truncate(self.prm.nev);
        let mut vecs = vec![0.0; n * items.len()];
        for (q, it) in items.iter().enumerate() {
            vecs[q * n..(q + 1) * n].copy_from_slice(&self.xl[it.3 * n..(it.3 + 1) * n]);
        }
        let s = self.op.scale();
        Solution {
            eigenvalues: items.iter().map(|i| i.0 / s).collect(),
            residual_norms: items.iter().map(|i| i.1 / s).collect(),
            converged: items.iter().map(|i| i.2).collect(),
            eigenvectors: vecs,
            n_local: n,
            stats: self.stats.clone(),
        }
    }

    /// Partial result: locked pairs plus the current best Ritz estimates.
    fn not_converged(&mut self, ritz: &[(f64, f64)]) -> JdError {
        let n = self.n;
        let m = self.m;
        let need = self.prm.nev.saturating_sub(self.nl()).min(m);
        let mut extra = Vec::new();
        if need > 0 {
            let hc = self.h_compact();
            if let Some((th, yv)) = sym_eig(&hc, m) {
                let ord = self.order(&th);
                let mut xs = vec![0.0; n * need];
                let mut ys = vec![0.0; m * need];
                for (q, &i) in ord.iter().take(need).enumerate() {
                    ys[q * m..(q + 1) * m].copy_from_slice(&yv[i * m..(i + 1) * m]);
                }
                gemm_nn(&mut xs, &self.v, n, m, &ys, need, self.par);
                self.xl.extend_from_slice(&xs);
                for (q, &i) in ord.iter().take(need).enumerate() {
                    let rn = ritz.get(q).map(|r| r.1).unwrap_or(f64::NAN);
                    extra.push((th[i], rn, false));
                }
            }
        }
        let partial = self.finish(&extra);
        JdError::NotConverged {
            wanted: self.prm.nev,
            partial: Box::new(partial),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lblib::SelfComm;
    use matrices::CsrMatrix;
    use precond::CsrOperator;

    /// Largest |QᵀQ − I| of the columns of `q` (n rows, p columns).
    fn ortho_error(q: &[f64], n: usize, p: usize) -> f64 {
        let mut worst = 0.0f64;
        for i in 0..p {
            for j in 0..p {
                let d = crate::dense::dot(&q[i * n..(i + 1) * n], &q[j * n..(j + 1) * n]);
                worst = worst.max((d - if i == j { 1.0 } else { 0.0 }).abs());
            }
        }
        worst
    }

    /// A block whose columns lie almost in span(V) and almost on each other (the
    /// corrections of converged pairs of a multiple eigenvalue): every kept column
    /// must come out orthonormal to V and to the others at rounding level, however
    /// much cancelled (regression: a within-block cancellation used to leave 1e-8
    /// components along V, and a Ritz value of 3e4 appeared on gr_30_30, ‖A‖ = 12).
    #[test]
    fn orthogonalize_block_survives_cancellation() {
        let n = 400;
        let t: Vec<(usize, usize, f64)> = (0..n).map(|i| (i, i, 1.0 + i as f64)).collect();
        let a = CsrMatrix::from_triplets(n, n, &t).unwrap();
        let op = CsrOperator::new(&a, 1).unwrap();
        let comm = SelfComm::new();
        let pb = Problem {
            a: &op,
            comm: &comm,
            n_global: n,
            row_offset: 0,
            diagonal: None,
            precond: None,
        };
        let prm = JdParams::default();
        let sz = prm.resolve(n).unwrap();
        let mut st = State::new(&pb, &prm, sz, n);
        // V: 10 orthonormal columns from random vectors.
        let m = 10;
        for j in 0..m {
            st.fill_random(0);
            st.m = j;
            assert_eq!(st.orthogonalize_block(1), 1);
            let col = st.t[..n].to_vec();
            st.v[j * n..(j + 1) * n].copy_from_slice(&col);
        }
        st.m = m;
        assert!(ortho_error(&st.v, n, m) < 1e-14);
        // Block: t0 = r0, t1 = r0 + 1e-7 r1 (cancels inside the block), t2 = v0 + 1e-9 r2
        // (numerically in span V), t3 = v1 + v2 + 1e-6 r1 (cancels against V).
        let k = sz.k;
        let mut r = vec![0.0; 3 * n];
        for (c, chunk) in r.chunks_exact_mut(n).enumerate() {
            random::fill(chunk, 7, 0, 100 + c as u64);
        }
        let v = st.v.clone();
        let cols = [
            r[..n].to_vec(),
            (0..n).map(|i| r[i] + 1e-7 * r[n + i]).collect::<Vec<f64>>(),
            (0..n).map(|i| v[i] + 1e-9 * r[2 * n + i]).collect(),
            (0..n)
                .map(|i| v[n + i] + v[2 * n + i] + 1e-6 * r[n + i])
                .collect(),
        ];
        for (j, c) in cols.iter().enumerate().take(k) {
            st.t[j * n..(j + 1) * n].copy_from_slice(c);
        }
        let kept = st.orthogonalize_block(k.min(4));
        assert!(kept >= 3, "kept {kept}");
        let mut q = st.v[..m * n].to_vec();
        q.extend_from_slice(&st.t[..kept * n]);
        let err = ortho_error(&q, n, m + kept);
        assert!(err < 1e-13, "[V T] loses orthonormality: {err:e}");
    }
}
