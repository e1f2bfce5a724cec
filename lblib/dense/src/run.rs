//! One call that runs a dense operation over a communicator and reports what the
//! `jdmg dense` command prints: rates, layout, time, GFLOP/s, backward error,
//! orthogonality, imbalance (McCombs et al. §4 tracer) and re-planning counters.

use faer::Par;
use serde::{Deserialize, Serialize};

use super::check;
use super::factor::{
    check_replan_thresholds, factor_distributed_with, gather_factors, Factorization, LocalColumns,
    Replan,
};
use super::gemm::{gather_slabs, gemm_slab, GemmLayout};
use super::grid::{gather_grid, grid_gemm, grid_lu, grid_qr, GridAlloc, GridLayout};
use super::layout::{ColumnLayout, LayoutKind};
use super::rates::{RateMeter, RateParams, RateSample};
use super::{par_for, random_entry, DenseError, Source};
use lbcomm::{Comm, ReduceOp};
use lblib::Traced;

/// The operation of [`run_dense`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DenseOp {
    /// `PA = LU` with partial pivoting.
    #[default]
    Lu,
    /// `A = QR`, Householder.
    Qr,
    /// `C = A B` (`B` is a second seeded random matrix, or `A` itself for a file).
    Gemm,
}

impl DenseOp {
    /// `lu`, `qr` or `gemm`.
    pub fn name(self) -> &'static str {
        match self {
            DenseOp::Lu => "lu",
            DenseOp::Qr => "qr",
            DenseOp::Gemm => "gemm",
        }
    }

    /// Floating-point operations for order `n` (`2n³/3`, `4n³/3`, `2n³`).
    pub fn flops(self, n: usize) -> f64 {
        let n3 = (n as f64).powi(3);
        match self {
            DenseOp::Lu => 2.0 * n3 / 3.0,
            DenseOp::Qr => 4.0 * n3 / 3.0,
            DenseOp::Gemm => 2.0 * n3,
        }
    }
}

/// Parameters of [`run_dense`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DenseParams {
    /// Operation. Default: LU.
    pub op: DenseOp,
    /// Matrix order. Default: 1000.
    pub n: usize,
    /// Column block width. Default: 64.
    pub block: usize,
    /// Layout. Default: cyclic.
    pub layout: LayoutKind,
    /// Slice size `B` of the heterogeneous layout (`000` §2.2). Default: `None`
    /// (the `B <= 4p` with the best `t_theoretical`).
    pub slice: Option<usize>,
    /// Semi-static re-planning of the 1-D LU/QR (`000` §4.5, [`Replan`]).
    /// Default: [`Replan::default`] (static: `every` 0).
    pub replan: Replan,
    /// faer threads inside each process. Default: 1.
    pub threads: usize,
    /// Seed of the random matrix (when no matrix is given). Default: 0.
    pub seed: u64,
    /// Also solve `Ax = b` (LU and QR) with a random `b`. Default: false.
    pub rhs: bool,
    /// Compute the backward error / orthogonality (gathers the factors). Default: true.
    pub check: bool,
    /// Clusters of ranks for [`LayoutKind::Clusters`] (`001` §4.5); `None`:
    /// one cluster of all ranks. Default: `None`.
    pub clusters: Option<Vec<Vec<usize>>>,
    /// Run on an `R × Q` process grid (`001` §4.3–4.5; `gemm`, `lu` and `qr`).
    /// Default: `None` (1-D column layouts).
    pub grid: Option<(usize, usize)>,
    /// The 2-D allocation of the grid (panel or Kalinov–Lastovetsky).
    /// Default: [`GridAlloc::Panel`].
    pub grid_alloc: GridAlloc,
    /// A load that changes during the run (LU and QR on a 1-D layout): at the
    /// start of panel `panel` every rank's emulated slowdown becomes
    /// `slowdowns[rank]` ([`Comm::set_slowdown`]; the thread backend).
    /// Default: `None`.
    pub load_change: Option<LoadChange>,
    /// Rate measurement. Default: [`RateParams::default`].
    pub rates: RateParams,
    /// Look-ahead of depth 1 in the 1-D LU and QR ([`super::factor`]). Default:
    /// false (with blocking broadcasts it did not pay under real contention,
    /// `bench/README.md`).
    pub lookahead: bool,
}

