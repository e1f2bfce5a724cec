//! Shared-memory CSR SpMV and block SpMV (rayon, explicit thread count).
//!
//! * [`CsrOperator`]: `y = A x` for a borrowed square [`CsrMatrix`], on exactly
//!   `threads` threads: the caller plus its own rayon pool of `threads - 1`
//!   (`threads == 1`: a plain loop, no pool). Rows are split into `8 × threads`
//!   contiguous blocks of (nearly) equal nonzeros that the threads claim from a shared
//!   counter, so a thread descheduled on a shared machine does not hold the others
//!   back: the caller finishes alone if need be and never waits for a helper that has
//!   not started. Results are bitwise independent of the thread count.
//! * [`spmv_block`]: the same kernels, serial, for one-off products.
//!
//! Block products (`k` column-major vectors) read the matrix once per group of up to
//! 8 vectors: `k` is processed in chunks of 8, 4, 2 and 1 with kernels specialized at
//! compile time, so `k = 4` streams the matrix once instead of four times (the
//! motivation for block Jacobi-Davidson, `003_*` §3).
//!
//! Groups of 2 to 8 vectors are first copied into an interleaved buffer
//! (`xi[c * K + j]`), so one gathered cache line serves all `K` vectors and vector
//! lengths that are powers of two (e.g. `64³`) cannot make the `K` gathers collide in
//! the same cache sets — with plain column-major gathers that collision made `k = 4`
//! barely faster than four single products. The copy costs `2 k n` doubles of traffic,
//! small against the matrix.
//!
//! Row bounds and the pool are set up at construction. Per product (and per group of
//! vectors) the only heap allocations are one small `Arc`'d block counter and rayon's
//! boxed job per helper thread (none for one thread); the
//! interleave buffer (`ncols × min(k, 8)` doubles) is the calling thread's
//! [`crate::scratch`] buffer, shared with the blocked preconditioners and grown on
//! the first block apply. Inner loops never allocate.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use matrices::{CsrMatrix, RowPartition};
use thiserror::Error;

use crate::operator::Operator;
pub use crate::pages::{advise_huge_pages, huge_page_vec};

/// Why an SpMV operator could not be built.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SpmvError {
    /// `threads == 0` was requested.
    #[error("thread count must be at least 1")]
    ZeroThreads,
    /// The matrix is not square (an [`Operator`] maps a space to itself).
    #[error("operator matrix must be square, got {nrows} x {ncols}")]
    NotSquare { nrows: usize, ncols: usize },
    /// The matrix arrays break the [`CsrMatrix`] invariants (possible only through
    /// `CsrMatrix::from_parts_unchecked`); checked once so the kernels may skip bounds checks.
    #[error("invalid CSR matrix: {reason}")]
    InvalidMatrix { reason: String },
    /// rayon could not start the thread pool.
    #[error("could not build a rayon pool of {threads} threads: {reason}")]
    ThreadPool { threads: usize, reason: String },
}

/// Checks the structural invariants the unchecked kernels rely on: `indptr` has
/// `nrows + 1` non-decreasing entries from 0 to `nnz`, and every column index is
/// `< ncols`. O(nnz), done once per operator.
pub(crate) fn validate(a: &CsrMatrix) -> Result<(), SpmvError> {
    let ip = a.indptr();
    let nnz = a.nnz();
    if ip.len() != a.nrows() + 1 || ip[0] != 0 || ip[a.nrows()] != nnz || a.indices().len() != nnz {
        return Err(SpmvError::InvalidMatrix {
            reason: "indptr does not match nrows / nnz".into(),
        });
    }
    if let Some(r) = ip.windows(2).position(|w| w[1] < w[0]) {
        return Err(SpmvError::InvalidMatrix {
            reason: format!("indptr decreases at row {r}"),
        });
    }
    let ncols = a.ncols();
    if let Some(p) = a.indices().iter().position(|&c| c as usize >= ncols) {
        return Err(SpmvError::InvalidMatrix {
            reason: format!(
                "column index {} at position {p} >= ncols {ncols}",
                a.indices()[p]
            ),
        });
    }
    Ok(())
}

