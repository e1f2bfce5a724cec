//! Observer events and the assembly of (partial) solutions.

use super::*;

impl<A: Operator + ?Sized, C: Comm + ?Sized> State<'_, '_, '_, A, C> {
    /// Hands the observer this iteration's event; true when it asked to stop.
    pub(super) fn emit(
        &mut self,
        observer: &mut Option<Observer<'_>>,
        ritz: &[(f64, f64)],
        steps: &[usize],
    ) -> bool {
        if let Some(obs) = observer.as_mut() {
            let ev = IterationEvent {
                outer_iteration: self.stats.outer_iterations,
                matvecs: self.stats.matvecs,
                basis_size: self.m,
                nconverged: self.nl(),
                ritz_values: ritz.iter().map(|r| r.0 / self.ev_scale()).collect(),
                residual_norms: ritz.iter().map(|r| r.1 / self.op.scale()).collect(),
                inner_steps: steps.to_vec(),
                elapsed_seconds: self.start.elapsed().as_secs_f64(),
            };
            return obs(&ev).is_break();
        }
        false
    }

    /// Assembles the solution from the locked pairs (plus `extra` estimates),
    /// ordered by the target.
    pub(super) fn finish(&mut self, extra: &[(f64, f64, bool)]) -> Solution {
        let n = self.n;
        let mut items: Vec<(f64, f64, bool, usize)> = (0..self.nl())
            .map(|j| (self.lam[j], self.res[j], true, j))
            .collect();
        let base = self.nl();
        for (i, e) in extra.iter().enumerate() {
            items.push((e.0, e.1, e.2, base + i));
        }
        items.sort_by(|a, b| self.key(a.0).total_cmp(&self.key(b.0)));
        items.truncate(self.prm.problem.nev);
        // The vectors are taken out of `xl` and put in order in place (no n×nev
        // copy at the peak of the solve); the state is not used afterwards.
        let mut vecs = std::mem::take(&mut self.xl);
        vecs.drain(..self.ndefl * n);
        let order: Vec<usize> = items.iter().map(|it| it.3).collect();
        permute_columns(&mut vecs, n, &order);
        // M-orthonormal in the scaled M_s = s_M·M: √s_M·X is M-orthonormal.
        if let Some(f) = self
            .mass
            .as_ref()
            .map(|ms| ms.op.scale().sqrt())
            .filter(|&f| f != 1.0)
        {
            vecs.iter_mut().for_each(|v| *v *= f);
        }
        let s = self.op.scale();
        let ev = self.ev_scale();
        Solution {
            outcome: Outcome::Converged,
            wanted: self.prm.problem.nev,
            eigenvalues: items.iter().map(|i| i.0 / ev).collect(),
            residual_norms: items.iter().map(|i| i.1 / s).collect(),
            converged: items.iter().map(|i| i.2).collect(),
            eigenvectors: vecs,
            n_local: n,
            row_offset: self.pb.row_offset,
            multigrain: None,
            stats: self.stats.clone(),
        }
    }

    /// The solution of a solve that ends early with `outcome`
    /// ([`Outcome::BudgetSpent`] or [`Outcome::Stopped`]): [`State::partial`].
    pub(super) fn ended(&mut self, outcome: Outcome) -> Solution {
        Solution {
            outcome,
            ..self.partial()
        }
    }

    /// `InvalidParams` for an operator that is not symmetric: with the whole
    /// space in the (repaired) basis, a Ritz pair's true residual is still
    /// `worst` (scaled), above √ε‖A‖.
    pub(super) fn not_symmetric(&self, worst: f64) -> JdError {
        let s = self.op.scale();
        JdError::invalid(
            "operator",
            format!(
                "the matrix is not symmetric: with the whole space in the basis, a Ritz \
                 pair's true residual ‖Ax − θx‖ is {:.3e} (‖A‖ ≈ {:.3e}); jdmg solves \
                 symmetric problems only",
                worst / s,
                self.anorm / s
            ),
        )
    }

    /// The locked pairs plus the best current Ritz estimates of the rest
    /// (`converged == false`, with their residual norms from W = AV).
    /// Collective (one global sum).
    fn partial(&mut self) -> Solution {
        let threads = self.prm.execution.threads;
        let n = self.n;
        let m = self.m;
        let need = self.prm.problem.nev.saturating_sub(self.nl()).min(m);
        let mut extra = Vec::new();
        if need > 0 {
            let hc = self.h_compact();
            if let Some((th, yv)) = sym_eig(&hc, m) {
                let ord = self.order(&th);
                let mut xs = vec![0.0; n * need];
                let mut ys = vec![0.0; m * need];
                for (q, &i) in ord.iter().take(need).enumerate() {
                    ys[q * m..(q + 1) * m].copy_from_slice(&yv[i * m..(i + 1) * m]);
                }
                gemm_nn(&mut xs, &self.v, n, m, &ys, need, threads);
                // Their residuals ‖W y − θ V y‖ from W = AV (no matvec; W is
                // refreshed when it drifts), one global sum.
                // With a mass matrix: ‖W y − θ (MV) y‖/‖V y‖ (see `mass`).
                let mass = self.has_mass();
                let mut rs = vec![0.0; n * need];
                gemm_nn(&mut rs, &self.w, n, m, &ys, need, threads);
                let bxs = match &self.mass {
                    Some(ms) => {
                        let mut b = vec![0.0; n * need];
                        gemm_nn(&mut b, &ms.bv, n, m, &ys, need, threads);
                        b
                    }
                    None => Vec::new(),
                };
                let mut nrm = vec![0.0; need];
                let mut x2 = vec![0.0; if mass { need } else { 0 }];
                for (q, &i) in ord.iter().take(need).enumerate() {
                    let cols = q * n..(q + 1) * n;
                    let x = if mass {
                        &bxs[cols.clone()]
                    } else {
                        &xs[cols.clone()]
                    };
                    let r = &mut rs[cols.clone()];
                    r.iter_mut().zip(x).for_each(|(r, x)| *r -= th[i] * x);
                    nrm[q] = crate::dense::dot(r, r);
                    if mass {
                        x2[q] = crate::dense::dot(&xs[cols.clone()], &xs[cols]);
                    }
                }
                if self.residual_deflation() > 0 {
                    self.deflate_residuals(&mut rs, &mut nrm);
                }
                nrm.extend_from_slice(&x2);
                self.allreduce(&mut nrm);
                for q in 0..x2.len() {
                    nrm[q] /= nrm[need + q].max(f64::MIN_POSITIVE);
                }
                self.xl.extend_from_slice(&xs);
                for (q, &i) in ord.iter().take(need).enumerate() {
                    extra.push((th[i], nrm[q].max(0.0).sqrt(), false));
                }
            }
        }
        self.finish(&extra)
    }
}

