//! Steps (6)-(7) of the loop (McCombs et al. §3): the Ritz vectors and
//! residuals of the targeted pairs, in batches, their convergence test and
//! the lock candidates; then the true residuals of the candidates.

use super::*;

/// The loop's buffers and inner solvers, made once per solve
/// ([`State::work`]).
pub(super) struct Work {
    /// Ritz vectors and residuals of the selected pairs (at most k); each
    /// batch is computed in place after the pairs selected so far.
    pub xsel: Vec<f64>,
    pub rsel: Vec<f64>,
    /// M·X of the selected pairs (generalized problems only).
    pub bxsel: Vec<f64>,
}

/// What [`State::select_pairs`] found.
pub(super) struct Selected {
    /// The unconverged pairs to correct, in target order (at most k).
    pub sel: Vec<Sel>,
    /// Lock candidates: (position, θ, residual norm), their vectors in `t`.
    pub lock: Vec<(usize, f64, f64)>,
    /// Wanted pairs found converged.
    pub wanted_converged: usize,
    /// (θ, ‖r‖) of every pair looked at, in target order.
    pub ritz_seen: Vec<(f64, f64)>,
}

impl<A: Operator + ?Sized, C: Comm + ?Sized> State<'_, '_, '_, A, C> {
    /// The loop's buffers for this solve's parameters.
    pub(super) fn work(&self) -> Work {
        let (n, k) = (self.n, self.sz.k);
        Work {
            xsel: vec![0.0; n * k],
            rsel: vec![0.0; n * k],
            bxsel: vec![0.0; if self.has_mass() { n * k } else { 0 }],
        }
    }

    /// Ritz vectors X = VY and residuals R = WY − XΘ of the pairs in target
    /// order (`theta`, `y`: m×m; the first `limit` looked at), in batches until
    /// k unconverged pairs are selected; converged wanted pairs become lock
    /// candidates in target order only (a converged pair behind an
    /// unconverged one waits, so that a missed copy of a clustered or multiple
    /// eigenvalue cannot be overtaken). `early`: the basis was restarted to
    /// the kept Ritz vectors first; `basis_full`: every pair counts as
    /// converged. Collective (one global sum per batch).
    ///
    /// # Errors
    /// `NonFinite` when a residual norm is NaN or Inf.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn select_pairs(
        &mut self,
        w: &mut Work,
        theta: &[f64],
        y: &[f64],
        m: usize,
        limit: usize,
        early: bool,
        basis_full: bool,
    ) -> Result<Selected, JdError> {
        let threads = self.prm.execution.threads;
        let (n, k) = (self.n, self.sz.k);
        let mass = self.has_mass();
        let remaining = self.goal.saturating_sub(self.nl());
        let mut sel: Vec<Sel> = Vec::new();
        let mut lock: Vec<(usize, f64, f64)> = Vec::new(); // (position, theta, true rnorm)
        let mut wanted_converged = 0;
        let mut in_order = true;
        let mut pos = 0;
        let mut ritz_seen: Vec<(f64, f64)> = Vec::new();
        let t_res = Instant::now();
        while sel.len() < k && pos < limit {
            let cnt = (k - sel.len())
                .min(limit - pos)
                .max(if pos < remaining { 1 } else { 0 });
            let cnt = cnt.max(1).min(limit - pos);
            let ycols = &y[pos * m..(pos + cnt) * m];
            // cnt ≤ k − s0: the batch fits after the pairs selected so far.
            let s0 = sel.len();
            // With M: ‖X‖² after ‖R‖² (the test takes ‖r‖/‖x‖).
            let mut nrm = vec![0.0; if mass { 2 * cnt } else { cnt }];
            if mass {
                let xb = &mut w.xsel[s0 * n..(s0 + cnt) * n];
                let bxb = &mut w.bxsel[s0 * n..(s0 + cnt) * n];
                let rb = &mut w.rsel[s0 * n..(s0 + cnt) * n];
                // MX = (MV) Y, R = W Y − MX Θ and ‖R‖ in one pass over MV
                // and W; X = V Y in another.
                crate::tall_skinny::ritz_residuals(
                    bxb,
                    rb,
                    &mut nrm[..cnt],
                    self.dual_basis(),
                    &self.w,
                    n,
                    m,
                    ycols,
                    &theta[pos..pos + cnt],
                    threads,
                );
                gemm_nn(xb, &self.v, n, m, ycols, cnt, threads);
                for j in 0..cnt {
                    let c = &xb[j * n..(j + 1) * n];
                    nrm[cnt + j] = crate::dense::dot(c, c);
                }
                self.stats.basis_passes += 3;
            } else {
                let xb = &mut w.xsel[s0 * n..(s0 + cnt) * n];
                let rb = &mut w.rsel[s0 * n..(s0 + cnt) * n];
                // X = V Y, R = W Y − X Θ and ‖R‖ in one pass over V and W
                // (after an early restart, over their columns pos..pos+cnt).
                let unit;
                let (cols, yc, from): (usize, &[f64], usize) = if early {
                    unit = identity(cnt);
                    (cnt, &unit, pos * n)
                } else {
                    (m, ycols, 0)
                };
                crate::tall_skinny::ritz_residuals(
                    xb,
                    rb,
                    &mut nrm,
                    &self.v[from..],
                    &self.w[from..],
                    n,
                    cols,
                    yc,
                    &theta[pos..pos + cnt],
                    threads,
                );
                if !early {
                    self.stats.basis_passes += 2;
                }
            }
            if self.residual_deflation() > 0 {
                self.deflate_residuals(&mut w.rsel[s0 * n..(s0 + cnt) * n], &mut nrm[..cnt]);
            }
            self.allreduce(&mut nrm);
            if mass {
                // ‖r‖/‖x‖: the residual of the vector of unit 2-norm.
                for j in 0..cnt {
                    let x2 = nrm[cnt + j];
                    nrm[j] = if x2 > 0.0 { nrm[j] / x2 } else { nrm[j] };
                }
                nrm.truncate(cnt);
            }
            for (j, nj) in nrm.iter().enumerate() {
                let p = pos + j;
                let th = theta[p];
                let rn = nj.sqrt();
                if !rn.is_finite() {
                    return Err(JdError::NonFinite("residual"));
                }
                ritz_seen.push((th, rn));
                let wanted = p < remaining;
                let conv = rn <= self.lock_tol(th) || basis_full;
                // Lock in target order only: a converged pair behind an unconverged
                // one waits (without being corrected), so that a missed copy of a
                // clustered or multiple eigenvalue cannot be overtaken.
                in_order &= conv;
                if conv && wanted {
                    wanted_converged += 1;
                    if self.prm.basis.locking && in_order {
                        // The candidates' vectors go into T, free until the
                        // correction step.
                        let (c, q) = (s0 + j, lock.len());
                        if self.t.len() < (q + 1) * n {
                            self.t.resize((q + 1) * n, 0.0);
                        }
                        self.t[q * n..(q + 1) * n].copy_from_slice(&w.xsel[c * n..(c + 1) * n]);
                        lock.push((p, th, rn));
                    }
                    continue;
                }
                if conv || sel.len() >= k {
                    continue;
                }
                let (s, c) = (sel.len(), s0 + j);
                if s != c {
                    w.xsel.copy_within(c * n..(c + 1) * n, s * n);
                    w.rsel.copy_within(c * n..(c + 1) * n, s * n);
                    if mass {
                        w.bxsel.copy_within(c * n..(c + 1) * n, s * n);
                    }
                }
                sel.push(Sel {
                    theta: th,
                    rnorm: rn,
                });
            }
            pos += cnt;
        }
        self.stats.phases.residuals += t_res.elapsed().as_secs_f64();
        Ok(Selected {
            sel,
            lock,
            wanted_converged,
            ritz_seen,
        })
    }

    /// The true residuals of the lock candidates (vectors in `t`), standard
    /// problems: explicit Rayleigh quotients ρ = xᵀAx / xᵀx (more accurate
    /// than θ from H) into `lock[j].1`, ‖Ax − ρx‖ into `lock[j].2`. The
    /// products go into W's free columns m..mb when they suffice, else into
    /// block JDQMR's directions, idle between solves: no array beside those
    /// held for the whole solve (16 MB less at the peak on lap3d:100).
    /// Collective.
    pub(super) fn true_lock_residuals(&mut self, lock: &mut [(usize, f64, f64)]) {
        let n = self.n;
        let nlk = lock.len();
        let lock_x = &self.t[..n * nlk];
        let tail = self.m + nlk <= self.basis_cap();
        let mut wv = std::mem::take(&mut self.w);
        let mut own = Vec::new();
        // The method is set aside while its scratch is lent (GD+k, in its
        // place meanwhile, holds nothing).
        let mut method = std::mem::replace(&mut self.correction, Box::new(Gdk));
        let idle = method.idle_scratch().filter(|d| d.len() >= n * nlk);
        let ax: &mut [f64] = match idle {
            _ if tail => &mut wv[self.m * n..(self.m + nlk) * n],
            Some(d) => &mut d[..n * nlk],
            None => {
                own.resize(n * nlk, 0.0);
                &mut own
            }
        };
        self.op.apply_block(lock_x, ax, nlk);
        self.stats.matvecs += nlk as u64;
        // Explicit Rayleigh quotients ρ = xᵀAx / xᵀx (more accurate than θ
        // from H), then true residuals ‖Ax − ρx‖.
        let mut rq = vec![0.0; 2 * nlk];
        for j in 0..nlk {
            let (xj, aj) = (&self.t[j * n..(j + 1) * n], &ax[j * n..(j + 1) * n]);
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
            let (xj, aj) = (&self.t[j * n..(j + 1) * n], &mut ax[j * n..(j + 1) * n]);
            aj.iter_mut().zip(xj).for_each(|(a, x)| *a -= th * x);
            nrm[j] = crate::dense::dot(aj, aj);
        }
        if self.residual_deflation() > 0 {
            self.deflate_residuals(ax, &mut nrm);
        }
        drop(own);
        self.correction = method;
        self.w = wv;
        self.allreduce(&mut nrm);
        for (j, item) in lock.iter_mut().enumerate() {
            item.2 = nrm[j].sqrt();
        }
    }
}
