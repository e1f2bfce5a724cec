//! Step-wise Krylov inner solvers: [`Bicgstab`], [`Cg`] and restarted (flexible)
//! [`Gmres`], and [`BlockBicgstab`] (`k` BiCGSTAB solves in lockstep on blocks of vectors).
//!
//! All three share one interface ([`Stepwise`]): `start` sets up `A x = b`, each `step`
//! does one iteration and returns the new residual norm, and the caller decides when to
//! stop (a step count, a tolerance, or a time budget from `lblib`). Vectors are the local
//! rows; every global dot product goes through `comm.all_reduce(…, Sum)`, with dot
//! products fused into one reduction wherever the algorithm allows, so the same code
//! runs serially, on threads and on MPI. Scratch vectors are allocated once in `new`;
//! `start` and `step` do not allocate.
//!
//! Residual norms returned by `start`/`step` are the solvers' **recurrence** norms
//! (cheap, but they may drift from the true `‖b − A x‖` at high accuracy);
//! `true_residual_norm` computes the true one (one extra matvec and global sum), and
//! [`solve`](Bicgstab::solve) checks it before declaring convergence, restarting from the
//! best iterate when the two disagree.
//!
//! | solver | per step: operator / preconditioner / global sums |
//! |---|---|
//! | [`Bicgstab`] | 2 / 2 / 3 |
//! | [`BlockBicgstab`] (`k` columns) | 2 / 2 block applications / 3 |
//! | [`Cg`] | 1 / 1 / 2 (+1 on the first step after `start`/`restart`) |
//! | [`Gmres`] | 1 / 1 / 2 (+1 matvec and sum when a cycle restarts) |
//!
//! `start` costs one global sum (`‖r0‖` and `‖b‖` fused) and one matvec unless `x0` is `None`.
//!
//! ```
//! use lbcomm::SelfComm;
//! use matrices::CsrMatrix;
//! use precond::krylov::{Bicgstab, StopCriteria};
//! use precond::preconditioners::{build, PrecondKind};
//! use precond::CsrOperator;
//!
//! // 1D Laplacian, b = A * ones.
//! let n = 50;
//! let mut t = Vec::new();
//! for i in 0..n {
//!     t.push((i, i, 2.0));
//!     if i > 0 {
//!         t.push((i, i - 1, -1.0));
//!         t.push((i - 1, i, -1.0));
//!     }
//! }
//! let a = CsrMatrix::from_triplets(n, n, &t).unwrap();
//! let mut b = vec![0.0; n];
//! a.mul_vec(&vec![1.0; n], &mut b);
//! let op = CsrOperator::new(&a, 1).unwrap();
//! let m = build(&"ilu0".parse::<PrecondKind>().unwrap(), &a, 0.0).unwrap();
//! let comm = SelfComm::new();
//!
//! // Step-wise: the caller decides when to stop (here: a step budget or 1e-10).
//! let mut s = Bicgstab::new(n);
//! let r0 = s.start(&op, &comm, &b, None);
//! while s.residual_norm() > 1e-10 * r0 && s.stats().steps < 100 {
//!     if s.step(&op, m.as_ref(), &comm).is_err() {
//!         s.restart(&op, &comm); // breakdown: continue from the best iterate
//!     }
//! }
//! assert!(s.true_residual_norm(&op, &comm) <= 1e-9 * r0);
//!
//! // Or all at once, converging on the true residual.
//! let res = s.solve(&op, m.as_ref(), &comm, &b, None, &StopCriteria::default());
//! assert!(res.converged && res.true_residual_norm <= 1e-10 * res.b_norm);
//! assert!(s.solution().iter().all(|x| (x - 1.0).abs() < 1e-8));
//! ```

mod bicgstab;
mod block_bicgstab;
mod cg;
mod gmres;

pub use bicgstab::Bicgstab;
pub use block_bicgstab::BlockBicgstab;
pub use cg::Cg;
pub use gmres::Gmres;

use lbcomm::comm::{Comm, ReduceOp};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::operator::{Operator, Preconditioner};

