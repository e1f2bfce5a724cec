//! Block JDQMR: the correction equations of a block, each solved by JDQMR's
//! symmetric QMR with its dynamic stopping rules (see [`crate::correction::jdqmr`]),
//! advancing in lockstep so that every step applies A and the preconditioner to
//! all active equations at once (one blocked SpMV and one blocked K⁻¹ instead of
//! one per equation), and reduces the scalars of all equations together (four
//! global sums per step for the block).
//!
//! Equation j is (I − Q_jQ_jᵀ)(A − σ_j I) s_j = r_j with Q_j = [X_locked, x_j]
//! and the preconditioner K unprojected: PRIMME's projectors for JDQMR (left
//! ones only; `correction.c`, `setup_JD_projectors`, the choice of its
//! `JDQMR_ETol` preset). Without a preconditioner the directions stay
//! orthogonal to Q_j, which makes this the two-sided equation of
//! [`crate::correction`]. With one, the right projection of
//! [`crate::correction`] (oblique for x_j, orthogonal for X_locked) would cost
//! K⁻¹x_j, two passes over x_j and K⁻¹x_j and two over X_locked per step; the
//! left-only form needs none of them, and the components of s_j along Q_j leave
//! in the outer orthogonalization (lap3d:64: the same 455 matvecs and outer
//! iterations; lap3d:40, stencil27:48: the same matvecs). The step's
//! σ = dᵀ(I − QQᵀ)(A − σI)d then takes Q_jᵀd, as d is not orthogonal to Q_j.
//! Interior targets (σ inside the spectrum) keep the two-sided form of
//! [`crate::correction`] with its oblique projection for x_j: K ≈ A − σI
//! amplifies x_j in K⁻¹g there (see [`BlockJdQmr::left_only`]).
//! Projections, recurrences and inner products of a step are fused into few
//! passes over each equation's vectors.
//!
//! With a mass matrix M (K x = λ M x, Q M-orthonormal) equation j is
//! (I − MQ_jQ_jᵀ)(K − σ_j M)(I − Q_jQ_jᵀM) s_j = r_j, as in
//! [`crate::correction`]: the operator's output is projected with coefficients
//! Q_jᵀw and the vectors MQ_j subtracted, the preconditioner's with coefficients
//! (MQ_j)ᵀz and Q_j subtracted, and K⁻¹Mx_j replaces K⁻¹x_j in the oblique
//! part (K = I included: the Krylov vectors must stay M-orthogonal to Q_j).
//! Each step applies M to the block's directions once. This is the two-sided
//! form of [`crate::correction`], with its oblique projection for x_j.
//!
//! An equation that stops leaves the active set (its vectors move behind the
//! active ones), so that the blocked products always see contiguous columns. The
//! scalar recurrences of each equation are those of [`crate::correction::jdqmr`].

use lblib::{Comm, ReduceOp};
use precond::{Operator, Preconditioner};

use crate::correction::jdqmr::{stop_rule, Estimates, QmrOutcome, QmrSetup, QmrStop};
use crate::correction::{shifted_jacobi, shifted_jacobi_mass, Inner};
use crate::dense::{dot, gemm_sub, gemm_tn};
use crate::params::Target;

/// Scalar state of one equation's QMRs recurrences.
#[derive(Clone, Copy)]
struct Recur {
    /// Which equation (column of the inputs).
    idx: usize,
    rnorm: f64,
    rho_prev: f64,
    tau_prev: f64,
    theta_prev: f64,
    delta_prev: f64,
    beta_prev: f64,
    phi_prev: f64,
    psi_prev: f64,
    gamma_prev: f64,
    eval_prev: f64,
    eres: f64,
    /// ‖g‖² (reduced) after the last step: ρ without a preconditioner.
    gg: f64,
    out: QmrOutcome,
}

impl Recur {
    /// The estimates of x − s after a step with scalars `sc` (not broken
    /// down) of the equation with setup `s`, the stopping rules, and the
    /// recurrences moved on. Returns why the equation stops, if it does.
    #[inline]
    fn advance(&mut self, s: &QmrSetup, sc: &StepScalars) -> Option<QmrStop> {
        let (th, tau, gamma) = (sc.th, sc.tau, sc.gamma);
        let eta = sc.alpha / (1.0 + th * th);
        self.out.steps += 1;
        let ts = s.theta - s.shift;
        let delta_c = gamma * self.delta_prev + eta * self.rho_prev;
        let beta_c = self.beta_prev - delta_c;
        let phi = gamma * gamma * self.phi_prev + eta * eta * sc.sigma;
        let psi = gamma * self.psi_prev + gamma * self.phi_prev;
        let gamma_c = self.gamma_prev + 2.0 * psi + phi;
        let ssc = 1.0 + sc.ss;
        let eval = s.shift + (ts + 2.0 * beta_c + gamma_c) / ssc;
        let e2 = tau * tau / ssc + (ts + beta_c) * (ts + beta_c) / ssc
            - (eval - s.shift) * (eval - s.shift);
        let eres_prev = self.eres;
        let eres = if e2 >= 0.0 {
            e2.sqrt()
        } else {
            (tau * tau / ssc).sqrt()
        };
        self.eres = eres;
        self.out.eval = eval;
        self.out.eres = eres;
        let prev = Estimates {
            tau: self.tau_prev,
            eval: self.eval_prev,
            eres: eres_prev,
        };
        let now = Estimates { tau, eval, eres };
        let stop = stop_rule(s, self.out.steps, self.rnorm, prev, now);
        self.eval_prev = eval;
        self.tau_prev = tau;
        self.theta_prev = th;
        self.delta_prev = delta_c;
        self.beta_prev = beta_c;
        self.phi_prev = phi;
        self.psi_prev = psi;
        self.gamma_prev = gamma_c;
        stop
    }
}

/// One active equation's scalars within a step of the block.
#[derive(Clone, Copy, Default)]
struct StepScalars {
    /// σ = dᵀP(A − σ_j)d and x_jᵀw (reduced).
    sigma: f64,
    xw: f64,
    /// α = ρ/σ (0 after a breakdown).
    alpha: f64,
    /// σ or α unusable: the equation stops.
    broke: bool,
    /// The QMRs coefficients θ, τ, γ and the solution update's η = αc².
    th: f64,
    tau: f64,
    gamma: f64,
    eta: f64,
    /// ‖s‖² after the update (reduced).
    ss: f64,
}

/// Inputs of one block solve.
pub(crate) struct BlockEquations<'x> {
    /// Locked vectors (n × `nl`).
    pub locked: &'x [f64],
    pub nl: usize,
    /// Selected Ritz vectors (n × b); their residuals are lent to the solve.
    pub x: &'x [f64],
    /// Shift σ_j and JDQMR setup of every equation (b of each).
    pub shifts: &'x [f64],
    pub setups: &'x [QmrSetup],
    /// Threads for the blocked products.
    pub threads: usize,
    /// The mass matrix of K x = λ M x, with M·X_locked and M·X.
    pub mass: Option<BlockMass<'x>>,
}

/// M, M·X_locked (n × nl) and M·X (n × b) of a generalized block solve.
#[derive(Clone, Copy)]
pub(crate) struct BlockMass<'x> {
    pub op: &'x dyn Operator,
    pub locked: &'x [f64],
    pub x: &'x [f64],
}

impl BlockEquations<'_> {
    /// The vectors subtracted by the operator's projection and taken for the
    /// preconditioner's coefficients: M·X_locked (X_locked without M).
    fn m_locked(&self) -> &[f64] {
        self.mass.map_or(self.locked, |m| m.locked)
    }

    /// M·X (X without M).
    fn m_x(&self) -> &[f64] {
        self.mass.map_or(self.x, |m| m.x)
    }
}

/// The preconditioner of the block: none, Jacobi refreshed per equation
/// (`diag`, a shift per equation), or a built K applied to blocks.
pub(crate) enum BlockInner<'a> {
    Identity,
    Diagonal {
        diag: &'a [f64],
        shifts: Vec<f64>,
    },
    /// Jacobi of K − σ_j M: diag(K) − σ_j diag(M) per equation.
    MassDiagonal {
        diag: &'a [f64],
        mdiag: &'a [f64],
        shifts: Vec<f64>,
    },
    /// A K told each equation's shift ([`Preconditioner::apply_block_shifted`]).
    Shifted {
        pc: &'a (dyn Preconditioner + Send + Sync),
        shifts: Vec<f64>,
    },
}

/// Columns applied per call of [`Preconditioner::apply_block_shifted`] by
/// [`BlockInner::apply`] (their shifts are gathered on the stack).
const SHIFTED_CHUNK: usize = 16;

