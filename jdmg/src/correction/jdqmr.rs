//! JDQMR inner solver: symmetric QMR (QMRs, Freund and Nachtigal) on the projected
//! correction equation with the dynamic stopping rules of Stathopoulos' JDQMR
//! (PRIMME's `inner_solve`): along the QMR iterates the Rayleigh quotient and the
//! eigenresidual norm of x − s are updated by scalar recurrences, and the inner
//! solve stops as soon as further steps cannot improve the outer eigenpair.
//!
//! One matvec, one preconditioner application and four global sums per step,
//! against two matvecs for BiCGSTAB (McCombs et al. §3 uses BiCGSTAB, which stays the
//! default; `InnerSolver::Qmrs` selects this one). QMRs needs a symmetric
//! operator and preconditioner: the projected (A − σI) is, and so are the Jacobi,
//! ILU(0) (LDLᵀ of a symmetric matrix) and FSAI preconditioners with the oblique
//! projection of [`crate::correction`] on the complement of x.

use lblib::{Comm, ReduceOp};
use precond::{Operator, Preconditioner};

use crate::dense::dot;
use crate::params::Target;

/// Why a JDQMR solve stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QmrStop {
    /// The step cap (`maxits`) or the caller's budget.
    Steps,
    /// The linear-system residual fell below ε‖A‖ or the caller's floor.
    Linear,
    /// The estimated eigenresidual stopped decreasing faster than the linear one
    /// (`tau_prev ≤ eres` or `eres_prev ≤ tau`): more steps would not help x.
    Stagnation,
    /// The estimated Rayleigh quotient moved away from the target.
    Ritz,
    /// The estimated eigenresidual passed the outer convergence test.
    Converged,
    /// The estimated eigenresidual fell below `etol_factor · ‖r‖`.
    Reduced,
    /// A vanishing or non-finite recurrence coefficient.
    Breakdown,
}

/// Per-solve inputs of [`JdQmr::solve`].
#[derive(Clone, Copy)]
pub(crate) struct QmrSetup {
    /// Ritz value θ of x and the shift σ of the correction equation.
    pub theta: f64,
    pub shift: f64,
    pub target: Target,
    /// Step cap.
    pub maxits: usize,
    /// Stop when the estimated eigenresidual is at most this (outer tolerance).
    pub conv_tol: f64,
    /// Stop when the linear residual is at most this (absolute).
    pub ltol: f64,
    /// Stop when the estimated eigenresidual is below `etol_factor · ‖r‖`
    /// (0 disables; PRIMME's JDQMR_ETol uses 0.1).
    pub etol_factor: f64,
    /// Fixed steps: disable the eigenpair-based rules (only `maxits`, `ltol` and
    /// breakdowns stop).
    pub fixed: bool,
}

/// Result of one JDQMR solve; the correction is −[`JdQmr::solution`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct QmrOutcome {
    pub steps: usize,
    pub matvecs: u64,
    pub precond_applies: u64,
    pub global_sums: u64,
    pub stop: QmrStop,
    /// Estimated Rayleigh quotient and eigenresidual of x − s at exit.
    pub eval: f64,
    pub eres: f64,
}

/// Work vectors of the JDQMR inner solver (allocated once; `solve` does not allocate).
pub(crate) struct JdQmr {
    g: Vec<f64>,
    d: Vec<f64>,
    w: Vec<f64>,
    delta: Vec<f64>,
    sol: Vec<f64>,
}

impl JdQmr {
    pub fn new(n: usize) -> Self {
        Self {
            g: vec![0.0; n],
            d: vec![0.0; n],
            w: vec![0.0; n],
            delta: vec![0.0; n],
            sol: vec![0.0; n],
        }
    }

    /// s with (I − QQᵀ)(A − σI)(I − QQᵀ) s ≈ r; the JD correction is t = −s.
    pub fn solution(&self) -> &[f64] {
        &self.sol
    }

