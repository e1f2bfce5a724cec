//! Locking (PRIMME's `locking.c`): the accepted candidates join the locked
//! pairs and leave the basis; soft locking's end; and what the loop top and
//! the dynamic inner-solver choice watch.

use super::*;

impl<A: Operator + ?Sized, C: Comm + ?Sized> State<'_, '_, '_, A, C> {
    /// At the loop top (from the second on): the checkpoint sink's request
    /// (saved; a last checkpoint ends the solve with [`Outcome::Stopped`]) and
    /// the monitor's, which ends the loop with [`Exit::Repartition`]. `b`: the
    /// new block's columns (in `t`); `stop`: the observer asked to stop.
    /// Collective.
    pub(super) fn poll_hooks<P>(
        &mut self,
        monitor: &mut Option<&mut dyn LoopMonitor<Plan = P>>,
        b: usize,
        stop: bool,
    ) -> Result<Option<Exit<P>>, JdError> {
        if self.sink.is_some() {
            let req = self.poll_checkpoint(stop);
            if req != CheckpointRequest::Continue {
                let last = req == CheckpointRequest::SaveAndStop;
                let ck = self.snapshot(b);
                if let Some(s) = self.sink.as_mut() {
                    s.save(&ck, last);
                }
                if last {
                    return Ok(Some(Exit::Solved(self.ended(Outcome::Stopped))));
                }
            }
        }
        if let Some(plan) = monitor.as_mut().and_then(|m| m.poll(&self.stats)) {
            let snapshot = Box::new(self.snapshot(b));
            return Ok(Some(Exit::Repartition { plan, snapshot }));
        }
        Ok(None)
    }

    /// The true residuals of the lock candidates (vectors in `t`): with a mass
    /// matrix by [`State::verify_locks_mass`], whose M·x it returns (empty
    /// otherwise), else by [`State::true_lock_residuals`]. Collective.
    pub(super) fn check_lock_candidates(&mut self, lock: &mut [(usize, f64, f64)]) -> Vec<f64> {
        let t0 = Instant::now();
        let mut lock_bx = Vec::new();
        if !lock.is_empty() {
            if self.has_mass() {
                let nlk = lock.len();
                let mut lx = std::mem::take(&mut self.t);
                lock_bx = self.verify_locks_mass(lock, &mut lx[..self.n * nlk]);
                self.t = lx;
            } else {
                self.true_lock_residuals(lock);
            }
        }
        self.stats.phases.lock_checks += t0.elapsed().as_secs_f64();
        lock_bx
    }

    /// The candidates whose true residuals pass the test (indices into
    /// `lock`). With the whole space in the basis (`basis_full`) the Ritz
    /// pairs are exact up to rounding: they are accepted up to √ε‖A‖ once the
    /// basis has been repaired twice. When some candidate fails: with a full
    /// basis, V, W and H are rebuilt (`None`: Rayleigh-Ritz again, without
    /// new vectors); otherwise the recurrence residual lied (drift) and
    /// W = AV is refreshed.
    ///
    /// # Errors
    /// `NotSymmetric` when a repaired full basis still leaves a true residual
    /// above √ε‖A‖.
    pub(super) fn accept_locks(
        &mut self,
        lock: &[(usize, f64, f64)],
        basis_full: bool,
    ) -> Result<Option<Vec<usize>>, JdError> {
        let full_ok = basis_full && self.full_repairs >= 2;
        let accepted: Vec<usize> = (0..lock.len())
            .filter(|&j| {
                let (_, th, rn) = lock[j];
                let floor = f64::EPSILON.sqrt() * self.res_scale(th);
                rn <= self.lock_tol(th) || (full_ok && rn <= floor)
            })
            .collect();
        if accepted.len() < lock.len() {
            if full_ok {
                let worst = lock.iter().map(|l| l.2).fold(0.0, f64::max);
                return Err(self.not_symmetric(worst));
            }
            if basis_full {
                self.repair_basis();
                self.full_repairs += 1;
                return Ok(None);
            }
            self.refresh_w();
        }
        Ok(Some(accepted))
    }

    /// Thick restart (GD+k) when the next block of `bnext` columns does not
    /// fit the basis, else this iteration's Ritz coefficients (`y`, m × m) are
    /// kept for the next restart.
    pub(super) fn restart_or_keep(&mut self, y: &[f64], m: usize, bnext: usize) {
        if self.m + bnext > self.basis_cap() && self.m > 0 {
            let t0 = Instant::now();
            self.restart(y, m);
            self.stats.phases.restart += t0.elapsed().as_secs_f64();
        } else {
            let kp = self.sz.k.min(m);
            self.prev = y[..m * kp].to_vec();
            self.prev_m = m;
            self.prev_k = kp;
        }
    }

    /// Locks the candidates `lock[j]` for j in `accepted` (their vectors in
    /// `t`, M·x in `lock_bx` with a mass matrix): into the locked vectors (and
    /// the solve groups' copies), values and residuals. Returns their
    /// positions among the Ritz pairs.
    pub(super) fn lock_accepted(
        &mut self,
        lock: &[(usize, f64, f64)],
        accepted: &[usize],
        lock_bx: &[f64],
    ) -> Vec<usize> {
        let n = self.n;
        let mut locked_pos = Vec::with_capacity(accepted.len());
        self.release_basis_tail(self.nl() + accepted.len());
        for &j in accepted {
            let (p, th, rn) = lock[j];
            self.correction
                .on_lock(&self.t[j * n..(j + 1) * n], &mut self.stats);
            self.xl.extend_from_slice(&self.t[j * n..(j + 1) * n]);
            if let Some(ms) = self.mass.as_mut() {
                ms.bxl.extend_from_slice(&lock_bx[j * n..(j + 1) * n]);
            }
            self.lam.push(th);
            self.res.push(rn);
            locked_pos.push(p);
        }
        self.stats.locked = self.nl();
        locked_pos
    }

    /// Removes the Ritz vectors just locked (positions `locked` of the m×m
    /// `y`) from the basis: V ← V Y[:, rest], the remaining Ritz vectors in
    /// order (with harmonic extraction, the orthogonal complement of the
    /// locked vectors in span(V)). Returns the new basis size and its Ritz
    /// coefficients, None when nothing was locked.
    pub(super) fn remove_locked(
        &mut self,
        y: &[f64],
        m: usize,
        locked: &[usize],
    ) -> Option<(usize, Vec<f64>)> {
        if locked.is_empty() {
            return None;
        }
        let t0 = Instant::now();
        let out = if self.harm.is_some() {
            self.harmonic_remove_locked(y, m, locked)
        } else {
            let rest: Vec<usize> = (0..m).filter(|p| !locked.contains(p)).collect();
            let mut c = vec![0.0; m * rest.len()];
            for (q, &p) in rest.iter().enumerate() {
                c[q * m..(q + 1) * m].copy_from_slice(&y[p * m..(p + 1) * m]);
            }
            self.transform_basis(&c, rest.len());
            (rest.len(), identity(rest.len()))
        };
        self.prev_k = 0;
        self.stats.phases.restart += t0.elapsed().as_secs_f64();
        Some(out)
    }

    /// Soft locking's end, all `nev` wanted pairs converged at once: their
    /// values and vectors from the basis (`y`: m×m Ritz coefficients, `theta`
    /// and `ritz_seen` in target order).
    ///
    /// # Errors
    /// `NotSymmetric` when the basis spans the whole space (`basis_full`) and
    /// the residuals stay above √ε‖A‖.
    pub(super) fn finish_soft(
        &mut self,
        y: &mut [f64],
        m: usize,
        theta: &[f64],
        ritz_seen: &[(f64, f64)],
        basis_full: bool,
    ) -> Result<Solution, JdError> {
        let (n, nev) = (self.n, self.prm.problem.nev);
        let floor = f64::EPSILON.sqrt() * self.res_scale(theta[nev.saturating_sub(1)]);
        let worst = ritz_seen.iter().take(nev).map(|r| r.1).fold(0.0, f64::max);
        if basis_full
            && worst > floor
            && ritz_seen.iter().take(nev).any(|r| r.1 > self.tol_for(r.0))
        {
            return Err(self.not_symmetric(worst));
        }
        let (lam, res) = self.soft_values(y, m, theta, ritz_seen);
        let mut xs = vec![0.0; n * nev];
        gemm_nn(
            &mut xs,
            &self.v,
            n,
            m,
            &y[..m * nev],
            nev,
            self.prm.execution.threads,
        );
        self.xl.truncate(self.ndefl * n);
        self.xl.extend_from_slice(&xs);
        self.lam = lam;
        self.res = res;
        Ok(self.finish(&[]))
    }

    /// Hands the correction method this iteration's progress (the dynamic
    /// choice decides by it): the potential of the wanted pairs (`ritz_seen`,
    /// `remaining` of them) and the counted work. Collective when the method's
    /// `observe` is.
    pub(super) fn observe_progress(&mut self, ritz_seen: &[(f64, f64)], remaining: usize) {
        let phi = dynamic::potential(ritz_seen, remaining, |th| self.tol_for(th));
        let s = &self.stats;
        let progress = Progress {
            phi,
            counts: dynamic::Counts {
                matvecs: s.matvecs,
                precond_applications: s.precond_applications,
                mass_matvecs: s.mass_matvecs,
                basis_passes: s.basis_passes,
                inner_steps: s.inner_steps,
                n: self.n,
                basis: self.m,
                locked: self.ndefl + self.nl(),
            },
        };
        self.correction.observe(&progress, &mut self.stats);
    }
}
