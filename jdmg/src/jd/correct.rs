//! Step (8): the correction equations through the shared
//! [`crate::correction::CorrectionSolver`] (PRIMME's `correction.c`).

use super::*;

impl<'a, A: Operator + ?Sized, C: Comm + ?Sized> State<'_, 'a, '_, A, C> {
    /// Step (8): the corrections of the selected pairs `sel` into the first
    /// columns of `t` (Ritz vectors and residuals in `w`; `theta` every Ritz
    /// value of the basis): by the solve groups' backend, GD+k steps, block
    /// JDQMR, or one equation at a time; returns the inner steps per pair.
    pub(super) fn correction_step(
        &mut self,
        w: &mut Work,
        sel: &[Sel],
        theta: &[f64],
    ) -> Vec<usize> {
        let (n, nev) = (self.n, self.prm.problem.nev);
        let mass = self.has_mass();
        let mut steps = Vec::with_capacity(sel.len());
        if let Some(be) = self.backend.take() {
            let ns = sel.len();
            let ctx = CorrectionCtx {
                x: &w.xsel[..n * ns],
                r: &w.rsel[..n * ns],
                shifts: sel.iter().map(|s| self.shift_for(s)).collect(),
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
                qmr: if self.prm.correction.solver == InnerSolver::Qmrs {
                    sel.iter()
                        .map(|s| self.qmr_setup(s, self.shift_for(s)))
                        .collect()
                } else {
                    Vec::new()
                },
            };
            steps = be.correct_block(&ctx, &mut self.t, &mut self.stats);
            self.backend = Some(be);
        } else if self.prm.maxits() == 0
            || w.dynamic
                .as_ref()
                .is_some_and(|d| d.method() == dynamic::Method::Gdk)
        {
            self.davidson_block(&w.rsel, sel);
            self.stats.gdk_iterations += 1;
            steps = vec![0; sel.len()];
        } else if let Some(bq) = w.block_qmr.as_mut() {
            steps = self.correct_qmr_block(bq, &w.xsel, &w.bxsel, &mut w.rsel, sel);
            self.stats.jdqmr_iterations += 1;
        } else {
            let kind = self.correction_kind();
            let solver = w.solver.get_or_insert_with(|| {
                CorrectionSolver::new(n, kind, nev + self.ndefl + self.sz.k)
            });
            for (i, s) in sel.iter().enumerate() {
                let bx = if mass {
                    &w.bxsel[i * n..(i + 1) * n]
                } else {
                    &[][..]
                };
                let st = self.correct(
                    solver,
                    &w.xsel[i * n..(i + 1) * n],
                    bx,
                    &w.rsel[i * n..(i + 1) * n],
                    s,
                    i,
                );
                steps.push(st);
            }
            if mass && kind == InnerSolver::Qmrs {
                self.stats.jdqmr_iterations += 1;
            }
        }
        steps
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

    /// Davidson steps for all `sel` pairs at once (GD+k, `maxits = 0`; PRIMME's
    /// GD+k): t_j = −K⁻¹ r_j into the first columns of t, one blocked
    /// preconditioner application for the block and no projections
    /// (`orthogonalize_block` removes the locked vectors and the basis, the Ritz
    /// vectors included).
    pub(super) fn davidson_block(&mut self, r: &[f64], sel: &[Sel]) {
        let (n, s) = (self.n, sel.len());
        let shifts: Vec<f64> = sel.iter().map(|p| self.shift_for(p)).collect();
        let inner = self.inner_for(shifts.first().copied().unwrap_or(0.0));
        let ev_scale = self.ev_scale();
        let (r, t) = (&r[..n * s], &mut self.t[..n * s]);
        match inner {
            Inner::Identity => {
                t.iter_mut().zip(r).for_each(|(t, v)| *t = -v);
                return;
            }
            Inner::Shifted { pc: m, .. } => {
                let t0 = Instant::now();
                // Each column's shift, in the preconditioner's units.
                let sh: Vec<f64> = shifts.iter().map(|x| x / ev_scale).collect();
                if self.prm.execution.threads > 1 && s > 1 {
                    // Half of the block's columns each on two threads (the
                    // substitutions are sequential within a column).
                    let h = s / 2;
                    let ((r1, r2), (t1, t2)) = (r.split_at(h * n), t.split_at_mut(h * n));
                    let (s1, s2) = sh.split_at(h);
                    rayon::join(
                        || m.apply_block_shifted(r1, t1, h, s1),
                        || m.apply_block_shifted(r2, t2, s - h, s2),
                    );
                } else {
                    m.apply_block_shifted(r, t, s, &sh);
                }
                self.stats.precond_seconds += t0.elapsed().as_secs_f64();
            }
            Inner::Diagonal { diag, .. } => {
                let scale = ev_scale;
                for (j, shift) in shifts.iter().enumerate() {
                    let cols = j * n..(j + 1) * n;
                    crate::correction::shifted_jacobi(
                        diag,
                        shift / scale,
                        &r[cols.clone()],
                        &mut t[cols],
                    );
                }
            }
            Inner::MassDiagonal { diag, mdiag, .. } => {
                let scale = ev_scale;
                for (j, shift) in shifts.iter().enumerate() {
                    let cols = j * n..(j + 1) * n;
                    crate::correction::shifted_jacobi_mass(
                        diag,
                        mdiag,
                        shift / scale,
                        &r[cols.clone()],
                        &mut t[cols],
                    );
                }
            }
        }
        t.iter_mut().for_each(|v| *v = -*v);
        self.stats.precond_applications += s as u64;
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

    /// JDQMR for all `sel` pairs in lockstep (see [`crate::correction::block_jdqmr`]): the
    /// corrections go into the first columns of t; `r` (the residuals) is
    /// overwritten. Returns inner steps per pair.
    pub(super) fn correct_qmr_block(
        &mut self,
        solver: &mut BlockJdQmr,
        x: &[f64],
        bx: &[f64],
        r: &mut Vec<f64>,
        sel: &[Sel],
    ) -> Vec<usize> {
        let (n, b) = (self.n, sel.len());
        let shifts: Vec<f64> = sel.iter().map(|s| self.shift_for(s)).collect();
        let inners: Vec<Inner<'_>> = shifts.iter().map(|&s| self.inner_for(s)).collect();
        let inner = BlockInner::from_inners(&inners);
        let setups: Vec<QmrSetup> = sel
            .iter()
            .zip(&shifts)
            .map(|(s, &shift)| self.qmr_setup(s, shift))
            .collect();
        let eq = BlockEquations {
            locked: &self.xl,
            nl: self.nproj(),
            x: &x[..n * b],
            shifts: &shifts,
            setups: &setups,
            threads: self.prm.execution.threads,
            mass: self.mass.as_ref().map(|ms| BlockMass {
                op: &ms.op as &dyn Operator,
                locked: &ms.bxl[..],
                x: &bx[..n * b],
            }),
        };
        // W's and V's columns m..m+b are free until the extension that fills
        // them (the restart made room): the solve's scratch and its updates δ.
        let at = self.m * n;
        let out = solver.solve(
            &self.op,
            self.pb.comm,
            &inner,
            &eq,
            Lent {
                r,
                t: &mut self.t,
                scratch: &mut self.w,
                at,
                spare: &mut self.v,
                spare_at: at,
            },
        );
        self.stats.matvecs += out.matvecs;
        self.stats.precond_applications += out.precond_applies;
        self.stats.precond_seconds += out.precond_seconds;
        self.stats.global_sums += out.global_sums;
        self.stats.mass_matvecs += out.mass_matvecs;
        out.per_eq
            .iter()
            .map(|q| {
                self.count(&EquationOutcome {
                    steps: q.steps,
                    qmr_stop: Some(q.stop),
                    ..EquationOutcome::default()
                });
                q.steps
            })
            .collect()
    }

    /// Solves the correction equation for one targeted pair into column `slot` of t
    /// with the shared [`CorrectionSolver`]. Returns the inner steps taken.
    pub(super) fn correct(
        &mut self,
        solver: &mut CorrectionSolver,
        x: &[f64],
        bx: &[f64],
        r: &[f64],
        s: &Sel,
        slot: usize,
    ) -> usize {
        let n = self.n;
        let nl = self.nproj();
        let shift = self.shift_for(s);
        let inner = self.inner_for(shift);
        let maxits = self.prm.maxits();
        let floor = 0.1 * self.tol_for(s.theta);
        let qmr = (self.correction_kind() == InnerSolver::Qmrs).then(|| self.qmr_setup(s, shift));
        let eq = Equation { x, r, shift, qmr };
        let tcol = &mut self.t[slot * n..(slot + 1) * n];
        let sums = std::cell::Cell::new(0);
        let rel = 0.5f64.powi(self.stats.outer_iterations.min(1000) as i32);
        let mut rule: Box<dyn FnMut(usize, f64, f64) -> bool + '_> = match self.prm.correction.stop
        {
            InnerStop::Time { seconds } => {
                Box::new(time_rule(self.pb.comm, seconds, maxits, &sums))
            }
            stop => Box::new(steps_rule(stop, maxits, rel, floor)),
        };
        let mass = self.mass.as_ref().map(|ms| crate::correction::MassCtx {
            op: &ms.op as &dyn Operator,
            locked: &ms.bxl[..],
            bx,
        });
        let out = solver.solve_general(
            &self.op,
            mass,
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
    pub(super) fn count(&mut self, o: &EquationOutcome) {
        self.stats.matvecs += o.matvecs;
        self.stats.precond_applications += o.precond_applies;
        self.stats.precond_seconds += o.precond_seconds;
        self.stats.global_sums += o.global_sums;
        self.stats.mass_matvecs += o.mass_matvecs;
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
