//! Incomplete LU factorizations: ILU(0) and ILUT(p, τ) (Saad, *Iterative Methods for
//! Sparse Linear Systems*, 2nd ed., §10.3 and §10.4).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use matrices::CsrMatrix;

use super::blocked::{columns, for_column_groups, ColumnGroup, Scratch, MAX_GROUP};
use super::{
    check_nonneg, check_pivot_tol, check_square_finite, guard_pivot, IlutParams, PivotParams,
    PrecondError,
};
use crate::operator::Preconditioner;
use crate::pages::{huge_page_capacity, huge_page_vec};
use crate::spmv::{prefetch_stream, STREAM_ENTRIES};

/// Incomplete factors `L U ≈ A − σI`, stored once, in the layout of the substitutions.
///
/// `L` (strictly lower, unit diagonal implied) row by row in increasing column order;
/// the diagonal as `1 / u_ii`; `U` (strictly upper) in increasing column order within a
/// row but with its rows in reverse order, so that each sweep streams only its own
/// triangle forwards through memory. Applying `M^{-1} = U^{-1} L^{-1}` to one vector is
/// a forward then a backward substitution done in place in the output vector: no
/// scratch, no allocation. Blocks of vectors are substituted together, up to 8 at a
/// time, through a row-interleaved scratch grown on the first block apply (see
/// `apply_block` of [`Ilu0`] / [`Ilut`], which forward to [`LuFactors`]).
///
/// The factorizations write into this layout directly (no combined CSR copy of the
/// factors, no shifted copy of `A`): 12 bytes per off-diagonal entry plus 24 per row.
///
/// For an exactly symmetric `A`, ILU(0) is stored as the incomplete `L D Lᵀ` it is
/// (`L = (D⁻¹ U)ᵀ`, [`Ilu0`]): `U` and `D⁻¹` only, half the entries; the forward
/// substitution then runs over `U`'s rows as columns of `L` (scatter form).
#[derive(Debug, Clone, Default)]
pub struct LuFactors {
    n: usize,
    tri: TriSolve,
    /// Row-interleaved copy of a group of vectors for [`LuFactors::apply_block`].
    scratch: Scratch,
}

/// The arrays of [`LuFactors`].
#[derive(Debug, Clone, Default, PartialEq)]
struct TriSolve {
    l_ptr: Vec<usize>,
    l_idx: Vec<u32>,
    l_val: Vec<f64>,
    /// Row `n − 1 − q` of U is at `u_ptr[q]..u_ptr[q + 1]`.
    u_ptr: Vec<usize>,
    u_idx: Vec<u32>,
    u_val: Vec<f64>,
    /// `1 / u_ii` (during a factorization, first the diagonal of `A − σI`).
    dinv: Vec<f64>,
    /// `L = (D⁻¹ U)ᵀ` is implied: the `l_*` arrays are empty (symmetric ILU(0)).
    sym: bool,
}

impl TriSolve {
    /// Range of row `i` of `U` in `u_idx` / `u_val` (rows in reverse order).
    #[inline]
    fn u_row(&self, i: usize) -> std::ops::Range<usize> {
        let q = self.u_ptr.len() - 2 - i;
        self.u_ptr[q]..self.u_ptr[q + 1]
    }

    /// The pattern of `A` with the diagonal added, and the values of `A − shift·I` with
    /// the diagonal then multiplied by `1 + diag_shift` (the values the factorizations
    /// start from, bit for bit those of [`shifted_row`]). Arrays of exact size. With
    /// `sym` the strictly lower part is not stored (`L` is implied by `U`).
    fn shifted_pattern(a: &CsrMatrix, shift: f64, diag_shift: f64, sym: bool) -> Self {
        let n = a.nrows();
        let (mut nl, mut nu) = (0, 0);
        for i in 0..n {
            let cols = a.row(i).0;
            let lo = cols.partition_point(|&c| (c as usize) < i);
            let hi = lo + usize::from(cols.get(lo) == Some(&(i as u32)));
            nl += lo;
            nu += cols.len() - hi;
        }
        if sym {
            nl = 0;
        }
        // Huge pages from the first touch: the factors of a large matrix fault in
        // 2 MiB at a time (setup, medians: stencil27:48 44.8 -> 40.7 ms, lap3d:64
        // 41.2 -> 34.7 ms, lap3d:100 0.135 -> 0.115 s; peak RSS unchanged).
        let mut u_idx = huge_page_capacity(nu);
        u_idx.resize(nu, 0);
        let mut t = TriSolve {
            l_ptr: huge_page_capacity(n + 1),
            l_idx: huge_page_capacity(nl),
            l_val: huge_page_capacity(nl),
            u_ptr: huge_page_capacity(n + 1),
            u_idx,
            u_val: huge_page_vec(nu),
            dinv: huge_page_capacity(n),
            sym,
        };
        t.l_ptr.push(0);
        t.u_ptr.push(0);
        // U rows from the last one: u_ptr first, then the entries at their places.
        for i in (0..n).rev() {
            let cols = a.row(i).0;
            let hi = cols.partition_point(|&c| (c as usize) <= i);
            t.u_ptr.push(t.u_ptr.last().unwrap() + cols.len() - hi);
        }
        for i in 0..n {
            let (cols, vals) = a.row(i);
            let lo = cols.partition_point(|&c| (c as usize) < i);
            let has_diag = cols.get(lo) == Some(&(i as u32));
            let hi = lo + usize::from(has_diag);
            if !sym {
                t.l_idx.extend_from_slice(&cols[..lo]);
                t.l_val.extend_from_slice(&vals[..lo]);
                t.l_ptr.push(t.l_idx.len());
            }
            let mut d = if has_diag { vals[lo] - shift } else { -shift };
            if diag_shift != 0.0 {
                d *= 1.0 + diag_shift;
            }
            t.dinv.push(d);
            let u = t.u_row(i);
            t.u_idx[u.clone()].copy_from_slice(&cols[hi..]);
            t.u_val[u].copy_from_slice(&vals[hi..]);
        }
        t
    }

    /// Reverses the order of the `U` rows of factors whose `U` rows were stored first
    /// to last (row `i` at `u_ptr[i]..u_ptr[i + 1]`), in place.
    fn reverse_u_rows(&mut self) {
        let total = self.u_idx.len();
        self.u_idx.reverse();
        self.u_val.reverse();
        self.u_ptr.reverse();
        for p in &mut self.u_ptr {
            *p = total - *p;
        }
        for q in 0..self.u_ptr.len().saturating_sub(1) {
            let r = self.u_ptr[q]..self.u_ptr[q + 1];
            self.u_idx[r.clone()].reverse();
            self.u_val[r].reverse();
        }
    }

    /// Symmetric factors: [`PrecondError::PatternMismatch`] at the first entry of `a`
    /// (same order) outside the stored pattern and its mirror image.
    fn check_sym_pattern(&self, a: &CsrMatrix) -> Result<(), PrecondError> {
        for i in 0..a.nrows() {
            for &c in a.row(i).0 {
                let (r, col) = (i.min(c as usize), i.max(c as usize) as u32);
                if r != col as usize && self.u_idx[self.u_row(r)].binary_search(&col).is_err() {
                    return Err(PrecondError::PatternMismatch {
                        row: i,
                        col: c as usize,
                    });
                }
            }
        }
        Ok(())
    }

    /// Factor entries one application streams: each triangle once, `U` twice when
    /// it also stands for `L` (symmetric).
    fn streamed(&self) -> usize {
        self.l_idx.len() + self.u_idx.len() * if self.sym { 2 } else { 1 }
    }

    /// Checks the invariant the substitutions rely on: every index is < n.
    fn check_indices(&self) {
        let n = self.dinv.len();
        // The substitutions gather without bounds checks: every index must be < n.
        assert!(
            self.l_idx
                .iter()
                .chain(&self.u_idx)
                .all(|&c| (c as usize) < n),
            "ILU factor column index out of range"
        );
    }
}

impl LuFactors {
    /// Order of the factors.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Stored entries of `L` and `U` together (diagonal included).
    pub fn nnz(&self) -> usize {
        self.tri.l_idx.len() + self.tri.u_idx.len() + self.n
    }

    /// The words of memory one solve with one vector reads and writes
    /// ([`Preconditioner::work_per_vector`]): 1.5 per off-diagonal entry, 3
    /// per row (the inverse pivot, r and z).
    pub fn work_per_vector(&self) -> f64 {
        1.5 * (self.tri.l_idx.len() + self.tri.u_idx.len()) as f64 + 3.0 * self.n as f64
    }