    /// Runs QMRs from s = 0 on `op` (the projected A − σI) with the projected
    /// preconditioner `pc`, right-hand side `r` (the eigenresidual, orthogonal to Q)
    /// of norm `rnorm`, updating the eigenpair estimates as it goes.
    pub fn solve<A, M, C>(
        &mut self,
        op: &A,
        pc: &M,
        comm: &C,
        r: &[f64],
        rnorm: f64,
        s: &QmrSetup,
    ) -> QmrOutcome
    where
        A: Operator + ?Sized,
        M: Preconditioner + ?Sized,
        C: Comm + ?Sized,
    {
        let mut out = QmrOutcome {
            steps: 0,
            matvecs: 0,
            precond_applies: 0,
            global_sums: 0,
            stop: QmrStop::Steps,
            eval: s.theta,
            eres: rnorm,
        };
        self.sol.iter_mut().for_each(|v| *v = 0.0);
        self.delta.iter_mut().for_each(|v| *v = 0.0);
        if !(rnorm > 0.0 && rnorm.is_finite()) || s.maxits == 0 {
            out.stop = QmrStop::Linear;
            return out;
        }
        let mut prev = Recurrences {
            rho: self.start(pc, comm, r, &mut out),
            tau: rnorm,
            theta: 0.0,
            delta: 0.0,
            beta: 0.0,
            phi: 0.0,
            psi: 0.0,
            gamma: 0.0,
            eval: s.theta,
            eres: rnorm,
        };
        let ts = s.theta - s.shift;
        loop {
            let Some((sigma, alpha)) = self.step_length(op, comm, &mut out, prev.rho) else {
                out.stop = QmrStop::Breakdown;
                break;
            };
            let th = self.reduce_residual(alpha, comm, &mut out).sqrt() / prev.tau;
            let c2 = 1.0 / (1.0 + th * th);
            let tau = prev.tau * th * c2.sqrt();
            let gamma = c2 * prev.theta * prev.theta;
            let eta = alpha * c2;
            self.advance_solution(gamma, eta);
            out.steps += 1;
            // Eigenpair estimates of x − s (s ⟂ x): Rayleigh quotient and residual.
            let delta_c = gamma * prev.delta + eta * prev.rho;
            let beta_c = prev.beta - delta_c;
            let phi = gamma * gamma * prev.phi + eta * eta * sigma;
            let psi = gamma * prev.psi + gamma * prev.phi;
            let gamma_c = prev.gamma + 2.0 * psi + phi;
            let ss = 1.0 + self.solution_norm2(comm, &mut out);
            let eval = s.shift + (ts + 2.0 * beta_c + gamma_c) / ss;
            let e2 = tau * tau / ss + (ts + beta_c) * (ts + beta_c) / ss
                - (eval - s.shift) * (eval - s.shift);
            let eres = if e2 >= 0.0 {
                e2.sqrt()
            } else {
                (tau * tau / ss).sqrt()
            };
            out.eval = eval;
            out.eres = eres;
            let now = Estimates { tau, eval, eres };
            if let Some(st) = stop_rule(s, out.steps, rnorm, prev.estimates(), now) {
                out.stop = st;
                break;
            }
            let Some(rho) = self.next_direction(pc, comm, &mut out, prev.rho) else {
                out.stop = QmrStop::Breakdown;
                break;
            };
            prev = Recurrences {
                rho,
                tau,
                theta: th,
                delta: delta_c,
                beta: beta_c,
                phi,
                psi,
                gamma: gamma_c,
                eval,
                eres,
            };
        }
        out
    }

    /// g = r, d = K⁻¹g; returns ρ = gᵀd (one global sum).
    fn start<M, C>(&mut self, pc: &M, comm: &C, r: &[f64], out: &mut QmrOutcome) -> f64
    where
        M: Preconditioner + ?Sized,
        C: Comm + ?Sized,
    {
        self.g.copy_from_slice(r);
        pc.apply(&self.g, &mut self.d);
        out.precond_applies += 1;
        global_sum(comm, dot(&self.g, &self.d), out)
    }

    /// w = A d and σ = dᵀw (one global sum); returns (σ, α = ρ/σ), `None` on a
    /// breakdown (σ vanishing or not finite, |α| outside [ε, 1/ε]).
    #[inline]
    fn step_length<A, C>(
        &mut self,
        op: &A,
        comm: &C,
        out: &mut QmrOutcome,
        rho: f64,
    ) -> Option<(f64, f64)>
    where
        A: Operator + ?Sized,
        C: Comm + ?Sized,
    {
        op.apply(&self.d, &mut self.w);
        out.matvecs += 1;
        let sigma = global_sum(comm, dot(&self.d, &self.w), out);
        let alpha = rho / sigma;
        if !sigma.is_finite()
            || sigma == 0.0
            || !alpha.is_finite()
            || alpha.abs() < f64::EPSILON
            || alpha.abs() > 1.0 / f64::EPSILON
        {
            return None;
        }
        Some((sigma, alpha))
    }

    /// g −= α w; returns ‖g‖² (one global sum).
    #[inline]
    fn reduce_residual<C: Comm + ?Sized>(
        &mut self,
        alpha: f64,
        comm: &C,
        out: &mut QmrOutcome,
    ) -> f64 {
        self.g
            .iter_mut()
            .zip(&self.w)
            .for_each(|(g, w)| *g -= alpha * w);
        global_sum(comm, dot(&self.g, &self.g), out)
    }

