//! Distributed right-looking LU with partial pivoting and Householder QR on a 1-D
//! column-block layout (Boudet et al. §2.2: "at each step, the processor owning the
//! pivot block factors it and broadcasts it to all the other processors, which
//! update their remaining column blocks").
//!
//! Per step `k` (panel = column block `k`, rows `c0..n`):
//! 1. the panel's factor process factors it with faer (`lu_in_place` /
//!    `qr_in_place`);
//! 2. the factored panel, with its pivots (LU) or the triangular factor `T` of its
//!    block reflector `I - Y T Yᵀ` (QR), is broadcast;
//! 3. every process updates its own trailing columns, kept as one contiguous
//!    column-major array: row swaps, TRSM and GEMM (LU), or the WY update (QR),
//!    all faer kernels.
//!
//! With the optimized distribution (`000` §4.4) the factor process of panel `k`
//! (the fastest) is not its home: the home sends block `k` to it before the update
//! of step `k - 1`, the fastest performs that update and the factorization, and
//! the broadcast carries the rows the home skipped.
//!
//! Optional look-ahead of depth 1 (as in HPL's right-looking LU), with blocking
//! broadcasts: the home of block `k + 1` updates that block first, factors and
//! broadcasts it, and only then updates the rest of its columns with panel `k`;
//! meanwhile the other processes update their first trailing blocks for as long
//! as that home took the last time (sent in its panel's last slot), then join the
//! broadcast. The factorization then overlaps with updates instead of sitting on
//! the critical path (the `000` model counts only the updates). Every column sees
//! the same operations in the same order, so the factors do not change. Not
//! across a borrowed block or a re-planning.
//!
//! Semi-static re-planning (`000` §2.1 and §4.5): every `S` panels the rates are
//! gathered again — by default each process's rate over its own trailing updates
//! since the last re-planning (the paper's "cycle-times measured during the last
//! phase", at the cost of one all-gather), or from a fresh [`RateMeter`] section —
//! and the remaining column blocks are laid out again ([`reallocate_remaining`])
//! when the weighted `000` model predicts the new layout to finish the remaining
//! steps, moves included, at least [`Replan::min_gain`] sooner; the blocks that
//! change owner are moved with one all-to-all, and the bytes moved are counted.

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::householder::apply_block_householder_transpose_on_the_left_in_place_with_conj;
use faer::linalg::lu::partial_pivoting::factor::{lu_in_place, lu_in_place_scratch};
use faer::linalg::matmul::matmul;
use faer::linalg::qr::no_pivoting::factor::{qr_in_place, qr_in_place_scratch};
use faer::linalg::temp_mat_scratch;
use faer::linalg::triangular_solve::solve_unit_lower_triangular_in_place;
use faer::reborrow::{Reborrow, ReborrowMut};
use faer::{Accum, Conj, MatMut, MatRef, Par};
use serde::{Deserialize, Serialize};

use super::alloc::{reallocate_remaining, Reallocation};
use super::layout::{ColumnLayout, LayoutKind};
pub use super::rates::CHARGE_PER_FLOP;
use super::rates::{RateMeter, RateSample};
use super::{DenseError, Source};
use lbcomm::Comm;

/// Which factorization.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Factorization {
    /// `PA = LU`, partial pivoting.
    Lu,
    /// `A = QR`, Householder, no pivoting.
    Qr,
}

/// Where a semi-static re-planning takes its new cycle-times from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReplanRates {
    /// Each process's rate over its own trailing updates since the last
    /// re-planning (flops per second of the time spent updating, waits
    /// excluded): no extra work (`000` §2.1, "measured during the last phase").
    #[default]
    Updates,
    /// A fresh [`RateMeter`] section of GEMM block updates on every process
    /// (`003` §5): extra work, paced by the slowest process.
    Section,
}

/// Semi-static re-planning of a 1-D LU/QR (`000` §2.1, §4.5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Replan {
    /// Re-plan after every `every` panels; 0: static layout. Default: 0.
    pub every: usize,
    /// Source of the new cycle-times. Default: [`ReplanRates::Updates`].
    pub rates: ReplanRates,
    /// Lay out again only if the weighted `000` model
    /// ([`ColumnLayout::predicted_time_weighted_from`]), on the new cycle-times,
    /// predicts the new layout's remaining steps plus the moves (a moved block
    /// costing one full-height block update at the fastest rate, on both ends)
    /// to take at most
    /// `1 - min_gain` of the current layout's: measured rates swing, and a
    /// re-layout that gains less than their noise only moves data. In `0..1`.
    /// Default: 0.1.
    pub min_gain: f64,
    /// With [`ReplanRates::Updates`], the shortest time in seconds (communicator
    /// clock) over which a process's update rate is taken: while some process
    /// has updated for less since the last re-planning, the re-planning is
    /// postponed to the next one and the updates keep adding up (a rate over
    /// less than a few scheduler slices measures the slice, not the share of
    /// the core). Default: 0.02.
    pub min_seconds: f64,
}

impl Default for Replan {
    fn default() -> Self {
        Self {
            every: 0,
            rates: ReplanRates::Updates,
            min_gain: 0.1,
            min_seconds: 0.02,
        }
    }
}

impl Replan {
    /// Re-planning every `s` panels, other fields at their defaults.
    pub fn every(s: usize) -> Self {
        Self {
            every: s,
            ..Self::default()
        }
    }
}

