//! The locking floor and its repair by joint refinement of a cluster
//! (PRIMME's "practically converged" pairs, `convergence.c`).
//!
//! For a Ritz vector x ⟂ X (the locked vectors), r = Ax − θx has
//! Xᵀr = (AX)ᵀx = R_Xᵀx, the locked pairs' own residuals seen from x. The
//! correction equation works in the complement of X and only reduces
//! (I − XXᵀ)r: with locked residuals near the tolerance that have components
//! along x, ‖Xᵀr‖ alone can exceed it. lap3d:10, σ = 1.09, block 1, harmonic:
//! ‖r‖ froze at 1.147e-7 against 8.15e-8 until the budget was spent, x a copy
//! of the six-fold 1.0888, ‖Xᵀr‖ = 1.147e-7 from the locked pairs of 0.852,
//! 0.952, 1.325 and 1.331. When the head pair stagnates with (I − XXᵀ)r
//! converged and ‖Xᵀr‖ above the tolerance, the locked vectors that make up
//! ‖Xᵀr‖ (the cluster) return to the basis: Rayleigh-Ritz (or harmonic
//! Ritz) over span[V, X_cluster] refines them with x, their corrections
//! follow, and they lock again below a fraction of the tolerance, so that
//! their residuals no longer add up to a floor. Standard problems with
//! locking only; other solves take the same steps as without it.

use super::*;

/// The floor ‖Xᵀr‖ must exceed this fraction of the tolerance to count: at
/// 1 no correction in the complement of X converges the pair (0.9 also
/// caught pairs that got past by turning inside their eigenspace: 16 of 40
/// seeds of lap3d:10 at σ = 1.09, block 1, harmonic, against 6).
const FLOOR_SHARE: f64 = 1.0;
/// The locked vectors left out of the cluster leave at most this fraction of
/// the tolerance in ‖Xᵀr‖.
const FLOOR_LEFT: f64 = 0.25;
/// Refinements per solve (each costs products with the cluster's vectors).
const MAX_REFINEMENTS: usize = 8;

/// Pairs whose Ritz values lie in `lo..=hi` lock at `factor` times the
/// tolerance (a refined cluster, [`State::refine_floor`]).
pub(super) struct Tight {
    lo: f64,
    hi: f64,
    factor: f64,
}

