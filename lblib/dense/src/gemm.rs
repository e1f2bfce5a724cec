//! The matrix product `C = A B` over processes of different speeds (Boudet et al.
//! §2.1): the column blocks of `B` and `C` are independent, equal chunks, so
//! Algorithm 2.1 ([`optimal_chunks`]) gives the optimal number of blocks per
//! process; each process holds `A` and computes its contiguous slab of `C` with
//! faer's GEMM.

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};

use super::alloc::optimal_chunks;
use super::layout::{n_blocks, LayoutKind};
use super::{DenseError, Source};
use lbcomm::Comm;

/// Columns `start..end` of `B` and `C` owned by every process.
#[derive(Debug, Clone, PartialEq)]
pub struct GemmLayout {
    /// `ranges[r] = (start, end)`: the columns of process `r`.
    pub ranges: Vec<(usize, usize)>,
    /// Column blocks per process (Algorithm 2.1 counts).
    pub blocks: Vec<usize>,
}

impl GemmLayout {
    /// Contiguous slabs of `block`-wide column blocks: `Cyclic` gives equal
    /// counts (Algorithm 2.1 on equal times), `Hetero`/`Optimized` Algorithm 2.1
    /// on `times` (`000` §2.1).
    ///
    /// # Errors
    /// [`DenseError::Alloc`] for bad times, `n == 0` or `block == 0`.
    pub fn build(
        kind: LayoutKind,
        times: &[f64],
        n: usize,
        block: usize,
    ) -> Result<Self, DenseError> {
        super::alloc_check(n, block)?;
        let nb = n_blocks(n, block);
        let equal = vec![1.0; times.len()];
        let t = if kind == LayoutKind::Cyclic {
            &equal[..]
        } else {
            times
        };
        let counts = optimal_chunks(t, nb)?.counts;
        let mut ranges = Vec::with_capacity(counts.len());
        let mut j = 0;
        for &c in &counts {
            let s = (j * block).min(n);
            j += c;
            ranges.push((s, (j * block).min(n)));
        }
        Ok(Self {
            ranges,
            blocks: counts,
        })
    }

    /// Matrix columns per process.
    pub fn columns_per_rank(&self) -> Vec<usize> {
        self.ranges.iter().map(|(s, e)| e - s).collect()
    }
}

/// This process's slab of `C = A B` (`n × (end - start)`, column-major) for
/// `A`, `B` given by their sources. Not collective.
///
/// # Errors
/// [`DenseError::BadMatrix`] for a wrong-sized source.
pub fn gemm_local(
    a: &Source,
    b: &Source,
    n: usize,
    range: (usize, usize),
    par: Par,
) -> Result<Vec<f64>, DenseError> {
    a.validate(n)?;
    b.validate(n)?;
    let (s, e) = range;
    let w = e - s;
    let am = a.to_col_major(n);
    let mut bl = vec![0.0; n * w];
    for (c, gc) in (s..e).enumerate() {
        for i in 0..n {
            bl[c * n + i] = b.entry(n, i, gc);
        }
    }
    Ok(gemm_slab(&am, &bl, n, w, par))
}

/// `A (n×n) · B_local (n×w)`, both column-major.
pub fn gemm_slab(a: &[f64], b_local: &[f64], n: usize, w: usize, par: Par) -> Vec<f64> {
    let mut c = vec![0.0; n * w];
    if w > 0 {
        matmul(
            MatMut::from_column_major_slice_mut(&mut c, n, w),
            Accum::Replace,
            MatRef::from_column_major_slice(a, n, n),
            MatRef::from_column_major_slice(b_local, n, w),
            1.0,
            par,
        );
    }
    c
}

/// Gathers the slabs of `C` into the whole `n × n` matrix on every process
/// (collective).
pub fn gather_slabs<C: Comm + ?Sized>(comm: &C, local: &[f64], layout: &GemmLayout) -> Vec<f64> {
    let n_total: usize = layout.columns_per_rank().iter().sum();
    let counts: Vec<usize> = layout
        .columns_per_rank()
        .iter()
        .map(|c| c * n_total)
        .collect();
    let mut out = vec![0.0; n_total * n_total];
    comm.all_gather_v(local, &counts, &mut out);
    out
}
