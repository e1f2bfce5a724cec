//! Harmonic Ritz extraction for interior eigenvalues, `Target::Closest(σ)`
//! without a spectral transformation ([`Extraction::Harmonic`]; PRIMME's
//! `primme_proj_harmonic` in `solve_projection.c`, `update_projection.c` and
//! `restart.c`).
//!
//! **The problem.** With W = AV (kept beside V) and W_σ = W − σV, the harmonic
//! Ritz pairs (θ = σ + ν, Vy) satisfy the Petrov-Galerkin condition
//! W_σᵀ(A − θI)Vy = 0, i.e.
//!
//! ```text
//! (W_σᵀW_σ) y = ν (W_σᵀV) y,   W_σᵀW_σ = G − 2σH + σ²I,   W_σᵀV = H − σI,
//! ```
//!
//! with G = WᵀW and H = VᵀW = VᵀAV (V orthonormal). Morgan (1991) reads this as
//! Rayleigh-Ritz for (A − σI)⁻¹ over the space (A − σI)V: the values ν⁻¹ are
//! Ritz values of the inverse, so the harmonic values approximate the
//! eigenvalues closest to σ from outside (Paige, Parlett and van der Vorst
//! 1995), and no spurious value appears near σ, unlike the Ritz values of H;
//! Sleijpen and van der Vorst (1996, §5, "harmonic Ritz values") use them to
//! steer Jacobi-Davidson to interior eigenvalues.
//!
//! **The dense solver.** M = W_σᵀW_σ and N = H − σI are both symmetric and M
//! is positive semidefinite, so with μ = 1/ν the problem is the
//! symmetric-definite pencil N y = μ M y, whose wanted pairs (ν nearest 0) are
//! those of largest |μ|. It is reduced without Cholesky (M may be numerically
//! singular): M = U S Uᵀ (faer's self-adjoint eigensolver); the directions
//! with S below the rounding level of M's entries (`NULL_FACTOR`) are those
//! where ‖(A − σI)Vu‖ ≈ 0, i.e. eigenvectors at σ itself, and are kept first,
//! as a Rayleigh-Ritz problem of their own; on the others, Z = U S^(−1/2) and
//! the symmetric ZᵀNZ = Q diag(μ) Qᵀ give y = ZQ. Harmonic vectors are then
//! normalized (‖Vy‖ = ‖y‖ = 1) and, as in PRIMME, the eigenvalue estimate is
//! the Rayleigh quotient ρ = yᵀHy, with the residual AVy − ρVy, which is the
//! one the solver loop computes from V, W and (ρ, y). The squared form G has
//! a floor near √ε·‖A − σI‖ on the ‖(A − σI)x‖ it resolves; the convergence
//! test is always on true residuals, and the directions below that floor are
//! the null block above.
//!
//! **Keeping G.** G grows with the basis from one extra small product W_oldᵀW_T,
//! W_TᵀW_T per new block, folded into the global sum of H's new columns
//! ([`State::gram_local`], [`State::gram_store`]); transformations V ← VC map it
//! to CᵀGC ([`State::harmonic_transform`]); when W is recomputed (drift,
//! repairs, a resumed checkpoint) G is rebuilt from W (one global sum).
//!
//! **Generalized problems** K x = λ M x (V M-orthonormal, W = KV, H = VᵀKV):
//! the test space is (K − σM)V in the M⁻¹ inner product, W_σᵀM⁻¹(K − θM)Vy
//! = 0 with W_σ = (K − σM)V = W − σMV, i.e. the same pencil with
//! W_σᵀM⁻¹W_σ in place of W_σᵀW_σ and W_σᵀV = H − σI: Rayleigh-Ritz for
//! (K − σM)⁻¹M in the M inner product over (K − σM)V. G then holds
//! W_σᵀM⁻¹W_σ itself (σ is fixed), not formed as G − 2σH + σ²I: the solves
//! with M ([`State::mass_inverse`], preconditioned conjugate gradients on
//! diag(M), relative residual 1e-10) are inexact, and that cancellation would
//! amplify their error past the tolerance. They only steer the extraction,
//! the test being on true residuals. Coefficient vectors of unit norm are
//! M-normalized vectors, and everything below is in the M inner product.
//!
//! **Non-orthogonal vectors.** Harmonic vectors are not orthonormal. Restarts
//! orthonormalize their coefficient block (as PRIMME: the span is what is
//! kept, then G ← QᵀGQ and H ← QᵀHQ); pairs locked together are made
//! orthonormal by a Rayleigh-Ritz step inside their span before their
//! residuals are verified ([`State::harmonic_lock_candidates`]); the basis that
//! remains after locking is the orthogonal complement of the locked vectors in
//! span(V) ([`State::harmonic_remove_locked`]), so the locked vectors and the
//! basis stay orthogonal.