impl<'a> BlockInner<'a> {
    /// The block form of the per-equation `inner`s of [`crate::correction`].
    pub fn from_inners(inners: &[Inner<'a>]) -> Self {
        match inners.first() {
            Some(Inner::Shifted { pc, .. }) => BlockInner::Shifted {
                pc: *pc,
                shifts: inners
                    .iter()
                    .map(|i| match i {
                        Inner::Shifted { shift, .. } => *shift,
                        _ => 0.0,
                    })
                    .collect(),
            },
            Some(Inner::MassDiagonal { diag, mdiag, .. }) => BlockInner::MassDiagonal {
                diag,
                mdiag,
                shifts: inners
                    .iter()
                    .map(|i| match i {
                        Inner::MassDiagonal { shift, .. } => *shift,
                        _ => 0.0,
                    })
                    .collect(),
            },
            Some(Inner::Diagonal { diag, .. }) => BlockInner::Diagonal {
                diag,
                shifts: inners
                    .iter()
                    .map(|i| match i {
                        Inner::Diagonal { shift, .. } => *shift,
                        _ => 0.0,
                    })
                    .collect(),
            },
            _ => BlockInner::Identity,
        }
    }

    fn is_identity(&self) -> bool {
        matches!(self, BlockInner::Identity)
    }

    /// `dst[:, c] = K_{idx[c]}⁻¹ src[:, c]` for the first `idx.len()` columns.
    fn apply(&self, src: &[f64], dst: &mut [f64], n: usize, idx: &[usize], threads: usize) {
        let na = idx.len();
        let (src, dst) = (&src[..n * na], &mut dst[..n * na]);
        match self {
            BlockInner::Identity => dst.copy_from_slice(src),
            BlockInner::Diagonal { diag, shifts } => {
                for (c, &e) in idx.iter().enumerate() {
                    let cols = c * n..(c + 1) * n;
                    shifted_jacobi(diag, shifts[e], &src[cols.clone()], &mut dst[cols]);
                }
            }
            BlockInner::MassDiagonal {
                diag,
                mdiag,
                shifts,
            } => {
                for (c, &e) in idx.iter().enumerate() {
                    let cols = c * n..(c + 1) * n;
                    shifted_jacobi_mass(diag, mdiag, shifts[e], &src[cols.clone()], &mut dst[cols]);
                }
            }
            BlockInner::Shifted { pc, shifts } => {
                let apply = |idx: &[usize], src: &[f64], dst: &mut [f64]| {
                    for (c, ids) in idx.chunks(SHIFTED_CHUNK).enumerate() {
                        let mut sh = [0.0; SHIFTED_CHUNK];
                        for (s, &e) in sh.iter_mut().zip(ids) {
                            *s = shifts[e];
                        }
                        let cols = c * SHIFTED_CHUNK * n..(c * SHIFTED_CHUNK + ids.len()) * n;
                        pc.apply_block_shifted(
                            &src[cols.clone()],
                            &mut dst[cols],
                            ids.len(),
                            &sh[..ids.len()],
                        );
                    }
                };
                if threads > 1 && na > 1 {
                    let h = na / 2;
                    let ((s1, s2), (d1, d2)) = (src.split_at(h * n), dst.split_at_mut(h * n));
                    let (i1, i2) = idx.split_at(h);
                    rayon::join(|| apply(i1, s1, d1), || apply(i2, s2, d2));
                } else {
                    apply(idx, src, dst);
                }
            }
        }
    }
}

/// What a block solve did.
#[derive(Debug, Default, Clone)]
pub(crate) struct BlockOutcome {
    /// Per equation, in input order.
    pub per_eq: Vec<QmrOutcome>,
    pub matvecs: u64,
    pub precond_applies: u64,
    pub precond_seconds: f64,
    pub global_sums: u64,
    /// Products with the mass matrix (generalized problems).
    pub mass_matvecs: u64,
}

/// The caller's buffers that a block solve borrows (see [`BlockJdQmr::solve`]).
pub(crate) struct Lent<'b> {
    /// The residuals r_j (n × b), overwritten.
    pub r: &'b mut Vec<f64>,
    /// Receives the corrections (n × b).
    pub t: &'b mut Vec<f64>,
    /// Scratch: its n × b entries from `at` on are overwritten.
    pub scratch: &'b mut Vec<f64>,
    pub at: usize,
    /// Holds the solution updates δ: its n × b entries from `spare_at` on are
    /// overwritten (the solver loop lends V's free columns).
    pub spare: &'b mut Vec<f64>,
    pub spare_at: usize,
}

/// Work space of [`BlockJdQmr::solve`], sized once per outer solve: a solve
/// allocates only vectors of the block's size (scalars). One n×kmax array is
/// its own (d; with the oblique projection also K⁻¹MX, sized on first use); the
/// residual g, the solution, the scratch w and the updates δ are the caller's
/// buffers, lent for the solve.
pub(crate) struct BlockJdQmr {
    n: usize,
    kmax: usize,
    /// The residuals r_j on entry, then the QMRs residuals (lent).
    g: Vec<f64>,
    d: Vec<f64>,
    w: Vec<f64>,
    /// The solution updates δ (lent): its columns from entry `so` on.
    delta: Vec<f64>,
    so: usize,
    /// Scratch for A·d and K⁻¹g (lent): its columns from entry `wo` on.
    wo: usize,
    /// The solutions s_j, in the caller's `t` (lent).
    sol: Vec<f64>,
    /// K_j⁻¹ M x_j, by equation (input order; with the oblique projection
    /// only: generalized or interior problems; sized on first use).
    kx: Vec<f64>,
    /// Whether the current solve projects on the left only: see
    /// [`Self::left_only`].
    left: bool,
    /// Whether the preconditioner's projection is oblique for x_j in the
    /// current solve (with K⁻¹Mx_j in `kx`).
    oblique: bool,
    /// X_lockedᵀ K_j⁻¹ x_j (nl per equation) and μ_j = x_jᵀ K_j⁻¹ x_j.
    pl: Vec<f64>,
    mu: Vec<f64>,
    /// Global-sum buffer and X_locked coefficients.
    buf: Vec<f64>,
    cl: Vec<f64>,
    /// M·d of the active directions (generalized problems; sized on first use).
    md: Vec<f64>,
}

/// Views of column `c` (n rows) of a column-major buffer.
fn col(v: &[f64], n: usize, c: usize) -> &[f64] {
    &v[c * n..(c + 1) * n]
}

fn col_mut(v: &mut [f64], n: usize, c: usize) -> &mut [f64] {
    &mut v[c * n..(c + 1) * n]
}

impl BlockJdQmr {
    /// Work space for up to `kmax` equations of `n` local rows (the n×kmax
    /// directions d; g, δ, the solution and the scratch for A·d and K⁻¹g are
    /// lent to each solve).
    pub fn new(n: usize, kmax: usize) -> Self {
        let v = || vec![0.0; n * kmax];
        Self {
            n,
            kmax,
            g: Vec::new(),
            d: v(),
            w: Vec::new(),
            wo: 0,
            delta: Vec::new(),
            so: 0,
            sol: Vec::new(),
            kx: Vec::new(),
            left: false,
            oblique: false,
            pl: Vec::new(),
            mu: vec![0.0; kmax],
            buf: Vec::new(),
            cl: Vec::new(),
            md: Vec::new(),
        }
    }

    /// The search directions d (n × kmax), whose values live only within a
    /// solve: scratch that the solver loop borrows between solves.
    pub fn idle_directions(&mut self) -> &mut [f64] {
        &mut self.d
    }

    /// Whether the equations of a solve are projected on the left only: no
    /// mass matrix, a preconditioner, and an end of the spectrum wanted (see
    /// the module's text). Interior targets keep the two-sided form: there
    /// K ≈ A − σI amplifies x_j in K⁻¹g. (A 6-fold multiplet of lap3d:10 next
    /// to σ that lost a copy with the left-only form loses it with the
    /// two-sided form too, in 4–5 of 6 seeds: harmonic extraction's doing, see
    /// `State::next_verification` in `jd/convergence.rs`.)
    fn left_only(inner: &BlockInner<'_>, eq: &BlockEquations<'_>) -> bool {
        eq.mass.is_none()
            && !inner.is_identity()
            && eq
                .setups
                .iter()
                .all(|s| matches!(s.target, Target::Smallest | Target::Largest))
    }

    /// Sums `self.buf` over the processes.
    fn reduce<C: Comm + ?Sized>(&mut self, comm: &C, out: &mut BlockOutcome) {
        comm.all_reduce(&mut self.buf, ReduceOp::Sum);
        out.global_sums += 1;
    }

    /// X_lockedᵀ of the first `na` columns of `v` into `self.cl` (nl × na, local).
    fn locked_coefs(cl: &mut Vec<f64>, eq: &BlockEquations<'_>, v: &[f64], n: usize, na: usize) {
        Self::coefs_with(cl, eq, eq.locked, v, n, na);
    }

    /// (M·X_locked)ᵀ of the first `na` columns of `v` (X_lockedᵀ without M): the
    /// coefficients of the preconditioner's projection I − QQᵀM.
    fn m_locked_coefs(cl: &mut Vec<f64>, eq: &BlockEquations<'_>, v: &[f64], n: usize, na: usize) {
        Self::coefs_with(cl, eq, eq.m_locked(), v, n, na);
    }

    fn coefs_with(
        cl: &mut Vec<f64>,
        eq: &BlockEquations<'_>,
        locked: &[f64],
        v: &[f64],
        n: usize,
        na: usize,
    ) {
        cl.clear();
        cl.resize(eq.nl * na, 0.0);
        gemm_tn(cl, locked, n, eq.nl, &v[..n * na], na, eq.threads);
    }

