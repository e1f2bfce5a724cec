//! Load-balanced synchronous parallel simulated annealing (McCombs et al., §2), a
//! flexible-phase method that is not an eigensolver.
//!
//! ```text
//! cargo run -p lblib --example anneal -- --ranks 4 --slowdown 1,1,2,4 --balance on --phases 20
//! cargo build -p lblib --features mpi --example anneal
//! mpirun --oversubscribe -np 4 target/debug/examples/anneal --mpi --slowdown 1,1,2,4 --balance off
//! ```
//!
//! Flags: `--ranks N` (thread backend), `--slowdown f0,f1,..` (per-rank slowdown
//! factors; missing entries are 1), `--balance on|off`, `--phases N`, `--ops X`
//! (operations per phase), `--dim D`, `--seed S`, `--clock virtual|real` (thread
//! backend), `--mpi` (run on MPI, slowdown emulated by sleeping; needs the `mpi`
//! feature and mpirun), `--basis wall|cpu` (what the MPI sleep emulation scales:
//! wall-clock compute time, the default, or CPU time). The last stdout line is one JSON object with
//! `imbalance_percent`, `balanced`, `wall_seconds`, `best_energy`, `ranks`, ...

use lblib::demo::{run_anneal, AnnealOutcome, AnnealParams};
use lblib::{ClockMode, ThreadComm, ThreadConfig};
use std::process::ExitCode;
use std::time::Instant;

struct Args {
    ranks: usize,
    slowdowns: Vec<f64>,
    clock: ClockMode,
    mpi: bool,
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    basis: lblib::SlowdownBasis,
    params: AnnealParams,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        ranks: 4,
        slowdowns: vec![1.0, 1.0, 2.0, 4.0],
        clock: ClockMode::Virtual,
        mpi: false,
        basis: lblib::SlowdownBasis::WallTime,
        params: AnnealParams::default(),
    };
    let mut ranks_given = false;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--ranks" => {
                a.ranks = val()?.parse().map_err(|e| format!("--ranks: {e}"))?;
                ranks_given = true;
            }
            "--slowdown" => {
                a.slowdowns = val()?
                    .split(',')
                    .map(|s| s.trim().parse::<f64>().map_err(|e| format!("--slowdown {s}: {e}")))
                    .collect::<Result<_, _>>()?;
                if a.slowdowns.iter().any(|&f| !(f.is_finite() && f > 0.0)) {
                    return Err("--slowdown: factors must be finite and > 0".into());
                }
            }
            "--balance" => {
                a.params.balance = match val()?.as_str() {
                    "on" | "true" | "1" => true,
                    "off" | "false" | "0" => false,
                    v => return Err(format!("--balance expects on|off, got {v}")),
                }
            }
            "--phases" => a.params.phases = val()?.parse().map_err(|e| format!("--phases: {e}"))?,
            "--ops" => a.params.ops_per_phase = val()?.parse().map_err(|e| format!("--ops: {e}"))?,
            "--dim" => a.params.dim = val()?.parse().map_err(|e| format!("--dim: {e}"))?,
            "--seed" => a.params.seed = val()?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--clock" => {
                a.clock = match val()?.as_str() {
                    "virtual" => ClockMode::Virtual,
                    "real" => ClockMode::Real,
                    v => return Err(format!("--clock expects virtual|real, got {v}")),
                }
            }
            "--mpi" => a.mpi = true,
            "--basis" => {
                a.basis = match val()?.as_str() {
                    "cpu" => lblib::SlowdownBasis::CpuTime,
                    "wall" => lblib::SlowdownBasis::WallTime,
                    v => return Err(format!("--basis expects cpu|wall, got {v}")),
                }
            }
            "-h" | "--help" => {
                return Err("usage: anneal [--ranks N] [--slowdown 1,1,2,4] [--balance on|off] \
                            [--phases N] [--ops X] [--dim D] [--seed S] [--clock virtual|real] [--mpi] [--basis wall|cpu]"
                    .into())
            }
            f => return Err(format!("unknown flag {f}")),
        }
    }
    if !ranks_given {
        a.ranks = a.slowdowns.len().max(1);
    }
    a.params.validate().map_err(|e| e.to_string())?;
    Ok(a)
}