/// Work counters of a Krylov solver since the last `start`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KrylovStats {
    /// Completed iterations (`step` calls that returned).
    pub steps: usize,
    /// Operator applications (single vectors).
    pub matvecs: usize,
    /// Preconditioner applications (single vectors).
    pub precond_applies: usize,
    /// Global reductions (`Comm::all_reduce` calls).
    pub global_sums: usize,
}

/// What broke down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BreakdownKind {
    /// BiCGSTAB: `ρ = (r̂, r)` or `(r̂, v)` vanished (lost bi-orthogonality).
    /// CG: `(r, M^{-1} r) ≤ 0`, the preconditioner is not positive definite.
    Rho,
    /// BiCGSTAB: `ω = (t, s)/(t, t)` vanished (stabilizing step made no progress).
    Omega,
    /// CG: `(p, A p) ≤ 0`, the operator is not positive definite.
    Curvature,
    /// A NaN or infinity appeared.
    NonFinite,
}

/// A breakdown, with the residual norm of the best iterate so far (which stays
/// available through `solution()`).
#[derive(Debug, Clone, Copy, PartialEq, Error, Serialize, Deserialize)]
#[error("{kind:?} breakdown (best residual norm {residual_norm:e})")]
pub struct Breakdown {
    /// What vanished.
    pub kind: BreakdownKind,
    /// Recurrence residual norm of the best iterate.
    pub residual_norm: f64,
}

/// When [`solve`](Bicgstab::solve) stops: after `max_steps` iterations in total, or when
/// the true residual satisfies `‖b − A x‖ ≤ max(rtol · ‖b‖, atol)`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StopCriteria {
    /// Iteration cap over all restarts. Default 1000.
    pub max_steps: usize,
    /// Tolerance relative to `‖b‖`. Default `1e-10`.
    pub rtol: f64,
    /// Absolute tolerance. Default 0.
    pub atol: f64,
}

impl Default for StopCriteria {
    fn default() -> Self {
        Self {
            max_steps: 1000,
            rtol: 1e-10,
            atol: 0.0,
        }
    }
}

/// Outcome of [`solve`](Bicgstab::solve). The solution is the solver's `solution()`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct KrylovResult {
    /// The true residual met the tolerance.
    pub converged: bool,
    /// Iterations over all restarts.
    pub steps: usize,
    /// Restarts done by `solve` from the best iterate (after a breakdown, or when the
    /// recurrence residual had converged but the true residual had not).
    pub restarts: usize,
    /// True residual norm `‖b − A x‖` of the returned solution.
    pub true_residual_norm: f64,
    /// `‖b‖`.
    pub b_norm: f64,
    /// The last breakdown, if the run ended on one (not converged).
    pub breakdown: Option<Breakdown>,
    /// Work counters over the whole solve (restarts and residual checks included).
    pub stats: KrylovStats,
}

/// Maximum number of restarts [`solve`](Bicgstab::solve) performs.
pub const MAX_SOLVE_RESTARTS: usize = 10;

/// The shared step-wise interface of [`Bicgstab`], [`Cg`] and [`Gmres`] (each also has
/// the same methods inherently, so the trait need not be imported).
pub trait Stepwise {
    /// Local vector length the solver was sized for.
    fn len(&self) -> usize;
    /// True when sized for empty vectors.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Starts solving `A x = b` from `x0` (`None`: zero); returns the initial residual
    /// norm. Resets the statistics. One global sum (`‖r0‖` and `‖b‖` fused).
    fn start<A: Operator + ?Sized, C: Comm + ?Sized>(
        &mut self,
        a: &A,
        comm: &C,
        b: &[f64],
        x0: Option<&[f64]>,
    ) -> f64;
    /// One iteration; `Ok(new recurrence residual norm)` or a [`Breakdown`].
    fn step<A: Operator + ?Sized, M: Preconditioner + ?Sized, C: Comm + ?Sized>(
        &mut self,
        a: &A,
        m: &M,
        comm: &C,
    ) -> Result<f64, Breakdown>;
    /// Restarts from the best iterate with the same `b` (fresh Krylov space); returns the
    /// true residual norm of that iterate. One matvec, one global sum.
    fn restart<A: Operator + ?Sized, C: Comm + ?Sized>(&mut self, a: &A, comm: &C) -> f64;
    /// Recurrence residual norm of the current iterate.
    fn residual_norm(&self) -> f64;
    /// `‖b‖` (computed by `start`).
    fn b_norm(&self) -> f64;
    /// The best iterate so far.
    fn solution(&self) -> &[f64];
    /// True residual norm `‖b − A x‖` of [`Stepwise::solution`] (one matvec, one global sum).
    fn true_residual_norm<A: Operator + ?Sized, C: Comm + ?Sized>(
        &mut self,
        a: &A,
        comm: &C,
    ) -> f64;
    /// Work counters since `start`.
    fn stats(&self) -> KrylovStats;

