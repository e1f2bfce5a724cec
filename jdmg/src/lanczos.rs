//! Block thick-restart Lanczos: Krylov-Schur for a self-adjoint operator
//! (Stewart, "A Krylov-Schur algorithm for large eigenproblems", SIAM J.
//! Matrix Anal. Appl. 23, 2001, §3 and §5; Wu and Simon, "Thick-restart
//! Lanczos method for large symmetric eigenvalue problems", SIAM J. Matrix
//! Anal. Appl. 22, 2000), for the eigenvalues largest in magnitude of the
//! shift-and-invert operator C⁻¹M, C = K − σM, which is self-adjoint in the
//! M inner product (M = I for A x = λ x).
//!
//! The basis V is M-orthonormal with full reorthogonalization (classical
//! Gram-Schmidt twice, DGKS); its projection T = VᵀM C⁻¹M V is filled from
//! the orthogonalization coefficients, so every column costs one solve with
//! C and one product with M. When V is full, the Rayleigh-Ritz pairs of T
//! are ordered by magnitude; the first `keep` Ritz vectors and the last
//! block (the residual directions) start the next cycle, with T = diag(θ)
//! bordered by the residual couplings (the Krylov-Schur relation). A Ritz
//! pair (θ, y) has residual ‖C⁻¹M y − θ y‖_M = ‖R s_last‖, with R the last
//! block's coupling and s_last the last rows of its coefficient vector.
//!
//! A solve of C costs far more than the products with the basis, so a
//! Krylov space is worth more per solve than the Davidson steps of the
//! general loop: the slices of [`crate::slicing`] use it.

use std::time::Instant;

use lblib::{Comm, ReduceOp};
use precond::Operator;

use crate::dense::{
    gemm_nn, gemm_nn_in_place, gemm_sub, gemm_tn, sub_then_tn, sym_eig, IN_PLACE_ROWS,
};

/// What a Lanczos solve is asked for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LanczosParams {
    /// Pairs wanted.
    pub nev: usize,
    /// Columns added per expansion (one block solve with C).
    pub block: usize,
    /// Basis columns before a restart (without the residual block).
    pub ncv: usize,
    /// Relative test: ‖C⁻¹M y − θ y‖_M ≤ tol·|θ|.
    pub tol: f64,
    /// Products with C⁻¹ allowed.
    pub max_products: u64,
    pub seed: u64,
    pub threads: usize,
}

impl LanczosParams {
    /// The basis size for `nev` pairs with blocks of `block` columns on a
    /// problem of `n` rows: max(5·nev/2, nev + 16) + 2·block, at most n minus
    /// a block; None when n leaves no room for the Krylov space to grow past
    /// the wanted pairs (the caller uses another method). Between 2·nev and
    /// 3·nev the time hardly moves: fewer solves against more
    /// orthogonalization (lap3d:30 on [0, 0.8] in three slices: 1 040–1 112
    /// solves, 8.2–8.3 s).
    pub fn basis_for(nev: usize, block: usize, n: usize) -> Option<usize> {
        let ncv = (5 * nev / 2).max(nev + 16) + 2 * block;
        let ncv = ncv.min(n.saturating_sub(block));
        (ncv >= nev + 2 * block).then_some(ncv)
    }
}

/// The outcome: the `nev` wanted Ritz pairs (this process's rows of each
/// vector), B's residuals, and the counters.
#[derive(Debug, Clone, Default)]
pub(crate) struct LanczosOutcome {
    pub values: Vec<f64>,
    pub vectors: Vec<f64>,
    pub residuals: Vec<f64>,
    pub converged: Vec<bool>,
    pub products: u64,
    pub mass_products: u64,
    pub restarts: usize,
    pub global_sums: u64,
    pub solve_seconds: f64,
    pub ortho_seconds: f64,
    pub dense_seconds: f64,
}

/// The basis and its images under M (the same columns without M).
struct Basis<'a, C: ?Sized> {
    mass: Option<&'a dyn Operator>,
    comm: &'a C,
    nl: usize,
    row_offset: usize,
    v: Vec<f64>,
    mv: Vec<f64>,
    random_cols: u64,
    p: LanczosParams,
    out: LanczosOutcome,
}