/// Raw CSR arrays of a matrix whose invariants were checked by [`validate`] (or are
/// re-checked per access when `CHECKED`).
#[derive(Clone, Copy)]
pub(crate) struct Csr<'m> {
    pub indptr: &'m [usize],
    pub indices: &'m [u32],
    pub data: &'m [f64],
    pub ncols: usize,
}

impl<'m> Csr<'m> {
    pub(crate) fn of(a: &'m CsrMatrix) -> Self {
        Self {
            indptr: a.indptr(),
            indices: a.indices(),
            data: a.data(),
            ncols: a.ncols(),
        }
    }
}

/// Stored entries (12 bytes each) from which the single-vector kernels (SpMV, the ILU
/// substitutions) prefetch: below, the arrays stay in the outer caches between
/// applications and the prefetch bookkeeping only lengthens the loop (lap3d:40: SpMV,
/// 0.44 M entries, 0.36 ms a product without, 0.37–0.41 ms with; ILU factors, 0.38 M
/// entries, 0.29 against 0.34 ms). Above, in whole solves with nev = 1 on
/// stencil27:48: ILU 2.2 ms a substitution with the prefetch, 3.3 ms without. The
/// blocked ILU sweeps use the same threshold.
pub(crate) const STREAM_ENTRIES: usize = 1 << 20;

/// How many stored entries ahead of the current row the matrix stream is prefetched.
const PREFETCH_AHEAD: usize = 256;

/// Row blocks per thread of a threaded [`Engine`] (balanced by nonzeros).
const BLOCKS_PER_THREAD: usize = 8;

/// Prefetches the values and column indices of entries `p..p + 32` into all cache
/// levels. Not with the non-temporal hint: on Intel it keeps the lines out of the
/// last-level cache, so a matrix that would stay there between products (the
/// 260 MiB L3 of our Xeon holds the matrix, the ILU factors and the basis of
/// stencil27:48) is read from memory every time. Measured in whole solves there
/// (stencil27:48, nev = 4, medians of 3): wall 1.23 s with the non-temporal hint,
/// 0.91 s with this one, block SpMV 1.73 → 0.97 ms per vector. Single vectors
/// prefetch only from [`STREAM_ENTRIES`] entries on, 32 entries at a time rather than
/// six prefetches a row (which stalled the loop on lap3d:64: one product 4.4–4.7 ms
/// with them, 2.7–4.3 ms without); whole solves with nev = 1, medians of 4, SpMV
/// per product: stencil27:48 2.4 → 2.0 ms, lap3d:64 1.59 → 1.51 ms.
#[inline(always)]
fn prefetch_matrix(a: Csr<'_>, p: usize) {
    prefetch_stream(a.indices, a.data, p);
}

/// Prefetches entries `p..p + 32` of a stream of column indices and values into all
/// cache levels (see [`prefetch_matrix`]); also used by the ILU substitutions.
#[inline(always)]
pub(crate) fn prefetch_stream(indices: &[u32], data: &[f64], p: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let d = data.as_ptr();
        let i = indices.as_ptr();
        // SAFETY: `_mm_prefetch` is only a hint: it never faults and reads nothing
        // observable, even for addresses outside any allocation; `wrapping_add` keeps
        // the pointer arithmetic itself defined. SSE is part of the x86_64 baseline.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(d.wrapping_add(p) as *const i8);
            _mm_prefetch::<_MM_HINT_T0>(d.wrapping_add(p + 8) as *const i8);
            _mm_prefetch::<_MM_HINT_T0>(d.wrapping_add(p + 16) as *const i8);
            _mm_prefetch::<_MM_HINT_T0>(d.wrapping_add(p + 24) as *const i8);
            _mm_prefetch::<_MM_HINT_T0>(i.wrapping_add(p) as *const i8);
            _mm_prefetch::<_MM_HINT_T0>(i.wrapping_add(p + 16) as *const i8);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (indices, data, p);
    }
}

#[inline(always)]
fn gather<const CHECKED: bool>(x: &[f64], c: u32) -> f64 {
    if CHECKED {
        x[c as usize]
    } else {
        // SAFETY: callers of the unchecked kernels guarantee (a) every column index of
        // the matrix is < ncols, verified once by `validate` on a matrix that stays
        // immutably borrowed (so its pattern cannot change), and (b) x.len() >= ncols,
        // asserted at the top of `rows_kernel_body`.
        unsafe { *x.get_unchecked(c as usize) }
    }
}

