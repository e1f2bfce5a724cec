//! `jdmg plan dag …` (malleable task graphs, Barbosa et al.) and `jdmg plan tiles …`
//! (BLR tile allocation, Beaumont et al.): JSON or text output, SVG plots.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand, ValueEnum};
use hetdense::sched::malleable::{
    algorithm1, algorithm2, algorithm3, figure_setup, ramp_speeds, reproduce, Alg3Params,
    CostModel, Dag, Figure, ReproCase, Schedule,
};
use hetdense::sched::measure::{measure_gemm_rates, relative_speeds, MeasureParams};
use hetdense::sched::taskgraph::{predict_makespan, run_tiled_lu, LuRunParams};
use hetdense::sched::tiles::{
    block_cyclic, blr_densities, evaluate, simulate, AllocKind, BceGrid, BlrParams, KernelCosts,
    Mapping, Op, RsParams, TileDag, TileMetrics,
};
use lblib::ClockMode;
use plotters::prelude::*;
use serde_json::json;

use super::{Fail, EXIT_BAD_INPUT};

/// `println!` through the checked writer: a closed pipe ends jdmg quietly (141), a
/// full device or closed stdout with exit 2, never a panic.
macro_rules! println {
    ($($t:tt)*) => {
        if let Err(Fail(code, msg)) =
            crate::output::emit(&format!("{}\n", format_args!($($t)*)))
        {
            if !msg.is_empty() {
                crate::output::note(&format!("jdmg: {msg}"));
            }
            std::process::exit(i32::from(code));
        }
    };
}

/// `jdmg plan`: schedules from processor speeds.
#[derive(Args)]
pub struct PlanArgs {
    #[command(subcommand)]
    what: PlanWhat,
}

#[derive(Subcommand)]
enum PlanWhat {
    /// Malleable task graph on a heterogeneous cluster (Barbosa et al.).
    Dag(DagArgs),
    /// 2-D tile allocation of a BLR matrix: BC, BCE, RS (Beaumont et al.).
    Tiles(TilesArgs),
}

#[derive(Clone, Copy, ValueEnum)]
enum FigArg {
    Fig8,
    Fig10,
    Fig11,
}

#[derive(Clone, Copy, ValueEnum)]
enum DagKind {
    Fig5,
    Dag1,
    Dag2,
}

#[derive(Args)]
struct DagArgs {
    /// Reproduce a figure of the paper (Fig. 8: Fig. 5 DAG; 10: DAG1; 11: DAG2).
    #[arg(long, value_enum)]
    reproduce: Option<FigArg>,
    /// DAG to schedule (without --reproduce).
    #[arg(long, value_enum, default_value = "fig5")]
    dag: DagKind,
    /// The two matrix orders of the DAG, "a,b".
    #[arg(long, default_value = "1000,2000", value_delimiter = ',')]
    sizes: Vec<usize>,
    /// Number of processors (ignored with --speeds).
    #[arg(long, default_value_t = 40)]
    p: usize,
    /// Mean capacity S̄_M in Mflop/s of the generated cluster.
    #[arg(long, default_value_t = 750.0)]
    mean: f64,
    /// Capacity spread h: capacities from (1-h)·mean to (1+h)·mean.
    #[arg(long, default_value_t = 0.5)]
    spread: f64,
    /// Processor capacities in Mflop/s (comma separated) instead of a generated cluster.
    #[arg(long, value_delimiter = ',')]
    speeds: Option<Vec<f64>>,
    /// Measure the capacities: --p ThreadComm ranks time faer GEMM tile updates in
    /// lblib sections (emulated slowdowns with --slowdowns).
    #[arg(long)]
    measure: bool,
    /// Slowdown factor of each measured rank (with --measure; its length sets P).
    #[arg(long, value_delimiter = ',')]
    slowdowns: Option<Vec<f64>>,
    /// Network latency T_L per packet, seconds.
    #[arg(long)]
    latency: Option<f64>,
    /// Bandwidth ω, Mbit/s.
    #[arg(long)]
    bandwidth: Option<f64>,
    /// Panel width nb of the data-parallel kernels.
    #[arg(long)]
    nb: Option<usize>,
    /// Fraction of the broadcast volume hidden behind computation (0..1).
    #[arg(long)]
    overlap: Option<f64>,
    /// Allowed overload of Algorithm 3's packing (the paper: 0.10).
    #[arg(long, default_value_t = 0.10)]
    overload: f64,
    /// With --reproduce: also print the improvements over a sweep of the open
    /// parameters (latency, nb, spread).
    #[arg(long)]
    sweep: bool,
    /// Write SVG plots (Gantt charts of Algorithms 2 and 3, the figure) into DIR.
    #[arg(long)]
    svg_dir: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, ValueEnum, PartialEq)]
enum OpArg {
    Lu,
    Mm,
}

#[derive(Clone, Copy, ValueEnum, PartialEq)]
enum AlgArg {
    Bc,
    Bce,
    Rs,
}

#[derive(Clone, Copy, ValueEnum, PartialEq)]
enum TileFig {
    /// Figures 4 and 5: B(M) and D(M) over the ideal, MM and LU, P = 12, 30, 90.
    Fig45,
    /// Figures 6 and 7: dispersion of virtual and real processors' loads.
    Fig67,
    /// Figure 8: P = 34, alpha = 2, BCE grids versus RS.
    Fig8,
}

