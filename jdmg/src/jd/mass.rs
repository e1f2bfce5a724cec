//! Generalized symmetric-definite problems K x = λ M x (M SPD; PRIMME's
//! `massMatrixMatvec`, SLEPc's `EPS_GHEP`).
//!
//! The solver works in the M inner product: the basis V, the locked vectors X
//! and the deflation vectors are M-orthonormal, so that H = VᵀKV stays a
//! standard symmetric eigenproblem. Beside V it keeps **M·V** (and M·X, M·T for
//! the new block), as it keeps W = K·V: the inner products of the
//! orthogonalization are (MV)ᵀt, the residuals r = KVy − θ(MV)y come from W
//! and MV without a product, and a restart transforms MV with V. Recomputing
//! M·V instead would cost m products per restart; keeping it costs one n×m
//! array and one more pass per basis transformation. M·T is computed once per
//! new block (b products with M) and updated by the Gram-Schmidt recurrences;
//! when a column cancelled (a second Gram-Schmidt pass ran), the block's M·T
//! is recomputed and renormalized, so that rounding amplified by the
//! cancellation does not stay in M·V.
//!
//! The correction equation is (I − MQQᵀ)(K − θM)(I − QQᵀM) t = −r with
//! Q = [X, x] (`crate::correction`), GD+k takes t = −P⁻¹r, and block JDQMR
//! advances the block's equations in lockstep with the M projectors (one
//! blocked M·d per step; `crate::correction::block_jdqmr`). JDQMR's estimates of the
//! outer residual and Ritz value (its dynamic stopping rules) still take the
//! Euclidean norm of x + t: with M they only steer when the inner solve
//! stops, not what converges.
//!
//! **Checkpoints** record M's fingerprint; M·V and M·X are not stored but
//! recomputed on resume (m + nl products), so a resumed generalized solve
//! reaches the same eigenpairs to the tolerance, not bit for bit.
//!
//! **Convergence** (`ConvTest::Norm`): a pair (θ, x) converges when
//! ‖Kx − θMx‖₂ ≤ tol·(‖K‖ + |θ|·‖M‖)·‖x‖₂, the backward error of SLEPc's
//! `EPS_ERROR_BACKWARD`; ‖K‖ (or `crate::ProblemSettings::anorm` when given) and ‖M‖ are
//! estimated by 10 Lanczos steps each at the start (lower bounds, products
//! counted in `Stats::matvecs` and `Stats::mass_matvecs`). The residual norms reported
//! are ‖Kx − λMx‖₂/‖x‖₂ (of the vector scaled to unit 2-norm), the returned
//! vectors are M-normalized (XᵀMX = I). `Rel`: ‖r‖/‖x‖ ≤ tol·|θ|·‖M‖;
//! `Abs`: ‖r‖/‖x‖ ≤ tol.
//!
//! **Scaling**: K and M get internal scales of their own (powers of two, see
//! `crate::scaling`) from those norm estimates; the eigenvalues are scaled by
//! s_K/s_M.
//!
//! **M not positive definite**: a vector with xᵀMx ≤ 0 met during the
//! orthogonalization or the norm estimate ends the solve with
//! [`JdError::MassNotPositiveDefinite`].

use super::*;

/// Lanczos steps of the norm estimates of K and M.
const NORM_STEPS: usize = 10;

/// Relative residual at which [`State::mass_inverse`] stops.
pub(super) const MASS_SOLVE_TOL: f64 = 1e-10;
/// Most conjugate-gradient steps of [`State::mass_inverse`].
const MASS_SOLVE_STEPS: usize = 500;

/// The mass matrix of a generalized problem ([`Problem::with_mass`]).
pub struct Mass<'a, T: Scalar = f64> {
    /// M applied to this process's rows (distributed like K).
    pub op: &'a dyn Operator<T>,
    /// The local diagonal of M (for the Jacobi preconditioner diag(K) − σ·diag(M)).
    pub diagonal: Option<&'a [f64]>,
}

