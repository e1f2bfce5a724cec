//! Step (8): the correction equations, by the solve's
//! [`crate::correction::Correction`] (PRIMME's `correction.c`): what the loop
//! tells the method about the selected pairs.

use super::*;

impl<'a, A: Operator + ?Sized, C: Comm + ?Sized> State<'_, 'a, '_, A, C> {
    /// Step (8): the corrections of the selected pairs `sel` into the first
    /// columns of `t` (Ritz vectors and residuals in `w`; `theta` every Ritz
    /// value of the basis), by the solve's [`Correction`]; returns the inner
    /// steps per pair.
    pub(super) fn correction_step(
        &mut self,
        w: &mut Work,
        sel: &[Sel],
        theta: &[f64],
    ) -> Vec<usize> {
        let (n, ns) = (self.n, sel.len());
        let shifts: Vec<f64> = sel.iter().map(|s| self.shift_for(s)).collect();
        let ctx = CorrectionCtx {
            floors: sel.iter().map(|s| 0.1 * self.tol_for(s.theta)).collect(),
            rel: 0.5f64.powi(self.stats.outer_iterations.min(1000) as i32),
            maxits: self.prm.maxits(),
            inner: self.prm.correction.stop,
            thetas: sel.iter().map(|s| s.theta).collect(),
            rnorms: sel.iter().map(|s| s.rnorm).collect(),
            ritz: theta,
            anorm: self.anorm,
            scale: self.op.scale(),
            mass_scale: self.mass.as_ref().map(|ms| ms.op.scale()),
            qmr: if matches!(
                self.prm.correction.solver,
                InnerSolver::Qmrs | InnerSolver::Auto
            ) {
                sel.iter()
                    .zip(&shifts)
                    .map(|(s, &shift)| self.qmr_setup(s, shift))
                    .collect()
            } else {
                Vec::new()
            },
            shifts,
        };
        let inners = ctx.shifts.iter().map(|&s| self.inner_for(s)).collect();
        let bx = &w.bxsel[..if self.mass.is_some() { n * ns } else { 0 }];
        let space = Space {
            op: &self.op,
            locked: &self.xl,
            nl: self.nproj(),
            mass: self.mass.as_ref().map(|ms| MassCtx {
                op: &ms.op as &dyn Operator,
                locked: &ms.bxl[..],
                bx,
            }),
            inners,
            ev_scale: self.ev_scale(),
            threads: self.prm.execution.threads,
            scratch: &mut self.w,
            spare: &mut self.v,
            at: self.m * n,
        };
        let step = Step {
            ctx,
            x: &w.xsel[..n * ns],
            r: &mut w.rsel,
            t: &mut self.t,
            space,
        };
        self.correction.correct(step, &mut self.stats)
    }

    /// Shift of the correction equation: θ, or σ of `Closest(σ)` while the residual
    /// is still large (JD's usual safeguard for interior targets).
    pub(super) fn shift_for(&self, s: &Sel) -> f64 {
        match self.target {
            Target::Closest(sigma)
                if s.rnorm > 1e-2 * self.res_scale(s.theta).max(f64::MIN_POSITIVE) =>
            {
                sigma
            }
            _ => s.theta,
        }
    }

    /// The preconditioner of the correction equation of a pair whose shift is
    /// `shift` (scaled units): a built K, Jacobi on the diagonal, or none.
    fn inner_for(&self, shift: f64) -> Inner<'a> {
        // the preconditioner's units: those of the operator given; for Jacobi
        // (D − θ/s)⁻¹ = s (sD − θ)⁻¹, proportional to the preconditioner of the
        // scaled operator, which the Krylov solvers do not mind; with M,
        // diag(K) − σ·diag(M) (without M's diagonal, diag(K) − σ)
        let shift = shift / self.ev_scale();
        let mdiag = self.pb.mass.and_then(|m| m.diagonal);
        crate::setup::inner_for(
            self.prm.preconditioner.kind,
            self.pb.diagonal,
            mdiag,
            self.pb.precond,
            shift,
        )
    }

    /// JDQMR's inputs for the pair `s` with correction shift `shift`.
    pub(super) fn qmr_setup(&self, s: &Sel, shift: f64) -> QmrSetup {
        QmrSetup {
            theta: s.theta,
            shift,
            target: self.target,
            maxits: self.prm.maxits(),
            conv_tol: self.tol_for(s.theta),
            ltol: f64::EPSILON * self.anorm.max(s.theta.abs()),
            etol_factor: QMR_ETOL,
            fixed: self.prm.correction.stop == InnerStop::Fixed,
        }
    }
}