    /// Runs `start` and then `step` until [`StopCriteria`] is met (see [`KrylovResult`]).
    ///
    /// Convergence is declared on the **true** residual: when the recurrence norm reaches
    /// the target, the true residual is computed; if it misses, or on a breakdown, the
    /// solver restarts from its best iterate (at most [`MAX_SOLVE_RESTARTS`] times).
    fn solve<A: Operator + ?Sized, M: Preconditioner + ?Sized, C: Comm + ?Sized>(
        &mut self,
        a: &A,
        m: &M,
        comm: &C,
        b: &[f64],
        x0: Option<&[f64]>,
        stop: &StopCriteria,
    ) -> KrylovResult
    where
        Self: Sized,
    {
        let mut res = self.start(a, comm, b, x0);
        let target = (stop.rtol * self.b_norm()).max(stop.atol);
        let mut steps = 0;
        let mut restarts = 0;
        let mut breakdown = None;
        let mut true_res;
        loop {
            if res <= target {
                true_res = self.true_residual_norm(a, comm);
                if true_res <= target {
                    return finish(self, true, steps, restarts, true_res, None);
                }
                if restarts >= MAX_SOLVE_RESTARTS || steps >= stop.max_steps {
                    break;
                }
                restarts += 1;
                res = self.restart(a, comm);
                continue;
            }
            if steps >= stop.max_steps {
                true_res = self.true_residual_norm(a, comm);
                break;
            }
            match self.step(a, m, comm) {
                Ok(r) => {
                    steps += 1;
                    breakdown = None;
                    res = r;
                }
                Err(e) => {
                    steps += 1;
                    breakdown = Some(e);
                    if restarts >= MAX_SOLVE_RESTARTS
                        || steps >= stop.max_steps
                        || e.kind == BreakdownKind::NonFinite
                    {
                        true_res = self.true_residual_norm(a, comm);
                        break;
                    }
                    restarts += 1;
                    res = self.restart(a, comm);
                }
            }
        }
        let converged = true_res <= target;
        finish(
            self,
            converged,
            steps,
            restarts,
            true_res,
            if converged { None } else { breakdown },
        )
    }
}

fn finish<S: Stepwise>(
    s: &S,
    converged: bool,
    steps: usize,
    restarts: usize,
    true_residual_norm: f64,
    breakdown: Option<Breakdown>,
) -> KrylovResult {
    KrylovResult {
        converged,
        steps,
        restarts,
        true_residual_norm,
        b_norm: s.b_norm(),
        breakdown,
        stats: s.stats(),
    }
}

crate::avx2_dispatch! {
    /// Local dot product (4 accumulators for vectorization; AVX2 where present, see
    /// [`crate::simd`]).
    pub fn dot(x: &[f64], y: &[f64]) -> f64 = dot_body;
}

