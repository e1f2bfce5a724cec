//! `jdmg dense lu|qr|gemm`: distributed dense LU / QR / matrix product laid out
//! on the rates lblib measures (Boudet et al.; `hetdense`).
//!
//! Exit codes: 0 success; 2 bad input (options, unreadable or non-square file,
//! singular matrix).

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use hetdense::grid::GridAlloc;
use hetdense::{
    run_dense, DenseError, DenseOp, DenseParams, DenseReport, LayoutKind, LoadChange, Replan,
    ReplanRates, Source,
};

use std::fmt::Write as _;

use crate::output::{emit, Fail, EXIT_BAD_INPUT};

/// Largest order accepted from a MatrixMarket file (the matrix is made dense
/// and replicated on every process).
const MAX_FILE_ORDER: usize = 20_000;

/// Column block width when --block is not given (n when smaller).
const DEFAULT_BLOCK: usize = 64;

/// Bytes a dense run of order `n` holds at its peak, all ranks together
/// (saturating): the matrix in column blocks, a second matrix (gemm's B, the
/// factors' workspace), and for the backward-error check the gathered
/// factors and a product.
fn dense_bytes(n: usize, check: bool) -> u64 {
    let n2 = (n as u64).saturating_mul(n as u64).saturating_mul(8);
    n2.saturating_mul(if check { 4 } else { 2 })
}

