//! Thick restart with the previous Ritz directions (GD+k; PRIMME's `restart.c`).

use super::*;

impl<A: Operator + ?Sized, C: Comm + ?Sized> State<'_, '_, '_, A, C> {
    /// Whether an outer iteration with a basis of `m` columns restarts right
    /// after Rayleigh-Ritz, before its residuals: when the basis is full
    /// (m = max_basis), so that the iteration restarts whatever its block.
    /// The kept Ritz vectors are then V's first columns and AX is W's, so the
    /// residuals read k columns of V and W instead of all m (as PRIMME's
    /// restart keeps X and R). An iteration that locks keeps `restart` columns
    /// before its locked ones leave, not after.
    ///
    /// Only in serial and fine-grain solves with locking, an extreme target,
    /// Rayleigh-Ritz and no mass matrix. Interior Ritz values are erratic: on
    /// lap2d:30 at σ = 1 the rounding of an early restart sent the solve onto
    /// a path where a spurious value near σ blocked in-order locking for
    /// 100,000 iterations. Solve groups keep the old order, on which their
    /// balancing figures were validated; their time is mostly correction phases.
    pub(super) fn restart_first(&self, m: usize, basis_full: bool) -> bool {
        self.prm.basis.locking
            && !self.correction.by_solve_groups()
            && matches!(self.target, Target::Smallest | Target::Largest)
            && !self.has_mass()
            && self.harm.is_none()
            && !basis_full
            && m >= self.basis_cap().max(1)
    }

    /// The columns the basis may fill: `max_basis`, or with the default basis
    /// the default for the pairs still wanted ([`crate::params::default_max_basis`] of the
    /// block, nev less the locked pairs, n), not below `restart + 2k`. The
    /// default's nev columns are room for the wanted pairs; a locked pair leaves
    /// the basis and its room (lap3d:100, nev = 4: 24, then 23, 22, 21 columns),
    /// which [`State::release_basis_tail`] returns to the system. Solve groups
    /// and an explicit `max_basis` keep `max_basis`.
    pub(super) fn basis_cap(&self) -> usize {
        self.basis_cap_with(self.nl())
    }

    /// [`State::basis_cap`] with `locked` pairs locked.
    pub(super) fn basis_cap_with(&self, locked: usize) -> usize {
        let mb = self.sz.max_basis;
        if self.prm.basis.max_basis != 0 || self.correction.by_solve_groups() {
            return mb;
        }
        let left = self.goal.saturating_sub(locked);
        let room = crate::params::default_max_basis(self.sz.k, left, self.pb.n_global).min(mb);
        room.max((self.sz.restart + 2 * self.sz.k).min(mb))
    }

    /// Returns the columns of V and W (and M·V) beyond the basis cap for
    /// `locked` locked pairs, and beyond the basis, to the system, before the
    /// locked vectors take their memory: lap3d:100, nev = 4, peak RSS 0.704 to
    /// 0.67 GB. They read as zeros afterwards and are not written again while
    /// the cap stays (a larger cap, or the probe for missed copies, writes them
    /// again).
    pub(super) fn release_basis_tail(&mut self, locked: usize) {
        let cap = self.basis_cap_with(locked);
        if cap >= self.sz.max_basis {
            return;
        }
        let from = cap.max(self.m) * self.n;
        let mut arrays = vec![&mut self.v, &mut self.w];
        if let Some(ms) = self.mass.as_mut() {
            arrays.push(&mut ms.bv);
        }
        for v in arrays {
            if v.len() > from {
                precond::pages::release(&mut v[from..]);
            }
        }
    }

    /// Thick restart: keep `restart` Ritz vectors plus the previous iteration's
    /// Ritz directions (GD+k), orthonormalized in coefficient space.
    pub(super) fn restart(&mut self, y: &[f64], m: usize) {
        let keep = self.sz.restart.min(m);
        let kp = if self.prm.basis.restart_keep_previous && self.prev_k > 0 && self.prev_m <= m {
            self.prev_k
        } else {
            0
        };
        let p = keep + kp;
        let mut c = vec![0.0; m * p];
        c[..m * keep].copy_from_slice(&y[..m * keep]);
        for j in 0..kp {
            let dst = &mut c[(keep + j) * m..(keep + j + 1) * m];
            dst[..self.prev_m].copy_from_slice(&self.prev[j * self.prev_m..(j + 1) * self.prev_m]);
        }
        let cap = self.basis_cap();
        let p = orthonormalize_columns(&mut c, m, p).min(cap - self.sz.k.min(cap - 1));
        self.transform_basis(&c[..m * p], p);
        self.stats.restarts += 1;
        // In the new basis the current Ritz vectors are the first unit vectors.
        let kk = self.sz.k.min(p);
        self.prev = vec![0.0; p * kk];
        for j in 0..kk {
            self.prev[j * p + j] = 1.0;
        }
        self.prev_m = p;
        self.prev_k = kk;
    }
}
