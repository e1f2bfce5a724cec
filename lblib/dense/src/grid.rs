//! The outer-product matrix product `C = A B` ([`grid_gemm`]), the
//! right-looking LU with partial pivoting ([`grid_lu`]) and the blocked
//! Householder QR ([`grid_qr`]) on a heterogeneous
//! `R × Q` process grid (Mehaut and Robert §4.3–4.5): the matrix is tiled by panels of
//! `B_p × B_q` blocks, and in every panel grid row `i` owns `r_i` block rows and
//! grid column `j` owns `c_j` block columns, the integer panel allocation of
//! [`grid_2d_panel`] (processor `(i, j)` works `r_i t_ij c_j` per panel), or the
//! Kalinov–Lastovetsky distribution ([`GridAlloc::Kl`]), where every grid column
//! splits the rows by its own cycle-times.
//!
//! `A`, `B` and `C` are distributed alike. At step `k` of the product the owners
//! of block column `k` of `A` broadcast it along their grid rows, the owners of
//! block row `k` of `B` along their grid columns, and every process adds the
//! product of the two pieces to its part of `C` with faer's GEMM.

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::lu::partial_pivoting::factor::{lu_in_place, lu_in_place_scratch};
use faer::linalg::matmul::matmul;
use faer::linalg::qr::no_pivoting::factor::{qr_in_place, qr_in_place_scratch};
use faer::linalg::triangular_solve::{
    solve_lower_triangular_in_place, solve_unit_lower_triangular_in_place,
};
use faer::{Accum, MatMut, MatRef, Par};
use serde::{Deserialize, Serialize};

use super::alloc::{grid_2d_panel, kalinov_lastovetsky, optimal_chunks, Grid2dParams};
use super::factor::perm_to_transpositions;
use super::layout::n_blocks;
use super::{DenseError, Source};
use lbcomm::{Comm, ReduceOp};

/// Which 2-D allocation lays out the blocks of a [`GridLayout`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GridAlloc {
    /// The integer panel allocation of `001` §4.3–4.4 ([`grid_2d_panel`]): grid
    /// row `i` owns `r_i` block rows and grid column `j` owns `c_j` block columns
    /// of every panel, so that every process keeps four neighbours.
    #[default]
    Panel,
    /// The heterogeneous block-cyclic distribution of Kalinov and Lastovetsky
    /// (`001` §4.3, Figure 9; [`kalinov_lastovetsky`]): the panel's block columns
    /// are split over the grid columns by their harmonic-mean cycle-times, then
    /// every grid column splits the block rows by its own cycle-times
    /// (Algorithm 2.1), so the row owners differ from one grid column to the next.
    Kl,
}

impl GridAlloc {
    /// `panel` or `kl` (the CLI's `--grid-alloc` and the JSON).
    pub fn name(self) -> &'static str {
        match self {
            GridAlloc::Panel => "panel",
            GridAlloc::Kl => "kl",
        }
    }
}

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
    /// The allocation that built the layout.
    pub alloc: GridAlloc,
    /// Block rows per grid row in one panel (`r` of `grid_2d_panel`; for
    /// [`GridAlloc::Kl`], those of grid column 0).
    pub r: Vec<usize>,
    /// Block columns per grid column in one panel (`c`).
    pub c: Vec<usize>,
    /// `r_by_col[j][i]`: block rows of a panel on process `(i, j)` (all columns
    /// equal to `r` for [`GridAlloc::Panel`]).
    pub r_by_col: Vec<Vec<usize>>,
    /// Grid row owning every block row (in grid column 0 for [`GridAlloc::Kl`]).
    pub row_owner: Vec<usize>,
    /// `row_owners[j][b]`: grid row owning block row `b` in grid column `j`.
    pub row_owners: Vec<Vec<usize>>,
    /// Grid column owning every block column.
    pub col_owner: Vec<usize>,
    /// Predicted time per block of the panel allocation (units of the cycle-times).
    pub time_per_block: f64,
}

/// Owners `0, 0, 1, 2, 2, …` of a panel from per-owner counts.
fn pattern(counts: &[usize]) -> Vec<usize> {
    counts
        .iter()
        .enumerate()
        .flat_map(|(g, &c)| std::iter::repeat_n(g, c))
        .collect()
}

