//! The outer-product matrix product `C = A B` on a heterogeneous `R × Q` process
//! grid (`seeds/001` §4.3–4.4): the matrix is tiled by panels of `B_p × B_q`
//! blocks, and in every panel grid row `i` owns `r_i` block rows and grid column
//! `j` owns `c_j` block columns, the integer panel allocation of
//! [`grid_2d_panel`] (processor `(i, j)` works `r_i t_ij c_j` per panel).
//!
//! `A`, `B` and `C` are distributed alike. At step `k` the owners of block
//! column `k` of `A` broadcast it along their grid rows, the owners of block row
//! `k` of `B` along their grid columns, and every process adds the product of
//! the two pieces to its part of `C` with faer's GEMM.

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};
use serde::{Deserialize, Serialize};

use super::alloc::{grid_2d_panel, Grid2dParams};
use super::layout::n_blocks;
use super::{DenseError, Source};
use crate::comm::Comm;

/// A 2-D block layout on an `R × Q` grid (process `(i, j)` is rank `i Q + j`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GridLayout {
    /// Matrix order.
    pub n: usize,
    /// Block size.
    pub block: usize,
    /// Grid rows `R`.
    pub rows: usize,
    /// Grid columns `Q`.
    pub cols: usize,
    /// Block rows per grid row in one panel (`r` of `grid_2d_panel`).
    pub r: Vec<usize>,
    /// Block columns per grid column in one panel (`c`).
    pub c: Vec<usize>,
    /// Grid row owning every block row.
    pub row_owner: Vec<usize>,
    /// Grid column owning every block column.
    pub col_owner: Vec<usize>,
    /// Predicted time per block of the panel allocation (units of the cycle-times).
    pub time_per_block: f64,
}

impl GridLayout {
    /// Lays out `n × n` in `block`-sized blocks on an `rows × cols` grid whose
    /// cycle-times are `times` (rank order, `rows * cols` of them), with panels of
    /// `bp × bq` blocks (`001` §4.3).
    ///
    /// # Errors
    /// [`DenseError::BadParam`] if `times.len() != rows * cols`; [`DenseError::Alloc`]
    /// from [`grid_2d_panel`] (bad times, empty panel, search too large).
    pub fn build(
        times: &[f64],
        rows: usize,
        cols: usize,
        n: usize,
        block: usize,
        bp: usize,
        bq: usize,
    ) -> Result<Self, DenseError> {
        super::alloc_check(n, block)?;
        if rows == 0 || cols == 0 || times.len() != rows * cols {
            return Err(DenseError::BadParam {
                what: "grid",
                value: format!("{rows}x{cols} for {} processes", times.len()),
                reason: "rows x cols must equal the number of processes",
            });
        }
        let t: Vec<Vec<f64>> = times.chunks(cols).map(|r| r.to_vec()).collect();
        let pan = grid_2d_panel(&t, bp, bq, &Grid2dParams::default())?;
        let nb = n_blocks(n, block);
        let pattern = |counts: &[usize]| -> Vec<usize> {
            counts
                .iter()
                .enumerate()
                .flat_map(|(g, &c)| std::iter::repeat_n(g, c))
                .collect()
        };
        let rp = pattern(&pan.r);
        let cp = pattern(&pan.c);
        Ok(Self {
            n,
            block,
            rows,
            cols,
            row_owner: (0..nb).map(|b| rp[b % rp.len()]).collect(),
            col_owner: (0..nb).map(|b| cp[b % cp.len()]).collect(),
            r: pan.r,
            c: pan.c,
            time_per_block: pan.time_per_block,
        })
    }

    /// Global indices (rows or columns) owned by grid row / column `g`, given
    /// the block owners.
    fn indices(&self, owner: &[usize], g: usize) -> Vec<usize> {
        let mut v = Vec::new();
        for (b, &o) in owner.iter().enumerate() {
            if o == g {
                let s = b * self.block;
                v.extend(s..(s + self.block).min(self.n));
            }
        }
        v
    }

    /// Matrix rows owned by grid row `i`.
    pub fn rows_of(&self, i: usize) -> Vec<usize> {
        self.indices(&self.row_owner, i)
    }

    /// Matrix columns owned by grid column `j`.
    pub fn cols_of(&self, j: usize) -> Vec<usize> {
        self.indices(&self.col_owner, j)
    }