crate::avx2_dispatch! {
    /// `y[j][i - rows.start] = Σ_p A[i, p] x[j][p]` for rows `rows` and `K` vectors,
    /// reading each matrix entry once ([`rows_kernel_body`], AVX2 where present).
    fn rows_kernel<const K: usize, const CHECKED: bool>(
        a: Csr<'_>,
        rows: Range<usize>,
        x: [&[f64]; K],
        y: [&mut [f64]; K],
    ) = rows_kernel_body;
}

/// The body of [`rows_kernel`].
#[inline(always)]
fn rows_kernel_body<const K: usize, const CHECKED: bool>(
    a: Csr<'_>,
    rows: Range<usize>,
    x: [&[f64]; K],
    y: [&mut [f64]; K],
) {
    for xj in &x {
        assert!(xj.len() >= a.ncols, "spmv: x vector shorter than ncols");
    }
    let n = rows.len();
    for yj in &y {
        assert_eq!(yj.len(), n, "spmv: y slice does not match the row range");
    }
    let ip = &a.indptr[rows.start..=rows.end];
    if K == 1 {
        let x0 = x[0];
        let y0: &mut [f64] = y[0];
        // Prefetched 32 entries at a time from `pf` on, so that short rows (7 entries
        // on lap3d) do not issue a prefetch each.
        let stream = a.data.len() >= STREAM_ENTRIES;
        let mut pf = ip[0];
        for (r, yi) in y0.iter_mut().enumerate() {
            let (lo, hi) = (ip[r], ip[r + 1]);
            if stream {
                while pf <= lo + PREFETCH_AHEAD {
                    prefetch_matrix(a, pf);
                    pf += 32;
                }
            }
            let cols = &a.indices[lo..hi];
            let vals = &a.data[lo..hi];
            let mut s = [0.0f64; 4];
            let mut cc = cols.chunks_exact(4);
            let mut vc = vals.chunks_exact(4);
            for (c4, v4) in (&mut cc).zip(&mut vc) {
                s[0] += v4[0] * gather::<CHECKED>(x0, c4[0]);
                s[1] += v4[1] * gather::<CHECKED>(x0, c4[1]);
                s[2] += v4[2] * gather::<CHECKED>(x0, c4[2]);
                s[3] += v4[3] * gather::<CHECKED>(x0, c4[3]);
            }
            for (&c, &v) in cc.remainder().iter().zip(vc.remainder()) {
                s[0] += v * gather::<CHECKED>(x0, c);
            }
            *yi = (s[0] + s[1]) + (s[2] + s[3]);
        }
    } else {
        for r in 0..n {
            let (lo, hi) = (ip[r], ip[r + 1]);
            let cols = &a.indices[lo..hi];
            let vals = &a.data[lo..hi];
            let mut s = [0.0f64; K];
            for (&c, &v) in cols.iter().zip(vals) {
                for j in 0..K {
                    s[j] += v * gather::<CHECKED>(x[j], c);
                }
            }
            for j in 0..K {
                y[j][r] = s[j];
            }
        }
    }
}

crate::avx2_dispatch! {
    /// Row kernel for `K` vectors stored *interleaved* (`xi[c * K + j]` is entry `c` of
    /// vector `j`): one gathered cache line serves all `K` vectors, and power-of-two
    /// vector lengths cannot make the `K` gathers collide in the same cache sets (which
    /// they do with column-major `x`, e.g. `n = 2^18`). [`rows_kernel_il_body`], AVX2
    /// where present.
    fn rows_kernel_il<const K: usize>(
        a: Csr<'_>,
        rows: Range<usize>,
        xi: &[f64],
        y: [&mut [f64]; K],
    ) = rows_kernel_il_body;
}

