//! Preconditioned conjugate gradients (Hestenes & Stiefel; Saad, Algorithm 9.1), step-wise.

use lbcomm::comm::Comm;

use super::{
    axpy, common_stepwise, dot, global_sum, inherent_stepwise, initial_residual, Breakdown,
    BreakdownKind, IterPair, KrylovResult, KrylovStats, Stepwise, StopCriteria,
};
use crate::operator::{Operator, Preconditioner};

/// Step-wise preconditioned CG for symmetric positive definite `A` and `M`.
///
/// One step costs 1 operator and 1 preconditioner application and **2 global sums**:
/// `(p, Ap)`, then `(r, z), (r, r)` fused (the first step after `start`/`restart` adds
/// one sum for the initial `(r, z)`). Returned norms are the recurrence residual `‖r_k‖`
/// (unpreconditioned 2-norm). CG's residual is not monotone, so the best iterate is
/// tracked as in BiCGSTAB. Breakdowns: `(p, Ap) ≤ 0` is [`BreakdownKind::Curvature`]
/// (`A` not SPD), `(r, z) < 0` is [`BreakdownKind::Rho`] (`M` not SPD), NaN/∞ is
/// [`BreakdownKind::NonFinite`]. After a breakdown, further `step` calls return the same
/// breakdown (without work) until `restart` or `start`.
#[derive(Debug, Clone)]
pub struct Cg {
    n: usize,
    b: Vec<f64>,
    r: Vec<f64>,
    z: Vec<f64>,
    p: Vec<f64>,
    q: Vec<f64>,
    x: IterPair,
    rz: f64,
    res: f64,
    b_norm: f64,
    fresh: bool,
    started: bool,
    broken: Option<Breakdown>,
    stats: KrylovStats,
}

impl Cg {
    /// Allocates all scratch for vectors of local length `n` (6 vectors plus `b`).
    pub fn new(n: usize) -> Self {
        let z = || vec![0.0; n];
        Self {
            n,
            b: z(),
            r: z(),
            z: z(),
            p: z(),
            q: z(),
            x: IterPair::new(n),
            rz: 0.0,
            res: 0.0,
            b_norm: 0.0,
            fresh: true,
            started: false,
            broken: None,
            stats: KrylovStats::default(),
        }
    }

    fn init_residual<A: Operator + ?Sized, C: Comm + ?Sized>(
        &mut self,
        a: &A,
        comm: &C,
        zero_x: bool,
        with_b: bool,
    ) -> f64 {
        self.broken = None;
        let (rr, b_norm) = initial_residual(
            a,
            comm,
            &self.b,
            self.x.current(),
            zero_x,
            with_b,
            &mut self.r,
            &mut self.stats,
        );
        if let Some(bn) = b_norm {
            self.b_norm = bn;
        }
        self.res = rr.sqrt();
        self.fresh = true;
        self.res
    }
}

impl Cg {
    /// One iteration (see [`Stepwise::step`]); `step` wraps it with the breakdown latch.
    fn step_inner<A: Operator + ?Sized, M: Preconditioner + ?Sized, C: Comm + ?Sized>(
        &mut self,
        a: &A,
        m: &M,
        comm: &C,
    ) -> Result<f64, Breakdown> {
        if self.res == 0.0 {
            // Already exact: nothing to do (and ρ = 0 would look like a breakdown).
            return Ok(0.0);
        }
        let breakdown = |s: &Self, kind| Breakdown {
            kind,
            residual_norm: s.x.best_norm,
        };
        self.stats.steps += 1;
        if self.fresh {
            m.apply(&self.r, &mut self.z);
            self.stats.precond_applies += 1;
            let mut s = [dot(&self.r, &self.z)];
            global_sum(comm, &mut s, &mut self.stats);
            self.rz = s[0];
            self.p.copy_from_slice(&self.z);
            self.fresh = false;
        }
        if !self.rz.is_finite() {
            return Err(breakdown(self, BreakdownKind::NonFinite));
        }
        if self.rz <= 0.0 {
            return Err(breakdown(self, BreakdownKind::Rho));
        }
        a.apply(&self.p, &mut self.q);
        self.stats.matvecs += 1;
        let mut s1 = [dot(&self.p, &self.q)];
        global_sum(comm, &mut s1, &mut self.stats);
        let pq = s1[0];
        if !pq.is_finite() {
            return Err(breakdown(self, BreakdownKind::NonFinite));
        }
        if pq <= 0.0 {
            return Err(breakdown(self, BreakdownKind::Curvature));
        }
        let alpha = self.rz / pq;
        let p = &self.p;
        self.x.advance(|old, new| {
            if let Some(o) = old {
                new.copy_from_slice(o);
            }
            axpy(alpha, p, new);
        });
        axpy(-alpha, &self.q, &mut self.r);
        m.apply(&self.r, &mut self.z);
        self.stats.precond_applies += 1;
        let mut s2 = [dot(&self.r, &self.z), dot(&self.r, &self.r)];
        global_sum(comm, &mut s2, &mut self.stats);
        let beta = s2[0] / self.rz;
        self.rz = s2[0];
        self.res = s2[1].sqrt();
        if !(self.res.is_finite() && beta.is_finite()) {
            return Err(breakdown(self, BreakdownKind::NonFinite));
        }
        for (pi, &zi) in self.p.iter_mut().zip(&self.z) {
            *pi = zi + beta * *pi;
        }
        self.x.record(self.res);
        Ok(self.res)
    }
}

common_stepwise!(Cg, "Cg", q);

inherent_stepwise!(Cg);