impl<T: Scalar> Clone for Mass<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: Scalar> Copy for Mass<'_, T> {}

impl<T: Scalar> std::fmt::Debug for Mass<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mass")
            .field("rows", &self.op.nrows())
            .field("diagonal", &self.diagonal.is_some())
            .finish()
    }
}

impl<'a, A: Operator + ?Sized, C: Comm + ?Sized> Problem<'a, A, C> {
    /// Makes the problem generalized, K x = λ M x with K the operator `a` and M
    /// symmetric positive definite (any operator on the same local rows). See
    /// the module documentation of the solver for what changes inside.
    ///
    /// # Errors
    /// `InvalidParams` when M's local row count differs from K's.
    pub fn with_mass(mut self, m: &'a dyn Operator) -> Result<Self, JdError> {
        if m.nrows() != self.a.nrows() {
            return Err(JdError::invalid(
                "mass",
                format!(
                    "the mass matrix has {} local rows, the operator {}",
                    m.nrows(),
                    self.a.nrows()
                ),
            ));
        }
        self.mass = Some(Mass {
            op: m,
            diagonal: self.mass.and_then(|m| m.diagonal),
        });
        Ok(self)
    }

    /// Adds the local diagonal of M (Jacobi preconditioning of K − σM). Call
    /// after [`Problem::with_mass`].
    ///
    /// # Errors
    /// `InvalidParams` without a mass matrix, for a wrong length, a NaN/Inf, and
    /// [`JdError::MassNotPositiveDefinite`] for an entry ≤ 0.
    pub fn with_mass_diagonal(mut self, d: &'a [f64]) -> Result<Self, JdError> {
        let Some(m) = self.mass.as_mut() else {
            return Err(JdError::invalid(
                "mass",
                "with_mass_diagonal needs with_mass first",
            ));
        };
        if d.len() != self.a.nrows() || d.iter().any(|v| !v.is_finite()) {
            return Err(JdError::invalid(
                "mass",
                "the diagonal of M has the wrong length or holds NaN/Inf",
            ));
        }
        if let Some(i) = d.iter().position(|&v| v <= 0.0) {
            return Err(JdError::MassNotPositiveDefinite {
                what: format!("diagonal entry {} is {:e}", self.row_offset + i + 1, d[i]),
            });
        }
        m.diagonal = Some(d);
        Ok(self)
    }
}

/// The loop's state of a generalized problem: M, and the images under M of
/// the basis, the locked (and deflation) vectors and the new block, kept
/// beside them as W = K·V is kept beside V (module documentation).
pub(super) struct MassState<'a> {
    /// M times its internal scale.
    pub op: ScaledOperator<'a, dyn Operator + 'a>,
    /// M·V (n × max_basis).
    pub bv: Vec<f64>,
    /// M·[deflation, locked vectors].
    pub bxl: Vec<f64>,
    /// M·T (n × k).
    pub bt: Vec<f64>,
    /// Estimates of ‖K‖ and ‖M‖ (scaled units) for the convergence test.
    pub knorm: f64,
    pub mnorm: f64,
    /// Set when a vector x with xᵀMx ≤ 0 was met (M not positive definite).
    pub error: Option<String>,
}

impl<'a> MassState<'a> {
    /// The state for M on `n` local rows, a basis of `max_basis` columns and
    /// blocks of `k`.
    pub(super) fn new(m: &'a dyn Operator, n: usize, max_basis: usize, k: usize) -> Self {
        Self {
            op: ScaledOperator::new(m),
            bv: vec![0.0; n * max_basis],
            bxl: Vec::new(),
            bt: vec![0.0; n * k],
            knorm: 0.0,
            mnorm: 0.0,
            error: None,
        }
    }
}