/// The body of [`dot`].
#[inline(always)]
fn dot_body(x: &[f64], y: &[f64]) -> f64 {
    debug_assert_eq!(x.len(), y.len());
    let mut acc = [0.0f64; 4];
    let (xc, xr) = x.split_at(x.len() - x.len() % 4);
    let (yc, yr) = y.split_at(xc.len());
    for (a, b) in xc.chunks_exact(4).zip(yc.chunks_exact(4)) {
        acc[0] += a[0] * b[0];
        acc[1] += a[1] * b[1];
        acc[2] += a[2] * b[2];
        acc[3] += a[3] * b[3];
    }
    let tail: f64 = xr.iter().zip(yr).map(|(a, b)| a * b).sum();
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

crate::avx2_dispatch! {
    /// `[(t, s), (t, t), (s, s)]` in one pass, each summed exactly as [`dot`] sums it
    /// (the same four accumulators), so the results equal three separate calls
    /// ([`dot3_body`], AVX2 where present).
    pub(crate) fn dot3(t: &[f64], s: &[f64]) -> [f64; 3] = dot3_body;
}

/// The body of [`dot3`].
#[inline(always)]
fn dot3_body(t: &[f64], s: &[f64]) -> [f64; 3] {
    debug_assert_eq!(t.len(), s.len());
    let mut acc = [[0.0f64; 4]; 3];
    let (tc, tr) = t.split_at(t.len() - t.len() % 4);
    let (sc, sr) = s.split_at(tc.len());
    for (a, b) in tc.chunks_exact(4).zip(sc.chunks_exact(4)) {
        for l in 0..4 {
            acc[0][l] += a[l] * b[l];
            acc[1][l] += a[l] * a[l];
            acc[2][l] += b[l] * b[l];
        }
    }
    let fin = |c: &[f64; 4], tail: f64| (c[0] + c[1]) + (c[2] + c[3]) + tail;
    [
        fin(&acc[0], tr.iter().zip(sr).map(|(a, b)| a * b).sum()),
        fin(&acc[1], tr.iter().map(|a| a * a).sum()),
        fin(&acc[2], sr.iter().map(|b| b * b).sum()),
    ]
}

crate::avx2_dispatch! {
    /// `r -= omega t`, then `[(h, r), (r, r)]` in the same pass, summed as [`dot`] sums
    /// them (results equal to an [`axpy`] followed by two [`dot`] calls;
    /// [`axpy_dot2_body`], AVX2 where present).
    pub(crate) fn axpy_dot2(omega: f64, t: &[f64], r: &mut [f64], h: &[f64]) -> [f64; 2] =
        axpy_dot2_body;
}

/// The body of [`axpy_dot2`].
#[inline(always)]
fn axpy_dot2_body(omega: f64, t: &[f64], r: &mut [f64], h: &[f64]) -> [f64; 2] {
    debug_assert!(t.len() == r.len() && h.len() == r.len());
    let mut acc = [[0.0f64; 4]; 2];
    let cut = r.len() - r.len() % 4;
    let (rc, rr) = r.split_at_mut(cut);
    let (tc, tt) = t.split_at(cut);
    let (hc, ht) = h.split_at(cut);
    for ((rv, tv), hv) in rc
        .chunks_exact_mut(4)
        .zip(tc.chunks_exact(4))
        .zip(hc.chunks_exact(4))
    {
        for l in 0..4 {
            rv[l] += -omega * tv[l];
            acc[0][l] += hv[l] * rv[l];
            acc[1][l] += rv[l] * rv[l];
        }
    }
    let (mut t0, mut t1) = (0.0, 0.0);
    for ((rv, tv), hv) in rr.iter_mut().zip(tt).zip(ht) {
        *rv += -omega * tv;
        t0 += hv * *rv;
        t1 += *rv * *rv;
    }
    let fin = |c: &[f64; 4], tail: f64| (c[0] + c[1]) + (c[2] + c[3]) + tail;
    [fin(&acc[0], t0), fin(&acc[1], t1)]
}

/// `y += alpha x`.
#[inline]
pub(crate) fn axpy(alpha: f64, x: &[f64], y: &mut [f64]) {
    for (yi, &xi) in y.iter_mut().zip(x) {
        *yi += alpha * xi;
    }
}

/// Sums `buf` over the communicator and counts the reduction.
#[inline]
pub(crate) fn global_sum<C: Comm + ?Sized>(comm: &C, buf: &mut [f64], stats: &mut KrylovStats) {
    comm.all_reduce(buf, ReduceOp::Sum);
    stats.global_sums += 1;
}

/// Two iterate buffers: the current one and the best one (smallest residual norm) share
/// storage while they coincide, so tracking the best iterate costs no copies.
#[derive(Debug, Clone)]
pub(crate) struct IterPair {
    xs: [Vec<f64>; 2],
    cur: usize,
    best: usize,
    pub best_norm: f64,
}

impl IterPair {
    pub fn new(n: usize) -> Self {
        Self {
            xs: [vec![0.0; n], vec![0.0; n]],
            cur: 0,
            best: 0,
            best_norm: f64::INFINITY,
        }
    }
    /// Sets current = best = `x0` (or zero).
    pub fn reset(&mut self, x0: Option<&[f64]>, norm: f64) {
        match x0 {
            Some(x) => self.xs[0].copy_from_slice(x),
            None => self.xs[0].fill(0.0),
        }
        self.cur = 0;
        self.best = 0;
        self.best_norm = norm;
    }
    /// Makes the best iterate the current one.
    pub fn rewind(&mut self) {
        self.cur = self.best;
    }
    pub fn current(&self) -> &[f64] {
        &self.xs[self.cur]
    }
    pub fn best(&self) -> &[f64] {
        &self.xs[self.best]
    }
    /// Gives `(old current, new current)` buffers: when the current iterate is also the
    /// best, the new iterate goes to the other buffer so the best one is preserved;
    /// otherwise both are the same buffer and `f` must update in place (signalled by
    /// `None` for the old one).
    pub fn advance<F: FnOnce(Option<&[f64]>, &mut [f64])>(&mut self, f: F) {
        if self.cur == self.best {
            let (a, b) = self.xs.split_at_mut(1);
            let (old, new) = if self.cur == 0 {
                (&a[0], &mut b[0])
            } else {
                (&b[0], &mut a[0])
            };
            f(Some(old), new);
            self.cur = 1 - self.cur;
        } else {
            f(None, &mut self.xs[self.cur]);
        }
    }
    /// Records the residual norm of the current iterate, promoting it to best if smaller.
    pub fn record(&mut self, norm: f64) {
        if norm < self.best_norm {
            self.best_norm = norm;
            self.best = self.cur;
        }
    }
}

/// Generates inherent methods delegating to [`Stepwise`], so callers need not import the
/// trait (`Bicgstab::new(n).start(…)` works directly).
/// `r = b − A x` (`r = b` when `zero_x`, no product), then one global sum of
/// `(r, r)` fused with `‖b‖²` when `with_b`. Returns `(r, r)` and `‖b‖` if computed.
/// Shared by the start and restart of [`Bicgstab`] and [`Cg`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn initial_residual<A: Operator + ?Sized, C: Comm + ?Sized>(
    a: &A,
    comm: &C,
    b: &[f64],
    x: &[f64],
    zero_x: bool,
    with_b: bool,
    r: &mut [f64],
    stats: &mut KrylovStats,
) -> (f64, Option<f64>) {
    if zero_x {
        r.copy_from_slice(b);
    } else {
        a.apply(x, r);
        stats.matvecs += 1;
        for (ri, bi) in r.iter_mut().zip(b) {
            *ri = bi - *ri;
        }
    }
    let mut sums = [dot(r, r), if with_b { dot(b, b) } else { 0.0 }];
    global_sum(comm, &mut sums[..if with_b { 2 } else { 1 }], stats);
    (sums[0], with_b.then(|| sums[1].sqrt()))
}

