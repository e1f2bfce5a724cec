//! Factorized sparse approximate inverse (FSAI; Kolotilina & Yeremin 1993), the SPD
//! variant of ParaSails (Chow 2001), with a sign-preserving extension for symmetric
//! indefinite shifted matrices.

use matrices::CsrMatrix;

use super::blocked::{columns, for_column_groups, row_dots, ColumnGroup};
use super::{shifted_with_diagonal, PrecondError};
use crate::operator::Preconditioner;

/// `M^{-1} = Gᵀ S G ≈ (A − σI)^{-1}` with `G` lower triangular on the pattern of the
/// lower triangle of `A` (plus the diagonal) and `S = diag(±1)`.
///
/// Row `i` of `G`: with `P_i = {j ≤ i : a_ij ≠ 0}`, solve the small dense system
/// `(A − σI)[P_i, P_i] ĝ = e_i` (LU with partial pivoting), then `g_i = ĝ / √|ĝ_i|` and
/// `s_i = sign(ĝ_i)`. For SPD `A − σI` every `ĝ_i > 0`, `S = I` and this is classical
/// FSAI: `M^{-1}` is SPD (usable in CG) and `G (A − σI) Gᵀ` has unit diagonal. For a
/// symmetric indefinite shift the signs keep `M^{-1}` symmetric (use BiCGSTAB or GMRES),
/// but the approximation is weak (nos4 with σ mid-spectrum: GMRES(50) stagnates).
/// Rows are independent; the cost is `|P_i|³/3` flops each. Only the lower triangle of
/// `A` is read, so `A` is taken as symmetric. A new shift means recomputing every row.
#[derive(Debug, Clone)]
pub struct Fsai {
    g: CsrMatrix,
    gt: CsrMatrix,
    sign: Vec<f64>,
    negative: usize,
    shift: f64,
}

impl Fsai {
    /// Computes the factorized approximate inverse of `A − shift·I` (`A` symmetric).
    ///
    /// # Errors
    /// [`PrecondError::NotSquare`], [`PrecondError::NonFinite`],
    /// [`PrecondError::NonFiniteShift`], [`PrecondError::ZeroPivot`] when the local system
    /// of row `row` is singular (e.g. a zero row), [`PrecondError::FactorOverflow`].
    pub fn new(a: &CsrMatrix, shift: f64) -> Result<Self, PrecondError> {
        let s = shifted_with_diagonal(a, shift)?;
        let n = s.nrows();
        let mut indptr = Vec::with_capacity(n + 1);
        indptr.push(0);
        let mut indices: Vec<u32> = Vec::new();
        let mut data: Vec<f64> = Vec::new();
        let mut sign = Vec::with_capacity(n);
        let mut pos = vec![usize::MAX; n];
        let mut dense: Vec<f64> = Vec::new();
        let mut rhs: Vec<f64> = Vec::new();
        let mut local = LocalSolver::default();
        for i in 0..n {
            let (cols, _) = s.row(i);
            let p: &[u32] = &cols[..cols.partition_point(|&c| (c as usize) <= i)];
            let k = p.len(); // the diagonal is always present, last
            for (q, &c) in p.iter().enumerate() {
                pos[c as usize] = q;
            }
            // Dense column-major A[P, P] from the lower triangle of the rows
            // p[r] restricted to P (rows are sorted; A is symmetric).
            dense.clear();
            dense.resize(k * k, 0.0);
            for (r, &row) in p.iter().enumerate() {
                let (rc, rv) = s.row(row as usize);
                let end = rc.partition_point(|&c| c <= row);
                for (&c, &v) in rc[..end].iter().zip(&rv[..end]) {
                    let q = pos[c as usize];
                    if q != usize::MAX {
                        dense[q * k + r] = v;
                        dense[r * k + q] = v;
                    }
                }
            }
            for &c in p {
                pos[c as usize] = usize::MAX;
            }
            rhs.clear();
            rhs.resize(k, 0.0);
            rhs[k - 1] = 1.0;
            if !local.solve(&mut dense, k, &mut rhs) {
                return Err(PrecondError::ZeroPivot { row: i });
            }
            let gii = rhs[k - 1];
            if gii == 0.0 || !gii.is_finite() {
                return Err(if gii == 0.0 {
                    PrecondError::ZeroPivot { row: i }
                } else {
                    PrecondError::FactorOverflow { row: i }
                });
            }
            let scale = 1.0 / gii.abs().sqrt();
            for (&c, &v) in p.iter().zip(&rhs) {
                let g = v * scale;
                if !g.is_finite() {
                    return Err(PrecondError::FactorOverflow { row: i });
                }
                if g != 0.0 || c as usize == i {
                    indices.push(c);
                    data.push(g);
                }
            }
            indptr.push(indices.len());
            sign.push(gii.signum());
        }
        let g = CsrMatrix::from_parts_unchecked(n, n, indptr, indices, data);
        let gt = g.transpose();
        let negative = sign.iter().filter(|&&v| v < 0.0).count();
        Ok(Self {
            g,
            gt,
            sign,
            negative,
            shift,
        })
    }