    /// Solves the `b = eq.setups.len()` equations for the residuals in
    /// `buf.r` (the first b columns; overwritten); the JD corrections t_j = −s_j
    /// go into the first b columns of `buf.t` (input order), which holds the
    /// solutions during the solve. An equation whose QMRs gives nothing usable
    /// (no step, or a breakdown at once) gets the projected Davidson step
    /// t_j = −P_j K_j⁻¹ r_j. The n×b columns of `buf.scratch` from `buf.at` on
    /// are overwritten.
    pub fn solve<A: Operator + ?Sized, C: Comm + ?Sized>(
        &mut self,
        op: &A,
        comm: &C,
        inner: &BlockInner<'_>,
        eq: &BlockEquations<'_>,
        buf: Lent<'_>,
    ) -> BlockOutcome {
        let (n, b) = (self.n, eq.setups.len());
        let Lent {
            r,
            t,
            scratch,
            at,
            spare,
            spare_at,
        } = buf;
        assert!(
            b <= self.kmax
                && r.len() >= n * b
                && t.len() >= n * b
                && scratch.len() >= at + n * b
                && spare.len() >= spare_at + n * b,
            "block JDQMR: {b} equations for {} columns, buffers {} {} {} (from {at}) {} (from \
             {spare_at})",
            self.kmax,
            r.len(),
            t.len(),
            scratch.len(),
            spare.len()
        );
        self.wo = at;
        self.so = spare_at;
        std::mem::swap(&mut self.delta, spare);
        std::mem::swap(&mut self.w, scratch);
        std::mem::swap(&mut self.g, r);
        std::mem::swap(&mut self.sol, t);
        let out = self.solve_in(op, comm, inner, eq);
        std::mem::swap(&mut self.sol, t);
        std::mem::swap(&mut self.g, r);
        std::mem::swap(&mut self.w, scratch);
        std::mem::swap(&mut self.delta, spare);
        out
    }

    fn solve_in<A: Operator + ?Sized, C: Comm + ?Sized>(
        &mut self,
        op: &A,
        comm: &C,
        inner: &BlockInner<'_>,
        eq: &BlockEquations<'_>,
    ) -> BlockOutcome {
        let (n, nl) = (self.n, eq.nl);
        let b = eq.setups.len();
        let mut out = BlockOutcome::default();
        if b == 0 {
            return out;
        }
        let all: Vec<usize> = (0..b).collect();
        // g = (I − Q_jQ_jᵀ) r_j (in place) and ‖g‖ (two global sums).
        self.project_own(eq, &all, comm, &mut out);
        self.buf.clear();
        self.buf
            .extend((0..b).map(|c| dot(col(&self.g, n, c), col(&self.g, n, c))));
        self.reduce(comm, &mut out);
        let rnorm: Vec<f64> = self.buf.iter().map(|v| v.max(0.0).sqrt()).collect();
        self.sol[..n * b].fill(0.0);
        self.delta[self.so..self.so + n * b].fill(0.0);
        // With the oblique projection: K_j⁻¹Mx_j (M = I without a mass
        // matrix; Mx_j itself for K = I), X_lockedᵀ K_j⁻¹Mx_j and μ_j (one
        // global sum).
        self.mu[..b].fill(0.0);
        self.left = Self::left_only(inner, eq);
        // The preconditioner's projection is oblique for x_j (with K⁻¹Mx_j)
        // with a preconditioner, and with a mass matrix even for K = I, which
        // keeps the projected preconditioner symmetric (see
        // [`crate::correction`]); else orthogonal.
        self.oblique = !self.left && (!inner.is_identity() || eq.mass.is_some());
        if self.oblique {
            if self.kx.len() < n * self.kmax {
                self.kx.resize(n * self.kmax, 0.0);
            }
            let t0 = std::time::Instant::now();
            inner.apply(eq.m_x(), &mut self.kx, n, &all, eq.threads);
            if !inner.is_identity() {
                out.precond_seconds += t0.elapsed().as_secs_f64();
                out.precond_applies += b as u64;
            }
            Self::m_locked_coefs(&mut self.cl, eq, &self.kx, n, b);
            self.buf.clear();
            self.buf.extend_from_slice(&self.cl);
            self.buf
                .extend((0..b).map(|c| dot(col(eq.m_x(), n, c), col(&self.kx, n, c))));
            self.reduce(comm, &mut out);
            self.pl.clear();
            self.pl.extend_from_slice(&self.buf[..nl * b]);
            for e in 0..b {
                let mu = self.buf[nl * b + e];
                self.mu[e] = if mu.is_finite() && mu.abs() > 0.0 {
                    mu
                } else {
                    0.0
                };
            }
        }
        let mut rec: Vec<Recur> = (0..b)
            .map(|e| Recur {
                idx: e,
                rnorm: rnorm[e],
                rho_prev: 0.0,
                tau_prev: rnorm[e],
                theta_prev: 0.0,
                delta_prev: 0.0,
                beta_prev: 0.0,
                phi_prev: 0.0,
                psi_prev: 0.0,
                gamma_prev: 0.0,
                eval_prev: eq.setups[e].theta,
                eres: rnorm[e],
                gg: rnorm[e] * rnorm[e],
                out: QmrOutcome {
                    steps: 0,
                    matvecs: 0,
                    precond_applies: 0,
                    global_sums: 0,
                    stop: QmrStop::Linear,
                    eval: eq.setups[e].theta,
                    eres: rnorm[e],
                },
            })
            .collect();
        // Equations with nothing to solve leave at once.
        let mut na = b;
        let mut c = 0;
        while c < na {
            let r = &rec[c];
            if !(r.rnorm > 0.0 && r.rnorm.is_finite()) || eq.setups[r.idx].maxits == 0 {
                self.retire(&mut rec, c, na);
                na -= 1;
            } else {
                c += 1;
            }
        }
        // d = K⁻¹ g (P K⁻¹ g unless projected on the left only), ρ = gᵀd.
        if na > 0 {
            na = self.next_direction(inner, eq, &mut rec, na, true, comm, &mut out);
        }
        while na > 0 {
            na = self.step(op, eq, &mut rec, na, comm, &mut out);
            if na > 0 {
                na = self.next_direction(inner, eq, &mut rec, na, false, comm, &mut out);
            }
        }
        // Corrections t_j = −s_j in input order (rec[p] describes the equation
        // whose vectors sit in column p).
        out.per_eq = vec![rec[0].out; b];
        let mut fallback = Vec::new(); // (position, equation)
        for (p, r) in rec.iter().enumerate() {
            let mut o = r.out;
            o.matvecs = o.steps as u64;
            out.per_eq[r.idx] = o;
            if !crate::correction::usable_correction(r.out.steps, col(&self.sol, n, p)) {
                fallback.push((p, r.idx));
            }
        }
        // The solutions into input order, in place (cycles of the permutation).
        let mut at: Vec<usize> = rec.iter().map(|r| r.idx).collect();
        for p in 0..b {
            while at[p] != p {
                let q = at[p];
                swap_cols(&mut self.sol, n, p, q);
                at.swap(p, q);
            }
        }
        for e in (0..b).filter(|e| fallback.iter().all(|&(_, f)| f != *e)) {
            col_mut(&mut self.sol, n, e)
                .iter_mut()
                .for_each(|s| *s = -*s);
        }
        if !fallback.is_empty() {
            self.davidson_fallback(op, inner, eq, &fallback, comm, &mut out);
        }
        out
    }

    /// t_j = −P_j K_j⁻¹ P_j r_j for the equations `fallback` ((position, equation)
    /// pairs, by increasing position) whose QMRs gave nothing usable. g's column at
    /// the position still holds P_j r_j after no step; after steps it is
    /// recomputed as P_j (A x_j − θ_j x_j), one matvec each.
    fn davidson_fallback<A: Operator + ?Sized, C: Comm + ?Sized>(
        &mut self,
        op: &A,
        inner: &BlockInner<'_>,
        eq: &BlockEquations<'_>,
        fallback: &[(usize, usize)],
        comm: &C,
        out: &mut BlockOutcome,
    ) {
        let n = self.n;
        let idx: Vec<usize> = fallback.iter().map(|&(_, e)| e).collect();
        // Column c ≤ position p: moving in increasing order never overwrites a
        // position still to be read.
        let mut redo = Vec::new();
        for (c, &(p, e)) in fallback.iter().enumerate() {
            if out.per_eq[e].steps == 0 {
                if c != p {
                    let (lo, hi) = self.g.split_at_mut(p * n);
                    lo[c * n..(c + 1) * n].copy_from_slice(&hi[..n]);
                }
            } else {
                redo.push(c);
            }
        }
        if !redo.is_empty() {
            for &c in &redo {
                let e = idx[c];
                let (x, theta) = (col(eq.x, n, e), eq.setups[e].theta);
                let g = col_mut(&mut self.g, n, c);
                op.apply_block(x, g, 1);
                let mx = col(eq.m_x(), n, e);
                g.iter_mut().zip(mx).for_each(|(g, x)| *g -= theta * x);
            }
            out.matvecs += redo.len() as u64;
            self.project_own(eq, &idx, comm, out);
        }
        let t0 = std::time::Instant::now();
        inner.apply(&self.g, &mut self.w[self.wo..], n, &idx, eq.threads);
        if !inner.is_identity() {
            out.precond_seconds += t0.elapsed().as_secs_f64();
            out.precond_applies += idx.len() as u64;
        }
        if self.left {
            // The unprojected preconditioner: t_j = −K⁻¹g (the outer
            // orthogonalization takes out its part along Q_j).
            for (c, &e) in idx.iter().enumerate() {
                let (w, sol) = (&self.w[self.wo..], &mut self.sol);
                col_mut(sol, n, e)
                    .iter_mut()
                    .zip(col(w, n, c))
                    .for_each(|(t, z)| *t = -z);
            }
            return;
        }
        let (_, _, coefs) = self.oblique_coefs(eq, &idx, comm, out);
        for (c, &e) in idx.iter().enumerate() {
            let (alpha, own) = coefs[c];
            self.subtract_projection(eq, &idx, c, alpha, own);
            let (w, sol) = (&self.w[self.wo..], &mut self.sol);
            col_mut(sol, n, e)
                .iter_mut()
                .zip(col(w, n, c))
                .for_each(|(t, z)| *t = -z);
        }
    }