/// A change of the per-rank slowdowns after a given panel (the deterministic
/// "load that changes mid-run" of the semi-static experiment, `000` §2.1, §4.5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadChange {
    /// Panel (column block) at whose start the slowdowns change.
    pub panel: usize,
    /// New slowdown factor of every rank.
    pub slowdowns: Vec<f64>,
}

impl Default for DenseParams {
    fn default() -> Self {
        Self {
            op: DenseOp::Lu,
            n: 1000,
            block: 64,
            layout: LayoutKind::Cyclic,
            slice: None,
            replan: Replan::default(),
            threads: 1,
            seed: 0,
            rhs: false,
            check: true,
            grid: None,
            grid_alloc: GridAlloc::Panel,
            clusters: None,
            load_change: None,
            rates: RateParams::default(),
            lookahead: false,
        }
    }
}

/// Slice sizes always accepted by [`DenseParams::validate`].
const MAX_FREE_SLICE: usize = 4096;

impl DenseParams {
    /// Checks ranges.
    ///
    /// # Errors
    /// [`DenseError::BadParam`] naming the parameter.
    pub fn validate(&self) -> Result<(), DenseError> {
        let bad = |what, value: usize, reason| {
            Err(DenseError::BadParam {
                what,
                value: value.to_string(),
                reason,
            })
        };
        if self.n == 0 {
            return bad("n", self.n, "must be at least 1");
        }
        if self.block == 0 || self.block > self.n {
            return bad("block", self.block, "must be in 1..=n");
        }
        if self.threads == 0 {
            return bad("threads", 0, "must be at least 1");
        }
        if self.slice == Some(0) {
            return bad("slice", 0, "must be at least 1");
        }
        // The layout allocates per block of a slice: beyond the column blocks
        // (or 4096) a slice only costs memory (1e8 took 4.6 GB for n = 40).
        let blocks = self.n.div_ceil(self.block);
        if let Some(s) = self.slice.filter(|&s| s > blocks.max(MAX_FREE_SLICE)) {
            return Err(DenseError::BadParam {
                what: "slice",
                value: s.to_string(),
                reason: "must be at most the number of column blocks n/block (or 4096)",
            });
        }
        // n² values must be addressable (n = 3e9 overflowed after 3 GB).
        if self
            .n
            .checked_mul(self.n)
            .and_then(|x| x.checked_mul(8))
            .is_none()
        {
            return bad("n", self.n, "n² values do not fit in memory addresses");
        }
        let replan = self.replan.every;
        if replan > 0 && self.layout != LayoutKind::Hetero {
            return bad(
                "replan",
                replan,
                "semi-static re-planning needs --layout hetero",
            );
        }
        check_replan_thresholds(
            self.replan.min_gain,
            self.replan.min_seconds,
            ["replan-gain", "replan-seconds"],
        )?;
        if replan > 0 && self.op == DenseOp::Gemm {
            return bad("replan", replan, "re-planning applies to lu and qr");
        }
        if self.clusters.is_some() && self.layout != LayoutKind::Clusters {
            return bad("clusters", 0, "cluster lists need --layout clusters");
        }
        if let Some((r, q)) = self.grid {
            if replan > 0 {
                return bad("replan", replan, "re-planning applies to 1-D layouts");
            }
            if self.layout == LayoutKind::Optimized || self.layout == LayoutKind::Clusters {
                return bad(
                    "grid",
                    r * q,
                    "the 2-D grid takes --layout cyclic (equal times) or hetero (measured)",
                );
            }
            if r == 0 || q == 0 {
                return bad("grid", r * q, "needs at least 1 x 1");
            }
        }
        if let Some(lc) = &self.load_change {
            if self.op == DenseOp::Gemm || self.grid.is_some() {
                return bad(
                    "slowdown-after",
                    lc.panel,
                    "a load change applies to lu and qr on a 1-D layout",
                );
            }
            if lc.slowdowns.iter().any(|f| !(f.is_finite() && *f > 0.0)) {
                return bad(
                    "slowdown-after",
                    lc.panel,
                    "slowdown factors must be finite and > 0",
                );
            }
        }
        if self.layout == LayoutKind::Optimized && self.n.div_ceil(self.block) < 2 {
            return bad(
                "block",
                self.block,
                "the optimized layout needs at least 2 column blocks",
            );
        }
        Ok(())
    }
}