impl<A: Operator + ?Sized, C: Comm + ?Sized> State<'_, '_, '_, A, C> {
    /// The tolerance a pair of Ritz value θ locks at: `tol_for`, tightened
    /// inside refined clusters (never below the rounding level 10³ε·‖A‖).
    pub(super) fn lock_tol(&self, theta: f64) -> f64 {
        let tol = self.tol_for(theta);
        let f = self
            .tight
            .iter()
            .filter(|t| t.lo <= theta && theta <= t.hi)
            .fold(1.0f64, |f, t| f.min(t.factor));
        if f >= 1.0 {
            return tol;
        }
        (f * tol).max(tol.min(1e3 * f64::EPSILON * self.res_scale(theta)))
    }

    /// Whether the floor stops the head pair (`sel[0]`, first in target
    /// order, its vector and residual first in `w`), and if so the repair:
    /// the locked vectors of the cluster leave the lock and join the basis
    /// (`y`, `m`: this iteration's Ritz coefficients, for a restart making
    /// room). True when the basis changed: Rayleigh-Ritz again without a
    /// correction. Collective (one global sum when the cheap bounds pass).
    pub(super) fn refine_floor(&mut self, w: &Work, sel: &[Sel], y: &[f64], m: usize) -> bool {
        let Some(head) = sel.first() else {
            self.floor_prev = f64::INFINITY;
            return false;
        };
        let prev = std::mem::replace(&mut self.floor_prev, head.rnorm);
        let nl = self.nl();
        let tl = self.lock_tol(head.theta);
        // Cheap bounds first (no sum): the residual stagnates, exceeds the
        // tolerance, and ‖Xᵀr‖ ≤ ‖R_X‖_F could make up for it.
        let rx2: f64 = self.res.iter().map(|r| r * r).sum();
        if !self.prm.basis.locking
            || self.has_mass()
            || self.pb.deflate_locked
            || self.correction.by_solve_groups()
            || self.stats.floor_refinements >= MAX_REFINEMENTS
            || nl == 0
            || head.rnorm <= tl
            || head.rnorm < 0.5 * prev
            || head.rnorm * head.rnorm > tl * tl + rx2
            || (FLOOR_SHARE * tl).powi(2) > rx2
        {
            return false;
        }
        let (n, threads) = (self.n, self.prm.execution.threads);
        let mut c = vec![0.0; nl];
        gemm_tn(
            &mut c,
            self.locked_vectors(),
            n,
            nl,
            &w.rsel[..n],
            1,
            threads,
        );
        self.allreduce(&mut c);
        let c2: f64 = c.iter().map(|v| v * v).sum();
        let projected2 = head.rnorm * head.rnorm - c2;
        if c2 < (FLOOR_SHARE * tl).powi(2) || projected2 > tl * tl {
            return false;
        }
        // The cluster: the largest contributions to Xᵀr, leaving at most
        // FLOOR_LEFT·tol in the rest; at most the basis room less one column.
        let mut ord: Vec<usize> = (0..nl).collect();
        ord.sort_by(|&a, &b| c[a].abs().total_cmp(&c[b].abs()));
        let (mut left, mut skip) = (0.0, 0);
        while skip < nl && left + c[ord[skip]].powi(2) <= (FLOOR_LEFT * tl).powi(2) {
            left += c[ord[skip]].powi(2);
            skip += 1;
        }
        let cap_after = |q: usize| self.basis_cap_with(nl - q);
        let mut cluster: Vec<usize> = ord[skip..].to_vec();
        while cluster.len() > 1 && cluster.len() + 1 > cap_after(cluster.len()) {
            cluster.remove(0);
        }
        self.unlock(&mut cluster, head);
        self.make_room(y, m, cluster.len());
        let q = self.orthogonalize_block(cluster.len());
        if q > 0 && self.extend_basis(q).is_err() {
            return false;
        }
        true
    }

    /// Takes the locked pairs `cluster` (indices among the locked ones) out
    /// of the lock, their vectors into the first columns of `t`, and makes
    /// pairs near them and the head pair lock at 0.5/√(q + 1) times the
    /// tolerance (q cluster pairs, so that q + 1 residuals add up to at most
    /// half of it).
    fn unlock(&mut self, cluster: &mut [usize], head: &Sel) {
        let (n, nd) = (self.n, self.ndefl);
        cluster.sort_unstable();
        let q = cluster.len();
        if self.t.len() < q * n {
            self.t.resize(q * n, 0.0);
        }
        let (mut lo, mut hi, mut wide) = (head.theta, head.theta, head.rnorm);
        for (k, &j) in cluster.iter().enumerate() {
            let col = (nd + j) * n;
            self.t[k * n..(k + 1) * n].copy_from_slice(&self.xl[col..col + n]);
            lo = lo.min(self.lam[j]);
            hi = hi.max(self.lam[j]);
            wide = wide.max(self.res[j]);
        }
        for &j in cluster.iter().rev() {
            let col = (nd + j) * n;
            self.xl.drain(col..col + n);
            self.lam.remove(j);
            self.res.remove(j);
        }
        self.tight.push(Tight {
            lo: lo - 2.0 * wide,
            hi: hi + 2.0 * wide,
            factor: 0.5 / ((q + 1) as f64).sqrt(),
        });
        self.stats.locked = self.nl();
        self.stats.floor_refinements += 1;
        self.prev_k = 0;
    }

    /// Makes room for `q` new columns: a thick restart when they do not fit
    /// the basis cap, then the leading Ritz directions only when they still
    /// do not.
    fn make_room(&mut self, y: &[f64], m: usize, q: usize) {
        self.restart_or_keep(y, m, q);
        let cap = self.basis_cap();
        if self.m + q > cap {
            // after a restart the first columns span the leading Ritz vectors
            let p = cap.saturating_sub(q).max(1).min(self.m);
            let mut sel = vec![0.0; self.m * p];
            for j in 0..p {
                sel[j * self.m + j] = 1.0;
            }
            self.transform_basis(&sel, p);
            self.prev_k = 0;
        }
    }
}