    /// Flops of [`Fsai::new`] on `a`, estimated from its pattern: Σ_i |P_i|³/3 for
    /// the lower-triangle patterns P_i (the diagonal counted in every row). A few
    /// dense rows make it cubic in their length; callers that pick FSAI on their
    /// own compare this with the cost of the products it would save.
    pub fn setup_flops(a: &CsrMatrix) -> f64 {
        (0..a.nrows())
            .map(|i| {
                let cols = a.row(i).0;
                let below = cols.partition_point(|&c| (c as usize) < i);
                let k = (below + 1) as f64;
                k * k * k / 3.0
            })
            .sum()
    }

    /// The lower triangular factor `G`.
    pub fn factor(&self) -> &CsrMatrix {
        &self.g
    }

    /// Rows with a negative sign `s_i` (0 when `A − σI` is SPD).
    pub fn negative_signs(&self) -> usize {
        self.negative
    }

    /// The shift σ the factor was computed for.
    pub fn shift(&self) -> f64 {
        self.shift
    }
}

/// Local systems at least this large go to faer's blocked LU ([`LocalSolver`]);
/// smaller ones to the unblocked loop, whose per-call cost is lower.
const BLOCKED_FROM: usize = 48;

/// Solver of FSAI's local systems A[P, P] g = e_last, reused across rows: the
/// column-major matrix, the right-hand side and faer's permutation and stack
/// buffers grow to the largest pattern and are not reallocated.
#[derive(Default)]
struct LocalSolver {
    perm: Vec<usize>,
    perm_inv: Vec<usize>,
    /// faer's work space, sized for systems of up to `mem_k` rows.
    mem: Option<faer::dyn_stack::MemBuffer>,
    mem_k: usize,
}

impl LocalSolver {
    /// Solves the dense column-major `k x k` system `a x = b` in place (`b`
    /// becomes `x`) by LU with partial pivoting; `false` if a pivot is zero or
    /// the solution is not finite.
    fn solve(&mut self, a: &mut [f64], k: usize, b: &mut [f64]) -> bool {
        if k < BLOCKED_FROM {
            return lu_solve(a, k, b);
        }
        use faer::dyn_stack::{MemBuffer, MemStack, StackReq};
        use faer::linalg::lu::partial_pivoting::{factor, solve};
        use faer::prelude::{Reborrow, ReborrowMut};
        use faer::{MatMut, Par};
        let par = Par::Seq;
        if self.mem.is_none() || self.mem_k < k {
            let req = StackReq::any_of(&[
                factor::lu_in_place_scratch::<usize, f64>(k, k, par, Default::default()),
                solve::solve_in_place_scratch::<usize, f64>(k, 1, par),
            ]);
            self.mem = Some(MemBuffer::new(req));
            self.mem_k = k;
        }
        let mem = self.mem.as_mut().expect("sized above");
        self.perm.resize(k, 0);
        self.perm_inv.resize(k, 0);
        let mut lu = MatMut::from_column_major_slice_mut(a, k, k);
        let (_, p) = factor::lu_in_place(
            lu.rb_mut(),
            &mut self.perm,
            &mut self.perm_inv,
            par,
            MemStack::new(mem),
            Default::default(),
        );
        if (0..k).any(|i| lu[(i, i)] == 0.0) {
            return false;
        }
        let rhs = MatMut::from_column_major_slice_mut(b, k, 1);
        solve::solve_in_place(lu.rb(), lu.rb(), p, rhs, par, MemStack::new(mem));
        b.iter().all(|v| v.is_finite())
    }
}

