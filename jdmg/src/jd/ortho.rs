//! Orthogonalization of new blocks against the locked vectors and the basis (block
//! classical Gram-Schmidt with DGKS reorthogonalization; PRIMME's `ortho.c`).

use super::*;

/// A column that keeps less than this fraction of its norm when orthogonalized
/// against the earlier columns of its block is orthogonalized again against X and
/// V: the rounding left along them by the block pass (ε relative to the column
/// before it) grows by the inverse of this fraction. At 10⁻², at most two digits
/// of the basis' orthogonality are at stake, and the corrections of a multiple
/// eigenvalue (nearly parallel within a block) no longer cost two more passes
/// over the basis each (at 1/2, one column of the block did, in almost every outer
/// iteration of lap3d:40's triple eigenvalue).
const WITHIN_BLOCK_CANCELLATION: f64 = 1e-2;

impl<A: Operator + ?Sized, C: Comm + ?Sized> State<'_, '_, '_, A, C> {
    /// Orthonormalizes the first `b` columns of `t` against the locked vectors,
    /// the basis and each other. Returns how many columns survive.
    ///
    /// Block classical Gram-Schmidt against [X V] twice (each pass reads X and V
    /// once and costs one global sum; the first also carries the original norms),
    /// then CGS2 inside the block.
    pub(super) fn orthogonalize_block(&mut self, b: usize) -> usize {
        let (n, nl, m) = (self.n, self.nproj(), self.m);
        let room = self.pb.n_global.saturating_sub(nl + m);
        let b = b.min(room);
        if b == 0 {
            return 0;
        }
        let mut norms0 = vec![0.0; b];
        // Columns whose first pass cancelled more than half their norm: orthogonalized
        // again against everything below (rounding left along X and V is amplified
        // relative to what remains).
        let mut cancelled = vec![false; b];
        let mut buf = vec![0.0; (nl + m) * b + b];
        for pass in 0..2 {
            let (cx, rest) = buf.split_at_mut(nl * b);
            let (cv, nr) = rest.split_at_mut(m * b);
            gemm_tn(cx, &self.xl, n, nl, &self.t, b, self.prm.threads);
            gemm_tn(cv, &self.v, n, m, &self.t, b, self.prm.threads);
            self.stats.basis_passes += 1;
            let len = if pass == 0 {
                for (j, v) in nr.iter_mut().enumerate() {
                    let col = &self.t[j * n..(j + 1) * n];
                    *v = crate::dense::dot(col, col);
                }
                buf.len()
            } else {
                (nl + m) * b
            };
            self.allreduce(&mut buf[..len]);
            if pass == 0 {
                for (j, v) in norms0.iter_mut().enumerate() {
                    *v = buf[(nl + m) * b + j].sqrt();
                }
            }
            let (cx, rest) = buf.split_at(nl * b);
            let cv = &rest[..m * b];
            gemm_sub(&mut self.t, &self.xl, n, nl, cx, b, self.prm.threads);
            gemm_sub(&mut self.t, &self.v, n, m, cv, b, self.prm.threads);
            self.stats.basis_passes += 1;
            if pass == 0 {
                // DGKS test: a second pass is needed only when some column lost
                // most of its norm (cancellation); one global sum decides.
                let mut after: Vec<f64> = (0..b)
                    .map(|j| {
                        crate::dense::dot(&self.t[j * n..(j + 1) * n], &self.t[j * n..(j + 1) * n])
                    })
                    .collect();
                self.allreduce(&mut after);
                for (j, (a, n0)) in after.iter().zip(&norms0).enumerate() {
                    cancelled[j] = a.sqrt() < 0.5 * n0;
                }
                if !cancelled.iter().any(|&c| c) {
                    break;
                }
            }
        }
        // Within the block: CGS2 column by column, replacing dependent vectors.
        let mut kept = 0;
        for (j, &nb) in norms0.iter().enumerate() {
            if kept != j {
                self.t.copy_within(j * n..(j + 1) * n, kept * n);
            }
            let mut norm_before = nb;
            let mut full = cancelled[j];
            let mut tries = 0;
            loop {
                match self.orthogonalize_column(kept, full, norm_before) {
                    Column::Kept => {
                        kept += 1;
                        break;
                    }
                    Column::Cancelled if !full => {
                        full = true;
                        continue;
                    }
                    _ => {}
                }
                tries += 1;
                if tries > 3 {
                    break;
                }
                self.stats.replaced_vectors += 1;
                self.fill_random(kept);
                full = true;
                norm_before = f64::NAN; // measured inside for random vectors
            }
        }
        kept
    }

    /// Orthogonalizes column `j` of `t` against t[0..j] (and, when `full`, also
    /// against X and V) with two passes, and normalizes it. `Dependent` when what
    /// is left is below 1e-8 of `norm_before` or the second pass still cancelled half
    /// of it (DGKS: rounding dominates); `Cancelled` when the block-only passes left
    /// less than [`WITHIN_BLOCK_CANCELLATION`] of the norm (the caller redoes it with
    /// `full`).
    pub(super) fn orthogonalize_column(
        &mut self,
        j: usize,
        full: bool,
        norm_before: f64,
    ) -> Column {
        let (n, nl, m) = (self.n, self.nproj(), self.m);
        let ld = if full { nl + m + j } else { j };
        let mut c = vec![0.0; ld + 1];
        let mut norm0 = norm_before;
        let mut pass_norms = [0.0f64; 2];
        for (pass, pass_norm) in pass_norms.iter_mut().enumerate() {
            {
                let (prev, cur) = self.t.split_at_mut(j * n);
                let col = &cur[..n];
                let mut off = 0;
                if full {
                    gemm_tn(&mut c[..nl], &self.xl, n, nl, col, 1, self.prm.threads);
                    gemm_tn(&mut c[nl..nl + m], &self.v, n, m, col, 1, self.prm.threads);
                    self.stats.basis_passes += 1;
                    off = nl + m;
                }
                gemm_tn(&mut c[off..off + j], prev, n, j, col, 1, self.prm.threads);
                c[ld] = crate::dense::dot(col, col);
            }
            self.allreduce(&mut c);
            *pass_norm = c[ld].sqrt();
            if pass == 0 && !norm0.is_finite() {
                norm0 = *pass_norm;
            }
            let (prev, cur) = self.t.split_at_mut(j * n);
            let col = &mut cur[..n];
            let mut off = 0;
            if full {
                gemm_sub(col, &self.xl, n, nl, &c[..nl], 1, self.prm.threads);
                gemm_sub(col, &self.v, n, m, &c[nl..nl + m], 1, self.prm.threads);
                self.stats.basis_passes += 1;
                off = nl + m;
            }
            gemm_sub(col, prev, n, j, &c[off..off + j], 1, self.prm.threads);
        }
        let mut nn = [crate::dense::dot(
            &self.t[j * n..(j + 1) * n],
            &self.t[j * n..(j + 1) * n],
        )];
        self.allreduce(&mut nn);
        let nrm = nn[0].sqrt();
        if !(nrm.is_finite() && nrm > 1e-8 * norm0 && nrm > 0.0) {
            return Column::Dependent;
        }
        if nrm < 0.5 * pass_norms[1] && full {
            return Column::Dependent;
        }
        if nrm < WITHIN_BLOCK_CANCELLATION * pass_norms[0] && !full {
            return Column::Cancelled;
        }
        self.t[j * n..(j + 1) * n]
            .iter_mut()
            .for_each(|v| *v /= nrm);
        Column::Kept
    }
}