use super::mass::MASS_SOLVE_TOL;
use super::*;
use crate::params::Extraction;

/// An eigenvalue of M = W_σᵀW_σ below `NULL_FACTOR · m · ε · (√‖G‖ + |σ|)²`
/// (the rounding level of M's entries, formed as G − 2σH + σ²I) counts as zero.
const NULL_FACTOR: f64 = 10.0;

/// `Extraction::Auto`'s safeguard: when the smallest residual norm of the
/// wanted, unlocked pairs has not halved (`STALL_FACTOR`) with no pair locked
/// in this many outer iterations, and in at least as many as the solve had run
/// before, the solve goes on with Rayleigh-Ritz. Healthy harmonic solves were
/// measured with plateaus of up to 306 iterations (lap3d:24, σ = 1, GD+k
/// steps, at iteration 517); a stalled one never ends its plateau.
const STALL_ITERATIONS: usize = 1000;
/// See [`STALL_ITERATIONS`].
const STALL_FACTOR: f64 = 0.5;

/// State of the harmonic extraction: G = WᵀW (max_basis × max_basis,
/// column-major; its leading m×m block is current) and the stagnation watch.
pub(super) struct Harmonic {
    g: Vec<f64>,
    /// Outer iteration at which the watch last saw progress (or a lock).
    since: usize,
    /// The best residual norm then (∞: not yet seen).
    best: f64,
    /// Locked pairs then.
    locked: usize,
}

/// The extraction a solve uses (never `Auto`): see [`Extraction`].
///
/// `Auto` takes Rayleigh-Ritz for a generalized problem (`mass`): harmonic
/// extraction there pays solves with M for every new block.
///
/// # Errors
/// `InvalidParams` for `Harmonic` with a target other than `Closest(σ)`.
pub(super) fn resolve_extraction(params: &JdParams, mass: bool) -> Result<Extraction, JdError> {
    let closest = matches!(params.problem.target, Target::Closest(_));
    match params.basis.extraction {
        Extraction::Ritz => Ok(Extraction::Ritz),
        Extraction::Auto if closest && !mass => Ok(Extraction::Harmonic),
        Extraction::Auto => Ok(Extraction::Ritz),
        Extraction::Harmonic if !closest => Err(JdError::invalid(
            "extraction",
            "harmonic extraction needs a target σ (Target::Closest)",
        )),
        Extraction::Harmonic => Ok(Extraction::Harmonic),
    }
}

/// The leading m×m block of a matrix stored with leading dimension `ld`.
fn compact(a: &[f64], m: usize, ld: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * m];
    for j in 0..m {
        c[j * m..(j + 1) * m].copy_from_slice(&a[j * ld..j * ld + m]);
    }
    c
}

/// `cᵀ a c` (c: m×p, a: m×m symmetric), symmetrized, p×p.
fn congruence(a: &[f64], m: usize, c: &[f64], p: usize) -> Vec<f64> {
    let mut ac = vec![0.0; m * p];
    gemm_nn(&mut ac, a, m, m, c, p, 1);
    let mut out = vec![0.0; p * p];
    gemm_tn(&mut out, c, m, p, &ac, p, 1);
    for j in 0..p {
        for i in 0..j {
            let s = 0.5 * (out[j * p + i] + out[i * p + j]);
            out[j * p + i] = s;
            out[i * p + j] = s;
        }
    }
    out
}

