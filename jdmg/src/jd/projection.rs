//! The projection phase: basis extension with W = AV and the incremental
//! H = VᵀAV (one global sum), basis transformations and repairs, the internal scale
//! (McCombs et al. §3 steps (1)–(5); PRIMME's `update_projection.c`).

use super::*;

/// Steps (1)-(5) of an outer iteration ([`State::project`]).
pub(super) struct Projected {
    /// Ritz values in target order.
    pub theta: Vec<f64>,
    /// Their coefficients (m × m; the identity after an early restart).
    pub y: Vec<f64>,
    /// Basis size.
    pub m: usize,
    /// Ritz pairs that may be looked at (fewer after an early restart).
    pub limit: usize,
    /// The basis was restarted to the kept Ritz vectors first.
    pub early: bool,
    /// The basis and the locked vectors span the whole space.
    pub basis_full: bool,
}

impl<A: Operator + ?Sized, C: Comm + ?Sized> State<'_, '_, '_, A, C> {
    /// Steps (1)-(5) of an outer iteration (McCombs et al. §3): the new block
    /// of `b` columns (in `t`) orthogonalized and added to the basis, then
    /// Rayleigh-Ritz (or harmonic Ritz); a full basis restarts first
    /// (`restart_first`), so that X, R and ‖R‖ come from the kept Ritz
    /// vectors, the basis's first columns, instead of a pass over all of V and
    /// W. Collective.
    ///
    /// # Errors
    /// `NonFinite` for a projected matrix with NaN or Inf; M not positive
    /// definite on the new block.
    pub(super) fn project(&mut self, b: usize) -> Result<Projected, JdError> {
        let tp = Instant::now();
        let kept = self.orthogonalize_block(b);
        self.check_mass()?;
        let te = Instant::now();
        self.stats.phases.orthogonalization += te.duration_since(tp).as_secs_f64();
        if kept > 0 {
            self.extend_basis(kept)?;
        }
        let tr = Instant::now();
        self.stats.phases.extension += tr.duration_since(te).as_secs_f64();
        let m = self.m;
        let (theta, y) = self.rayleigh_ritz()?;
        self.stats.phases.rayleigh_ritz += tr.elapsed().as_secs_f64();
        self.stats.outer_iterations += 1;
        let basis_full = self.nproj() + m >= self.pb.n_global;
        let early = self.restart_first(m, basis_full);
        let (m, y, limit) = if early {
            let t0 = Instant::now();
            self.restart(&y, m);
            self.stats.phases.restart += t0.elapsed().as_secs_f64();
            // the kept Ritz vectors, fewer when the basis is tiny
            (self.m, identity(self.m), self.sz.restart.min(m).min(self.m))
        } else {
            (m, y, m)
        };
        Ok(Projected {
            theta,
            y,
            m,
            limit,
            early,
            basis_full,
        })
    }

    /// Chooses the internal scale from the first block product W_T = AT (T
    /// orthonormal, W_T in W's columns m..m+b): max|w| · √n estimates ‖A‖
    /// within a small factor.
    pub(super) fn decide_scale(&mut self, b: usize) -> Result<(), JdError> {
        self.scale_decided = true;
        let (n, m) = (self.n, self.m);
        let wt = m * n..(m + b) * n;
        let mut mx = [self.w[wt.clone()]
            .iter()
            .fold(0.0f64, |a, v| a.max(v.abs()))];
        self.pb.comm.all_reduce(&mut mx, ReduceOp::Max);
        self.stats.global_sums += 1;
        // Entries near the largest double: the product overflows, the scale
        // must not (it then brings f64::MAX to about 1).
        let estimate = match mx[0] * (self.pb.n_global as f64).sqrt() {
            e if mx[0].is_finite() && e.is_infinite() => f64::MAX,
            e => e,
        };
        let s = scale_for(estimate);
        if s == 1.0 {
            return Ok(());
        }
        self.op.set_scale(s);
        self.w[wt].iter_mut().for_each(|v| *v *= s);
        if let Some(a) = self.prm.problem.anorm {
            self.anorm = a * s;
        }
        if let Target::Closest(sigma) = self.target {
            self.target = Target::Closest(sigma * s);
        }
        self.stats.scale = s;
        Ok(())
    }

    /// Appends the first `b` columns of `t` (orthonormalized) to the basis;
    /// W_T = AT goes straight into W's columns m..m+b.
    pub(super) fn extend_basis(&mut self, b: usize) -> Result<(), JdError> {
        let threads = self.prm.execution.threads;
        let (n, m, mb) = (self.n, self.m, self.sz.max_basis);
        self.op
            .apply_block(&self.t[..n * b], &mut self.w[m * n..(m + b) * n], b);
        self.stats.matvecs += b as u64;
        if !self.scale_decided {
            self.decide_scale(b)?;
        }
        // G = [V T]^T W_T, one global sum (with harmonic extraction, the new
        // columns of WᵀW in the same sum).
        let ld = m + b;
        let hb = m * b + b * b;
        let mut gv = vec![0.0; hb + self.gram_len(m, b)];
        {
            let (a, c) = gv[..hb].split_at_mut(m * b);
            let wt = &self.w[m * n..(m + b) * n];
            gemm_tn(a, &self.v, n, m, wt, b, threads);
            self.stats.basis_passes += 1;
            gemm_tn(c, &self.t, n, b, wt, b, threads);
        }
        self.gram_local(&mut gv[hb..], m, b);
        self.allreduce(&mut gv);
        self.gram_store(&gv[hb..], m, b);
        let mut g = vec![0.0; ld * b];
        for j in 0..b {
            g[j * ld..j * ld + m].copy_from_slice(&gv[j * m..(j + 1) * m]);
            g[j * ld + m..(j + 1) * ld].copy_from_slice(&gv[m * b + j * b..m * b + (j + 1) * b]);
        }
        for j in 0..b {
            for i in 0..ld {
                let val = if i >= m {
                    0.5 * (g[j * ld + i] + g[(i - m) * ld + m + j])
                } else {
                    g[j * ld + i]
                };
                self.h[(m + j) * mb + i] = val;
                self.h[i * mb + m + j] = val;
            }
        }
        self.v[m * n..(m + b) * n].copy_from_slice(&self.t[..n * b]);
        if let Some(ms) = self.mass.as_mut() {
            ms.bv[m * n..(m + b) * n].copy_from_slice(&ms.bt[..n * b]);
        }
        self.m += b;
        Ok(())
    }

    /// Compact copy of the m×m projected matrix.
    pub(super) fn h_compact(&self) -> Vec<f64> {
        let (m, mb) = (self.m, self.sz.max_basis);
        let mut hc = vec![0.0; m * m];
        for j in 0..m {
            hc[j * m..(j + 1) * m].copy_from_slice(&self.h[j * mb..j * mb + m]);
        }
        hc
    }

    /// Replaces the basis by V·C (C: m×p with orthonormal columns), W by W·C and
    /// H by CᵀHC (and G = WᵀW by CᵀGC with harmonic extraction). When C only
    /// selects columns (locked pairs leaving a basis whose first columns are
    /// Ritz vectors), the kept columns move instead.
    pub(super) fn transform_basis(&mut self, c: &[f64], p: usize) {
        let threads = self.prm.execution.threads;
        let (n, m, mb) = (self.n, self.m, self.sz.max_basis);
        if let Some(sel) = column_selection(c, m, p) {
            let mut arrays = vec![&mut self.v, &mut self.w];
            if let Some(ms) = self.mass.as_mut() {
                arrays.push(&mut ms.bv);
            }
            for a in arrays {
                if select_columns(a, n, &sel) {
                    self.stats.basis_passes += 1;
                }
            }
        } else {
            gemm_nn_in_place(&mut self.v, n, m, c, p, &mut self.row_block, threads);
            gemm_nn_in_place(&mut self.w, n, m, c, p, &mut self.row_block, threads);
            self.stats.basis_passes += 2;
            if let Some(ms) = self.mass.as_mut() {
                gemm_nn_in_place(&mut ms.bv, n, m, c, p, &mut self.row_block, threads);
                self.stats.basis_passes += 1;
            }
        }
        let hc = self.h_compact();
        let mut hcc = vec![0.0; m * p];
        gemm_nn(&mut hcc, &hc, m, m, c, p, threads);
        let mut newh = vec![0.0; p * p];
        gemm_tn(&mut newh, c, m, p, &hcc, p, threads);
        for j in 0..p {
            for i in 0..p {
                self.h[j * mb + i] = 0.5 * (newh[j * p + i] + newh[i * p + j]);
            }
        }
        self.harmonic_transform(c, m, p);
        self.m = p;
    }

    /// Re-orthonormalizes V (CGS2 column by column), recomputes W = AV and
    /// H = VᵀW (one global sum for H).
    pub(super) fn repair_basis(&mut self) {
        let threads = self.prm.execution.threads;
        if self.has_mass() {
            self.repair_basis_mass();
            return;
        }
        let (n, m) = (self.n, self.m);
        let mut c = vec![0.0; m + 1];
        let mut kept = 0;
        for j in 0..m {
            if kept != j {
                self.v.copy_within(j * n..(j + 1) * n, kept * n);
            }
            for _pass in 0..2 {
                let (prev, cur) = self.v.split_at_mut(kept * n);
                let col = &mut cur[..n];
                gemm_tn(&mut c[..kept], prev, n, kept, col, 1, threads);
                c[kept] = 0.0;
                self.pb
                    .comm
                    .all_reduce(&mut c[..kept.max(1)], ReduceOp::Sum);
                self.stats.global_sums += 1;
                gemm_sub(col, prev, n, kept, &c[..kept], 1, threads);
            }
            let mut nn = [crate::dense::dot(
                &self.v[kept * n..(kept + 1) * n],
                &self.v[kept * n..(kept + 1) * n],
            )];
            self.allreduce(&mut nn);
            let nrm = nn[0].sqrt();
            if nrm > 1e-8 {
                self.v[kept * n..(kept + 1) * n]
                    .iter_mut()
                    .for_each(|v| *v /= nrm);
                kept += 1;
            }
        }
        self.m = kept;
        self.rebuild_h();
    }

    /// [`State::repair_basis`] in the M inner product: M·V recomputed, V
    /// M-orthonormalized (CGS2), M·V following, then W and H rebuilt.
    fn repair_basis_mass(&mut self) {
        let threads = self.prm.execution.threads;
        let (n, m) = (self.n, self.m);
        // M's state is out of `self` while its images follow the basis.
        let Some(mut ms) = self.mass.take() else {
            return;
        };
        ms.op.apply_block(&self.v[..n * m], &mut ms.bv[..n * m], m);
        self.stats.mass_matvecs += m as u64;
        let mut c = vec![0.0; m + 1];
        let mut kept = 0;
        for j in 0..m {
            if kept != j {
                self.v.copy_within(j * n..(j + 1) * n, kept * n);
                ms.bv.copy_within(j * n..(j + 1) * n, kept * n);
            }
            for _pass in 0..2 {
                let (bprev, bcur) = ms.bv.split_at_mut(kept * n);
                let (prev, cur) = self.v.split_at_mut(kept * n);
                gemm_tn(&mut c[..kept], bprev, n, kept, &cur[..n], 1, threads);
                c[kept] = 0.0;
                self.pb
                    .comm
                    .all_reduce(&mut c[..kept.max(1)], ReduceOp::Sum);
                self.stats.global_sums += 1;
                gemm_sub(&mut cur[..n], prev, n, kept, &c[..kept], 1, threads);
                gemm_sub(&mut bcur[..n], bprev, n, kept, &c[..kept], 1, threads);
            }
            let mut nn = [crate::dense::dot(
                &self.v[kept * n..(kept + 1) * n],
                &ms.bv[kept * n..(kept + 1) * n],
            )];
            self.allreduce(&mut nn);
            let nrm = nn[0].max(0.0).sqrt();
            if nrm > 1e-8 {
                self.v[kept * n..(kept + 1) * n]
                    .iter_mut()
                    .for_each(|v| *v /= nrm);
                ms.bv[kept * n..(kept + 1) * n]
                    .iter_mut()
                    .for_each(|v| *v /= nrm);
                kept += 1;
            }
        }
        self.mass = Some(ms);
        self.m = kept;
        self.rebuild_h();
    }

    /// W = AV recomputed and H = VᵀW (one global sum).
    fn rebuild_h(&mut self) {
        let (n, mb) = (self.n, self.sz.max_basis);
        self.refresh_w();
        let m = self.m;
        let mut g = vec![0.0; m * m];
        gemm_tn(
            &mut g,
            &self.v,
            n,
            m,
            &self.w,
            m,
            self.prm.execution.threads,
        );
        self.stats.basis_passes += 2;
        self.allreduce(&mut g);
        for j in 0..m {
            for i in 0..m {
                self.h[j * mb + i] = 0.5 * (g[j * m + i] + g[i * m + j]);
            }
        }
        self.prev_k = 0;
    }

    /// Recomputes W = AV explicitly (removes drift of the recurrence), and
    /// G = WᵀW with harmonic extraction.
    pub(super) fn refresh_w(&mut self) {
        let (n, m) = (self.n, self.m);
        if m == 0 {
            return;
        }
        let mut w = std::mem::take(&mut self.w);
        self.op.apply_block(&self.v[..n * m], &mut w[..n * m], m);
        self.w = w;
        self.stats.basis_passes += 1;
        self.stats.matvecs += m as u64;
        self.harmonic_rebuild();
    }

    /// Step (5), Rayleigh-Ritz: the eigenpairs of H in target order (Ritz values θ
    /// and their coefficient vectors Y, m×m column-major); updates the ‖A‖
    /// estimate from the extreme |θ|. With harmonic extraction, the harmonic
    /// pairs instead (`harmonic`: Rayleigh quotients and unit, non-orthogonal
    /// coefficient vectors).
    ///
    /// # Errors
    /// `NonFinite` when H (or G) holds NaN or Inf.
    pub(super) fn rayleigh_ritz(&mut self) -> Result<(Vec<f64>, Vec<f64>), JdError> {
        if self.harm.is_some() {
            return self.harmonic_ritz();
        }
        let m = self.m;
        let hc = self.h_compact();
        let (theta_raw, y_raw) = sym_eig(&hc, m).ok_or(JdError::NonFinite("projected matrix H"))?;
        let ord = self.order(&theta_raw);
        let theta: Vec<f64> = ord.iter().map(|&i| theta_raw[i]).collect();
        let mut y = vec![0.0; m * m];
        for (p, &i) in ord.iter().enumerate() {
            y[p * m..(p + 1) * m].copy_from_slice(&y_raw[i * m..(i + 1) * m]);
        }
        if self.prm.problem.anorm.is_none() || self.has_mass() {
            let mx = theta.iter().fold(0.0f64, |a, t| a.max(t.abs()));
            self.anorm = self.anorm.max(mx);
        }
        Ok((theta, y))
    }
}