/// Counters of one distributed factorization.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FactorStats {
    /// Number of semi-static re-plannings performed (rates taken; postponed
    /// ones, see [`Replan::min_seconds`], not counted).
    pub replans: usize,
    /// Re-plannings that changed the layout (the model predicted a gain of at
    /// least [`Replan::min_gain`]).
    pub relayouts: usize,
    /// Bytes of matrix data moved by re-plannings.
    pub bytes_moved: u64,
    /// Column blocks moved by re-plannings.
    pub blocks_moved: usize,
    /// Bytes sent to the factor process by the optimized distribution.
    pub bytes_to_factor: u64,
    /// Rates measured at each re-planning (the first measurement is not here).
    pub replan_rates: Vec<RateSample>,
    /// Seconds (communicator clock) spent gathering or measuring rates during
    /// re-planning.
    pub replan_seconds: f64,
}

/// The distributed factors held by one process.
#[derive(Debug, Clone)]
pub struct DistFactors {
    /// Which factorization.
    pub kind: Factorization,
    /// Final layout (after re-plannings).
    pub layout: ColumnLayout,
    /// Global column blocks stored here, ascending.
    pub blocks: Vec<usize>,
    /// Their columns, `n × ncols` column-major, blocks in the order of `blocks`:
    /// `L` (unit, strictly below the diagonal) and `U` for LU; `R` and the
    /// Householder vectors for QR (faer's storage).
    pub local: Vec<f64>,
    /// LU: `ipiv[i]`: row `i` was swapped with row `ipiv[i] >= i` (LAPACK's
    /// convention, 0-based). Replicated.
    pub ipiv: Vec<usize>,
    /// QR: the `T` factors of the block reflectors, `block × n` column-major (panel
    /// `k`'s `w × w` factor in columns `c0..c1`, faer's `Q_coeff` layout). Replicated.
    pub t_factors: Vec<f64>,
    /// Counters.
    pub stats: FactorStats,
}

/// The columns one process stores of a 1-D column-block layout: its blocks in
/// ascending order, each column contiguous (column-major, all `n` rows).
///
/// Built from a [`Source`] by [`LocalColumns::new`] (the distribution of the
/// matrix, which `jdmg dense` times apart from the factorization, as ScaLAPACK's
/// drivers time `pdgetrf` alone) and consumed by [`factor_distributed_with`].
pub struct LocalColumns {
    blocks: Vec<usize>,
    /// Column offset of each local block, plus the total at the end.
    offs: Vec<usize>,
    data: Vec<f64>,
}

impl LocalColumns {
    /// The columns process `rank` stores of `layout`, filled from `src`.
    ///
    /// # Errors
    /// [`DenseError::BadMatrix`] if `src` does not hold `layout.n²` entries.
    pub fn new(layout: &ColumnLayout, rank: usize, src: &Source) -> Result<Self, DenseError> {
        src.validate(layout.n)?;
        let n = layout.n;
        let blocks = layout.blocks_of(rank);
        let mut offs = vec![0];
        for &j in &blocks {
            let (s, e) = layout.block_cols(j);
            offs.push(offs.last().copied().unwrap_or(0) + e - s);
        }
        let ncols = *offs.last().unwrap_or(&0);
        let mut data = vec![0.0; n * ncols];
        for (b, &j) in blocks.iter().enumerate() {
            let (s, e) = layout.block_cols(j);
            for (lc, gc) in (offs[b]..).zip(s..e) {
                let col = &mut data[lc * n..(lc + 1) * n];
                for (i, x) in col.iter_mut().enumerate() {
                    *x = src.entry(n, i, gc);
                }
            }
        }
        Ok(Self { blocks, offs, data })
    }

    fn ncols(&self) -> usize {
        *self.offs.last().unwrap_or(&0)
    }

    /// Local index of the first block with global index `> k`.
    fn first_after(&self, k: usize) -> usize {
        self.blocks.partition_point(|&j| j <= k)
    }

    fn index_of(&self, j: usize) -> Option<usize> {
        self.blocks.binary_search(&j).ok()
    }

    /// Columns (local) of local block `b`.
    fn cols(&self, b: usize) -> std::ops::Range<usize> {
        self.offs[b]..self.offs[b + 1]
    }
}

/// Block `k+1` borrowed by the factor process (optimized distribution).
struct Pending {
    block: usize,
    row0: usize,
    width: usize,
    /// Rows `row0..n`, column-major.
    data: Vec<f64>,
}

/// Where panel `k` sits and what its broadcast carries.
struct PanelGeometry {
    k: usize,
    c0: usize,
    c1: usize,
    w: usize,
    /// First row carried by the broadcast: `c0`, or where the borrowed copy
    /// starts (the home skipped the update of the previous step).
    rb: usize,
    /// `n - rb`.
    prows: usize,
    /// Pivots (LU, `w`) or the `T` factor (QR, `w²`) after the panel.
    extra: usize,
}

impl PanelGeometry {
    fn of(kind: Factorization, layout: &ColumnLayout, k: usize) -> Self {
        let (c0, c1) = layout.block_cols(k);
        let w = c1 - c0;
        let rb = if layout.factor[k] == layout.home[k] {
            c0
        } else if k == 0 {
            0
        } else {
            layout.block_cols(k - 1).0
        };
        let extra = match kind {
            Factorization::Lu => w,
            Factorization::Qr => w * w,
        };
        Self {
            k,
            c0,
            c1,
            w,
            rb,
            prows: layout.n - rb,
            extra,
        }
    }

