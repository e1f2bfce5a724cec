//! Right-preconditioned BiCGSTAB (van der Vorst 1992; Saad, Algorithm 7.7 with right
//! preconditioning), step-wise.

use lbcomm::comm::Comm;

use super::{
    axpy, axpy_dot2, common_stepwise, dot, dot3, global_sum, inherent_stepwise, initial_residual,
    Breakdown, BreakdownKind, IterPair, KrylovResult, KrylovStats, Stepwise, StopCriteria,
};
use crate::operator::{Operator, Preconditioner};

/// Step-wise right-preconditioned BiCGSTAB for `A x = b` (`A M^{-1} u = b`, `x = M^{-1} u`).
///
/// One step costs 2 operator and 2 preconditioner applications and **3 global sums**:
/// `(r̂, v)`; `(t, s), (t, t), (s, s)` fused; `(r̂, r), (r, r)` fused (the last also gives
/// the next `ρ`). The returned norms are the **recurrence** residual `‖r_k‖` (which for
/// right preconditioning is the unpreconditioned residual `b − A x_k` in exact arithmetic);
/// use [`Bicgstab::true_residual_norm`] for the true one.
///
/// Breakdowns: `|ρ| ≤ ε·‖r̂‖·‖r‖` or `(r̂, v) = 0` gives [`BreakdownKind::Rho`];
/// `(t, t) = 0` or `ω = 0` gives [`BreakdownKind::Omega`] (after taking the half step
/// `x += α p̂`, which is kept); NaN/∞ gives [`BreakdownKind::NonFinite`]. In all cases
/// [`Bicgstab::solution`] holds the iterate with the smallest residual norm seen, and
/// [`Bicgstab::restart`] continues from it. After a breakdown, further `step` calls return
/// the same breakdown (without work) until `restart` or `start`.
#[derive(Debug, Clone)]
pub struct Bicgstab {
    n: usize,
    b: Vec<f64>,
    r: Vec<f64>,
    rhat: Vec<f64>,
    p: Vec<f64>,
    v: Vec<f64>,
    phat: Vec<f64>,
    shat: Vec<f64>,
    t: Vec<f64>,
    x: IterPair,
    rec: Recurrence,
    /// `rec.res`, mirrored for [`common_stepwise`].
    res: f64,
    b_norm: f64,
    started: bool,
    broken: Option<Breakdown>,
    stats: KrylovStats,
}

impl Bicgstab {
    /// Allocates all scratch for vectors of local length `n` (9 vectors plus `b`).
    pub fn new(n: usize) -> Self {
        let z = || vec![0.0; n];
        Self {
            n,
            b: z(),
            r: z(),
            rhat: z(),
            p: z(),
            v: z(),
            phat: z(),
            shat: z(),
            t: z(),
            x: IterPair::new(n),
            rec: Recurrence::new(),
            res: 0.0,
            b_norm: 0.0,
            started: false,
            broken: None,
            stats: KrylovStats::default(),
        }
    }

    /// `r = b − A x_current`, `r̂ = r`, `ρ = (r, r)`; `with_b` also fuses `‖b‖²`.
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
        self.rhat.copy_from_slice(&self.r);
        self.rec.reset(rr);
        self.res = self.rec.res;
        self.res
    }
}

impl Bicgstab {
    /// One iteration (see [`Stepwise::step`]); `step` wraps it with the breakdown latch.
    fn step_inner<A: Operator + ?Sized, M: Preconditioner + ?Sized, C: Comm + ?Sized>(
        &mut self,
        a: &A,
        m: &M,
        comm: &C,
    ) -> Result<f64, Breakdown> {
        let r = self.step_column(a, m, comm);
        self.res = self.rec.res;
        r.map_err(|kind| Breakdown {
            kind,
            residual_norm: self.x.best_norm,
        })
    }

    fn step_column<A: Operator + ?Sized, M: Preconditioner + ?Sized, C: Comm + ?Sized>(
        &mut self,
        a: &A,
        m: &M,
        comm: &C,
    ) -> Result<f64, BreakdownKind> {
        if self.rec.res == 0.0 {
            // Already exact: nothing to do (and ρ = 0 would look like a breakdown).
            return Ok(0.0);
        }
        self.stats.steps += 1;
        self.rec.precheck()?;
        let rho = self.rec.rho;
        self.rec.update_p(&mut self.p, &self.r, &self.v);
        // M = I: p̂ = p and ŝ = s are used in place (no copies).
        let identity = m.is_identity();
        if identity {
            a.apply(&self.p, &mut self.v);
        } else {
            m.apply(&self.p, &mut self.phat);
            a.apply(&self.phat, &mut self.v);
        }
        self.stats.precond_applies += 1;
        self.stats.matvecs += 1;
        let mut s1 = [dot(&self.rhat, &self.v)];
        global_sum(comm, &mut s1, &mut self.stats);
        let alpha = Recurrence::alpha(rho, s1[0])?;
        // s = r − α v, stored in r.
        axpy(-alpha, &self.v, &mut self.r);
        if identity {
            a.apply(&self.r, &mut self.t);
        } else {
            m.apply(&self.r, &mut self.shat);
            a.apply(&self.shat, &mut self.t);
        }
        self.stats.precond_applies += 1;
        self.stats.matvecs += 1;
        let mut s2 = dot3(&self.t, &self.r);
        global_sum(comm, &mut s2, &mut self.stats);
        let (phat, shat) = if identity {
            (&self.p, &self.r)
        } else {
            (&self.phat, &self.shat)
        };
        let Some(omega) = self.rec.omega_update(&mut self.x, s2, alpha, phat, shat)? else {
            return Ok(0.0);
        };
        let mut s3 = axpy_dot2(omega, &self.t, &mut self.r, &self.rhat);
        global_sum(comm, &mut s3, &mut self.stats);
        self.rec.finish(&mut self.x, rho, alpha, omega, s3)
    }
}

