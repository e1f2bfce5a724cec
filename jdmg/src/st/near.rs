//! Eigenvalues numerically at the shift. When σ lies within a few roundings
//! of eigenvalues λ₁…λₚ (relative to the farthest wanted ones), B =
//! (K − σM)⁻¹M has p eigenvalues ν = 1/(λ − σ) so large that every product
//! with B carries rounding errors of ε·|ν₁| along their eigenvectors, far
//! above the wanted ν of the others: the loop on B then cannot meet its test
//! for them and runs to its budget. Subspace inverse iteration (Parlett, *The
//! Symmetric Eigenvalue Problem*, §14.1) finds those p pairs in a few solves
//! (the ratio of the dominant ν to the rest is what B's test cannot resolve,
//! so the convergence is fast), their true residuals are checked, and the
//! loop solves for the others on the inverse restricted to their complement
//! (`DeflatedInverse`).

use lblib::{Comm, ReduceOp};
use precond::Operator;

use super::{cross, TrueTest};
use crate::random;

/// B's pairs with |λ − σ| below this many roundings, relative to B's test
/// (`radius`), are found by inverse iteration before the loop.
const ROUNDINGS: f64 = 1e2;
/// Subspace inverse iteration steps at most.
const STEPS: usize = 8;
/// The most pairs found at σ (the block of the inverse iteration).
const MAX_BLOCK: usize = 8;

/// The pairs found at σ: this process's rows of their vectors
/// (M-orthonormal), eigenvalues and true residuals ‖Kx − λMx‖/‖x‖.
pub(super) struct NearPairs {
    pub x: Vec<f64>,
    pub lam: Vec<f64>,
    pub res: Vec<f64>,
}

/// What the search at σ needs: the operators on this process's rows.
pub(super) struct NearSearch<'a, C: ?Sized> {
    pub inv: &'a dyn Operator,
    pub k: &'a dyn Operator,
    pub m: Option<&'a dyn Operator>,
    pub comm: &'a C,
    pub sigma: f64,
    pub n: usize,
    pub row_offset: usize,
    pub seed: u64,
}

