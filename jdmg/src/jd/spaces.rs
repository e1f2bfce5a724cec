//! Start vectors and deflation vectors (PRIMME's initial guesses and
//! `numOrthoConst`; SLEPc's `EPSSetInitialSpace` and `EPSSetDeflationSpace`).
//!
//! The deflation vectors Y are orthonormalized once, at the start of the solve,
//! and stored in front of the locked vectors: every place that projects the
//! locked vectors out (the orthogonalization of new blocks, the correction
//! equations' projector, the verification probe) projects Y out with them, so
//! the basis, and every returned eigenvector, stays orthogonal to Y. The start
//! vectors X0 enter the basis before the first Rayleigh-Ritz, orthogonalized
//! against Y like any new block.

use super::*;

/// Start vectors X0 and deflation vectors Y of a [`Problem`]: this process's
/// rows, column-major (`n_local × p`); empty slices for none. Set them with
/// [`Problem::with_initial`] and [`Problem::with_deflation`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Spaces<'a, T: Scalar = f64> {
    /// Start vectors: the first fill the first block (random vectors complete a
    /// block of fewer), the rest enter the basis before the first Rayleigh-Ritz
    /// (up to the basis size less one block). Ignored when resuming from a
    /// checkpoint.
    pub initial: &'a [T],
    /// Deflation vectors: the solve returns the wanted eigenpairs of A restricted
    /// to the orthogonal complement of their span (for eigenvectors of A already
    /// known, the next eigenpairs). Need not be orthonormal; dependent columns are
    /// dropped ([`Stats::deflation_vectors`] counts those kept).
    pub deflation: &'a [T],
}

/// Columns of a block of `len` values of `rows` rows (`None` when it does not
/// divide, or when `rows == 0` and it holds values).
fn columns(len: usize, rows: usize) -> Option<usize> {
    match (len, rows) {
        (0, _) => Some(0),
        (_, 0) => None,
        _ if len.is_multiple_of(rows) => Some(len / rows),
        _ => None,
    }
}

/// Checks a block of start or deflation vectors of the local rows.
fn check_block(what: &'static str, v: &[f64], rows: usize) -> Result<(), JdError> {
    if columns(v.len(), rows).is_none() {
        return Err(JdError::invalid(
            what,
            format!(
                "{} values are not a whole number of vectors of the {rows} local rows",
                v.len()
            ),
        ));
    }
    if let Some(i) = v.iter().position(|x| !x.is_finite()) {
        return Err(JdError::invalid(
            what,
            format!(
                "entry ({}, {}) is NaN or Inf",
                i % rows.max(1),
                i / rows.max(1)
            ),
        ));
    }
    Ok(())
}

/// The rows `range` of a global block `v` of vectors of `n` rows
/// (column-major), for a process of a distributed solve.
///
/// # Errors
/// `InvalidParams` (naming `what`) when `v` is not a whole number of vectors of
/// n rows.
pub(crate) fn local_rows(
    what: &'static str,
    v: &[f64],
    n: usize,
    range: std::ops::Range<usize>,
) -> Result<Vec<f64>, JdError> {
    let Some(p) = columns(v.len(), n) else {
        return Err(JdError::invalid(
            what,
            format!(
                "{} values are not a whole number of vectors of n = {n} rows",
                v.len()
            ),
        ));
    };
    let mut out = Vec::with_capacity(range.len() * p);
    for j in 0..p {
        out.extend_from_slice(&v[j * n + range.start..j * n + range.end]);
    }
    Ok(out)
}

impl<'a, A: Operator + ?Sized, C: Comm + ?Sized> Problem<'a, A, C> {
    /// Adds start vectors X0 (this process's rows, column-major; see
    /// [`Spaces::initial`]). Every process passes its rows of the same number of
    /// vectors.
    ///
    /// # Errors
    /// `InvalidParams` when the length is not a multiple of the local row count
    /// or an entry is NaN/Inf.
    pub fn with_initial(mut self, x0: &'a [f64]) -> Result<Self, JdError> {
        check_block("initial", x0, self.a.nrows())?;
        self.spaces.initial = x0;
        Ok(self)
    }