    /// `g[:, c] ← (I − Q_eQ_eᵀ) g[:, c]` for the equations `idx` (one global sum);
    /// `(I − MQ_eQ_eᵀ)` with a mass matrix.
    fn project_own<C: Comm + ?Sized>(
        &mut self,
        eq: &BlockEquations<'_>,
        idx: &[usize],
        comm: &C,
        out: &mut BlockOutcome,
    ) {
        let (n, nl, na) = (self.n, eq.nl, idx.len());
        Self::locked_coefs(&mut self.cl, eq, &self.g, n, na);
        self.buf.clear();
        self.buf.extend_from_slice(&self.cl);
        self.buf.extend(
            idx.iter()
                .enumerate()
                .map(|(c, &e)| dot(col(eq.x, n, e), col(&self.g, n, c))),
        );
        self.reduce(comm, out);
        gemm_sub(
            &mut self.g[..n * na],
            eq.m_locked(),
            n,
            nl,
            &self.buf[..nl * na],
            na,
            eq.threads,
        );
        for (c, &e) in idx.iter().enumerate() {
            let a = self.buf[nl * na + c];
            let (g, x) = (col_mut(&mut self.g, n, c), col(eq.m_x(), n, e));
            g.iter_mut().zip(x).for_each(|(g, x)| *g -= a * x);
        }
    }

    /// For z = K⁻¹g in `w` (first `idx.len()` columns): the reduced x_jᵀz, gᵀz and
    /// gᵀK⁻¹x_j with X_lockedᵀz (one global sum). Returns per column
    /// (gᵀz, gᵀK⁻¹x_j, (α, own)) folded into ρ, and the coefficients (α of K⁻¹x_j,
    /// `own` of x_j) of the projection; the locked coefficients are left in
    /// `self.cl` (already corrected for the oblique part).
    #[allow(clippy::type_complexity)]
    fn oblique_coefs<C: Comm + ?Sized>(
        &mut self,
        eq: &BlockEquations<'_>,
        idx: &[usize],
        comm: &C,
        out: &mut BlockOutcome,
    ) -> (Vec<f64>, Vec<f64>, Vec<(f64, f64)>) {
        let (n, nl, na) = (self.n, eq.nl, idx.len());
        Self::m_locked_coefs(&mut self.cl, eq, &self.w[self.wo..], n, na);
        self.buf.clear();
        self.buf.extend_from_slice(&self.cl);
        let identity = !self.oblique;
        let mxs = eq.m_x();
        let kx = &self.kx;
        let (w, g) = (&self.w[self.wo..], &self.g);
        let dots: Vec<(f64, f64, f64)> = run_cols(na, eq.threads, |c| {
            let (z, g, e) = (col(w, n, c), col(g, n, c), idx[c]);
            let x = col(mxs, n, e);
            if identity {
                (dot(x, z), dot(g, z), 0.0)
            } else {
                dot3(z, x, g, col(kx, n, e))
            }
        });
        for (xz, gz, gk) in dots {
            self.buf.extend_from_slice(&[xz, gz, gk]);
        }
        self.reduce(comm, out);
        let mut gz = Vec::with_capacity(na);
        let mut gk = Vec::with_capacity(na);
        let mut coefs = Vec::with_capacity(na);
        for (c, &e) in idx.iter().enumerate() {
            let s = &self.buf[nl * na + 3 * c..nl * na + 3 * c + 3];
            let mu = self.mu[e];
            // Oblique for x_j when μ_j is usable, else orthogonal.
            let (alpha, own) = if !identity && mu != 0.0 {
                (s[0] / mu, 0.0)
            } else {
                (0.0, s[0])
            };
            gz.push(s[1]);
            gk.push(s[2]);
            coefs.push((alpha, own));
            let pl = &self.pl;
            for i in 0..nl {
                self.buf[c * nl + i] -= if alpha != 0.0 {
                    alpha * pl[e * nl + i]
                } else {
                    0.0
                };
            }
        }
        self.cl.clear();
        self.cl.extend_from_slice(&self.buf[..nl * na]);
        (gz, gk, coefs)
    }

    /// `w[:, c] −= α K⁻¹x_e + own·x_e + X_locked cl[:, c]` (the projection of
    /// [`Self::oblique_coefs`], one column).
    fn subtract_projection(
        &mut self,
        eq: &BlockEquations<'_>,
        idx: &[usize],
        c: usize,
        alpha: f64,
        own: f64,
    ) {
        let (n, nl, e) = (self.n, eq.nl, idx[c]);
        if nl > 0 {
            let cl = self.cl[c * nl..(c + 1) * nl].to_vec();
            gemm_sub(
                col_mut(&mut self.w[self.wo..], n, c),
                eq.locked,
                n,
                nl,
                &cl,
                1,
                1,
            );
        }
        let (w, x) = (col_mut(&mut self.w[self.wo..], n, c), col(eq.x, n, e));
        if alpha != 0.0 {
            // α ≠ 0 only with the oblique projection, which computed K⁻¹Mx.
            let k = col(&self.kx, n, e);
            w.iter_mut()
                .zip(k)
                .zip(x)
                .for_each(|((w, k), x)| *w -= alpha * k + own * x);
        } else if own != 0.0 {
            w.iter_mut().zip(x).for_each(|(w, x)| *w -= own * x);
        }
    }

    /// z = K⁻¹ g (P_j K⁻¹ g unless projected on the left only) for the active equations,
    /// ρ = gᵀz, and the new direction d = z + β d (d = z when `first`).
    /// Equations with a vanishing ρ stop (breakdown). Returns the number still
    /// active.
    #[allow(clippy::too_many_arguments)]
    fn next_direction<C: Comm + ?Sized>(
        &mut self,
        inner: &BlockInner<'_>,
        eq: &BlockEquations<'_>,
        rec: &mut [Recur],
        mut na: usize,
        first: bool,
        comm: &C,
        out: &mut BlockOutcome,
    ) -> usize {
        let n = self.n;
        if inner.is_identity() && eq.mass.is_none() {
            // z = g (already orthogonal to Q_j) and ρ = ‖g‖²: no pass, no sum.
            // (With M, z = (I − Q_jQ_jᵀM) g is not g.)
            for (c, r) in rec[..na].iter_mut().enumerate() {
                let cols = c * n..(c + 1) * n;
                let (d, g) = (&mut self.d[cols.clone()], &self.g[cols]);
                if first {
                    d.copy_from_slice(g);
                } else {
                    let beta = r.gg / r.rho_prev;
                    d.iter_mut().zip(g).for_each(|(d, g)| *d = g + beta * *d);
                }
                r.rho_prev = r.gg;
            }
            return na;
        }
        let idx: Vec<usize> = rec[..na].iter().map(|r| r.idx).collect();
        let t0 = std::time::Instant::now();
        inner.apply(&self.g, &mut self.w[self.wo..], n, &idx, eq.threads);
        if !inner.is_identity() {
            out.precond_seconds += t0.elapsed().as_secs_f64();
            out.precond_applies += na as u64;
        }
        if self.left {
            return self.left_direction(eq, rec, na, first, comm, out);
        }
        let (gz, gk, mut coefs) = self.oblique_coefs(eq, &idx, comm, out);
        // Locked part of the projection, for the whole block at once.
        if eq.nl > 0 {
            let cl = std::mem::take(&mut self.cl);
            gemm_sub(
                &mut self.w[self.wo..self.wo + n * na],
                eq.locked,
                n,
                eq.nl,
                &cl,
                na,
                eq.threads,
            );
            self.cl = cl;
        }
        // ρ = gᵀ(z − αK⁻¹x − own·x − X c) = gᵀz − α gᵀK⁻¹x (g ⟂ Q_j).
        let mut rho: Vec<f64> = (0..na).map(|c| gz[c] - coefs[c].0 * gk[c]).collect();
        na = self.retire_breakdowns(rec, &mut rho, Some(&mut coefs), na);
        let ids: Vec<usize> = rec[..na].iter().map(|r| r.idx).collect();
        let betas: Vec<f64> = (0..na)
            .map(|c| if first { 0.0 } else { rho[c] / rec[c].rho_prev })
            .collect();
        let kx = &self.kx;
        let (dd, ww) = (ColsMut::new(&mut self.d, n), &self.w[self.wo..]);
        run_cols(na, eq.threads, |c| {
            // SAFETY: each call writes only column c of d.
            let (d, w) = (unsafe { dd.col(c) }, col(ww, n, c));
            let (e, (alpha, own), beta) = (ids[c], coefs[c], betas[c]);
            let x = col(eq.x, n, e);
            if first {
                // d may hold anything (a previous solve's last direction).
                d.fill(0.0);
            }
            if alpha != 0.0 {
                let k = col(kx, n, e);
                for (((d, w), k), x) in d.iter_mut().zip(w).zip(k).zip(x) {
                    *d = (w - alpha * k - own * x) + beta * *d;
                }
            } else {
                for ((d, w), x) in d.iter_mut().zip(w).zip(x) {
                    *d = (w - own * x) + beta * *d;
                }
            }
        });
        for (r, rh) in rec[..na].iter_mut().zip(&rho) {
            r.rho_prev = *rh;
        }
        na
    }