impl<C: Comm + ?Sized> Basis<'_, C> {
    fn mv(&self) -> &[f64] {
        if self.mass.is_some() {
            &self.mv
        } else {
            &self.v
        }
    }

    fn sum(&mut self, buf: &mut [f64]) {
        self.comm.all_reduce(buf, ReduceOp::Sum);
        self.out.global_sums += 1;
    }

    /// M times column `col` of V into MV (nothing without M).
    fn mass_col(&mut self, col: usize) {
        if let Some(m) = self.mass {
            let nl = self.nl;
            m.apply_block(
                &self.v[col * nl..(col + 1) * nl],
                &mut self.mv[col * nl..(col + 1) * nl],
                1,
            );
            self.out.mass_products += 1;
        }
    }

    /// Orthogonalizes `w` (nl × k) against the first `j` columns of V twice
    /// (classical Gram-Schmidt, the first pass's update fused with the second
    /// pass's coefficients: three sweeps over V); the coefficients (j × k,
    /// column-major) summed over both passes.
    fn orthogonalize(&mut self, w: &mut [f64], j: usize, k: usize) -> Vec<f64> {
        let (nl, t) = (self.nl, self.p.threads);
        let mut h = vec![0.0; j * k];
        if j == 0 {
            return h;
        }
        gemm_tn(&mut h, &self.mv()[..nl * j], nl, j, w, k, t);
        self.sum(&mut h);
        let mut second = vec![0.0; j * k];
        let mv = if self.mass.is_some() {
            &self.mv
        } else {
            &self.v
        };
        sub_then_tn(
            w,
            &self.v[..nl * j],
            &mv[..nl * j],
            nl,
            j,
            &h,
            k,
            &mut second,
            t,
        );
        self.sum(&mut second);
        gemm_sub(w, &self.v[..nl * j], nl, j, &second, k, t);
        h.iter_mut().zip(&second).for_each(|(a, b)| *a += b);
        h
    }

    /// Makes column `col` of V (already orthogonal to the columns before
    /// `first`) M-orthonormal against columns `first..col` and of norm one;
    /// the coefficients against those columns and its M-norm before scaling.
    /// A column whose 2-norm fell below 1e-10 of `before` (its 2-norm before
    /// any orthogonalization) is replaced by a random direction orthogonal to
    /// all of V, with norm 0 (an invariant subspace was found).
    fn normalize_col(&mut self, col: usize, first: usize, before: f64) -> (Vec<f64>, f64) {
        let nl = self.nl;
        let k = col - first;
        let mut r = vec![0.0; k];
        if k > 0 {
            let t = self.p.threads;
            let mut pass = vec![0.0; k];
            // the column in place: V's earlier columns and their M images
            // borrowed beside it
            let (head, tail) = self.v.split_at_mut(col * nl);
            let w = &mut tail[..nl];
            let (v, mv) = match self.mass {
                Some(_) => (&head[first * nl..], &self.mv[first * nl..col * nl]),
                None => (&head[first * nl..], &head[first * nl..]),
            };
            for _ in 0..2 {
                gemm_tn(&mut pass, mv, nl, k, w, 1, t);
                self.comm.all_reduce(&mut pass, ReduceOp::Sum);
                gemm_sub(w, v, nl, k, &pass, 1, t);
                r.iter_mut().zip(&pass).for_each(|(a, b)| *a += b);
            }
            self.out.global_sums += 2;
        }
        self.mass_col(col);
        let [two, beta] = self.col_norms(col);
        if !(two > 1e-10 * before && beta > 0.0 && beta.is_finite()) {
            let id = self.random_cols;
            self.random_cols += 1;
            crate::random::fill(
                &mut self.v[col * nl..(col + 1) * nl],
                self.p.seed,
                self.row_offset,
                id,
            );
            let mut w = self.v[col * nl..(col + 1) * nl].to_vec();
            self.orthogonalize(&mut w, col, 1);
            self.v[col * nl..(col + 1) * nl].copy_from_slice(&w);
            self.mass_col(col);
            let [_, s] = self.col_norms(col);
            self.scale_col(col, 1.0 / s);
            return (r, 0.0);
        }
        self.scale_col(col, 1.0 / beta);
        (r, beta)
    }

    /// The 2-norm and the M-norm of column `col` (its M image computed).
    fn col_norms(&mut self, col: usize) -> [f64; 2] {
        let nl = self.nl;
        let c = col * nl..(col + 1) * nl;
        let x = &self.v[c.clone()];
        let mut s = [crate::dense::dot(x, x), crate::dense::dot(x, &self.mv()[c])];
        self.sum(&mut s);
        s.map(|v| v.max(0.0).sqrt())
    }

    /// The 2-norms of the k columns of `w` (one global sum).
    fn norms(&mut self, w: &[f64], k: usize) -> Vec<f64> {
        let nl = self.nl;
        let mut s: Vec<f64> = (0..k)
            .map(|c| crate::dense::dot(&w[c * nl..(c + 1) * nl], &w[c * nl..(c + 1) * nl]))
            .collect();
        self.sum(&mut s);
        s.iter().map(|v| v.max(0.0).sqrt()).collect()
    }

    fn scale_col(&mut self, col: usize, f: f64) {
        let nl = self.nl;
        self.v[col * nl..(col + 1) * nl]
            .iter_mut()
            .for_each(|x| *x *= f);
        if self.mass.is_some() {
            self.mv[col * nl..(col + 1) * nl]
                .iter_mut()
                .for_each(|x| *x *= f);
        }
    }
}