/// The body of [`rows_kernel_il`].
#[inline(always)]
fn rows_kernel_il_body<const K: usize>(
    a: Csr<'_>,
    rows: Range<usize>,
    xi: &[f64],
    y: [&mut [f64]; K],
) {
    assert!(xi.len() >= a.ncols * K, "spmv: interleaved x too short");
    let n = rows.len();
    for yj in &y {
        assert_eq!(yj.len(), n, "spmv: y slice does not match the row range");
    }
    let ip = &a.indptr[rows.start..=rows.end];
    for r in 0..n {
        let (lo, hi) = (ip[r], ip[r + 1]);
        prefetch_matrix(a, lo + PREFETCH_AHEAD);
        let cols = &a.indices[lo..hi];
        let vals = &a.data[lo..hi];
        // U independent accumulator sets over consecutive entries shorten the add
        // dependency chain of a row (27 entries for the 27-point stencil) U-fold.
        const U: usize = 4;
        let mut s = [[0.0f64; K]; U];
        let mut cc = cols.chunks_exact(U);
        let mut vc = vals.chunks_exact(U);
        for (c4, v4) in (&mut cc).zip(&mut vc) {
            for u in 0..U {
                let xv = load_il::<K>(xi, c4[u]);
                for j in 0..K {
                    s[u][j] += v4[u] * xv[j];
                }
            }
        }
        for (&c, &v) in cc.remainder().iter().zip(vc.remainder()) {
            let xv = load_il::<K>(xi, c);
            for j in 0..K {
                s[0][j] += v * xv[j];
            }
        }
        for j in 0..K {
            y[j][r] = (s[0][j] + s[1][j]) + (s[2][j] + s[3][j]);
        }
    }
}

/// The `K` interleaved values of column `c`.
#[inline(always)]
fn load_il<const K: usize>(xi: &[f64], c: u32) -> &[f64; K] {
    // SAFETY: callers (`rows_kernel_il_body`) guarantee `c < ncols` for every stored index
    // (checked once by `validate` on a matrix that stays immutably borrowed) and
    // `xi.len() >= ncols * K` (asserted on entry), so `c * K + K <= xi.len()`: the
    // K-element read is in bounds; `[f64; K]` has the alignment of `f64`.
    unsafe { &*(xi.as_ptr().add(c as usize * K) as *const [f64; K]) }
}

/// `K` output columns of equal length shared by the threads of one product, each of
/// which writes only the row blocks it claimed (see [`run_blocks`]).
#[derive(Clone, Copy)]
struct SharedCols<const K: usize> {
    ptr: [*mut f64; K],
    len: usize,
}

// SAFETY: the pointers are only turned into slices by `SharedCols::rows`, whose callers
// guarantee that distinct threads use disjoint row ranges; f64 is Send + Sync.
unsafe impl<const K: usize> Send for SharedCols<K> {}
// SAFETY: as above.
unsafe impl<const K: usize> Sync for SharedCols<K> {}

impl<const K: usize> SharedCols<K> {
    fn new(cols: [&mut [f64]; K]) -> Self {
        let len = cols[0].len();
        for c in &cols {
            assert_eq!(c.len(), len, "SharedCols: columns of different lengths");
        }
        Self {
            ptr: cols.map(|c| c.as_mut_ptr()),
            len,
        }
    }

    /// Rows `lo..hi` of every column.
    ///
    /// # Safety
    /// `lo <= hi <= len`; no other live slice obtained from `self` overlaps `lo..hi`;
    /// the columns passed to [`SharedCols::new`] outlive the result and are not used
    /// otherwise meanwhile.
    unsafe fn rows<'r>(&self, lo: usize, hi: usize) -> [&'r mut [f64]; K] {
        debug_assert!(lo <= hi && hi <= self.len);
        // SAFETY: guaranteed by the caller (see above); the range is inside each column.
        self.ptr
            .map(|p| unsafe { std::slice::from_raw_parts_mut(p.add(lo), hi - lo) })
    }
}

/// Block counter shared by the caller and the helper jobs of one [`run_blocks`] call.
struct BlockShare {
    next: AtomicUsize,
    done: AtomicUsize,
    nblocks: usize,
    /// The caller's job with its lifetime erased; see the SAFETY notes in
    /// [`run_blocks`] for why it is never called after `run_blocks` returns.
    job: *const (dyn Fn(usize) + Sync + 'static),
}

// SAFETY: `job` points to a `Sync` closure and is only called while `run_blocks`
// keeps it alive (see there); the counters are atomics.
unsafe impl Send for BlockShare {}
// SAFETY: as above.
unsafe impl Sync for BlockShare {}

/// Increments `done` when dropped, also when the block's job panics, so the caller's
/// wait in [`run_blocks`] always ends.
struct DoneGuard<'a>(&'a AtomicUsize);