impl GridLayout {
    /// Lays out `n × n` in `block`-sized blocks on an `rows × cols` grid whose
    /// cycle-times are `times` (rank order, `rows * cols` of them), with panels of
    /// `bp × bq` blocks (`001` §4.3), by the panel allocation
    /// ([`GridAlloc::Panel`]).
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
        Self::build_with(GridAlloc::Panel, times, rows, cols, n, block, bp, bq)
    }

    /// Like [`GridLayout::build`] with the allocation `alloc`: the panel
    /// allocation of `001` §4.3–4.4, or Kalinov–Lastovetsky (`001` §4.3, Figure 9)
    /// with `bq` block columns split over the grid columns and `bp` block rows
    /// split inside every grid column, both by Algorithm 2.1 (`000` §2.1).
    ///
    /// # Errors
    /// [`DenseError::BadParam`] if `times.len() != rows * cols`; [`DenseError::Alloc`]
    /// for bad times, an empty panel or a search too large.
    #[allow(clippy::too_many_arguments)]
    pub fn build_with(
        alloc: GridAlloc,
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
        let (r_by_col, c, time_per_block) = match alloc {
            GridAlloc::Panel => {
                let pan = grid_2d_panel(&t, bp, bq, &Grid2dParams::default())?;
                (vec![pan.r; cols], pan.c, pan.time_per_block)
            }
            GridAlloc::Kl => {
                let kl = kalinov_lastovetsky(&t)?;
                let c = kl.integer_columns(bq)?.counts;
                let mut r_by_col = Vec::with_capacity(cols);
                let mut worst: f64 = 0.0;
                for (j, &cj) in c.iter().enumerate() {
                    let col: Vec<f64> = t.iter().map(|row| row[j]).collect();
                    let r = optimal_chunks(&col, bp)?.counts;
                    for (i, &ri) in r.iter().enumerate() {
                        worst = worst.max(ri as f64 * col[i] * cj as f64);
                    }
                    r_by_col.push(r);
                }
                (r_by_col, c, worst / (bp.max(1) * bq.max(1)) as f64)
            }
        };
        let nb = n_blocks(n, block);
        let cp = pattern(&c);
        let row_owners: Vec<Vec<usize>> = r_by_col
            .iter()
            .map(|r| {
                let rp = pattern(r);
                (0..nb).map(|b| rp[b % rp.len()]).collect()
            })
            .collect();
        Ok(Self {
            n,
            block,
            rows,
            cols,
            alloc,
            r: r_by_col[0].clone(),
            c,
            row_owner: row_owners[0].clone(),
            col_owner: (0..nb).map(|b| cp[b % cp.len()]).collect(),
            r_by_col,
            row_owners,
            time_per_block,
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

    /// Matrix rows owned by grid row `i` (in grid column 0 for
    /// [`GridAlloc::Kl`]; see [`GridLayout::rows_at`]).
    pub fn rows_of(&self, i: usize) -> Vec<usize> {
        self.indices(&self.row_owner, i)
    }

    /// Matrix rows held by process `(i, j)`.
    pub fn rows_at(&self, i: usize, j: usize) -> Vec<usize> {
        self.indices(&self.row_owners[j], i)
    }

    /// Matrix columns owned by grid column `j`.
    pub fn cols_of(&self, j: usize) -> Vec<usize> {
        self.indices(&self.col_owner, j)
    }

    /// Whether every grid column splits the rows alike (then a block column is
    /// broadcast along the grid rows).
    pub fn aligned(&self) -> bool {
        self.row_owners.iter().all(|o| *o == self.row_owner)
    }

    /// Matrix entries held by every rank.
    pub fn entries_per_rank(&self) -> Vec<usize> {
        let mut out = Vec::with_capacity(self.rows * self.cols);
        for i in 0..self.rows {
            for j in 0..self.cols {
                out.push(self.rows_at(i, j).len() * self.cols_of(j).len());
            }
        }
        out
    }

    /// Matrix rows held by every rank.
    pub fn rows_per_rank(&self) -> Vec<usize> {
        (0..self.rows * self.cols)
            .map(|r| self.rows_at(r / self.cols, r % self.cols).len())
            .collect()
    }

    /// Matrix columns held by every rank.
    pub fn cols_per_rank(&self) -> Vec<usize> {
        (0..self.rows * self.cols)
            .map(|r| self.cols_of(r % self.cols).len())
            .collect()
    }

    fn check_comm<C: Comm + ?Sized>(&self, comm: &C) -> Result<(), DenseError> {
        if comm.size() != self.rows * self.cols {
            return Err(DenseError::BadParam {
                what: "grid",
                value: format!("{}x{}", self.rows, self.cols),
                reason: "rows x cols must equal the communicator size",
            });
        }
        Ok(())
    }
}

/// This process's rows x columns of `s`, column-major.
fn fill(s: &Source, n: usize, rows: &[usize], cols: &[usize]) -> Vec<f64> {
    let mut d = Vec::with_capacity(rows.len() * cols.len());
    for &c in cols {
        d.extend(rows.iter().map(|&r| s.entry(n, r, c)));
    }
    d
}

/// The outer-product `C = A B` on the grid (collective over `comm`, whose size
/// must be `rows * cols`). Returns this rank's part of `C`
/// (`rows_at(i, j) × cols_of(j)`, column-major).
///
/// Block column `k` of `A` goes along the grid rows when the layout is
/// [aligned](GridLayout::aligned) (the panel allocation); otherwise
/// (Kalinov–Lastovetsky) its owners gather it to every process, since the row
/// owners differ between grid columns.
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
    layout.check_comm(comm)?;
    let me = comm.rank();
    let (gi, gj) = (me / layout.cols, me % layout.cols);
    let row_comm = comm.split(gi, gj);
    let col_comm = comm.split(layout.cols + gj, gi);
    let aligned = layout.aligned();
    let my_rows = layout.rows_at(gi, gj);
    let my_cols = layout.cols_of(gj);
    let (mr, mc) = (my_rows.len(), my_cols.len());
    let a_loc = fill(a, n, &my_rows, &my_cols);
    let b_loc = fill(b, n, &my_rows, &my_cols);
    let mut c_loc = vec![0.0; mr * mc];
    let mut apiece = Vec::new();
    let mut bpiece = Vec::new();
    let mut full = Vec::new();
    for k in 0..layout.col_owner.len() {
        let s = k * layout.block;
        let e = (s + layout.block).min(n);
        let w = e - s;
        // A(my rows, block k), from grid column col_owner[k].
        let ocol = layout.col_owner[k];
        apiece.clear();
        apiece.resize(mr * w, 0.0);
        let first = my_cols.partition_point(|&c| c < s);
        if aligned {
            if gj == ocol {
                apiece.copy_from_slice(&a_loc[first * mr..(first + w) * mr]);
            }
            row_comm.broadcast(&mut apiece, ocol);
        } else {
            // Every process of grid column ocol contributes its rows; all receive
            // the whole n × w block column (rank order, column-major per rank).
            let counts: Vec<usize> = (0..comm.size())
                .map(|r| {
                    if r % layout.cols == ocol {
                        layout.rows_at(r / layout.cols, ocol).len() * w
                    } else {
                        0
                    }
                })
                .collect();
            let send: &[f64] = if gj == ocol {
                &a_loc[first * mr..(first + w) * mr]
            } else {
                &[]
            };
            full.clear();
            full.resize(counts.iter().sum(), 0.0);
            comm.all_gather_v(send, &counts, &mut full);
            let mut col = vec![0.0; n * w];
            let mut off = 0;
            for i in 0..layout.rows {
                let rows = layout.rows_at(i, ocol);
                for c in 0..w {
                    for (x, &r) in rows.iter().enumerate() {
                        col[c * n + r] = full[off + c * rows.len() + x];
                    }
                }
                off += rows.len() * w;
            }
            for c in 0..w {
                for (x, &r) in my_rows.iter().enumerate() {
                    apiece[c * mr + x] = col[c * n + r];
                }
            }
        }
        // B(block k, my cols): from the owner of block row k in this grid column.
        let orow = layout.row_owners[gj][k];
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

/// This process's place on the `R × Q` grid and the part of the layout it
/// works on, as the panel factorizations [`grid_lu`] and [`grid_qr`] (Mehaut
/// and Robert §4.3–4.5) share them: process `(gi, gj)` holds the rows
/// `rows_at(gi, gj)` of the columns `cols_of(gj)`, and gathers every panel
/// down its grid column.
struct GridPart<C> {
    /// Rank in the whole communicator.
    me: usize,
    /// Grid row of this process.
    gi: usize,
    /// Grid column of this process.
    gj: usize,
    /// The processes of grid column `gj`, ordered by grid row.
    col_comm: C,
    /// Matrix rows held here (`rows_at(gi, gj)`).
    my_rows: Vec<usize>,
    /// Matrix columns held here (`cols_of(gj)`).
    my_cols: Vec<usize>,
    /// `my_rows.len()`, `my_cols.len()`.
    mr: usize,
    mc: usize,
    /// `owner_rows[i]`: the matrix rows held by process `(i, gj)`.
    owner_rows: Vec<Vec<usize>>,
}

/// Where block column `k` of a panel factorization stands on this process.
#[derive(Debug, Clone, Copy)]
struct PanelStep {
    /// Global columns `c0..c1` of the block column (width `w`).
    c0: usize,
    c1: usize,
    w: usize,
    /// Rows of the panel, `n - c0` (rows `c0..n`).
    m: usize,
    /// Grid column owning the block column.
    ocol: usize,
    /// Rank owning the diagonal block, which factors the panel.
    froot: usize,
    /// Local row index of the first row `>= c0`.
    r0: usize,
    /// Local column index of `c0` and of the first column `>= c1`.
    lc0: usize,
    lc1: usize,
}

impl<C: Comm> GridPart<C> {
    /// Checks `a` and the communicator against `layout`, splits off the grid
    /// column's communicator and fills this process's blocks of `a`
    /// (returned, `my_rows × my_cols` column-major). Collective over `comm`.
    fn new(comm: &C, layout: &GridLayout, a: &Source) -> Result<(Self, Vec<f64>), DenseError> {
        let n = layout.n;
        a.validate(n)?;
        layout.check_comm(comm)?;
        let q = layout.cols;
        let me = comm.rank();
        let (gi, gj) = (me / q, me % q);
        let col_comm = comm.split(q + gj, gi);
        let my_rows = layout.rows_at(gi, gj);
        let my_cols = layout.cols_of(gj);
        let local = fill(a, n, &my_rows, &my_cols);
        let owner_rows = (0..layout.rows).map(|i| layout.rows_at(i, gj)).collect();
        let part = GridPart {
            me,
            gi,
            gj,
            col_comm,
            mr: my_rows.len(),
            mc: my_cols.len(),
            my_rows,
            my_cols,
            owner_rows,
        };
        Ok((part, local))
    }

    /// Block column `k`: its columns, owners, and local row and column offsets.
    fn step(&self, layout: &GridLayout, k: usize) -> PanelStep {
        let (n, bw) = (layout.n, layout.block);
        let c0 = k * bw;
        let c1 = (c0 + bw).min(n);
        let ocol = layout.col_owner[k];
        let frow = layout.row_owners[ocol][k];
        PanelStep {
            c0,
            c1,
            w: c1 - c0,
            m: n - c0,
            ocol,
            froot: frow * layout.cols + ocol,
            r0: self.my_rows.partition_point(|&r| r < c0),
            lc0: self.my_cols.partition_point(|&c| c < c0),
            lc1: self.my_cols.partition_point(|&c| c < c1),
        }
    }

    /// The panel gather of step 1 of [`grid_lu`] and [`grid_qr`], on the
    /// processes of grid column `step.ocol`: they gather rows `c0..n` of the
    /// block column down the grid column (`all_gather_v` on the column
    /// communicator), and the owner of the diagonal block (`step.froot`) lays
    /// them out as the `m × w` column-major panel in `panel[..m * w]`.
    /// `gathered` is scratch. Returns the bytes this process sent.
    fn gather_panel(
        &self,
        local: &[f64],
        step: &PanelStep,
        gathered: &mut Vec<f64>,
        panel: &mut [f64],
    ) -> u64 {
        let PanelStep {
            c0,
            w,
            m,
            froot,
            r0,
            lc0,
            ..
        } = *step;
        let mr = self.mr;
        let counts: Vec<usize> = self
            .owner_rows
            .iter()
            .map(|rows| (rows.len() - rows.partition_point(|&r| r < c0)) * w)
            .collect();
        let mut send = Vec::with_capacity((mr - r0) * w);
        for c in lc0..lc0 + w {
            send.extend_from_slice(&local[c * mr + r0..(c + 1) * mr]);
        }
        gathered.clear();
        gathered.resize(counts.iter().sum(), 0.0);
        self.col_comm.all_gather_v(&send, &counts, gathered);
        if self.me == froot {
            let mut off = 0;
            for (rows, &cnt) in self.owner_rows.iter().zip(&counts) {
                let rs = &rows[rows.partition_point(|&r| r < c0)..];
                for c in 0..w {
                    for (x, &r) in rs.iter().enumerate() {
                        panel[c * m + r - c0] = gathered[off + c * rs.len() + x];
                    }
                }
                off += cnt;
            }
        }
        (send.len() * 8) as u64
    }

    /// Stores this process's rows of the factored panel (`m × w` column-major,
    /// rows `c0..n`, the first `m * w` entries of `panel`) into its copy of
    /// the block column; for the processes of grid column `step.ocol`.
    fn store_panel(&self, local: &mut [f64], step: &PanelStep, panel: &[f64]) {
        let PanelStep {
            c0, w, m, r0, lc0, ..
        } = *step;
        let mr = self.mr;
        for c in 0..w {
            for lr in r0..mr {
                local[(lc0 + c) * mr + lr] = panel[c * m + self.my_rows[lr] - c0];
            }
        }
    }
}

/// This process's part of the `LU` factors of [`grid_lu`].
#[derive(Debug, Clone)]
pub struct GridLu {
    /// `rows_at(i, j) × cols_of(j)`, column-major: `L` (unit, strictly below the
    /// diagonal) and `U` (on and above), after all row swaps (LAPACK storage).
    pub local: Vec<f64>,
    /// `ipiv[i]`: row `i` was swapped with row `ipiv[i] >= i` (0-based LAPACK
    /// transpositions). Replicated.
    pub ipiv: Vec<usize>,
    /// Bytes this process sent in the panel gathers, swap exchanges and
    /// broadcasts it rooted (a measure of the 2-D communication).
    pub bytes_sent: u64,
}

/// Right-looking blocked LU with partial pivoting, `PA = LU`, on the 2-D grid
/// layout (`001` §4.3–4.5; collective over `comm`, size `rows * cols`; every
/// process fills its own blocks from `a`).
///
/// Step `k` (block column `k`, global columns `c0..c1`, owned by grid column
/// `q_k`):
/// 1. *Panel*: the processes of grid column `q_k` gather rows `c0..n` of the
///    block column down the grid column (`all_gather_v` on the column
///    communicator), and the owner of the diagonal block factors it with faer's
///    `lu_in_place` (partial pivoting over the whole panel, i.e. across the
///    grid column's processes). This is the simpler variant the 2-D pivot search
///    allows: no distributed pivot search, the panel is factored on one process.
/// 2. The factored panel (`L11`, `L21`) and its pivots are broadcast to every
///    process (a broadcast along the grid rows would do for the panel allocation,
///    one over all processes also serves Kalinov–Lastovetsky, whose row owners
///    differ between grid columns).
/// 3. *Row swaps*: in every grid column, the at most `2w` rows touched by the
///    pivots are exchanged among the grid column's processes (`all_gather_v`
///    of the touched rows), applied to all local columns but the panel.
/// 4. *U block row*: the owner of block row `k` in every grid column solves
///    `U12 = L11⁻¹ A12` (faer TRSM) and broadcasts it down its grid column.
/// 5. *Update*: every process does `A22 -= L21 U12` on its rows below `c1` and
///    columns right of `c1` (faer GEMM).
///
/// # Errors
/// [`DenseError::BadParam`] if the communicator does not match the grid;
/// [`DenseError::BadMatrix`] for a wrong-sized source; [`DenseError::Singular`]
/// for an exactly zero pivot (on every process).
pub fn grid_lu<C: Comm>(
    comm: &C,
    layout: &GridLayout,
    a: &Source,
    par: Par,
) -> Result<GridLu, DenseError> {
    let n = layout.n;
    let (g, mut local) = GridPart::new(comm, layout, a)?;
    let (me, gi, gj, mr, mc) = (g.me, g.gi, g.gj, g.mr, g.mc);
    let (my_rows, col_comm) = (&g.my_rows, &g.col_comm);
    let mut ipiv = vec![0usize; n];
    let mut bytes_sent = 0u64;
    let nb = layout.col_owner.len();
    let bw = layout.block;
    let mut mem = MemBuffer::new(lu_in_place_scratch::<usize, f64>(
        n,
        bw,
        par,
        Default::default(),
    ));
    let mut perm = vec![0usize; n];
    let mut perm_inv = vec![0usize; n];
    let mut panel: Vec<f64> = Vec::new();
    let mut gathered: Vec<f64> = Vec::new();
    let mut ubuf: Vec<f64> = Vec::new();
    let mut l21: Vec<f64> = Vec::new();
    for k in 0..nb {
        let step = g.step(layout, k);
        let PanelStep {
            c0,
            c1,
            w,
            m,
            ocol,
            froot,
            r0,
            lc0,
            lc1,
        } = step;
        panel.clear();
        panel.resize(m * w + w + 1, 0.0);
        // Local row index of the first row >= c1.
        let r1 = my_rows.partition_point(|&r| r < c1);
        // 1. Panel gather down grid column ocol, factorization on its diagonal owner.
        if gj == ocol {
            bytes_sent += g.gather_panel(&local, &step, &mut gathered, &mut panel);
            if me == froot {
                let (pm, tail) = panel.split_at_mut(m * w);
                lu_in_place(
                    MatMut::from_column_major_slice_mut(pm, m, w),
                    &mut perm[..m],
                    &mut perm_inv[..m],
                    par,
                    MemStack::new(&mut mem),
                    Default::default(),
                );
                for (i, t) in perm_to_transpositions(&perm[..m], w).iter().enumerate() {
                    tail[i] = (c0 + t) as f64;
                }
                if let Some(i) = (0..w).find(|&i| pm[i * m + i] == 0.0) {
                    tail[w] = (c0 + i + 1) as f64;
                }
                bytes_sent += (panel.len() * 8 * (comm.size() - 1)) as u64;
            }
        }
        // 2. Factored panel and pivots to everybody.
        comm.broadcast(&mut panel, froot);
        let status = panel[m * w + w];
        if status > 0.0 {
            return Err(DenseError::Singular {
                column: status as usize - 1,
            });
        }
        for i in 0..w {
            ipiv[c0 + i] = panel[m * w + i] as usize;
        }
        if gj == ocol {
            g.store_panel(&mut local, &step, &panel);
        }
        // 3. Row swaps on every local column but the panel's.
        let swaps: Vec<(usize, usize)> = (c0..c1)
            .map(|i| (i, ipiv[i]))
            .filter(|&(i, p)| i != p)
            .collect();
        if !swaps.is_empty() {
            let mut touched: Vec<usize> = swaps.iter().flat_map(|&(i, p)| [i, p]).collect();
            touched.sort_unstable();
            touched.dedup();
            // src[t]: index in `touched` of the row that ends up in touched[t].
            let mut src: Vec<usize> = (0..touched.len()).collect();
            for &(i, p) in &swaps {
                let (a, b) = (
                    touched.binary_search(&i).unwrap_or(0),
                    touched.binary_search(&p).unwrap_or(0),
                );
                src.swap(a, b);
            }
            let swap_cols: Vec<usize> = (0..mc)
                .filter(|&c| gj != ocol || c < lc0 || c >= lc0 + w)
                .collect();
            let owned: Vec<Vec<(usize, usize)>> = g
                .owner_rows
                .iter()
                .map(|rows| {
                    touched
                        .iter()
                        .enumerate()
                        .filter_map(|(t, r)| rows.binary_search(r).ok().map(|lr| (t, lr)))
                        .collect()
                })
                .collect();
            let mine = &owned[gi];
            let ns = swap_cols.len();
            let mut send = Vec::with_capacity(mine.len() * ns);
            for &c in &swap_cols {
                send.extend(mine.iter().map(|&(_, lr)| local[c * mr + lr]));
            }
            bytes_sent += (send.len() * 8) as u64;
            let counts: Vec<usize> = owned.iter().map(|o| o.len() * ns).collect();
            gathered.clear();
            gathered.resize(counts.iter().sum(), 0.0);
            col_comm.all_gather_v(&send, &counts, &mut gathered);
            let nt = touched.len();
            let mut vals = vec![0.0; nt * ns];
            let mut off = 0;
            for (o, &cnt) in owned.iter().zip(&counts) {
                for c in 0..ns {
                    for (x, &(t, _)) in o.iter().enumerate() {
                        vals[c * nt + t] = gathered[off + c * o.len() + x];
                    }
                }
                off += cnt;
            }
            for (c, &lc) in swap_cols.iter().enumerate() {
                for &(t, lr) in mine {
                    local[lc * mr + lr] = vals[c * nt + src[t]];
                }
            }
        }
        // 4. U12 = L11⁻¹ A12 on the owner of block row k, down the grid column.
        let ntr = mc - lc1;
        let drow = layout.row_owners[gj][k];
        if ntr > 0 {
            ubuf.clear();
            ubuf.resize(w * ntr, 0.0);
            if gi == drow {
                for c in 0..ntr {
                    ubuf[c * w..(c + 1) * w]
                        .copy_from_slice(&local[(lc1 + c) * mr + r0..(lc1 + c) * mr + r0 + w]);
                }
                let l11 = MatRef::from_column_major_slice(&panel[..m * w], m, w).subrows(0, w);
                solve_unit_lower_triangular_in_place(
                    l11,
                    MatMut::from_column_major_slice_mut(&mut ubuf, w, ntr),
                    par,
                );
                for c in 0..ntr {
                    local[(lc1 + c) * mr + r0..(lc1 + c) * mr + r0 + w]
                        .copy_from_slice(&ubuf[c * w..(c + 1) * w]);
                }
                bytes_sent += (ubuf.len() * 8 * (layout.rows - 1)) as u64;
            }
            col_comm.broadcast(&mut ubuf, drow);
        }
        // 5. A22 -= L21 U12 on my rows below c1, my columns right of c1.
        let nr = mr - r1;
        if nr > 0 && ntr > 0 {
            l21.clear();
            l21.resize(nr * w, 0.0);
            for c in 0..w {
                for (x, &r) in my_rows[r1..].iter().enumerate() {
                    l21[c * nr + x] = panel[c * m + r - c0];
                }
            }
            let all = MatMut::from_column_major_slice_mut(&mut local, mr, mc);
            matmul(
                all.submatrix_mut(r1, lc1, nr, ntr),
                Accum::Add,
                MatRef::from_column_major_slice(&l21, nr, w),
                MatRef::from_column_major_slice(&ubuf, w, ntr),
                -1.0,
                par,
            );
        }
    }
    Ok(GridLu {
        local,
        ipiv,
        bytes_sent,
    })
}

/// This process's part of the `QR` factors of [`grid_qr`].
#[derive(Debug, Clone)]
pub struct GridQr {
    /// `rows_at(i, j) × cols_of(j)`, column-major: `R` on and above the
    /// diagonal, the Householder vectors below it (faer's and LAPACK's storage).
    pub local: Vec<f64>,
    /// The upper triangular factors `T` of the block reflectors
    /// `H_k = I − V_k T_k⁻¹ V_kᵀ` (faer's convention), `block × n` column-major:
    /// panel `k`'s `w × w` factor in columns `c0..c1` (faer's `Q_coeff`, as
    /// [`crate::check::qr_errors`] takes it). Replicated.
    pub t_factors: Vec<f64>,
    /// Bytes this process sent in the panel gathers, the reductions of `Vᵀ A`
    /// down its grid column and the broadcasts it rooted.
    pub bytes_sent: u64,
}

/// Blocked Householder QR, `A = QR`, on the 2-D grid layout (Mehaut and Robert
/// §4.3, "LU and QR Decomposition on Heterogeneous Grids": the core is the same
/// rank-`r` update as LU's; collective over `comm`, size `rows * cols`; every
/// process fills its own blocks from `a`).
///
/// Step `k` (block column `k`, global columns `c0..c1`, width `w`, owned by
/// grid column `q_k`):
/// 1. *Panel*: the processes of grid column `q_k` gather rows `c0..n` of the
///    block column down the grid column (`all_gather_v` on the column
///    communicator), and the owner of the diagonal block factors it with faer's
///    `qr_in_place` (block size `w`): Householder vectors `V` (unit lower
///    trapezoidal), `R11`, and the `w × w` triangular factor `T` of the compact
///    WY form `H = I − V T⁻¹ Vᵀ`.
/// 2. The factored panel and `T` are broadcast to every process (along the
///    grid rows would do for the panel allocation; one broadcast over all
///    processes also serves Kalinov–Lastovetsky, whose row owners differ
///    between grid columns); the grid column `q_k` stores its rows of it.
/// 3. *Update* `A ← Hᵀ A = A − V T⁻ᵀ (Vᵀ A)` of the columns right of `c1`,
///    rows `c0..n`: every process forms `Vᵀ A` on its rows (faer GEMM), the
///    grid column sums it (`all_reduce`), every process solves with `Tᵀ` (faer
///    triangular solve) and subtracts `V X` from its rows (faer GEMM).
///
/// # Errors
/// [`DenseError::BadParam`] if the communicator does not match the grid;
/// [`DenseError::BadMatrix`] for a wrong-sized source.
pub fn grid_qr<C: Comm>(
    comm: &C,
    layout: &GridLayout,
    a: &Source,
    par: Par,
) -> Result<GridQr, DenseError> {
    let n = layout.n;
    let (g, mut local) = GridPart::new(comm, layout, a)?;
    let (me, gj, mr, mc) = (g.me, g.gj, g.mr, g.mc);
    let (my_rows, col_comm) = (&g.my_rows, &g.col_comm);
    let nb = layout.col_owner.len();
    let bw = layout.block;
    let mut t_factors = vec![0.0; bw * n];
    let mut bytes_sent = 0u64;
    let mut mem = MemBuffer::new(qr_in_place_scratch::<f64>(
        n,
        bw,
        bw,
        par,
        Default::default(),
    ));
    let mut panel: Vec<f64> = Vec::new();
    let mut gathered: Vec<f64> = Vec::new();
    let mut v: Vec<f64> = Vec::new();
    let mut wbuf: Vec<f64> = Vec::new();
    for k in 0..nb {
        let step = g.step(layout, k);
        let PanelStep {
            c0,
            w,
            m,
            ocol,
            froot,
            r0,
            lc1,
            ..
        } = step;
        panel.clear();
        panel.resize(m * w + w * w, 0.0);
        // 1. Panel gather down grid column ocol, factorization on its diagonal owner.
        if gj == ocol {
            bytes_sent += g.gather_panel(&local, &step, &mut gathered, &mut panel);
            if me == froot {
                let (pm, tail) = panel.split_at_mut(m * w);
                qr_in_place(
                    MatMut::from_column_major_slice_mut(pm, m, w),
                    MatMut::from_column_major_slice_mut(tail, w, w),
                    par,
                    MemStack::new(&mut mem),
                    Default::default(),
                );
                bytes_sent += (panel.len() * 8 * (comm.size() - 1)) as u64;
            }
        }
        // 2. Factored panel and T to everybody; grid column ocol keeps its rows.
        comm.broadcast(&mut panel, froot);
        let (pm, tail) = panel.split_at(m * w);
        for c in 0..w {
            t_factors[(c0 + c) * bw..(c0 + c) * bw + w].copy_from_slice(&tail[c * w..(c + 1) * w]);
        }
        if gj == ocol {
            g.store_panel(&mut local, &step, pm);
        }
        // 3. A ← A − V T⁻ᵀ (Vᵀ A) on my rows >= c0, my columns right of c1.
        let ntr = mc - lc1;
        if ntr == 0 {
            continue;
        }
        let nr = mr - r0;
        // V on my rows: unit diagonal, zero above it.
        v.clear();
        v.resize(nr * w, 0.0);
        for c in 0..w {
            for (x, &r) in my_rows[r0..].iter().enumerate() {
                let i = r - c0;
                v[c * nr + x] = match i.cmp(&c) {
                    std::cmp::Ordering::Greater => pm[c * m + i],
                    std::cmp::Ordering::Equal => 1.0,
                    std::cmp::Ordering::Less => 0.0,
                };
            }
        }
        wbuf.clear();
        wbuf.resize(w * ntr, 0.0);
        if nr > 0 {
            let all = MatRef::from_column_major_slice(&local, mr, mc);
            matmul(
                MatMut::from_column_major_slice_mut(&mut wbuf, w, ntr),
                Accum::Replace,
                MatRef::from_column_major_slice(&v, nr, w).transpose(),
                all.submatrix(r0, lc1, nr, ntr),
                1.0,
                par,
            );
        }
        if layout.rows > 1 {
            bytes_sent += (wbuf.len() * 8) as u64;
            col_comm.all_reduce(&mut wbuf, ReduceOp::Sum);
        }
        if nr == 0 {
            continue;
        }
        let t = MatRef::from_column_major_slice(tail, w, w);
        solve_lower_triangular_in_place(
            t.transpose(),
            MatMut::from_column_major_slice_mut(&mut wbuf, w, ntr),
            par,
        );
        let all = MatMut::from_column_major_slice_mut(&mut local, mr, mc);
        matmul(
            all.submatrix_mut(r0, lc1, nr, ntr),
            Accum::Add,
            MatRef::from_column_major_slice(&v, nr, w),
            MatRef::from_column_major_slice(&wbuf, w, ntr),
            -1.0,
            par,
        );
    }
    Ok(GridQr {
        local,
        t_factors,
        bytes_sent,
    })
}

/// Gathers the parts of a grid-distributed matrix (`C` of [`grid_gemm`], the
/// factors of [`grid_lu`] or [`grid_qr`]) into the whole `n × n` matrix on every process
/// (collective).
pub fn gather_grid<C: Comm + ?Sized>(comm: &C, layout: &GridLayout, local: &[f64]) -> Vec<f64> {
    let n = layout.n;
    let counts = layout.entries_per_rank();
    let mut all = vec![0.0; counts.iter().sum()];
    comm.all_gather_v(local, &counts, &mut all);
    let mut out = vec![0.0; n * n];
    let mut off = 0;
    for i in 0..layout.rows {
        for j in 0..layout.cols {
            let rows = layout.rows_at(i, j);
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