/// The `p.nev` wanted eigenpairs of C⁻¹M (`inv` applies C⁻¹, `mass` M;
/// both on this process's `inv.nrows()` rows starting at global row
/// `row_offset`), by block thick-restart Lanczos (module documentation),
/// from a random start block that does not depend on the number of
/// processes. Stops when the first `nev` Ritz pairs in wanted order pass the
/// relative test, or when `max_products` solves are spent (the pairs then
/// flagged one by one). Collective over `comm`.
pub(crate) fn solve<C: Comm + ?Sized>(
    inv: &dyn Operator,
    mass: Option<&dyn Operator>,
    comm: &C,
    row_offset: usize,
    p: LanczosParams,
) -> LanczosOutcome {
    let nl = inv.nrows();
    let (nev, pb) = (p.nev, p.block.max(1));
    let cap = p.ncv + pb;
    let mut b = Basis {
        mass,
        comm,
        nl,
        row_offset,
        v: vec![0.0; nl * cap],
        mv: if mass.is_some() {
            vec![0.0; nl * cap]
        } else {
            Vec::new()
        },
        random_cols: 0,
        p,
        out: LanczosOutcome::default(),
    };
    // T: cap × cap, column-major; its first m columns are the projection.
    let mut t = vec![0.0; cap * cap];
    // start block
    for c in 0..pb {
        let id = b.random_cols;
        b.random_cols += 1;
        crate::random::fill(&mut b.v[c * nl..(c + 1) * nl], p.seed, row_offset, id);
        let col = b.v[c * nl..(c + 1) * nl].to_vec();
        let before = b.norms(&col, 1)[0];
        b.normalize_col(c, 0, before);
    }
    let mut j = pb;
    let mut w = vec![0.0; nl * pb];
    let mut buf = vec![0.0; IN_PLACE_ROWS * cap];
    loop {
        // Expand the last block until the basis is full (or the budget spent).
        while j + pb <= cap && b.out.products + pb as u64 <= p.max_products {
            let q = j - pb;
            let t0 = Instant::now();
            inv.apply_block(&b.mv()[q * nl..j * nl], &mut w, pb);
            b.out.solve_seconds += t0.elapsed().as_secs_f64();
            b.out.products += pb as u64;
            let t1 = Instant::now();
            let before = b.norms(&w, pb);
            let h = b.orthogonalize(&mut w, j, pb);
            b.v[j * nl..(j + pb) * nl].copy_from_slice(&w);
            for c in 0..pb {
                let (r, beta) = b.normalize_col(j + c, j, before[c]);
                // T[j.., q + c]: the new block's coupling R (upper triangular)
                for (i, ri) in r.iter().enumerate() {
                    t[(q + c) * cap + j + i] = *ri;
                }
                t[(q + c) * cap + j + c] = beta;
            }
            for c in 0..pb {
                for i in 0..j {
                    t[(q + c) * cap + i] = h[c * j + i];
                }
            }
            b.out.ortho_seconds += t1.elapsed().as_secs_f64();
            j += pb;
        }
        let m = j - pb;
        if m == 0 {
            return finish(b, &[], &[], 0, &[], 0);
        }
        // Rayleigh-Ritz on the symmetric part of T[..m, ..m].
        let t2 = Instant::now();
        let mut tm = vec![0.0; m * m];
        for c in 0..m {
            for i in 0..m {
                tm[c * m + i] = 0.5 * (t[c * cap + i] + t[i * cap + c]);
            }
        }
        let Some((theta, s)) = sym_eig(&tm, m) else {
            b.out.dense_seconds += t2.elapsed().as_secs_f64();
            return finish(b, &[], &[], 0, &[], 0);
        };
        // wanted order: largest in magnitude first
        let mut order: Vec<usize> = (0..m).collect();
        order.sort_by(|&x, &y| theta[y].abs().total_cmp(&theta[x].abs()));
        // residual of Ritz pair i: ‖R s_i[m − pb..m]‖, R = T[m..m+pb, m−pb..m]
        let res: Vec<f64> = order
            .iter()
            .map(|&i| {
                let si = &s[i * m..(i + 1) * m];
                (0..pb)
                    .map(|r| {
                        (0..pb)
                            .map(|c| t[(m - pb + c) * cap + m + r] * si[m - pb + c])
                            .sum::<f64>()
                            .powi(2)
                    })
                    .sum::<f64>()
                    .sqrt()
            })
            .collect();
        let ok = |k: usize| res[k] <= p.tol * theta[order[k]].abs();
        let nconv = (0..m).take_while(|&k| ok(k)).count();
        b.out.dense_seconds += t2.elapsed().as_secs_f64();
        let spent = b.out.products + pb as u64 > p.max_products;
        if nconv >= nev || spent {
            let flags: Vec<bool> = (0..nev.min(m)).map(ok).collect();
            return finish(b, &theta, &s, m, &order, m).with_flags(&res, &flags);
        }
        // Restart: the first `keep` Ritz vectors and the residual block.
        let keep = ((nconv + m) / 2).max(nev).min(m - pb);
        let t3 = Instant::now();
        let mut y = vec![0.0; m * keep];
        for (k, &i) in order[..keep].iter().enumerate() {
            y[k * m..(k + 1) * m].copy_from_slice(&s[i * m..(i + 1) * m]);
        }
        gemm_nn_in_place(&mut b.v, nl, m, &y, keep, &mut buf, p.threads);
        b.v.copy_within(m * nl..(m + pb) * nl, keep * nl);
        if mass.is_some() {
            gemm_nn_in_place(&mut b.mv, nl, m, &y, keep, &mut buf, p.threads);
            b.mv.copy_within(m * nl..(m + pb) * nl, keep * nl);
        }
        // T = [diag(θ) Bᵀ; B ·], B = R·S_last (pb × keep)
        let mut next = vec![0.0; cap * cap];
        for (k, &i) in order[..keep].iter().enumerate() {
            next[k * cap + k] = theta[i];
            for r in 0..pb {
                let v: f64 = (0..pb)
                    .map(|c| t[(m - pb + c) * cap + m + r] * s[i * m + m - pb + c])
                    .sum();
                next[k * cap + keep + r] = v;
                next[(keep + r) * cap + k] = v;
            }
        }
        t = next;
        j = keep + pb;
        b.out.restarts += 1;
        b.out.ortho_seconds += t3.elapsed().as_secs_f64();
    }
}