/// Σ(max − t_i) / (n · max) for fixed work with times proportional to the slowdowns.
fn theoretical_imbalance(slowdowns: &[f64]) -> f64 {
    let max = slowdowns.iter().copied().fold(0.0, f64::max);
    if slowdowns.is_empty() || max <= 0.0 {
        return 0.0;
    }
    100.0 * slowdowns.iter().map(|s| max - s).sum::<f64>() / (slowdowns.len() as f64 * max)
}

fn emit(o: &AnnealOutcome, phases: usize, backend: &str, slowdowns: &[f64], real: f64) {
    println!(
        "anneal: backend={backend} ranks={} balanced={} imbalance={:.2}% (theoretical unbalanced {:.2}%) \
         best_energy={:.4} wall={:.4}s ops={:?}",
        o.ranks,
        o.balanced,
        o.imbalance_percent,
        theoretical_imbalance(slowdowns),
        o.best_energy,
        o.wall_seconds,
        o.ops_per_rank
    );
    let json = serde_json::json!({
        "imbalance_percent": o.imbalance_percent,
        "balanced": o.balanced,
        "wall_seconds": o.wall_seconds,
        "real_seconds": real,
        "best_energy": o.best_energy,
        "ranks": o.ranks,
        "backend": backend,
        "slowdowns": slowdowns,
        "theoretical_unbalanced_percent": theoretical_imbalance(slowdowns),
        "ops_per_rank": o.ops_per_rank,
        "phases": phases,
        "imbalance_percent_per_label": o.report.per_label.iter()
            .map(|l| (l.label.clone(), serde_json::Value::from(l.imbalance_percent)))
            .collect::<serde_json::Map<String, serde_json::Value>>(),
        "imbalance_seconds_per_rank": o.report.per_rank.iter().map(|r| r.imbalance_seconds).collect::<Vec<_>>(),
    });
    println!("{json}");
}

#[cfg(feature = "mpi")]
fn run_mpi(a: &Args) -> Result<(), String> {
    use lblib::{Comm, Slowed};
    let (_universe, world, _threading) = lblib::mpi::init().map_err(|e| e.to_string())?;
    let rank = world.rank();
    let n = world.size();
    let slowdowns: Vec<f64> = (0..n)
        .map(|r| a.slowdowns.get(r).copied().unwrap_or(1.0))
        .collect();
    let start = Instant::now();
    let comm = Slowed::with_basis(world, slowdowns[rank], a.basis);
    let o = run_anneal(comm, &a.params).map_err(|e| e.to_string())?;
    if rank == 0 {
        emit(
            &o,
            a.params.phases,
            "mpi",
            &slowdowns,
            start.elapsed().as_secs_f64(),
        );
    }
    Ok(())
}

#[cfg(not(feature = "mpi"))]
fn run_mpi(_a: &Args) -> Result<(), String> {
    Err(
        "--mpi needs the `mpi` feature: cargo build -p lblib --features mpi --example anneal"
            .into(),
    )
}

fn main() -> ExitCode {
    let a = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("anneal: {e}");
            return ExitCode::from(2);
        }
    };
    let res = if a.mpi {
        run_mpi(&a)
    } else {
        let slowdowns: Vec<f64> = (0..a.ranks)
            .map(|r| a.slowdowns.get(r).copied().unwrap_or(1.0))
            .collect();
        let cfg = ThreadConfig::with_slowdowns(&slowdowns, a.clock);
        let start = Instant::now();
        let params = a.params.clone();
        let mut out = ThreadComm::run_with(cfg, |c| run_anneal(c, &params));
        let real = start.elapsed().as_secs_f64();
        match out.remove(0) {
            Ok(o) => {
                emit(
                    &o,
                    a.params.phases,
                    if a.clock == ClockMode::Real {
                        "threads-real"
                    } else {
                        "threads-virtual"
                    },
                    &slowdowns,
                    real,
                );
                Ok(())
            }
            Err(e) => Err(e.to_string()),
        }
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("anneal: {e}");
            ExitCode::FAILURE
        }
    }
}