    /// Matrix entries of `C` held by every rank.
    pub fn entries_per_rank(&self) -> Vec<usize> {
        let mut out = Vec::with_capacity(self.rows * self.cols);
        for i in 0..self.rows {
            for j in 0..self.cols {
                out.push(self.rows_of(i).len() * self.cols_of(j).len());
            }
        }
        out
    }
}

/// The outer-product `C = A B` on the grid (collective over `comm`, whose size
/// must be `rows * cols`). Returns this rank's part of `C`
/// (`rows_of(i) × cols_of(j)`, column-major).
///
/// # Errors
/// [`DenseError::BadParam`] if the communicator does not match the grid;
/// [`DenseError::BadMatrix`] for wrong-sized sources.
pub fn grid_gemm<C: Comm>(
    comm: &C,
    layout: &GridLayout,
    a: &Source,
    b: &Source,
    par: Par,
) -> Result<Vec<f64>, DenseError> {
    let n = layout.n;
    a.validate(n)?;
    b.validate(n)?;
    if comm.size() != layout.rows * layout.cols {
        return Err(DenseError::BadParam {
            what: "grid",
            value: format!("{}x{}", layout.rows, layout.cols),
            reason: "rows x cols must equal the communicator size",
        });
    }
    let me = comm.rank();
    let (gi, gj) = (me / layout.cols, me % layout.cols);
    let row_comm = comm.split(gi, gj);
    let col_comm = comm.split(layout.cols + gj, gi);
    let my_rows = layout.rows_of(gi);
    let my_cols = layout.cols_of(gj);
    let (mr, mc) = (my_rows.len(), my_cols.len());
    let fill = |s: &Source, rows: &[usize], cols: &[usize]| {
        let mut d = Vec::with_capacity(rows.len() * cols.len());
        for &c in cols {
            d.extend(rows.iter().map(|&r| s.entry(n, r, c)));
        }
        d
    };
    let a_loc = fill(a, &my_rows, &my_cols);
    let b_loc = fill(b, &my_rows, &my_cols);
    let mut c_loc = vec![0.0; mr * mc];
    let mut apiece = Vec::new();
    let mut bpiece = Vec::new();
    for k in 0..layout.col_owner.len() {
        let s = k * layout.block;
        let e = (s + layout.block).min(n);
        let w = e - s;
        // A(my rows, block k): from grid column col_owner[k] along the grid row.
        let ocol = layout.col_owner[k];
        apiece.clear();
        apiece.resize(mr * w, 0.0);
        if gj == ocol {
            let first = my_cols.partition_point(|&c| c < s);
            apiece.copy_from_slice(&a_loc[first * mr..(first + w) * mr]);
        }
        row_comm.broadcast(&mut apiece, ocol);
        // B(block k, my cols): from grid row row_owner[k] along the grid column.
        let orow = layout.row_owner[k];
        bpiece.clear();
        bpiece.resize(w * mc, 0.0);
        if gi == orow {
            let first = my_rows.partition_point(|&r| r < s);
            for c in 0..mc {
                bpiece[c * w..(c + 1) * w]
                    .copy_from_slice(&b_loc[c * mr + first..c * mr + first + w]);
            }
        }
        col_comm.broadcast(&mut bpiece, orow);
        if mr > 0 && mc > 0 {
            matmul(
                MatMut::from_column_major_slice_mut(&mut c_loc, mr, mc),
                Accum::Add,
                MatRef::from_column_major_slice(&apiece, mr, w),
                MatRef::from_column_major_slice(&bpiece, w, mc),
                1.0,
                par,
            );
        }
    }
    Ok(c_loc)
}

/// Gathers the parts of `C` into the whole `n × n` matrix on every process
/// (collective).
pub fn gather_grid<C: Comm + ?Sized>(comm: &C, layout: &GridLayout, local: &[f64]) -> Vec<f64> {
    let n = layout.n;
    let counts = layout.entries_per_rank();
    let mut all = vec![0.0; counts.iter().sum()];
    comm.all_gather_v(local, &counts, &mut all);
    let mut out = vec![0.0; n * n];
    let mut off = 0;
    for i in 0..layout.rows {
        let rows = layout.rows_of(i);
        for j in 0..layout.cols {
            let cols = layout.cols_of(j);
            for (lc, &c) in cols.iter().enumerate() {
                for (lr, &r) in rows.iter().enumerate() {
                    out[c * n + r] = all[off + lc * rows.len() + lr];
                }
            }
            off += rows.len() * cols.len();
        }
    }
    out
}