impl Drop for DoneGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Release);
    }
}

impl BlockShare {
    /// Claims and runs blocks until none is left.
    fn work(&self) {
        loop {
            let b = self.next.fetch_add(1, Ordering::Relaxed);
            if b >= self.nblocks {
                return;
            }
            let _done = DoneGuard(&self.done);
            // SAFETY: b < nblocks was claimed by this thread alone, and `run_blocks`
            // does not return before `done` reaches `nblocks`, which this call's guard
            // contributes to only after `job(b)` returned: the closure and everything it
            // borrows are alive for the whole call.
            unsafe { (*self.job)(b) };
        }
    }
}

/// Runs `job(b)` for every block `b` in `0..nblocks`, each exactly once: the calling
/// thread and `helpers` jobs spawned into `pool` claim blocks from a shared counter
/// until none is left. The caller always works and then waits only for blocks that
/// helpers have *claimed*, never for a helper that has not started: a pool thread that
/// the OS schedules late (shared machine) finds no block left and exits at once.
/// Costs one small `Arc` and one boxed rayon job per helper; nothing else allocates.
///
/// A panicking job on the calling thread is re-raised after the helpers' claimed
/// blocks are finished (jobs only assert programming contracts).
fn run_blocks(
    pool: Option<&rayon::ThreadPool>,
    helpers: usize,
    nblocks: usize,
    job: &(dyn Fn(usize) + Sync),
) {
    let pool = match pool {
        Some(p) if helpers > 0 && nblocks > 1 => p,
        _ => {
            (0..nblocks).for_each(job);
            return;
        }
    };
    // SAFETY (lifetime erasure): the erased pointer is dereferenced only in
    // `BlockShare::work` for claimed blocks b < nblocks; this function returns (or
    // unwinds) only after `done == nblocks`, i.e. after every such call returned. Late
    // helpers see `next >= nblocks` and never dereference it.
    let job: *const (dyn Fn(usize) + Sync + 'static) = unsafe {
        std::mem::transmute::<
            *const (dyn Fn(usize) + Sync + '_),
            *const (dyn Fn(usize) + Sync + 'static),
        >(job as *const _)
    };
    let share = Arc::new(BlockShare {
        next: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
        nblocks,
        job,
    });
    for _ in 0..helpers {
        let s = Arc::clone(&share);
        pool.spawn(move || s.work());
    }
    let mine = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| share.work()));
    let mut spins = 0u32;
    while share.done.load(Ordering::Acquire) < nblocks {
        if spins < 64 {
            std::hint::spin_loop();
            spins += 1;
        } else {
            std::thread::yield_now();
        }
    }
    if let Err(panic) = mine {
        std::panic::resume_unwind(panic);
    }
}

/// Interleaves `K` columns of length `n` into `xi` (`xi[c * K + j] = x[j][c]`), in
/// `nblocks` row blocks shared as in [`run_blocks`].
fn interleave<const K: usize>(
    pool: Option<&rayon::ThreadPool>,
    helpers: usize,
    x: [&[f64]; K],
    xi: &mut [f64],
) {
    let n = x[0].len();
    assert_eq!(xi.len(), n * K, "interleave: xi length");
    const ROWS: usize = 16384;
    let nblocks = n.div_ceil(ROWS);
    let out = SharedCols::new([xi]);
    run_blocks(pool, helpers, nblocks, &|b| {
        let (lo, hi) = (b * ROWS, ((b + 1) * ROWS).min(n));
        // SAFETY: block b (claimed once) owns xi[lo*K..hi*K]; blocks are disjoint and
        // `xi` outlives `run_blocks`, which returns only after every job finished.
        let [dst] = unsafe { out.rows(lo * K, hi * K) };
        interleave_rows(x, lo, dst);
    });
}

crate::avx2_dispatch! {
    /// `dst[t * K + j] = x[j][lo + t]` for the `dst.len() / K` rows from `lo` on
    /// ([`interleave_rows_body`], AVX2 where present).
    fn interleave_rows<const K: usize>(x: [&[f64]; K], lo: usize, dst: &mut [f64]) =
        interleave_rows_body;
}

