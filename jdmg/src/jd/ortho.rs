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
    ///
    /// With a mass matrix the inner products are M-inner products: M·T is
    /// computed first, the coefficients are (MX)ᵀT and (MV)ᵀT, and M·T follows
    /// T through the updates (see `mass`).
    pub(super) fn orthogonalize_block(&mut self, b: usize) -> usize {
        let threads = self.prm.execution.threads;
        let (n, nl, m) = (self.n, self.nproj(), self.m);
        let room = self.pb.n_global.saturating_sub(nl + m);
        let b = b.min(room);
        if b == 0 {
            return 0;
        }
        let mass = self.has_mass();
        if mass {
            self.mass_block(0, b);
        }
        let mut norms0 = vec![0.0; b];
        // Columns whose first pass cancelled more than half their norm: orthogonalized
        // again against everything below (rounding left along X and V is amplified
        // relative to what remains).
        let mut cancelled = vec![false; b];
        // With M: the Euclidean norms too (to tell a zero column from xᵀMx ≤ 0).
        let extra = if mass { b } else { 0 };
        let mut buf = vec![0.0; (nl + m) * b + b + extra];
        for pass in 0..2 {
            let (cx, rest) = buf.split_at_mut(nl * b);
            let (cv, nr) = rest.split_at_mut(m * b);
            let (xd, vd) = (self.dual_locked(), self.dual_basis());
            gemm_tn(cx, xd, n, nl, &self.t, b, threads);
            gemm_tn(cv, vd, n, m, &self.t, b, threads);
            self.stats.basis_passes += 1;
            let len = if pass == 0 {
                for j in 0..b {
                    let col = &self.t[j * n..(j + 1) * n];
                    if mass {
                        nr[j] = crate::dense::dot(col, &self.dual_block()[j * n..(j + 1) * n]);
                        nr[b + j] = crate::dense::dot(col, col);
                    } else {
                        nr[j] = crate::dense::dot(col, col);
                    }
                }
                buf.len()
            } else {
                (nl + m) * b
            };
            self.allreduce(&mut buf[..len]);
            if pass == 0 {
                for (j, v) in norms0.iter_mut().enumerate() {
                    let mm = buf[(nl + m) * b + j];
                    if mass && (mm <= 0.0 || mm.is_nan()) && buf[(nl + m) * b + b + j] > 0.0 {
                        self.mass_failed(format!(
                            "a vector x with xᵀx = {:e} has xᵀMx = {mm:e}",
                            buf[(nl + m) * b + b + j]
                        ));
                    }
                    *v = mm.max(0.0).sqrt();
                }
            }
            let (cx, rest) = buf.split_at(nl * b);
            let cv = &rest[..m * b];
            gemm_sub(&mut self.t, &self.xl, n, nl, cx, b, threads);
            gemm_sub(&mut self.t, &self.v, n, m, cv, b, threads);
            if let Some(ms) = self.mass.as_mut() {
                gemm_sub(&mut ms.bt, &ms.bxl, n, nl, cx, b, threads);
                gemm_sub(&mut ms.bt, &ms.bv, n, m, cv, b, threads);
            }
            self.stats.basis_passes += 1;
            if pass == 0 {
                // DGKS test: a second pass is needed only when some column lost
                // most of its norm (cancellation); one global sum decides.
                let mut after: Vec<f64> = (0..b)
                    .map(|j| {
                        let d = self.dual_block();
                        crate::dense::dot(&self.t[j * n..(j + 1) * n], &d[j * n..(j + 1) * n])
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
        let mut refresh = mass && cancelled.iter().any(|&c| c);
        for (j, &nb) in norms0.iter().enumerate() {
            if kept != j {
                self.t.copy_within(j * n..(j + 1) * n, kept * n);
                if let Some(ms) = self.mass.as_mut() {
                    ms.bt.copy_within(j * n..(j + 1) * n, kept * n);
                }
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
                        refresh |= mass;
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
                if mass {
                    self.mass_block(kept, kept + 1);
                }
                full = true;
                norm_before = f64::NAN; // measured inside for random vectors
            }
        }
        if refresh && kept > 0 {
            self.refresh_block_mass(kept);
        }
        kept
    }

    /// Recomputes M·T for the first `kept` (M-orthonormal) columns of `t`
    /// and renormalizes them in the M-norm (after a cancellation, the
    /// recurrence-updated M·T carries amplified rounding). One global sum.
    fn refresh_block_mass(&mut self, kept: usize) {
        let n = self.n;
        self.mass_block(0, kept);
        let mut nn: Vec<f64> = (0..kept)
            .map(|j| {
                crate::dense::dot(
                    &self.t[j * n..(j + 1) * n],
                    &self.dual_block()[j * n..(j + 1) * n],
                )
            })
            .collect();
        self.allreduce(&mut nn);
        for (j, &v) in nn.iter().enumerate() {
            if v <= 0.0 || v.is_nan() {
                self.mass_failed(format!("an M-normalized basis vector has xᵀMx = {v:e}"));
                continue;
            }
            let s = 1.0 / v.sqrt();
            self.t[j * n..(j + 1) * n].iter_mut().for_each(|x| *x *= s);
            if let Some(ms) = self.mass.as_mut() {
                ms.bt[j * n..(j + 1) * n].iter_mut().for_each(|x| *x *= s);
            }
        }
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
        let threads = self.prm.execution.threads;
        let (n, nl, m) = (self.n, self.nproj(), self.m);
        let mass = self.has_mass();
        let ld = if full { nl + m + j } else { j };
        let mut c = vec![0.0; ld + 1];
        let mut norm0 = norm_before;
        let mut pass_norms = [0.0f64; 2];
        for (pass, pass_norm) in pass_norms.iter_mut().enumerate() {
            {
                let (prev, cur) = self.t.split_at_mut(j * n);
                let col = &cur[..n];
                // The dual columns: M·[X V T] with a mass matrix.
                let (xd, vd, prevd, cold) = match &self.mass {
                    Some(ms) => (
                        &ms.bxl[..],
                        &ms.bv[..],
                        &ms.bt[..j * n],
                        &ms.bt[j * n..(j + 1) * n],
                    ),
                    None => (&self.xl[..], &self.v[..], &prev[..], col),
                };
                let mut off = 0;
                if full {
                    gemm_tn(&mut c[..nl], xd, n, nl, col, 1, threads);
                    gemm_tn(&mut c[nl..nl + m], vd, n, m, col, 1, threads);
                    self.stats.basis_passes += 1;
                    off = nl + m;
                }
                gemm_tn(&mut c[off..off + j], prevd, n, j, col, 1, threads);
                c[ld] = crate::dense::dot(col, cold);
            }
            self.allreduce(&mut c);
            *pass_norm = c[ld].max(0.0).sqrt();
            if pass == 0 && !norm0.is_finite() {
                norm0 = *pass_norm;
            }
            let (prev, cur) = self.t.split_at_mut(j * n);
            let col = &mut cur[..n];
            let mut off = 0;
            if full {
                gemm_sub(col, &self.xl, n, nl, &c[..nl], 1, threads);
                gemm_sub(col, &self.v, n, m, &c[nl..nl + m], 1, threads);
                if let Some(ms) = self.mass.as_mut() {
                    let bcol = &mut ms.bt[j * n..(j + 1) * n];
                    gemm_sub(bcol, &ms.bxl, n, nl, &c[..nl], 1, threads);
                    gemm_sub(bcol, &ms.bv, n, m, &c[nl..nl + m], 1, threads);
                }
                self.stats.basis_passes += 1;
                off = nl + m;
            }
            gemm_sub(col, prev, n, j, &c[off..off + j], 1, threads);
            if let Some(ms) = self.mass.as_mut() {
                let (bprev, bcur) = ms.bt.split_at_mut(j * n);
                gemm_sub(&mut bcur[..n], bprev, n, j, &c[off..off + j], 1, threads);
            }
        }
        let dual = self.dual_block();
        let col = &self.t[j * n..(j + 1) * n];
        let mut nn = [crate::dense::dot(col, &dual[j * n..(j + 1) * n]), 0.0];
        // With M: xᵀx too, so that xᵀMx < 0 beyond rounding (a few hundred ε
        // of ‖M‖xᵀx, and of the column's M-norm² before it was orthogonalized,
        // whose rounding a cancelled column keeps) tells an indefinite M from a
        // cancelled column.
        let len = if mass {
            nn[1] = crate::dense::dot(col, col);
            2
        } else {
            1
        };
        self.allreduce(&mut nn[..len]);
        if mass && nn[0] < -1e3 * f64::EPSILON * (self.mass_norm() * nn[1] + norm0 * norm0) {
            self.mass_failed(format!(
                "an orthogonalized vector x with xᵀx = {:e} has xᵀMx = {:e}",
                nn[1], nn[0]
            ));
        }
        let nrm = nn[0].max(0.0).sqrt();
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
        if let Some(ms) = self.mass.as_mut() {
            ms.bt[j * n..(j + 1) * n].iter_mut().for_each(|v| *v /= nrm);
        }
        Column::Kept
    }
}