/// `x −= f·l` (skipped for f = 0: the local systems are sparse).
#[inline(always)]
fn sub_scaled(x: &mut [f64], l: &[f64], f: f64) {
    if f != 0.0 {
        x.iter_mut().zip(l).for_each(|(x, lv)| *x -= lv * f);
    }
}

/// Solves the dense column-major `k x k` system in place by LU with partial pivoting
/// (right-looking, column by column, so that every update is a contiguous axpy);
/// `false` if a pivot is exactly zero.
fn lu_solve(a: &mut [f64], k: usize, b: &mut [f64]) -> bool {
    for c in 0..k {
        let (mut piv, mut best) = (c, a[c * k + c].abs());
        for r in c + 1..k {
            let v = a[c * k + r].abs();
            if v > best {
                piv = r;
                best = v;
            }
        }
        if best == 0.0 {
            return false;
        }
        if piv != c {
            for col in 0..k {
                a.swap(col * k + c, col * k + piv);
            }
            b.swap(c, piv);
        }
        let d = a[c * k + c];
        let (head, tail) = a.split_at_mut((c + 1) * k);
        let l = &mut head[c * k + c + 1..];
        l.iter_mut().for_each(|v| *v /= d);
        let bc = b[c];
        sub_scaled(&mut b[c + 1..], l, bc);
        for col in tail.chunks_exact_mut(k) {
            let f = col[c];
            sub_scaled(&mut col[c + 1..], l, f);
        }
    }
    for c in (0..k).rev() {
        let mut t = b[c];
        for col in c + 1..k {
            t -= a[col * k + c] * b[col];
        }
        b[c] = t / a[c * k + c];
    }
    true
}

impl Preconditioner for Fsai {
    fn nrows(&self) -> usize {
        self.g.nrows()
    }
    /// G and Gᵀ read once each, S, r and z.
    fn work_per_vector(&self) -> f64 {
        1.5 * (self.g.nnz() + self.gt.nnz()) as f64 + 3.0 * self.g.nrows() as f64
    }

    /// `z = Gᵀ S G r`: `y = S G r` into `z`, then `z = Gᵀ y` in place (row `i` of `Gᵀ`
    /// reads only `y_k`, `k ≥ i`, which are not yet overwritten). No scratch. Groups of
    /// up to 8 vectors share one pass over `G` and one over `Gᵀ` (one sequential sum per
    /// vector and row, the same for every group size).
    fn apply_block(&self, r: &[f64], z: &mut [f64], k: usize) {
        let n = self.g.nrows();
        assert_eq!(r.len(), n * k, "FSAI: r has wrong length");
        assert_eq!(z.len(), n * k, "FSAI: z has wrong length");
        if n == 0 {
            return;
        }
        for_column_groups(k, &mut FsaiGroup { m: self, r, z });
    }
}

/// One group of vectors of [`Fsai`]'s `apply_block`.
struct FsaiGroup<'a> {
    m: &'a Fsai,
    r: &'a [f64],
    z: &'a mut [f64],
}