    /// `u_ii` (the pivot actually used, after any tiny-pivot replacement).
    pub fn pivot(&self, i: usize) -> f64 {
        1.0 / self.tri.dinv[i]
    }

    /// Solves `L U z = r` for one vector (`r.len() == z.len() == n`).
    ///
    /// # Panics
    /// If the lengths differ from `n` (contract violation).
    pub fn solve(&self, r: &[f64], z: &mut [f64]) {
        assert_eq!(r.len(), self.n, "LuFactors::solve: r has wrong length");
        assert_eq!(z.len(), self.n, "LuFactors::solve: z has wrong length");
        if self.tri.streamed() >= STREAM_ENTRIES {
            solve_one::<true>(self, r, z)
        } else {
            solve_one::<false>(self, r, z)
        }
    }

    /// [`LuFactors::solve`], prefetching the factors when `PF`: the body of
    /// [`solve_one`].
    #[inline(always)]
    fn solve_one_body<const PF: bool>(&self, r: &[f64], z: &mut [f64]) {
        let t = &self.tri;
        let mut prev = (u32::MAX, [0.0]);
        let mut pf = 0;
        if t.sym {
            forward_sym::<1, PF>(t, self.n, [r], z);
        } else {
            for i in 0..self.n {
                let (lo, hi) = (t.l_ptr[i], t.l_ptr[i + 1]);
                if PF {
                    prefetch_ahead(&t.l_idx, &t.l_val, lo, &mut pf);
                }
                // SAFETY: factor indices are < n (checked by `TriSolve::check_indices`)
                // and z.len() == n (asserted above).
                let d = unsafe {
                    eliminate::<1, true>(&t.l_idx[lo..hi], &t.l_val[lo..hi], z, [r[i]], prev)
                };
                z[i] = d[0];
                prev = (i as u32, d);
            }
        }
        pf = 0;
        for q in 0..self.n {
            let i = self.n - 1 - q;
            let (lo, hi) = (t.u_ptr[q], t.u_ptr[q + 1]);
            if PF {
                prefetch_ahead(&t.u_idx, &t.u_val, lo, &mut pf);
            }
            // SAFETY: as above.
            let s = unsafe {
                eliminate::<1, false>(&t.u_idx[lo..hi], &t.u_val[lo..hi], z, [z[i]], prev)
            };
            z[i] = s[0] * t.dinv[i];
            prev = (i as u32, [z[i]]);
        }
    }

    /// Factors from finished arrays (indices checked here).
    fn from_tri(tri: TriSolve) -> Self {
        tri.check_indices();
        LuFactors {
            n: tri.dinv.len(),
            tri,
            scratch: Scratch,
        }
    }

    /// `z = (LU)^{-1} r` for `k` column-major vectors.
    ///
    /// Groups of up to 8 vectors are solved together: the group is substituted in a
    /// row-interleaved scratch copy (`xi[i K + j]`, `n × K` row-major), each row doing its
    /// sparse dot for all `K` vectors at once, so the `K` independent dependency chains of
    /// the sweeps (row `i` waits on row `i − 1`) overlap instead of running one after the
    /// other. The forward sweep reads `r` and the backward sweep writes `z` directly.
    /// Every vector sees the same operations in the same order as [`LuFactors::solve`],
    /// so the result is bitwise the per-vector one. The scratch (`8 n` doubles at most)
    /// is allocated on the first block apply and reused.
    fn apply_block(&self, r: &[f64], z: &mut [f64], k: usize) {
        let n = self.n;
        assert_eq!(r.len(), n * k, "ILU: r has wrong length");
        assert_eq!(z.len(), n * k, "ILU: z has wrong length");
        if n == 0 || k == 0 {
            return;
        }
        if k == 1 {
            return self.solve(r, z);
        }
        self.scratch.with(n * k.min(MAX_GROUP), |xi| {
            for_column_groups(k, &mut LuGroup { lu: self, r, z, xi });
        });
    }
}

crate::avx2_dispatch! {
    /// [`LuFactors::solve`] of `lu`, prefetching the factors when `PF`
    /// ([`LuFactors::solve_one_body`], AVX2 where present).
    fn solve_one<const PF: bool>(lu: &LuFactors, r: &[f64], z: &mut [f64]) =
        LuFactors::solve_one_body;
}

/// One group of vectors of [`LuFactors::apply_block`].
struct LuGroup<'a> {
    lu: &'a LuFactors,
    r: &'a [f64],
    z: &'a mut [f64],
    xi: &'a mut [f64],
}

impl ColumnGroup for LuGroup<'_> {
    fn run<const K: usize>(&mut self, j0: usize) {
        let n = self.lu.n;
        let (r, z) = (
            &self.r[j0 * n..(j0 + K) * n],
            &mut self.z[j0 * n..(j0 + K) * n],
        );
        if K == 1 {
            self.lu.solve(r, z);
        } else {
            let t = &self.lu.tri;
            let xi = &mut self.xi[..n * K];
            if t.streamed() >= STREAM_ENTRIES {
                substitute_il::<K, true>(t, n, r, z, xi);
            } else {
                substitute_il::<K, false>(t, n, r, z, xi);
            }
        }
    }
}

/// How many factor entries ahead of the current row the substitutions prefetch.
const PREFETCH_AHEAD: usize = 256;

/// Prefetches the factor stream `PREFETCH_AHEAD` entries ahead of `lo`, 32 entries at a
/// time: `next` is the first entry not yet prefetched, so short rows (7-point stencils:
/// 3 entries per triangle) do not issue redundant prefetches. Measured on the 27-point
/// stencil 48³ (factors streamed from memory): ILU(0) `apply_block` with k = 4 from 0.84
/// to 0.62 ms per vector.
#[inline(always)]
fn prefetch_ahead(idx: &[u32], val: &[f64], lo: usize, next: &mut usize) {
    while *next <= lo + PREFETCH_AHEAD {
        prefetch_stream(idx, val, *next);
        *next += 32;
    }
}

crate::avx2_dispatch! {
    /// Forward and backward substitution for `K` column-major vectors `r` → `z` through
    /// the row-interleaved scratch `xi` (`n × K`, row-major); per vector the operations
    /// of [`LuFactors::solve`] in the same order ([`substitute_il_body`], AVX2 where
    /// present).
    fn substitute_il<const K: usize, const PF: bool>(
        t: &TriSolve,
        n: usize,
        r: &[f64],
        z: &mut [f64],
        xi: &mut [f64],
    ) = substitute_il_body;
}

/// The body of [`substitute_il`].
#[inline(always)]
fn substitute_il_body<const K: usize, const PF: bool>(
    t: &TriSolve,
    n: usize,
    r: &[f64],
    z: &mut [f64],
    xi: &mut [f64],
) {
    assert_eq!(xi.len(), n * K, "ILU: scratch length");
    let rc: [&[f64]; K] = columns::<K>(r, n, 0);
    let mut prev = (u32::MAX, [0.0; K]);
    let mut pf = 0;
    if t.sym {
        forward_sym::<K, PF>(t, n, rc, xi);
    } else {
        for i in 0..n {
            let (lo, hi) = (t.l_ptr[i], t.l_ptr[i + 1]);
            if PF {
                prefetch_ahead(&t.l_idx, &t.l_val, lo, &mut pf);
            }
            let rhs = std::array::from_fn(|j| rc[j][i]);
            // SAFETY: factor indices are < n (checked by `TriSolve::check_indices`) and
            // xi.len() == n K (asserted above).
            let d =
                unsafe { eliminate::<K, true>(&t.l_idx[lo..hi], &t.l_val[lo..hi], xi, rhs, prev) };
            xi[i * K..(i + 1) * K].copy_from_slice(&d);
            prev = (i as u32, d);
        }
    }
    pf = 0;
    for q in 0..n {
        let i = n - 1 - q;
        let (lo, hi) = (t.u_ptr[q], t.u_ptr[q + 1]);
        if PF {
            prefetch_ahead(&t.u_idx, &t.u_val, lo, &mut pf);
        }
        // SAFETY: i < n and factor indices are < n (checked by `TriSolve::check_indices`);
        // xi.len() == n K (asserted above).
        let d = unsafe {
            let rhs = *load_k::<K>(xi, i as u32);
            eliminate::<K, false>(&t.u_idx[lo..hi], &t.u_val[lo..hi], xi, rhs, prev)
        };
        let di = t.dinv[i];
        let v: [f64; K] = std::array::from_fn(|j| d[j] * di);
        xi[i * K..(i + 1) * K].copy_from_slice(&v);
        for j in 0..K {
            z[j * n + i] = v[j];
        }
        prev = (i as u32, v);
    }
}