impl<A: Operator + ?Sized, C: Comm + ?Sized> State<'_, '_, '_, A, C> {
    /// Whether the problem is generalized.
    pub(super) fn has_mass(&self) -> bool {
        self.mass.is_some()
    }

    /// The locked (and deflation) vectors' side of the inner products: M·X
    /// with M, X without.
    pub(super) fn dual_locked(&self) -> &[f64] {
        self.mass.as_ref().map_or(&self.xl, |ms| &ms.bxl)
    }

    /// The basis's side of the inner products: M·V with M, V without.
    pub(super) fn dual_basis(&self) -> &[f64] {
        self.mass.as_ref().map_or(&self.v, |ms| &ms.bv)
    }

    /// The new block's side of the inner products: M·T with M, T without.
    pub(super) fn dual_block(&self) -> &[f64] {
        self.mass.as_ref().map_or(&self.t, |ms| &ms.bt)
    }

    /// ‖M‖ (scaled units); 1 without M.
    pub(super) fn mass_norm(&self) -> f64 {
        self.mass.as_ref().map_or(1.0, |ms| ms.mnorm)
    }

    /// The internal scale of the eigenvalues: s_K/s_M (s_K without M).
    pub(super) fn ev_scale(&self) -> f64 {
        self.op.scale() / self.mass.as_ref().map_or(1.0, |ms| ms.op.scale())
    }

    /// The scale of a residual of Ritz value θ in the `norm` test: ‖A‖
    /// (standard) or ‖K‖ + |θ|·‖M‖ (generalized), scaled units.
    pub(super) fn res_scale(&self, theta: f64) -> f64 {
        match &self.mass {
            Some(ms) => ms.knorm + theta.abs() * ms.mnorm,
            None => self.anorm,
        }
    }

    /// `y = M x` (scaled M) for `k` vectors; counted.
    pub(super) fn mass_apply(&mut self, x: &[f64], y: &mut [f64], k: usize) {
        if let Some(ms) = &self.mass {
            ms.op.apply_block(x, y, k);
            self.stats.mass_matvecs += k as u64;
        }
    }

    /// `bt[:, from..to] = M t[:, from..to]`.
    pub(super) fn mass_block(&mut self, from: usize, to: usize) {
        let n = self.n;
        if to <= from {
            return;
        }
        if let Some(ms) = self.mass.as_mut() {
            let cols = from * n..to * n;
            ms.op
                .apply_block(&self.t[cols.clone()], &mut ms.bt[cols], to - from);
            self.stats.mass_matvecs += (to - from) as u64;
        }
    }

    /// `x = M⁻¹ rhs` (scaled M) for `k` vectors by preconditioned conjugate
    /// gradients (Hestenes and Stiefel 1952), all columns in lockstep with
    /// diag(M) as preconditioner (the identity without it), from x = 0, to a
    /// relative residual of [`MASS_SOLVE_TOL`] or [`MASS_SOLVE_STEPS`] steps.
    /// Used by harmonic extraction, whose projected matrix W_σᵀM⁻¹W_σ only
    /// steers the search (the convergence test is on true residuals), so an
    /// inexact solve costs no accuracy. A step with pᵀMp ≤ 0 stops it and
    /// records M as not positive definite. Products counted in
    /// `mass_matvecs`. Collective (two global sums per step).
    pub(super) fn mass_inverse(&mut self, rhs: &[f64], x: &mut [f64], k: usize) {
        let n = self.n;
        x[..n * k].iter_mut().for_each(|v| *v = 0.0);
        let dinv: Vec<f64> = match (self.pb.mass.and_then(|m| m.diagonal), &self.mass) {
            (Some(d), Some(ms)) => d.iter().map(|v| 1.0 / (v * ms.op.scale())).collect(),
            _ => vec![1.0; n],
        };
        let precondition = |r: &[f64], z: &mut [f64]| {
            for (zc, rc) in z.chunks_exact_mut(n).zip(r.chunks_exact(n)) {
                zc.iter_mut()
                    .zip(rc)
                    .zip(&dinv)
                    .for_each(|((z, r), d)| *z = r * d);
            }
        };
        let mut r = rhs[..n * k].to_vec();
        let mut z = vec![0.0; n * k];
        precondition(&r, &mut z);
        let mut p = z.clone();
        let mut q = vec![0.0; n * k];
        // [rᵀz, rᵀr] per column.
        let mut sums = vec![0.0; 2 * k];
        let col_dots = |a: &[f64], b: &[f64], j: usize| {
            crate::dense::dot(&a[j * n..(j + 1) * n], &b[j * n..(j + 1) * n])
        };
        for j in 0..k {
            sums[j] = col_dots(&r, &z, j);
            sums[k + j] = col_dots(&r, &r, j);
        }
        self.allreduce(&mut sums);
        let goal: Vec<f64> = sums[k..]
            .iter()
            .map(|b| MASS_SOLVE_TOL * MASS_SOLVE_TOL * b)
            .collect();
        let mut active: Vec<bool> = (0..k).map(|j| sums[k + j] > goal[j]).collect();
        let mut rz = sums[..k].to_vec();
        for _ in 0..MASS_SOLVE_STEPS {
            if !active.iter().any(|&a| a) {
                break;
            }
            self.mass_apply(&p, &mut q, k);
            let mut pq: Vec<f64> = (0..k).map(|j| col_dots(&p, &q, j)).collect();
            self.allreduce(&mut pq);
            for j in 0..k {
                if !active[j] {
                    continue;
                }
                if pq[j].is_nan() || pq[j] <= 0.0 {
                    self.mass_failed(format!("a vector p has pᵀMp = {:e}", pq[j]));
                    active[j] = false;
                    continue;
                }
                let alpha = rz[j] / pq[j];
                let c = j * n..(j + 1) * n;
                x[c.clone()]
                    .iter_mut()
                    .zip(&p[c.clone()])
                    .for_each(|(x, p)| *x += alpha * p);
                r[c.clone()]
                    .iter_mut()
                    .zip(&q[c])
                    .for_each(|(r, q)| *r -= alpha * q);
            }
            precondition(&r, &mut z);
            for j in 0..k {
                sums[j] = col_dots(&r, &z, j);
                sums[k + j] = col_dots(&r, &r, j);
            }
            self.allreduce(&mut sums);
            for j in 0..k {
                if !active[j] {
                    continue;
                }
                if sums[k + j] <= goal[j] {
                    active[j] = false;
                    continue;
                }
                let beta = sums[j] / rz[j];
                rz[j] = sums[j];
                let c = j * n..(j + 1) * n;
                p[c.clone()]
                    .iter_mut()
                    .zip(&z[c])
                    .for_each(|(p, z)| *p = z + beta * *p);
            }
        }
    }

    /// Records that M is not positive definite (the first time).
    pub(super) fn mass_failed(&mut self, what: String) {
        if let Some(ms) = self.mass.as_mut().filter(|ms| ms.error.is_none()) {
            ms.error = Some(what);
        }
    }

    /// `MassNotPositiveDefinite` when the orthogonalization met xᵀMx ≤ 0.
    pub(super) fn check_mass(&mut self) -> Result<(), JdError> {
        match self.mass.as_mut().and_then(|ms| ms.error.take()) {
            Some(what) => Err(JdError::MassNotPositiveDefinite { what }),
            None => Ok(()),
        }
    }

    /// Estimate of ‖B‖ (B = K when `mass` is false, else M; both symmetric)
    /// by [`NORM_STEPS`] Lanczos steps from a fixed pseudo-random vector: the
    /// largest |Ritz value| of the tridiagonal matrix (a lower bound, close
    /// after a few steps: Lanczos finds extreme eigenvalues much sooner than
    /// the power method). Checks qᵀMq > 0 on the way for M. Collective.
    fn power_norm(&mut self, mass: bool) -> Result<f64, JdError> {
        const SEED: u64 = 0x6a64_6d67_6d61_7373;
        let n = self.n;
        let mut q = vec![0.0; n];
        let mut q_prev = vec![0.0; n];
        let mut w = vec![0.0; n];
        random::fill(&mut q, SEED, self.pb.row_offset, u64::from(mass));
        let mut nq = [crate::dense::dot(&q, &q)];
        self.allreduce(&mut nq);
        if !(nq[0] > 0.0 && nq[0].is_finite()) {
            return Ok(0.0);
        }
        let s = 1.0 / nq[0].sqrt();
        q.iter_mut().for_each(|v| *v *= s);
        let (mut alpha, mut beta) = (Vec::new(), Vec::new());
        let mut b_prev = 0.0;
        // A provisional scale from the first Rayleigh quotient, so that ‖Bq‖²
        // neither overflows nor underflows (B = M × 1e200 has ‖Bq‖² = inf).
        let mut pre = 1.0;
        for step in 0..NORM_STEPS {
            if mass {
                self.mass_apply(&q, &mut w, 1);
            } else {
                self.op.apply(&q, &mut w);
                self.stats.matvecs += 1;
            }
            let mut a = [crate::dense::dot(&q, &w)];
            self.allreduce(&mut a);
            if step == 0 {
                pre = scale_for(a[0].abs());
                if pre != 1.0 {
                    w.iter_mut().for_each(|v| *v *= pre);
                    a[0] *= pre;
                    match (mass, &self.mass) {
                        (true, Some(ms)) => ms.op.set_scale(pre),
                        _ => self.op.set_scale(pre),
                    }
                }
            }
            if !a[0].is_finite() {
                return Err(JdError::NonFinite(if mass {
                    "the mass matrix's products"
                } else {
                    "the operator's products"
                }));
            }
            if mass && a[0] <= 0.0 {
                return Err(JdError::MassNotPositiveDefinite {
                    what: format!("a vector x with xᵀx = 1 has xᵀMx = {:e}", a[0]),
                });
            }
            alpha.push(a[0]);
            for ((wi, qi), pi) in w.iter_mut().zip(&q).zip(&q_prev) {
                *wi -= a[0] * qi + b_prev * pi;
            }
            let mut b = [crate::dense::dot(&w, &w)];
            self.allreduce(&mut b);
            let b = b[0].sqrt();
            if b <= 1e-12 * a[0].abs() || b.is_nan() {
                break;
            }
            beta.push(b);
            std::mem::swap(&mut q_prev, &mut q);
            q.iter_mut().zip(&w).for_each(|(qi, wi)| *qi = wi / b);
            b_prev = b;
        }
        let k = alpha.len();
        let mut t = vec![0.0; k * k];
        for i in 0..k {
            t[i * k + i] = alpha[i];
            if i + 1 < k {
                t[i * k + i + 1] = beta[i];
                t[(i + 1) * k + i] = beta[i];
            }
        }
        let (ev, _) = sym_eig(&t, k).ok_or(JdError::NonFinite("the norm estimate"))?;
        match (mass, &self.mass) {
            (true, Some(ms)) => ms.op.set_scale(1.0),
            _ => self.op.set_scale(1.0),
        }
        Ok(ev.iter().fold(0.0f64, |m, v| m.max(v.abs())) / pre)
    }

    /// Start of a generalized solve: norm estimates of M and K (or
    /// `crate::ProblemSettings::anorm` for ‖K‖), and both internal scales (decided here, not
    /// from the first block). Collective.
    ///
    /// # Errors
    /// `MassNotPositiveDefinite`, `NonFinite`.
    pub(super) fn init_mass(&mut self) -> Result<(), JdError> {
        let mnorm = self.power_norm(true)?;
        let knorm = match self.prm.problem.anorm {
            Some(a) => a,
            None => self.power_norm(false)?,
        };
        let (sk, sm) = (scale_for(knorm), scale_for(mnorm));
        self.op.set_scale(sk);
        if let Some(ms) = self.mass.as_mut() {
            ms.op.set_scale(sm);
            ms.knorm = knorm * sk;
            ms.mnorm = mnorm * sm;
        }
        self.scale_decided = true;
        self.stats.scale = sk;
        // The pencil's spectral radius (max |θ|) is tracked from the Ritz values.
        self.anorm = 0.0;
        let ev = self.ev_scale();
        if let Target::Closest(sigma) = self.target {
            self.target = Target::Closest(sigma * ev);
        }
        Ok(())
    }

    /// Recomputes M·V and M·X after a checkpoint's state was restored (they
    /// are not stored in checkpoints).
    pub(super) fn refresh_mass_images(&mut self) {
        let (n, m, nl) = (self.n, self.m, self.nproj());
        let Some(ms) = self.mass.as_mut() else {
            return;
        };
        ms.op.apply_block(&self.v[..n * m], &mut ms.bv[..n * m], m);
        ms.bxl = vec![0.0; n * nl];
        ms.op.apply_block(&self.xl[..n * nl], &mut ms.bxl, nl);
        self.stats.mass_matvecs += (m + nl) as u64;
    }

    /// Explicit Rayleigh quotients and true residuals of the lock candidates
    /// (`(position, θ, ‖r‖)`, vectors in `lock_x`): each x is M-normalized,
    /// θ becomes ρ = xᵀKx/xᵀMx and ‖r‖ becomes ‖Kx − ρMx‖/‖x‖. Returns M·x
    /// of the normalized vectors. Collective (two global sums).
    pub(super) fn verify_locks_mass(
        &mut self,
        lock: &mut [(usize, f64, f64)],
        lock_x: &mut [f64],
    ) -> Vec<f64> {
        let (n, nlk) = (self.n, lock.len());
        let mut ax = vec![0.0; n * nlk];
        self.op.apply_block(lock_x, &mut ax, nlk);
        self.stats.matvecs += nlk as u64;
        let mut bx = vec![0.0; n * nlk];
        self.mass_apply(lock_x, &mut bx, nlk);
        let mut rq = vec![0.0; 3 * nlk];
        for j in 0..nlk {
            let c = j * n..(j + 1) * n;
            let x = &lock_x[c.clone()];
            rq[3 * j] = crate::dense::dot(x, &ax[c.clone()]);
            rq[3 * j + 1] = crate::dense::dot(x, &bx[c]);
            rq[3 * j + 2] = crate::dense::dot(x, x);
        }
        self.allreduce(&mut rq);
        let mut nrm = vec![0.0; nlk];
        let mut x2 = vec![1.0; nlk];
        for (j, item) in lock.iter_mut().enumerate() {
            let (xax, xmx, xx) = (rq[3 * j], rq[3 * j + 1], rq[3 * j + 2]);
            let c = j * n..(j + 1) * n;
            if xmx <= 0.0 || xmx.is_nan() {
                self.mass_failed(format!("a Ritz vector x has xᵀMx = {xmx:e}"));
            } else {
                if xax.is_finite() {
                    item.1 = xax / xmx;
                }
                let s = 1.0 / xmx.sqrt();
                lock_x[c.clone()].iter_mut().for_each(|v| *v *= s);
                ax[c.clone()].iter_mut().for_each(|v| *v *= s);
                bx[c.clone()].iter_mut().for_each(|v| *v *= s);
                x2[j] = xx * s * s;
            }
            let th = item.1;
            let (a, b) = (&mut ax[c.clone()], &bx[c]);
            a.iter_mut().zip(b).for_each(|(a, b)| *a -= th * b);
            nrm[j] = crate::dense::dot(a, a);
        }
        if self.residual_deflation() > 0 {
            self.deflate_residuals(&mut ax, &mut nrm);
        }
        self.allreduce(&mut nrm);
        for (j, item) in lock.iter_mut().enumerate() {
            item.2 = (nrm[j] / x2[j].max(f64::MIN_POSITIVE)).sqrt();
        }
        bx
    }
}
