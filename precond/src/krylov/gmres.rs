//! Restarted, right-preconditioned flexible GMRES(m) (Saad & Schultz 1986; Saad 1993
//! FGMRES), step-wise.

use lbcomm::comm::Comm;

use super::{
    axpy, dot, global_sum, inherent_stepwise, Breakdown, BreakdownKind, KrylovResult, KrylovStats,
    Stepwise, StopCriteria,
};
use crate::operator::{Operator, Preconditioner};

/// Step-wise restarted GMRES(m) with right preconditioning in the flexible form: the
/// preconditioned directions `z_j = M^{-1} v_j` are stored, so `M` may even change from
/// step to step (e.g. an inner solve with a time budget).
///
/// One step is one Arnoldi step: 1 operator and 1 preconditioner application and
/// **2 global sums** (classical Gram-Schmidt with one reorthogonalization; the second
/// pass fuses `‖w‖²`, the new norm following by Pythagoras). When a cycle of `m` steps
/// is complete, the next step first restarts from the current iterate with the true
/// residual (1 extra matvec and sum). The returned norm is the least-squares
/// (**recurrence**) residual `|g_{j+1}|` of the Givens-rotated Hessenberg system, which
/// is non-increasing. The iterate `x = x_0 + Z y` is updated at every step (O(n·j)
/// extra flops), so [`Gmres::solution`] is always current; it is also the best iterate.
/// A lucky breakdown (`h_{j+1,j} = 0`) is not an error: the residual estimate is then 0
/// and the next step restarts. Only NaN/∞ gives a [`Breakdown`] (kind `NonFinite`),
/// which further `step` calls repeat until `restart` or `start`.
#[derive(Debug, Clone)]
pub struct Gmres {
    n: usize,
    m: usize,
    b: Vec<f64>,
    x0: Vec<f64>,
    x: Vec<f64>,
    /// Arnoldi basis, `m + 1` columns of length `n`.
    v: Vec<f64>,
    /// Preconditioned directions, `m` columns.
    z: Vec<f64>,
    /// Rotated Hessenberg matrix, column-major `(m + 1) x m`.
    h: Vec<f64>,
    cs: Vec<f64>,
    sn: Vec<f64>,
    g: Vec<f64>,
    y: Vec<f64>,
    sums: Vec<f64>,
    j: usize,
    lucky: bool,
    res: f64,
    b_norm: f64,
    started: bool,
    broken: Option<Breakdown>,
    stats: KrylovStats,
}

impl Gmres {
    /// Allocates all scratch for vectors of local length `n` and restart length `m`
    /// (`2m + 4` vectors of length `n`).
    ///
    /// # Panics
    /// If `m == 0`.
    pub fn new(n: usize, m: usize) -> Self {
        assert!(m > 0, "Gmres::new: restart length must be positive");
        Self {
            n,
            m,
            b: vec![0.0; n],
            x0: vec![0.0; n],
            x: vec![0.0; n],
            v: vec![0.0; n * (m + 1)],
            z: vec![0.0; n * m],
            h: vec![0.0; (m + 1) * m],
            cs: vec![0.0; m],
            sn: vec![0.0; m],
            g: vec![0.0; m + 1],
            y: vec![0.0; m],
            sums: vec![0.0; m + 2],
            j: 0,
            lucky: false,
            res: 0.0,
            b_norm: 0.0,
            started: false,
            broken: None,
            stats: KrylovStats::default(),
        }
    }

    /// Restart length `m`.
    pub fn restart_length(&self) -> usize {
        self.m
    }