/// Prefetches the factor stream walked backwards: entries down to `PREFETCH_AHEAD`
/// below `lo`, 32 at a time; `next` is the lowest entry prefetched so far.
#[inline(always)]
fn prefetch_behind(idx: &[u32], val: &[f64], lo: usize, next: &mut usize) {
    while *next > 0 && *next + PREFETCH_AHEAD > lo {
        *next = next.saturating_sub(32);
        prefetch_stream(idx, val, *next);
    }
}

/// Forward substitution `L y = r` of a symmetric factorization (`L = (D⁻¹ U)ᵀ`, so
/// `l_ci = u_ic / u_ii`) for `K` vectors, into the row-interleaved `xi` (`K = 1`: a
/// plain vector): row `i` of `U` is column `i` of `L`, so once `y_i` is known its
/// `w_i = y_i / u_ii` is scattered into the later rows (`xi_c −= u_ic w_i`). `xi` is
/// filled from `r` only just ahead of the rows a scatter reaches (no separate copy
/// pass). The entry next to the diagonal (`c = i + 1`) stays in registers for the
/// next row, off the store-to-load round trip, as in [`eliminate`], as the multiplier
/// `l_{i+1,i} = u_{i,i+1} / u_ii` (one multiply-add on the chain from row to row). The
/// order of operations per vector does not depend on `K`.
#[inline(always)]
fn forward_sym<const K: usize, const PF: bool>(
    t: &TriSolve,
    n: usize,
    rc: [&[f64]; K],
    xi: &mut [f64],
) {
    assert_eq!(xi.len(), n * K, "ILU: scratch length");
    assert!(rc.iter().all(|c| c.len() == n), "ILU: r has wrong length");
    // Rows of `xi` from `init` on do not hold their `r` yet.
    let mut init = 0;
    let mut near = (u32::MAX, 0.0, [0.0; K]);
    let mut pf = t.u_idx.len();
    for i in 0..n {
        let ur = t.u_row(i);
        if PF {
            prefetch_behind(&t.u_idx, &t.u_val, ur.start, &mut pf);
        }
        let (c, v) = (&t.u_idx[ur.clone()], &t.u_val[ur]);
        let top = c.last().map_or(i, |&l| l as usize);
        while init <= top {
            // SAFETY: init ≤ top < n (factor indices are < n, checked by
            // `TriSolve::check_indices`); every column of `rc` and `xi / K` have n rows.
            unsafe {
                let row = &mut *(xi.as_mut_ptr().add(init * K) as *mut [f64; K]);
                for j in 0..K {
                    row[j] = *rc[j].get_unchecked(init);
                }
            }
            init += 1;
        }
        // SAFETY: i < n = xi.len() / K.
        let yi = unsafe { &mut *(xi.as_mut_ptr().add(i * K) as *mut [f64; K]) };
        let mut y = *yi;
        if near.0 == i as u32 {
            for (yj, wj) in y.iter_mut().zip(near.2) {
                *yj -= near.1 * wj;
            }
            *yi = y;
        }
        let di = t.dinv[i];
        let w: [f64; K] = std::array::from_fn(|j| y[j] * di);
        let far = if c.first() == Some(&(i as u32 + 1)) {
            // (u_{i,i+1} / u_ii)·y_i: one multiply-add on the chain to row i + 1.
            near = (i as u32 + 1, v[0] * di, y);
            1
        } else {
            near.0 = u32::MAX;
            0
        };
        for (&cp, &vp) in c[far..].iter().zip(&v[far..]) {
            // SAFETY: factor indices are < n (checked by `TriSolve::check_indices`) and
            // xi.len() == n K (asserted above).
            let x = unsafe { &mut *(xi.as_mut_ptr().add(cp as usize * K) as *mut [f64; K]) };
            for j in 0..K {
                x[j] -= vp * w[j];
            }
        }
    }
}

/// `rhs_j − Σ_p v[p]·x_j[c[p]]` for the `K` vectors of the row-interleaved `xi`, with the
/// entry nearest the diagonal (the last of an `L` row, the first of a `U` row:
/// `NEAR_LAST` true / false) subtracted last: that entry reads the row solved just
/// before, so keeping the other entries' sum off this dependency chain shortens the
/// latency of the substitution to one multiply and one subtraction per row. `prev` is
/// the row solved last with its values: when it is the near entry, its values are taken
/// from registers instead of being reloaded (the store-to-load round trip through
/// memory would otherwise sit on the dependency chain). The order of operations per
/// vector does not depend on `K`.
///
/// # Safety
/// Every `c[p] < xi.len() / K`.
#[inline(always)]
unsafe fn eliminate<const K: usize, const NEAR_LAST: bool>(
    c: &[u32],
    v: &[f64],
    xi: &[f64],
    rhs: [f64; K],
    prev: (u32, [f64; K]),
) -> [f64; K] {
    let m = c.len();
    if m == 0 {
        return rhs;
    }
    let (far_c, far_v, near_c, near_v) = if NEAR_LAST {
        (&c[..m - 1], &v[..m - 1], c[m - 1], v[m - 1])
    } else {
        (&c[1..], &v[1..], c[0], v[0])
    };
    // SAFETY: `far_c` and `near_c` are indices of `c` (caller's contract).
    let far = unsafe { sparse_dot::<K>(far_c, far_v, xi) };
    let x = if near_c == prev.0 {
        prev.1
    } else {
        // SAFETY: as above.
        unsafe { *load_k::<K>(xi, near_c) }
    };
    std::array::from_fn(|j| (rhs[j] - far[j]) - near_v * x[j])
}

/// `[Σ v[p]·x_j[c[p]] for j in 0..K]` on the row-interleaved `xi` (`x_j[c] = xi[c K + j]`;
/// `K = 1` is a plain vector), each with four partial sums (27-point stencils: 12 entries
/// a row off the critical entry). The summation order per vector does not depend on `K`.
///
/// # Safety
/// Every `c[p] < xi.len() / K`.
#[inline(always)]
unsafe fn sparse_dot<const K: usize>(c: &[u32], v: &[f64], xi: &[f64]) -> [f64; K] {
    let mut acc = [[0.0f64; K]; 4];
    let mut cc = c.chunks_exact(4);
    let mut vc = v.chunks_exact(4);
    for (ci, vi) in (&mut cc).zip(&mut vc) {
        for u in 0..4 {
            // SAFETY: ci[u] is an index of `c` (caller's contract).
            let x = unsafe { load_k::<K>(xi, ci[u]) };
            for j in 0..K {
                acc[u][j] += vi[u] * x[j];
            }
        }
    }
    let mut tail = [0.0f64; K];
    for (&ci, &vi) in cc.remainder().iter().zip(vc.remainder()) {
        // SAFETY: as above.
        let x = unsafe { load_k::<K>(xi, ci) };
        for j in 0..K {
            tail[j] += vi * x[j];
        }
    }
    std::array::from_fn(|j| (acc[0][j] + acc[1][j]) + (acc[2][j] + acc[3][j]) + tail[j])
}

/// The `K` interleaved entries of row `c` of `xi`, without bounds check (measured: the
/// checks cost 40 % of the blocked substitution with k = 4 on lap3d:40).
///
/// # Safety
/// `(c + 1) K <= xi.len()`.
#[inline(always)]
unsafe fn load_k<const K: usize>(xi: &[f64], c: u32) -> &[f64; K] {
    debug_assert!((c as usize + 1) * K <= xi.len());
    // SAFETY: the K entries from c K are inside `xi` (caller's contract); `[f64; K]` has
    // the alignment of `f64`.
    unsafe { &*(xi.as_ptr().add(c as usize * K) as *const [f64; K]) }
}

