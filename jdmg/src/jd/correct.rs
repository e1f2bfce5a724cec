//! Step (8): the correction equations through the shared
//! [`crate::correction::CorrectionSolver`] (PRIMME's `correction.c`).

use super::*;

impl<A: Operator + ?Sized, C: Comm + ?Sized> State<'_, '_, '_, A, C> {
    /// Shift of the correction equation: θ, or σ of `Closest(σ)` while the residual
    /// is still large (JD's usual safeguard for interior targets).
    pub(super) fn shift_for(&self, s: &Sel) -> f64 {
        match self.target {
            Target::Closest(sigma) if s.rnorm > 1e-2 * self.anorm.max(f64::MIN_POSITIVE) => sigma,
            _ => s.theta,
        }
    }

    /// Solves the correction equation for one targeted pair into column `slot` of t
    /// with the shared [`CorrectionSolver`]. Returns the inner steps taken.
    pub(super) fn correct(
        &mut self,
        solver: &mut CorrectionSolver,
        x: &[f64],
        r: &[f64],
        s: &Sel,
        slot: usize,
    ) -> usize {
        let n = self.n;
        let nl = self.nl();
        let shift = self.shift_for(s);
        let inner = match (self.prm.precond, self.pb.diagonal, self.pb.precond) {
            (_, _, Some(m)) if self.prm.precond != PrecondChoice::Jacobi => Inner::Built(m),
            (PrecondChoice::Jacobi, Some(d), _) => Inner::Diagonal {
                // (D − θ/s)⁻¹ = s (sD − θ)⁻¹: proportional to the preconditioner of
                // the scaled operator, which the Krylov solvers do not mind.
                diag: d,
                shift: shift / self.op.scale(),
            },
            _ => Inner::Identity,
        };
        let maxits = self.prm.maxits();
        if maxits == 0 && matches!(inner, Inner::Identity) {
            // Davidson step without a preconditioner: t = −r. The residual is already
            // orthogonal to x, X and V up to rounding, which `orthogonalize_block`
            // removes (PRIMME's GD+k step).
            let tcol = &mut self.t[slot * n..(slot + 1) * n];
            tcol.iter_mut().zip(r).for_each(|(t, v)| *t = -v);
            return 0;
        }
        let floor = 0.1 * self.tol_for(s.theta);
        let qmr = (self.prm.inner_solver == InnerSolver::Qmrs).then(|| QmrSetup {
            theta: s.theta,
            shift,
            target: self.target,
            maxits,
            conv_tol: self.tol_for(s.theta),
            ltol: f64::EPSILON * self.anorm.max(s.theta.abs()),
            etol_factor: QMR_ETOL,
            fixed: self.prm.inner == InnerStop::Fixed,
        });
        let eq = Equation { x, r, shift, qmr };
        let tcol = &mut self.t[slot * n..(slot + 1) * n];
        let sums = std::cell::Cell::new(0);
        let rel = 0.5f64.powi(self.stats.outer_iterations.min(1000) as i32);
        let mut rule: Box<dyn FnMut(usize, f64, f64) -> bool + '_> = match self.prm.inner {
            InnerStop::Time { seconds } => {
                Box::new(time_rule(self.pb.comm, seconds, maxits, &sums))
            }
            stop => Box::new(steps_rule(stop, maxits, rel, floor)),
        };
        let out = solver.solve(
            &self.op,
            self.pb.comm,
            &self.xl,
            nl,
            inner,
            &eq,
            &mut *rule,
            tcol,
        );
        drop(rule);
        self.count(&out);
        self.stats.global_sums += sums.get();
        out.steps
    }

    /// Adds one correction's counters to the solve's.
    pub(super) fn count(&mut self, o: &Outcome) {
        self.stats.matvecs += o.matvecs;
        self.stats.precond_applications += o.precond_applies;
        self.stats.global_sums += o.global_sums;
        self.stats.inner_steps += o.steps as u64;
        if let Some(stop) = o.qmr_stop {
            let st = &mut self.stats.inner_stops;
            *match stop {
                QmrStop::Steps => &mut st.steps,
                QmrStop::Linear => &mut st.linear,
                QmrStop::Stagnation => &mut st.stagnation,
                QmrStop::Ritz => &mut st.ritz,
                QmrStop::Converged => &mut st.converged,
                QmrStop::Reduced => &mut st.reduced,
                QmrStop::Breakdown => &mut st.breakdown,
            } += 1;
        }
    }
}
