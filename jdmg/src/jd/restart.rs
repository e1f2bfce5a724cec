//! Thick restart with the previous Ritz directions (GD+k; PRIMME's `restart.c`).

use super::*;

impl<A: Operator + ?Sized, C: Comm + ?Sized> State<'_, '_, '_, A, C> {
    /// Thick restart: keep `restart` Ritz vectors plus the previous iteration's
    /// Ritz directions (GD+k), orthonormalized in coefficient space.
    pub(super) fn restart(&mut self, y: &[f64], m: usize) {
        let keep = self.sz.restart.min(m);
        let kp = if self.prm.restart_keep_previous && self.prev_k > 0 && self.prev_m <= m {
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
        let p = orthonormalize_columns(&mut c, m, p)
            .min(self.sz.max_basis - self.sz.k.min(self.sz.max_basis - 1));
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