/// The scalar recurrence of one right-preconditioned BiCGSTAB system and its breakdown
/// rules, shared by [`Bicgstab`] and [`super::BlockBicgstab`] (which keeps one per
/// column): the callers do the vector work and the reductions, in the order
/// `precheck`, `update_p`, apply, `(r̂, v)`, `alpha`, `s = r − α v`, apply,
/// [`dot3`], `omega_update`, [`axpy_dot2`], `finish`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Recurrence {
    pub rho: f64,
    pub rho_prev: f64,
    pub alpha: f64,
    pub omega: f64,
    pub rhat_norm: f64,
    /// Recurrence residual norm of the current iterate.
    pub res: f64,
    /// The next step is the first of a Krylov space (`p = r`).
    pub fresh: bool,
}

impl Recurrence {
    pub fn new() -> Self {
        Self {
            rho: 0.0,
            rho_prev: 1.0,
            alpha: 1.0,
            omega: 1.0,
            rhat_norm: 0.0,
            res: 0.0,
            fresh: true,
        }
    }

    /// A fresh Krylov space after `r = b − A x`, `r̂ = r`, with `rr = (r, r)`.
    pub fn reset(&mut self, rr: f64) {
        self.rho = rr;
        self.res = rr.sqrt();
        self.rhat_norm = self.res;
        self.alpha = 1.0;
        self.omega = 1.0;
        self.fresh = true;
    }

    /// The breakdowns detectable before any work of a step (`res > 0` assumed).
    pub fn precheck(&self) -> Result<(), BreakdownKind> {
        if !self.rho.is_finite() || !self.res.is_finite() {
            return Err(BreakdownKind::NonFinite);
        }
        if self.rho.abs() <= f64::EPSILON * self.rhat_norm * self.res {
            return Err(BreakdownKind::Rho);
        }
        Ok(())
    }

    /// `p = r` on the first step of a Krylov space, else `p = r + β (p − ω v)` with
    /// `β = (ρ / ρ_prev)(α / ω)`.
    pub fn update_p(&mut self, p: &mut [f64], r: &[f64], v: &[f64]) {
        if self.fresh {
            p.copy_from_slice(r);
            self.fresh = false;
        } else {
            let beta = (self.rho / self.rho_prev) * (self.alpha / self.omega);
            let om = self.omega;
            for ((pi, &ri), &vi) in p.iter_mut().zip(r).zip(v) {
                *pi = ri + beta * (*pi - om * vi);
            }
        }
    }

    /// `α = ρ / (r̂, v)`.
    pub fn alpha(rho: f64, rv: f64) -> Result<f64, BreakdownKind> {
        if !rv.is_finite() {
            return Err(BreakdownKind::NonFinite);
        }
        if rv == 0.0 {
            return Err(BreakdownKind::Rho);
        }
        Ok(rho / rv)
    }

    /// From `[(t, s), (t, t), (s, s)]`: `ω`, and the iterate update `x += α p̂ + ω ŝ`.
    /// `Ok(Some(ω))`: continue with `r = s − ω t`; `Ok(None)`: `ω = 0` but the half step
    /// `x += α p̂` solved the system exactly (`res = 0`); `Err(Omega)`: `ω = 0`, the half
    /// step is kept and the recurrence needs a restart.
    pub fn omega_update(
        &mut self,
        x: &mut IterPair,
        sums: [f64; 3],
        alpha: f64,
        phat: &[f64],
        shat: &[f64],
    ) -> Result<Option<f64>, BreakdownKind> {
        let [ts, tt, ss] = sums;
        if !(ts.is_finite() && tt.is_finite() && ss.is_finite()) {
            return Err(BreakdownKind::NonFinite);
        }
        let omega = if tt > 0.0 { ts / tt } else { 0.0 };
        if omega == 0.0 {
            // Half step only: x += α p̂, residual s.
            x.advance(|old, new| {
                if let Some(o) = old {
                    new.copy_from_slice(o);
                }
                axpy(alpha, phat, new);
            });
            self.res = ss.sqrt();
            x.record(self.res);
            if ss == 0.0 {
                // Exact solution after the half step.
                return Ok(None);
            }
            // The Krylov recurrence cannot continue from here: a restart is needed.
            self.rho = 0.0;
            return Err(BreakdownKind::Omega);
        }
        x.advance(|old, new| match old {
            Some(o) => {
                for (((ni, &oi), &pi), &si) in new.iter_mut().zip(o).zip(phat).zip(shat) {
                    *ni = oi + alpha * pi + omega * si;
                }
            }
            None => {
                for ((ni, &pi), &si) in new.iter_mut().zip(phat).zip(shat) {
                    *ni += alpha * pi + omega * si;
                }
            }
        });
        Ok(Some(omega))
    }

    /// From `[(r̂, r), (r, r)]` of the new residual: the next `ρ` and the residual norm.
    pub fn finish(
        &mut self,
        x: &mut IterPair,
        rho: f64,
        alpha: f64,
        omega: f64,
        sums: [f64; 2],
    ) -> Result<f64, BreakdownKind> {
        self.rho_prev = rho;
        self.rho = sums[0];
        self.alpha = alpha;
        self.omega = omega;
        self.res = sums[1].sqrt();
        if !self.res.is_finite() {
            return Err(BreakdownKind::NonFinite);
        }
        x.record(self.res);
        Ok(self.res)
    }
}

common_stepwise!(Bicgstab, "Bicgstab", t);

inherent_stepwise!(Bicgstab);
