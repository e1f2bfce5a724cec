//! Jacobi (diagonal) preconditioner.

use matrices::CsrMatrix;

use super::{check_pivot_tol, check_square_finite, guard_pivot, PivotParams, PrecondError};
use crate::operator::Preconditioner;

/// `M = diag(A − σI)`, applied as `z_i = r_i / (a_ii − σ)`.
///
/// The unshifted diagonal and the row ∞-norms of `A` are kept, so a new shift costs one
/// O(n) pass without allocation ([`Jacobi::set_shift`]). Tiny pivots follow the rule of
/// the [module docs](super), with the row norm of `A − σI` bounded by `‖row_i(A)‖_∞ + |σ|`.
#[derive(Debug, Clone)]
pub struct Jacobi {
    diag: Vec<f64>,
    row_norm: Vec<f64>,
    inv: Vec<f64>,
    pivot_tol: f64,
    shift: f64,
    perturbed: usize,
    /// [`Jacobi::follow_shifts`]: `apply_block_shifted` uses `diag(A) − σ_j`.
    follow: bool,
}

impl Jacobi {
    /// Builds the Jacobi preconditioner of `A − shift·I`.
    ///
    /// # Errors
    /// [`PrecondError::NotSquare`], [`PrecondError::NonFinite`],
    /// [`PrecondError::NonFiniteShift`], [`PrecondError::InvalidParameter`] (bad
    /// `pivot_tol`), [`PrecondError::ZeroPivot`] (a zero row, or a zero shifted diagonal
    /// with `pivot_tol = 0`).
    pub fn new(a: &CsrMatrix, shift: f64, params: &PivotParams) -> Result<Self, PrecondError> {
        check_square_finite(a, shift)?;
        check_pivot_tol(params.pivot_tol)?;
        let n = a.nrows();
        let diag = a.diagonal();
        let row_norm = (0..n)
            .map(|i| a.row(i).1.iter().fold(0.0f64, |m, v| m.max(v.abs())))
            .collect();
        let mut j = Self {
            diag,
            row_norm,
            inv: vec![0.0; n],
            pivot_tol: params.pivot_tol,
            shift,
            perturbed: 0,
            follow: false,
        };
        j.set_shift(shift)?;
        Ok(j)
    }

    /// Builds from an explicit diagonal `d` (no shift, `M = diag(d)`), e.g. a diagonal
    /// computed by a distributed operator.
    ///
    /// # Errors
    /// [`PrecondError::NonFinite`] (row = col = index), [`PrecondError::ZeroPivot`] for a
    /// zero entry.
    pub fn from_diagonal(d: &[f64]) -> Result<Self, PrecondError> {
        let mut inv = Vec::with_capacity(d.len());
        for (i, &v) in d.iter().enumerate() {
            if !v.is_finite() {
                return Err(PrecondError::NonFinite { row: i, col: i });
            }
            if v == 0.0 {
                return Err(PrecondError::ZeroPivot { row: i });
            }
            inv.push(1.0 / v);
        }
        Ok(Self {
            diag: d.to_vec(),
            row_norm: d.iter().map(|v| v.abs()).collect(),
            inv,
            pivot_tol: 0.0,
            shift: 0.0,
            perturbed: 0,
            follow: false,
        })
    }

    /// Re-targets the preconditioner to `A − shift·I` in O(n) without allocation.
    ///
    /// # Errors
    /// [`PrecondError::NonFiniteShift`]; [`PrecondError::ZeroPivot`] as in [`Jacobi::new`]
    /// (the preconditioner is then left unchanged).
    pub fn set_shift(&mut self, shift: f64) -> Result<(), PrecondError> {
        if !shift.is_finite() {
            return Err(PrecondError::NonFiniteShift { shift });
        }
        // Validate first so that an error leaves `self` unchanged.
        for (i, (&d, &rn)) in self.diag.iter().zip(&self.row_norm).enumerate() {
            guard_pivot(d - shift, rn + shift.abs(), self.pivot_tol, i)?;
        }
        let mut perturbed = 0;
        for ((inv, &d), &rn) in self.inv.iter_mut().zip(&self.diag).zip(&self.row_norm) {
            let thr = self.pivot_tol * (rn + shift.abs());
            let mut u = d - shift;
            if u.abs() <= thr || u == 0.0 {
                u = if u < 0.0 { -thr } else { thr };
                perturbed += 1;
            }
            *inv = 1.0 / u;
        }
        self.shift = shift;
        self.perturbed = perturbed;
        Ok(())
    }