/// The body of [`interleave_rows`].
#[inline(always)]
fn interleave_rows_body<const K: usize>(x: [&[f64]; K], lo: usize, dst: &mut [f64]) {
    for (t, d) in dst.chunks_exact_mut(K).enumerate() {
        for j in 0..K {
            d[j] = x[j][lo + t];
        }
    }
}

/// A kernel over groups of `K` vectors (`K` in 1, 2, 4, 8), see [`for_groups`].
trait GroupKernel {
    fn run<const K: usize>(&mut self, x: [&[f64]; K], y: [&mut [f64]; K]);
}

/// Serial kernel over rows `rows` (bounds-checked gathers when `CHECKED`).
struct SerialKernel<'m, const CHECKED: bool> {
    a: Csr<'m>,
    rows: Range<usize>,
}

impl<const CHECKED: bool> GroupKernel for SerialKernel<'_, CHECKED> {
    fn run<const K: usize>(&mut self, x: [&[f64]; K], y: [&mut [f64]; K]) {
        rows_kernel::<K, CHECKED>(self.a, self.rows.clone(), x, y);
    }
}

/// Threaded kernel over the row blocks `bounds` of a validated matrix (see
/// [`run_blocks`]); groups of more than one vector are first interleaved into the
/// calling thread's [`crate::scratch`] buffer.
struct ParKernel<'m, 'b> {
    a: Csr<'m>,
    bounds: &'b [usize],
    pool: Option<&'b rayon::ThreadPool>,
    helpers: usize,
}

impl GroupKernel for ParKernel<'_, '_> {
    fn run<const K: usize>(&mut self, x: [&[f64]; K], y: [&mut [f64]; K]) {
        let (a, bounds) = (self.a, self.bounds);
        let nblocks = bounds.len() - 1;
        let out = SharedCols::new(y);
        if K == 1 {
            run_blocks(self.pool, self.helpers, nblocks, &|b| {
                let (lo, hi) = (bounds[b], bounds[b + 1]);
                // SAFETY: row block b is claimed by exactly one thread; blocks are
                // disjoint and `y` outlives `run_blocks`.
                let yb = unsafe { out.rows(lo, hi) };
                rows_kernel::<K, false>(a, lo..hi, x, yb);
            });
        } else {
            let (pool, helpers) = (self.pool, self.helpers);
            crate::scratch::with(a.ncols * K, |xi| {
                interleave::<K>(pool, helpers, x, xi);
                let xi = &*xi;
                run_blocks(pool, helpers, nblocks, &|b| {
                    let (lo, hi) = (bounds[b], bounds[b + 1]);
                    // SAFETY: as above.
                    let yb = unsafe { out.rows(lo, hi) };
                    rows_kernel_il::<K>(a, lo..hi, xi, yb);
                });
            });
        }
    }
}