#[derive(Args)]
struct TilesArgs {
    /// Kernel.
    #[arg(long, value_enum, default_value = "lu")]
    op: OpArg,
    /// Allocation: 2-D block cyclic, extended block cyclic, random subsets.
    #[arg(long, value_enum, default_value = "bce")]
    alg: AlgArg,
    /// Number of processors (ignored with --speeds or --measure).
    #[arg(long, default_value_t = 12)]
    p: usize,
    /// alpha: at most ceil(alpha·sqrt(P)) processors per tile row and column (>= 1).
    #[arg(long, default_value_t = 1.0)]
    alpha: f64,
    /// N, tiles per row and column.
    #[arg(long, default_value_t = 30)]
    n: usize,
    /// delta, decay of the tile density away from the diagonal.
    #[arg(long, default_value_t = 8.0)]
    delta: f64,
    /// Standard deviation of the density noise gamma.
    #[arg(long, default_value_t = 0.05)]
    noise_sd: f64,
    /// No theta random full-rank tiles.
    #[arg(long)]
    no_random_full_rank: bool,
    /// Seed of the BLR matrix and of RS.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Relative processor speeds (comma separated; sets P).
    #[arg(long, value_delimiter = ',')]
    speeds: Option<Vec<f64>>,
    /// Measure relative speeds with --p ThreadComm ranks timing faer GEMM tiles in
    /// lblib sections (with --repeats: one rank per worker, repeating its GEMMs).
    #[arg(long)]
    measure: bool,
    /// Slowdown of each measured rank (with --measure; its length sets P).
    #[arg(long, value_delimiter = ',')]
    slowdowns: Option<Vec<f64>>,
    /// BCE pattern "RxC" (default: the r, c <= n_P with the smallest B(M)).
    #[arg(long)]
    bce_grid: Option<String>,
    /// RS: mean occurrences beta of each processor in a family (eq. 5).
    #[arg(long, default_value_t = 10.0)]
    rs_beta: f64,
    /// RS: minimum intersection K of row and column subsets.
    #[arg(long, default_value_t = 1)]
    rs_k: usize,
    /// RS: number of subset families (the best B(M) is kept).
    #[arg(long, default_value_t = 10)]
    rs_families: usize,
    /// Reproduce a figure's trend instead of one allocation.
    #[arg(long, value_enum)]
    reproduce: Option<TileFig>,
    /// Run a real tiled LU (dense tiles, faer kernels) on one thread per processor,
    /// BC versus the chosen allocation, and compare with the simulated D(M). The
    /// allocation and the reported B, D are then for dense tiles (density 1).
    #[arg(long)]
    run_lu: bool,
    /// Tile order b of the real LU.
    #[arg(long, default_value_t = 192)]
    tile: usize,
    /// Kernel repetitions per worker of the real LU (emulated slowdown; sets P).
    #[arg(long, value_delimiter = ',')]
    repeats: Option<Vec<usize>>,
    /// With --run-lu: run only the chosen allocation, not the BC baseline too.
    #[arg(long)]
    lu_skip_bc: bool,
    /// Real LU runs per allocation (medians are reported).
    #[arg(long, default_value_t = 3)]
    lu_runs: usize,
    /// Write SVG plots (tile map, Gantt chart of D(M), figures) into DIR.
    #[arg(long)]
    svg_dir: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

fn bad(msg: impl std::fmt::Display) -> Fail {
    Fail(EXIT_BAD_INPUT, msg.to_string())
}

/// Creates the --svg-dir directory (and its parents).
///
/// # Errors
/// Exit 2 naming --svg-dir: "is a file, not a directory" instead of the bare
/// "File exists", or the I/O error.
fn make_svg_dir(dir: &std::path::Path) -> Result<(), Fail> {
    if dir.exists() && !dir.is_dir() {
        return Err(bad(format!(
            "--svg-dir {}: is a file, not a directory",
            dir.display()
        )));
    }
    std::fs::create_dir_all(dir).map_err(|e| bad(format!("--svg-dir {}: {e}", dir.display())))
}

fn plot_err(e: impl std::fmt::Display) -> Fail {
    Fail(1, format!("plot: {e}"))
}

/// Runs `jdmg plan …`.
pub fn plan_cmd(a: &PlanArgs) -> Result<(), Fail> {
    match &a.what {
        PlanWhat::Dag(d) => dag_cmd(d),
        PlanWhat::Tiles(t) => tiles_cmd(t),
    }
}

// ------------------------------------------------------------------ plan dag

fn model_of(a: &DagArgs) -> Result<CostModel, Fail> {
    let mut m = CostModel::default();
    if let Some(x) = a.latency {
        m.latency = x;
    }
    if let Some(x) = a.bandwidth {
        m.bandwidth_mbit = x;
    }
    if let Some(x) = a.nb {
        m.nb = x;
    }
    if let Some(x) = a.overlap {
        m.overlap = x;
    }
    m.validate().map_err(bad)?;
    Ok(m)
}

fn fig_of(f: FigArg) -> Figure {
    match f {
        FigArg::Fig8 => Figure::Fig8,
        FigArg::Fig10 => Figure::Fig10,
        FigArg::Fig11 => Figure::Fig11,
    }
}

fn dag_cmd(a: &DagArgs) -> Result<(), Fail> {
    if a.p > MAX_PLAN_P {
        return Err(bad(format!("--p {}: at most {MAX_PLAN_P} processors", a.p)));
    }
    let model = model_of(a)?;
    let params = Alg3Params {
        overload: a.overload,
    };
    if !(0.0..1.0).contains(&a.overload) {
        return Err(bad("--overload must lie in [0, 1)"));
    }
    if let Some(f) = a.reproduce {
        return dag_reproduce(a, fig_of(f), &model, &params);
    }
    if a.sizes.len() != 2 || a.sizes.contains(&0) {
        return Err(bad(
            "--sizes needs two positive matrix orders, e.g. 1000,2000",
        ));
    }
    let speeds = dag_speeds(a)?;
    let dag = match a.dag {
        DagKind::Fig5 => Dag::fig5(a.sizes[0], a.sizes[1]),
        DagKind::Dag1 => Dag::dag1(a.sizes[0], a.sizes[1]),
        DagKind::Dag2 => Dag::dag2(a.sizes[0], a.sizes[1]),
    };
    let s1 = algorithm1(&dag, &speeds, &model).map_err(bad)?;
    let s2 = algorithm2(&dag, &speeds, &model).map_err(bad)?;
    let s3 = algorithm3(&dag, &speeds, &model, &params).map_err(bad)?;
    let imp = 100.0 * (s2.makespan - s3.makespan) / s2.makespan;
    if let Some(dir) = &a.svg_dir {
        make_svg_dir(dir)?;
        gantt_dag(
            &dir.join("gantt_alg2.svg"),
            &dag,
            &s2,
            speeds.len(),
            "Algorithm 2",
        )?;
        gantt_dag(
            &dir.join("gantt_alg3.svg"),
            &dag,
            &s3,
            speeds.len(),
            "Algorithm 3",
        )?;
    }
    if a.json {
        let v = json!({
            "speeds_mflops": speeds,
            "model": model,
            "algorithm1": s1, "algorithm2": s2, "algorithm3": s3,
            "improvement_percent": imp,
        });
        println!("{v}");
    } else {
        println!(
            "processors      {} (mean {:.1} Mflop/s)",
            speeds.len(),
            speeds.iter().sum::<f64>() / speeds.len() as f64
        );
        for (name, s) in [
            ("Algorithm 1", &s1),
            ("Algorithm 2", &s2),
            ("Algorithm 3", &s3),
        ] {
            println!("{name}     makespan {:.3} s", s.makespan);
            for p in &s.placements {
                let t = &dag.tasks[p.task];
                println!(
                    "  {} {}({}) on {:>2} procs  {:8.3} .. {:8.3}",
                    t.name,
                    t.kind.name(),
                    t.n,
                    p.procs.len(),
                    p.start,
                    p.end
                );
            }
        }
        println!("improvement     {imp:.1} % (eq. 3, Algorithm 3 over Algorithm 2)");
    }
    Ok(())
}

fn dag_speeds(a: &DagArgs) -> Result<Vec<f64>, Fail> {
    if let Some(s) = &a.speeds {
        hetdense::sched::check_speeds(s).map_err(bad)?;
        return Ok(s.clone());
    }
    if a.measure {
        let slow = a.slowdowns.clone().unwrap_or_else(|| vec![1.0; a.p]);
        let mp = MeasureParams {
            slowdowns: slow,
            tile: 128,
            updates: 64,
            repeats: Vec::new(),
            clock: ClockMode::Virtual,
        };
        return measure_gemm_rates(&mp).map_err(bad);
    }
    ramp_speeds(a.p, a.mean, a.spread).map_err(bad)
}

fn repro_json(fig: Figure, cases: &[ReproCase]) -> serde_json::Value {
    let rows: Vec<serde_json::Value> = cases
        .iter()
        .map(|c| {
            let paper = if c.paper_percent.len() == 1 {
                json!(c.paper_percent[0])
            } else {
                json!(c.paper_percent)
            };
            json!({
                "case": c.case, "sizes": c.sizes,
                "improvement_percent": c.improvement_percent, "paper_percent": paper,
                "t_alg1": c.t_alg1, "t_alg2": c.t_alg2, "t_alg3": c.t_alg3,
            })
        })
        .collect();
    let mut v = json!({ "figure": format!("{fig:?}").to_lowercase(), "cases": rows });
    if fig == Figure::Fig8 {
        let (lo, hi) = hetdense::sched::malleable::improvement_range(cases);
        v["improvement_range_percent"] = json!([lo, hi]);
        v["paper_range_percent"] = json!([9.5, 22.8]);
    }
    v
}

fn dag_reproduce(
    a: &DagArgs,
    fig: Figure,
    model: &CostModel,
    params: &Alg3Params,
) -> Result<(), Fail> {
    let cases = reproduce(fig, model, a.spread, params).map_err(bad)?;
    let mut v = repro_json(fig, &cases);
    v["model"] = json!(model);
    v["spread"] = json!(a.spread);
    if a.sweep {
        let mut rows = Vec::new();
        for &lat in &[5e-5, 1e-4, 2e-4, 4e-4] {
            for &nb in &[16usize, 32, 64] {
                for &h in &[0.25, 0.5] {
                    let m = CostModel {
                        latency: lat,
                        nb,
                        ..model.clone()
                    };
                    let c = reproduce(fig, &m, h, params).map_err(bad)?;
                    rows.push(json!({
                        "latency": lat, "nb": nb, "spread": h,
                        "improvement_percent": c.iter().map(|x| x.improvement_percent).collect::<Vec<_>>(),
                    }));
                }
            }
        }
        v["sweep"] = json!(rows);
    }
    if let Some(dir) = &a.svg_dir {
        make_svg_dir(dir)?;
        let name = format!("{fig:?}").to_lowercase();
        improvement_bars(&dir.join(format!("{name}_improvement.svg")), fig, &cases)?;
        let (p, mean, sizes, _) = figure_setup(fig);
        let speeds = ramp_speeds(p, mean, a.spread).map_err(bad)?;
        let sz = sizes[0];
        let dag = match fig {
            Figure::Fig8 => Dag::fig5(sz[0], sz[1]),
            Figure::Fig10 => Dag::dag1(sz[0], sz[1]),
            Figure::Fig11 => Dag::dag2(sz[0], sz[1]),
        };
        let s2 = algorithm2(&dag, &speeds, model).map_err(bad)?;
        let s3 = algorithm3(&dag, &speeds, model, params).map_err(bad)?;
        gantt_dag(
            &dir.join(format!("{name}_case1_alg2.svg")),
            &dag,
            &s2,
            p,
            "Algorithm 2",
        )?;
        gantt_dag(
            &dir.join(format!("{name}_case1_alg3.svg")),
            &dag,
            &s3,
            p,
            "Algorithm 3",
        )?;
    }
    if a.json {
        println!("{v}");
    } else {
        println!(
            "{:<10} {:>8} {:>8} {:>8} {:>9} {:>9}",
            "case", "T_alg1", "T_alg2", "T_alg3", "impr. %", "paper %"
        );
        for c in &cases {
            println!(
                "{:<10} {:>8.2} {:>8.2} {:>8.2} {:>9.1} {:>9}",
                c.case,
                c.t_alg1,
                c.t_alg2,
                c.t_alg3,
                c.improvement_percent,
                c.paper_percent
                    .iter()
                    .map(|x| format!("{x}"))
                    .collect::<Vec<_>>()
                    .join("..")
            );
        }
        if let Some(s) = v.get("sweep") {
            println!("sweep (latency, nb, spread -> improvements %):");
            for r in s.as_array().into_iter().flatten() {
                println!(
                    "  {} {} {} -> {}",
                    r["latency"], r["nb"], r["spread"], r["improvement_percent"]
                );
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- plan tiles

fn tile_speeds(a: &TilesArgs) -> Result<Vec<f64>, Fail> {
    if let Some(s) = &a.speeds {
        hetdense::sched::check_speeds(s).map_err(bad)?;
        return Ok(s.clone());
    }
    if a.measure {
        // With --repeats, every rank runs its GEMMs as many times as the real LU's
        // worker does, so the measured speeds include that emulation.
        let repeats = a.repeats.clone().unwrap_or_default();
        let np = if repeats.is_empty() {
            a.p
        } else {
            repeats.len()
        };
        let slow = a.slowdowns.clone().unwrap_or_else(|| vec![1.0; np]);
        let mp = MeasureParams {
            slowdowns: slow,
            tile: 128,
            updates: 64,
            repeats,
            clock: ClockMode::Virtual,
        };
        return Ok(relative_speeds(&measure_gemm_rates(&mp).map_err(bad)?));
    }
    if let Some(r) = &a.repeats {
        if r.contains(&0) {
            return Err(bad("--repeats must be >= 1"));
        }
        return Ok(r.iter().map(|&k| 1.0 / k as f64).collect());
    }
    if a.p == 0 {
        return Err(bad("--p must be >= 1"));
    }
    Ok(vec![1.0; a.p])
}

fn parse_grid(s: &str) -> Result<BceGrid, Fail> {
    let (r, c) = s
        .split_once(['x', 'X'])
        .ok_or_else(|| bad(format!("--bce-grid '{s}': expected RxC, e.g. 12x11")))?;
    let r: usize = r
        .trim()
        .parse()
        .map_err(|_| bad(format!("--bce-grid '{s}': bad R")))?;
    let c: usize = c
        .trim()
        .parse()
        .map_err(|_| bad(format!("--bce-grid '{s}': bad C")))?;
    Ok(BceGrid::Fixed(r, c))
}

fn alg_of(a: AlgArg) -> AllocKind {
    match a {
        AlgArg::Bc => AllocKind::Bc,
        AlgArg::Bce => AllocKind::Bce,
        AlgArg::Rs => AllocKind::Rs,
    }
}

fn op_of(o: OpArg) -> Op {
    match o {
        OpArg::Lu => Op::Lu,
        OpArg::Mm => Op::Mm,
    }
}

struct TileCtx {
    costs: KernelCosts,
    rs: RsParams,
    grid: BceGrid,
}

/// Largest --p of `plan tiles` and `plan dag` (1e6 and 1e9 ran out of memory
/// at 13–16 GB).
const MAX_PLAN_P: usize = 4096;
/// Largest N (tiles per row and column) of `plan tiles`: the tiled LU has
/// about N³/3 tasks (N = 100000 asked for 80 GB).
const MAX_TILES: usize = 400;
/// Largest --alpha: ceil(alpha·sqrt(P)) processors per tile row never needs
/// more than sqrt(MAX_PLAN_P) (1e308 asked for 8.4 GB).
const MAX_ALPHA: f64 = 64.0;

/// Bounds of `plan tiles` checked before anything is allocated.
///
/// # Errors
/// Exit 2 naming the option and the bound (or the memory figure).
fn check_tiles_sizes(a: &TilesArgs) -> Result<(), Fail> {
    if a.p > MAX_PLAN_P {
        return Err(bad(format!("--p {}: at most {MAX_PLAN_P} processors", a.p)));
    }
    if a.n == 0 || a.n > MAX_TILES {
        return Err(bad(format!(
            "--n {}: between 1 and {MAX_TILES} tiles per row and column (the tiled LU has N³/3 tasks)",
            a.n
        )));
    }
    if !(1.0..=MAX_ALPHA).contains(&a.alpha) {
        return Err(bad(format!(
            "--alpha {:?}: must lie in [1, {MAX_ALPHA}]",
            a.alpha
        )));
    }
    if a.run_lu {
        if a.tile == 0 {
            return Err(bad("--tile must be at least 1"));
        }
        // the matrix of N x N dense tiles of order b, its copy and the check
        let order = (a.n as u64).saturating_mul(a.tile as u64);
        let bytes = order.saturating_mul(order).saturating_mul(8 * 3);
        crate::resources::check_memory(
            &format!(
                "--run-lu with --n {} --tile {} (order {order})",
                a.n, a.tile
            ),
            bytes,
        )?;
    }
    Ok(())
}

fn tiles_cmd(a: &TilesArgs) -> Result<(), Fail> {
    check_tiles_sizes(a)?;
    let ctx = TileCtx {
        costs: KernelCosts::default(),
        rs: RsParams {
            beta: a.rs_beta,
            k: a.rs_k,
            families: a.rs_families,
            seed: a.seed,
            ..RsParams::default()
        },
        grid: match &a.bce_grid {
            Some(s) => parse_grid(s)?,
            None => BceGrid::Best,
        },
    };
    let blr = BlrParams {
        n: a.n,
        delta: a.delta,
        noise_sd: a.noise_sd,
        random_full_rank: !a.no_random_full_rank,
        seed: a.seed,
    };
    if let Some(f) = a.reproduce {
        return tiles_reproduce(a, f, &blr, &ctx);
    }
    let speeds = tile_speeds(a)?;
    // The real LU factorizes dense tiles: allocate (and report B, D) for density 1.
    let d = if a.run_lu {
        vec![1.0; a.n * a.n]
    } else {
        blr_densities(&blr).map_err(bad)?
    };
    let op = op_of(a.op);
    let (m, met) = evaluate(
        alg_of(a.alg),
        op,
        &d,
        a.n,
        &speeds,
        a.alpha,
        &ctx.costs,
        &ctx.rs,
        ctx.grid,
    )
    .map_err(bad)?;
    let mut v = json!(met);
    v["speeds"] = json!(speeds);
    if a.run_lu {
        if a.op != OpArg::Lu {
            return Err(bad("--run-lu needs --op lu"));
        }
        v["real_lu"] = real_lu(a, &speeds, &ctx, &m)?;
    }
    if let Some(dir) = &a.svg_dir {
        make_svg_dir(dir)?;
        tile_map(&dir.join("tile_map.svg"), &m)?;
        if a.n <= 40 {
            let dag = TileDag::of(op, a.n);
            let tw = dag.task_weights(&d, &ctx.costs);
            let sim = simulate(
                &dag,
                |t| m.owner[t],
                m.p,
                &tw,
                |t, q| tw[t] / speeds[q],
                true,
            );
            gantt_tiles(&dir.join("gantt_dm.svg"), &dag, &sim.segments, m.p)?;
        }
    }
    if a.json {
        println!("{v}");
    } else {
        println!(
            "allocation        {:?} on P = {}, alpha = {} (n_P = {}), grid {:?}",
            met.alg, met.p, met.alpha, met.n_p, met.grid
        );
        println!("max procs / line  {}", met.max_procs_per_line);
        println!("B(M) / ideal      {:.4}", met.max_load_ratio);
        println!("D(M) / ideal      {:.4}", met.makespan_ratio);
        println!(
            "dispersion        {:.4}{}",
            met.dispersion,
            met.virtual_dispersion
                .map(|x| format!(" (virtual {x:.4})"))
                .unwrap_or_default()
        );
        if let Some(r) = v.get("real_lu") {
            println!("real LU           {r}");
        }
    }
    Ok(())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

fn real_lu(
    a: &TilesArgs,
    speeds: &[f64],
    ctx: &TileCtx,
    m: &Mapping,
) -> Result<serde_json::Value, Fail> {
    let repeats = match &a.repeats {
        Some(r) => r.clone(),
        None => speeds
            .iter()
            .map(|s| (1.0 / s).round().max(1.0) as usize)
            .collect(),
    };
    if repeats.len() != speeds.len() {
        return Err(bad("--repeats needs one value per processor"));
    }
    if a.lu_runs == 0 || a.tile == 0 {
        return Err(bad("--lu-runs and --tile must be >= 1"));
    }
    let params = LuRunParams {
        tile: a.tile,
        repeats: repeats.clone(),
        seed: a.seed,
    };
    let bc = block_cyclic(a.n, speeds.len()).map_err(bad)?;
    let mut out = Vec::new();
    let chosen = format!("{:?}", alg_of(a.alg)).to_lowercase();
    let mut todo = vec![("bc".to_string(), &bc), (chosen, m)];
    if a.lu_skip_bc {
        todo.remove(0);
    }
    for (name, map) in todo {
        let mut meas = Vec::new();
        let mut pred = Vec::new();
        let mut be: f64 = 0.0;
        let mut busy: Vec<Vec<f64>> = Vec::new();
        for _ in 0..a.lu_runs {
            let run = run_tiled_lu(map, &ctx.costs, &params).map_err(bad)?;
            pred.push(predict_makespan(map, &ctx.costs, &run, &repeats));
            meas.push(run.makespan);
            let mut b = vec![0.0; repeats.len()];
            for r in &run.records {
                b[r.worker] += r.end - r.start;
            }
            busy.push(b);
            be = be.max(run.backward_error);
        }
        let ratios: Vec<f64> = meas.iter().zip(&pred).map(|(x, y)| x / y).collect();
        out.push(json!({
            "alg": name,
            "measured_makespan_s": median(meas.clone()),
            "simulated_makespan_s": median(pred.clone()),
            "measured_over_simulated": median(ratios),
            "runs_measured_s": meas, "runs_simulated_s": pred,
            "backward_error": be,
            "runs_busy_s": busy,
        }));
    }
    Ok(json!({ "tile": a.tile, "repeats": repeats, "runs": out }))
}

fn tiles_reproduce(a: &TilesArgs, f: TileFig, blr: &BlrParams, ctx: &TileCtx) -> Result<(), Fail> {
    let mut rows = Vec::new();
    let eval =
        |alg, op, n: usize, p: usize, alpha: f64, grid: BceGrid| -> Result<TileMetrics, Fail> {
            let d = blr_densities(&BlrParams { n, ..blr.clone() }).map_err(bad)?;
            evaluate(
                alg,
                op,
                &d,
                n,
                &vec![1.0; p],
                alpha,
                &ctx.costs,
                &ctx.rs,
                grid,
            )
            .map(|x| x.1)
            .map_err(bad)
        };
    match f {
        TileFig::Fig45 | TileFig::Fig67 => {
            let ops: &[Op] = &[Op::Mm, Op::Lu];
            for &op in ops {
                for &p in &[12usize, 30, 90] {
                    for &n in &[30usize, 60] {
                        for &alpha in &[1.0, 2.0, 3.0] {
                            let algs: &[AllocKind] = if f == TileFig::Fig45 {
                                &[AllocKind::Bc, AllocKind::Bce, AllocKind::Rs]
                            } else {
                                &[AllocKind::Bce]
                            };
                            for &alg in algs {
                                if alg == AllocKind::Bc && alpha > 1.0 {
                                    continue;
                                }
                                rows.push(eval(alg, op, n, p, alpha, ctx.grid)?);
                            }
                        }
                    }
                }
            }
        }
        TileFig::Fig8 => {
            for &op in &[Op::Mm, Op::Lu] {
                for &n in &[30usize, 60] {
                    rows.push(eval(AllocKind::Bc, op, n, 34, 2.0, ctx.grid)?);
                    for g in [
                        BceGrid::Fixed(10, 12),
                        BceGrid::Fixed(12, 11),
                        BceGrid::Fixed(12, 12),
                    ] {
                        rows.push(eval(AllocKind::Bce, op, n, 34, 2.0, g)?);
                    }
                    rows.push(eval(AllocKind::Rs, op, n, 34, 2.0, ctx.grid)?);
                }
            }
        }
    }
    if let Some(dir) = &a.svg_dir {
        make_svg_dir(dir)?;
        match f {
            TileFig::Fig45 => {
                for op in [Op::Mm, Op::Lu] {
                    let name = if op == Op::Mm {
                        "fig4_mm.svg"
                    } else {
                        "fig5_lu.svg"
                    };
                    ratio_plot(&dir.join(name), op, &rows)?;
                }
            }
            TileFig::Fig67 => dispersion_plot(&dir.join("fig67_dispersion.svg"), &rows)?,
            TileFig::Fig8 => {}
        }
    }
    if a.json {
        println!("{}", json!({ "rows": rows }));
    } else {
        println!(
            "{:<4} {:<4} {:>3} {:>3} {:>5} {:>8} {:>6} {:>8} {:>8} {:>8} {:>8}",
            "op", "alg", "P", "N", "alpha", "grid", "procs", "B/ideal", "D/ideal", "disp", "vdisp"
        );
        for r in &rows {
            println!(
                "{:<4} {:<4} {:>3} {:>3} {:>5} {:>8} {:>6} {:>8.4} {:>8.4} {:>8.4} {:>8}",
                format!("{:?}", r.op),
                format!("{:?}", r.alg),
                r.p,
                r.n,
                r.alpha,
                r.grid
                    .map(|(x, y)| format!("{x}x{y}"))
                    .unwrap_or_else(|| "-".into()),
                r.max_procs_per_line,
                r.max_load_ratio,
                r.makespan_ratio,
                r.dispersion,
                r.virtual_dispersion
                    .map(|x| format!("{x:.4}"))
                    .unwrap_or_else(|| "-".into()),
            );
        }
    }
    Ok(())
}

// --------------------------------------------------------------------- plots

fn color(i: usize) -> RGBColor {
    const C: [RGBColor; 10] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
        RGBColor(188, 189, 34),
        RGBColor(23, 190, 207),
    ];
    C[i % C.len()]
}

/// The label of category `round(x)` when `x` is (close to) an integer, else nothing.
fn label_at(x: f64, f: impl Fn(usize) -> Option<String>) -> String {
    let r = x.round();
    if (x - r).abs() > 1e-6 || r < 0.0 {
        return String::new();
    }
    f(r as usize).unwrap_or_default()
}

/// Gantt chart of a `002` schedule: one row per processor, one colour per task.
fn gantt_dag(path: &Path, dag: &Dag, s: &Schedule, nprocs: usize, title: &str) -> Result<(), Fail> {
    let root = SVGBackend::new(path, (1000, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let mut ch = ChartBuilder::on(&root)
        .caption(
            format!("{title}: makespan {:.2} s", s.makespan),
            ("sans-serif", 20),
        )
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(45)
        .build_cartesian_2d(0.0..s.makespan * 1.02, 0.0..nprocs as f64)
        .map_err(plot_err)?;
    ch.configure_mesh()
        .x_desc("time (s)")
        .y_desc("processor")
        .draw()
        .map_err(plot_err)?;
    for p in &s.placements {
        let t = &dag.tasks[p.task];
        let c = color(p.task);
        ch.draw_series(p.procs.iter().map(|&q| {
            Rectangle::new(
                [(p.start, q as f64 + 0.1), (p.end, q as f64 + 0.9)],
                c.filled(),
            )
        }))
        .map_err(plot_err)?
        .label(format!("{} {}({})", t.name, t.kind.name(), t.n))
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
    }
    ch.configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(plot_err)?;
    root.present().map_err(plot_err)?;
    Ok(())
}

/// Improvement of Algorithm 3 over Algorithm 2 per case, with the paper's values.
fn improvement_bars(path: &Path, fig: Figure, cases: &[ReproCase]) -> Result<(), Fail> {
    let root = SVGBackend::new(path, (900, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let hi = cases
        .iter()
        .flat_map(|c| {
            c.paper_percent
                .iter()
                .copied()
                .chain([c.improvement_percent])
        })
        .fold(0.0, f64::max)
        * 1.15;
    let lo = cases
        .iter()
        .map(|c| c.improvement_percent)
        .fold(0.0, f64::min);
    let n = cases.len();
    let mut ch = ChartBuilder::on(&root)
        .caption(
            format!("{fig:?}: improvement of Algorithm 3 over Algorithm 2 (eq. 3)"),
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(45)
        .build_cartesian_2d(-0.5..n as f64 - 0.5, lo.min(0.0)..hi.max(1.0))
        .map_err(plot_err)?;
    ch.configure_mesh()
        .x_desc("case")
        .y_desc("improvement (%)")
        .x_labels(n)
        .x_label_formatter(&|x| label_at(*x, |i| cases.get(i).map(|c| c.case.clone())))
        .draw()
        .map_err(plot_err)?;
    ch.draw_series(cases.iter().enumerate().map(|(i, c)| {
        Rectangle::new(
            [(i as f64 - 0.35, 0.0), (i as f64, c.improvement_percent)],
            color(0).filled(),
        )
    }))
    .map_err(plot_err)?
    .label("this model")
    .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color(0).filled()));
    ch.draw_series(cases.iter().enumerate().map(|(i, c)| {
        let (a, b) = if c.paper_percent.len() == 2 {
            (c.paper_percent[0], c.paper_percent[1])
        } else {
            (0.0, c.paper_percent[0])
        };
        Rectangle::new([(i as f64, a), (i as f64 + 0.35, b)], color(1).filled())
    }))
    .map_err(plot_err)?
    .label("paper")
    .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color(1).filled()));
    ch.configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(plot_err)?;
    root.present().map_err(plot_err)?;
    Ok(())
}

/// Owner of every tile, one colour per processor.
fn tile_map(path: &Path, m: &Mapping) -> Result<(), Fail> {
    let root = SVGBackend::new(path, (700, 700)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let n = m.n as f64;
    let mut ch = ChartBuilder::on(&root)
        .caption(format!("tile owners, P = {}", m.p), ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(30)
        .build_cartesian_2d(0.0..n, n..0.0)
        .map_err(plot_err)?;
    ch.configure_mesh()
        .disable_mesh()
        .draw()
        .map_err(plot_err)?;
    ch.draw_series((0..m.n * m.n).map(|t| {
        let (i, j) = ((t / m.n) as f64, (t % m.n) as f64);
        let o = m.owner[t];
        let base = color(o);
        let shade = 0.55 + 0.45 * ((o / 10) % 3) as f64 / 2.0;
        let c = RGBColor(
            (base.0 as f64 * shade) as u8,
            (base.1 as f64 * shade) as u8,
            (base.2 as f64 * shade) as u8,
        );
        Rectangle::new([(j, i), (j + 1.0, i + 1.0)], c.filled())
    }))
    .map_err(plot_err)?;
    root.present().map_err(plot_err)?;
    Ok(())
}

/// Gantt chart of the 𝔇(M) simulation: colour by kernel.
fn gantt_tiles(
    path: &Path,
    dag: &TileDag,
    segs: &[hetdense::sched::tiles::Segment],
    nprocs: usize,
) -> Result<(), Fail> {
    let root = SVGBackend::new(path, (1000, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let end = segs.iter().map(|s| s.end).fold(0.0, f64::max);
    let mut ch = ChartBuilder::on(&root)
        .caption(
            format!("D(M) schedule (GETRF blue, TRSM orange, GEMM green), makespan {end:.1}"),
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(45)
        .build_cartesian_2d(0.0..end * 1.02, 0.0..nprocs as f64)
        .map_err(plot_err)?;
    ch.configure_mesh()
        .x_desc("time (C_GETRF units)")
        .y_desc("processor")
        .draw()
        .map_err(plot_err)?;
    ch.draw_series(segs.iter().map(|s| {
        let k = match dag.tasks[s.task].kind {
            hetdense::sched::tiles::Kernel::Getrf => 0,
            hetdense::sched::tiles::Kernel::Trsm => 1,
            hetdense::sched::tiles::Kernel::Gemm => 2,
        };
        Rectangle::new(
            [(s.start, s.proc as f64 + 0.1), (s.end, s.proc as f64 + 0.9)],
            color(k).filled(),
        )
    }))
    .map_err(plot_err)?;
    root.present().map_err(plot_err)?;
    Ok(())
}

/// Analogue of `004` Figures 4–5: B (dots) and D (triangles) over the ideal per
/// configuration, one colour per allocation.
fn ratio_plot(path: &Path, op: Op, rows: &[TileMetrics]) -> Result<(), Fail> {
    let rows: Vec<&TileMetrics> = rows.iter().filter(|r| r.op == op).collect();
    let configs: Vec<(usize, usize, f64)> = {
        let mut c: Vec<(usize, usize, f64)> = Vec::new();
        for r in &rows {
            let k = (r.p, r.n, r.alpha);
            if !c.contains(&k) {
                c.push(k);
            }
        }
        c
    };
    let ymax = rows
        .iter()
        .map(|r| r.makespan_ratio.max(r.max_load_ratio))
        .fold(1.0, f64::max)
        .min(2.5);
    let root = SVGBackend::new(path, (1100, 550)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let mut ch = ChartBuilder::on(&root)
        .caption(
            format!("{op:?}: B(M) (circles) and D(M) (triangles) over the ideal load"),
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(-0.5..configs.len() as f64 - 0.5, 0.95..ymax * 1.02)
        .map_err(plot_err)?;
    let cfg2 = configs.clone();
    ch.configure_mesh()
        .x_desc("P / N / alpha")
        .y_desc("ratio to ideal")
        .x_labels(configs.len())
        .x_label_formatter(&move |x| {
            label_at(*x, |i| cfg2.get(i).map(|(p, n, a)| format!("{p}/{n}/{a}")))
        })
        .draw()
        .map_err(plot_err)?;
    for (ci, alg) in [AllocKind::Bc, AllocKind::Bce, AllocKind::Rs]
        .iter()
        .enumerate()
    {
        let c = [RED, MAGENTA, GREEN][ci];
        let pts: Vec<(f64, f64, f64)> = rows
            .iter()
            .filter(|r| r.alg == *alg)
            .filter_map(|r| {
                configs
                    .iter()
                    .position(|k| *k == (r.p, r.n, r.alpha))
                    .map(|i| {
                        (
                            i as f64 - 0.2 + 0.2 * ci as f64,
                            r.max_load_ratio.min(ymax),
                            r.makespan_ratio.min(ymax),
                        )
                    })
            })
            .collect();
        ch.draw_series(
            pts.iter()
                .map(|&(x, b, _)| Circle::new((x, b), 4, c.filled())),
        )
        .map_err(plot_err)?
        .label(format!("{alg:?}"))
        .legend(move |(x, y)| Circle::new((x + 6, y), 4, c.filled()));
        ch.draw_series(
            pts.iter()
                .map(|&(x, _, d)| TriangleMarker::new((x, d), 5, c.stroke_width(1))),
        )
        .map_err(plot_err)?;
    }
    ch.configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(plot_err)?;
    root.present().map_err(plot_err)?;
    Ok(())
}

/// Analogue of `004` Figures 6–7: dispersion of virtual (blue) and real (red) loads.
fn dispersion_plot(path: &Path, rows: &[TileMetrics]) -> Result<(), Fail> {
    let root = SVGBackend::new(path, (1100, 550)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let ymax = rows
        .iter()
        .map(|r| r.dispersion.max(r.virtual_dispersion.unwrap_or(0.0)))
        .fold(0.01, f64::max);
    let mut ch = ChartBuilder::on(&root)
        .caption(
            "BCE dispersion: virtual processors (blue), real processors (red); MM then LU",
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..rows.len() as f64, 0.0..ymax * 1.05)
        .map_err(plot_err)?;
    ch.configure_mesh()
        .x_desc("configuration (op, P, N, alpha)")
        .y_desc("std / mean")
        .draw()
        .map_err(plot_err)?;
    ch.draw_series(rows.iter().enumerate().filter_map(|(i, r)| {
        r.virtual_dispersion
            .map(|v| Circle::new((i as f64 + 0.5, v), 4, BLUE.filled()))
    }))
    .map_err(plot_err)?;
    ch.draw_series(
        rows.iter()
            .enumerate()
            .map(|(i, r)| Circle::new((i as f64 + 0.5, r.dispersion), 4, RED.filled())),
    )
    .map_err(plot_err)?;
    root.present().map_err(plot_err)?;
    Ok(())
}