    /// Follows the shifts the eigensolver passes to
    /// [`Preconditioner::apply_block_shifted`]: column j is divided by
    /// `a_ii − σ_j` (the tiny-pivot rule of [`Jacobi::new`] applied per entry,
    /// with `pivot_tol` at least [`super::DEFAULT_PIVOT_TOL`]) instead of by the
    /// entries of the shift given at construction. `apply_block` is unchanged.
    pub fn follow_shifts(mut self) -> Self {
        self.follow = true;
        self
    }

    /// The current shift σ.
    pub fn shift(&self) -> f64 {
        self.shift
    }

    /// Diagonal entries replaced by the tiny-pivot rule at the current shift.
    pub fn perturbed_pivots(&self) -> usize {
        self.perturbed
    }

    /// The applied inverse diagonal `1 / (a_ii − σ)` (after perturbation).
    pub fn inverse_diagonal(&self) -> &[f64] {
        &self.inv
    }
}

impl Preconditioner for Jacobi {
    fn nrows(&self) -> usize {
        self.inv.len()
    }
    fn work_per_vector(&self) -> f64 {
        3.0 * self.inv.len() as f64
    }

    /// `z_j = D^{-1} r_j` for the `k` vectors in one pass over `D^{-1}`: rows are taken
    /// in chunks small enough to stay in L1, each chunk applied to all `k` vectors.
    fn apply_block(&self, r: &[f64], z: &mut [f64], k: usize) {
        let n = self.inv.len();
        assert_eq!(r.len(), n * k, "Jacobi: r has wrong length");
        assert_eq!(z.len(), n * k, "Jacobi: z has wrong length");
        const ROWS: usize = 512;
        for lo in (0..n).step_by(ROWS) {
            let hi = (lo + ROWS).min(n);
            let d = &self.inv[lo..hi];
            for j in 0..k {
                let (rc, zc) = (&r[j * n + lo..j * n + hi], &mut z[j * n + lo..j * n + hi]);
                for ((zi, &ri), &di) in zc.iter_mut().zip(rc).zip(d) {
                    *zi = ri * di;
                }
            }
        }
    }

