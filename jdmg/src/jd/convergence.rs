//! Convergence tests, target order, locking bookkeeping and the verification pass
//! for missed copies of multiple eigenvalues (PRIMME's `convergence.c`, `locking.c`).

use super::*;

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
        }
        idx
    }

    pub(super) fn tol_for(&self, theta: f64) -> f64 {
        match self.prm.conv {
            ConvTest::Norm => self.prm.tol * self.anorm.max(f64::MIN_POSITIVE),
            ConvTest::Rel => self.prm.tol * theta.abs(),
            ConvTest::Abs => self.prm.tol * self.op.scale(),
        }
    }

    /// Sort key of an eigenvalue: smaller is wanted first.
    pub(super) fn key(&self, l: f64) -> f64 {
        match self.target {
            Target::Smallest => l,
            Target::Largest => -l,
            Target::Closest(s) => (l - s).abs(),
        }
    }

    /// Key and residual norm of the `nev`-th best locked pair (the boundary of the
    /// wanted set).
    pub(super) fn wanted_boundary(&self) -> (f64, f64) {
        let mut items: Vec<(f64, f64)> = self
            .lam
            .iter()
            .zip(&self.res)
            .map(|(&l, &r)| (self.key(l), r))
            .collect();
        items.sort_by(|a, b| a.0.total_cmp(&b.0));
        let i = self.prm.nev.min(items.len()).saturating_sub(1);
        items.get(i).copied().unwrap_or((f64::INFINITY, 0.0))
    }

    /// Largest number of locked eigenvalues equal within their residual bounds,
    /// among those before the boundary of the wanted set.
    pub(super) fn largest_locked_cluster(&self) -> usize {
        // Only eigenvalues strictly inside the wanted set count: a missed copy of the
        // last wanted value (a tie at the boundary) leaves the set right.
        let (wk, wr) = self.wanted_boundary();
        let mut items: Vec<(f64, f64)> = self
            .lam
            .iter()
            .copied()
            .zip(self.res.iter().copied())
            .filter(|&(l, r)| self.key(l) < wk - (wr + r))
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
    /// A block Krylov method finds at most k copies of a multiple eigenvalue, so
    /// copies can be missed only when some locked eigenvalue appears at least k
    /// times (`Verify::Auto`). A pass iterates a fresh random block orthogonal to
    /// the locked vectors; the pair it locks is a missed copy when it lies inside
    /// the wanted set beyond its residual bounds, and then another pass follows.
    pub(super) fn next_verification(&mut self) -> bool {
        if self.verifying.is_some() {
            let j = self.nl() - 1;
            let (kn, rn) = (self.key(self.lam[j]), self.res[j]);
            // The boundary of the wanted set among the pairs locked before this one.
            let (lam_new, res_new) = (self.lam.pop(), self.res.pop());
            let (wk, wr) = self.wanted_boundary();
            self.lam.extend(lam_new);
            self.res.extend(res_new);
            if kn >= wk - (wr + rn) {
                self.stats.verified = Some(true);
                return true;
            }
            self.stats.missed_copies += 1;
        } else {
            let start = match self.prm.verify {
                Verify::Never => false,
                Verify::Always => true,
                Verify::Auto => self.largest_locked_cluster() >= self.sz.k,
            };
            if !start || !self.prm.locking {
                return true;
            }
        }
        if self.nl() >= self.pb.n_global {
            self.stats.verified = Some(true);
            return true;
        }
        self.stats.verification_passes += 1;
        self.stats.verified = Some(false);
        self.verifying = Some(self.stats.outer_iterations);
        self.goal = self.nl() + 1;
        false
    }

    /// Discards the basis and fills the new block with random vectors (the start of
    /// a verification pass); returns the block size.
    pub(super) fn fresh_block(&mut self) -> usize {
        self.m = 0;
        self.prev_k = 0;
        self.full_repairs = 0;
        for j in 0..self.sz.k {
            self.fill_random(j);
        }
        self.sz.k
    }
}