/// In-place ILU(0) (IKJ variant, Saad Algorithm 10.4) of `A − σI` on the arrays of
/// [`TriSolve::shifted_pattern`] (values of `A − σI`, the diagonal in `dinv`), which it
/// turns into the factors. `pos` is an all-`usize::MAX` work array of length n, restored
/// on return. The tiny-pivot threshold of row `i` uses `‖row_i(A − σI)‖_∞`, taken
/// before the row is eliminated. Returns the number of perturbed pivots.
fn ilu0_in_place(
    t: &mut TriSolve,
    pivot_tol: f64,
    pos: &mut [usize],
) -> Result<usize, PrecondError> {
    let n = t.dinv.len();
    let mut perturbed = 0;
    for i in 0..n {
        let (lo, hi) = (t.l_ptr[i], t.l_ptr[i + 1]);
        let ur = t.u_row(i);
        let mut d = t.dinv[i];
        let row_norm = t.l_val[lo..hi]
            .iter()
            .chain(&t.u_val[ur.clone()])
            .fold(d.abs(), |m, v| m.max(v.abs()));
        // Columns of the row: L entries (< i) index `l_val`, U entries (> i) `u_val`.
        for p in lo..hi {
            pos[t.l_idx[p] as usize] = p;
        }
        for p in ur.clone() {
            pos[t.u_idx[p] as usize] = p;
        }
        for p in lo..hi {
            let k = t.l_idx[p] as usize;
            let lik = t.l_val[p] * t.dinv[k];
            t.l_val[p] = lik;
            for q in t.u_row(k) {
                let j = t.u_idx[q] as usize;
                let uq = t.u_val[q];
                if j == i {
                    d -= lik * uq;
                } else {
                    let pj = pos[j];
                    if pj != usize::MAX {
                        if j < i {
                            t.l_val[pj] -= lik * uq;
                        } else {
                            t.u_val[pj] -= lik * uq;
                        }
                    }
                }
            }
        }
        for p in lo..hi {
            pos[t.l_idx[p] as usize] = usize::MAX;
        }
        for p in ur.clone() {
            pos[t.u_idx[p] as usize] = usize::MAX;
        }
        let (u, replaced) = guard_pivot(d, row_norm, pivot_tol, i)?;
        perturbed += usize::from(replaced);
        t.dinv[i] = 1.0 / u;
        let finite = t.l_val[lo..hi]
            .iter()
            .chain(&t.u_val[ur])
            .all(|v| v.is_finite());
        if !finite || !t.dinv[i].is_finite() {
            return Err(PrecondError::FactorOverflow { row: i });
        }
    }
    Ok(perturbed)
}

/// In-place ILU(0) of a symmetric `A − σI` as the incomplete `L D Lᵀ` it is (`U` only,
/// `L = (D⁻¹ U)ᵀ`): [`ilu0_in_place`] with each multiplier `l_ik = u_ki / u_kk` read from
/// the finished row `k` instead of being eliminated, and the updates of the `L` part
/// skipped. `t` holds `U`'s pattern and values of `A − σI` with the diagonal in `dinv`
/// ([`TriSolve::shifted_pattern`] with `sym`); the tiny-pivot threshold of row `i` uses
/// `‖row_i(A − σI)‖_∞`, its lower part read from `a`. The columns of `U` are indexed in
/// transient arrays (`n + 1` offsets and 12 bytes an entry); `pos` (all `usize::MAX`,
/// length n) is restored on return. Returns the number of perturbed pivots.
fn ildl0_in_place(
    t: &mut TriSolve,
    a: &CsrMatrix,
    pivot_tol: f64,
    pos: &mut [usize],
) -> Result<usize, PrecondError> {
    let n = t.dinv.len();
    // Column i of U: the rows k < i holding u_ki (increasing) and the entries' places.
    let mut cptr = vec![0usize; n + 1];
    for &c in &t.u_idx {
        cptr[c as usize + 1] += 1;
    }
    for i in 0..n {
        cptr[i + 1] += cptr[i];
    }
    let mut crow = vec![0u32; t.u_idx.len()];
    let mut cat = vec![0usize; t.u_idx.len()];
    pos.copy_from_slice(&cptr[..n]);
    for k in 0..n {
        for q in t.u_row(k) {
            let c = t.u_idx[q] as usize;
            crow[pos[c]] = k as u32;
            cat[pos[c]] = q;
            pos[c] += 1;
        }
    }
    pos.fill(usize::MAX);
    let mut perturbed = 0;
    for i in 0..n {
        let ur = t.u_row(i);
        let mut d = t.dinv[i];
        let (cols, vals) = a.row(i);
        let lo = cols.partition_point(|&c| (c as usize) < i);
        let row_norm = vals[..lo]
            .iter()
            .chain(&t.u_val[ur.clone()])
            .fold(d.abs(), |m, v| m.max(v.abs()));
        for p in ur.clone() {
            pos[t.u_idx[p] as usize] = p;
        }
        for s in cptr[i]..cptr[i + 1] {
            let (k, q) = (crow[s] as usize, cat[s]);
            let uki = t.u_val[q];
            let lik = uki * t.dinv[k];
            d -= lik * uki;
            // The rest of row k lies right of column i (increasing columns).
            for q2 in q + 1..t.u_row(k).end {
                let pj = pos[t.u_idx[q2] as usize];
                if pj != usize::MAX {
                    t.u_val[pj] -= lik * t.u_val[q2];
                }
            }
        }
        for p in ur.clone() {
            pos[t.u_idx[p] as usize] = usize::MAX;
        }
        let (u, replaced) = guard_pivot(d, row_norm, pivot_tol, i)?;
        perturbed += usize::from(replaced);
        t.dinv[i] = 1.0 / u;
        if !t.u_val[ur].iter().all(|v| v.is_finite()) || !t.dinv[i].is_finite() {
            return Err(PrecondError::FactorOverflow { row: i });
        }
    }
    Ok(perturbed)
}

/// Whether `A = Aᵀ` entry for entry: the same pattern and the same values (`==`), which
/// is what the symmetric storage of ILU(0) needs (a matrix symmetric only up to
/// rounding is factored as a general one).
fn is_exactly_symmetric(a: &CsrMatrix) -> bool {
    if a.ncols() != a.nrows() {
        return false;
    }
    let mut same = true;
    matrices::info::for_each_mirror_pair(a, |v, m| same &= m == Some(v));
    same
}

/// ILU(0): incomplete LU of `A − σI` restricted to the pattern of `A` (plus the diagonal).
///
/// For an exactly symmetric `A` the factors satisfy `U = D Lᵀ`, so `M` is symmetric
/// (usable in CG; definite when the pivots are positive), and only `U` and `D` are
/// computed and stored: half the memory of the general factors (see [`LuFactors`]). The pattern is analysed once; [`Ilu0::refactor`] redoes only
/// the numeric factorization (for a new shift or new values on the same pattern). The
/// factors are the only storage kept: the work arrays of a refactorization are
/// allocated by the first one and reused by the next.
#[derive(Debug, Clone)]
pub struct Ilu0 {
    lu: LuFactors,
    /// Values (`l_val`, `u_val`, `dinv`) and `pos` work array of [`Ilu0::refactor`],
    /// `None` until the first refactorization.
    work: Option<Box<RefactorWork>>,
    pivot_tol: f64,
    diag_shift: f64,
    shift: f64,
    perturbed: usize,
}

/// Work arrays of [`Ilu0::refactor`]: the new values are computed here and swapped in
/// on success, so that on error the factors stay as they were.
#[derive(Debug, Clone)]
struct RefactorWork {
    l_val: Vec<f64>,
    u_val: Vec<f64>,
    dinv: Vec<f64>,
    pos: Vec<usize>,
}

impl Ilu0 {
    /// Factors `A − shift·I`.
    ///
    /// Memory: the factors (about `nnz(A)` off-diagonal entries of 12 bytes and 24 bytes
    /// a row; half the entries for an exactly symmetric `A`) and, while factoring, `n`
    /// indices (symmetric: and 12 bytes per entry of `U`); `A` is not copied.
    ///
    /// # Errors
    /// [`PrecondError::NotSquare`], [`PrecondError::NonFinite`],
    /// [`PrecondError::NonFiniteShift`], [`PrecondError::InvalidParameter`],
    /// [`PrecondError::ZeroPivot`] (zero row, or zero pivot with `pivot_tol = 0`),
    /// [`PrecondError::FactorOverflow`].
    pub fn new(a: &CsrMatrix, shift: f64, params: &PivotParams) -> Result<Self, PrecondError> {
        check_pivot_tol(params.pivot_tol)?;
        check_nonneg("diag_shift", params.diag_shift)?;
        check_square_finite(a, shift)?;
        Self::factor(a, shift, params, is_exactly_symmetric(a))
    }

    /// [`Ilu0::new`] in the general storage (`L` and `U`) even when `A` is symmetric:
    /// twice the memory, the forward substitution in gather form.
    ///
    /// # Errors
    /// As [`Ilu0::new`].
    pub fn new_general(
        a: &CsrMatrix,
        shift: f64,
        params: &PivotParams,
    ) -> Result<Self, PrecondError> {
        check_pivot_tol(params.pivot_tol)?;
        check_nonneg("diag_shift", params.diag_shift)?;
        check_square_finite(a, shift)?;
        Self::factor(a, shift, params, false)
    }