/// What [`run_dense`] reports (the JSON of `jdmg dense --json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DenseReport {
    /// `lu`, `qr` or `gemm`.
    pub op: String,
    /// Matrix order.
    pub n: usize,
    /// Column block width.
    pub block: usize,
    /// Slice size `B` of the layout (`000` §2.2).
    pub slice: usize,
    /// `cyclic`, `hetero` or `optimized`.
    pub layout: String,
    /// Number of processes.
    pub nprocs: usize,
    /// faer threads per process.
    pub threads: usize,
    /// Time of the operation (communicator clock: virtual on the thread backend
    /// with slowdowns), barrier to barrier, including re-planning. The 1-D LU
    /// and QR start from their columns in place, as the 1-D GEMM from its
    /// slabs ([`DenseReport::distribute_seconds`] is the time of putting them
    /// there); the 2-D grid operations include their distribution.
    pub wall_seconds: f64,
    /// Time of filling each process's columns from the source before a 1-D LU
    /// or QR, barrier to barrier (`None` for the other operations).
    #[serde(default)]
    pub distribute_seconds: Option<f64>,
    /// `flops / wall_seconds / 1e9`.
    pub gflops: f64,
    /// `‖PA − LU‖_F/‖A‖_F`, `‖A − QR‖_F/‖A‖_F`, or `‖C − AB‖_F/(‖A‖_F‖B‖_F)`
    /// (`None` when checks are off).
    pub backward_error: Option<f64>,
    /// `‖QᵀQ − I‖_F` (QR only).
    pub orthogonality: Option<f64>,
    /// `‖Ax − b‖/(‖A‖‖x‖ + ‖b‖)` of the solve with the factors (`--rhs`).
    pub solve_residual: Option<f64>,
    /// Measured update rates per rank, GFLOP/s (first measurement).
    pub rates: Vec<f64>,
    /// Cycle-times per rank (seconds per update of `rates.rows × block × block`).
    pub cycle_times: Vec<f64>,
    /// Matrix columns per rank (final layout).
    pub columns_per_rank: Vec<usize>,
    /// Matrix rows per rank (2-D grid only).
    pub rows_per_rank: Option<Vec<usize>>,
    /// `R × Q` of the 2-D grid, if any.
    pub grid: Option<(usize, usize)>,
    /// The 2-D allocation (`panel` or `kl`), if on a grid.
    pub grid_alloc: Option<String>,
    /// Bytes sent by all processes during the 2-D LU or QR (panel gathers,
    /// swaps or `Vᵀ A` reductions, broadcasts counted once per receiver); 0
    /// elsewhere.
    pub grid_bytes: u64,
    /// `003` §4 %imbalance of the collectives of the operation.
    pub imbalance_percent: f64,
    /// Whether the 1-D LU/QR ran with the look-ahead.
    pub lookahead: bool,
    /// Semi-static re-plannings performed (rates gathered).
    pub replans: usize,
    /// Re-plannings that laid the remaining blocks out again (predicted gain
    /// of at least [`Replan::min_gain`]).
    pub relayouts: usize,
    /// Bytes moved by re-plannings.
    pub bytes_moved: u64,
    /// Seconds (communicator clock, this rank) spent gathering or re-measuring
    /// rates in re-plannings.
    pub replan_seconds: f64,
    /// Rates (GFLOP/s per rank) measured at each re-planning.
    pub replan_rates: Vec<Vec<f64>>,
    /// Predicted time of the layout in `000`'s unit-task model (units of the
    /// measured cycle-times); LU/QR only.
    pub predicted_time: Option<f64>,
    /// The same prediction for the homogeneous cyclic layout, for comparison.
    pub predicted_cyclic_time: Option<f64>,
}

