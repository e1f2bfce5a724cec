//! Shared pieces of the blocked `apply_block` kernels: column groups of 1 to 8 vectors
//! dispatched to const-generic kernels, sequential sparse row dots over `K` columns, and
//! reusable scratch buffers that keep the preconditioners `Send + Sync`.

use std::sync::Mutex;

/// Widest group of vectors a kernel processes in one pass over the preconditioner's
/// data (`K` accumulators per row stay in registers up to 8).
pub(crate) const MAX_GROUP: usize = 8;

/// A kernel over one group of `K` consecutive vectors (`1 ≤ K ≤ 8`) starting at column
/// `j0` of the block; see [`for_column_groups`].
pub(crate) trait ColumnGroup {
    fn run<const K: usize>(&mut self, j0: usize);
}

/// Runs `g` on groups of at most [`MAX_GROUP`] consecutive vectors covering `0..k`: full
/// groups of 8, then one group of the remaining `k mod 8`, each with its own
/// compile-time `K` (so `k = 3` is one pass with three accumulators a row, not 2 + 1).
pub(crate) fn for_column_groups(k: usize, g: &mut impl ColumnGroup) {
    let mut j0 = 0;
    while j0 < k {
        let kk = (k - j0).min(MAX_GROUP);
        match kk {
            1 => g.run::<1>(j0),
            2 => g.run::<2>(j0),
            3 => g.run::<3>(j0),
            4 => g.run::<4>(j0),
            5 => g.run::<5>(j0),
            6 => g.run::<6>(j0),
            7 => g.run::<7>(j0),
            _ => g.run::<8>(j0),
        }
        j0 += kk;
    }
}

/// The `K` column slices `x[(j0 + j) n .. (j0 + j + 1) n]`.
#[inline(always)]
pub(crate) fn columns<const K: usize>(x: &[f64], n: usize, j0: usize) -> [&[f64]; K] {
    std::array::from_fn(|j| &x[(j0 + j) * n..(j0 + j + 1) * n])
}

/// `[Σ_p v[p] · x_j[c[p]] for j in 0..K]`, each sum accumulated sequentially from `0.0`
/// in the order of the entries (so every `K` gives the bits of `K = 1`).
#[inline(always)]
pub(crate) fn row_dots<const K: usize>(c: &[u32], v: &[f64], x: &[&[f64]; K]) -> [f64; K] {
    let mut s = [0.0f64; K];
    for (&ci, &vi) in c.iter().zip(v) {
        for j in 0..K {
            s[j] += vi * x[j][ci as usize];
        }
    }
    s
}

/// The scratch of the blocked sweeps: the calling thread's buffer of
/// [`crate::scratch`], shared with the block SpMV (a zero-sized handle, so that
/// an operator and its preconditioner hold one interleaved copy, not two).
#[derive(Default, Clone, Copy)]
pub(crate) struct Scratch;

impl Scratch {
    /// Runs `f` on a buffer of at least `len` entries (contents unspecified).
    pub(crate) fn with<R>(&self, len: usize, f: impl FnOnce(&mut [f64]) -> R) -> R {
        crate::scratch::with(len, f)
    }
}

impl std::fmt::Debug for Scratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Scratch")
    }
}

/// A lazily grown `f64` buffer of one preconditioner, reused across calls of `&self`
/// methods: for a preconditioner that applies others inside its own use of the
/// buffer (block-Jacobi), which the thread's shared [`Scratch`] cannot serve.
///
/// A `Mutex` only guards the hand-over, never the work: [`OwnScratch::with`] takes the
/// buffer with `try_lock` and, if another thread holds it (two concurrent applies of
/// the same preconditioner), falls back to a temporary allocation instead of waiting.
/// A single caller therefore allocates only when the buffer must grow.
#[derive(Default)]
pub(crate) struct OwnScratch(Mutex<Vec<f64>>);

impl OwnScratch {
    /// Runs `f` on a buffer of at least `len` entries (contents unspecified).
    pub(crate) fn with<R>(&self, len: usize, f: impl FnOnce(&mut [f64]) -> R) -> R {
        match self.0.try_lock() {
            Ok(mut buf) => {
                if buf.len() < len {
                    buf.resize(len, 0.0);
                }
                f(&mut buf[..len])
            }
            Err(std::sync::TryLockError::Poisoned(p)) => {
                // An earlier apply panicked; the buffer is still usable.
                let mut buf = p.into_inner();
                if buf.len() < len {
                    buf.resize(len, 0.0);
                }
                f(&mut buf[..len])
            }
            Err(std::sync::TryLockError::WouldBlock) => f(&mut vec![0.0; len]),
        }
    }
}

impl Clone for OwnScratch {
    /// A fresh, empty buffer (scratch contents are never shared).
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl std::fmt::Debug for OwnScratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OwnScratch")
    }
}