impl<C: Comm + ?Sized> NearSearch<'_, C> {
    /// The radius around σ inside which B's relative test `t_b` cannot be
    /// met for pairs as far as the test's scale ‖K‖₁ + |σ|‖M‖₁: ε·|ν₁| ≥
    /// t_b·|ν| once |λ₁ − σ| ≤ (ε/t_b)·|λ − σ|.
    pub fn radius(test: &TrueTest, t_b: f64) -> f64 {
        let scale = test.knorm + test.sigma.abs() * test.mnorm.max(f64::from(!test.pencil));
        (ROUNDINGS * f64::EPSILON / t_b).min(1e-2) * scale
    }

    /// The pairs within `radius` of σ, at most `nev` (and `MAX_BLOCK`);
    /// None when there are none (one solve with a random vector tells,
    /// unless its growth is that of an eigenvalue near σ); and the products
    /// with the inverse spent. Collective.
    pub fn find(&self, test: &TrueTest, radius: f64, nev: usize) -> (Option<NearPairs>, u64) {
        let mut products = 0;
        let found = self.search(test, radius, nev, &mut products);
        (found, products)
    }

    fn search(
        &self,
        test: &TrueTest,
        radius: f64,
        nev: usize,
        products: &mut u64,
    ) -> Option<NearPairs> {
        let nl = self.inv.nrows();
        let b = nev.min(MAX_BLOCK).min(self.n);
        if b == 0 || radius.is_nan() || radius <= 0.0 {
            return None;
        }
        let mut x = vec![0.0; nl * b];
        for j in 0..b {
            random::fill(
                &mut x[j * nl..(j + 1) * nl],
                self.seed ^ 0x5EED,
                self.row_offset,
                j as u64,
            );
        }
        // One solve: ‖B r‖_M/‖r‖_M ≥ |ν₁|·|⟨z₁, r⟩_M|/‖r‖_M ≈ |ν₁|/√n.
        let mut y = vec![0.0; nl];
        self.solve(&x[..nl], &mut y, 1);
        *products += 1;
        let grow = (self.m_dot(&y, &y) / self.m_dot(&x[..nl], &x[..nl])).sqrt();
        let signal = grow * radius * (self.n as f64).sqrt();
        if signal.is_nan() || signal < 0.1 {
            return None;
        }
        x[..nl].copy_from_slice(&y);
        let mut p = b;
        for _ in 0..STEPS {
            let (lam, v) = self.inverse_step(&x[..nl * p], p)?;
            *products += p as u64;
            p = lam.len();
            let near = lam
                .iter()
                .take_while(|l| (*l - self.sigma).abs() <= radius)
                .count();
            if near > 0 {
                let res = self.residuals(&v[..nl * near], &lam[..near]);
                if lam[..near]
                    .iter()
                    .zip(&res)
                    .all(|(&l, &r)| r <= test.allowed(l))
                {
                    return Some(NearPairs {
                        x: v[..nl * near].to_vec(),
                        lam: lam[..near].to_vec(),
                        res,
                    });
                }
            }
            x = v;
        }
        None
    }

    /// xᵀMy summed over the processes (xᵀy without M).
    fn m_dot(&self, x: &[f64], y: &[f64]) -> f64 {
        let my = self.times_m(y, 1);
        let mut s = [crate::dense::dot(x, &my)];
        self.comm.all_reduce(&mut s, ReduceOp::Sum);
        s[0]
    }

    fn times_m(&self, x: &[f64], p: usize) -> Vec<f64> {
        match self.m {
            Some(m) => {
                let mut y = vec![0.0; x.len()];
                m.apply_block(x, &mut y, p);
                y
            }
            None => x.to_vec(),
        }
    }

    /// y = (K − σM)⁻¹ M x for `p` columns.
    fn solve(&self, x: &[f64], y: &mut [f64], p: usize) {
        let mx = self.times_m(x, p);
        self.inv.apply_block(&mx, y, p);
    }

    /// One step of subspace inverse iteration and Rayleigh-Ritz on the pencil:
    /// Y = (K − σM)⁻¹MX, the pairs of (YᵀKY, YᵀMY), with the directions of Y
    /// that rounding leaves dependent (YᵀMY's eigenvalues below 1e3·ε of the
    /// largest) dropped: ascending |λ − σ|, M-orthonormal vectors. None for
    /// NaN/Inf. Collective.
    fn inverse_step(&self, x: &[f64], p: usize) -> Option<(Vec<f64>, Vec<f64>)> {
        let nl = self.inv.nrows();
        let mut y = vec![0.0; nl * p];
        self.solve(x, &mut y, p);
        let mut ky = vec![0.0; nl * p];
        self.k.apply_block(&y, &mut ky, p);
        let my = self.times_m(&y, p);
        let mut hg = cross(&y, p, &ky, p, nl, self.comm);
        hg.extend(cross(&y, p, &my, p, nl, self.comm));
        // Columns scaled to unit M-norm: the drop below is relative to them.
        let d: Vec<f64> = (0..p).map(|i| hg[p * p + i * p + i].sqrt()).collect();
        if d.iter().any(|&v| !(v > 0.0 && v.is_finite())) {
            return None;
        }
        for half in hg.chunks_mut(p * p) {
            for j in 0..p {
                for i in 0..p {
                    half[j * p + i] /= d[i] * d[j];
                }
            }
        }
        let (h, g) = hg.split_at(p * p);
        let (w, q) = crate::dense::sym_eig(g, p)?;
        let wmax = w.iter().fold(0.0f64, |a, &v| a.max(v));
        if !wmax.is_finite() || wmax <= 0.0 {
            return None;
        }
        // W: the kept directions scaled by w^(-1/2), so that WᵀGW = I.
        let kept: Vec<usize> = (0..p)
            .filter(|&l| w[l] > 1e3 * f64::EPSILON * wmax)
            .collect();
        let r = kept.len();
        let mut wm = vec![0.0; p * r];
        for (c, &l) in kept.iter().enumerate() {
            for i in 0..p {
                wm[c * p + i] = q[l * p + i] / w[l].sqrt();
            }
        }
        // C = WᵀHW (r×r)
        let mut hw = vec![0.0; p * r];
        crate::tall_skinny::gemm_nn(&mut hw, h, p, p, &wm, r, 1);
        let mut c = vec![0.0; r * r];
        for j in 0..r {
            for i in 0..r {
                c[j * r + i] = crate::dense::dot(&wm[i * p..(i + 1) * p], &hw[j * p..(j + 1) * p]);
            }
        }
        let (lam, u) = crate::dense::sym_eig(&c, r)?;
        let mut s = vec![0.0; p * r];
        crate::tall_skinny::gemm_nn(&mut s, &wm, p, r, &u, r, 1);
        for col in s.chunks_mut(p) {
            col.iter_mut().zip(&d).for_each(|(v, di)| *v /= di);
        }
        let mut order: Vec<usize> = (0..r).collect();
        order.sort_by(|&a, &b| {
            (lam[a] - self.sigma)
                .abs()
                .total_cmp(&(lam[b] - self.sigma).abs())
        });
        let mut v = vec![0.0; nl * r];
        for (jn, &j) in order.iter().enumerate() {
            crate::tall_skinny::gemm_nn(
                &mut v[jn * nl..(jn + 1) * nl],
                &y,
                nl,
                p,
                &s[j * p..(j + 1) * p],
                1,
                1,
            );
        }
        Some((order.iter().map(|&j| lam[j]).collect(), v))
    }

    /// ‖Kx − λMx‖/‖x‖ of each column. Collective.
    fn residuals(&self, x: &[f64], lam: &[f64]) -> Vec<f64> {
        let nl = self.inv.nrows();
        let p = lam.len();
        let mut kx = vec![0.0; nl * p];
        self.k.apply_block(x, &mut kx, p);
        let mx = self.times_m(x, p);
        let mut sums = vec![0.0; 2 * p];
        for j in 0..p {
            let c = j * nl..(j + 1) * nl;
            sums[2 * j] = kx[c.clone()]
                .iter()
                .zip(&mx[c.clone()])
                .map(|(a, b)| (a - lam[j] * b).powi(2))
                .sum();
            sums[2 * j + 1] = crate::dense::dot(&x[c.clone()], &x[c]);
        }
        self.comm.all_reduce(&mut sums, ReduceOp::Sum);
        (0..p)
            .map(|j| (sums[2 * j] / sums[2 * j + 1]).sqrt())
            .collect()
    }
}