/// Runs `params.op` on the matrix `src` (order `params.n`) over `comm`
/// (collective): measures the rates with an `Lbs` section, lays out the columns,
/// runs the operation under the imbalance tracer, then gathers and checks the
/// result. Every rank returns the same report.
///
/// # Errors
/// [`DenseError::BadParam`] / [`DenseError::BadMatrix`] for bad input (same on
/// every rank); errors of the layout, the rate measurement or the factorization.
pub fn run_dense<C: Comm>(
    comm: &C,
    src: &Source,
    params: &DenseParams,
) -> Result<DenseReport, DenseError> {
    params.validate()?;
    src.validate(params.n)?;
    let n = params.n;
    let par = par_for(params.threads);
    let traced = Traced::new(comm.split(0, comm.rank()));
    let mut meter = RateMeter::new(&traced, &params.rates, params.block, par)?;
    let sample: RateSample = meter.measure()?;
    let mut report = DenseReport {
        op: params.op.name().into(),
        n,
        block: params.block,
        slice: 0,
        layout: params.layout.name().into(),
        nprocs: comm.size(),
        threads: params.threads,
        wall_seconds: 0.0,
        distribute_seconds: None,
        gflops: 0.0,
        backward_error: None,
        orthogonality: None,
        solve_residual: None,
        rates: sample.gflops.clone(),
        cycle_times: sample.times.clone(),
        columns_per_rank: Vec::new(),
        rows_per_rank: None,
        grid: params.grid,
        grid_alloc: params.grid.map(|_| params.grid_alloc.name().to_string()),
        grid_bytes: 0,
        imbalance_percent: 0.0,
        lookahead: false,
        replans: 0,
        relayouts: 0,
        bytes_moved: 0,
        replan_seconds: 0.0,
        replan_rates: Vec::new(),
        predicted_time: None,
        predicted_cyclic_time: None,
    };
    let mut checks = [f64::NAN; 3];
    if let Some((gr, gq)) = params.grid {
        if gr * gq != comm.size() {
            return Err(DenseError::BadParam {
                what: "grid",
                value: format!("{gr}x{gq}"),
                reason: "rows x cols must equal the number of processes",
            });
        }
        let nb = n.div_ceil(params.block);
        let equal = vec![1.0; comm.size()];
        let times = if params.layout == LayoutKind::Cyclic {
            &equal
        } else {
            &sample.times
        };
        let gl = GridLayout::build_with(
            params.grid_alloc,
            times,
            gr,
            gq,
            n,
            params.block,
            (4 * gr).min(nb),
            (4 * gq).min(nb),
        )?;
        report.columns_per_rank = gl.cols_per_rank();
        report.rows_per_rank = Some(gl.rows_per_rank());
        report.slice = (4 * gr).min(nb) * (4 * gq).min(nb);
        if params.op != DenseOp::Gemm {
            let (lu, qr);
            let (local, bytes_sent, data) = if params.op == DenseOp::Lu {
                lu = timed(&traced, &mut report, || grid_lu(&traced, &gl, src, par))?;
                (&lu.local, lu.bytes_sent, FactorData::Lu(&lu.ipiv))
            } else {
                qr = timed(&traced, &mut report, || grid_qr(&traced, &gl, src, par))?;
                (&qr.local, qr.bytes_sent, FactorData::Qr(&qr.t_factors))
            };
            let mut bytes = [bytes_sent];
            comm.all_reduce_u64(&mut bytes, ReduceOp::Sum);
            report.grid_bytes = bytes[0];
            if params.check || params.rhs {
                let full = gather_grid(traced.inner(), &gl, local);
                if comm.rank() == 0 {
                    let a = src.to_col_major(n);
                    check_factors(&a, &full, data, params, par, &mut checks);
                }
            }
        } else {
            let b_src = match src {
                Source::Random { seed } => Source::Random {
                    seed: seed.wrapping_add(1),
                },
                Source::ColMajor(_) => *src,
            };
            let c = timed(&traced, &mut report, || {
                grid_gemm(&traced, &gl, src, &b_src, par)
            })?;
            if params.check {
                let full = gather_grid(traced.inner(), &gl, &c);
                if comm.rank() == 0 {
                    let a = src.to_col_major(n);
                    let b = b_src.to_col_major(n);
                    let exact = gemm_slab(&a, &b, n, n, par);
                    let diff: Vec<f64> = full.iter().zip(&exact).map(|(x, y)| x - y).collect();
                    checks[0] =
                        check::frobenius(&diff) / (check::frobenius(&a) * check::frobenius(&b));
                }
            }
        }
    } else if params.op == DenseOp::Gemm {
        let gl = GemmLayout::build(params.layout, &sample.times, n, params.block)?;
        report.columns_per_rank = gl.columns_per_rank();
        report.slice = gl.blocks.iter().sum();
        let b_src = match src {
            Source::Random { seed } => Source::Random {
                seed: seed.wrapping_add(1),
            },
            Source::ColMajor(_) => *src,
        };
        let (s, e) = gl.ranges[comm.rank()];
        let a = src.to_col_major(n);
        let mut bl = vec![0.0; n * (e - s)];
        for (c, gc) in (s..e).enumerate() {
            for i in 0..n {
                bl[c * n + i] = b_src.entry(n, i, gc);
            }
        }
        let c = timed(&traced, &mut report, || {
            Ok(gemm_slab(&a, &bl, n, e - s, par))
        })?;
        if params.check {
            let full = gather_slabs(traced.inner(), &c, &gl);
            if comm.rank() == 0 {
                let b = b_src.to_col_major(n);
                let exact = gemm_slab(&a, &b, n, n, par);
                let diff: Vec<f64> = full.iter().zip(&exact).map(|(x, y)| x - y).collect();
                checks[0] = check::frobenius(&diff) / (check::frobenius(&a) * check::frobenius(&b));
            }
        }
    } else {
        let layout = match &params.clusters {
            Some(groups) if params.layout == LayoutKind::Clusters => {
                ColumnLayout::build_clusters(groups, &sample.times, n, params.block, params.slice)?
            }
            _ => ColumnLayout::build(params.layout, &sample.times, n, params.block, params.slice)?,
        };
        report.slice = layout.slice;
        report.predicted_time = Some(layout.predicted_time(&sample.times)?);
        let cyc = ColumnLayout::build(LayoutKind::Cyclic, &sample.times, n, params.block, None)?;
        report.predicted_cyclic_time = Some(cyc.predicted_time(&sample.times)?);
        let kind = if params.op == DenseOp::Lu {
            Factorization::Lu
        } else {
            Factorization::Qr
        };
        if let Some(lc) = &params.load_change {
            if lc.slowdowns.len() != comm.size() {
                return Err(DenseError::BadParam {
                    what: "slowdown-after",
                    value: format!("{} factors", lc.slowdowns.len()),
                    reason: "needs one slowdown factor per process",
                });
            }
        }
        let mut unsupported = false;
        let mut on_panel = |k: usize| {
            if let Some(lc) = &params.load_change {
                if k == lc.panel && !traced.set_slowdown(lc.slowdowns[comm.rank()]) {
                    unsupported = true;
                }
            }
        };
        traced.barrier();
        let t0 = traced.wtime();
        let local = LocalColumns::new(&layout, comm.rank(), src)?;
        traced.barrier();
        let mut distribute = [traced.wtime() - t0];
        comm.all_reduce(&mut distribute, ReduceOp::Max);
        report.distribute_seconds = Some(distribute[0]);
        traced.reset();
        traced.barrier();
        let t0 = traced.wtime();
        let f = factor_distributed_with(
            &traced,
            kind,
            local,
            &layout,
            &params.replan,
            Some(&mut meter),
            par,
            params.lookahead,
            &mut on_panel,
        )?;
        if unsupported {
            return Err(DenseError::BadParam {
                what: "slowdown-after",
                value: "set".into(),
                reason: "this communicator emulates no slowdown (use the thread backend)",
            });
        }
        traced.barrier();
        report.wall_seconds = traced.wtime() - t0;
        report.imbalance_percent = traced.report()?.imbalance_percent;
        report.columns_per_rank = f.layout.columns_per_rank();
        report.lookahead = params.lookahead;
        report.replans = f.stats.replans;
        report.relayouts = f.stats.relayouts;
        report.bytes_moved = f.stats.bytes_moved;
        report.replan_seconds = f.stats.replan_seconds;
        report.replan_rates = f
            .stats
            .replan_rates
            .iter()
            .map(|s| s.gflops.clone())
            .collect();
        if params.check || params.rhs {
            let full = gather_factors(traced.inner(), &f);
            if comm.rank() == 0 {
                let a = src.to_col_major(n);
                let data = match kind {
                    Factorization::Lu => FactorData::Lu(&f.ipiv),
                    Factorization::Qr => FactorData::Qr(&f.t_factors),
                };
                check_factors(&a, &full, data, params, par, &mut checks);
            }
        }
    }
    comm.broadcast(&mut checks, 0);
    let mut wall = [report.wall_seconds];
    comm.all_reduce(&mut wall, ReduceOp::Max);
    report.wall_seconds = wall[0];
    report.gflops = params.op.flops(n) / wall[0].max(1e-12) * 1e-9;
    report.backward_error = params.check.then_some(checks[0]);
    if params.op == DenseOp::Qr && params.check {
        report.orthogonality = Some(checks[1]);
    }
    if params.rhs && params.op != DenseOp::Gemm {
        report.solve_residual = Some(checks[2]);
    }
    Ok(report)
}