impl<A: Operator + ?Sized, C: Comm + ?Sized> State<'_, '_, '_, A, C> {
    /// Decides the extraction (see [`resolve_extraction`]), records it in the
    /// statistics and, for harmonic extraction, sets up G (rebuilt from W when
    /// the basis is not empty: a resumed checkpoint). Collective when it rebuilds.
    ///
    /// # Errors
    /// As [`resolve_extraction`].
    pub(super) fn init_extraction(&mut self) -> Result<(), JdError> {
        let mut e = resolve_extraction(self.prm, self.has_mass())?;
        if self.stats.harmonic_stalled_at.is_some() {
            // Resumed after `Auto` fell back to Rayleigh-Ritz.
            e = Extraction::Ritz;
        }
        self.stats.extraction = e;
        if e == Extraction::Harmonic {
            let mb = self.sz.max_basis;
            self.harm = Some(Harmonic {
                g: vec![0.0; mb * mb],
                since: self.stats.outer_iterations,
                best: f64::INFINITY,
                locked: self.nl(),
            });
            if self.m > 0 {
                self.harmonic_rebuild();
            }
        }
        Ok(())
    }

    /// σ of the target, in scaled units (0 for other targets).
    fn sigma(&self) -> f64 {
        match self.target {
            Target::Closest(s) => s,
            _ => 0.0,
        }
    }

    /// Length of the local part of G's new columns that [`State::extend_basis`]
    /// appends to its global sum when the basis grows from m to m + b columns:
    /// m·b + b² with harmonic extraction, else 0.
    pub(super) fn gram_len(&self, m: usize, b: usize) -> usize {
        if self.harm.is_some() {
            m * b + b * b
        } else {
            0
        }
    }

    /// The local part of G's new columns into `out` (length [`State::gram_len`]):
    /// W_oldᵀW_T (m×b) then W_TᵀW_T (b×b), W_T = W's columns m..m+b; with a
    /// mass matrix the same with W_σ = W − σMV and M⁻¹ between (solves with M:
    /// collective).
    pub(super) fn gram_local(&mut self, out: &mut [f64], m: usize, b: usize) {
        if self.harm.is_none() || out.is_empty() {
            return;
        }
        let n = self.n;
        let th = self.prm.execution.threads;
        if self.has_mass() {
            // W_σ,T = W_T − σ·M T, z = M⁻¹W_σ,T; W_σ,oldᵀz = W_oldᵀz − σ(MV_old)ᵀz.
            let sigma = self.sigma();
            let mut ws = self.w[m * n..(m + b) * n].to_vec();
            ws.iter_mut()
                .zip(&self.dual_block()[..n * b])
                .for_each(|(w, bt)| *w -= sigma * bt);
            let mut z = vec![0.0; n * b];
            self.mass_inverse(&ws, &mut z, b);
            let (a, c) = out.split_at_mut(m * b);
            gemm_tn(a, &self.w[..m * n], n, m, &z, b, th);
            let mut bz = vec![0.0; m * b];
            gemm_tn(&mut bz, &self.dual_basis()[..m * n], n, m, &z, b, th);
            a.iter_mut().zip(&bz).for_each(|(a, bz)| *a -= sigma * bz);
            gemm_tn(c, &ws, n, b, &z, b, th);
            self.stats.basis_passes += 2;
            return;
        }
        let (old, new) = self.w.split_at(m * n);
        let wt = &new[..b * n];
        let (a, c) = out.split_at_mut(m * b);
        gemm_tn(a, old, n, m, wt, b, th);
        gemm_tn(c, wt, n, b, wt, b, th);
        self.stats.basis_passes += 1;
    }

    /// Stores G's new columns (the global sum of [`State::gram_local`]).
    pub(super) fn gram_store(&mut self, buf: &[f64], m: usize, b: usize) {
        let mb = self.sz.max_basis;
        let Some(h) = self.harm.as_mut() else {
            return;
        };
        let g = &mut h.g;
        for j in 0..b {
            for i in 0..m {
                let v = buf[j * m + i];
                g[(m + j) * mb + i] = v;
                g[i * mb + m + j] = v;
            }
            for i in 0..b {
                let c = &buf[m * b..];
                g[(m + j) * mb + m + i] = 0.5 * (c[j * b + i] + c[i * b + j]);
            }
        }
    }

    /// G ← CᵀGC for the basis transformation V ← VC (C: m×p), called by
    /// [`State::transform_basis`] before it sets the new size.
    pub(super) fn harmonic_transform(&mut self, c: &[f64], m: usize, p: usize) {
        let mb = self.sz.max_basis;
        let Some(h) = self.harm.as_mut() else {
            return;
        };
        let gc = compact(&h.g, m, mb);
        let newg = congruence(&gc, m, c, p);
        for j in 0..p {
            h.g[j * mb..j * mb + p].copy_from_slice(&newg[j * p..(j + 1) * p]);
        }
    }

    /// G = WᵀW (W_σᵀM⁻¹W_σ with a mass matrix) recomputed from W (one global
    /// sum); nothing without harmonic extraction. Collective.
    pub(super) fn harmonic_rebuild(&mut self) {
        let threads = self.prm.execution.threads;
        if self.harm.is_none() {
            return;
        }
        let (n, m, mb) = (self.n, self.m, self.sz.max_basis);
        let mut g = vec![0.0; m * m];
        if self.has_mass() {
            let sigma = self.sigma();
            let mut ws = self.w[..n * m].to_vec();
            ws.iter_mut()
                .zip(&self.dual_basis()[..n * m])
                .for_each(|(w, bv)| *w -= sigma * bv);
            let mut z = vec![0.0; n * m];
            self.mass_inverse(&ws, &mut z, m);
            gemm_tn(&mut g, &ws, n, m, &z, m, threads);
        } else {
            gemm_tn(&mut g, &self.w, n, m, &self.w, m, threads);
        }
        self.stats.basis_passes += 1;
        self.allreduce(&mut g);
        if let Some(h) = self.harm.as_mut() {
            for j in 0..m {
                for i in 0..m {
                    h.g[j * mb + i] = 0.5 * (g[j * m + i] + g[i * m + j]);
                }
            }
        }
    }

    /// Harmonic Ritz extraction (see the module documentation): the Rayleigh
    /// quotients ρ of the m harmonic vectors and their coefficients y (m×m,
    /// columns of unit norm, not orthogonal), in target order: the directions
    /// with (A − σI)Vy ≈ 0 first, then by harmonic value |ν| ascending. Updates
    /// the ‖A‖ estimate from ‖AV‖ = √λmax(G).
    ///
    /// # Errors
    /// `NonFinite` when H or G holds NaN or Inf.
    pub(super) fn harmonic_ritz(&mut self) -> Result<(Vec<f64>, Vec<f64>), JdError> {
        let (m, mb) = (self.m, self.sz.max_basis);
        if m == 0 {
            return Ok((Vec::new(), Vec::new()));
        }
        let sigma = self.sigma();
        let hc = self.h_compact();
        let gc = compact(self.harm.as_ref().map_or(&[][..], |h| &h.g[..]), m, mb);
        // N = H − σI.
        let mass = self.has_mass();
        let mut nn = hc.clone();
        for j in 0..m {
            nn[j * m + j] -= sigma;
        }
        let nonfinite = JdError::NonFinite("projected matrices G = WᵀW and H = VᵀW");
        let (gval, _) = sym_eig(&gc, m).ok_or(nonfinite)?;
        let gmax = gval.last().copied().unwrap_or(0.0).max(0.0);
        // M = W_σᵀ(M⁻¹)W_σ: G itself with a mass matrix, else G − 2σH + σ²I.
        let (mm, cut) = if mass {
            let level = f64::EPSILON.max(MASS_SOLVE_TOL);
            (gc.clone(), NULL_FACTOR * m as f64 * level * gmax)
        } else {
            let mut mm = vec![0.0; m * m];
            for j in 0..m {
                for i in 0..m {
                    let s = if i == j { sigma * sigma } else { 0.0 };
                    mm[j * m + i] = gc[j * m + i] - 2.0 * sigma * hc[j * m + i] + s;
                }
            }
            let level = (gmax.sqrt() + sigma.abs()).powi(2);
            (mm, NULL_FACTOR * m as f64 * f64::EPSILON * level)
        };
        let (s, u) = sym_eig(&mm, m).ok_or(JdError::NonFinite("harmonic projection"))?;
        let nnull = s.iter().take_while(|&&v| v <= cut).count();
        let mut y = vec![0.0; m * m];
        let mut rho = vec![0.0; m];
        // Null block: Rayleigh-Ritz inside span(U_null), nearest σ first.
        if nnull > 0 {
            let un = &u[..m * nnull];
            let hn = congruence(&hc, m, un, nnull);
            let (th, z) = sym_eig(&hn, nnull).ok_or(JdError::NonFinite("harmonic projection"))?;
            let ord = self.order(&th);
            for (q, &i) in ord.iter().enumerate() {
                gemm_nn(
                    &mut y[q * m..(q + 1) * m],
                    un,
                    m,
                    nnull,
                    &z[i * nnull..(i + 1) * nnull],
                    1,
                    1,
                );
            }
        }
        // The rest: Z = U_r S_r^(−1/2), ZᵀNZ = Q diag(μ) Qᵀ, y = Z Q.
        let r = m - nnull;
        if r > 0 {
            let mut z = u[m * nnull..].to_vec();
            for (j, col) in z.chunks_exact_mut(m).enumerate() {
                let f = 1.0 / s[nnull + j].sqrt();
                col.iter_mut().for_each(|v| *v *= f);
            }
            let t = congruence(&nn, m, &z, r);
            let (mu, q) = sym_eig(&t, r).ok_or(JdError::NonFinite("harmonic projection"))?;
            // ν = 1/μ nearest 0: |μ| largest first.
            let mut ord: Vec<usize> = (0..r).collect();
            ord.sort_by(|&a, &b| mu[b].abs().total_cmp(&mu[a].abs()));
            for (k, &i) in ord.iter().enumerate() {
                let c = nnull + k;
                gemm_nn(
                    &mut y[c * m..(c + 1) * m],
                    &z,
                    m,
                    r,
                    &q[i * r..(i + 1) * r],
                    1,
                    1,
                );
            }
        }
        // Unit vectors and their Rayleigh quotients ρ = yᵀHy.
        let mut hy = vec![0.0; m];
        for (j, col) in y.chunks_exact_mut(m).enumerate() {
            let nrm = crate::dense::norm(col);
            if !(nrm.is_finite() && nrm > 0.0) {
                return Err(JdError::NonFinite("harmonic Ritz vector"));
            }
            col.iter_mut().for_each(|v| *v /= nrm);
            gemm_nn(&mut hy, &hc, m, m, col, 1, 1);
            rho[j] = crate::dense::dot(col, &hy);
        }
        if self.prm.problem.anorm.is_none() {
            // ‖AV‖ = √λmax(G) bounds ‖A‖ from below; not with a mass matrix.
            let floor = if mass { 0.0 } else { gmax.sqrt() };
            let mx = rho.iter().fold(floor, |a, t| a.max(t.abs()));
            self.anorm = self.anorm.max(mx);
        }
        Ok((rho, y))
    }

    /// `Extraction::Auto`'s stagnation watch, once per outer iteration after
    /// its locking and restart (`seen`: value and residual norm of the pairs
    /// evaluated, target order; `remaining`: wanted pairs not locked yet). When
    /// the best residual of the wanted pairs has not halved without a lock in
    /// [`STALL_ITERATIONS`] iterations (and in as many as ran before), harmonic
    /// extraction is
    /// dropped for Rayleigh-Ritz for the rest of the solve, recorded in
    /// `stats.extraction` and `stats.harmonic_stalled_at` (harmonic vectors
    /// chase the smallest ‖(A − σI)x‖, and a preconditioner with the wrong
    /// inertia, e.g. an ILU(0) of an indefinite A − σI with positive pivots,
    /// can keep the small basis from ever holding one: lap2d:30, σ = 1,
    /// ILU(0), stalled at residuals near 0.1 where Rayleigh-Ritz converges).
    /// An explicit `Extraction::Harmonic` is never dropped. The same decision
    /// on every process (global residuals and counters).
    pub(super) fn harmonic_watch(&mut self, seen: &[(f64, f64)], remaining: usize) {
        if self.prm.basis.extraction != Extraction::Auto {
            return;
        }
        let (it, nl) = (self.stats.outer_iterations, self.nl());
        let best = seen
            .iter()
            .take(remaining.max(1))
            .fold(f64::INFINITY, |a, r| a.min(r.1));
        let Some(h) = self.harm.as_mut() else {
            return;
        };
        if nl != h.locked || best < STALL_FACTOR * h.best {
            h.locked = nl;
            h.since = it;
            h.best = best;
            return;
        }
        if it.saturating_sub(h.since) >= STALL_ITERATIONS.max(h.since) {
            self.harm = None;
            self.stats.extraction = Extraction::Ritz;
            self.stats.harmonic_stalled_at = Some(it);
        }
    }

    /// Makes the coefficient vectors at positions `pos` of `y` (m rows)
    /// orthonormal by a Rayleigh-Ritz step inside their span (MGS twice, then the
    /// eigenpairs of QᵀHQ in target order, written back at the same positions).
    /// Returns the Ritz values; fewer than `pos.len()` when the vectors were
    /// linearly dependent (the first ones are then rewritten).
    fn harmonic_orthonormalize(&self, y: &mut [f64], m: usize, pos: &[usize]) -> Vec<f64> {
        let q = pos.len();
        let mut c = vec![0.0; m * q];
        for (k, &p) in pos.iter().enumerate() {
            c[k * m..(k + 1) * m].copy_from_slice(&y[p * m..(p + 1) * m]);
        }
        let kept = orthonormalize_columns(&mut c, m, q);
        let hc = self.h_compact();
        let s = congruence(&hc, m, &c[..m * kept], kept);
        let Some((th, z)) = sym_eig(&s, kept) else {
            return Vec::new();
        };
        let ord = self.order(&th);
        for (k, &i) in ord.iter().enumerate() {
            let p = pos[k];
            gemm_nn(
                &mut y[p * m..(p + 1) * m],
                &c[..m * kept],
                m,
                kept,
                &z[i * kept..(i + 1) * kept],
                1,
                1,
            );
        }
        ord.iter().map(|&i| th[i]).collect()
    }

    /// Pairs about to be locked together (`lock`: position in `y`, value,
    /// residual; their vectors in the first columns of `t`) are harmonic
    /// vectors, not orthogonal to each other: replaces them by the Ritz pairs of
    /// their span (orthonormal; `y` rewritten at their positions, `t` = V·y) so
    /// that the locked vectors stay orthonormal. Their residuals are then
    /// verified as every lock candidate's. Nothing without harmonic extraction
    /// or with fewer than two candidates.
    pub(super) fn harmonic_lock_candidates(
        &mut self,
        y: &mut [f64],
        m: usize,
        lock: &mut Vec<(usize, f64, f64)>,
    ) {
        if self.harm.is_none() || lock.len() < 2 {
            return;
        }
        let n = self.n;
        let pos: Vec<usize> = lock.iter().map(|l| l.0).collect();
        let th = self.harmonic_orthonormalize(y, m, &pos);
        lock.truncate(th.len());
        let mut c = vec![0.0; m * th.len()];
        for (k, item) in lock.iter_mut().enumerate() {
            item.1 = th[k];
            c[k * m..(k + 1) * m].copy_from_slice(&y[item.0 * m..(item.0 + 1) * m]);
        }
        let q = th.len();
        gemm_nn(
            &mut self.t[..n * q],
            &self.v,
            n,
            m,
            &c,
            q,
            self.prm.execution.threads,
        );
        self.stats.basis_passes += 1;
    }

    /// Removes the locked vectors V·y[:, locked] from the basis: V becomes an
    /// orthonormal basis of the rest of span(V) orthogonal to them (MGS of
    /// [y_locked, y_rest] in coefficient space, G, H and W following). Returns
    /// the new basis size p and the coefficients (p×p) of the first p remaining
    /// harmonic vectors in it (for the restart that may follow).
    pub(super) fn harmonic_remove_locked(
        &mut self,
        y: &[f64],
        m: usize,
        locked: &[usize],
    ) -> (usize, Vec<f64>) {
        let rest: Vec<usize> = (0..m).filter(|p| !locked.contains(p)).collect();
        let mut c = vec![0.0; m * m];
        for (k, &p) in locked.iter().chain(&rest).enumerate() {
            c[k * m..(k + 1) * m].copy_from_slice(&y[p * m..(p + 1) * m]);
        }
        // MGS is sequential: the columns kept from the locked ones come first,
        // as many as orthonormalizing them alone keeps.
        let mut cl = c[..m * locked.len()].to_vec();
        let k1 = orthonormalize_columns(&mut cl, m, locked.len());
        let kept = orthonormalize_columns(&mut c, m, m);
        let p = kept.saturating_sub(k1).min(rest.len());
        let qr = c[k1 * m..(k1 + p) * m].to_vec();
        let mut yr = vec![0.0; m * p];
        for (k, &r) in rest.iter().take(p).enumerate() {
            yr[k * m..(k + 1) * m].copy_from_slice(&y[r * m..(r + 1) * m]);
        }
        let mut ynew = vec![0.0; p * p];
        gemm_tn(&mut ynew, &qr, m, p, &yr, p, 1);
        self.transform_basis(&qr, p);
        (p, ynew)
    }

    /// Soft locking (`locking = false`) returns the first `nev` vectors: harmonic
    /// ones are made orthonormal first (Rayleigh-Ritz in their span,
    /// [`State::harmonic_orthonormalize`], `y` rewritten) and their values and
    /// true residual norms ‖W y − θ V y‖ (one global sum) returned. Without
    /// harmonic extraction: `theta` and the residuals seen, unchanged.
    pub(super) fn soft_values(
        &mut self,
        y: &mut [f64],
        m: usize,
        theta: &[f64],
        seen: &[(f64, f64)],
    ) -> (Vec<f64>, Vec<f64>) {
        let threads = self.prm.execution.threads;
        let nev = self.prm.problem.nev;
        let plain = (
            theta[..nev].to_vec(),
            seen.iter().take(nev).map(|r| r.1).collect(),
        );
        if self.harm.is_none() {
            return plain;
        }
        let pos: Vec<usize> = (0..nev).collect();
        let th = self.harmonic_orthonormalize(y, m, &pos);
        if th.len() < nev {
            return plain;
        }
        let n = self.n;
        let mass = self.has_mass();
        let (mut x, mut r) = (vec![0.0; n * nev], vec![0.0; n * nev]);
        // ‖R‖² then, with M, ‖X‖² (the test takes ‖r‖/‖x‖).
        let mut nrm = vec![0.0; if mass { 2 * nev } else { nev }];
        // R = W Y − (V Y) Θ, or W Y − (MV Y) Θ with M; X = V Y.
        let basis = self.dual_basis();
        crate::tall_skinny::ritz_residuals(
            &mut x,
            &mut r,
            &mut nrm[..nev],
            basis,
            &self.w,
            n,
            m,
            &y[..m * nev],
            &th,
            threads,
        );
        self.stats.basis_passes += 2;
        if mass {
            gemm_nn(&mut x, &self.v, n, m, &y[..m * nev], nev, threads);
            for j in 0..nev {
                nrm[nev + j] = crate::dense::dot(&x[j * n..(j + 1) * n], &x[j * n..(j + 1) * n]);
            }
            self.stats.basis_passes += 1;
        }
        if self.residual_deflation() > 0 {
            self.deflate_residuals(&mut r, &mut nrm[..nev]);
        }
        self.allreduce(&mut nrm);
        let res = (0..nev)
            .map(|j| {
                let x2 = if mass { nrm[nev + j] } else { 1.0 };
                (nrm[j].max(0.0) / if x2 > 0.0 { x2 } else { 1.0 }).sqrt()
            })
            .collect();
        (th, res)
    }
}