/// Runs `f` on column groups of 8, 4, 2, 1 vectors covering `0..k`; `x` has `k`
/// columns of length `nx`, `y` `k` columns of length `ny`.
#[inline]
fn for_groups(x: &[f64], nx: usize, y: &mut [f64], ny: usize, k: usize, f: &mut impl GroupKernel) {
    let mut xs = x;
    let mut ys = y;
    let mut left = k;
    fn take<'x, 'y, const G: usize>(
        xs: &mut &'x [f64],
        ys: &mut &'y mut [f64],
        nx: usize,
        ny: usize,
    ) -> ([&'x [f64]; G], [&'y mut [f64]; G]) {
        let whole: &'x [f64] = xs;
        let xa: [&'x [f64]; G] = std::array::from_fn(|j| &whole[j * nx..(j + 1) * nx]);
        *xs = &whole[G * nx..];
        let mut ya: [&mut [f64]; G] = std::array::from_fn(|_| Default::default());
        for yj in ya.iter_mut() {
            let (h, t) = std::mem::take(ys).split_at_mut(ny);
            *yj = h;
            *ys = t;
        }
        (xa, ya)
    }
    while left > 0 {
        if left >= 8 {
            let (xa, ya) = take::<8>(&mut xs, &mut ys, nx, ny);
            f.run(xa, ya);
            left -= 8;
        } else if left >= 4 {
            let (xa, ya) = take::<4>(&mut xs, &mut ys, nx, ny);
            f.run(xa, ya);
            left -= 4;
        } else if left >= 2 {
            let (xa, ya) = take::<2>(&mut xs, &mut ys, nx, ny);
            f.run(xa, ya);
            left -= 2;
        } else {
            let (xa, ya) = take::<1>(&mut xs, &mut ys, nx, ny);
            f.run(xa, ya);
            left -= 1;
        }
    }
}

/// Serial block SpMV `y = A x` for `k` column-major vectors: `x.len() == ncols * k`,
/// `y.len() == nrows * k`. Works for rectangular matrices. Bounds-checked gathers (no
/// set-up cost); use [`CsrOperator`] for repeated or threaded products.
///
/// # Panics
/// If the slice lengths do not match `a` and `k` (a programming error).
pub fn spmv_block(a: &CsrMatrix, x: &[f64], y: &mut [f64], k: usize) {
    assert_eq!(x.len(), a.ncols() * k, "spmv_block: x length");
    assert_eq!(y.len(), a.nrows() * k, "spmv_block: y length");
    let mut kern = SerialKernel::<true> {
        a: Csr::of(a),
        rows: 0..a.nrows(),
    };
    for_groups(x, a.ncols(), y, a.nrows(), k, &mut kern);
}

/// The threaded engine shared by [`CsrOperator`] and `dist::DistCsrOperator`: row
/// blocks balanced by nonzeros, and `threads` threads in all — the calling thread plus
/// a pool of `threads - 1` (or a pool of `threads` when the caller is busy elsewhere,
/// see [`Engine::build`]).
pub(crate) struct Engine {
    bounds: Vec<usize>,
    pool: Option<rayon::ThreadPool>,
    threads: usize,
}

impl Engine {
    /// Validates `a` (see [`validate`]), advises huge pages for it, and sets up
    /// `8 × threads` row blocks (one for a single thread) and a pool of
    /// `threads - 1` helper threads (none for one thread).
    pub(crate) fn new(a: &CsrMatrix, threads: usize) -> Result<Self, SpmvError> {
        Self::build(a, threads, false)
    }

    /// Like [`Engine::new`]; with `caller_busy` the pool gets all `threads` threads,
    /// for callers that run [`Engine::apply_here`] inside a pool job while their own
    /// thread does something else (communication overlap in `dist`).
    pub(crate) fn build(
        a: &CsrMatrix,
        threads: usize,
        caller_busy: bool,
    ) -> Result<Self, SpmvError> {
        if threads == 0 {
            return Err(SpmvError::ZeroThreads);
        }
        validate(a)?;
        advise_huge_pages(a);
        // More blocks than threads lets a thread that the OS descheduled (shared
        // machines) be covered by the others; blocks stay large (n / (8 threads) rows).
        let blocks = if threads == 1 {
            1
        } else {
            threads * BLOCKS_PER_THREAD
        };
        let bounds = RowPartition::balanced_by_nnz(a, blocks)
            .map_err(|e| SpmvError::InvalidMatrix {
                reason: e.to_string(),
            })?
            .offsets()
            .to_vec();
        let workers = if caller_busy { threads } else { threads - 1 };
        let pool = if workers > 0 {
            Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(workers)
                    .thread_name(|i| format!("jdmg-spmv-{i}"))
                    .build()
                    .map_err(|e| SpmvError::ThreadPool {
                        threads,
                        reason: e.to_string(),
                    })?,
            )
        } else {
            None
        };
        Ok(Self {
            bounds,
            pool,
            threads,
        })
    }

    pub(crate) fn threads(&self) -> usize {
        self.threads
    }

    pub(crate) fn pool(&self) -> Option<&rayon::ThreadPool> {
        self.pool.as_ref()
    }

    /// `y = A x` for `k` column-major vectors, `x` columns of length `a.ncols()`, `y`
    /// columns of length `a.nrows()`; `a` must be the matrix given to [`Engine::new`].
    /// The calling thread works too, with `threads - 1` helper jobs in the pool.
    pub(crate) fn apply(&self, a: &CsrMatrix, x: &[f64], y: &mut [f64], k: usize) {
        self.apply_here(a, x, y, k)
    }

    /// Same as [`Engine::apply`]; may also be called from inside a job of the
    /// engine's own pool.
    pub(crate) fn apply_here(&self, a: &CsrMatrix, x: &[f64], y: &mut [f64], k: usize) {
        assert_eq!(
            self.bounds[self.bounds.len() - 1],
            a.nrows(),
            "Engine: wrong matrix"
        );
        assert_eq!(x.len(), a.ncols() * k, "spmv: x length");
        assert_eq!(y.len(), a.nrows() * k, "spmv: y length");
        let mut kern = ParKernel {
            a: Csr::of(a),
            bounds: &self.bounds,
            pool: self.pool.as_ref(),
            helpers: self.threads - 1,
        };
        for_groups(x, a.ncols(), y, a.nrows(), k, &mut kern);
    }
}