    /// [`Ilu0::new`] after its checks, in the symmetric storage when `sym`.
    fn factor(
        a: &CsrMatrix,
        shift: f64,
        params: &PivotParams,
        sym: bool,
    ) -> Result<Self, PrecondError> {
        let mut tri = TriSolve::shifted_pattern(a, shift, params.diag_shift, sym);
        let mut pos = vec![usize::MAX; a.nrows()];
        let perturbed = if sym {
            ildl0_in_place(&mut tri, a, params.pivot_tol, &mut pos)?
        } else {
            ilu0_in_place(&mut tri, params.pivot_tol, &mut pos)?
        };
        drop(pos);
        Ok(Self {
            lu: LuFactors::from_tri(tri),
            work: None,
            pivot_tol: params.pivot_tol,
            diag_shift: params.diag_shift,
            shift,
            perturbed,
        })
    }

    /// Numeric refactorization for `A − shift·I` (same `diag_shift`), where `A` has the same order and its
    /// pattern is contained in the stored one (typically the same matrix with a new
    /// shift). The first call allocates its work arrays (one more set of values and `n`
    /// indices); later calls reuse them and do not allocate, except for the transient
    /// column index of a symmetric factorization. Symmetric factors and an `A` that is
    /// not exactly symmetric give a general factorization of `A`, as [`Ilu0::new`] does.
    ///
    /// # Errors
    /// [`PrecondError::SizeMismatch`], [`PrecondError::PatternMismatch`],
    /// [`PrecondError::NonFinite`], [`PrecondError::NonFiniteShift`] and the factorization
    /// errors of [`Ilu0::new`]. On error `self` keeps its previous factors.
    pub fn refactor(&mut self, a: &CsrMatrix, shift: f64) -> Result<(), PrecondError> {
        let n = self.lu.n;
        if a.nrows() != n || a.ncols() != n {
            return Err(PrecondError::SizeMismatch {
                what: "ILU(0) refactor order",
                expected: n,
                got: a.nrows(),
            });
        }
        if !shift.is_finite() {
            return Err(PrecondError::NonFiniteShift { shift });
        }
        if self.lu.tri.sym && !is_exactly_symmetric(a) {
            self.lu.tri.check_sym_pattern(a)?;
            let params = PivotParams {
                pivot_tol: self.pivot_tol,
                diag_shift: self.diag_shift,
            };
            *self = Ilu0::new(a, shift, &params)?;
            return Ok(());
        }
        let t = &mut self.lu.tri;
        let sym = t.sym;
        let w = self.work.get_or_insert_with(|| {
            Box::new(RefactorWork {
                l_val: vec![0.0; t.l_val.len()],
                u_val: vec![0.0; t.u_val.len()],
                dinv: vec![0.0; n],
                pos: vec![usize::MAX; n],
            })
        });
        // The new values of A − σI go into the work arrays, swapped in for the
        // factorization and swapped back on error.
        for i in 0..n {
            // Symmetric: no L values (a lower entry mirrors an upper one, checked there).
            let (lo, hi) = if sym {
                (0, 0)
            } else {
                (t.l_ptr[i], t.l_ptr[i + 1])
            };
            let ur = t.u_row(i);
            w.l_val[lo..hi].fill(0.0);
            w.u_val[ur.clone()].fill(0.0);
            let mut diag = 0.0;
            let (mut pl, mut pu) = (lo, ur.start);
            let (cols, vals) = a.row(i);
            for (&c, &v) in cols.iter().zip(vals) {
                if !v.is_finite() {
                    return Err(PrecondError::NonFinite {
                        row: i,
                        col: c as usize,
                    });
                }
                let cu = c as usize;
                let found = if cu < i && sym {
                    true
                } else if cu < i {
                    while pl < hi && t.l_idx[pl] < c {
                        pl += 1;
                    }
                    let hit = pl < hi && t.l_idx[pl] == c;
                    if hit {
                        w.l_val[pl] = v;
                    }
                    hit
                } else if cu > i {
                    while pu < ur.end && t.u_idx[pu] < c {
                        pu += 1;
                    }
                    let hit = pu < ur.end && t.u_idx[pu] == c;
                    if hit {
                        w.u_val[pu] = v;
                    }
                    hit
                } else {
                    diag = v;
                    true
                };
                if !found {
                    return Err(PrecondError::PatternMismatch { row: i, col: cu });
                }
            }
            w.dinv[i] = (diag - shift) * (1.0 + self.diag_shift);
        }
        let swap = |t: &mut TriSolve, w: &mut RefactorWork| {
            std::mem::swap(&mut t.l_val, &mut w.l_val);
            std::mem::swap(&mut t.u_val, &mut w.u_val);
            std::mem::swap(&mut t.dinv, &mut w.dinv);
        };
        swap(t, w);
        let done = if sym {
            ildl0_in_place(t, a, self.pivot_tol, &mut w.pos)
        } else {
            ilu0_in_place(t, self.pivot_tol, &mut w.pos)
        };
        match done {
            Ok(perturbed) => {
                self.shift = shift;
                self.perturbed = perturbed;
                Ok(())
            }
            Err(e) => {
                swap(t, w);
                w.pos.fill(usize::MAX);
                Err(e)
            }
        }
    }

    /// The factors.
    pub fn factors(&self) -> &LuFactors {
        &self.lu
    }

    /// The current shift σ.
    pub fn shift(&self) -> f64 {
        self.shift
    }

    /// Pivots replaced by the tiny-pivot rule in the last factorization.
    pub fn perturbed_pivots(&self) -> usize {
        self.perturbed
    }
}

impl Preconditioner for Ilu0 {
    fn nrows(&self) -> usize {
        self.lu.n
    }
    fn apply_block(&self, r: &[f64], z: &mut [f64], k: usize) {
        self.lu.apply_block(r, z, k)
    }
    fn work_per_vector(&self) -> f64 {
        self.lu.work_per_vector()
    }
}

/// ILU(0) stored as its pivots alone (D-ILU; Saad, *Iterative Methods*, §10.3.3):
/// when the factorization of an exactly symmetric `A − σI` updates no off-diagonal
/// entry (no fill path inside the pattern: 5- and 7-point stencils in natural
/// order), its factors are `M = (D + L_A) D⁻¹ (D + U_A)` with `L_A` and `U_A` the
/// strictly lower and upper parts of `A` itself. They are read from `A`, borrowed,
/// instead of a copy: 12 bytes less per stored entry of `U` and 8 per row (40 MB on
/// lap3d:100). Same `M` as the [`Ilu0`] it comes from, to rounding.
#[derive(Debug, Clone)]
pub struct DiagonalIlu0<'a> {
    a: &'a CsrMatrix,
    /// `1 / d_i`, the pivots' inverses.
    dinv: Vec<f64>,
    /// Position of the diagonal entry within each row of `a`.
    diag_at: Vec<u32>,
    scratch: Scratch,
}