    /// Retires the active equations whose ρ vanished or is not finite
    /// (breakdown): their columns of w, ρ and the projection coefficients move
    /// behind the active ones. Returns the number still active.
    fn retire_breakdowns(
        &mut self,
        rec: &mut [Recur],
        rho: &mut [f64],
        mut coefs: Option<&mut [(f64, f64)]>,
        mut na: usize,
    ) -> usize {
        let n = self.n;
        for c in (0..na).rev() {
            if !rho[c].is_finite() || rho[c] == 0.0 {
                rec[c].out.stop = QmrStop::Breakdown;
                swap_cols(&mut self.w[self.wo..], n, c, na - 1);
                rho.swap(c, na - 1);
                if let Some(coefs) = coefs.as_deref_mut() {
                    coefs.swap(c, na - 1);
                }
                self.retire(rec, c, na);
                na -= 1;
            }
        }
        na
    }

    /// [`Self::next_direction`] with the unprojected preconditioner (left-only
    /// projection): z = K⁻¹g is in `w`; ρ = gᵀz (one global sum), d = z + βd.
    fn left_direction<C: Comm + ?Sized>(
        &mut self,
        eq: &BlockEquations<'_>,
        rec: &mut [Recur],
        mut na: usize,
        first: bool,
        comm: &C,
        out: &mut BlockOutcome,
    ) -> usize {
        let n = self.n;
        let (w, g) = (&self.w[self.wo..], &self.g);
        let rho = run_cols(na, eq.threads, |c| dot(col(g, n, c), col(w, n, c)));
        self.buf.clear();
        self.buf.extend_from_slice(&rho);
        self.reduce(comm, out);
        let mut rho = self.buf.clone();
        na = self.retire_breakdowns(rec, &mut rho, None, na);
        let betas: Vec<f64> = (0..na)
            .map(|c| if first { 0.0 } else { rho[c] / rec[c].rho_prev })
            .collect();
        let (dd, ww) = (ColsMut::new(&mut self.d, n), &self.w[self.wo..]);
        run_cols(na, eq.threads, |c| {
            // SAFETY: each call writes only column c of d.
            let (d, z) = (unsafe { dd.col(c) }, col(ww, n, c));
            if first {
                d.copy_from_slice(z);
            } else {
                xpby(z, betas[c], d);
            }
        });
        for (r, rh) in rec[..na].iter_mut().zip(&rho) {
            r.rho_prev = *rh;
        }
        na
    }

    /// One QMRs step for the `na` active equations: w = P_j(A − σ_j)d_j, the
    /// recurrences, the estimates and the stopping rules. Stopped equations
    /// retire. Returns the number still active.
    fn step<A: Operator + ?Sized, C: Comm + ?Sized>(
        &mut self,
        op: &A,
        eq: &BlockEquations<'_>,
        rec: &mut [Recur],
        mut na: usize,
        comm: &C,
        out: &mut BlockOutcome,
    ) -> usize {
        self.apply_operator(op, eq, na, out);
        let ids: Vec<usize> = rec[..na].iter().map(|r| r.idx).collect();
        self.project_operator_output(eq, &ids, comm, out);
        let mut sc = self.step_lengths(&rec[..na], eq.nl);
        self.reduce_residuals(eq, &ids, &mut rec[..na], &sc, comm, out);
        self.advance_solutions(eq, &rec[..na], &mut sc, comm, out);
        // Estimates and stops, per equation.
        let stop: Vec<Option<QmrStop>> = rec[..na]
            .iter_mut()
            .zip(&sc)
            .map(|(r, sc)| {
                if sc.broke {
                    Some(QmrStop::Breakdown)
                } else {
                    r.advance(&eq.setups[r.idx], sc)
                }
            })
            .collect();
        // Retire the stopped equations, from the back: a column swapped into
        // position c comes from behind it and was examined already.
        for c in (0..na).rev() {
            if let Some(s) = stop[c] {
                rec[c].out.stop = s;
                self.retire(rec, c, na);
                na -= 1;
            }
        }
        na
    }

    /// w = A d for the first `na` directions, and M d into `md` with a mass
    /// matrix (the shift multiplies M·d).
    #[inline]
    fn apply_operator<A: Operator + ?Sized>(
        &mut self,
        op: &A,
        eq: &BlockEquations<'_>,
        na: usize,
        out: &mut BlockOutcome,
    ) {
        let n = self.n;
        op.apply_block(
            &self.d[..n * na],
            &mut self.w[self.wo..self.wo + n * na],
            na,
        );
        out.matvecs += na as u64;
        if let Some(m) = eq.mass {
            if self.md.len() < n * na {
                self.md.resize(n * self.kmax, 0.0);
            }
            m.op.apply_block(&self.d[..n * na], &mut self.md[..n * na], na);
            out.mass_matvecs += na as u64;
        }
    }

    /// Turns w = A d of the active equations `ids` into P_j(A − σ_j)d_j and
    /// leaves the reduced [X_lockedᵀw (nl × na), (σ_j = dᵀP_jw, x_jᵀw) per
    /// equation] in `buf` (one global sum).
    fn project_operator_output<C: Comm + ?Sized>(
        &mut self,
        eq: &BlockEquations<'_>,
        ids: &[usize],
        comm: &C,
        out: &mut BlockOutcome,
    ) {
        let (n, nl, na) = (self.n, eq.nl, ids.len());
        // w −= σ d (σ Md); dᵀw, x_jᵀw and X_lockedᵀw (one global sum). With
        // the left projection only, also x_jᵀd and X_lockedᵀd (d is not
        // orthogonal to Q_j) for σ_j = dᵀ(I − Q_jQ_jᵀ)w.
        let left = self.left;
        let (w, d) = (ColsMut::new(&mut self.w[self.wo..], n), &self.d);
        let shifted = if eq.mass.is_some() { &self.md } else { d };
        let tail: Vec<[f64; 3]> = run_cols(na, eq.threads, |c| {
            // SAFETY: each call writes only column c of w.
            let w = unsafe { w.col(c) };
            let (e, dc) = (ids[c], col(d, n, c));
            shift_dot3(w, col(shifted, n, c), eq.shifts[e], dc, col(eq.x, n, e))
        });
        // X_lockedᵀ(w − σd) = X_lockedᵀw when d ⟂ X_locked (X_lockedᵀMd = 0
        // with M, d being M-orthogonal to X_locked).
        Self::locked_coefs(&mut self.cl, eq, &self.w[self.wo..], n, na);
        self.buf.clear();
        self.buf.extend_from_slice(&self.cl);
        self.buf.extend(tail.iter().flat_map(|t| [t[0], t[1]]));
        if left {
            self.buf.extend(tail.iter().map(|t| t[2]));
            Self::locked_coefs(&mut self.cl, eq, &self.d, n, na);
            self.buf.extend_from_slice(&self.cl);
        }
        self.reduce(comm, out);
        if left {
            // σ_j = dᵀw − (X_lockedᵀd)·(X_lockedᵀw) − (x_jᵀd)(x_jᵀw); then the
            // sum's [X_lockedᵀw, (σ_j, x_jᵀw)] as without the left projection.
            let (tl, ql) = (nl * na, nl * na + 3 * na);
            for c in 0..na {
                let b = &self.buf;
                let locked: f64 = (0..nl).map(|i| b[ql + c * nl + i] * b[c * nl + i]).sum();
                let sigma = b[tl + 2 * c] - locked - b[tl + 2 * na + c] * b[tl + 2 * c + 1];
                self.buf[tl + 2 * c] = sigma;
            }
            self.buf.truncate(tl + 2 * na);
        }
        if nl > 0 {
            let cl = self.buf[..nl * na].to_vec();
            gemm_sub(
                &mut self.w[self.wo..self.wo + n * na],
                eq.m_locked(),
                n,
                nl,
                &cl,
                na,
                eq.threads,
            );
        }
    }

    /// σ_j, x_jᵀw and α_j = ρ_j/σ_j of the active equations `rec` from the
    /// sums [`Self::project_operator_output`] left in `buf`; an equation whose
    /// σ vanishes or is not finite, or whose |α| is outside [ε, 1/ε], broke down.
    fn step_lengths(&self, rec: &[Recur], nl: usize) -> Vec<StepScalars> {
        let na = rec.len();
        let mut sc = vec![StepScalars::default(); na];
        for (c, (sc, r)) in sc.iter_mut().zip(rec).enumerate() {
            let (s, xw) = (self.buf[nl * na + 2 * c], self.buf[nl * na + 2 * c + 1]);
            sc.sigma = s;
            sc.xw = xw;
            let a = r.rho_prev / s;
            if !s.is_finite()
                || s == 0.0
                || !a.is_finite()
                || a.abs() < f64::EPSILON
                || a.abs() > 1.0 / f64::EPSILON
            {
                sc.broke = true;
                continue;
            }
            sc.alpha = a;
        }
        sc
    }

