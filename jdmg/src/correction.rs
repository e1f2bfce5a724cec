//! The JD correction equation (§3, eq. (1) of `seeds/003`):
//! (I − QQᵀ)(A − θI)(I − QQᵀ) t = −r with Q = [locked vectors, x], solved
//! approximately by right-preconditioned BiCGSTAB with the projected
//! preconditioner (I − QQᵀ)K⁻¹.

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

/// (I − QQᵀ) K⁻¹.
pub(crate) struct ProjectedPreconditioner<'a, C: ?Sized> {
    pub inner: Inner<'a>,
    pub comm: &'a C,
    pub q: &'a [f64],
    pub nq: usize,
    pub n: usize,
    pub coef: RefCell<Vec<f64>>,
    pub global_sums: Cell<u64>,
}

impl<C: Comm + ?Sized> Preconditioner for ProjectedPreconditioner<'_, C> {
    fn nrows(&self) -> usize {
        self.n
    }
    fn apply_block(&self, r: &[f64], z: &mut [f64], k: usize) {
        match &self.inner {
            Inner::Identity => {
                // r is already orthogonal to Q inside BiCGSTAB: nothing to project.
                z.copy_from_slice(r);
                return;
            }
            Inner::Diagonal { diag, shift } => {
                for j in 0..k {
                    let (rj, zj) = (
                        &r[j * self.n..(j + 1) * self.n],
                        &mut z[j * self.n..(j + 1) * self.n],
                    );
                    for ((zi, ri), di) in zj.iter_mut().zip(rj).zip(diag.iter()) {
                        let mut d = di - shift;
                        if d.abs() < 1e-12 * di.abs().max(1e-300) {
                            d = if d < 0.0 { -1e-12 } else { 1e-12 } * di.abs().max(1e-300);
                        }
                        *zi = ri / d;
                    }
                }
            }
            Inner::Built(m) => m.apply_block(r, z, k),
        }
        let mut coef = self.coef.borrow_mut();
        for j in 0..k {
            project_out(
                self.q,
                self.n,
                self.nq,
                &mut z[j * self.n..(j + 1) * self.n],
                &mut coef,
                self.comm,
            );
        }
        if self.nq > 0 {
            self.global_sums.set(self.global_sums.get() + k as u64);
        }
    }
}
