//! Preconditioner table (issue 4 acceptance): iterations of right-preconditioned BiCGSTAB
//! to a 1e-10 relative (true) residual with none / Jacobi / ILU(0) / ILUT(20,0) / SPAI on
//! bcsstk13, 1138_bus, crystm01, nos4 (from the shared matrix directory) and a generated
//! 3D 7-point Laplacian; right-hand side `b = A · ones`. Prints a markdown table with
//! iterations, setup time, solve time and the final true residual `‖b − Ax‖/‖b‖`.
//!
//! `cargo run --release -p bench --bin precond_table -- [--matrices DIR] [--grid 20]
//! [--max-steps 10000] [--rtol 1e-10] [--threads 1] [--solver bicgstab|cg|gmres] [--restart 30]
//! [--kinds 'none;jacobi;ilu0;ilut(20,0);spai;ilu0(0.2)']`

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use lblib::SelfComm;
use matrices::CsrMatrix;
use precond::krylov::{Bicgstab, Cg, Gmres, KrylovResult, StopCriteria};
use precond::preconditioners::build_with_info;
use precond::{CsrOperator, PrecondKind, Preconditioner};

#[derive(Parser, Debug)]
#[command(about = "Iterations to a relative residual per preconditioner (markdown table)")]
struct Args {
    /// Shared matrix directory (default: $JDMG_MATRICES, else ../shared/matrices).
    #[arg(long)]
    matrices: Option<PathBuf>,
    /// Grid size g of the generated g^3 7-point Laplacian.
    #[arg(long, default_value_t = 20)]
    grid: usize,
    /// Iteration cap per solve (over restarts).
    #[arg(long, default_value_t = 10_000)]
    max_steps: usize,
    /// Relative tolerance on the true residual.
    #[arg(long, default_value_t = 1e-10)]
    rtol: f64,
    /// Krylov solver: bicgstab, cg or gmres.
    #[arg(long, default_value = "bicgstab")]
    solver: String,
    /// Threads of the SpMV (`precond::CsrOperator`); preconditioners apply serially.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// GMRES restart length.
    #[arg(long, default_value_t = 30)]
    restart: usize,
    /// Matrices to run (names of shared files, or "laplace3d").
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "bcsstk13,1138_bus,crystm01,nos4,laplace3d"
    )]
    only: Vec<String>,
    /// Preconditioners (PrecondKind short forms, e.g. "ilu0(0.2)", "ilut(20,0,0.2)").
    #[arg(
        long,
        value_delimiter = ';',
        default_value = "none;jacobi;ilu0;ilut(20,0);spai;fsai"
    )]
    kinds: Vec<String>,
}

/// Reads a generated (`lap3d:20`, …) or shared (`bcsstk13`) matrix.
fn load(dir: &std::path::Path, name: &str, grid: usize) -> Result<(String, CsrMatrix), String> {
    if name == "laplace3d" {
        let spec = format!("lap3d:{grid}");
        let parsed: matrices::generate::GenSpec = spec.parse().map_err(|e| format!("{e}"))?;
        let a = matrices::generate::generate(&parsed).map_err(|e| format!("{e}"))?;
        return Ok((format!("laplace3d {grid}^3"), a));
    }
    let path = dir.join(format!("{name}.mtx"));
    let m =
        matrices::mm::read_matrix_market(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((name.to_string(), m.matrix))
}

fn solve(args: &Args, a: &CsrMatrix, m: &dyn Preconditioner, b: &[f64]) -> KrylovResult {
    let stop = StopCriteria {
        max_steps: args.max_steps,
        rtol: args.rtol,
        atol: 0.0,
    };
    let comm = SelfComm::new();
    let op = match CsrOperator::new(a, args.threads) {
        Ok(op) => op,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    match args.solver.as_str() {
        "cg" => Cg::new(a.nrows()).solve(&op, m, &comm, b, None, &stop),
        "gmres" => Gmres::new(a.nrows(), args.restart).solve(&op, m, &comm, b, None, &stop),
        _ => Bicgstab::new(a.nrows()).solve(&op, m, &comm, b, None, &stop),
    }
}

fn main() {
    let args = Args::parse();
    let dir = args
        .matrices
        .clone()
        .unwrap_or_else(matrices::shared::default_dir);
    println!(
        "{} to relative true residual {:e}, b = A*ones, SpMV threads {}, cap {} steps{}",
        args.solver,
        args.rtol,
        args.threads,
        args.max_steps,
        if args.solver == "gmres" {
            format!(", restart {}", args.restart)
        } else {
            String::new()
        }
    );
    println!();
    println!("| matrix | n | nnz | preconditioner | iterations | restarts | setup (ms) | solve (ms) | true rel. residual | precond nnz | perturbed pivots |");
    println!("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    for name in &args.only {
        let (label, a) = match load(&dir, name, args.grid) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("error: {e}");
                std::process::exit(1);
            }
        };
        let mut b = vec![0.0; a.nrows()];
        a.mul_vec(&vec![1.0; a.ncols()], &mut b);
        for k in &args.kinds {
            let kind: PrecondKind = match k.parse() {
                Ok(kind) => kind,
                Err(e) => {
                    eprintln!("error: {e}");
                    std::process::exit(2);
                }
            };
            let t0 = Instant::now();
            let built = build_with_info(&kind, &a, 0.0);
            let setup = t0.elapsed().as_secs_f64() * 1e3;
            let (m, info) = match built {
                Ok(v) => v,
                Err(e) => {
                    println!(
                        "| {label} | {} | {} | {k} | setup failed: {e} | | | | | | |",
                        a.nrows(),
                        a.nnz()
                    );
                    continue;
                }
            };
            let t1 = Instant::now();
            let res = solve(&args, &a, m.as_ref(), &b);
            let time = t1.elapsed().as_secs_f64() * 1e3;
            let iters = if res.converged {
                res.steps.to_string()
            } else {
                format!("> {} (not conv.)", res.steps)
            };
            println!(
                "| {label} | {} | {} | {k} | {iters} | {} | {setup:.1} | {time:.1} | {:.2e} | {} | {} |",
                a.nrows(),
                a.nnz(),
                res.restarts,
                res.true_residual_norm / res.b_norm,
                info.nnz,
                info.perturbed_pivots
            );
        }
    }
}
