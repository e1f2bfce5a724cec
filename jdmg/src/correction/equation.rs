//! The JD correction equation (§3, eq. (1) of McCombs et al.):
//! (I − QQᵀ)(A − θI)(I − QQᵀ) t = −r with Q = [locked vectors, x], solved
//! approximately by right-preconditioned BiCGSTAB. The preconditioner uses the
//! oblique projection of Sleijpen and van der Vorst for the current Ritz vector x,
//! z = K⁻¹r − K⁻¹x (xᵀK⁻¹r)/(xᵀK⁻¹x), so that a K close to A − θI still yields a
//! useful correction (the orthogonal projection of K⁻¹r would cancel it), and an
//! orthogonal projection against the locked vectors.
//!
//! With a mass matrix M (K x = λ M x, Q M-orthonormal) the equation is
//! (I − MQQᵀ)(K − θM)(I − QQᵀM) t = −r: the operator's output is projected
//! with I − MQQᵀ (coefficients Qᵀy), the preconditioner's with I − QQᵀM
//! (coefficients (MQ)ᵀz), and the oblique projection uses Mx in place of x:
//! z = K⁻¹r − K⁻¹Mx ((Mx)ᵀK⁻¹r)/((Mx)ᵀK⁻¹Mx), which keeps the preconditioner
//! symmetric (JDQMR) and z M-orthogonal to x. Without a preconditioner the
//! same projection runs with K = I (the Krylov vectors must be M-orthogonal
//! to Q, which r is not).

use std::cell::{Cell, RefCell};

use lblib::{Comm, ReduceOp};
use precond::{Operator, Preconditioner, Scalar};

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
    gemm_tn(coef, q, n, nq, v, 1, 1);
    comm.all_reduce(coef, ReduceOp::Sum);
    if nq == 1 {
        crate::dense::axpy(-coef[0], &q[..n], v);
    } else {
        // one pass over v and Q (not one per column)
        crate::dense::gemm_sub(v, q, n, nq, coef, 1, 1);
    }
}

/// `v ← v − S (Dᵀv)` for `d` (the coefficient columns) and `s` (the
/// subtracted ones), both n×nq: one global sum. With `d = s = Q`,
/// [`project_out`].
pub(crate) fn project_out_with<C: Comm + ?Sized>(
    d: &[f64],
    s: &[f64],
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
    gemm_tn(coef, d, n, nq, v, 1, 1);
    comm.all_reduce(coef, ReduceOp::Sum);
    crate::dense::gemm_sub(v, s, n, nq, coef, 1, 1);
}

/// The mass matrix of a generalized correction equation: M (scaled like the
/// problem's), M·X_locked (the same columns as `locked`) and M·x.
pub(crate) struct MassCtx<'x, T: Scalar = f64> {
    pub op: &'x dyn Operator<T>,
    pub locked: &'x [T],
    pub bx: &'x [T],
}

impl<T: Scalar> Clone for MassCtx<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: Scalar> Copy for MassCtx<'_, T> {}

/// Whether an inner solution can serve as the correction: at least one step taken,
/// finite and not zero (otherwise the caller takes a Davidson step K⁻¹r).
pub(crate) fn usable_correction(steps: usize, sol: &[f64]) -> bool {
    steps > 0 && sol.iter().all(|v| v.is_finite()) && sol.iter().any(|&v| v != 0.0)
}

/// (I − QQᵀ)(A − σI) restricted to vectors already orthogonal to Q; with a
/// mass matrix, (I − MQQᵀ)(K − σM) on vectors M-orthogonal to Q.
pub(crate) struct ProjectedOperator<'a, A: ?Sized, C: ?Sized> {
    pub a: &'a A,
    pub comm: &'a C,
    pub q: &'a [f64],
    pub nq: usize,
    pub n: usize,
    pub shift: f64,
    pub coef: RefCell<Vec<f64>>,
    pub global_sums: Cell<u64>,
    /// M and M·Q (generalized problems), with a scratch column for Mx.
    pub mass: Option<(&'a dyn Operator, &'a [f64])>,
    pub scratch: RefCell<Vec<f64>>,
    pub mass_matvecs: Cell<u64>,
}