    /// δ = γ δ + η d and s += δ.
    #[inline]
    fn advance_solution(&mut self, gamma: f64, eta: f64) {
        for ((dl, so), dd) in self.delta.iter_mut().zip(&mut self.sol).zip(&self.d) {
            *dl = gamma * *dl + eta * dd;
            *so += *dl;
        }
    }

    /// ‖s‖² (one global sum).
    #[inline]
    fn solution_norm2<C: Comm + ?Sized>(&self, comm: &C, out: &mut QmrOutcome) -> f64 {
        global_sum(comm, dot(&self.sol, &self.sol), out)
    }

    /// The next direction: w = K⁻¹g, ρ = gᵀw (one global sum), d = w + (ρ/ρ_prev) d.
    /// Returns ρ, `None` on a breakdown (ρ vanishing or not finite; d unchanged).
    #[inline]
    fn next_direction<M, C>(
        &mut self,
        pc: &M,
        comm: &C,
        out: &mut QmrOutcome,
        rho_prev: f64,
    ) -> Option<f64>
    where
        M: Preconditioner + ?Sized,
        C: Comm + ?Sized,
    {
        pc.apply(&self.g, &mut self.w);
        out.precond_applies += 1;
        let rho = global_sum(comm, dot(&self.g, &self.w), out);
        if !rho.is_finite() || rho == 0.0 {
            return None;
        }
        let beta = rho / rho_prev;
        for (w, d) in self.w.iter_mut().zip(&self.d) {
            *w += beta * d;
        }
        std::mem::swap(&mut self.d, &mut self.w);
        Some(rho)
    }
}

/// The sum of `local` over the processes of `comm`, counted in `out`.
#[inline]
fn global_sum<C: Comm + ?Sized>(comm: &C, local: f64, out: &mut QmrOutcome) -> f64 {
    let mut buf = [local];
    comm.all_reduce(&mut buf, ReduceOp::Sum);
    out.global_sums += 1;
    buf[0]
}

/// Scalars of the QMRs recurrences and the eigenpair estimates after a step,
/// which the next step starts from.
#[derive(Clone, Copy)]
struct Recurrences {
    rho: f64,
    tau: f64,
    theta: f64,
    delta: f64,
    beta: f64,
    phi: f64,
    psi: f64,
    gamma: f64,
    eval: f64,
    eres: f64,
}

impl Recurrences {
    /// The step's linear residual norm and eigenpair estimates.
    #[inline]
    fn estimates(&self) -> Estimates {
        Estimates {
            tau: self.tau,
            eval: self.eval,
            eres: self.eres,
        }
    }
}

/// What the stopping rules of a QMRs step look at: the linear residual norm τ
/// and the estimated Rayleigh quotient and eigenresidual of x − s.
#[derive(Clone, Copy)]
pub(crate) struct Estimates {
    pub tau: f64,
    pub eval: f64,
    pub eres: f64,
}