    /// Adds deflation vectors Y (this process's rows, column-major; see
    /// [`Spaces::deflation`]): the results are orthogonal to them.
    ///
    /// # Errors
    /// As [`Problem::with_initial`].
    pub fn with_deflation(mut self, y: &'a [f64]) -> Result<Self, JdError> {
        check_block("deflation", y, self.a.nrows())?;
        self.spaces.deflation = y;
        Ok(self)
    }
}

/// Column counts of the start and deflation vectors, agreed over the processes
/// (one global max when there are several): `[initial, deflation]`.
///
/// # Errors
/// `InvalidParams` (on every process) when processes holding rows disagree.
pub(super) fn agreed_columns<A: Operator + ?Sized, C: Comm + ?Sized>(
    pb: &Problem<'_, A, C>,
) -> Result<[usize; 2], JdError> {
    let rows = pb.a.nrows();
    let sp = pb.spaces;
    let local = [sp.initial.len(), sp.deflation.len()].map(|l| columns(l, rows));
    if local.iter().any(Option::is_none) {
        return Err(JdError::invalid(
            "spaces",
            "start or deflation vectors are not whole vectors of the local rows",
        ));
    }
    let c = local.map(|c| c.unwrap_or(0) as f64);
    if pb.comm.size() < 2 {
        return Ok(c.map(|v| v as usize));
    }
    // A process without rows has no say (its slices are empty whatever the count).
    let none = f64::NEG_INFINITY;
    let mut buf = if rows > 0 {
        [c[0], -c[0], c[1], -c[1]]
    } else {
        [none; 4]
    };
    pb.comm.all_reduce(&mut buf, ReduceOp::Max);
    for (i, what) in [(0, "initial"), (2, "deflation")] {
        if buf[i] != -buf[i + 1] {
            return Err(JdError::invalid(
                what,
                format!(
                    "the processes disagree on the number of vectors: between {} and {}",
                    -buf[i + 1],
                    buf[i]
                ),
            ));
        }
    }
    Ok([buf[0].max(0.0) as usize, buf[2].max(0.0) as usize])
}