    /// Length of the broadcast buffer: the panel's rows `rb..n`, the pivots or
    /// `T`, the status and the look-ahead's lead time.
    fn buffer_len(&self) -> usize {
        self.prows * self.w + self.extra + 2
    }
}

/// The columns the factor process factors: its own block, or the borrowed one.
enum PanelSource<'a> {
    Home {
        data: &'a [f64],
        cols: std::ops::Range<usize>,
    },
    Borrowed(Pending),
}

impl<'a> PanelSource<'a> {
    fn new(loc: &'a LocalColumns, k: usize, home: bool, pending: &mut Option<Pending>) -> Self {
        if home {
            let b = loc.index_of(k).expect("home stores its block");
            Self::Home {
                data: &loc.data,
                cols: loc.cols(b),
            }
        } else {
            Self::Borrowed(
                pending
                    .take()
                    .expect("factor process holds the borrowed block"),
            )
        }
    }
}

/// Factors panel `geo` with faer into `panel`: rows `rb..n` of its columns, then
/// the pivots (global row indices, LU) or `T` (QR), then a status (LU: 1 + the
/// first column with an exactly zero pivot, else 0), then a slot for the
/// look-ahead's lead time.
#[allow(clippy::too_many_arguments)]
fn factor_panel(
    kind: Factorization,
    geo: &PanelGeometry,
    src: PanelSource<'_>,
    panel: &mut Vec<f64>,
    mem: &mut MemBuffer,
    perm: &mut [usize],
    perm_inv: &mut [usize],
    par: Par,
) {
    let PanelGeometry {
        k,
        c0,
        w,
        rb,
        prows,
        extra,
        ..
    } = *geo;
    let n = rb + prows;
    panel.clear();
    panel.resize(geo.buffer_len(), 0.0);
    match src {
        PanelSource::Home { data, cols } => {
            for (pc, lc) in cols.enumerate() {
                panel[pc * prows..(pc + 1) * prows]
                    .copy_from_slice(&data[lc * n + rb..(lc + 1) * n]);
            }
        }
        PanelSource::Borrowed(pd) => {
            debug_assert_eq!((pd.block, pd.row0, pd.width), (k, rb, w));
            panel[..prows * w].copy_from_slice(&pd.data);
        }
    }
    let (pm, tail) = panel.split_at_mut(prows * w);
    let mut pmat = MatMut::from_column_major_slice_mut(pm, prows, w);
    let fac = pmat.rb_mut().subrows_mut(c0 - rb, n - c0);
    let stack = MemStack::new(mem);
    let mut status = 0.0;
    match kind {
        Factorization::Lu => {
            let m = n - c0;
            lu_in_place(
                fac,
                &mut perm[..m],
                &mut perm_inv[..m],
                par,
                stack,
                Default::default(),
            );
            let tr = perm_to_transpositions(&perm[..m], w);
            for (i, t) in tr.iter().enumerate() {
                tail[i] = (c0 + t) as f64;
            }
            let fac = pmat.rb().subrows(c0 - rb, n - c0);
            if let Some(i) = (0..w).find(|&i| fac[(i, i)] == 0.0) {
                status = (c0 + i + 1) as f64;
            }
        }
        Factorization::Qr => {
            let tm = MatMut::from_column_major_slice_mut(&mut tail[..w * w], w, w);
            qr_in_place(fac, tm, par, stack, Default::default());
        }
    }
    tail[extra] = status;
}

/// The update of step `k` with its factored panel.
struct Step<'a> {
    kind: Factorization,
    n: usize,
    c0: usize,
    w: usize,
    piv: &'a [usize],
    panel: MatRef<'a, f64>,
    t: MatRef<'a, f64>,
    par: Par,
}

impl Step<'_> {
    /// Swaps (LU) and updates rows `c0..n` of local block `b` alone.
    fn update_block(&self, loc: &mut LocalColumns, b: usize, mem: &mut MemBuffer) {
        let n = self.n;
        let r = loc.cols(b);
        if self.kind == Factorization::Lu {
            apply_swaps(
                &mut loc.data[r.start * n..r.end * n],
                n,
                r.len(),
                0,
                self.c0,
                self.piv,
            );
        }
        let ncols = loc.ncols();
        let all = MatMut::from_column_major_slice_mut(&mut loc.data, n, ncols);
        let block = all.submatrix_mut(self.c0, r.start, n - self.c0, r.len());
        update_columns(
            self.kind,
            block,
            self.panel,
            self.t,
            self.w,
            self.par,
            MemStack::new(mem),
        );
    }
}

/// Applies the transpositions `ipiv[c0 + i] = c0 + ...` of one panel (rows
/// `c0..`, `w` of them) to the columns of `data` (leading dimension `ld`, first
/// row of `data` is global row `row0`).
///
/// Row by row over groups of [`SWAP_COLUMNS`] columns, as LAPACK's `dlaswp`:
/// the swaps of one row pair in different columns are independent loads, where
/// a column at a time waits for each scattered pivot row in turn.
fn apply_swaps(data: &mut [f64], ld: usize, ncols: usize, row0: usize, c0: usize, piv: &[usize]) {
    let data = &mut data[..ncols * ld];
    for group in data.chunks_mut(SWAP_COLUMNS * ld) {
        for (i, &p) in piv.iter().enumerate() {
            let (a, b) = (c0 + i - row0, p - row0);
            if a != b {
                for col in group.chunks_exact_mut(ld) {
                    col.swap(a, b);
                }
            }
        }
    }
}