    /// New cycle from the current `x`: `v_0 = r / ‖r‖`, `g = ‖r‖ e_1`.
    fn new_cycle<A: Operator + ?Sized, C: Comm + ?Sized>(
        &mut self,
        a: &A,
        comm: &C,
        zero_x: bool,
        with_b: bool,
    ) -> f64 {
        self.broken = None;
        let n = self.n;
        self.x0.copy_from_slice(&self.x);
        let r = &mut self.v[..n];
        if zero_x {
            r.copy_from_slice(&self.b);
        } else {
            a.apply(&self.x, r);
            self.stats.matvecs += 1;
            for (ri, bi) in r.iter_mut().zip(&self.b) {
                *ri = bi - *ri;
            }
        }
        let mut s = [dot(r, r), if with_b { dot(&self.b, &self.b) } else { 0.0 }];
        global_sum(comm, &mut s[..if with_b { 2 } else { 1 }], &mut self.stats);
        if with_b {
            self.b_norm = s[1].sqrt();
        }
        let beta = s[0].sqrt();
        if beta > 0.0 && beta.is_finite() {
            let inv = 1.0 / beta;
            r.iter_mut().for_each(|v| *v *= inv);
        }
        self.g.fill(0.0);
        self.g[0] = beta;
        self.j = 0;
        self.lucky = false;
        self.res = beta;
        beta
    }
}

impl Gmres {
    /// One iteration (see [`Stepwise::step`]); `step` wraps it with the breakdown latch.
    fn step_inner<A: Operator + ?Sized, M: Preconditioner + ?Sized, C: Comm + ?Sized>(
        &mut self,
        a: &A,
        m: &M,
        comm: &C,
    ) -> Result<f64, Breakdown> {
        if self.res == 0.0 && !self.lucky {
            return Ok(0.0);
        }
        self.stats.steps += 1;
        if self.j == self.m || self.lucky {
            self.new_cycle(a, comm, false, false);
            if self.res == 0.0 {
                return Ok(0.0);
            }
        }
        if !self.res.is_finite() {
            return Err(Breakdown {
                kind: BreakdownKind::NonFinite,
                residual_norm: self.res,
            });
        }
        let (n, j) = (self.n, self.j);
        // z_j = M^{-1} v_j ; w = A z_j stored as v_{j+1}.
        {
            let (vs, w_rest) = self.v.split_at_mut((j + 1) * n);
            let zj = &mut self.z[j * n..(j + 1) * n];
            m.apply(&vs[j * n..], zj);
            a.apply(zj, &mut w_rest[..n]);
        }
        self.stats.precond_applies += 1;
        self.stats.matvecs += 1;
        let (vs, w_rest) = self.v.split_at_mut((j + 1) * n);
        let w = &mut w_rest[..n];
        // First Gram-Schmidt pass.
        for (i, vi) in vs.chunks_exact(n).enumerate() {
            self.sums[i] = dot(vi, w);
        }
        global_sum(comm, &mut self.sums[..j + 1], &mut self.stats);
        let hcol = &mut self.h[j * (self.m + 1)..(j + 1) * (self.m + 1)];
        for (i, vi) in vs.chunks_exact(n).enumerate() {
            hcol[i] = self.sums[i];
            axpy(-self.sums[i], vi, w);
        }
        // Second pass, with ‖w‖² fused.
        for (i, vi) in vs.chunks_exact(n).enumerate() {
            self.sums[i] = dot(vi, w);
        }
        self.sums[j + 1] = dot(w, w);
        global_sum(comm, &mut self.sums[..j + 2], &mut self.stats);
        let mut corr2 = 0.0;
        for (i, vi) in vs.chunks_exact(n).enumerate() {
            let c = self.sums[i];
            hcol[i] += c;
            corr2 += c * c;
            axpy(-c, vi, w);
        }
        let hnext = (self.sums[j + 1] - corr2).max(0.0).sqrt();
        if !hnext.is_finite() || hcol[..=j].iter().any(|v| !v.is_finite()) {
            return Err(Breakdown {
                kind: BreakdownKind::NonFinite,
                residual_norm: self.res,
            });
        }
        hcol[j + 1] = hnext;
        // Scale; a zero (or negligible) new norm is a lucky breakdown.
        let hnorm = hcol[..=j + 1].iter().fold(0.0f64, |s, v| s.max(v.abs()));
        if hnext > f64::EPSILON * hnorm {
            let inv = 1.0 / hnext;
            w.iter_mut().for_each(|v| *v *= inv);
        } else {
            self.lucky = true;
        }
        // Apply previous rotations, then a new one.
        for i in 0..j {
            let (c, s) = (self.cs[i], self.sn[i]);
            let (a0, a1) = (hcol[i], hcol[i + 1]);
            hcol[i] = c * a0 + s * a1;
            hcol[i + 1] = -s * a0 + c * a1;
        }
        let (a0, a1) = (hcol[j], hcol[j + 1]);
        let d = a0.hypot(a1);
        let (c, s) = if d == 0.0 {
            (1.0, 0.0)
        } else {
            (a0 / d, a1 / d)
        };
        self.cs[j] = c;
        self.sn[j] = s;
        hcol[j] = d;
        hcol[j + 1] = 0.0;
        self.g[j + 1] = -s * self.g[j];
        self.g[j] *= c;
        self.res = if self.lucky { 0.0 } else { self.g[j + 1].abs() };
        // y = R^{-1} g, x = x0 + Z y.
        let ld = self.m + 1;
        for i in (0..=j).rev() {
            let mut t = self.g[i];
            for q in i + 1..=j {
                t -= self.h[q * ld + i] * self.y[q];
            }
            let d = self.h[i * ld + i];
            self.y[i] = if d != 0.0 { t / d } else { 0.0 };
        }
        self.x.copy_from_slice(&self.x0);
        for (q, zq) in self.z.chunks_exact(n).take(j + 1).enumerate() {
            axpy(self.y[q], zq, &mut self.x);
        }
        self.j = j + 1;
        if self.y[..=j].iter().any(|v| !v.is_finite()) {
            return Err(Breakdown {
                kind: BreakdownKind::NonFinite,
                residual_norm: self.res,
            });
        }
        Ok(self.res)
    }
}