/// The stopping rules after step `steps` of a solve with setup `s` and
/// right-hand side norm `rnorm`: `now` the step's estimates, `prev` the previous
/// step's (τ = `rnorm`, the Rayleigh quotient θ and eigenresidual `rnorm` before
/// the first). `None`: go on.
#[inline]
pub(crate) fn stop_rule(
    s: &QmrSetup,
    steps: usize,
    rnorm: f64,
    prev: Estimates,
    now: Estimates,
) -> Option<QmrStop> {
    let Estimates { tau, eval, eres } = now;
    if !(tau.is_finite() && eval.is_finite() && eres.is_finite()) {
        Some(QmrStop::Breakdown)
    } else if tau <= s.ltol {
        Some(QmrStop::Linear)
    } else if steps >= s.maxits {
        Some(QmrStop::Steps)
    } else if s.fixed {
        None
    } else if steps > 1 && (prev.tau <= eres || prev.eres <= tau) {
        Some(QmrStop::Stagnation)
    } else if match s.target {
        Target::Smallest => eval > prev.eval,
        Target::Largest => eval < prev.eval,
        Target::Closest(_) => (s.theta - eval).abs() > rnorm + eres,
        Target::LargestMagnitude => eval.abs() < prev.eval.abs(),
    } {
        Some(QmrStop::Ritz)
    } else if steps > 1 && eres <= s.conv_tol {
        Some(QmrStop::Converged)
    } else if steps > 1 && eres < s.etol_factor * rnorm {
        Some(QmrStop::Reduced)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lblib::SelfComm;

    /// Diagonal operator D − σI on vectors with a zero first entry (Q = e₀).
    struct Diag {
        d: Vec<f64>,
        shift: f64,
    }
    impl Operator for Diag {
        fn nrows(&self) -> usize {
            self.d.len()
        }
        fn apply_block(&self, x: &[f64], y: &mut [f64], _k: usize) {
            for ((y, x), d) in y.iter_mut().zip(x).zip(&self.d) {
                *y = (d - self.shift) * x;
            }
            y[0] = 0.0;
        }
    }
    struct Ident;
    impl Preconditioner for Ident {
        fn nrows(&self) -> usize {
            0
        }
        fn apply_block(&self, r: &[f64], z: &mut [f64], _k: usize) {
            z.copy_from_slice(r);
        }
    }

    fn setup(theta: f64, maxits: usize, fixed: bool) -> QmrSetup {
        QmrSetup {
            theta,
            shift: theta,
            target: Target::Smallest,
            maxits,
            conv_tol: 0.0,
            ltol: 0.0,
            etol_factor: 0.0,
            fixed,
        }
    }

    /// Pair (θ, e₀) of A = diag(d) + e₀rᵀ + reᵀ₀ (residual r ⟂ e₀): after every step
    /// the recurrences' Rayleigh quotient and residual norm of e₀ − s must match the
    /// ones computed explicitly.
    #[test]
    fn estimates_match_explicit_rayleigh_quotient_and_residual() {
        let n = 40;
        let d: Vec<f64> = (0..n).map(|i| 1.0 + i as f64).collect();
        let eps = 0.01;
        let theta = 1.0;
        let r: Vec<f64> = (0..n)
            .map(|i| if i == 0 { 0.0 } else { eps / i as f64 })
            .collect();
        let rn = dot(&r, &r).sqrt();
        let op = Diag {
            d: d.clone(),
            shift: theta,
        };
        for steps in 1..6 {
            let mut q = JdQmr::new(n);
            let out = q.solve(
                &op,
                &Ident,
                &SelfComm::new(),
                &r,
                rn,
                &setup(theta, steps, true),
            );
            assert_eq!(out.steps, steps);
            // Explicit: y = e₀ − s, ρ = yᵀAy/yᵀy, res = ‖Ay − ρy‖/‖y‖.
            let s = q.solution();
            let mut y: Vec<f64> = s.iter().map(|v| -v).collect();
            y[0] = 1.0;
            let ay = |y: &[f64]| -> Vec<f64> {
                let mut out: Vec<f64> = y.iter().zip(&d).map(|(y, d)| d * y).collect();
                out[0] = theta * y[0] + dot(&r, y);
                for i in 1..n {
                    out[i] += r[i] * y[0];
                }
                out
            };
            let a_y = ay(&y);
            let yy = dot(&y, &y);
            let rho = dot(&y, &a_y) / yy;
            let res: f64 = a_y
                .iter()
                .zip(&y)
                .map(|(a, y)| (a - rho * y).powi(2))
                .sum::<f64>()
                .sqrt()
                / yy.sqrt();
            assert!((out.eval - rho).abs() <= 1e-12, "{} vs {rho}", out.eval);
            assert!(
                (out.eres - res).abs() <= 1e-10 * rn.max(res),
                "{} vs {res}",
                out.eres
            );
        }
    }

    /// Enough steps solve the (SPD on the complement) system: ‖(D−θ)s − r‖ small.
    #[test]
    fn solves_the_projected_system() {
        let n = 30;
        let d: Vec<f64> = (0..n).map(|i| 1.0 + 0.5 * i as f64).collect();
        let op = Diag {
            d: d.clone(),
            shift: 0.7,
        };
        let mut r: Vec<f64> = (0..n).map(|i| ((i * 7 % 5) as f64) - 2.0).collect();
        r[0] = 0.0;
        let rn = dot(&r, &r).sqrt();
        let mut q = JdQmr::new(n);
        let mut st = setup(1.0, 100, true);
        st.shift = 0.7;
        st.ltol = 1e-12 * rn;
        let out = q.solve(&op, &Ident, &SelfComm::new(), &r, rn, &st);
        let s = q.solution();
        let err: f64 = (1..n)
            .map(|i| ((d[i] - 0.7) * s[i] - r[i]).powi(2))
            .sum::<f64>()
            .sqrt();
        assert!(err <= 1e-9 * rn, "err {err} after {:?}", out);
        assert!(out.steps < n, "{:?}", out);
        assert_eq!(out.matvecs as usize, out.steps);
    }
}