    /// g −= α P w for the active equations `ids` (`rec` their records, `sc`
    /// their step lengths; broken ones are left) and ‖g‖² into their records
    /// (one global sum).
    fn reduce_residuals<C: Comm + ?Sized>(
        &mut self,
        eq: &BlockEquations<'_>,
        ids: &[usize],
        rec: &mut [Recur],
        sc: &[StepScalars],
        comm: &C,
        out: &mut BlockOutcome,
    ) {
        let n = self.n;
        let (g, w) = (ColsMut::new(&mut self.g, n), &self.w[self.wo..]);
        let mxs = eq.m_x();
        let gg: Vec<f64> = run_cols(sc.len(), eq.threads, |c| {
            let s = &sc[c];
            if s.broke {
                return 0.0;
            }
            // SAFETY: each call writes only column c of g.
            let g = unsafe { g.col(c) };
            sub_proj_norm2(g, s.alpha, col(w, n, c), s.xw, col(mxs, n, ids[c]))
        });
        self.buf.clear();
        self.buf.extend_from_slice(&gg);
        self.reduce(comm, out);
        for (r, g) in rec.iter_mut().zip(&self.buf) {
            r.gg = *g;
        }
    }

    /// The QMRs coefficients θ, τ, γ, η of the active equations `rec` (after
    /// [`Self::reduce_residuals`]), the updates δ = γδ + ηd, s += δ and ‖s‖²
    /// (one global sum), all into `sc`; broken equations are left.
    fn advance_solutions<C: Comm + ?Sized>(
        &mut self,
        eq: &BlockEquations<'_>,
        rec: &[Recur],
        sc: &mut [StepScalars],
        comm: &C,
        out: &mut BlockOutcome,
    ) {
        let n = self.n;
        for (s, r) in sc.iter_mut().zip(rec) {
            if s.broke {
                continue;
            }
            let th = r.gg.max(0.0).sqrt() / r.tau_prev;
            let c2 = 1.0 / (1.0 + th * th);
            s.th = th;
            s.tau = r.tau_prev * th * c2.sqrt();
            s.gamma = c2 * r.theta_prev * r.theta_prev;
            s.eta = s.alpha * c2;
        }
        let (delta, sol, d) = (
            ColsMut::new(&mut self.delta[self.so..], n),
            ColsMut::new(&mut self.sol, n),
            &self.d,
        );
        let scs = &*sc;
        let ss: Vec<f64> = run_cols(sc.len(), eq.threads, |c| {
            let s = &scs[c];
            if s.broke {
                return 0.0;
            }
            // SAFETY: each call writes only column c of delta and sol.
            let (delta, sol) = unsafe { (delta.col(c), sol.col(c)) };
            qmr_update(s.gamma, s.eta, col(d, n, c), delta, sol)
        });
        self.buf.clear();
        self.buf.extend_from_slice(&ss);
        self.reduce(comm, out);
        for (s, v) in sc.iter_mut().zip(&self.buf) {
            s.ss = *v;
        }
    }

    /// Moves the equation at position `c` of the `na` active ones to position
    /// na − 1 (swapping its vectors and record with that position's), where it
    /// stays: later retirements only swap among lower positions.
    fn retire(&mut self, rec: &mut [Recur], c: usize, na: usize) {
        let last = na - 1;
        if c != last {
            let n = self.n;
            for v in [&mut self.g, &mut self.d, &mut self.sol] {
                swap_cols(v, n, c, last);
            }
            swap_cols(&mut self.delta[self.so..], n, c, last);
            rec.swap(c, last);
        }
    }
}

/// Runs `f(c)` for the columns c in 0..na and collects the results: on this
/// thread, or with `threads > 1` the two halves of the columns on two threads
/// (the per-equation passes are bound by memory bandwidth, which two cores
/// share less than fully).
fn run_cols<T: Send, F: Fn(usize) -> T + Sync>(na: usize, threads: usize, f: F) -> Vec<T> {
    if threads > 1 && na > 1 {
        let h = na.div_ceil(2);
        let (mut a, b) = rayon::join(
            || (0..h).map(&f).collect::<Vec<T>>(),
            || (h..na).map(&f).collect::<Vec<T>>(),
        );
        a.extend(b);
        a
    } else {
        (0..na).map(f).collect()
    }
}

/// Columns of a column-major buffer that [`run_cols`]'s calls write, each its
/// own column.
#[derive(Clone, Copy)]
struct ColsMut<'a> {
    p: *mut f64,
    n: usize,
    cols: usize,
    _life: std::marker::PhantomData<&'a mut [f64]>,
}

// SAFETY: the calls of `run_cols` touch disjoint columns (see `ColsMut::col`).
unsafe impl Send for ColsMut<'_> {}
unsafe impl Sync for ColsMut<'_> {}

impl<'a> ColsMut<'a> {
    fn new(v: &'a mut [f64], n: usize) -> Self {
        Self {
            p: v.as_mut_ptr(),
            n,
            cols: v.len().checked_div(n).unwrap_or(0),
            _life: std::marker::PhantomData,
        }
    }

    /// Column `c`.
    ///
    /// # Safety
    /// No other reference to column `c` may be alive while the result is.
    unsafe fn col(self, c: usize) -> &'a mut [f64] {
        assert!(c < self.cols, "column {c} of {}", self.cols);
        // SAFETY: in bounds (checked), and exclusive by the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.p.add(c * self.n), self.n) }
    }
}

/// Swaps columns `a` and `b` (n rows each) of `v`.
fn swap_cols(v: &mut [f64], n: usize, a: usize, b: usize) {
    if a == b {
        return;
    }
    let (lo, hi) = (a.min(b), a.max(b));
    let (x, y) = v.split_at_mut(hi * n);
    x[lo * n..(lo + 1) * n].swap_with_slice(&mut y[..n]);
}

/// Four partial sums per reduction, so that fused loops vectorize.
const LANES: usize = 4;

precond::avx2_dispatch! {
    /// (zᵀx, zᵀg, gᵀk) in one pass ([`dot3_body`], AVX2 where present).
    fn dot3(z: &[f64], x: &[f64], g: &[f64], k: &[f64]) -> (f64, f64, f64) = dot3_body;
}

/// The body of [`dot3`].
#[inline(always)]
fn dot3_body(z: &[f64], x: &[f64], g: &[f64], k: &[f64]) -> (f64, f64, f64) {
    let len = z.len() - z.len() % LANES;
    let (mut s, mut t, mut u) = ([0.0f64; LANES], [0.0f64; LANES], [0.0f64; LANES]);
    for (((zv, xv), gv), kv) in z[..len]
        .chunks_exact(LANES)
        .zip(x[..len].chunks_exact(LANES))
        .zip(g[..len].chunks_exact(LANES))
        .zip(k[..len].chunks_exact(LANES))
    {
        for l in 0..LANES {
            s[l] += zv[l] * xv[l];
            t[l] += zv[l] * gv[l];
            u[l] += gv[l] * kv[l];
        }
    }
    let (mut s0, mut t0, mut u0) = (0.0, 0.0, 0.0);
    for i in len..z.len() {
        s0 += z[i] * x[i];
        t0 += z[i] * g[i];
        u0 += g[i] * k[i];
    }
    let sum = |a: [f64; LANES], r: f64| (a[0] + a[1]) + (a[2] + a[3]) + r;
    (sum(s, s0), sum(t, t0), sum(u, u0))
}

precond::avx2_dispatch! {
    /// w ← w − σ·sv (sv = d, or M·d with a mass matrix), returning dᵀw and xᵀw
    /// of the new w, and xᵀd, in one pass ([`shift_dot3_body`], AVX2 where present).
    fn shift_dot3(w: &mut [f64], sv: &[f64], sigma: f64, d: &[f64], x: &[f64]) -> [f64; 3] =
        shift_dot3_body;
}

/// The body of [`shift_dot3`].
#[inline(always)]
fn shift_dot3_body(w: &mut [f64], sv: &[f64], sigma: f64, d: &[f64], x: &[f64]) -> [f64; 3] {
    let len = w.len() - w.len() % LANES;
    let (mut s, mut t, mut u) = ([0.0f64; LANES], [0.0f64; LANES], [0.0f64; LANES]);
    {
        let (wc, sc, dc, xc) = (&mut w[..len], &sv[..len], &d[..len], &x[..len]);
        for (((wv, sv), dv), xv) in wc
            .chunks_exact_mut(LANES)
            .zip(sc.chunks_exact(LANES))
            .zip(dc.chunks_exact(LANES))
            .zip(xc.chunks_exact(LANES))
        {
            for l in 0..LANES {
                wv[l] -= sigma * sv[l];
                s[l] += dv[l] * wv[l];
                t[l] += xv[l] * wv[l];
                u[l] += xv[l] * dv[l];
            }
        }
    }
    let (mut s0, mut t0, mut u0) = (0.0, 0.0, 0.0);
    for i in len..w.len() {
        w[i] -= sigma * sv[i];
        s0 += d[i] * w[i];
        t0 += x[i] * w[i];
        u0 += x[i] * d[i];
    }
    let sum = |a: [f64; LANES], r: f64| (a[0] + a[1]) + (a[2] + a[3]) + r;
    [sum(s, s0), sum(t, t0), sum(u, u0)]
}

precond::avx2_dispatch! {
    /// w ← w − c·x (the projection of x out of w) and g ← g − α w, returning ‖g‖²,
    /// in one pass ([`sub_proj_norm2_body`], AVX2 where present).
    fn sub_proj_norm2(g: &mut [f64], alpha: f64, w: &[f64], c: f64, x: &[f64]) -> f64 =
        sub_proj_norm2_body;
}

