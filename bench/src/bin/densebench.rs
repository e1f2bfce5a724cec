//! Reference timings for `jdmg dense` (issue #11, bench/README.md "Dense kernels"):
//! faer's own LU / QR / GEMM in one process, on the same seeded random matrix, so
//! that `jdmg dense … --ranks 1` can be compared with it side by side.
//!
//! ```text
//! densebench faer --op lu --n 4000 --threads 1
//! ```
//! prints one JSON line: `op`, `n`, `threads`, `seconds` (factorization only),
//! `gflops`, `backward_error` (with `--check`).
//!
//! ```text
//! densebench plot --input runs.jsonl --output hetero.svg
//! ```
//! draws the heterogeneous experiment of Boudet et al. §3 from `jdmg dense --json`
//! lines: median time of the heterogeneous layout per slice size `B`, the
//! homogeneous cyclic time, and 000's `t_theoretical(B)` scaled to the measured
//! cyclic time (`PredictedTimes::scaled_to_measured`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use bench::median;
use clap::{Args, Parser, Subcommand, ValueEnum};
use hetdense::alloc::predicted_times;
use hetdense::check;
use hetdense::{par_for, DenseOp, DenseReport, Source};
use plotters::prelude::*;

#[derive(Clone, Copy, ValueEnum)]
enum Op {
    Lu,
    Qr,
    Gemm,
}

#[derive(Parser)]
#[command(about = "References and plots for jdmg dense")]
struct Top {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// faer's LU / QR / GEMM in one process.
    Faer(Cli),
    /// SVG of the heterogeneous experiment from `jdmg dense --json` lines.
    Plot(PlotArgs),
}

#[derive(Args)]
struct PlotArgs {
    /// JSON lines printed by `jdmg dense --json` (cyclic and hetero runs).
    #[arg(long)]
    input: PathBuf,
    /// Output SVG.
    #[arg(long)]
    output: PathBuf,
}

#[derive(Args)]
struct Cli {
    /// Operation.
    #[arg(long, value_enum, default_value = "lu")]
    op: Op,
    /// Matrix order.
    #[arg(long, default_value_t = 4000)]
    n: usize,
    /// faer threads.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// QR block size (faer's recommended one when absent).
    #[arg(long)]
    block: Option<usize>,
    /// Seed of the random matrix (same generator as `jdmg dense --seed`).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Also compute the backward error.
    #[arg(long)]
    check: bool,
}

fn main() {
    match Top::parse().cmd {
        Cmd::Faer(c) => faer_ref(c),
        Cmd::Plot(p) => {
            if let Err(e) = plot(&p) {
                eprintln!("densebench plot: {e}");
                std::process::exit(2);
            }
        }
    }
}

fn plot(p: &PlotArgs) -> Result<(), Box<dyn std::error::Error>> {
    let text = std::fs::read_to_string(&p.input)?;
    let mut hetero: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    let mut cyclic = Vec::new();
    let mut times: Vec<Vec<f64>> = Vec::new();
    for line in text.lines().filter(|l| l.trim_start().starts_with('{')) {
        let r: DenseReport = serde_json::from_str(line)?;
        match r.layout.as_str() {
            "hetero" => hetero.entry(r.slice).or_default().push(r.wall_seconds),
            "cyclic" => {
                cyclic.push(r.wall_seconds);
                times.push(r.cycle_times.clone());
            }
            _ => {}
        }
    }
    if cyclic.is_empty() || hetero.is_empty() {
        return Err("need cyclic and hetero runs".into());
    }
    let p_ranks = times[0].len();
    let t_med: Vec<f64> = (0..p_ranks)
        .map(|i| median(times.iter().map(|t| t[i])))
        .collect();
    let cyc = median(&cyclic);
    let max_b = *hetero.keys().max().unwrap_or(&1);
    let pt = predicted_times(&t_med, max_b)?;
    let meas: Vec<(f64, f64)> = hetero
        .iter_mut()
        .map(|(&b, v)| (b as f64, median(v)))
        .collect();
    let pred: Vec<(f64, f64)> = (1..=max_b)
        .filter_map(|b| pt.scaled_to_measured(cyc, b).map(|(_, th)| (b as f64, th)))
        .collect();
    let opt = pt.scaled_to_measured(cyc, 1).map(|(o, _)| o).unwrap_or(0.0);
    let ymax = meas
        .iter()
        .chain(&pred)
        .map(|&(_, y)| y)
        .fold(cyc, f64::max)
        * 1.15;
    let root = SVGBackend::new(&p.output, (720, 440)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("LU, {p_ranks} ranks: heterogeneous cyclic(B) vs cyclic (000 §3)"),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.5f64..(max_b as f64 + 0.5), 0f64..ymax)?;
    chart
        .configure_mesh()
        .x_desc("slice size B (column blocks per slice)")
        .y_desc("seconds (median)")
        .draw()?;
    chart
        .draw_series(LineSeries::new(meas.clone(), BLUE.stroke_width(2)))?
        .label("hetero(B), measured")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE));
    chart.draw_series(
        meas.iter()
            .map(|&(x, y)| Circle::new((x, y), 4, BLUE.filled())),
    )?;
    chart
        .draw_series(LineSeries::new(pred, RED.stroke_width(2)))?
        .label("t_theoretical(B) scaled to measured cyclic")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED));
    chart
        .draw_series(LineSeries::new(
            vec![(0.5, cyc), (max_b as f64 + 0.5, cyc)],
            BLACK.stroke_width(2),
        ))?
        .label("cyclic, measured")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
    chart
        .draw_series(LineSeries::new(
            vec![(0.5, opt), (max_b as f64 + 0.5, opt)],
            GREEN.stroke_width(1),
        ))?
        .label("t_optimal scaled")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], GREEN));
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

fn faer_ref(cli: Cli) {
    if cli.n == 0 || cli.threads == 0 {
        eprintln!("densebench: --n and --threads must be at least 1");
        std::process::exit(2);
    }
    let n = cli.n;
    let par = par_for(cli.threads);
    let a = Source::Random { seed: cli.seed }.to_col_major(n);
    let (op, seconds, be) = match cli.op {
        Op::Lu => {
            let t = Instant::now();
            let (lu, ipiv) = check::serial_lu(&a, n, par);
            let s = t.elapsed().as_secs_f64();
            let be = cli
                .check
                .then(|| check::lu_backward_error(&a, &lu, &ipiv, n, par));
            (DenseOp::Lu, s, be)
        }
        Op::Qr => {
            let b = cli.block.unwrap_or_else(|| {
                faer::linalg::qr::no_pivoting::factor::recommended_block_size::<f64>(n, n)
            });
            let t = Instant::now();
            let (qr, tf) = check::serial_qr(&a, n, b, par);
            let s = t.elapsed().as_secs_f64();
            let be = cli
                .check
                .then(|| check::qr_errors(&a, &qr, &tf, n, b.min(n).max(1), par).0);
            (DenseOp::Qr, s, be)
        }
        Op::Gemm => {
            let b = Source::Random {
                seed: cli.seed.wrapping_add(1),
            }
            .to_col_major(n);
            let t = Instant::now();
            let c = hetdense::gemm::gemm_slab(&a, &b, n, n, par);
            let s = t.elapsed().as_secs_f64();
            std::hint::black_box(&c);
            (DenseOp::Gemm, s, None)
        }
    };
    println!(
        "{}",
        serde_json::json!({
            "op": op.name(),
            "n": n,
            "threads": cli.threads,
            "seconds": seconds,
            "gflops": op.flops(n) / seconds * 1e-9,
            "backward_error": be,
        })
    );
}