/// Columns swapped together by [`apply_swaps`] (LAPACK's `dlaswp` uses 32).
const SWAP_COLUMNS: usize = 32;

/// Trailing columns of an LU step swapped and then updated together: at
/// `n = 4000` a group is 4 MB, which the update finds in cache.
const UPDATE_COLUMNS: usize = 512;

/// Converts faer's row permutation of an `m × w` panel (`perm[i]` = original
/// row of row `i`) into `w` LAPACK transpositions (0-based, relative to the panel).
pub(crate) fn perm_to_transpositions(perm: &[usize], w: usize) -> Vec<usize> {
    let m = perm.len();
    let mut cur: Vec<usize> = (0..m).collect(); // cur[pos] = original row at pos
    let mut pos: Vec<usize> = (0..m).collect(); // pos[row] = its position
    let mut out = Vec::with_capacity(w);
    for (i, &want) in perm.iter().enumerate().take(w) {
        let j = pos[want];
        out.push(j);
        let other = cur[i];
        cur.swap(i, j);
        pos[want] = i;
        pos[other] = j;
    }
    out
}

/// Updates `cols` (rows `row0..n` of `ncols` columns, leading dimension `ld`)
/// with panel `k` (rows `c0..n`, width `w`, in `panel` with leading dimension
/// `pld` starting at global row `prow0`).
#[allow(clippy::too_many_arguments)]
fn update_columns(
    kind: Factorization,
    cols: MatMut<'_, f64>,
    panel: MatRef<'_, f64>,
    t: MatRef<'_, f64>,
    w: usize,
    par: Par,
    stack: &mut MemStack,
) {
    // `cols` and `panel` both start at global row c0 here.
    match kind {
        Factorization::Lu => {
            let (top, bottom) = cols.split_at_row_mut(w);
            let l11 = panel.subrows(0, w);
            let l21 = panel.subrows(w, panel.nrows() - w);
            let mut top = top;
            solve_unit_lower_triangular_in_place(l11, top.rb_mut(), par);
            if bottom.nrows() > 0 {
                matmul(bottom, Accum::Add, l21, top.rb(), -1.0, par);
            }
        }
        Factorization::Qr => {
            apply_block_householder_transpose_on_the_left_in_place_with_conj(
                panel,
                t,
                Conj::No,
                cols,
                par,
                stack,
            );
        }
    }
}

/// Factors the `n × n` matrix given by `src` with LU (partial pivoting) or
/// Householder QR on the 1-D column-block `layout`, over `comm` (collective).
///
/// `replan.every = S > 0` re-plans every `S` panels (semi-static strategy, `000`
/// §4.5, [`Replan`]): only for [`LayoutKind::Hetero`] layouts; with
/// [`ReplanRates::Section`] it needs `meter` (the rate meter whose first
/// measurement gave the layout). `par` is faer's parallelism inside this process.
///
/// # Errors
/// [`DenseError::BadParam`] if the layout is not for `comm.size()` processes, or
/// if re-planning is asked without a hetero layout or from sections without a
/// meter, or for [`Replan::min_gain`] or [`Replan::min_seconds`] out of range;
/// [`DenseError::Singular`] for an exactly zero pivot (LU); errors of the
/// re-planning.
pub fn factor_distributed<C: Comm + ?Sized>(
    comm: &C,
    kind: Factorization,
    src: &Source,
    layout: &ColumnLayout,
    replan: &Replan,
    meter: Option<&mut RateMeter<'_, C>>,
    par: Par,
) -> Result<DistFactors, DenseError> {
    factor_distributed_with(
        comm,
        kind,
        LocalColumns::new(layout, comm.rank(), src)?,
        layout,
        replan,
        meter,
        par,
        false,
        &mut |_| {},
    )
}