/// The body of [`sub_proj_norm2`].
#[inline(always)]
fn sub_proj_norm2_body(g: &mut [f64], alpha: f64, w: &[f64], c: f64, x: &[f64]) -> f64 {
    let len = g.len() - g.len() % LANES;
    let mut s = [0.0f64; LANES];
    {
        let (gc, wc, xc) = (&mut g[..len], &w[..len], &x[..len]);
        for ((gv, wv), xv) in gc
            .chunks_exact_mut(LANES)
            .zip(wc.chunks_exact(LANES))
            .zip(xc.chunks_exact(LANES))
        {
            for l in 0..LANES {
                gv[l] -= alpha * (wv[l] - c * xv[l]);
                s[l] += gv[l] * gv[l];
            }
        }
    }
    let mut s0 = 0.0;
    for i in len..g.len() {
        g[i] -= alpha * (w[i] - c * x[i]);
        s0 += g[i] * g[i];
    }
    (s[0] + s[1]) + (s[2] + s[3]) + s0
}

precond::avx2_dispatch! {
    /// QMRs' solution update δ ← γδ + ηd, s ← s + δ, returning ‖s‖², in one pass
    /// ([`qmr_update_body`], AVX2 where present).
    fn qmr_update(gamma: f64, eta: f64, d: &[f64], delta: &mut [f64], sol: &mut [f64]) -> f64 =
        qmr_update_body;
}