impl<'a> DiagonalIlu0<'a> {
    /// The D-ILU form of `f`, an ILU(0) of `a − σI` in the symmetric storage (which
    /// [`Ilu0::new`] chooses for an exactly symmetric `a`), when its `U` is the
    /// strictly upper part of `a` bit for bit and every row of `a` stores its
    /// diagonal; else `None` (keep `f`). The strictly lower part is read from `a`:
    /// `f` must be a factorization of `a` itself, not of another matrix with the
    /// same upper triangle.
    pub fn from_ilu0(f: &Ilu0, a: &'a CsrMatrix) -> Option<Self> {
        let t = &f.lu.tri;
        let n = a.nrows();
        if !t.sym || n != f.lu.n || a.ncols() != n {
            return None;
        }
        let same_bits =
            |x: &[f64], y: &[f64]| x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits());
        let mut diag_at = Vec::with_capacity(n);
        for i in 0..n {
            let (cols, vals) = a.row(i);
            let at = cols.partition_point(|&c| (c as usize) < i);
            if cols.get(at) != Some(&(i as u32)) {
                return None;
            }
            let u = t.u_row(i);
            if t.u_idx[u.clone()] != cols[at + 1..] || !same_bits(&t.u_val[u], &vals[at + 1..]) {
                return None;
            }
            diag_at.push(u32::try_from(at).ok()?);
        }
        Some(Self {
            a,
            dinv: t.dinv.clone(),
            diag_at,
            scratch: Scratch,
        })
    }

    /// Forward sweep `(D + L_A) v = r` and backward sweep `(D + U_A) y = D v` for
    /// `K` vectors in the row-interleaved `xi` (`K = 1`: a plain vector, which may
    /// be the output), with the entry next to the diagonal kept in registers as in
    /// [`eliminate`] and `A` prefetched when `PF`; column `j` of `y` also goes to
    /// `z[j n..]` when given. The body of [`dilu_sweeps`].
    #[inline(always)]
    fn sweeps<const K: usize, const PF: bool>(
        &self,
        rc: [&[f64]; K],
        xi: &mut [f64],
        mut z: Option<&mut [f64]>,
    ) {
        let n = self.dinv.len();
        assert_eq!(xi.len(), n * K, "D-ILU: scratch length");
        assert!(rc.iter().all(|c| c.len() == n), "D-ILU: r has wrong length");
        let (ip, idx, val) = (self.a.indptr(), self.a.indices(), self.a.data());
        let mut prev = (u32::MAX, [0.0; K]);
        let mut pf = 0;
        for i in 0..n {
            let (lo, at) = (ip[i], ip[i] + self.diag_at[i] as usize);
            if PF {
                prefetch_ahead(idx, val, lo, &mut pf);
            }
            let rhs = std::array::from_fn(|j| rc[j][i]);
            // SAFETY: the column indices of the square `a` are < n (CsrMatrix
            // invariant) and xi.len() == n K (asserted above).
            let w = unsafe { eliminate::<K, true>(&idx[lo..at], &val[lo..at], xi, rhs, prev) };
            let di = self.dinv[i];
            let v: [f64; K] = std::array::from_fn(|j| w[j] * di);
            xi[i * K..(i + 1) * K].copy_from_slice(&v);
            prev = (i as u32, v);
        }
        prev.0 = u32::MAX;
        pf = idx.len();
        for i in (0..n).rev() {
            let (at, hi) = (ip[i] + self.diag_at[i] as usize + 1, ip[i + 1]);
            if PF {
                prefetch_behind(idx, val, at, &mut pf);
            }
            // SAFETY: as above. The sum −Σ_{c>i} a_ic y_c, then y_i = v_i − d_i⁻¹ Σ.
            let s =
                unsafe { eliminate::<K, false>(&idx[at..hi], &val[at..hi], xi, [0.0; K], prev) };
            let di = self.dinv[i];
            let y: [f64; K] = std::array::from_fn(|j| xi[i * K + j] + di * s[j]);
            xi[i * K..(i + 1) * K].copy_from_slice(&y);
            if let Some(z) = z.as_deref_mut() {
                for j in 0..K {
                    z[j * n + i] = y[j];
                }
            }
            prev = (i as u32, y);
        }
    }
}

crate::avx2_dispatch! {
    /// [`DiagonalIlu0::sweeps`] of `f` (AVX2 where present).
    fn dilu_sweeps<const K: usize, const PF: bool>(
        f: &DiagonalIlu0<'_>,
        rc: [&[f64]; K],
        xi: &mut [f64],
        z: Option<&mut [f64]>,
    ) = DiagonalIlu0::sweeps;
}

/// One group of vectors of [`DiagonalIlu0`]'s `apply_block`.
struct DiluGroup<'a, 'm> {
    f: &'a DiagonalIlu0<'m>,
    r: &'a [f64],
    z: &'a mut [f64],
    xi: &'a mut [f64],
}

impl ColumnGroup for DiluGroup<'_, '_> {
    fn run<const K: usize>(&mut self, j0: usize) {
        let n = self.f.dinv.len();
        let (r, z) = (
            &self.r[j0 * n..(j0 + K) * n],
            &mut self.z[j0 * n..(j0 + K) * n],
        );
        let pf = self.f.a.nnz() >= STREAM_ENTRIES;
        if K == 1 {
            // In place: each sweep reads only rows it has already written.
            match pf {
                true => dilu_sweeps::<1, true>(self.f, [r], z, None),
                false => dilu_sweeps::<1, false>(self.f, [r], z, None),
            }
        } else {
            let (rc, xi) = (columns::<K>(r, n, 0), &mut self.xi[..n * K]);
            match pf {
                true => dilu_sweeps::<K, true>(self.f, rc, xi, Some(z)),
                false => dilu_sweeps::<K, false>(self.f, rc, xi, Some(z)),
            }
        }
    }
}

impl Preconditioner for DiagonalIlu0<'_> {
    fn nrows(&self) -> usize {
        self.dinv.len()
    }
    /// The off-diagonal entries of A, read in place, and 3 words a row.
    fn work_per_vector(&self) -> f64 {
        let n = self.dinv.len();
        1.5 * self.a.nnz().saturating_sub(n) as f64 + 3.0 * n as f64
    }
    /// Groups of up to 8 vectors are swept together through a row-interleaved
    /// scratch copy, as [`LuFactors`] does.
    fn apply_block(&self, r: &[f64], z: &mut [f64], k: usize) {
        let n = self.dinv.len();
        assert_eq!(r.len(), n * k, "D-ILU: r has wrong length");
        assert_eq!(z.len(), n * k, "D-ILU: z has wrong length");
        if n == 0 || k == 0 {
            return;
        }
        let len = if k == 1 { 0 } else { n * k.min(MAX_GROUP) };
        self.scratch.with(len, |xi| {
            for_column_groups(k, &mut DiluGroup { f: self, r, z, xi });
        });
    }
}

/// ILUT(p, τ): Saad's dual-threshold incomplete LU of `A − σI` (Algorithm 10.6, row-wise
/// IKJ elimination with a sparse work row).
///
/// Dropping, with `τ_i = drop_tol · ‖row_i(A − σI)‖₂`: a multiplier `l_ik` with
/// `|l_ik| < τ_i` is dropped before it is used; after elimination, entries below `τ_i`
/// are dropped and only the `fill` largest of the `L` part and of the `U` part are kept
/// (the diagonal is always kept). With `drop_tol = 0` only the count rule applies, as in
/// the paper's ILUT(20, 0). Because the pattern depends on the values, a new shift means a
/// full refactorization ([`Ilut::new`]).
#[derive(Debug, Clone)]
pub struct Ilut {
    lu: LuFactors,
    shift: f64,
    perturbed: usize,
}

impl Ilut {
    /// Factors `A − shift·I`.
    ///
    /// Memory: the factors, and while factoring `O(n)` work arrays; `A` is not copied.
    ///
    /// # Errors
    /// [`PrecondError::NotSquare`], [`PrecondError::NonFinite`],
    /// [`PrecondError::NonFiniteShift`], [`PrecondError::InvalidParameter`] (negative or
    /// non-finite `drop_tol` or `pivot_tol`), [`PrecondError::ZeroPivot`],
    /// [`PrecondError::FactorOverflow`].
    pub fn new(a: &CsrMatrix, shift: f64, params: &IlutParams) -> Result<Self, PrecondError> {
        check_pivot_tol(params.pivot_tol)?;
        check_nonneg("drop_tol", params.drop_tol)?;
        check_nonneg("diag_shift", params.diag_shift)?;
        check_square_finite(a, shift)?;
        let n = a.nrows();
        let p = params.fill;
        // First guess of each triangle's size: half the off-diagonal entries of A.
        let est = (a.nnz() / 2).min(n * p);
        // U rows are stored first to last while factoring (row k is read back when
        // eliminating later rows), reversed at the end.
        let mut t = TriSolve {
            l_ptr: Vec::with_capacity(n + 1),
            l_idx: Vec::with_capacity(est),
            l_val: Vec::with_capacity(est),
            u_ptr: Vec::with_capacity(n + 1),
            u_idx: Vec::with_capacity(est),
            u_val: Vec::with_capacity(est),
            dinv: Vec::with_capacity(n),
            sym: false,
        };
        t.l_ptr.push(0);
        t.u_ptr.push(0);

        let mut w = vec![0.0f64; n];
        let mut mark = vec![false; n];
        let mut touched: Vec<u32> = Vec::new();
        let mut heap: BinaryHeap<Reverse<u32>> = BinaryHeap::new();
        let mut lower: Vec<(u32, f64)> = Vec::new();
        let mut upper: Vec<(u32, f64)> = Vec::new();
        // Row i of A − σI with its diagonal (scaled by 1 + diag_shift).
        let mut row: Vec<(u32, f64)> = Vec::new();
        let mut perturbed = 0;

        for i in 0..n {
            shifted_row(a, i, shift, params.diag_shift, &mut row);
            let norm2 = row.iter().map(|e| e.1 * e.1).sum::<f64>().sqrt();
            let norm_inf = row.iter().fold(0.0f64, |m, e| m.max(e.1.abs()));
            let tau = params.drop_tol * norm2;
            for &(c, v) in &row {
                let cu = c as usize;
                w[cu] = v;
                mark[cu] = true;
                touched.push(c);
                if cu < i {
                    heap.push(Reverse(c));
                }
            }
            lower.clear();
            while let Some(Reverse(k)) = heap.pop() {
                let ku = k as usize;
                let lik = w[ku] * t.dinv[ku];
                if lik == 0.0 || lik.abs() < tau {
                    w[ku] = 0.0;
                    continue;
                }
                lower.push((k, lik));
                for q in t.u_ptr[ku]..t.u_ptr[ku + 1] {
                    let j = t.u_idx[q];
                    let ju = j as usize;
                    if mark[ju] {
                        w[ju] -= lik * t.u_val[q];
                    } else {
                        mark[ju] = true;
                        touched.push(j);
                        w[ju] = -lik * t.u_val[q];
                        if ju < i {
                            heap.push(Reverse(j));
                        }
                    }
                }
            }
            upper.clear();
            for &c in &touched {
                let cu = c as usize;
                if cu > i {
                    let v = w[cu];
                    if v != 0.0 && v.abs() >= tau {
                        upper.push((c, v));
                    }
                }
            }
            keep_largest(&mut lower, p);
            keep_largest(&mut upper, p);
            let (u, replaced) = guard_pivot(w[i], norm_inf, params.pivot_tol, i)?;
            perturbed += usize::from(replaced);
            if lower.iter().chain(upper.iter()).any(|e| !e.1.is_finite()) {
                return Err(PrecondError::FactorOverflow { row: i });
            }
            for &(c, v) in &lower {
                t.l_idx.push(c);
                t.l_val.push(v);
            }
            t.l_ptr.push(t.l_idx.len());
            t.dinv.push(1.0 / u);
            for &(c, v) in &upper {
                t.u_idx.push(c);
                t.u_val.push(v);
            }
            t.u_ptr.push(t.u_idx.len());
            for &c in &touched {
                w[c as usize] = 0.0;
                mark[c as usize] = false;
            }
            touched.clear();
        }
        drop((w, mark, touched, heap, lower, upper, row));
        t.reverse_u_rows();
        t.l_idx.shrink_to_fit();
        t.l_val.shrink_to_fit();
        t.u_idx.shrink_to_fit();
        t.u_val.shrink_to_fit();
        Ok(Self {
            lu: LuFactors::from_tri(t),
            shift,
            perturbed,
        })
    }