impl<A: Operator + ?Sized, C: Comm + ?Sized> Operator for ProjectedOperator<'_, A, C> {
    fn nrows(&self) -> usize {
        self.n
    }
    fn apply_block(&self, x: &[f64], y: &mut [f64], k: usize) {
        self.a.apply_block(x, y, k);
        let mut coef = self.coef.borrow_mut();
        if let Some((m, bq)) = self.mass {
            let mut mx = self.scratch.borrow_mut();
            for j in 0..k {
                let (xj, yj) = (
                    &x[j * self.n..(j + 1) * self.n],
                    &mut y[j * self.n..(j + 1) * self.n],
                );
                m.apply(xj, &mut mx[..self.n]);
                yj.iter_mut()
                    .zip(mx.iter())
                    .for_each(|(yi, mi)| *yi -= self.shift * mi);
                project_out_with(self.q, bq, self.n, self.nq, yj, &mut coef, self.comm);
            }
            self.mass_matvecs.set(self.mass_matvecs.get() + k as u64);
            if self.nq > 0 {
                self.global_sums.set(self.global_sums.get() + k as u64);
            }
            return;
        }
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
pub(crate) enum Inner<'a, T: Scalar = f64> {
    /// K = I.
    Identity,
    /// K = D − σI (Jacobi, refreshed per Ritz value).
    Diagonal { diag: &'a [f64], shift: f64 },
    /// K = diag(K) − σ·diag(M) (Jacobi of a generalized problem).
    MassDiagonal {
        diag: &'a [f64],
        mdiag: &'a [f64],
        shift: f64,
    },
    /// A preconditioner told the shift of the equation
    /// ([`Preconditioner::apply_block_shifted`]; `shift` in the units of the
    /// operator it was given).
    Shifted {
        pc: &'a (dyn Preconditioner<T> + Send + Sync),
        shift: f64,
    },
}

impl<T: Scalar> Clone for Inner<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: Scalar> Copy for Inner<'_, T> {}

/// `z = (D − σI)⁻¹ r` with the entries of D − σI kept at least 1e-12·|D| away
/// from zero (Jacobi of the correction equation, refreshed per Ritz value).
pub(crate) fn shifted_jacobi(diag: &[f64], shift: f64, r: &[f64], z: &mut [f64]) {
    for ((zi, ri), di) in z.iter_mut().zip(r).zip(diag.iter()) {
        let mut d = di - shift;
        let floor = 1e-12 * di.abs().max(1e-300);
        if d.abs() < floor {
            d = if d < 0.0 { -floor } else { floor };
        }
        *zi = ri / d;
    }
}

/// `z = (D − σ·D_M)⁻¹ r`, entries kept away from zero as in [`shifted_jacobi`].
pub(crate) fn shifted_jacobi_mass(
    diag: &[f64],
    mdiag: &[f64],
    shift: f64,
    r: &[f64],
    z: &mut [f64],
) {
    for (((zi, ri), di), mi) in z.iter_mut().zip(r).zip(diag).zip(mdiag) {
        let mut d = di - shift * mi;
        let floor = 1e-12 * di.abs().max(1e-300);
        if d.abs() < floor {
            d = if d < 0.0 { -floor } else { floor };
        }
        *zi = ri / d;
    }
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
    /// Seconds in K⁻¹.
    pub seconds: Cell<f64>,
    /// M·Q (generalized problems): the projection is I − QQᵀM, with Mx in the
    /// oblique part; the identity K is projected too.
    pub bq: Option<&'a [f64]>,
}

impl<C: Comm + ?Sized> ProjectedPreconditioner<'_, C> {
    fn apply_inner(&self, r: &[f64], z: &mut [f64]) {
        let t0 = std::time::Instant::now();
        self.apply_inner_untimed(r, z);
        self.seconds
            .set(self.seconds.get() + t0.elapsed().as_secs_f64());
    }

    fn apply_inner_untimed(&self, r: &[f64], z: &mut [f64]) {
        match &self.inner {
            Inner::Identity => z.copy_from_slice(r),
            Inner::Diagonal { diag, shift } => shifted_jacobi(diag, *shift, r, z),
            Inner::MassDiagonal { diag, mdiag, shift } => {
                shifted_jacobi_mass(diag, mdiag, *shift, r, z)
            }
            Inner::Shifted { pc, shift } => pc.apply_block_shifted(r, z, 1, &[*shift]),
        }
    }

    /// Computes K⁻¹x and xᵀK⁻¹x for the oblique projection (one global sum).
    /// Falls back to the orthogonal projection when xᵀK⁻¹x vanishes.
    pub fn prepare(&mut self) {
        if (matches!(self.inner, Inner::Identity) && self.bq.is_none()) || self.nq == 0 {
            return;
        }
        let n = self.n;
        // x, or Mx with a mass matrix.
        let x = &self.bq.unwrap_or(self.q)[(self.nq - 1) * n..self.nq * n];
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
    fn is_identity(&self) -> bool {
        matches!(self.inner, Inner::Identity) && self.bq.is_none()
    }
    fn apply_block(&self, r: &[f64], z: &mut [f64], k: usize) {
        let n = self.n;
        if matches!(self.inner, Inner::Identity) && self.bq.is_none() {
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
            // One global sum: Qᵀz ((MQ)ᵀz with a mass matrix).
            let c = &mut coef[..self.nq];
            gemm_tn(c, self.bq.unwrap_or(self.q), n, self.nq, zj, 1, 1);
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

/// Krylov work space of the inner solver.
enum Krylov {
    Bicgstab(Box<precond::krylov::Bicgstab>),
    Qmrs(crate::correction::jdqmr::JdQmr),
}

/// One correction equation: the Ritz vector x with residual r (fine or group
/// layout), the shift σ of A − σI, and JDQMR's data.
pub(crate) struct Equation<'x> {
    pub x: &'x [f64],
    pub r: &'x [f64],
    pub shift: f64,
    /// JDQMR's setup (`InnerSolver::Qmrs` only).
    pub qmr: Option<crate::correction::jdqmr::QmrSetup>,
}

/// What one correction-equation solve did.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct EquationOutcome {
    pub steps: usize,
    pub matvecs: u64,
    pub precond_applies: u64,
    /// Seconds in the preconditioner.
    pub precond_seconds: f64,
    pub global_sums: u64,
    /// JDQMR's reason to stop.
    pub qmr_stop: Option<crate::correction::jdqmr::QmrStop>,
    /// Products with the mass matrix (generalized problems).
    pub mass_matvecs: u64,
}

/// The one correction-equation solver of the serial, fine-grain and multigrain
/// paths (McCombs et al. §3, step (8)): (I − QQᵀ)(A − σI)(I − QQᵀ) t = −r with
/// Q = [locked vectors, x], by right-preconditioned BiCGSTAB (the paper's) or
/// JDQMR's symmetric QMR, with the oblique projection of the preconditioner; a
/// Davidson step t = (I − QQᵀ)K⁻¹(−r) when no inner step is usable. Its buffers are
/// sized once per solve: corrections do not allocate.
pub(crate) struct CorrectionSolver {
    n: usize,
    krylov: Krylov,
    /// [X_locked, x]; the first `q_locked` columns are valid.
    q: Vec<f64>,
    q_locked: usize,
    /// M·Q with a mass matrix (same layout and caching as `q`).
    bq: Vec<f64>,
    bq_locked: usize,
    rhs: Vec<f64>,
    coef: Vec<f64>,
}

impl CorrectionSolver {
    /// Work space for vectors of `n` local rows and up to `max_locked` locked vectors.
    pub fn new(n: usize, solver: crate::params::InnerSolver, max_locked: usize) -> Self {
        let krylov = match solver {
            crate::params::InnerSolver::Qmrs => {
                Krylov::Qmrs(crate::correction::jdqmr::JdQmr::new(n))
            }
            crate::params::InnerSolver::Bicgstab | crate::params::InnerSolver::Auto => {
                Krylov::Bicgstab(Box::new(precond::krylov::Bicgstab::new(n)))
            }
        };
        Self {
            n,
            krylov,
            q: Vec::with_capacity(n * (max_locked + 1)),
            q_locked: 0,
            bq: Vec::new(),
            bq_locked: 0,
            rhs: Vec::with_capacity(n),
            coef: Vec::with_capacity(max_locked + 1),
        }
    }

    /// Solves `eq` into `out` (n rows), for K x = λ M x when `mass` is given
    /// (see the module documentation). `locked` holds `nl` locked vectors (the
    /// same `locked` slice grows between calls: only new columns are copied).
    /// `go_on(steps, last_residual, initial_residual)` is asked before every
    /// BiCGSTAB step and decides how long the solve runs (step cap, 2^−iter,
    /// time budget or a balanced section); JDQMR follows its own dynamic rules.
    #[allow(clippy::too_many_arguments)]
    pub fn solve_general<A: Operator + ?Sized, C: Comm + ?Sized>(
        &mut self,
        a: &A,
        mass: Option<MassCtx<'_>>,
        comm: &C,
        locked: &[f64],
        nl: usize,
        inner: Inner<'_>,
        eq: &Equation<'_>,
        go_on: &mut dyn FnMut(usize, f64, f64) -> bool,
        out: &mut [f64],
    ) -> EquationOutcome {
        let n = self.n;
        if let Some(mc) = mass {
            if self.bq_locked > nl || self.bq.len() < n * self.bq_locked {
                self.bq_locked = 0;
            }
            self.bq.truncate(n * self.bq_locked);
            self.bq
                .extend_from_slice(&mc.locked[n * self.bq_locked..n * nl]);
            self.bq_locked = nl;
            self.bq.extend_from_slice(mc.bx);
        }
        if self.q_locked > nl || self.q.len() < n * self.q_locked {
            self.q_locked = 0;
        }
        self.q.truncate(n * self.q_locked);
        self.q.extend_from_slice(&locked[n * self.q_locked..n * nl]);
        self.q_locked = nl;
        self.q.extend_from_slice(eq.x);
        let nq = nl + 1;
        self.coef.clear();
        self.coef.resize(nq, 0.0);
        let identity = matches!(inner, Inner::Identity);
        let bq = mass.map(|_| &self.bq[..]);
        let op = ProjectedOperator {
            a,
            comm,
            q: &self.q,
            nq,
            n,
            shift: eq.shift,
            coef: RefCell::new(vec![0.0; nq]),
            global_sums: Cell::new(0),
            mass: mass.map(|mc| (mc.op, &self.bq[..])),
            scratch: RefCell::new(vec![0.0; if mass.is_some() { n } else { 0 }]),
            mass_matvecs: Cell::new(0),
        };
        let mut pc = ProjectedPreconditioner {
            inner,
            comm,
            q: &self.q,
            nq,
            n,
            kx: Vec::new(),
            mu: 0.0,
            coef: RefCell::new(vec![0.0; nq]),
            global_sums: Cell::new(0),
            seconds: Cell::new(0.0),
            bq,
        };
        pc.prepare();
        let mut o = EquationOutcome {
            precond_applies: u64::from(!identity),
            global_sums: 1,
            ..EquationOutcome::default()
        };
        self.rhs.clear();
        self.rhs.extend(eq.r.iter().map(|v| -v));
        match bq {
            // I − MQQᵀ
            Some(bq) => project_out_with(&self.q, bq, n, nq, &mut self.rhs, &mut self.coef, comm),
            None => project_out(&self.q, n, nq, &mut self.rhs, &mut self.coef, comm),
        }
        let ok = match &mut self.krylov {
            Krylov::Bicgstab(solver) => {
                let r0 = solver.start(&op, comm, &self.rhs, None);
                let mut rn = r0;
                if r0 > 0.0 {
                    // A breakdown ends the solve; the solver keeps its best iterate.
                    while go_on(o.steps, rn, r0) {
                        match solver.step(&op, &pc, comm) {
                            Ok(r) => {
                                rn = r;
                                o.steps += 1;
                            }
                            Err(_) => break,
                        }
                    }
                }
                // `start` resets the solver's counters: they cover this equation only.
                let st = solver.stats();
                o.matvecs += st.matvecs as u64;
                o.precond_applies += if identity {
                    0
                } else {
                    st.precond_applies as u64
                };
                o.global_sums += st.global_sums as u64;
                let sol = solver.solution();
                let ok = usable_correction(o.steps, sol);
                if ok {
                    out.copy_from_slice(sol);
                }
                ok
            }
            Krylov::Qmrs(solver) => {
                // QMRs solves for s with right-hand side r; the correction is −s.
                self.rhs.iter_mut().for_each(|v| *v = -*v);
                let mut rn = [crate::dense::dot(&self.rhs, &self.rhs)];
                comm.all_reduce(&mut rn, ReduceOp::Sum);
                o.global_sums += 1;
                let setup = eq.qmr.as_ref().expect("JDQMR equations carry their setup");
                let q = solver.solve(&op, &pc, comm, &self.rhs, rn[0].sqrt(), setup);
                o.steps = q.steps;
                o.matvecs += q.matvecs;
                o.precond_applies += if identity { 0 } else { q.precond_applies };
                o.global_sums += q.global_sums;
                o.qmr_stop = Some(q.stop);
                let sol = solver.solution();
                let ok = usable_correction(q.steps, sol);
                if ok {
                    out.iter_mut().zip(sol).for_each(|(t, s)| *t = -s);
                } else {
                    self.rhs.iter_mut().for_each(|v| *v = -*v);
                }
                ok
            }
        };
        if !ok {
            // Davidson step: t = (I − QQᵀ) K⁻¹ (−r).
            pc.apply(&self.rhs, out);
            if !identity {
                o.precond_applies += 1;
            }
        }
        o.global_sums += op.global_sums.get() + pc.global_sums.get();
        o.mass_matvecs = op.mass_matvecs.get();
        o.precond_seconds = pc.seconds.get();
        o
    }
}

/// The paper's fixed-mode inner stopping rule (McCombs et al. §3): stop when the
/// residual fell below `rel`·r₀ (adaptive, 2^−iter) or `floor`, or after `maxits`
/// steps; `Fixed` runs `maxits` steps.
pub(crate) fn steps_rule(
    inner: crate::params::InnerStop,
    maxits: usize,
    rel: f64,
    floor: f64,
) -> impl FnMut(usize, f64, f64) -> bool {
    move |steps, rn, r0| {
        if steps >= maxits || rn == 0.0 {
            return false;
        }
        match inner {
            crate::params::InnerStop::Fixed => true,
            _ => steps == 0 || (rn > rel * r0 && rn > floor),
        }
    }
}

/// The time-budget rule (`InnerStop::Time`): iterate until `seconds` passed since
/// the first call, at most `maxits` steps; rank 0's clock decides (one broadcast
/// per step, counted in `sums`) so that all ranks of `comm` step together.
pub(crate) fn time_rule<'c, C: Comm + ?Sized>(
    comm: &'c C,
    seconds: f64,
    maxits: usize,
    sums: &'c Cell<u64>,
) -> impl FnMut(usize, f64, f64) -> bool + 'c {
    let mut start = None;
    move |steps, rn, _r0| {
        let t0 = *start.get_or_insert_with(|| comm.wtime());
        if steps >= maxits || rn == 0.0 {
            return false;
        }
        if steps == 0 {
            return true;
        }
        let mut flag = [f64::from(u8::from(comm.wtime() - t0 < seconds))];
        comm.broadcast(&mut flag, 0);
        sums.set(sums.get() + 1);
        flag[0] > 0.0
    }
}