/// Runs `op` between two barriers of `traced`, its trace reset first, and puts
/// the wall time between the barriers and the tracer's imbalance (McCombs et
/// al. §4) into `report` (collective).
fn timed<C: Comm, T>(
    traced: &Traced<C>,
    report: &mut DenseReport,
    op: impl FnOnce() -> Result<T, DenseError>,
) -> Result<T, DenseError> {
    traced.reset();
    traced.barrier();
    let t0 = traced.wtime();
    let out = op()?;
    traced.barrier();
    report.wall_seconds = traced.wtime() - t0;
    report.imbalance_percent = traced.report()?.imbalance_percent;
    Ok(out)
}

/// What a factorization keeps beside its factored matrix: LU's row swaps
/// (`ipiv`) or QR's block reflector factors (`T`, `block × n`).
#[derive(Clone, Copy)]
enum FactorData<'a> {
    Lu(&'a [usize]),
    Qr(&'a [f64]),
}

/// The checks of a factored matrix, on one process: `full` holds the factors
/// of `a` (order `params.n`, column-major) with `data` beside them.
/// `checks[0]` gets the backward error and, for QR, `checks[1]` the loss of
/// orthogonality (`--check`); `checks[2]` the residual of a solve with the
/// factors for the seeded right-hand side (`--rhs`).
fn check_factors(
    a: &[f64],
    full: &[f64],
    data: FactorData,
    params: &DenseParams,
    par: Par,
    checks: &mut [f64; 3],
) {
    let (n, block) = (params.n, params.block);
    if params.check {
        match data {
            FactorData::Lu(ipiv) => checks[0] = check::lu_backward_error(a, full, ipiv, n, par),
            FactorData::Qr(t) => {
                let (be, orth) = check::qr_errors(a, full, t, n, block, par);
                checks[0] = be;
                checks[1] = orth;
            }
        }
    }
    if params.rhs {
        let b: Vec<f64> = (0..n)
            .map(|i| random_entry(params.seed ^ 0xB, i, n))
            .collect();
        let x = match data {
            FactorData::Lu(ipiv) => check::lu_solve(full, ipiv, n, &b, par),
            FactorData::Qr(t) => check::qr_solve(full, t, n, block, &b, par),
        };
        checks[2] = check::solve_residual(a, n, &x, &b, par);
    }
}