    /// The factors.
    pub fn factors(&self) -> &LuFactors {
        &self.lu
    }

    /// The shift σ the factors were computed for.
    pub fn shift(&self) -> f64 {
        self.shift
    }

    /// Pivots replaced by the tiny-pivot rule.
    pub fn perturbed_pivots(&self) -> usize {
        self.perturbed
    }
}

/// Row `i` of `A − shift·I` into `row`, with the diagonal entry present (`−shift` where
/// `A` has none) and multiplied by `1 + diag_shift` (when not 0): the values the
/// factorizations start from, without a shifted copy of `A`.
fn shifted_row(a: &CsrMatrix, i: usize, shift: f64, diag_shift: f64, row: &mut Vec<(u32, f64)>) {
    let (cols, vals) = a.row(i);
    let lo = cols.partition_point(|&c| (c as usize) < i);
    let has_diag = cols.get(lo) == Some(&(i as u32));
    let mut d = if has_diag { vals[lo] - shift } else { -shift };
    if diag_shift != 0.0 {
        d *= 1.0 + diag_shift;
    }
    row.clear();
    row.extend(cols[..lo].iter().copied().zip(vals[..lo].iter().copied()));
    row.push((i as u32, d));
    let hi = lo + usize::from(has_diag);
    row.extend(cols[hi..].iter().copied().zip(vals[hi..].iter().copied()));
}

/// Keeps the `p` entries of largest magnitude, sorted by column.
fn keep_largest(v: &mut Vec<(u32, f64)>, p: usize) {
    if v.len() > p {
        if p == 0 {
            v.clear();
            return;
        }
        v.select_nth_unstable_by(p - 1, |a, b| b.1.abs().total_cmp(&a.1.abs()));
        v.truncate(p);
    }
    v.sort_unstable_by_key(|e| e.0);
}