/// The body of [`qmr_update`].
#[inline(always)]
fn qmr_update_body(gamma: f64, eta: f64, d: &[f64], delta: &mut [f64], sol: &mut [f64]) -> f64 {
    let len = d.len() - d.len() % LANES;
    let mut acc = [0.0f64; LANES];
    {
        let (dc, lc, sc) = (&d[..len], &mut delta[..len], &mut sol[..len]);
        for ((dv, lv), sv) in dc
            .chunks_exact(LANES)
            .zip(lc.chunks_exact_mut(LANES))
            .zip(sc.chunks_exact_mut(LANES))
        {
            for l in 0..LANES {
                lv[l] = gamma * lv[l] + eta * dv[l];
                sv[l] += lv[l];
                acc[l] += sv[l] * sv[l];
            }
        }
    }
    let mut tail = 0.0;
    for i in len..d.len() {
        delta[i] = gamma * delta[i] + eta * d[i];
        sol[i] += delta[i];
        tail += sol[i] * sol[i];
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

precond::avx2_dispatch! {
    /// d ← z + β·d, QMRs' next direction ([`xpby_body`], AVX2 where present).
    fn xpby(z: &[f64], beta: f64, d: &mut [f64]) = xpby_body;
}

/// The body of [`xpby`].
#[inline(always)]
fn xpby_body(z: &[f64], beta: f64, d: &mut [f64]) {
    d.iter_mut().zip(z).for_each(|(d, z)| *d = z + beta * *d);
}

/// Block JDQMR as the loop's correction method (serial and fine grain): the
/// equations of the selected pairs solved together over `comm`.
pub(crate) struct Blocked<'c, C: ?Sized> {
    comm: &'c C,
    solver: BlockJdQmr,
}

impl<'c, C: ?Sized> Blocked<'c, C> {
    /// For `n` local rows over `comm` and at most `kmax` equations.
    pub(crate) fn new(comm: &'c C, n: usize, kmax: usize) -> Self {
        Self {
            comm,
            solver: BlockJdQmr::new(n, kmax),
        }
    }
}

impl<C: Comm + ?Sized> super::Correction for Blocked<'_, C> {
    fn correct(&mut self, step: super::Step<'_>, stats: &mut crate::solution::Stats) -> Vec<usize> {
        let super::Step {
            ctx,
            x,
            r,
            t,
            space,
        } = step;
        let (n, b) = (self.solver.n, ctx.shifts.len());
        let inner = BlockInner::from_inners(&space.inners);
        let eq = BlockEquations {
            locked: space.locked,
            nl: space.nl,
            x: &x[..n * b],
            shifts: &ctx.shifts,
            setups: &ctx.qmr,
            threads: space.threads,
            mass: space.mass.map(|m| BlockMass {
                op: m.op,
                locked: m.locked,
                x: &m.bx[..n * b],
            }),
        };
        let out = self.solver.solve(
            space.op,
            self.comm,
            &inner,
            &eq,
            Lent {
                r,
                t,
                scratch: space.scratch,
                at: space.at,
                spare: space.spare,
                spare_at: space.at,
            },
        );
        stats.matvecs += out.matvecs;
        stats.precond_applications += out.precond_applies;
        stats.precond_seconds += out.precond_seconds;
        stats.global_sums += out.global_sums;
        stats.mass_matvecs += out.mass_matvecs;
        stats.jdqmr_iterations += 1;
        out.per_eq
            .iter()
            .map(|q| {
                stats.add_equation(&super::EquationOutcome {
                    steps: q.steps,
                    qmr_stop: Some(q.stop),
                    ..super::EquationOutcome::default()
                });
                q.steps
            })
            .collect()
    }

    fn idle_scratch(&mut self) -> Option<&mut [f64]> {
        Some(self.solver.idle_directions())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::correction::{CorrectionSolver, Equation};
    use crate::params::InnerSolver;
    use lblib::SelfComm;

    /// Tridiagonal A with a distinct diagonal (symmetric).
    struct Tri {
        n: usize,
    }
    impl Operator for Tri {
        fn nrows(&self) -> usize {
            self.n
        }
        fn apply_block(&self, x: &[f64], y: &mut [f64], k: usize) {
            let n = self.n;
            for c in 0..k {
                let (x, y) = (&x[c * n..(c + 1) * n], &mut y[c * n..(c + 1) * n]);
                for i in 0..n {
                    let mut v = (2.0 + 0.1 * i as f64) * x[i];
                    if i > 0 {
                        v -= x[i - 1];
                    }
                    if i + 1 < n {
                        v -= x[i + 1];
                    }
                    y[i] = v;
                }
            }
        }
    }

    /// Fixed-length JDQMR setups at θ = σ = each shift.
    fn fixed_setups(shifts: &[f64], maxits: usize) -> Vec<QmrSetup> {
        shifts
            .iter()
            .map(|&s| QmrSetup {
                theta: s,
                shift: s,
                target: Target::Smallest,
                maxits,
                conv_tol: 0.0,
                ltol: 1e-14,
                etol_factor: 0.0,
                fixed: true,
            })
            .collect()
    }

    /// Diagonal SPD mass matrix M = diag(1 + 0.01 i).
    struct Mass {
        n: usize,
    }
    impl Mass {
        fn entry(i: usize) -> f64 {
            1.0 + 0.01 * i as f64
        }
    }
    impl Operator for Mass {
        fn nrows(&self) -> usize {
            self.n
        }
        fn apply_block(&self, x: &[f64], y: &mut [f64], k: usize) {
            let n = self.n;
            for c in 0..k {
                for i in 0..n {
                    y[c * n + i] = Self::entry(i) * x[c * n + i];
                }
            }
        }
    }

    /// The lockstep block gives each equation the steps and the correction of
    /// the one-equation JDQMR of `crate::correction` (same recurrences), with
    /// and without a (Jacobi) preconditioner and locked vectors, on 1 and 2
    /// threads. Here x_j and Q are unit vectors and K diagonal, so that K⁻¹g
    /// stays orthogonal to Q_j and the block's left-only projection equals the
    /// two-sided one of `crate::correction`.
    #[test]
    fn block_equals_one_equation_at_a_time() {
        block_against_one_equation_at_a_time(false);
    }

    /// The same with a mass matrix: (I − MQQᵀ)(K − σM)(I − QQᵀM), without a
    /// preconditioner (the oblique projection with K = I) and with Jacobi of
    /// K − σM; Q M-orthonormal, r ⟂ Q, corrections M-orthogonal to Q.
    #[test]
    fn block_equals_one_equation_at_a_time_with_a_mass_matrix() {
        block_against_one_equation_at_a_time(true);
    }

    fn block_against_one_equation_at_a_time(with_mass: bool) {
        let (n, b, nl) = (80, 3, 2);
        let (op, mop) = (Tri { n }, Mass { n });
        let diag: Vec<f64> = (0..n).map(|i| 2.0 + 0.1 * i as f64).collect();
        let mdiag: Vec<f64> = (0..n).map(Mass::entry).collect();
        // X_sel = e_0..e_{b−1}, X_locked = e_b..e_{b+nl−1} (divided by √M_jj with
        // M: M-orthonormal, and M·Q = e_j √M_jj); residuals orthogonal to both.
        let unit = |j: usize, p: f64| {
            let mut v = vec![0.0; n];
            v[j] = if with_mass {
                Mass::entry(j).powf(p)
            } else {
                1.0
            };
            v
        };
        let x: Vec<f64> = (0..b).flat_map(|j| unit(j, -0.5)).collect();
        let bx: Vec<f64> = (0..b).flat_map(|j| unit(j, 0.5)).collect();
        let locked: Vec<f64> = (b..b + nl).flat_map(|j| unit(j, -0.5)).collect();
        let blocked: Vec<f64> = (b..b + nl).flat_map(|j| unit(j, 0.5)).collect();
        let mut r = vec![0.0; n * b];
        for j in 0..b {
            for i in b + nl..n {
                r[j * n + i] = ((i * (j + 3)) % 7) as f64 - 3.0 + 0.01 * i as f64;
            }
        }
        let shifts: Vec<f64> = (0..b).map(|j| 0.5 + 0.2 * j as f64).collect();
        let setups = fixed_setups(&shifts, 25);
        let comm = SelfComm::new();
        for (jacobi, threads) in [(false, 1), (true, 1), (false, 2), (true, 2)] {
            let inner_for = |shift: f64| match (jacobi, with_mass) {
                (false, _) => Inner::Identity,
                (true, false) => Inner::Diagonal { diag: &diag, shift },
                (true, true) => Inner::MassDiagonal {
                    diag: &diag,
                    mdiag: &mdiag,
                    shift,
                },
            };
            let inners: Vec<Inner<'_>> = shifts.iter().map(|&s| inner_for(s)).collect();
            let eq = BlockEquations {
                locked: &locked,
                nl,
                x: &x,
                shifts: &shifts,
                setups: &setups,
                threads,
                mass: with_mass.then_some(BlockMass {
                    op: &mop,
                    locked: &blocked,
                    x: &bx,
                }),
            };
            let mut t = vec![0.0; n * b];
            let mut blk = BlockJdQmr::new(n, b);
            let mut scratch = vec![0.0; n * (b + 1)];
            let out = blk.solve(
                &op,
                &comm,
                &BlockInner::from_inners(&inners),
                &eq,
                Lent {
                    r: &mut r.clone(),
                    t: &mut t,
                    scratch: &mut scratch,
                    at: n,
                    spare: &mut vec![0.0; n * (b + 2)],
                    spare_at: 2 * n,
                },
            );
            assert_eq!(out.mass_matvecs > 0, with_mass);
            for j in 0..b {
                let mut one = CorrectionSolver::new(n, InnerSolver::Qmrs, nl + 1);
                let e = Equation {
                    x: &x[j * n..(j + 1) * n],
                    r: &r[j * n..(j + 1) * n],
                    shift: shifts[j],
                    qmr: Some(QmrSetup { ..setups[j] }),
                };
                let mut tj = vec![0.0; n];
                let mass = with_mass.then_some(crate::correction::MassCtx {
                    op: &mop,
                    locked: &blocked,
                    bx: &bx[j * n..(j + 1) * n],
                });
                let o = one.solve_general(
                    &op,
                    mass,
                    &comm,
                    &locked,
                    nl,
                    inner_for(shifts[j]),
                    &e,
                    &mut |_, _, _| true,
                    &mut tj,
                );
                let case = format!("mass {with_mass}, jacobi {jacobi}, equation {j}");
                assert_eq!(o.steps, out.per_eq[j].steps, "{case}");
                let scale = dot(&tj, &tj).sqrt();
                let tcol = &t[j * n..(j + 1) * n];
                let err = tj
                    .iter()
                    .zip(tcol)
                    .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
                assert!(
                    err <= 1e-10 * scale,
                    "{case}: corrections differ by {err:e} (‖t‖ {scale:e})"
                );
                // The correction is (M-)orthogonal to Q = [X_locked, x_j].
                let mq = (0..nl)
                    .map(|l| &blocked[l * n..(l + 1) * n])
                    .chain([&bx[j * n..(j + 1) * n]]);
                for q in mq {
                    assert!(dot(q, tcol).abs() <= 1e-12 * scale.max(1.0), "{case}");
                }
            }
        }
    }

    /// K = tridiag(−1, 3, −1), solved exactly: not diagonal, so K⁻¹g has parts
    /// along x_j = e_j that the left-only projection keeps.
    struct TriK {
        n: usize,
    }
    impl Preconditioner for TriK {
        fn nrows(&self) -> usize {
            self.n
        }
        fn apply_block(&self, r: &[f64], z: &mut [f64], k: usize) {
            let n = self.n;
            for c in 0..k {
                let (r, z) = (&r[c * n..(c + 1) * n], &mut z[c * n..(c + 1) * n]);
                // Thomas: sub- and superdiagonal −1, diagonal 3.
                let mut cp = vec![0.0; n];
                let mut piv = 3.0;
                z[0] = r[0] / piv;
                for i in 1..n {
                    cp[i - 1] = -1.0 / piv;
                    piv = 3.0 + cp[i - 1];
                    z[i] = (r[i] + z[i - 1]) / piv;
                }
                for i in (0..n - 1).rev() {
                    z[i] -= cp[i] * z[i + 1];
                }
            }
        }
    }

    /// With a preconditioner and no mass matrix the equations are PRIMME's
    /// left-projected ones, (I − Q_jQ_jᵀ)(A − σ_j) s_j = r_j with K unprojected:
    /// run to convergence, each correction t_j = −s_j solves that system, on 1 and
    /// 2 threads, with locked vectors, and K⁻¹ being no diagonal (the corrections
    /// then have parts along Q_j, which the two-sided form would not).
    #[test]
    fn preconditioned_equations_are_projected_on_the_left() {
        let (n, b, nl) = (80, 3, 2);
        let op = Tri { n };
        let unit = |j: usize| {
            let mut v = vec![0.0; n];
            v[j] = 1.0;
            v
        };
        let x: Vec<f64> = (0..b).flat_map(unit).collect();
        let locked: Vec<f64> = (b..b + nl).flat_map(unit).collect();
        let mut r = vec![0.0; n * b];
        for j in 0..b {
            for i in b + nl..n {
                r[j * n + i] = ((i * (j + 3)) % 7) as f64 - 3.0 + 0.01 * i as f64;
            }
        }
        // Shifts below A's spectrum (its diagonal is 2 + 0.1 i, so A ≥ 0.1·I
        // roughly): A − σ_j is definite and QMRs converges in a few dozen steps.
        let shifts = [-0.5, -0.3, -0.1];
        let setups = fixed_setups(&shifts, 200);
        let pc = TriK { n };
        let comm = SelfComm::new();
        for threads in [1, 2] {
            let eq = BlockEquations {
                locked: &locked,
                nl,
                x: &x,
                shifts: &shifts,
                setups: &setups,
                threads,
                mass: None,
            };
            let inner = BlockInner::Shifted {
                pc: &pc,
                shifts: shifts.to_vec(),
            };
            let mut t = vec![0.0; n * b];
            let mut scratch = vec![0.0; n * b];
            let out = BlockJdQmr::new(n, b).solve(
                &op,
                &comm,
                &inner,
                &eq,
                Lent {
                    r: &mut r.clone(),
                    t: &mut t,
                    scratch: &mut scratch,
                    at: 0,
                    spare: &mut vec![0.0; n * b],
                    spare_at: 0,
                },
            );
            assert!(out.precond_applies > 0);
            for j in 0..b {
                let (tj, rj) = (&t[j * n..(j + 1) * n], &r[j * n..(j + 1) * n]);
                // P_j (A − σ_j) t_j + r_j, P_j = I − e_je_jᵀ − Σ e_le_lᵀ.
                let mut res = vec![0.0; n];
                op.apply_block(tj, &mut res, 1);
                for i in 0..n {
                    res[i] += rj[i] - shifts[j] * tj[i];
                }
                for q in [j].into_iter().chain(b..b + nl) {
                    res[q] = 0.0;
                }
                let (err, rn) = (dot(&res, &res).sqrt(), dot(rj, rj).sqrt());
                assert!(
                    err <= 1e-9 * rn,
                    "threads {threads}, equation {j}: residual {err:e} of ‖r‖ {rn:e} after {} \
                     steps",
                    out.per_eq[j].steps
                );
                assert!(out.per_eq[j].steps < 200, "equation {j}: no convergence");
                // K⁻¹ is no diagonal: the correction has a part along x_j.
                assert!(tj[j].abs() > 1e-6 * dot(tj, tj).sqrt(), "equation {j}");
            }
        }
    }

    /// An equation that breaks down at its first step (w = (A − σ)d = 0) gets the
    /// projected Davidson step −P r; its neighbour still gets its QMRs solution.
    #[test]
    fn breakdown_at_once_falls_back_to_davidson() {
        let n = 12;
        let op = Tri { n };
        let unit = |j: usize| {
            let mut v = vec![0.0; n];
            v[j] = 1.0;
            v
        };
        // Equation 0: x = e_0, r = e_{n−1}, σ chosen so that ((A − σ) e_{n−1})
        // is orthogonal to e_{n−1}: dᵀw = 0, a breakdown before the first step.
        // Equation 1: an ordinary one.
        let x: Vec<f64> = [unit(0), unit(1)].concat();
        let mut r = vec![0.0; 2 * n];
        r[n - 1] = 1.0;
        for i in 2..n {
            r[n + i] = 1.0 / (1.0 + i as f64);
        }
        let shifts = [2.0 + 0.1 * (n - 1) as f64, 0.3];
        let setups = fixed_setups(&shifts, 5);
        let eq = BlockEquations {
            locked: &[],
            nl: 0,
            x: &x,
            shifts: &shifts,
            setups: &setups,
            threads: 1,
            mass: None,
        };
        let comm = SelfComm::new();
        let (mut t, mut scratch) = (vec![0.0; 2 * n], vec![0.0; 2 * n]);
        let out = BlockJdQmr::new(n, 2).solve(
            &op,
            &comm,
            &BlockInner::Identity,
            &eq,
            Lent {
                r: &mut r.clone(),
                t: &mut t,
                scratch: &mut scratch,
                at: 0,
                spare: &mut vec![0.0; 2 * n],
                spare_at: 0,
            },
        );
        assert_eq!(out.per_eq[0].steps, 0);
        assert_eq!(out.per_eq[0].stop, QmrStop::Breakdown);
        for i in 0..n {
            assert_eq!(t[i], -r[i], "row {i} of the fallback step");
        }
        assert_eq!(out.per_eq[1].steps, 5);
        assert!(t[n..].iter().any(|v| *v != 0.0) && t[n] == 0.0 && t[n + 1] == 0.0);
    }
}
