//! Convergence tests, target order, locking bookkeeping and the verification pass
//! for missed copies of multiple eigenvalues (PRIMME's `convergence.c`, `locking.c`).

use super::*;

/// How a pass ended ([`State::pass_over`]).
// one value per pass: the size of `Solution` does not matter
#[allow(clippy::large_enum_variant)]
pub(super) enum PassEnd {
    /// The solve is done.
    Done(Solution),
    /// Another pass starts with this new block; `stop`: a stop waits for the
    /// loop top.
    Next { block: usize, stop: bool },
}

/// Lanczos steps of the probe for missed copies ([`State::probe_missed`]).
const PROBE_STEPS: usize = 40;
/// Under `Verify::Auto` without a cluster of k locked values, the probe runs when
/// n is at most this many basis sizes (the invariant-subspace case it guards
/// against needs a basis that spans much of the space).
const PROBE_AUTO_BASES: usize = 8;

impl<A: Operator + ?Sized, C: Comm + ?Sized> State<'_, '_, '_, A, C> {
    /// Target order of Ritz values: indices into `theta`.
    pub(super) fn order(&self, theta: &[f64]) -> Vec<usize> {
        let mut idx: Vec<usize> = (0..theta.len()).collect();
        match self.target {
            Target::Smallest => idx.sort_by(|&a, &b| theta[a].total_cmp(&theta[b])),
            Target::Largest => idx.sort_by(|&a, &b| theta[b].total_cmp(&theta[a])),
            Target::Closest(s) => {
                idx.sort_by(|&a, &b| (theta[a] - s).abs().total_cmp(&(theta[b] - s).abs()))
            }
            Target::LargestMagnitude => {
                idx.sort_by(|&a, &b| theta[b].abs().total_cmp(&theta[a].abs()))
            }
        }
        idx
    }

    pub(super) fn tol_for(&self, theta: f64) -> f64 {
        // With a mass matrix: ‖K‖ + |θ|‖M‖ in place of ‖A‖ (see `mass`).
        match self.prm.problem.conv {
            ConvTest::Norm => self.prm.problem.tol * self.res_scale(theta).max(f64::MIN_POSITIVE),
            ConvTest::Rel => self.prm.problem.tol * theta.abs() * self.mass_norm(),
            ConvTest::Abs => self.prm.problem.tol * self.op.scale(),
            ConvTest::Sqrt => (self.prm.problem.tol * (theta.abs() * self.op.scale()).sqrt())
                .max(1e3 * f64::EPSILON * self.res_scale(theta)),
        }
    }

    /// The target of the wanted set: `self.target`, but during the end passes of
    /// a `LargestMagnitude` solve (which select Ritz pairs at one end) still
    /// `LargestMagnitude`.
    fn wanted_target(&self) -> Target {
        if self.prm.problem.target == Target::LargestMagnitude {
            Target::LargestMagnitude
        } else {
            self.target
        }
    }

    /// Sort key of an eigenvalue in the wanted set: smaller is wanted first.
    pub(super) fn key(&self, l: f64) -> f64 {
        match self.wanted_target() {
            Target::Smallest => l,
            Target::Largest => -l,
            Target::Closest(s) => (l - s).abs(),
            Target::LargestMagnitude => -l.abs(),
        }
    }

    /// Key and residual norm of the `nev`-th best locked pair (the boundary of the
    /// wanted set).
    pub(super) fn wanted_boundary(&self) -> (f64, f64) {
        self.boundary_among(self.lam.len())
    }

    /// [`State::wanted_boundary`] among the first `count` locked pairs.
    fn boundary_among(&self, count: usize) -> (f64, f64) {
        let mut items: Vec<(f64, f64)> = self.lam[..count]
            .iter()
            .zip(&self.res)
            .map(|(&l, &r)| (self.key(l), r))
            .collect();
        items.sort_by(|a, b| a.0.total_cmp(&b.0));
        let i = self.prm.problem.nev.min(items.len()).saturating_sub(1);
        items.get(i).copied().unwrap_or((f64::INFINITY, 0.0))
    }

    /// Largest number of locked eigenvalues equal within their residual bounds,
    /// among those before the boundary of the wanted set (`boundary`: or at it).
    pub(super) fn largest_locked_cluster(&self, boundary: bool) -> usize {
        // A missed copy of the last wanted value (a tie at the boundary) leaves
        // the set right; a cluster there is evidence of multiplets all the same.
        let (wk, wr) = self.wanted_boundary();
        let mut items: Vec<(f64, f64)> = self
            .lam
            .iter()
            .copied()
            .zip(self.res.iter().copied())
            .filter(|&(l, r)| {
                let k = self.key(l);
                k < wk - (wr + r) || (boundary && k <= wk + (wr + r))
            })
            .collect();
        items.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (mut best, mut run) = (0, 0);
        for i in 0..items.len() {
            let near = i > 0 && {
                let (a, b) = (items[i - 1], items[i]);
                let tol = a.1 + b.1 + 4.0 * f64::EPSILON * self.anorm.max(a.0.abs()).max(b.0.abs());
                (b.0 - a.0).abs() <= tol
            };
            run = if near { run + 1 } else { 1 };
            best = best.max(run);
        }
        best
    }

    /// Called when `goal` pairs are locked: decides whether the solve is done
    /// (true) or a (further) verification pass starts (false).
    ///
    /// Under `Verify::Auto` a multiplet among the locked values calls for a
    /// verification: two copies of a value strictly inside the wanted set, and
    /// with harmonic extraction two copies at its boundary too. A block method
    /// sees at most k copies of a multiple eigenvalue, but it misses copies of
    /// smaller multiplets as well when the values beyond converge first:
    /// lap3d:8 on 4 solve groups, nev = block = 3, locked 0.362, two of the
    /// three copies of 0.709, then 1.056; harmonic solves on two thread ranks
    /// locked one copy of the triple 3.426 nearest σ, then two of the triple
    /// 3.283 beyond it (the evidence of multiplets there lies at the
    /// boundary); on lap3d:10 with σ 10⁻³ above its 6-fold eigenvalue, nev =
    /// block = 7, block JDQMR with harmonic extraction locked five copies, then
    /// the values at distance 0.14 and 0.24. A multiplet completed at the
    /// boundary alone (lap3d, nev 4: one value and a triple) calls for none.
    ///
    /// A pass iterates a fresh random block orthogonal to the locked vectors
    /// (for an end of the spectrum with fewer than k copies, only when the
    /// Krylov probe finds a copy missing, see [`State::probe_missed`]); the
    /// pair it locks is a missed copy when it lies inside the wanted set beyond
    /// its residual bounds, and then another pass follows.
    pub(super) fn next_verification(&mut self) -> bool {
        if self.end_passes() {
            if self.in_end_pass() {
                // the pass locked the extreme value left at its end
                if self.end_concluded(self.last_lock_is_wanted()) {
                    return false;
                }
            } else if self.verifying.is_none() && self.nproj() < self.pb.n_global {
                self.start_pass(Target::Largest);
                return false;
            }
        }
        self.check_missed_copies()
    }

    /// The verification for missed copies of [`State::next_verification`]
    /// (after the end passes of a `LargestMagnitude` solve).
    pub(super) fn check_missed_copies(&mut self) -> bool {
        if self.verifying.is_some() {
            let j = self.nl() - 1;
            let (kn, rn) = (self.key(self.lam[j]), self.res[j]);
            // The boundary of the wanted set among the pairs locked before this one.
            let (wk, wr) = self.boundary_among(j);
            if kn >= wk - (wr + rn) {
                // A pass can converge to a pair beyond the wanted set while a copy
                // is still missing (the correction equations steer towards the
                // Ritz value at hand): a Krylov probe must find nothing either.
                if !self.probe_missed(wk, wr) {
                    self.stats.verified = Some(true);
                    return true;
                }
            } else {
                self.stats.missed_copies += 1;
            }
        } else {
            // Auto: a multiplet among the locked values calls for a pass
            // (see above), but for an end of the spectrum with
            // Rayleigh-Ritz and fewer than k copies the Krylov probe decides
            // first (min-max makes its evidence sure there, and it costs 40
            // single products where a pass converged a pair from a random block:
            // lap3d:24, nev 8, 527 products without a pass, 996 with one). On
            // small problems the probe also looks for a copy lost otherwise (a
            // restart can leave an invariant subspace holding one copy of a
            // double eigenvalue and a value beyond it when the basis spans much
            // of the space: n = 4, block 3 locked {0, λ, μ} of {0, λ, λ, μ}). On
            // larger problems without multiplets it is not run: it cost 10 % of
            // the matvecs and 15 % of the time of lap3d:40.
            let start = match self.prm.problem.verify {
                Verify::Never => false,
                Verify::Always => true,
                Verify::Auto => {
                    let exterior = self.harm.is_none()
                        && matches!(self.target, Target::Smallest | Target::Largest);
                    let cluster = self.largest_locked_cluster(self.harm.is_some());
                    let suspect = cluster >= 2;
                    (suspect && !(exterior && cluster < self.sz.k)) || {
                        let (wk, wr) = self.wanted_boundary();
                        let small = self.pb.n_global <= PROBE_AUTO_BASES * self.sz.max_basis;
                        self.prm.basis.locking
                            && (small || (exterior && suspect))
                            && self.nproj() < self.pb.n_global
                            && self.probe_missed(wk, wr)
                    }
                }
            };
            if !start || !self.prm.basis.locking {
                return true;
            }
        }
        if self.nproj() >= self.pb.n_global {
            self.stats.verified = Some(true);
            return true;
        }
        self.start_pass(self.target);
        false
    }

    /// Whether this solve runs end passes (see [`State::end_concluded`]):
    /// `LargestMagnitude` with locking and `Verify` other than `Never`.
    pub(super) fn end_passes(&self) -> bool {
        self.prm.problem.target == Target::LargestMagnitude
            && self.prm.basis.locking
            && self.prm.problem.verify != Verify::Never
    }

    /// Inside an end pass of a `LargestMagnitude` solve: the Ritz pairs are
    /// selected at one end (`Largest`, `Smallest`).
    pub(super) fn in_end_pass(&self) -> bool {
        self.prm.problem.target == Target::LargestMagnitude
            && matches!(self.target, Target::Largest | Target::Smallest)
    }

    /// Starts a verification pass whose Ritz pairs are selected by `target`.
    fn start_pass(&mut self, target: Target) {
        self.target = target;
        self.stats.verification_passes += 1;
        self.stats.verified = Some(false);
        self.verifying = Some(self.stats.outer_iterations);
        self.goal = self.nl() + 1;
    }

    /// An end pass of a `LargestMagnitude` solve has found the extreme value
    /// left at its end, inside the wanted set (`missed`) or outside it; true
    /// when another end pass starts, false when both ends are done.
    ///
    /// The wanted set takes its members from both ends of the spectrum, and a
    /// Ritz value underestimates the magnitude of the eigenvalue at its end
    /// (Cauchy interlacing), so a pair at one end can converge and lock while a
    /// larger magnitude at the other end is still an unconverged Ritz value
    /// behind it in the target order: the solve would end with a wrong set
    /// marked converged. After the `nev` pairs are locked, a pass at the top
    /// (`Largest`), then one at the bottom (`Smallest`), each going on with the
    /// basis at hand, finds the extreme eigenvalue left at that end. While it
    /// lies inside the wanted set it was missed: it stays locked and another
    /// pass at the same end follows; otherwise that end is done (see
    /// [`State::end_value_outside`]). A value found outside stays outside, since
    /// the boundary only grows as missed values are added, so the two ends need
    /// one check each. Pairs locked beyond the wanted set are dropped by
    /// [`State::finish`].
    pub(super) fn end_concluded(&mut self, missed: bool) -> bool {
        let next = match self.target {
            _ if missed => Some(self.target),
            Target::Largest => Some(Target::Smallest),
            _ => None,
        };
        match next {
            Some(end) if self.nproj() < self.pb.n_global => {
                if missed {
                    self.stats.missed_copies += 1;
                }
                self.start_pass(end);
                true
            }
            _ => {
                self.target = Target::LargestMagnitude;
                self.verifying = None;
                false
            }
        }
    }

    /// Whether the extreme Ritz value of an end pass, `theta` with residual
    /// norm `rn`, settles that end without converging further: it lies outside
    /// the wanted set by more than both residual bounds, and its residual is
    /// below a tenth of its distance d to the boundary, so that the Ritz vector
    /// has a component of at most rn/d < 0.1 on any eigenvector inside the set.
    pub(super) fn end_value_outside(&self, theta: f64, rn: f64) -> bool {
        let (wk, wr) = self.wanted_boundary();
        let d = self.key(theta) - wk;
        rn <= 0.1 * d && rn + wr < d
    }

    /// Whether the pair locked last (by a verification pass) lies inside the
    /// wanted set beyond the residual bounds, with the boundary taken among the
    /// pairs locked before it.
    fn last_lock_is_wanted(&self) -> bool {
        let j = self.nl() - 1;
        let (kn, rn) = (self.key(self.lam[j]), self.res[j]);
        let (wk, wr) = self.boundary_among(j);
        kn < wk - (wr + rn)
    }

    /// The end of a pass (the wanted pairs locked, or both end passes
    /// settled): emits the iteration's event (`ritz`), then decides with
    /// `verdict`, else [`State::next_verification`], whether the solve is done.
    /// If not, the next pass starts from a fresh block (and the dynamic
    /// choice's window in `w` anew); a stop the observer asked for then waits
    /// for the loop top's last checkpoint (the partial result is the same, all
    /// wanted pairs being locked); without a sink the solve ends at once with
    /// [`Outcome::Stopped`].
    pub(super) fn pass_over(
        &mut self,
        observer: &mut Option<Observer<'_>>,
        ritz: &[(f64, f64)],
        verdict: Option<bool>,
    ) -> Result<PassEnd, JdError> {
        let stop = self.emit(observer, ritz, &[]);
        if verdict.unwrap_or_else(|| self.next_verification()) {
            return Ok(PassEnd::Done(self.finish(&[])));
        }
        if stop && self.sink.is_none() {
            return Ok(PassEnd::Done(self.ended(Outcome::Stopped)));
        }
        let block = self.fresh_block();
        self.correction.new_pass();
        Ok(PassEnd::Next { block, stop })
    }

    /// Discards the basis and fills the new block with random vectors (the start of
    /// a verification pass); returns the block size.
    pub(super) fn fresh_block(&mut self) -> usize {
        self.m = 0;
        self.prev_k = 0;
        self.full_repairs = 0;
        // After a probe that found a missed copy, its Ritz vector (in `t`) starts
        // the pass.
        let first = usize::from(std::mem::take(&mut self.probe_seeded));
        for j in first..self.sz.k {
            self.fill_random(j);
        }
        self.sz.k
    }

    /// Krylov probe of the operator deflated by the locked vectors, run when a
    /// verification pass found nothing: up to [`PROBE_STEPS`] Lanczos steps (full
    /// reorthogonalization, in the dead basis `v`) from a random vector orthogonal
    /// to the locked ones. When the best Ritz vector z (in target order) has
    /// Rayleigh quotient ρ inside the wanted set beyond the residual bounds
    /// (`wk`, `wr`: key and residual of the boundary), a copy is missing; z is
    /// put in column 0 of `t` to start the next pass, and true is returned.
    ///
    /// For `Smallest`/`Largest` ρ alone is the evidence (min-max: with z ⊥ the
    /// locked vectors, the nev-th eigenvalue lies beyond the reported one); for
    /// `Closest` the true residual ‖Az − ρz‖ is added to the distance to σ.
    /// Collective (matvecs and global sums, the same on every process).
    fn probe_missed(&mut self, wk: f64, wr: f64) -> bool {
        let threads = self.prm.execution.threads;
        let (n, nl) = (self.n, self.nproj());
        let steps = PROBE_STEPS
            .min(self.pb.n_global.saturating_sub(nl))
            .min(self.sz.max_basis.saturating_sub(1));
        if steps == 0 {
            return false;
        }
        self.m = 0;
        self.fill_random(0);
        let mass = self.has_mass();
        let mut q = self.t[..n].to_vec();
        let mut h = vec![0.0; steps * steps];
        let mut w = vec![0.0; n];
        // M·q with a mass matrix (the probe works in the M inner product; its
        // next vector is Kq, whose span still bounds by min-max).
        let mut bq = vec![0.0; if mass { n } else { 0 }];
        let mut len = 0;
        for j in 0..=steps {
            if mass {
                self.mass_apply(&q, &mut bq, 1);
            }
            // q ⊥ locked vectors and the previous columns, twice; then normalized.
            for _ in 0..2 {
                let mut c = vec![0.0; nl + j];
                let (xd, vd) = (self.dual_locked(), self.dual_basis());
                gemm_tn(&mut c[..nl], xd, n, nl, &q, 1, threads);
                gemm_tn(&mut c[nl..], vd, n, j, &q, 1, threads);
                let mut nq = [0.0];
                self.allreduce(&mut c);
                gemm_sub(&mut q, &self.xl, n, nl, &c[..nl], 1, threads);
                gemm_sub(&mut q, &self.v, n, j, &c[nl..], 1, threads);
                if let Some(ms) = &self.mass {
                    gemm_sub(&mut bq, &ms.bxl, n, nl, &c[..nl], 1, threads);
                    gemm_sub(&mut bq, &ms.bv, n, j, &c[nl..], 1, threads);
                }
                nq[0] = crate::dense::dot(&q, if mass { &bq } else { &q });
                self.allreduce(&mut nq);
                if nq[0].is_finite() && nq[0] > 0.0 {
                    let s = 1.0 / nq[0].sqrt();
                    q.iter_mut().for_each(|x| *x *= s);
                    bq.iter_mut().for_each(|x| *x *= s);
                } else {
                    q.fill(0.0);
                    bq.fill(0.0);
                }
            }
            let mut nq = [crate::dense::dot(&q, if mass { &bq } else { &q })];
            self.allreduce(&mut nq);
            if j == steps || nq[0].is_nan() || nq[0] <= 0.5 {
                break;
            }
            self.v[j * n..(j + 1) * n].copy_from_slice(&q);
            if let Some(ms) = self.mass.as_mut() {
                ms.bv[j * n..(j + 1) * n].copy_from_slice(&bq);
            }
            self.op.apply(&q, &mut w);
            self.stats.matvecs += 1;
            // Column j of H = QᵀAQ (the Krylov space's projection), next vector Aq.
            let mut c = vec![0.0; j + 1];
            gemm_tn(&mut c, &self.v, n, j + 1, &w, 1, threads);
            self.allreduce(&mut c);
            for (i, ci) in c.iter().enumerate() {
                h[j * steps + i] = *ci;
                h[i * steps + j] = *ci;
            }
            q.copy_from_slice(&w);
            len = j + 1;
        }
        if len == 0 {
            return false;
        }
        let mut hc = vec![0.0; len * len];
        for j in 0..len {
            hc[j * len..(j + 1) * len].copy_from_slice(&h[j * steps..j * steps + len]);
        }
        let Some((th, y)) = sym_eig(&hc, len) else {
            return false;
        };
        let best = self.order(&th)[0];
        let mut z = vec![0.0; n];
        gemm_nn(
            &mut z,
            &self.v,
            n,
            len,
            &y[best * len..(best + 1) * len],
            1,
            threads,
        );
        // True Rayleigh quotient and residual of z.
        self.op.apply(&z, &mut w);
        self.stats.matvecs += 1;
        let bz = if mass {
            let mut bz = vec![0.0; n];
            self.mass_apply(&z, &mut bz, 1);
            bz
        } else {
            z.clone()
        };
        let mut rq = [
            crate::dense::dot(&z, &w),
            crate::dense::dot(&z, &bz),
            crate::dense::dot(&z, &z),
        ];
        self.allreduce(&mut rq);
        if rq[1].is_nan() || rq[1] <= 0.0 || !rq[0].is_finite() {
            return false;
        }
        let rho = rq[0] / rq[1];
        w.iter_mut().zip(&bz).for_each(|(a, x)| *a -= rho * x);
        // ‖Az − ρz‖²/‖z‖² (‖Kz − ρMz‖²/‖z‖²), local part.
        let mut rn = [crate::dense::dot(&w, &w) / rq[2]];
        self.allreduce(&mut rn);
        let margin = match self.target {
            Target::Closest(_) | Target::LargestMagnitude => rn[0].sqrt(),
            _ => self.tol_for(rho),
        };
        if self.key(rho) >= wk - (wr + margin) {
            return false;
        }
        self.t[..n].copy_from_slice(&z);
        self.probe_seeded = true;
        true
    }
}