impl<A: Operator + ?Sized, C: Comm + ?Sized> State<'_, '_, '_, A, C> {
    /// Columns of `xl` projected out of every new vector: the deflation vectors,
    /// then the locked ones.
    pub(super) fn nproj(&self) -> usize {
        self.ndefl + self.nl()
    }

    /// The locked vectors (after the deflation vectors in `xl`).
    pub(super) fn locked_vectors(&self) -> &[f64] {
        &self.xl[self.ndefl * self.n..]
    }

    /// Orthonormalizes the `q` deflation vectors of the problem into the front of
    /// `xl` (CGS2, one global sum per pass; dependent columns dropped).
    /// Collective.
    ///
    /// # Errors
    /// `InvalidParams` when nev plus the independent deflation vectors exceed n.
    pub(super) fn install_deflation(&mut self, q: usize) -> Result<(), JdError> {
        let threads = self.prm.execution.threads;
        let n = self.n;
        let y = self.pb.spaces.deflation;
        let mass = self.has_mass();
        self.xl.clear();
        if let Some(ms) = self.mass.as_mut() {
            ms.bxl.clear();
        }
        let mut col = vec![0.0; n];
        // M·col with a mass matrix (M-orthonormalization), else unused.
        let mut bcol = vec![0.0; if mass { n } else { 0 }];
        let mut kept = 0;
        for j in 0..q {
            if n > 0 {
                col.copy_from_slice(&y[j * n..(j + 1) * n]);
            }
            if mass {
                self.mass_apply(&col, &mut bcol, 1);
            }
            let d =
                |col: &[f64], bcol: &[f64]| crate::dense::dot(col, if mass { bcol } else { col });
            let mut nn = [d(&col, &bcol), crate::dense::dot(&col, &col)];
            self.allreduce(&mut nn);
            if mass && (nn[0] <= 0.0 || nn[0].is_nan()) && nn[1] > 0.0 {
                return Err(JdError::MassNotPositiveDefinite {
                    what: format!("deflation vector {} y has yᵀMy = {:e}", j + 1, nn[0]),
                });
            }
            let norm0 = nn[0].max(0.0).sqrt();
            for _ in 0..2 {
                let mut c = vec![0.0; kept + 1];
                gemm_tn(
                    &mut c[..kept],
                    self.dual_locked(),
                    n,
                    kept,
                    &col,
                    1,
                    threads,
                );
                self.allreduce(&mut c);
                gemm_sub(&mut col, &self.xl, n, kept, &c[..kept], 1, threads);
                if let Some(ms) = &self.mass {
                    gemm_sub(&mut bcol, &ms.bxl, n, kept, &c[..kept], 1, threads);
                }
            }
            let mut nn = [d(&col, &bcol)];
            self.allreduce(&mut nn);
            let nrm = nn[0].max(0.0).sqrt();
            if !(nrm.is_finite() && nrm > 1e-10 * norm0 && nrm > 0.0) {
                continue;
            }
            col.iter_mut().for_each(|v| *v /= nrm);
            self.xl.extend_from_slice(&col);
            if let Some(ms) = self.mass.as_mut() {
                bcol.iter_mut().for_each(|v| *v /= nrm);
                ms.bxl.extend_from_slice(&bcol);
            }
            kept += 1;
        }
        self.ndefl = kept;
        self.stats.deflation_vectors = kept;
        if self.prm.problem.nev + kept > self.pb.n_global {
            return Err(JdError::invalid(
                "nev",
                format!(
                    "nev = {} plus {kept} deflation vectors exceed the dimension n = {}",
                    self.prm.problem.nev, self.pb.n_global
                ),
            ));
        }
        Ok(())
    }

    /// The vectors residuals are projected against: the deflation vectors,
    /// and the locked ones with [`Problem::deflate_locked`] (both at the
    /// front of `xl`).
    pub(super) fn residual_deflation(&self) -> usize {
        if self.pb.deflate_locked {
            self.ndefl + self.nl()
        } else {
            self.ndefl
        }
    }

    /// Removes the deflation vectors' components from the residuals `r`
    /// (`nrm.len()` columns) and puts their local squared norms in `nrm`: the
    /// residuals of the operator restricted to the complement of Y,
    /// (I − YYᵀ)(Ax − θx), which are Ax − θx when Y spans an invariant subspace
    /// (with a mass matrix, (I − MYYᵀ)(Kx − θMx)).
    /// One global sum.
    pub(super) fn deflate_residuals(&mut self, r: &mut [f64], nrm: &mut [f64]) {
        let threads = self.prm.execution.threads;
        let (n, q, p) = (self.n, self.residual_deflation(), nrm.len());
        let mut c = vec![0.0; q * p];
        gemm_tn(&mut c, &self.xl, n, q, &r[..n * p], p, threads);
        self.allreduce(&mut c);
        gemm_sub(&mut r[..n * p], self.dual_locked(), n, q, &c, p, threads);
        for (j, v) in nrm.iter_mut().enumerate() {
            let col = &r[j * n..(j + 1) * n];
            *v = crate::dense::dot(col, col);
        }
    }

    /// The first block of a fresh solve (returns its size, in `t`): the start
    /// vectors when given (all but the last block of them enter the basis now,
    /// up to the basis size less one block; random vectors complete a last block
    /// of fewer than k), else k random vectors.
    ///
    /// # Errors
    /// As [`State::extend_basis`].
    pub(super) fn start_block(&mut self) -> Result<usize, JdError> {
        let (n, k) = (self.n, self.sz.k);
        let p = self.ninit;
        let x0 = self.pb.spaces.initial;
        let mut done = 0;
        while p - done > k && self.m + 2 * k <= self.sz.max_basis {
            if n > 0 {
                self.t[..n * k].copy_from_slice(&x0[done * n..(done + k) * n]);
            }
            let kept = self.orthogonalize_block(k);
            self.check_mass()?;
            if kept > 0 {
                self.extend_basis(kept)?;
            }
            done += k;
        }
        let last = (p - done).min(k);
        if n > 0 {
            self.t[..n * last].copy_from_slice(&x0[done * n..(done + last) * n]);
        }
        self.stats.initial_vectors = done + last;
        for j in last..k {
            self.fill_random(j);
        }
        Ok(k)
    }
}