/// The first `nev` Ritz pairs in `order` (of the m×m eigenvectors `s`) as
/// vectors V s.
fn finish<C: Comm + ?Sized>(
    b: Basis<'_, C>,
    theta: &[f64],
    s: &[f64],
    m: usize,
    order: &[usize],
    avail: usize,
) -> LanczosOutcome {
    let nev = b.p.nev.min(avail);
    let nl = b.nl;
    let mut out = b.out;
    let mut y = vec![0.0; m * nev];
    for (k, &i) in order.iter().take(nev).enumerate() {
        y[k * m..(k + 1) * m].copy_from_slice(&s[i * m..(i + 1) * m]);
    }
    out.vectors = vec![0.0; nl * nev];
    if nev > 0 {
        gemm_nn(
            &mut out.vectors,
            &b.v[..nl * m],
            nl,
            m,
            &y,
            nev,
            b.p.threads,
        );
    }
    out.values = order.iter().take(nev).map(|&i| theta[i]).collect();
    out
}

impl LanczosOutcome {
    fn with_flags(mut self, res: &[f64], flags: &[bool]) -> Self {
        let k = self.values.len();
        self.residuals = res[..k].to_vec();
        self.converged = flags[..k].to_vec();
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lblib::SelfComm;

    /// diag(d) as an operator (its inverse's role is played by d itself).
    struct Diag(Vec<f64>);
    impl Operator for Diag {
        fn nrows(&self) -> usize {
            self.0.len()
        }
        fn apply_block(&self, x: &[f64], y: &mut [f64], k: usize) {
            let n = self.0.len();
            for j in 0..k {
                for i in 0..n {
                    y[j * n + i] = self.0[i] * x[j * n + i];
                }
            }
        }
    }

    fn params(nev: usize, block: usize, n: usize) -> LanczosParams {
        LanczosParams {
            nev,
            block,
            ncv: LanczosParams::basis_for(nev, block, n).unwrap(),
            tol: 1e-10,
            max_products: 100_000,
            seed: 1,
            threads: 1,
        }
    }

    #[test]
    fn finds_the_largest_of_a_diagonal_operator_with_multiple_values() {
        // 1/(i + 1) with the largest three values doubled: 1, 1, 0.5, 0.5, …
        let n = 400;
        let mut d: Vec<f64> = (0..n).map(|i| 1.0 / (i / 2 + 1) as f64).collect();
        d.reverse();
        for block in [1, 4] {
            let out = solve(
                &Diag(d.clone()),
                None,
                &SelfComm::new(),
                0,
                params(10, block, n),
            );
            let want = [
                1.0,
                1.0,
                0.5,
                0.5,
                1.0 / 3.0,
                1.0 / 3.0,
                0.25,
                0.25,
                0.2,
                0.2,
            ];
            assert_eq!(out.values.len(), 10);
            for (k, w) in want.iter().enumerate() {
                assert!(
                    (out.values[k] - w).abs() < 1e-10,
                    "block {block}: {:?}",
                    out.values
                );
                assert!(out.converged[k]);
                // the vector's residual recomputed
                let x = &out.vectors[k * n..(k + 1) * n];
                let r: f64 = (0..n).map(|i| (d[i] * x[i] - w * x[i]).powi(2)).sum();
                assert!(r.sqrt() < 1e-9, "residual {r:e}");
            }
            // orthonormal
            for a in 0..10 {
                for c in 0..10 {
                    let g: f64 = (0..n)
                        .map(|i| out.vectors[a * n + i] * out.vectors[c * n + i])
                        .sum();
                    let e = if a == c { 1.0 } else { 0.0 };
                    assert!((g - e).abs() < 1e-10);
                }
            }
        }
    }

    #[test]
    fn largest_magnitude_takes_both_ends_and_m_orthonormal_vectors() {
        // C⁻¹M with C⁻¹ = diag(c) and M = diag(m): eigenvalues c_i·m_i.
        let n = 300;
        let c: Vec<f64> = (0..n).map(|i| (i as f64 - 150.5) / 100.0).collect();
        let mdiag: Vec<f64> = (0..n).map(|i| 1.0 + (i % 7) as f64).collect();
        let m = Diag(mdiag.clone());
        let out = solve(
            &Diag(c.clone()),
            Some(&m),
            &SelfComm::new(),
            0,
            params(6, 2, n),
        );
        let mut all: Vec<f64> = (0..n).map(|i| c[i] * mdiag[i]).collect();
        all.sort_by(|a, b| b.abs().total_cmp(&a.abs()));
        for k in 0..6 {
            assert!(
                (out.values[k] - all[k]).abs() < 1e-9,
                "{:?} vs {:?}",
                out.values,
                &all[..6]
            );
        }
        for a in 0..6 {
            for b2 in 0..6 {
                let g: f64 = (0..n)
                    .map(|i| out.vectors[a * n + i] * mdiag[i] * out.vectors[b2 * n + i])
                    .sum();
                let e = if a == b2 { 1.0 } else { 0.0 };
                assert!((g - e).abs() < 1e-10, "({a},{b2}): {g}");
            }
        }
    }
}