impl Stepwise for Gmres {
    fn len(&self) -> usize {
        self.n
    }

    fn start<A: Operator + ?Sized, C: Comm + ?Sized>(
        &mut self,
        a: &A,
        comm: &C,
        b: &[f64],
        x0: Option<&[f64]>,
    ) -> f64 {
        assert_eq!(b.len(), self.n, "Gmres::start: b has wrong length");
        self.stats = KrylovStats::default();
        self.b.copy_from_slice(b);
        match x0 {
            Some(x) => {
                assert_eq!(x.len(), self.n, "Gmres::start: x0 has wrong length");
                self.x.copy_from_slice(x);
            }
            None => self.x.fill(0.0),
        }
        self.started = true;
        self.new_cycle(a, comm, x0.is_none(), true)
    }

    fn step<A: Operator + ?Sized, M: Preconditioner + ?Sized, C: Comm + ?Sized>(
        &mut self,
        a: &A,
        m: &M,
        comm: &C,
    ) -> Result<f64, Breakdown> {
        assert!(self.started, "Gmres::step called before start");
        // After a breakdown the recurrences are invalid until `restart`/`start`.
        if let Some(e) = self.broken {
            return Err(e);
        }
        let r = self.step_inner(a, m, comm);
        if let Err(e) = r {
            self.broken = Some(e);
        }
        r
    }

    fn restart<A: Operator + ?Sized, C: Comm + ?Sized>(&mut self, a: &A, comm: &C) -> f64 {
        assert!(self.started, "Gmres::restart called before start");
        self.new_cycle(a, comm, false, false)
    }

    fn residual_norm(&self) -> f64 {
        self.res
    }

    fn b_norm(&self) -> f64 {
        self.b_norm
    }

    fn solution(&self) -> &[f64] {
        &self.x
    }

    fn true_residual_norm<A: Operator + ?Sized, C: Comm + ?Sized>(
        &mut self,
        a: &A,
        comm: &C,
    ) -> f64 {
        // Scratch: z_{m-1} is written only by the m-th step of a cycle, so it is free
        // while j < m; once the cycle is full (j == m) the next step restarts and the
        // last basis vector v_m is no longer needed.
        let n = self.n;
        let scratch: &mut [f64] = if self.j < self.m {
            &mut self.z[(self.m - 1) * n..]
        } else {
            &mut self.v[self.m * n..]
        };
        a.apply(&self.x, scratch);
        self.stats.matvecs += 1;
        for (si, bi) in scratch.iter_mut().zip(&self.b) {
            *si = bi - *si;
        }
        let mut s = [dot(scratch, scratch)];
        global_sum(comm, &mut s, &mut self.stats);
        s[0].sqrt()
    }

    fn stats(&self) -> KrylovStats {
        self.stats
    }
}

inherent_stepwise!(Gmres);