/// The rows that the columns of `c` (m×p) pick when each column is a unit
/// vector and they pick rows in increasing order; else None.
fn column_selection(c: &[f64], m: usize, p: usize) -> Option<Vec<usize>> {
    let mut sel = Vec::with_capacity(p);
    for j in 0..p {
        let col = &c[j * m..(j + 1) * m];
        let row = col.iter().position(|&v| v != 0.0)?;
        let unit = col[row] == 1.0 && col[row + 1..].iter().all(|&v| v == 0.0);
        if !unit || sel.last().is_some_and(|&r| r >= row) {
            return None;
        }
        sel.push(row);
    }
    Some(sel)
}

/// Moves column `sel[j]` of `a` (columns of n entries) to column j, for
/// increasing `sel`; whether any column moved.
fn select_columns(a: &mut [f64], n: usize, sel: &[usize]) -> bool {
    let mut moved = false;
    for (j, &s) in sel.iter().enumerate() {
        if s != j {
            a.copy_within(s * n..(s + 1) * n, j * n);
            moved = true;
        }
    }
    moved
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_selection_accepts_only_increasing_unit_columns() {
        // columns e1, e3 of a 4-row identity
        let mut c = vec![0.0; 8];
        c[1] = 1.0;
        c[4 + 3] = 1.0;
        assert_eq!(column_selection(&c, 4, 2), Some(vec![1, 3]));
        // decreasing rows, a scaled column and a column with two entries
        let mut d = c.clone();
        d.swap(1, 4 + 1);
        d.swap(4 + 3, 3);
        assert_eq!(column_selection(&d, 4, 2), None);
        let mut s = c.clone();
        s[1] = 0.5;
        assert_eq!(column_selection(&s, 4, 2), None);
        let mut t = c.clone();
        t[2] = 1e-300;
        assert_eq!(column_selection(&t, 4, 2), None);
        assert_eq!(column_selection(&[0.0; 4], 4, 1), None);
    }

    #[test]
    fn select_columns_moves_the_picked_columns_forward() {
        let n = 3;
        let mut a: Vec<f64> = (0..4 * n).map(|v| v as f64).collect();
        assert!(select_columns(&mut a, n, &[1, 3]));
        assert_eq!(&a[..2 * n], &[3.0, 4.0, 5.0, 9.0, 10.0, 11.0]);
        assert!(!select_columns(&mut a, n, &[0, 1]));
    }
}