/// The [`Stepwise`] impl shared by [`Bicgstab`] and [`Cg`]: both keep `n`, `b`,
/// `b_norm`, `res`, `x` (best-iterate tracker), `stats`, `started`, `broken` and a
/// scratch vector, and provide `init_residual` and `step_inner`.
macro_rules! common_stepwise {
    ($t:ty, $name:literal, $scratch:ident) => {
        impl Stepwise for $t {
            fn len(&self) -> usize {
                self.n
            }

            fn start<A: Operator + ?Sized, C: Comm + ?Sized>(
                &mut self,
                a: &A,
                comm: &C,
                b: &[f64],
                x0: Option<&[f64]>,
            ) -> f64 {
                assert_eq!(
                    b.len(),
                    self.n,
                    concat!($name, "::start: b has wrong length")
                );
                if let Some(x) = x0 {
                    assert_eq!(
                        x.len(),
                        self.n,
                        concat!($name, "::start: x0 has wrong length")
                    );
                }
                self.stats = KrylovStats::default();
                self.b.copy_from_slice(b);
                self.x.reset(x0, f64::INFINITY);
                self.started = true;
                let res = self.init_residual(a, comm, x0.is_none(), true);
                self.x.best_norm = res;
                res
            }

            fn step<A: Operator + ?Sized, M: Preconditioner + ?Sized, C: Comm + ?Sized>(
                &mut self,
                a: &A,
                m: &M,
                comm: &C,
            ) -> Result<f64, Breakdown> {
                assert!(self.started, concat!($name, "::step called before start"));
                // After a breakdown the recurrences are invalid until `restart`/`start`.
                if let Some(e) = self.broken {
                    return Err(e);
                }
                let r = self.step_inner(a, m, comm);
                if let Err(e) = r {
                    self.broken = Some(e);
                }
                r
            }

            fn restart<A: Operator + ?Sized, C: Comm + ?Sized>(&mut self, a: &A, comm: &C) -> f64 {
                assert!(
                    self.started,
                    concat!($name, "::restart called before start")
                );
                self.x.rewind();
                let res = self.init_residual(a, comm, false, false);
                self.x.best_norm = res;
                res
            }

            fn residual_norm(&self) -> f64 {
                self.res
            }

            fn b_norm(&self) -> f64 {
                self.b_norm
            }

            fn solution(&self) -> &[f64] {
                self.x.best()
            }

            fn true_residual_norm<A: Operator + ?Sized, C: Comm + ?Sized>(
                &mut self,
                a: &A,
                comm: &C,
            ) -> f64 {
                a.apply(self.x.best(), &mut self.$scratch);
                self.stats.matvecs += 1;
                for (ti, bi) in self.$scratch.iter_mut().zip(&self.b) {
                    *ti = bi - *ti;
                }
                let mut s = [dot(&self.$scratch, &self.$scratch)];
                global_sum(comm, &mut s, &mut self.stats);
                s[0].sqrt()
            }

            fn stats(&self) -> KrylovStats {
                self.stats
            }
        }
    };
}
pub(crate) use common_stepwise;