/// Puts column `order[q]` of the column-major `cols` (n rows) at position q and
/// truncates to `order.len()` columns, in place: the cycles of the permutation
/// are followed with one column of scratch. `order` holds distinct columns.
fn permute_columns(cols: &mut Vec<f64>, n: usize, order: &[usize]) {
    let total = cols.len().checked_div(n).unwrap_or(0);
    // Complete `order` to a permutation of all columns: destination q takes
    // column perm[q]; the columns not asked for fill the tail.
    let mut used = vec![false; total];
    order.iter().for_each(|&c| used[c] = true);
    let mut perm = order.to_vec();
    perm.extend((0..total).filter(|&c| !used[c]));
    let mut done = vec![false; total];
    let mut tmp = vec![0.0; n];
    for start in 0..total {
        if done[start] || perm[start] == start {
            done[start] = true;
            continue;
        }
        tmp.copy_from_slice(&cols[start * n..(start + 1) * n]);
        let mut dst = start;
        loop {
            done[dst] = true;
            let src = perm[dst];
            if src == start {
                cols[dst * n..(dst + 1) * n].copy_from_slice(&tmp);
                break;
            }
            cols.copy_within(src * n..(src + 1) * n, dst * n);
            dst = src;
        }
    }
    cols.truncate(order.len() * n);
}

#[cfg(test)]
mod tests {
    use super::permute_columns;

    #[test]
    fn columns_are_put_in_the_asked_order_in_place() {
        let n = 3;
        for order in [
            vec![2, 0, 4],
            vec![0, 1],
            vec![4, 3, 2, 1, 0],
            vec![3],
            vec![],
        ] {
            let mut cols: Vec<f64> = (0..5 * n).map(|i| i as f64).collect();
            permute_columns(&mut cols, n, &order);
            let want: Vec<f64> = order
                .iter()
                .flat_map(|&c| (0..n).map(move |i| (c * n + i) as f64))
                .collect();
            assert_eq!(cols, want, "order {order:?}");
        }
    }
}