#[derive(Clone, Copy, ValueEnum)]
pub enum OpArg {
    /// PA = LU with partial pivoting.
    Lu,
    /// A = QR (Householder).
    Qr,
    /// C = AB (B a second random matrix, or A itself for a file).
    Gemm,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum LayoutArg {
    /// Homogeneous cyclic column blocks.
    Cyclic,
    /// Heterogeneous cyclic(B) from the measured cycle-times (Boudet et al. §2.2).
    Hetero,
    /// The optimized distribution of Boudet et al. §4.4 (fastest rank factors every panel).
    Optimized,
    /// Two-level clusters-of-clusters allocation of Mehaut and Robert §4.5 (see --clusters).
    Clusters,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum ReplanRatesArg {
    /// Every rank's rate over its own trailing updates since the last re-planning.
    Updates,
    /// A fresh lblib flexible section of GEMM updates on every rank.
    Section,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum GridAllocArg {
    /// Integer panel allocation r_i x c_j of Mehaut and Robert §4.3-4.4 (four neighbours).
    Panel,
    /// Kalinov-Lastovetsky: columns by grid-column harmonic means, then rows
    /// inside every grid column (Mehaut and Robert §4.3, Figure 9).
    Kl,
}

#[derive(Args)]
pub struct DenseArgs {
    /// Operation.
    #[arg(value_enum)]
    op: OpArg,
    /// MatrixMarket file (square; made dense), or use --n.
    file: Option<PathBuf>,
    /// Order of a seeded random matrix (entries uniform in [-1, 1)).
    #[arg(long, conflicts_with = "file")]
    n: Option<usize>,
    /// Seed of the random matrix.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Column block width (default: 64, or n when n < 64).
    #[arg(long)]
    block: Option<usize>,
    /// Column-block layout.
    #[arg(long, value_enum, default_value = "cyclic")]
    layout: LayoutArg,
    /// Slice size B of the heterogeneous layout (blocks per slice; default: best
    /// predicted B <= 4P); panel size for --layout clusters.
    #[arg(long)]
    slice: Option<usize>,
    /// Clusters of ranks for --layout clusters, e.g. 0-1,2-3 (default: one cluster).
    #[arg(long, conflicts_with = "cluster_sizes")]
    clusters: Option<String>,
    /// Clusters of consecutive ranks given by their sizes, as hosts under
    /// mpirun: 2,2 = ranks 0-1 and 2-3 (implies --layout clusters).
    #[arg(long, value_delimiter = ',')]
    cluster_sizes: Vec<usize>,
    /// Run lu, qr or gemm on an R x C process grid (Mehaut and Robert §4.3-4.5; e.g. 2x2;
    /// R*C must equal the number of processes).
    #[arg(long)]
    grid: Option<String>,
    /// The 2-D allocation of --grid.
    #[arg(long, value_enum, default_value = "panel")]
    grid_alloc: GridAllocArg,
    /// Semi-static re-planning every S panels (Boudet et al. §4.5; --layout hetero).
    #[arg(long, default_value_t = 0)]
    replan: usize,
    /// Where --replan takes its rates from: every rank's own trailing updates
    /// since the last re-planning (no extra work), or a fresh rate section.
    #[arg(long, value_enum, default_value = "updates")]
    replan_rates: ReplanRatesArg,
    /// Lay out again only when the Boudet et al. model predicts the remaining steps,
    /// moves included, at least this fraction sooner (0 <= G < 1).
    #[arg(long, default_value_t = 0.1)]
    replan_gain: f64,
    /// Shortest update time (seconds) a rank's rate is taken over: shorter
    /// windows postpone the re-planning and keep adding up.
    #[arg(long, default_value_t = 0.02)]
    replan_seconds: f64,
    /// Look-ahead of depth 1 in the 1-D LU and QR: the owner of the next panel
    /// factors and broadcasts it before the rest of its update, while the others
    /// update their first columns.
    #[arg(long, value_enum, default_value = "off")]
    lookahead: crate::solve::OnOff,
    /// Also solve Ax = b with the factors (random b).
    #[arg(long)]
    rhs: bool,
    /// Skip the backward-error check (it gathers the factors and costs a product).
    #[arg(long)]
    no_check: bool,
    /// faer threads per process.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Ranks on the thread backend (one process).
    #[arg(long, default_value_t = 1)]
    ranks: usize,
    /// Run over MPI (launch with mpirun; needs the `mpi` feature).
    #[arg(long)]
    mpi: bool,
    /// Per-rank slowdown factors (e.g. 1,3): virtual clocks on the thread backend,
    /// sleeping under MPI.
    #[arg(long, value_delimiter = ',')]
    slowdown: Vec<f64>,
    /// A load that changes mid-run (thread backend): at the start of panel P the
    /// slowdowns become the given factors, e.g. 10:1,3 (one factor per rank).
    #[arg(long)]
    slowdown_after: Option<String>,
    /// Minimum length in seconds of each rate-measurement section (an lblib
    /// flexible section of GEMM updates).
    #[arg(long, default_value_t = 0.03)]
    rate_seconds: f64,
    /// Print one JSON object on stdout.
    #[arg(long)]
    json: bool,
}

fn bad(msg: impl Into<String>) -> Fail {
    Fail(EXIT_BAD_INPUT, msg.into())
}

/// Parses `RxC`.
fn parse_grid(s: &str) -> Result<(usize, usize), Fail> {
    let parsed = s
        .split_once(['x', 'X'])
        .and_then(|(r, c)| Some((r.trim().parse().ok()?, c.trim().parse().ok()?)));
    match parsed {
        Some((r, c)) if r > 0 && c > 0 => Ok((r, c)),
        _ => Err(bad(format!(
            "--grid {s}: expected RxC with R, C >= 1 (e.g. 2x2)"
        ))),
    }
}

/// Parses `P:f0,f1,...` of --slowdown-after.
fn parse_load_change(s: &str) -> Result<LoadChange, Fail> {
    let err = || {
        bad(format!(
            "--slowdown-after {s}: expected PANEL:F0,F1,... with factors > 0 (e.g. 10:1,3)"
        ))
    };
    let (p, fs) = s.split_once(':').ok_or_else(err)?;
    let panel = p.trim().parse().map_err(|_| err())?;
    let slowdowns = fs
        .split(',')
        .map(|f| f.trim().parse::<f64>().map_err(|_| err()))
        .collect::<Result<Vec<_>, _>>()?;
    if slowdowns.iter().any(|f| !(f.is_finite() && *f > 0.0)) {
        return Err(err());
    }
    Ok(LoadChange { panel, slowdowns })
}

/// Clusters of consecutive ranks from their sizes (`2,2` -> `[[0,1],[2,3]]`).
fn clusters_from_sizes(sizes: &[usize]) -> Result<Vec<Vec<usize>>, Fail> {
    if sizes.contains(&0) {
        return Err(bad("--cluster-sizes: every cluster needs at least 1 rank"));
    }
    let mut next = 0;
    Ok(sizes
        .iter()
        .map(|&s| {
            let g: Vec<usize> = (next..next + s).collect();
            next += s;
            g
        })
        .collect())
}

/// Parses cluster lists like `0-1,2,3-5` (ranges or single ranks, one cluster each).
fn parse_clusters(s: &str) -> Result<Vec<Vec<usize>>, Fail> {
    let err = || {
        bad(format!(
            "--clusters {s}: expected comma-separated ranks or ranges, e.g. 0-1,2-3"
        ))
    };
    s.split(',')
        .map(|part| {
            let part = part.trim();
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (
                    a.trim().parse().map_err(|_| err())?,
                    b.trim().parse().map_err(|_| err())?,
                ),
                None => {
                    let r: usize = part.parse().map_err(|_| err())?;
                    (r, r)
                }
            };
            if lo > hi {
                return Err(err());
            }
            Ok((lo..=hi).collect())
        })
        .collect()
}

fn params_from(a: &DenseArgs, n: usize) -> Result<DenseParams, Fail> {
    Ok(DenseParams {
        op: match a.op {
            OpArg::Lu => DenseOp::Lu,
            OpArg::Qr => DenseOp::Qr,
            OpArg::Gemm => DenseOp::Gemm,
        },
        n,
        block: a.block.unwrap_or(DEFAULT_BLOCK.min(n)),
        layout: match a.layout {
            _ if !a.cluster_sizes.is_empty() => LayoutKind::Clusters,
            LayoutArg::Cyclic => LayoutKind::Cyclic,
            LayoutArg::Hetero => LayoutKind::Hetero,
            LayoutArg::Optimized => LayoutKind::Optimized,
            LayoutArg::Clusters => LayoutKind::Clusters,
        },
        slice: a.slice,
        replan: Replan {
            every: a.replan,
            rates: match a.replan_rates {
                ReplanRatesArg::Updates => ReplanRates::Updates,
                ReplanRatesArg::Section => ReplanRates::Section,
            },
            min_gain: a.replan_gain,
            min_seconds: a.replan_seconds,
        },
        lookahead: matches!(a.lookahead, crate::solve::OnOff::On),
        threads: a.threads,
        seed: a.seed,
        rhs: a.rhs,
        check: !a.no_check,
        grid: a.grid.as_deref().map(parse_grid).transpose()?,
        grid_alloc: match a.grid_alloc {
            GridAllocArg::Panel => GridAlloc::Panel,
            GridAllocArg::Kl => GridAlloc::Kl,
        },
        clusters: if a.cluster_sizes.is_empty() {
            a.clusters.as_deref().map(parse_clusters).transpose()?
        } else {
            Some(clusters_from_sizes(&a.cluster_sizes)?)
        },
        load_change: a
            .slowdown_after
            .as_deref()
            .map(parse_load_change)
            .transpose()?,
        rates: hetdense::RateParams {
            min_seconds: a.rate_seconds,
            ..Default::default()
        },
    })
}

/// The input matrix: `(n, dense column-major data or None for random)`.
fn load(a: &DenseArgs) -> Result<(usize, Option<Vec<f64>>), Fail> {
    match (&a.file, a.n) {
        (Some(path), _) => read_dense(path).map(|(n, d)| (n, Some(d))),
        (None, Some(n)) => Ok((n, None)),
        (None, None) => Err(bad("give a MatrixMarket file or --n N")),
    }
}

fn read_dense(path: &Path) -> Result<(usize, Vec<f64>), Fail> {
    let m = matrices::mm::read_matrix_market(path)
        .map_err(|e| bad(format!("{}: {e}", path.display())))?
        .matrix;
    let n = m.nrows();
    if m.ncols() != n {
        return Err(bad(format!(
            "{}: {} x {} is not square",
            path.display(),
            n,
            m.ncols()
        )));
    }
    if n > MAX_FILE_ORDER {
        return Err(bad(format!(
            "{}: order {n} is above {MAX_FILE_ORDER} (the matrix is made dense)",
            path.display()
        )));
    }
    let mut d = vec![0.0; n * n];
    for i in 0..n {
        let (cols, vals) = m.row(i);
        for (&j, &v) in cols.iter().zip(vals) {
            d[j as usize * n + i] = v;
        }
    }
    Ok((n, d))
}

/// Longest --rate-seconds: an hour per rate section.
const MAX_RATE_SECONDS: f64 = 3600.0;

/// Options checked in the CLI's own words before the library sees them (it
/// named its fields: `min_seconds`, `first_section_ops`, "owner 0 … out of
/// range"): --rate-seconds in [0, 3600], and --clusters holding every one of
/// the `nprocs` ranks exactly once.
///
/// # Errors
/// Exit 2 naming the option.
fn check_options(
    a: &DenseArgs,
    clusters: Option<&[Vec<usize>]>,
    nprocs: usize,
) -> Result<(), Fail> {
    if !(0.0..=MAX_RATE_SECONDS).contains(&a.rate_seconds) {
        return Err(bad(format!(
            "--rate-seconds {:e}: must lie in [0, {MAX_RATE_SECONDS}] seconds",
            a.rate_seconds
        )));
    }
    if let Some(cl) = clusters {
        let opt = if a.cluster_sizes.is_empty() {
            "--clusters"
        } else {
            "--cluster-sizes"
        };
        let mut seen = vec![false; nprocs];
        for &r in cl.iter().flatten() {
            match seen.get_mut(r) {
                None => {
                    return Err(bad(format!(
                        "{opt}: rank {r} does not exist ({nprocs} rank(s): 0 to {})",
                        nprocs - 1
                    )))
                }
                Some(true) => return Err(bad(format!("{opt}: rank {r} is in two clusters"))),
                Some(s) => *s = true,
            }
        }
        if let Some(r) = seen.iter().position(|&s| !s) {
            return Err(bad(format!("{opt}: rank {r} is in no cluster")));
        }
    }
    Ok(())
}

fn to_fail(e: DenseError) -> Fail {
    bad(e.to_string())
}

/// Entry point of `jdmg dense`.
pub fn dense_cmd(a: &DenseArgs) -> Result<(), Fail> {
    if a.mpi {
        return dense_mpi(a);
    }
    crate::resources::check_count("--ranks", a.ranks, crate::resources::MAX_RANKS)?;
    if let Some(n) = a.n {
        crate::resources::check_memory(&format!("dense --n {n}"), dense_bytes(n, !a.no_check))?;
    }
    let (n, data) = load(a)?;
    let params = params_from(a, n)?;
    params.validate().map_err(to_fail)?;
    check_options(a, params.clusters.as_deref(), a.ranks)?;
    let src = match &data {
        Some(d) => Source::ColMajor(d),
        None => Source::Random { seed: a.seed },
    };
    let report = if a.ranks > 1 {
        // A load change needs the virtual clocks even without --slowdown.
        let slow = if a.slowdown.is_empty() && a.slowdown_after.is_some() {
            vec![1.0; a.ranks]
        } else {
            a.slowdown.clone()
        };
        let cfg = crate::resources::thread_config(&slow, a.ranks)?;
        let out = crate::resources::run_ranks(cfg, |comm| run_dense(&comm, &src, &params))?;
        out.into_iter().next().expect("rank 0").map_err(to_fail)?
    } else {
        if !a.slowdown.is_empty() {
            return Err(bad("--slowdown needs --ranks N or --mpi"));
        }
        if a.slowdown_after.is_some() {
            return Err(bad("--slowdown-after needs --ranks N (thread backend)"));
        }
        run_dense(&lblib::SelfComm::new(), &src, &params).map_err(to_fail)?
    };
    print_report(a, &report)
}

fn print_report(a: &DenseArgs, r: &DenseReport) -> Result<(), Fail> {
    if a.json {
        let json = serde_json::to_string(r).map_err(|e| (EXIT_BAD_INPUT, e))?;
        return emit(&format!("{json}\n"));
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} n={} block={} layout={} (slice B={}) on {} process(es) x {} thread(s)",
        r.op, r.n, r.block, r.layout, r.slice, r.nprocs, r.threads
    );
    let _ = writeln!(
        out,
        "time {:.3} s  {:.2} GFLOP/s  imbalance {:.1}%",
        r.wall_seconds, r.gflops, r.imbalance_percent
    );
    if let Some(d) = r.distribute_seconds {
        let _ = writeln!(
            out,
            "distribution {d:.3} s (before the timed factorization)"
        );
    }
    if let Some(b) = r.backward_error {
        let _ = writeln!(out, "backward error {b:.3e}");
    }
    if let Some(o) = r.orthogonality {
        let _ = writeln!(out, "orthogonality ‖QᵀQ − I‖ {o:.3e}");
    }
    if let Some(s) = r.solve_residual {
        let _ = writeln!(out, "solve residual {s:.3e}");
    }
    let rates: Vec<String> = r.rates.iter().map(|x| format!("{x:.2}")).collect();
    let _ = writeln!(out, "update rates (GFLOP/s per rank) {}", rates.join(" "));
    let _ = writeln!(out, "columns per rank {:?}", r.columns_per_rank);
    if let (Some(rows), Some((gr, gq))) = (&r.rows_per_rank, r.grid) {
        let _ = writeln!(
            out,
            "grid {gr}x{gq} ({} allocation), rows per rank {rows:?}",
            r.grid_alloc.as_deref().unwrap_or("panel")
        );
    }
    if let (Some(p), Some(c)) = (r.predicted_time, r.predicted_cyclic_time) {
        let _ = writeln!(
            out,
            "Boudet et al. model: predicted time / cyclic = {:.3}",
            p / c.max(f64::MIN_POSITIVE)
        );
    }
    if r.replans > 0 {
        let _ = writeln!(
            out,
            "re-plannings {} (laid out again {})  bytes moved {}",
            r.replans, r.relayouts, r.bytes_moved
        );
    }
    emit(&out)
}

#[cfg(feature = "mpi")]
fn dense_mpi(a: &DenseArgs) -> Result<(), Fail> {
    let (_universe, world, _t) = lblib::mpi::init().map_err(|e| (EXIT_BAD_INPUT, e))?;
    crate::output::said_before_finalize(dense_on(a, &world))
}

/// [`dense_mpi`] on the initialized world.
#[cfg(feature = "mpi")]
fn dense_on(a: &DenseArgs, world: &lblib::mpi::MpiComm) -> Result<(), Fail> {
    use lblib::Comm;
    let loaded = load(a).and_then(|(n, d)| {
        if a.slowdown_after.is_some() {
            return Err(bad("--slowdown-after needs --ranks N (thread backend)"));
        }
        let p = params_from(a, n)?;
        p.validate().map_err(to_fail)?;
        check_options(a, p.clusters.as_deref(), world.size())?;
        let factor = match a.slowdown.len() {
            0 => 1.0,
            k if k == world.size() => a.slowdown[world.rank()],
            _ => return Err(bad(format!("--slowdown needs {} factors", world.size()))),
        };
        Ok((d, p, factor))
    });
    // Every rank must agree before entering collectives.
    let (data, params, factor) = crate::output::agree(world, loaded)?;
    let src = match &data {
        Some(d) => Source::ColMajor(d),
        None => Source::Random { seed: a.seed },
    };
    let slowed = lblib::Slowed::new(world.split(0, world.rank()), factor);
    let r = run_dense(&slowed, &src, &params);
    match r {
        Ok(rep) if world.rank() == 0 => print_report(a, &rep),
        Ok(_) => Ok(()),
        Err(e) if world.rank() == 0 => Err(to_fail(e)),
        Err(_) => Err(Fail(EXIT_BAD_INPUT, String::new())),
    }
}

#[cfg(not(feature = "mpi"))]
fn dense_mpi(_a: &DenseArgs) -> Result<(), Fail> {
    Err(bad(
        "--mpi needs a build with `--features mpi` (cargo build --release -p jdmg-cli --features mpi)",
    ))
}