macro_rules! inherent_stepwise {
    ($t:ty) => {
        impl $t {
            /// Starts solving `A x = b` from `x0` (`None` means zero) and returns the
            /// initial residual norm `‖b − A x0‖`. Resets the statistics. One global sum.
            ///
            /// # Panics
            /// If `b` or `x0` do not have the length the solver was sized for.
            pub fn start<A: Operator + ?Sized, C: Comm + ?Sized>(
                &mut self,
                a: &A,
                comm: &C,
                b: &[f64],
                x0: Option<&[f64]>,
            ) -> f64 {
                <Self as Stepwise>::start(self, a, comm, b, x0)
            }
            /// One iteration: `Ok(new recurrence residual norm)` or a [`Breakdown`]
            /// (the best iterate stays in [`Self::solution`]).
            ///
            /// # Panics
            /// If called before [`Self::start`] or with operators of the wrong size.
            pub fn step<A: Operator + ?Sized, M: Preconditioner + ?Sized, C: Comm + ?Sized>(
                &mut self,
                a: &A,
                m: &M,
                comm: &C,
            ) -> Result<f64, Breakdown> {
                <Self as Stepwise>::step(self, a, m, comm)
            }
            /// Restarts from the best iterate (fresh Krylov space, same `b`); returns its
            /// true residual norm. One matvec, one global sum.
            pub fn restart<A: Operator + ?Sized, C: Comm + ?Sized>(
                &mut self,
                a: &A,
                comm: &C,
            ) -> f64 {
                <Self as Stepwise>::restart(self, a, comm)
            }
            /// Recurrence residual norm of the current iterate.
            pub fn residual_norm(&self) -> f64 {
                <Self as Stepwise>::residual_norm(self)
            }
            /// `‖b‖`, computed by [`Self::start`].
            pub fn b_norm(&self) -> f64 {
                <Self as Stepwise>::b_norm(self)
            }
            /// Best iterate so far (smallest residual norm seen); valid after a breakdown.
            pub fn solution(&self) -> &[f64] {
                <Self as Stepwise>::solution(self)
            }
            /// True residual norm `‖b − A x‖` of [`Self::solution`] (one matvec, one global sum).
            pub fn true_residual_norm<A: Operator + ?Sized, C: Comm + ?Sized>(
                &mut self,
                a: &A,
                comm: &C,
            ) -> f64 {
                <Self as Stepwise>::true_residual_norm(self, a, comm)
            }
            /// Work counters since [`Self::start`]: steps, matvecs, preconditioner
            /// applications, global sums.
            pub fn stats(&self) -> KrylovStats {
                <Self as Stepwise>::stats(self)
            }
            /// `start` then `step` until `stop` is met, checking the true residual and
            /// restarting from the best iterate on a breakdown or a false convergence (see
            /// [`Stepwise::solve`]).
            pub fn solve<A: Operator + ?Sized, M: Preconditioner + ?Sized, C: Comm + ?Sized>(
                &mut self,
                a: &A,
                m: &M,
                comm: &C,
                b: &[f64],
                x0: Option<&[f64]>,
                stop: &StopCriteria,
            ) -> KrylovResult {
                <Self as Stepwise>::solve(self, a, m, comm, b, x0, stop)
            }
        }
    };
}
pub(crate) use inherent_stepwise;