    /// With [`Jacobi::follow_shifts`], `z_j = (diag(A) − σ_j)^{-1} r_j`; else
    /// [`Preconditioner::apply_block`].
    fn apply_block_shifted(&self, r: &[f64], z: &mut [f64], k: usize, shifts: &[f64]) {
        if !self.follow {
            return self.apply_block(r, z, k);
        }
        let n = self.inv.len();
        assert_eq!(r.len(), n * k, "Jacobi: r has wrong length");
        assert_eq!(z.len(), n * k, "Jacobi: z has wrong length");
        assert_eq!(shifts.len(), k, "Jacobi: one shift per vector");
        let tol = self.pivot_tol.max(super::DEFAULT_PIVOT_TOL);
        for (j, &s) in shifts.iter().enumerate() {
            let (rc, zc) = (&r[j * n..(j + 1) * n], &mut z[j * n..(j + 1) * n]);
            for (((zi, &ri), &d), &rn) in zc.iter_mut().zip(rc).zip(&self.diag).zip(&self.row_norm)
            {
                let thr = tol * (rn + s.abs());
                let mut u = d - s;
                if u.abs() <= thr || u == 0.0 {
                    u = if u < 0.0 { -thr } else { thr };
                }
                *zi = ri / u;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jacobi_applies_shifted_inverse_diagonal() {
        let a =
            CsrMatrix::from_triplets(2, 2, &[(0, 0, 4.0), (0, 1, 1.0), (1, 0, 1.0), (1, 1, 2.0)])
                .unwrap();
        let mut m = Jacobi::new(&a, 0.0, &PivotParams::default()).unwrap();
        let mut z = [0.0; 4];
        m.apply_block(&[4.0, 2.0, 8.0, 1.0], &mut z, 2);
        assert_eq!(z, [1.0, 1.0, 2.0, 0.5]);
        m.set_shift(1.0).unwrap();
        m.apply(&[3.0, 1.0], &mut z[..2]);
        assert_eq!(&z[..2], &[1.0, 1.0]);
        // Shift onto a diagonal entry: perturbed, not an error.
        m.set_shift(2.0).unwrap();
        assert_eq!(m.perturbed_pivots(), 1);
        let thr = super::super::DEFAULT_PIVOT_TOL * (2.0 + 2.0);
        assert!((m.inverse_diagonal()[1] - 1.0 / thr).abs() <= 1e-6 / thr);
        // Disabled perturbation: error, state unchanged.
        let mut m0 = Jacobi::new(
            &a,
            0.0,
            &PivotParams {
                pivot_tol: 0.0,
                ..PivotParams::default()
            },
        )
        .unwrap();
        assert_eq!(m0.set_shift(2.0), Err(PrecondError::ZeroPivot { row: 1 }));
        assert_eq!(m0.shift(), 0.0);
    }

    #[test]
    fn jacobi_follows_the_shifts_when_asked() {
        let a =
            CsrMatrix::from_triplets(2, 2, &[(0, 0, 4.0), (0, 1, 1.0), (1, 0, 1.0), (1, 1, 2.0)])
                .unwrap();
        let fixed = Jacobi::new(&a, 0.0, &PivotParams::default()).unwrap();
        let mut z = [0.0; 4];
        fixed.apply_block_shifted(&[4.0, 2.0, 4.0, 2.0], &mut z, 2, &[1.0, 3.0]);
        assert_eq!(z, [1.0, 1.0, 1.0, 1.0]);
        let follow = fixed.follow_shifts();
        follow.apply_block_shifted(&[3.0, 1.0, 1.0, -1.0], &mut z, 2, &[1.0, 3.0]);
        assert_eq!(z, [1.0, 1.0, 1.0, 1.0]);
        // apply_block keeps the construction shift.
        follow.apply_block(&[4.0, 2.0], &mut z[..2], 1);
        assert_eq!(&z[..2], &[1.0, 1.0]);
        // A shift on a diagonal entry is perturbed, not a division by zero.
        follow.apply_block_shifted(&[1.0, 1.0], &mut z[..2], 1, &[2.0]);
        assert!(z[..2].iter().all(|v| v.is_finite()));
    }

    #[test]
    fn jacobi_rejects_bad_input() {
        let a = CsrMatrix::from_triplets(2, 3, &[(0, 0, 1.0)]).unwrap();
        assert!(matches!(
            Jacobi::new(&a, 0.0, &PivotParams::default()),
            Err(PrecondError::NotSquare { .. })
        ));
        let a = CsrMatrix::from_triplets(2, 2, &[(0, 0, 1.0), (1, 0, f64::NAN)]).unwrap();
        assert_eq!(
            Jacobi::new(&a, 0.0, &PivotParams::default()).unwrap_err(),
            PrecondError::NonFinite { row: 1, col: 0 }
        );
        let a = CsrMatrix::from_triplets(2, 2, &[(0, 0, 1.0)]).unwrap();
        assert_eq!(
            Jacobi::new(&a, 0.0, &PivotParams::default()).unwrap_err(),
            PrecondError::ZeroPivot { row: 1 }
        );
    }
}