/// A square [`CsrMatrix`] as a threaded [`Operator`].
///
/// Computes on exactly `threads` threads: the calling thread plus its own rayon pool
/// of `threads - 1` (no pool when `threads == 1`). Rows are split into `8 × threads`
/// contiguous blocks of (nearly) equal nonzeros, claimed dynamically, so a pool thread
/// that the OS schedules late (shared machine) delays nothing but its own claims. `apply_block`
/// reads the matrix once per group of up to 8 vectors; it allocates only when the
/// thread's interleave buffer grows (see the module docs).
pub struct CsrOperator<'a> {
    a: &'a CsrMatrix,
    engine: Engine,
}

impl<'a> CsrOperator<'a> {
    /// Wraps `a` for products on `threads` threads. Also asks the OS to back the
    /// arrays of `a` with huge pages ([`advise_huge_pages`]: a hint, contents
    /// unchanged, taken in the background; no-op below 2 MiB or off Linux).
    ///
    /// # Errors
    /// [`SpmvError::ZeroThreads`], [`SpmvError::NotSquare`], [`SpmvError::InvalidMatrix`]
    /// (arrays built unchecked and inconsistent), [`SpmvError::ThreadPool`].
    pub fn new(a: &'a CsrMatrix, threads: usize) -> Result<Self, SpmvError> {
        if a.nrows() != a.ncols() {
            return Err(SpmvError::NotSquare {
                nrows: a.nrows(),
                ncols: a.ncols(),
            });
        }
        let engine = Engine::new(a, threads)?;
        Ok(Self { a, engine })
    }

    /// The wrapped matrix.
    pub fn matrix(&self) -> &'a CsrMatrix {
        self.a
    }

    /// Number of threads used by `apply_block`.
    pub fn threads(&self) -> usize {
        self.engine.threads()
    }
}

impl Operator for CsrOperator<'_> {
    fn nrows(&self) -> usize {
        self.a.nrows()
    }
    fn work_per_vector(&self) -> f64 {
        1.5 * self.a.nnz() as f64 + 2.0 * self.a.nrows() as f64
    }

    /// `y = A x` for `k` column-major vectors.
    ///
    /// # Panics
    /// If `x.len()` or `y.len()` is not `nrows() * k` (a programming error).
    fn apply_block(&self, x: &[f64], y: &mut [f64], k: usize) {
        self.engine.apply(self.a, x, y, k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_rectangular_block() {
        // [[1 0 2], [0 3 0]] times x = [1,2,3] and [4,5,6] (column-major).
        let a = CsrMatrix::from_triplets(2, 3, &[(0, 0, 1.0), (0, 2, 2.0), (1, 1, 3.0)]).unwrap();
        let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let mut y = [0.0; 4];
        spmv_block(&a, &x, &mut y, 2);
        assert_eq!(y, [7.0, 6.0, 16.0, 15.0]);
    }

    #[test]
    fn rejects_bad_input() {
        let a = CsrMatrix::from_triplets(2, 3, &[(0, 0, 1.0)]).unwrap();
        assert_eq!(
            CsrOperator::new(&a, 1).err(),
            Some(SpmvError::NotSquare { nrows: 2, ncols: 3 })
        );
        let b = CsrMatrix::identity(3);
        assert_eq!(CsrOperator::new(&b, 0).err(), Some(SpmvError::ZeroThreads));
        let bad = CsrMatrix::from_parts_unchecked(2, 2, vec![0, 1, 2], vec![0, 5], vec![1.0, 1.0]);
        assert!(matches!(
            CsrOperator::new(&bad, 1),
            Err(SpmvError::InvalidMatrix { .. })
        ));
    }
}
