//! The JD correction equation (§3, eq. (1) of `seeds/003`):
//! (I − QQᵀ)(A − θI)(I − QQᵀ) t = −r with Q = [locked vectors, x], solved
//! approximately by right-preconditioned BiCGSTAB. The preconditioner uses the
//! oblique projection of Sleijpen and van der Vorst for the current Ritz vector x,
//! z = K⁻¹r − K⁻¹x (xᵀK⁻¹r)/(xᵀK⁻¹x), so that a K close to A − θI still yields a
//! useful correction (the orthogonal projection of K⁻¹r would cancel it), and an
//! orthogonal projection against the locked vectors.

use std::cell::{Cell, RefCell};

use lblib::{Comm, ReduceOp};
use precond::{Operator, Preconditioner};

use crate::dense::gemm_tn;

/// `v ← (I − QQᵀ) v` for `q` (n×nq, orthonormal columns): one global sum.
pub(crate) fn project_out<C: Comm + ?Sized>(
    q: &[f64],
    n: usize,
    nq: usize,
    v: &mut [f64],
    coef: &mut [f64],
    comm: &C,
) {
    if nq == 0 {
        return;
    }
    let coef = &mut coef[..nq];
    gemm_tn(coef, q, n, nq, v, 1, faer::Par::Seq);
    comm.all_reduce(coef, ReduceOp::Sum);
    for (j, &c) in coef.iter().enumerate() {
        let qj = &q[j * n..(j + 1) * n];
        v.iter_mut().zip(qj).for_each(|(vi, qi)| *vi -= c * qi);
    }
}

/// Whether an inner solution can serve as the correction: at least one step taken,
/// finite and not zero (otherwise the caller takes a Davidson step K⁻¹r).
pub(crate) fn usable_correction(steps: usize, sol: &[f64]) -> bool {
    steps > 0 && sol.iter().all(|v| v.is_finite()) && sol.iter().any(|&v| v != 0.0)
}

/// (I − QQᵀ)(A − σI) restricted to vectors already orthogonal to Q.
pub(crate) struct ProjectedOperator<'a, A: ?Sized, C: ?Sized> {
    pub a: &'a A,
    pub comm: &'a C,
    pub q: &'a [f64],
    pub nq: usize,
    pub n: usize,
    pub shift: f64,
    pub coef: RefCell<Vec<f64>>,
    pub global_sums: Cell<u64>,
}

impl<A: Operator + ?Sized, C: Comm + ?Sized> Operator for ProjectedOperator<'_, A, C> {
    fn nrows(&self) -> usize {
        self.n
    }
    fn apply_block(&self, x: &[f64], y: &mut [f64], k: usize) {
        self.a.apply_block(x, y, k);
        let mut coef = self.coef.borrow_mut();
        for j in 0..k {
            let (xj, yj) = (
                &x[j * self.n..(j + 1) * self.n],
                &mut y[j * self.n..(j + 1) * self.n],
            );
            yj.iter_mut()
                .zip(xj)
                .for_each(|(yi, xi)| *yi -= self.shift * xi);
            project_out(self.q, self.n, self.nq, yj, &mut coef, self.comm);
        }
        if self.nq > 0 {
            self.global_sums.set(self.global_sums.get() + k as u64);
        }
    }
}

/// The preconditioner inside the projected correction equation.
pub(crate) enum Inner<'a> {
    /// K = I.
    Identity,
    /// K = D − σI (Jacobi, refreshed per Ritz value).
    Diagonal { diag: &'a [f64], shift: f64 },
    /// A prebuilt preconditioner of A − σ₀I.
    Built(&'a (dyn Preconditioner + Send + Sync)),
}

/// The projected preconditioner: oblique projection for x (last column of Q),
/// orthogonal for the locked vectors (the other columns).
pub(crate) struct ProjectedPreconditioner<'a, C: ?Sized> {
    pub inner: Inner<'a>,
    pub comm: &'a C,
    pub q: &'a [f64],
    pub nq: usize,
    pub n: usize,
    /// K⁻¹x and xᵀK⁻¹x (set by [`ProjectedPreconditioner::prepare`]).
    pub kx: Vec<f64>,
    pub mu: f64,
    pub coef: RefCell<Vec<f64>>,
    pub global_sums: Cell<u64>,
}

impl<C: Comm + ?Sized> ProjectedPreconditioner<'_, C> {
    fn apply_inner(&self, r: &[f64], z: &mut [f64]) {
        match &self.inner {
            Inner::Identity => z.copy_from_slice(r),
            Inner::Diagonal { diag, shift } => {
                for ((zi, ri), di) in z.iter_mut().zip(r).zip(diag.iter()) {
                    let mut d = di - shift;
                    let floor = 1e-12 * di.abs().max(1e-300);
                    if d.abs() < floor {
                        d = if d < 0.0 { -floor } else { floor };
                    }
                    *zi = ri / d;
                }
            }
            Inner::Built(m) => m.apply(r, z),
        }
    }

    /// Computes K⁻¹x and xᵀK⁻¹x for the oblique projection (one global sum).
    /// Falls back to the orthogonal projection when xᵀK⁻¹x vanishes.
    pub fn prepare(&mut self) {
        if matches!(self.inner, Inner::Identity) || self.nq == 0 {
            return;
        }
        let n = self.n;
        let x = &self.q[(self.nq - 1) * n..self.nq * n];
        let mut kx = vec![0.0; n];
        self.apply_inner(x, &mut kx);
        let mut mu = [crate::dense::dot(x, &kx)];
        self.comm.all_reduce(&mut mu, ReduceOp::Sum);
        self.global_sums.set(self.global_sums.get() + 1);
        if mu[0].is_finite() && mu[0].abs() > 0.0 {
            self.kx = kx;
            self.mu = mu[0];
        }
    }
}

impl<C: Comm + ?Sized> Preconditioner for ProjectedPreconditioner<'_, C> {
    fn nrows(&self) -> usize {
        self.n
    }
    fn apply_block(&self, r: &[f64], z: &mut [f64], k: usize) {
        let n = self.n;
        if matches!(self.inner, Inner::Identity) {
            // r is already orthogonal to Q inside BiCGSTAB: nothing to project.
            z.copy_from_slice(r);
            return;
        }
        let mut coef = self.coef.borrow_mut();
        for j in 0..k {
            let (rj, zj) = (&r[j * n..(j + 1) * n], &mut z[j * n..(j + 1) * n]);
            self.apply_inner(rj, zj);
            if self.nq == 0 {
                continue;
            }
            // One global sum: Qᵀz.
            let c = &mut coef[..self.nq];
            gemm_tn(c, self.q, n, self.nq, zj, 1, faer::Par::Seq);
            self.comm.all_reduce(c, ReduceOp::Sum);
            let oblique = !self.kx.is_empty();
            let last = self.nq - 1;
            if oblique {
                let alpha = c[last] / self.mu;
                zj.iter_mut()
                    .zip(&self.kx)
                    .for_each(|(zi, ki)| *zi -= alpha * ki);
            }
            let north = if oblique { last } else { self.nq };
            for (i, &ci) in c[..north].iter().enumerate() {
                let qi = &self.q[i * n..(i + 1) * n];
                zj.iter_mut().zip(qi).for_each(|(zi, q)| *zi -= ci * q);
            }
        }
        if self.nq > 0 {
            self.global_sums.set(self.global_sums.get() + k as u64);
        }
    }
}