impl Preconditioner for Ilut {
    fn nrows(&self) -> usize {
        self.lu.n
    }
    fn apply_block(&self, r: &[f64], z: &mut [f64], k: usize) {
        self.lu.apply_block(r, z, k)
    }
    fn work_per_vector(&self) -> f64 {
        self.lu.work_per_vector()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1D Laplacian tridiag(-1, 2, -1): ILU(0) is the exact LU.
    fn lap1d(n: usize) -> CsrMatrix {
        let mut t = Vec::new();
        for i in 0..n {
            t.push((i, i, 2.0));
            if i > 0 {
                t.push((i, i - 1, -1.0));
                t.push((i - 1, i, -1.0));
            }
        }
        CsrMatrix::from_triplets(n, n, &t).unwrap()
    }

    fn dense_solve_check(m: &dyn Preconditioner, a: &CsrMatrix, tol: f64) {
        let n = a.nrows();
        let x: Vec<f64> = (0..n).map(|i| 1.0 + i as f64 * 0.1).collect();
        let mut b = vec![0.0; n];
        a.mul_vec(&x, &mut b);
        let mut z = vec![0.0; n];
        m.apply(&b, &mut z);
        for (zi, xi) in z.iter().zip(&x) {
            assert!((zi - xi).abs() <= tol * xi.abs(), "{zi} vs {xi}");
        }
    }

    #[test]
    fn ilu0_is_exact_on_tridiagonal() {
        let a = lap1d(50);
        let m = Ilu0::new(&a, 0.0, &PivotParams::default()).unwrap();
        dense_solve_check(&m, &a, 1e-12);
        assert_eq!(m.perturbed_pivots(), 0);
        assert!((m.factors().pivot(0) - 2.0).abs() < 1e-15);
        assert!((m.factors().pivot(1) - 1.5).abs() < 1e-15);
    }

    #[test]
    fn ilu0_refactor_matches_new() {
        let a = lap1d(30);
        let mut m = Ilu0::new(&a, 0.0, &PivotParams::default()).unwrap();
        m.refactor(&a, 0.5).unwrap();
        let fresh = Ilu0::new(&a, 0.5, &PivotParams::default()).unwrap();
        assert_eq!(m.factors().tri, fresh.factors().tri);
        // With a diagonal shift alpha: refactor keeps it.
        let pa = PivotParams {
            diag_shift: 0.5,
            ..PivotParams::default()
        };
        let mut ma = Ilu0::new(&a, 0.0, &pa).unwrap();
        assert!((ma.factors().pivot(0) - 3.0).abs() < 1e-15);
        ma.refactor(&a, 0.5).unwrap();
        assert_eq!(
            ma.factors().tri,
            Ilu0::new(&a, 0.5, &pa).unwrap().factors().tri
        );
        assert!((ma.factors().pivot(0) - 2.25).abs() < 1e-15);
        let bad = CsrMatrix::from_triplets(30, 30, &[(0, 5, 1.0)]).unwrap();
        assert_eq!(
            m.refactor(&bad, 0.0),
            Err(PrecondError::PatternMismatch { row: 0, col: 5 })
        );
        // Unchanged after the error.
        assert_eq!(m.factors().tri, fresh.factors().tri);
        assert_eq!(m.shift(), 0.5);
    }

    #[test]
    fn ilu0_refactor_failure_keeps_factors() {
        // pivot_tol = 0: shift 2 makes the first pivot exactly zero.
        let a = lap1d(20);
        let p = PivotParams {
            pivot_tol: 0.0,
            ..PivotParams::default()
        };
        let mut m = Ilu0::new(&a, 0.25, &p).unwrap();
        let before = m.factors().tri.clone();
        assert_eq!(m.refactor(&a, 2.0), Err(PrecondError::ZeroPivot { row: 0 }));
        assert_eq!(m.factors().tri, before);
        assert_eq!(m.shift(), 0.25);
        // The work arrays of the failed call are reused.
        m.refactor(&a, -1.0).unwrap();
        assert_eq!(
            m.factors().tri,
            Ilu0::new(&a, -1.0, &p).unwrap().factors().tri
        );
        m.refactor(&a, 0.25).unwrap();
        assert_eq!(m.factors().tri, before);
    }

    /// 2-D 5-point Laplacian on g × g (stored as `4 − 1` stencil rows).
    fn lap2d(g: usize) -> CsrMatrix {
        let mut t = Vec::new();
        for i in 0..g {
            for j in 0..g {
                let r = i * g + j;
                t.push((r, r, 4.0));
                if i > 0 {
                    t.push((r, r - g, -1.0));
                    t.push((r - g, r, -1.0));
                }
                if j > 0 {
                    t.push((r, r - 1, -1.0));
                    t.push((r - 1, r, -1.0));
                }
            }
        }
        CsrMatrix::from_triplets(g * g, g * g, &t).unwrap()
    }

    /// Exact symmetry by one sweep with a cursor per row: patterns and values,
    /// an unmatched entry on either side, empty rows and missing diagonals.
    #[test]
    fn exact_symmetry_test_checks_patterns_and_values() {
        let m = |t: &[(usize, usize, f64)]| CsrMatrix::from_triplets(4, 4, t).unwrap();
        let sym = [
            (0, 0, 2.0),
            (0, 2, -1.0),
            (2, 0, -1.0),
            (1, 3, 0.5),
            (3, 1, 0.5),
            (2, 3, 4.0),
            (3, 2, 4.0),
        ];
        assert!(is_exactly_symmetric(&m(&sym)));
        let mut value = sym.to_vec();
        value[6].2 = 4.0 + 1e-15;
        assert!(!is_exactly_symmetric(&m(&value)));
        let mut lower_only = sym.to_vec();
        lower_only.push((3, 0, 1.0));
        assert!(!is_exactly_symmetric(&m(&lower_only)));
        let mut upper_only = sym.to_vec();
        upper_only.push((0, 3, 1.0));
        assert!(!is_exactly_symmetric(&m(&upper_only)));
        // A lower entry before the mirror of an upper one in the same row.
        let mut shifted = sym.to_vec();
        shifted.retain(|&(i, j, _)| (i, j) != (2, 0));
        shifted.push((2, 1, -1.0));
        assert!(!is_exactly_symmetric(&m(&shifted)));
        assert!(is_exactly_symmetric(&m(&[])));
    }

    #[test]
    fn symmetric_storage_matches_the_general_factors() {
        // A definite and an indefinite shift (negative pivots), and one that perturbs.
        let a = lap2d(12);
        let n = a.nrows();
        for (shift, pivot_tol) in [(0.0, 1e-8), (1.3, 1e-8), (2.0, 0.3)] {
            let p = PivotParams {
                pivot_tol,
                ..PivotParams::default()
            };
            let s = Ilu0::new(&a, shift, &p).unwrap();
            let g = Ilu0::factor(&a, shift, &p, false).unwrap();
            assert!(s.factors().tri.sym && !g.factors().tri.sym);
            assert_eq!(s.perturbed_pivots(), g.perturbed_pivots());
            // Half the off-diagonal entries.
            assert_eq!(2 * (s.factors().nnz() - n), g.factors().nnz() - n);
            for i in 0..n {
                let (ps, pg) = (s.factors().pivot(i), g.factors().pivot(i));
                assert!(
                    (ps - pg).abs() <= 1e-13 * pg.abs(),
                    "pivot {i}: {ps} vs {pg}"
                );
            }
            // M⁻¹ r: the same to rounding; the blocked sweeps bitwise the single one.
            let k = 5;
            let (r, zs) = same_applications(&s, &g, n, k, 1e-11);
            for j in 0..k {
                let mut z1 = vec![0.0; n];
                s.apply(&r[j * n..(j + 1) * n], &mut z1);
                assert_eq!(z1, zs[j * n..(j + 1) * n]);
            }
        }
    }

    /// Applies `p` and `q` to `k` patterned vectors of `n` rows and checks that they
    /// agree within `tol` times the largest entry of q's; returns the vectors and
    /// p's results.
    fn same_applications(
        p: &dyn Preconditioner,
        q: &dyn Preconditioner,
        n: usize,
        k: usize,
        tol: f64,
    ) -> (Vec<f64>, Vec<f64>) {
        let r: Vec<f64> = (0..n * k).map(|i| ((i * 37) % 101) as f64 - 50.0).collect();
        let (mut zp, mut zq) = (vec![0.0; n * k], vec![0.0; n * k]);
        p.apply_block(&r, &mut zp, k);
        q.apply_block(&r, &mut zq, k);
        let scale = zq.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        for (x, y) in zp.iter().zip(&zq) {
            assert!((x - y).abs() <= tol * scale, "k = {k}: {x} vs {y}");
        }
        (r, zp)
    }

    #[test]
    fn diagonal_form_is_ilu0_where_nothing_fills_in() {
        // 5-point stencil: ILU(0) changes only the pivots (D-ILU).
        let a = lap2d(12);
        let n = a.nrows();
        for shift in [0.0, 1.3] {
            let f = Ilu0::new(&a, shift, &PivotParams::default()).unwrap();
            let d = DiagonalIlu0::from_ilu0(&f, &a).expect("no fill in a 5-point stencil");
            for k in [1, 3, 4, 9] {
                same_applications(&d, &f, n, k, 1e-12);
            }
        }
        // The general storage, and a band of width 2 (row i+1 fills (i, i+2)), keep
        // their factors.
        let g = Ilu0::new_general(&a, 0.0, &PivotParams::default()).unwrap();
        assert!(DiagonalIlu0::from_ilu0(&g, &a).is_none());
        let mut t = Vec::new();
        for i in 0..30 {
            t.push((i, i, 4.0));
            for d in 1..=2 {
                if i >= d {
                    t.push((i, i - d, -1.0));
                    t.push((i - d, i, -1.0));
                }
            }
        }
        let b = CsrMatrix::from_triplets(30, 30, &t).unwrap();
        let fb = Ilu0::new(&b, 0.0, &PivotParams::default()).unwrap();
        assert!(DiagonalIlu0::from_ilu0(&fb, &b).is_none());
        // Factors of another matrix are refused.
        assert!(DiagonalIlu0::from_ilu0(&fb, &lap1d(30)).is_none());
    }

    #[test]
    fn symmetric_factors_fall_back_for_a_nonsymmetric_refactor() {
        let a = lap2d(5);
        let mut m = Ilu0::new(&a, 0.0, &PivotParams::default()).unwrap();
        assert!(m.factors().tri.sym);
        // A slightly non-symmetric matrix with the same pattern: general factors.
        let mut t: Vec<(usize, usize, f64)> = Vec::new();
        for i in 0..a.nrows() {
            let (c, v) = a.row(i);
            for (&c, &v) in c.iter().zip(v) {
                let bump = if (c as usize) > i { 1e-3 } else { 0.0 };
                t.push((i, c as usize, v + bump));
            }
        }
        let b = CsrMatrix::from_triplets(a.nrows(), a.ncols(), &t).unwrap();
        m.refactor(&b, 0.5).unwrap();
        assert!(!m.factors().tri.sym);
        let fresh = Ilu0::new(&b, 0.5, &PivotParams::default()).unwrap();
        assert_eq!(m.factors().tri, fresh.factors().tri);
    }

    #[test]
    fn ilut_with_large_fill_is_exact() {
        // 2D 5-point Laplacian on 6x6: ILUT with fill >= bandwidth and tau = 0 is exact LU.
        let a = lap2d(6);
        let n = a.nrows();
        let m = Ilut::new(
            &a,
            0.0,
            &IlutParams {
                fill: n,
                ..IlutParams::default()
            },
        )
        .unwrap();
        dense_solve_check(&m, &a, 1e-12);
        // ILUT(p=1) keeps at most 1 entry per L row and U row.
        let m1 = Ilut::new(
            &a,
            0.0,
            &IlutParams {
                fill: 1,
                ..IlutParams::default()
            },
        )
        .unwrap();
        assert!(m1.factors().nnz() <= 3 * n);
        // Fill 0 with ILUT is diagonal: the pivots of the diagonal.
        let m0 = Ilut::new(
            &a,
            0.0,
            &IlutParams {
                fill: 0,
                ..IlutParams::default()
            },
        )
        .unwrap();
        assert_eq!(m0.factors().nnz(), n);
        assert_eq!(m0.factors().pivot(7), 4.0);
    }

    #[test]
    fn zero_pivot_is_perturbed_or_reported() {
        // [[0, 1], [1, 0]]: first pivot zero.
        let a = CsrMatrix::from_triplets(2, 2, &[(0, 1, 1.0), (1, 0, 1.0)]).unwrap();
        let m = Ilu0::new(&a, 0.0, &PivotParams::default()).unwrap();
        assert!(m.perturbed_pivots() >= 1);
        assert_eq!(m.factors().pivot(0), super::super::DEFAULT_PIVOT_TOL);
        assert_eq!(
            Ilu0::new(
                &a,
                0.0,
                &PivotParams {
                    pivot_tol: 0.0,
                    ..PivotParams::default()
                }
            )
            .unwrap_err(),
            PrecondError::ZeroPivot { row: 0 }
        );
        let z = CsrMatrix::from_triplets(2, 2, &[(0, 0, 1.0)]).unwrap();
        assert_eq!(
            Ilut::new(&z, 0.0, &IlutParams::default()).unwrap_err(),
            PrecondError::ZeroPivot { row: 1 }
        );
    }
}