impl ColumnGroup for FsaiGroup<'_> {
    fn run<const K: usize>(&mut self, j0: usize) {
        let m = self.m;
        let n = m.g.nrows();
        let (gp, gi, gd) = (m.g.indptr(), m.g.indices(), m.g.data());
        let (tp, ti, td) = (m.gt.indptr(), m.gt.indices(), m.gt.data());
        let rc = columns::<K>(self.r, n, j0);
        let z = &mut self.z[j0 * n..(j0 + K) * n];
        for i in 0..n {
            let (lo, hi) = (gp[i], gp[i + 1]);
            let y = row_dots::<K>(&gi[lo..hi], &gd[lo..hi], &rc);
            for j in 0..K {
                z[j * n + i] = y[j] * m.sign[i];
            }
        }
        for i in 0..n {
            let (lo, hi) = (tp[i], tp[i + 1]);
            let zc = columns::<K>(z, n, 0);
            let s = row_dots::<K>(&ti[lo..hi], &td[lo..hi], &zc);
            for j in 0..K {
                z[j * n + i] = s[j];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fsai_of_dense_spd_is_exact_inverse() {
        // Full pattern: G A Gᵀ = I exactly, so M^{-1} = A^{-1}.
        let a = CsrMatrix::from_triplets(
            3,
            3,
            &[
                (0, 0, 4.0),
                (0, 1, 1.0),
                (0, 2, 0.5),
                (1, 0, 1.0),
                (1, 1, 3.0),
                (1, 2, -1.0),
                (2, 0, 0.5),
                (2, 1, -1.0),
                (2, 2, 5.0),
            ],
        )
        .unwrap();
        let m = Fsai::new(&a, 0.0).unwrap();
        assert_eq!(m.negative_signs(), 0);
        let x = [1.0, -2.0, 0.5];
        let mut b = [0.0; 3];
        a.mul_vec(&x, &mut b);
        let mut z = [0.0; 3];
        m.apply(&b, &mut z);
        for (zi, xi) in z.iter().zip(&x) {
            assert!((zi - xi).abs() < 1e-13, "{z:?}");
        }
        // Indefinite shift: signs appear, still the exact inverse on the full pattern.
        let m = Fsai::new(&a, 3.5).unwrap();
        assert!(m.negative_signs() > 0);
        let mut t = Vec::new();
        for i in 0..3 {
            let (c, v) = a.row(i);
            for (&c, &v) in c.iter().zip(v) {
                t.push((i, c as usize, v - if c as usize == i { 3.5 } else { 0.0 }));
            }
        }
        let s = CsrMatrix::from_triplets(3, 3, &t).unwrap();
        s.mul_vec(&x, &mut b);
        m.apply(&b, &mut z);
        for (zi, xi) in z.iter().zip(&x) {
            assert!((zi - xi).abs() < 1e-12, "{z:?}");
        }
    }

    #[test]
    fn fsai_diagonal_and_zero_row() {
        let a = CsrMatrix::from_triplets(2, 2, &[(0, 0, 4.0), (1, 1, 9.0)]).unwrap();
        let m = Fsai::new(&a, 0.0).unwrap();
        assert_eq!(m.factor().data(), &[0.5, 1.0 / 3.0]);
        let z = CsrMatrix::from_triplets(2, 2, &[(0, 0, 4.0)]).unwrap();
        assert_eq!(
            Fsai::new(&z, 0.0).unwrap_err(),
            PrecondError::ZeroPivot { row: 1 }
        );
    }

    /// A full 70×70 pattern: rows 48 on have local systems for faer's blocked LU,
    /// the others for the unblocked loop. On the full pattern M⁻¹ is A⁻¹ exactly,
    /// definite or (shifted into the spectrum, with pivoting) not.
    #[test]
    fn fsai_of_dense_matrix_is_exact_inverse_on_both_local_solvers() {
        let n = 70;
        let mut t = Vec::new();
        for i in 0..n {
            for j in 0..n {
                let v = if i == j {
                    4.0 + i as f64 / 10.0
                } else {
                    1.0 / (1.0 + (i as f64 - j as f64).abs() + ((i * j) % 7) as f64)
                };
                t.push((i, j, v));
            }
        }
        let a = CsrMatrix::from_triplets(n, n, &t).unwrap();
        let x: Vec<f64> = (0..n).map(|i| ((i * 37) % 11) as f64 - 5.0).collect();
        for shift in [0.0, 6.05] {
            let m = Fsai::new(&a, shift).unwrap();
            assert_eq!(m.negative_signs() > 0, shift > 0.0, "shift {shift}");
            let mut b = vec![0.0; n];
            a.mul_vec(&x, &mut b);
            b.iter_mut().zip(&x).for_each(|(b, x)| *b -= shift * x);
            let mut z = vec![0.0; n];
            m.apply(&b, &mut z);
            let err = z
                .iter()
                .zip(&x)
                .fold(0.0f64, |e, (z, x)| e.max((z - x).abs()));
            assert!(err < 1e-9, "shift {shift}: error {err}");
        }
    }
}