#[cfg(test)]
mod tests {
    use super::*;

    /// The fused reductions of BiCGSTAB equal the separate calls bit for bit (so
    /// fusing them changed no iterate, residual or matvec count).
    #[test]
    fn fused_reductions_equal_separate_calls() {
        for n in [0usize, 1, 3, 4, 7, 64, 1001] {
            let t: Vec<f64> = (0..n)
                .map(|i| ((i * 37 % 101) as f64 - 50.0) / 7.0)
                .collect();
            let s: Vec<f64> = (0..n)
                .map(|i| ((i * 53 % 97) as f64 - 48.0) / 3.0)
                .collect();
            let h: Vec<f64> = (0..n).map(|i| (i as f64).sin()).collect();
            let got = dot3(&t, &s);
            let want = [dot(&t, &s), dot(&t, &t), dot(&s, &s)];
            assert_eq!(got.map(f64::to_bits), want.map(f64::to_bits), "n = {n}");
            let (mut r1, mut r2) = (s.clone(), s.clone());
            let got = axpy_dot2(0.3, &t, &mut r1, &h);
            axpy(-0.3, &t, &mut r2);
            let want = [dot(&h, &r2), dot(&r2, &r2)];
            assert_eq!(r1, r2);
            assert_eq!(got.map(f64::to_bits), want.map(f64::to_bits), "n = {n}");
        }
    }

    #[test]
    fn dot_and_axpy() {
        let x: Vec<f64> = (0..11).map(|i| i as f64).collect();
        assert_eq!(dot(&x, &x), 385.0);
        let mut y = vec![1.0; 11];
        axpy(2.0, &x, &mut y);
        assert_eq!(y[10], 21.0);
    }

    #[test]
    fn iter_pair_keeps_best() {
        let mut p = IterPair::new(2);
        p.reset(Some(&[1.0, 1.0]), 10.0);
        p.advance(|old, new| {
            let o = old.unwrap();
            new[0] = o[0] + 1.0;
            new[1] = o[1];
        });
        p.record(20.0); // worse
        assert_eq!(p.best(), &[1.0, 1.0]);
        assert_eq!(p.current(), &[2.0, 1.0]);
        p.advance(|old, new| {
            assert!(old.is_none());
            new[0] += 1.0;
        });
        p.record(5.0); // better
        assert_eq!(p.best(), &[3.0, 1.0]);
        p.advance(|old, new| {
            new.copy_from_slice(old.unwrap());
            new[1] = 7.0;
        });
        assert_eq!(p.best(), &[3.0, 1.0]);
        assert_eq!(p.current(), &[3.0, 7.0]);
        p.rewind();
        assert_eq!(p.current(), &[3.0, 1.0]);
    }
}
