//! Checkpoints of the solver state at the top of an outer iteration: export
//! ([`State::snapshot`]), restore ([`State::restore`]) and the collective poll
//! of the sink (see [`crate::checkpoint`]).

use std::time::Duration;

use super::*;
use crate::checkpoint::{Checkpoint, CheckpointError};

impl<A: Operator + ?Sized, C: Comm + ?Sized> State<'_, '_, '_, A, C> {
    /// The state at the top of an outer iteration whose new block has `b`
    /// columns in `t`.
    pub(super) fn snapshot(&self, b: usize) -> Checkpoint {
        let (n, m, mb) = (self.n, self.m, self.sz.max_basis);
        let mut stats = self.stats.clone();
        stats.wall_seconds = self.start.elapsed().as_secs_f64();
        stats.anorm_estimate =
            self.mass.as_ref().map_or(self.anorm, |ms| ms.knorm) / self.op.scale();
        let mut projected = vec![0.0; m * m];
        for j in 0..m {
            projected[j * m..(j + 1) * m].copy_from_slice(&self.h[j * mb..j * mb + m]);
        }
        let prev_len = self.prev_m * self.prev_k;
        Checkpoint {
            n_global: self.pb.n_global,
            n_local: n,
            row_offset: self.pb.row_offset,
            nprocs: self.pb.comm.size(),
            rank: self.pb.comm.rank(),
            params: self.prm.clone(),
            block: self.sz.k,
            max_basis: mb,
            scale: self.op.scale(),
            scale_decided: self.scale_decided,
            anorm: self.anorm,
            target: self.target,
            goal: self.goal,
            verifying: self.verifying,
            random_cols: self.random_cols,
            full_repairs: self.full_repairs,
            stats,
            locked_values: self.lam.clone(),
            locked_residuals: self.res.clone(),
            locked_vectors: self.locked_vectors()[..n * self.nl()].to_vec(),
            basis_size: m,
            basis: self.v[..n * m].to_vec(),
            av: self.w[..n * m].to_vec(),
            projected,
            prev_rows: self.prev_m,
            prev_cols: self.prev_k,
            prev: self
                .prev
                .get(..prev_len)
                .map_or_else(Vec::new, <[f64]>::to_vec),
            new_block: b,
            block_vectors: self.t[..n * b].to_vec(),
            operator_fingerprint: self.operator_fingerprint(),
            mass_fingerprint: self.mass_fingerprint(),
            deflation_fingerprint: self.deflation_fingerprint(),
            shift_invert: self.shift,
        }
    }

    /// `[uᵀ A r, ‖A r‖²]` of the unscaled operator for two fixed pseudo-random
    /// vectors of the global rows (see [`Checkpoint::operator_fingerprint`]).
    /// Collective: one product with A and one global sum, not counted in the
    /// statistics (a resumed solve keeps the uninterrupted one's counters).
    fn operator_fingerprint(&self) -> [f64; 2] {
        self.fingerprint_of(self.pb.a)
    }

    /// The fingerprint of the (unscaled) mass matrix, None without one.
    fn mass_fingerprint(&self) -> Option<[f64; 2]> {
        self.pb.mass.map(|m| self.fingerprint_of(m.op))
    }

    /// The fixed pseudo-random vectors r and u of the fingerprints (this
    /// process's rows of the same global vectors on every layout).
    fn fingerprint_vectors(&self) -> (Vec<f64>, Vec<f64>) {
        const SEED: u64 = 0x6a64_6d67_5f66_7072;
        let n = self.n;
        let (mut r, mut u) = (vec![0.0; n], vec![0.0; n]);
        random::fill(&mut r, SEED, self.pb.row_offset, 0);
        random::fill(&mut u, SEED, self.pb.row_offset, 1);
        (r, u)
    }

    /// `[uᵀYYᵀr, ‖Yᵀr‖²]` of the orthonormalized deflation vectors Y (see
    /// [`Checkpoint::deflation_fingerprint`]); None without. Collective (one
    /// global sum) when there are some.
    fn deflation_fingerprint(&self) -> Option<[f64; 2]> {
        let q = self.ndefl;
        if q == 0 {
            return None;
        }
        let (n, (r, u)) = (self.n, self.fingerprint_vectors());
        let mut c = vec![0.0; 2 * q];
        for j in 0..q {
            let y = &self.xl[j * n..(j + 1) * n];
            c[2 * j] = crate::dense::dot(&u, y);
            c[2 * j + 1] = crate::dense::dot(&r, y);
        }
        if self.pb.comm.size() > 1 {
            self.pb.comm.all_reduce(&mut c, ReduceOp::Sum);
        }
        let fp = c.chunks_exact(2).fold([0.0, 0.0], |acc, p| {
            [acc[0] + p[0] * p[1], acc[1] + p[1] * p[1]]
        });
        Some(fp)
    }

    /// `[uᵀ B r, ‖B r‖²]` (see [`State::operator_fingerprint`]).
    fn fingerprint_of<B: Operator + ?Sized>(&self, b: &B) -> [f64; 2] {
        let n = self.n;
        let (r, u) = self.fingerprint_vectors();
        let mut ar = vec![0.0; n];
        b.apply(&r, &mut ar);
        let mut buf = [crate::dense::dot(&u, &ar), crate::dense::dot(&ar, &ar)];
        if self.pb.comm.size() > 1 {
            self.pb.comm.all_reduce(&mut buf, ReduceOp::Sum);
        }
        buf
    }

    /// Whether the fingerprint `ck` of a checkpoint is that of this operator
    /// (`now`), up to the rounding of sums taken in another order.
    fn same_operator(&self, ck: [f64; 2], now: [f64; 2]) -> Result<(), CheckpointError> {
        let close =
            |a: f64, b: f64, tol: f64| (a - b).abs() <= tol || (!a.is_finite() && !b.is_finite());
        // Sums of n terms taken in another order (another layout) differ by
        // about √n ε; |uᵀAr| ≤ ‖u‖ ‖Ar‖ with ‖u‖² < n: relative to that bound,
        // not to a sum that may cancel.
        let n = self.pb.n_global as f64;
        let rel = (1e-12 * n.sqrt()).min(1e-6);
        let big = now[1].abs().max(ck[1].abs());
        let tol0 = rel * (big * n).sqrt();
        let tol1 = rel * big;
        if close(ck[0], now[0], tol0) && close(ck[1], now[1], tol1) {
            return Ok(());
        }
        Err(CheckpointError::Mismatch {
            what: "the matrix (A applied to a fixed random vector)".into(),
            checkpoint: format!("{:.6e}, {:.6e}", ck[0], ck[1]),
            current: format!(
                "{:.6e}, {:.6e} (a checkpoint of another matrix)",
                now[0], now[1]
            ),
        })
    }

    /// Whether the checkpoint's deflation vectors span what this solve's do
    /// (fingerprints `ck` and `now`; their counts are compared before).
    fn same_deflation(
        &self,
        ck: Option<[f64; 2]>,
        now: Option<[f64; 2]>,
    ) -> Result<(), CheckpointError> {
        let (Some(c), Some(n)) = (ck, now) else {
            return Ok(());
        };
        // ‖Yᵀr‖² ≤ ‖r‖² < n: sums of q·n terms, relative to that bound.
        let big = self.pb.n_global as f64;
        let tol = (1e-12 * big.sqrt()).min(1e-6) * big;
        if (c[0] - n[0]).abs() <= tol && (c[1] - n[1]).abs() <= tol {
            return Ok(());
        }
        Err(CheckpointError::Mismatch {
            what: "the span of the deflation vectors (projected on a fixed random vector)".into(),
            checkpoint: format!("{:.6e}, {:.6e}", c[0], c[1]),
            current: format!("{:.6e}, {:.6e} (other deflation vectors)", n[0], n[1]),
        })
    }

    /// Whether the checkpoint's spectral transformation (`ck`, the σ of
    /// shift-and-invert or none) is this solve's.
    fn same_shift(&self, ck: Option<f64>) -> Result<(), CheckpointError> {
        let say = |s: Option<f64>| match s {
            Some(s) => format!("shift-and-invert at σ = {s:e}"),
            None => "none (a solve on A itself)".to_string(),
        };
        if ck.map(f64::to_bits) == self.shift.map(f64::to_bits) {
            return Ok(());
        }
        Err(CheckpointError::Mismatch {
            what: "the spectral transformation".into(),
            checkpoint: say(ck),
            current: say(self.shift),
        })
    }

    /// Whether the checkpoint's mass matrix (`ck`) is this problem's (`now`):
    /// both absent, or both present and the same.
    fn same_mass(
        &self,
        ck: Option<[f64; 2]>,
        now: Option<[f64; 2]>,
    ) -> Result<(), CheckpointError> {
        let what = "the mass matrix M".to_string();
        match (ck, now) {
            (None, None) => Ok(()),
            (Some(_), None) => Err(CheckpointError::Mismatch {
                what,
                checkpoint: "present (a generalized problem K x = λ M x)".into(),
                current: "absent (resume with the same mass matrix)".into(),
            }),
            (None, Some(_)) => Err(CheckpointError::Mismatch {
                what,
                checkpoint: "absent (a standard problem)".into(),
                current: "present".into(),
            }),
            (Some(c), Some(n)) => self
                .same_operator(c, n)
                .map_err(|_| CheckpointError::Mismatch {
                    what: "the mass matrix M (applied to a fixed random vector)".into(),
                    checkpoint: format!("{:.6e}, {:.6e}", c[0], c[1]),
                    current: format!("{:.6e}, {:.6e} (a checkpoint of another M)", n[0], n[1]),
                }),
        }
    }

    /// Asks the sink what to do at this loop top (`stop`: the observer asked to
    /// stop), the largest request over all processes.
    pub(super) fn poll_checkpoint(&mut self, stop: bool) -> CheckpointRequest {
        let mut req = match self.sink.as_mut() {
            Some(s) => s.poll(&self.stats),
            None => CheckpointRequest::Continue,
        };
        if stop {
            req = CheckpointRequest::SaveAndStop;
        }
        if self.pb.comm.size() > 1 {
            let code = |r: CheckpointRequest| match r {
                CheckpointRequest::Continue => 0.0,
                CheckpointRequest::Save => 1.0,
                CheckpointRequest::SaveAndStop => 2.0,
            };
            let mut buf = [code(req)];
            self.pb.comm.all_reduce(&mut buf, ReduceOp::Max);
            self.stats.global_sums += 1;
            req = if buf[0] >= 2.0 {
                CheckpointRequest::SaveAndStop
            } else if buf[0] >= 1.0 {
                CheckpointRequest::Save
            } else {
                CheckpointRequest::Continue
            };
        }
        req
    }

    /// Restores the state of `ck`; returns the size of its new block (then in
    /// `t`). Collective: one global max checks that every process's checkpoint
    /// fits and that all come from the same iteration.
    ///
    /// # Errors
    /// `Checkpoint(Mismatch)` when some process's checkpoint belongs to another
    /// problem (its operator fingerprint differs: another matrix of the same
    /// size), layout, parameters or iteration.
    pub(super) fn restore(&mut self, ck: &Checkpoint) -> Result<usize, JdError> {
        let now = self.operator_fingerprint();
        // Collective like `now`: taken on every process before any check.
        let now_mass = self.mass_fingerprint();
        let now_defl = self.deflation_fingerprint();
        let local = self
            .same_shift(ck.shift_invert)
            .and_then(|()| self.check_fits(ck))
            .and_then(|()| self.same_operator(ck.operator_fingerprint, now))
            .and_then(|()| self.same_mass(ck.mass_fingerprint, now_mass))
            .and_then(|()| self.same_deflation(ck.deflation_fingerprint, now_defl));
        let mut buf = [
            if local.is_err() { 1.0 } else { 0.0 },
            ck.stats.outer_iterations as f64,
            -(ck.stats.outer_iterations as f64),
            ck.stats.matvecs as f64,
            -(ck.stats.matvecs as f64),
        ];
        if self.pb.comm.size() > 1 {
            self.pb.comm.all_reduce(&mut buf, ReduceOp::Max);
        }
        local?;
        if buf[0] > 0.0 {
            return Err(CheckpointError::Mismatch {
                what: "another process's checkpoint".into(),
                checkpoint: "for another run".into(),
                current: "this run".into(),
            }
            .into());
        }
        if buf[1] != -buf[2] || buf[3] != -buf[4] {
            return Err(CheckpointError::Mismatch {
                what: "the outer iteration of the processes' checkpoints".into(),
                checkpoint: format!("between {} and {}", -buf[2], buf[1]),
                current: "the same on every process".into(),
            }
            .into());
        }
        let (n, m, mb) = (self.n, ck.basis_size, self.sz.max_basis);
        let b = ck.new_block;
        self.op.set_scale(ck.scale);
        self.scale_decided = ck.scale_decided;
        self.anorm = ck.anorm;
        self.target = ck.target;
        self.goal = ck.goal;
        self.verifying = ck.verifying;
        self.random_cols = ck.random_cols;
        self.full_repairs = ck.full_repairs;
        // The deflation vectors (installed at the start) stay in front.
        self.xl.truncate(self.ndefl * n);
        self.xl.extend_from_slice(&ck.locked_vectors);
        self.lam = ck.locked_values.clone();
        self.res = ck.locked_residuals.clone();
        self.m = m;
        self.v[..n * m].copy_from_slice(&ck.basis);
        self.w[..n * m].copy_from_slice(&ck.av);
        for j in 0..m {
            self.h[j * mb..j * mb + m].copy_from_slice(&ck.projected[j * m..(j + 1) * m]);
        }
        self.prev = ck.prev.clone();
        self.prev_m = ck.prev_rows;
        self.prev_k = ck.prev_cols;
        self.t[..n * b].copy_from_slice(&ck.block_vectors);
        self.stats = ck.stats.clone();
        let before = Duration::try_from_secs_f64(ck.stats.wall_seconds).unwrap_or_default();
        self.start = Instant::now()
            .checked_sub(before)
            .unwrap_or_else(Instant::now);
        Ok(b)
    }

    /// Whether `ck` is this process's state of this solve (problem, layout,
    /// parameters, sizes).
    fn check_fits(&self, ck: &Checkpoint) -> Result<(), CheckpointError> {
        let comm = self.pb.comm;
        ck.check_compatible(
            self.pb.n_global,
            comm.size(),
            comm.rank(),
            self.n,
            self.pb.row_offset,
            self.prm,
        )?;
        let differ = |what: &str, a: usize, b: usize| {
            if a == b {
                Ok(())
            } else {
                Err(CheckpointError::Mismatch {
                    what: what.into(),
                    checkpoint: a.to_string(),
                    current: b.to_string(),
                })
            }
        };
        differ("the block size", ck.block, self.sz.k)?;
        differ("the maximum basis size", ck.max_basis, self.sz.max_basis)?;
        differ(
            "the number of deflation vectors",
            ck.stats.deflation_vectors,
            self.ndefl,
        )?;
        // Shapes against this run's buffers (a file passes its own shape check).
        let n = self.n;
        let fits = ck.basis_size <= self.sz.max_basis
            && ck.basis.len() == n * ck.basis_size
            && ck.av.len() == n * ck.basis_size
            && ck.projected.len() == ck.basis_size * ck.basis_size
            && ck.new_block <= self.sz.k
            && ck.block_vectors.len() == n * ck.new_block
            && ck.locked_vectors.len() == n * ck.locked_values.len()
            && ck.locked_residuals.len() == ck.locked_values.len()
            && ck.prev.len() == ck.prev_rows * ck.prev_cols
            && ck.scale.is_finite()
            && ck.scale > 0.0;
        if !fits {
            return Err(CheckpointError::Malformed(
                "array sizes inconsistent with the solve".into(),
            ));
        }
        Ok(())
    }
}