/// Checks [`Replan::min_gain`] (in `0..1`) and [`Replan::min_seconds`] (finite,
/// `>= 0`), naming them `names` in the error (the CLI and the struct name them
/// differently).
///
/// # Errors
/// [`DenseError::BadParam`] for the first one out of range.
pub(crate) fn check_replan_thresholds(
    min_gain: f64,
    min_seconds: f64,
    names: [&'static str; 2],
) -> Result<(), DenseError> {
    if !(0.0..1.0).contains(&min_gain) {
        return Err(DenseError::BadParam {
            what: names[0],
            value: min_gain.to_string(),
            reason: "must be in 0..1",
        });
    }
    if !(min_seconds.is_finite() && min_seconds >= 0.0) {
        return Err(DenseError::BadParam {
            what: names[1],
            value: min_seconds.to_string(),
            reason: "must be finite and >= 0",
        });
    }
    Ok(())
}

/// [`factor_distributed`] on columns already distributed (`local`, this
/// process's columns of `layout`), with the look-ahead switchable (`lookahead`;
/// off in [`factor_distributed`]) and calling `on_panel(k)` once on every
/// process before panel `k` is factored: the hook of the experiments whose
/// load changes during the run (`000` §2.1, §4.5), e.g. a
/// [`Comm::set_slowdown`] after a given panel.
///
/// # Errors
/// As [`factor_distributed`], and [`DenseError::BadParam`] if `local` holds
/// other blocks than `layout` gives this process.
#[allow(clippy::too_many_arguments)]
pub fn factor_distributed_with<C: Comm + ?Sized>(
    comm: &C,
    kind: Factorization,
    local: LocalColumns,
    layout: &ColumnLayout,
    replan: &Replan,
    mut meter: Option<&mut RateMeter<'_, C>>,
    par: Par,
    lookahead: bool,
    on_panel: &mut dyn FnMut(usize),
) -> Result<DistFactors, DenseError> {
    let replan_every = replan.every;
    let p = comm.size();
    let me = comm.rank();
    if layout.p != p {
        return Err(DenseError::BadParam {
            what: "layout processes",
            value: layout.p.to_string(),
            reason: "must equal the communicator size",
        });
    }
    if replan_every > 0 && layout.kind != LayoutKind::Hetero {
        return Err(DenseError::BadParam {
            what: "replan",
            value: replan_every.to_string(),
            reason: "semi-static re-planning needs the hetero layout",
        });
    }
    if replan_every > 0 && replan.rates == ReplanRates::Section && meter.is_none() {
        return Err(DenseError::BadParam {
            what: "replan",
            value: replan_every.to_string(),
            reason: "re-planning from rate sections needs a rate meter",
        });
    }
    check_replan_thresholds(
        replan.min_gain,
        replan.min_seconds,
        ["replan min_gain", "replan min_seconds"],
    )?;
    if local.blocks != layout.blocks_of(me) || local.data.len() != layout.n * local.ncols() {
        return Err(DenseError::BadParam {
            what: "local columns",
            value: format!(
                "{} blocks, {} entries",
                local.blocks.len(),
                local.data.len()
            ),
            reason: "were not distributed for this layout and process",
        });
    }
    let n = layout.n;
    let nb = layout.n_blocks();
    let bw = layout.block;
    let mut layout = layout.clone();
    let mut loc = local;
    let mut ipiv = vec![0usize; if kind == Factorization::Lu { n } else { 0 }];
    let mut t_factors = vec![0.0; if kind == Factorization::Qr { bw * n } else { 0 }];
    let mut stats = FactorStats::default();
    let mut pending: Option<Pending> = None;

    // Scratch, sized once for the largest panel and the widest local update.
    let req = lu_in_place_scratch::<usize, f64>(n, bw, par, Default::default())
        .or(qr_in_place_scratch::<f64>(
            n,
            bw,
            bw,
            par,
            Default::default(),
        ))
        .or(temp_mat_scratch::<f64>(bw, n + bw));
    let mut mem = MemBuffer::new(req);
    let mut panel: Vec<f64> = Vec::with_capacity(n * bw + bw * bw + bw);
    let mut perm = vec![0usize; n];
    let mut perm_inv = vec![0usize; n];

    // The optimized distribution borrows block 0 before step 0.
    borrow_block(comm, &layout, &loc, 0, 0, &mut pending, &mut stats);
    // Look-ahead: the panel factored and broadcast early, during the previous step.
    let mut next: Vec<f64> = Vec::new();
    let mut ahead: Option<usize> = None;
    // Seconds each home took, the last time, from the broadcast of the previous
    // panel to its early broadcast (carried in the last slot of its panel).
    let mut lead = vec![0.0; p];
    // This process's trailing updates since the last re-planning: flops, seconds.
    let mut updates = (0.0, 0.0);
    let timed = replan_every > 0 && replan.rates == ReplanRates::Updates;
    let clock = || if timed { comm.wtime() } else { 0.0 };
    // Cycle-times of the last re-planning (per process; NaN: none measured).
    let mut last_times = vec![f64::NAN; p];

    for k in 0..nb {
        let geo = PanelGeometry::of(kind, &layout, k);
        let (c0, c1, w, prows, extra) = (geo.c0, geo.c1, geo.w, geo.prows, geo.extra);
        let (f, h) = (layout.factor[k], layout.home[k]);
        if ahead == Some(k) {
            // Factored and broadcast by this process during step k - 1.
            std::mem::swap(&mut panel, &mut next);
            ahead = None;
        } else {
            on_panel(k);
            if me == f {
                // 1. Factor.
                factor_panel(
                    kind,
                    &geo,
                    PanelSource::new(&loc, k, h == f, &mut pending),
                    &mut panel,
                    &mut mem,
                    &mut perm,
                    &mut perm_inv,
                    par,
                );
                comm.charge(CHARGE_PER_FLOP * kind.panel_flops(prows, w));
            } else {
                panel.clear();
                panel.resize(geo.buffer_len(), 0.0);
            }
            // 2. Broadcast panel + pivots or T + status.
            comm.broadcast(&mut panel, f);
        }
        let rb = geo.rb;
        let status = panel[prows * w + extra];
        if status > 0.0 {
            return Err(DenseError::Singular {
                column: status as usize - 1,
            });
        }
        let (pm, tail) = panel.split_at(prows * w);
        match kind {
            Factorization::Lu => {
                for i in 0..w {
                    ipiv[c0 + i] = tail[i] as usize;
                }
            }
            Factorization::Qr => {
                for c in 0..w {
                    t_factors[(c0 + c) * bw..(c0 + c) * bw + w]
                        .copy_from_slice(&tail[c * w..(c + 1) * w]);
                }
            }
        }
        // The home stores the factored panel.
        if me == h {
            let b = loc.index_of(k).expect("home stores its block");
            for (pc, lc) in loc.cols(b).enumerate() {
                loc.data[lc * n + rb..(lc + 1) * n]
                    .copy_from_slice(&pm[pc * prows..(pc + 1) * prows]);
            }
        }
        // The optimized distribution: block k+1 goes to its factor process now,
        // before the update of step k.
        if k + 1 < nb {
            borrow_block(comm, &layout, &loc, k + 1, c0, &mut pending, &mut stats);
        }
        // 3. Update.
        let pref = MatRef::from_column_major_slice(pm, prows, w).subrows(c0 - rb, n - c0);
        let tref = if kind == Factorization::Qr {
            MatRef::from_column_major_slice(&tail[..w * w], w, w)
        } else {
            MatRef::from_column_major_slice(&tail[..0], 0, 0)
        };
        let piv: Vec<usize> = if kind == Factorization::Lu {
            ipiv[c0..c1].to_vec()
        } else {
            Vec::new()
        };
        let step = Step {
            kind,
            n,
            c0,
            w,
            piv: &piv,
            panel: pref,
            t: tref,
            par,
        };
        let replan_now = replan_every > 0 && (k + 1) % replan_every == 0 && k + 1 < nb;
        let lent = k + 1 < nb && layout.factor[k + 1] != layout.home[k + 1];
        let next_home = if k + 1 < nb { layout.home[k + 1] } else { p };
        let mut t0 = loc.first_after(k);
        if lent && me == next_home {
            t0 = loc.first_after(k + 1);
        }
        // Local blocks [t0, ta) are updated, with their swaps, before the rest.
        let mut ta = t0;
        // Look-ahead (the same decision on every process).
        if lookahead && k + 1 < nb && !lent && !replan_now {
            let start = comm.wtime();
            let g1 = PanelGeometry::of(kind, &layout, k + 1);
            on_panel(k + 1);
            if me == next_home {
                // Block k+1 is the first local block after k.
                step.update_block(&mut loc, t0, &mut mem);
                comm.charge(CHARGE_PER_FLOP * kind.update_flops(n - c0, w, loc.cols(t0).len()));
                if timed {
                    updates.1 += comm.wtime() - start;
                }
                ta = t0 + 1;
                factor_panel(
                    kind,
                    &g1,
                    PanelSource::new(&loc, k + 1, true, &mut pending),
                    &mut next,
                    &mut mem,
                    &mut perm,
                    &mut perm_inv,
                    par,
                );
                comm.charge(CHARGE_PER_FLOP * kind.panel_flops(g1.prows, g1.w));
                let last = next.len() - 1;
                next[last] = comm.wtime() - start;
            } else {
                next.clear();
                next.resize(g1.buffer_len(), 0.0);
                while ta < loc.blocks.len() && comm.wtime() - start < lead[next_home] {
                    step.update_block(&mut loc, ta, &mut mem);
                    comm.charge(CHARGE_PER_FLOP * kind.update_flops(n - c0, w, loc.cols(ta).len()));
                    ta += 1;
                }
                if timed {
                    updates.1 += comm.wtime() - start;
                }
            }
            comm.broadcast(&mut next, next_home);
            lead[next_home] = next[next.len() - 1];
            ahead = Some(k + 1);
        }
        let t_update = clock();
        if kind == Factorization::Lu {
            // Swaps on the local columns before the trailing ones but the panel
            // and the lent block (blocks t0..ta had theirs in the look-ahead;
            // the trailing ones get theirs just before their update, below).
            for b in 0..t0 {
                let j = loc.blocks[b];
                if j == k || (lent && j == k + 1 && me == next_home) {
                    continue;
                }
                let r = loc.cols(b);
                apply_swaps(
                    &mut loc.data[r.start * n..r.end * n],
                    n,
                    r.len(),
                    0,
                    c0,
                    &piv,
                );
            }
        }
        let tcols = loc.ncols() - loc.offs[ta];
        if tcols > 0 {
            let (ncols, off) = (loc.ncols(), loc.offs[ta]);
            // LU: each group of columns swapped right before its update, while
            // its rows are still in cache.
            let group = if kind == Factorization::Lu {
                UPDATE_COLUMNS
            } else {
                tcols
            };
            for c in (0..tcols).step_by(group) {
                let cw = group.min(tcols - c);
                if kind == Factorization::Lu {
                    let cols = &mut loc.data[(off + c) * n..(off + c + cw) * n];
                    apply_swaps(cols, n, cw, 0, c0, &piv);
                }
                let all = MatMut::from_column_major_slice_mut(&mut loc.data, n, ncols);
                let trailing = all.submatrix_mut(c0, off + c, n - c0, cw);
                let stack = MemStack::new(&mut mem);
                update_columns(kind, trailing, pref, tref, w, par, stack);
            }
            comm.charge(CHARGE_PER_FLOP * kind.update_flops(n - c0, w, tcols));
        }
        if let Some(pd) = pending.as_mut() {
            let rows = n - pd.row0;
            if kind == Factorization::Lu {
                apply_swaps(&mut pd.data, rows, pd.width, pd.row0, c0, &piv);
            }
            let m = MatMut::from_column_major_slice_mut(&mut pd.data, rows, pd.width);
            let cols = m.subrows_mut(c0 - pd.row0, n - c0);
            let stack = MemStack::new(&mut mem);
            update_columns(kind, cols, pref, tref, w, par, stack);
            comm.charge(CHARGE_PER_FLOP * kind.update_flops(n - c0, w, pd.width));
        }
        updates.1 += clock() - t_update;
        let updated_cols = loc.ncols() - loc.offs[t0] + pending.as_ref().map_or(0, |pd| pd.width);
        updates.0 += kind.update_flops(n - c0, w, updated_cols);
        // Semi-static re-planning every S panels.
        if replan_now {
            let t_start = comm.wtime();
            // (sections without a meter were refused on entry)
            let sample = match meter.as_deref_mut() {
                Some(m) if replan.rates == ReplanRates::Section => Some(m.measure()?),
                _ => {
                    let s =
                        update_rates(comm, kind, n, bw, updates, replan.min_seconds, &last_times);
                    if s.is_some() {
                        updates = (0.0, 0.0);
                    }
                    s
                }
            };
            stats.replan_seconds += comm.wtime() - t_start;
            let Some(sample) = sample else { continue };
            stats.replans += 1;
            if sample.times.iter().all(|t| t.is_finite() && *t > 0.0) {
                last_times.clone_from(&sample.times);
                let re = reallocate_remaining(&sample.times, layout.slice, &layout.home, k + 1)?;
                if pays(&layout, &re, &sample.times, k + 1, replan.min_gain)? {
                    stats.relayouts += 1;
                    stats.blocks_moved += re.moves.len();
                    stats.bytes_moved += move_blocks(comm, &layout, &re.owners, &mut loc);
                    layout.home = re.owners.clone();
                    layout.factor = re.owners;
                }
            }
            stats.replan_rates.push(sample);
        }
    }
    Ok(DistFactors {
        kind,
        layout,
        blocks: loc.blocks,
        local: loc.data,
        ipiv,
        t_factors,
        stats,
    })
}

impl Factorization {
    /// Flops of factoring a panel of `rows` rows and `w` columns (leading term:
    /// LU `rows w²`, QR `2 rows w²`).
    fn panel_flops(self, rows: usize, w: usize) -> f64 {
        let per = match self {
            Factorization::Lu => 1.0,
            Factorization::Qr => 2.0,
        };
        per * rows as f64 * (w * w) as f64
    }

    /// Flops of updating `cols` columns with a panel of `w` columns and `rows`
    /// rows (LU: TRSM and GEMM, `2 rows w cols`; QR: the WY update,
    /// `4 rows w cols`).
    fn update_flops(self, rows: usize, w: usize, cols: usize) -> f64 {
        let per = match self {
            Factorization::Lu => 2.0,
            Factorization::Qr => 4.0,
        };
        per * rows as f64 * w as f64 * cols as f64
    }
}

/// The cycle-times of a re-planning from every process's trailing updates since
/// the last one (collective: one all-gather). The unit is the update of one
/// full-height block of `bw` columns by one panel; a process that updated
/// nothing keeps its time of the last re-planning in `last_times` (NaN if it
/// never had one: the caller then keeps the layout). `None` (on every process)
/// when some process updated for less than `min_seconds`: postponed.
fn update_rates<C: Comm + ?Sized>(
    comm: &C,
    kind: Factorization,
    n: usize,
    bw: usize,
    (flops, seconds): (f64, f64),
    min_seconds: f64,
    last_times: &[f64],
) -> Option<RateSample> {
    let p = comm.size();
    let mut all = vec![0.0; 2 * p];
    comm.all_gather(&[flops, seconds], &mut all);
    let short = all.chunks(2).any(|fs| fs[0] > 0.0 && fs[1] < min_seconds);
    if short {
        return None;
    }
    let unit = kind.update_flops(n, bw, bw);
    let times: Vec<f64> = all
        .chunks(2)
        .zip(last_times)
        .map(|(fs, &last)| {
            if fs[0] > 0.0 && fs[1] > 0.0 {
                unit * fs[1] / fs[0]
            } else {
                last
            }
        })
        .collect();
    Some(RateSample {
        rates: times.iter().map(|t| 1.0 / t).collect(),
        gflops: times.iter().map(|t| unit / t * 1e-9).collect(),
        times,
    })
}

/// Whether the re-allocation `re` of the blocks `first..` pays on the new
/// cycle-times `times` ([`Replan::min_gain`]): the weighted `000` model of the
/// remaining steps in the new layout, plus its moves, against the current
/// layout's remaining steps. A moved block is charged one full-height block
/// update at the fastest cycle-time on its sender and on its receiver (the
/// busiest process's total): a move is a copy, not arithmetic, and a block of
/// 64 columns takes about that long to copy through shared memory.
///
/// # Errors
/// As [`ColumnLayout::predicted_time_weighted_from`].
fn pays(
    layout: &ColumnLayout,
    re: &Reallocation,
    times: &[f64],
    first: usize,
    min_gain: f64,
) -> Result<bool, DenseError> {
    if re.moves.is_empty() {
        return Ok(false);
    }
    let now = layout.predicted_time_weighted_from(times, first)?;
    let mut next = layout.clone();
    next.home.clone_from(&re.owners);
    next.factor.clone_from(&re.owners);
    let mut moved = vec![0usize; layout.p];
    for mv in &re.moves {
        moved[mv.from] += 1;
        moved[mv.to] += 1;
    }
    let fastest = times.iter().copied().fold(f64::INFINITY, f64::min);
    let moving = moved.iter().copied().max().unwrap_or(0) as f64 * fastest;
    let after = next.predicted_time_weighted_from(times, first)? + moving;
    Ok(after <= (1.0 - min_gain) * now)
}

/// If block `j`'s factor process is not its home, the home sends rows `row0..n`
/// of it to the factor process (point to point, through `all_to_all_v`).
fn borrow_block<C: Comm + ?Sized>(
    comm: &C,
    layout: &ColumnLayout,
    loc: &LocalColumns,
    j: usize,
    row0: usize,
    pending: &mut Option<Pending>,
    stats: &mut FactorStats,
) {
    let (f, h) = (layout.factor[j], layout.home[j]);
    if f == h {
        return;
    }
    let n = layout.n;
    let (s, e) = layout.block_cols(j);
    let w = e - s;
    let rows = n - row0;
    let me = comm.rank();
    let p = comm.size();
    let mut send_counts = vec![0; p];
    let mut recv_counts = vec![0; p];
    let mut send = Vec::new();
    if me == h {
        send_counts[f] = rows * w;
        let b = loc.index_of(j).expect("home stores its block");
        for lc in loc.cols(b) {
            send.extend_from_slice(&loc.data[lc * n + row0..(lc + 1) * n]);
        }
    }
    let mut recv = Vec::new();
    if me == f {
        recv_counts[h] = rows * w;
        recv.resize(rows * w, 0.0);
    }
    comm.all_to_all_v(&send, &send_counts, &mut recv, &recv_counts);
    stats.bytes_to_factor += (rows * w * 8) as u64;
    if me == f {
        *pending = Some(Pending {
            block: j,
            row0,
            width: w,
            data: recv,
        });
    }
}

/// Moves every block whose home changes to its new home (one `all_to_all_v`) and
/// rebuilds the local storage. Returns the bytes moved (all ranks together).
fn move_blocks<C: Comm + ?Sized>(
    comm: &C,
    layout: &ColumnLayout,
    new_home: &[usize],
    loc: &mut LocalColumns,
) -> u64 {
    let n = layout.n;
    let p = comm.size();
    let me = comm.rank();
    let width = |j: usize| {
        let (s, e) = layout.block_cols(j);
        e - s
    };
    let mut send_counts = vec![0; p];
    let mut recv_counts = vec![0; p];
    let mut send = Vec::new();
    let mut total = 0u64;
    // Send order: by destination, then block ascending.
    for (dest, count) in send_counts.iter_mut().enumerate() {
        for (b, &j) in loc.blocks.iter().enumerate() {
            if new_home[j] == dest && dest != me {
                *count += n * width(j);
                for lc in loc.cols(b) {
                    send.extend_from_slice(&loc.data[lc * n..(lc + 1) * n]);
                }
            }
        }
    }
    let mut incoming: Vec<(usize, usize)> = Vec::new(); // (block, source)
    for (j, (&from, &to)) in layout.home.iter().zip(new_home).enumerate() {
        if from != to {
            total += (n * width(j) * 8) as u64;
            if to == me {
                recv_counts[from] += n * width(j);
                incoming.push((j, from));
            }
        }
    }
    let mut recv = vec![0.0; recv_counts.iter().sum()];
    comm.all_to_all_v(&send, &send_counts, &mut recv, &recv_counts);
    // Offsets of each source's data in recv; blocks of a source arrive ascending.
    let mut src_off = vec![0; p];
    for r in 1..p {
        src_off[r] = src_off[r - 1] + recv_counts[r - 1];
    }
    let mut blocks: Vec<usize> = (0..layout.n_blocks())
        .filter(|&j| new_home[j] == me)
        .collect();
    blocks.sort_unstable();
    let mut offs = vec![0];
    for &j in &blocks {
        offs.push(offs.last().copied().unwrap_or(0) + width(j));
    }
    let mut data = vec![0.0; n * offs.last().copied().unwrap_or(0)];
    let mut recv_pos: std::collections::HashMap<usize, usize> = Default::default();
    for &(j, from) in &incoming {
        recv_pos.insert(j, src_off[from]);
        src_off[from] += n * width(j);
    }
    for (b, &j) in blocks.iter().enumerate() {
        let len = n * width(j);
        let dst = &mut data[offs[b] * n..offs[b] * n + len];
        if let Some(&pos) = recv_pos.get(&j) {
            dst.copy_from_slice(&recv[pos..pos + len]);
        } else {
            let ob = loc.index_of(j).expect("kept block is stored here");
            let r = loc.cols(ob);
            dst.copy_from_slice(&loc.data[r.start * n..r.end * n]);
        }
    }
    *loc = LocalColumns { blocks, offs, data };
    total
}

/// Gathers the distributed factors into one `n × n` column-major matrix on every
/// process (collective; for checks and the solve).
pub fn gather_factors<C: Comm + ?Sized>(comm: &C, f: &DistFactors) -> Vec<f64> {
    let n = f.layout.n;
    let p = comm.size();
    let mut counts_u = vec![0u64; p];
    comm.all_gather_u64(&[f.local.len() as u64], &mut counts_u);
    let counts: Vec<usize> = counts_u.iter().map(|&c| c as usize).collect();
    let mut all = vec![0.0; counts.iter().sum()];
    comm.all_gather_v(&f.local, &counts, &mut all);
    let mut out = vec![0.0; n * n];
    let mut off = 0;
    for r in 0..p {
        for j in f.layout.blocks_of(r) {
            let (s, e) = f.layout.block_cols(j);
            let len = n * (e - s);
            out[s * n..e * n].copy_from_slice(&all[off..off + len]);
            off += len;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transpositions_reproduce_the_permutation() {
        let perm = [3usize, 0, 4, 1, 2];
        let tr = perm_to_transpositions(&perm, 5);
        let mut rows: Vec<usize> = (0..5).collect();
        for (i, &t) in tr.iter().enumerate() {
            rows.swap(i, t);
        }
        assert_eq!(rows, perm);
    }
}
