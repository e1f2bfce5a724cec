//! Blocked preconditioner applies against SpMV, per vector.
//!
//! For each matrix and each `k` in 1, 2, 4, 8 it times, round-robin on one thread:
//!
//! * `spmv`: one `CsrOperator::apply_block` of `k` vectors;
//! * `ilu0 block`: one ILU(0) `apply_block` of `k` vectors (the blocked substitution;
//!   the symmetric `L D Lᵀ` storage, `U` only, for these symmetric matrices);
//! * `ilu0 general`: the same with the general storage of `L` and `U`
//!   (`Ilu0::new_general`, twice the factor memory);
//!
//! and prints the median milliseconds **per vector** of each and the ratios of the two
//! ILU(0) figures to the SpMV one, then the same from the best (minimum) times: on a
//! shared machine single runs are sometimes 3x slower (another process on the core), and
//! the minimum is the stabler figure.
//!
//! A second table times the inner solver with ILU(0), per column and step (10 steps from
//! a zero start, `b` = pseudo-random, k = 4): `BlockBicgstab` with all columns active,
//! with one column marked done (the other three are then moved into the first block
//! slots), and 4 separate `Bicgstab` solvers stepped one after the other.
//!
//! Usage: `cargo run --release -p bench --bin precbench -- [--reps 21]
//! [--matrix lap3d:40 --matrix stencil27:48]`.

use std::hint::black_box;
use std::time::Instant;

use bench::median;
use clap::Parser;
use lblib::SelfComm;
use matrices::generate::{generate, GenSpec};
use matrices::CsrMatrix;
use precond::krylov::{Bicgstab, BlockBicgstab};
use precond::preconditioners::{Ilu0, PivotParams};
use precond::{CsrOperator, Operator, Preconditioner};

#[derive(Parser)]
struct Args {
    /// Timed rounds per case (after one warm-up round).
    #[arg(long, default_value_t = 21)]
    reps: usize,
    /// Generated matrices (`matrices::generate` syntax).
    #[arg(long = "matrix", default_values_t = ["lap3d:40".to_string(), "stencil27:48".to_string()])]
    matrices: Vec<String>,
    /// Block sizes.
    #[arg(long = "k", default_values_t = [1usize, 2, 4, 8])]
    ks: Vec<usize>,
}

/// The solver table: ms per column and step of the three variants.
fn solver_steps(name: &str, a: &CsrMatrix, reps: usize) {
    const K: usize = 4;
    const STEPS: usize = 10;
    let n = a.nrows();
    let op = CsrOperator::new(a, 1).expect("operator");
    let m = Ilu0::new(a, 0.0, &PivotParams::default()).expect("ILU(0)");
    let comm = SelfComm::new();
    let b: Vec<f64> = (0..n * K)
        .map(|i| 1.0 + ((i * 7919) % 1000) as f64 / 1000.0)
        .collect();
    let mut block = BlockBicgstab::new(n, K);
    let mut singles: Vec<Bicgstab> = (0..K).map(|_| Bicgstab::new(n)).collect();
    let mut times = [Vec::new(), Vec::new(), Vec::new()];
    for rep in 0..=reps {
        block.start(&op, &comm, &b, None, K);
        let s = Instant::now();
        for _ in 0..STEPS {
            black_box(block.step(&op, &m, &comm));
        }
        let t0 = s.elapsed().as_secs_f64() / (STEPS * K) as f64;
        block.start(&op, &comm, &b, None, K);
        block.set_done(1);
        let s = Instant::now();
        for _ in 0..STEPS {
            black_box(block.step(&op, &m, &comm));
        }
        let t1 = s.elapsed().as_secs_f64() / (STEPS * (K - 1)) as f64;
        for (c, sv) in singles.iter_mut().enumerate() {
            sv.start(&op, &comm, &b[c * n..(c + 1) * n], None);
        }
        let s = Instant::now();
        for _ in 0..STEPS {
            for sv in singles.iter_mut() {
                let _ = black_box(sv.step(&op, &m, &comm));
            }
        }
        let t2 = s.elapsed().as_secs_f64() / (STEPS * K) as f64;
        if rep > 0 {
            for (v, t) in times.iter_mut().zip([t0, t1, t2]) {
                v.push(t);
            }
        }
    }
    let best = |v: &Vec<f64>| v.iter().copied().fold(f64::INFINITY, f64::min);
    for (stat, t) in [
        ("median", times.clone().map(median)),
        ("min", [best(&times[0]), best(&times[1]), best(&times[2])]),
    ] {
        let [all, three, single] = t.map(|x| x * 1e3);
        println!(
            "| {name} | {stat} | {all:.3} | {three:.3} | {single:.3} | {:.2} |",
            single / all
        );
    }
}

fn main() {
    let args = Args::parse();
    println!(
        "| matrix | rows | k | stat | spmv ms/vec | ilu0 block ms/vec | ilu0 general ms/vec | block/spmv | general/spmv |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for name in &args.matrices {
        let spec: GenSpec = name.parse().expect("matrix spec");
        let a = generate(&spec).expect("generate");
        let n = a.nrows();
        let op = CsrOperator::new(&a, 1).expect("operator");
        let m = Ilu0::new(&a, 0.0, &PivotParams::default()).expect("ILU(0)");
        let mg = Ilu0::new_general(&a, 0.0, &PivotParams::default()).expect("ILU(0)");
        for &k in &args.ks {
            let x: Vec<f64> = (0..n * k)
                .map(|i| ((i * 7919) % 1000) as f64 / 1000.0 - 0.5)
                .collect();
            let mut y = vec![0.0; n * k];
            let mut times = [Vec::new(), Vec::new(), Vec::new()];
            for rep in 0..=args.reps {
                let mut t = [0.0; 3];
                let s = Instant::now();
                op.apply_block(&x, &mut y, k);
                black_box(&y);
                t[0] = s.elapsed().as_secs_f64();
                let s = Instant::now();
                m.apply_block(&x, &mut y, k);
                black_box(&y);
                t[1] = s.elapsed().as_secs_f64();
                let s = Instant::now();
                mg.apply_block(&x, &mut y, k);
                black_box(&y);
                t[2] = s.elapsed().as_secs_f64();
                if rep > 0 {
                    for (v, ti) in times.iter_mut().zip(t) {
                        v.push(ti);
                    }
                }
            }
            let best = |v: &Vec<f64>| v.iter().copied().fold(f64::INFINITY, f64::min);
            for (stat, [sp, bl, single]) in [
                ("median", times.clone().map(median)),
                ("min", [best(&times[0]), best(&times[1]), best(&times[2])]),
            ] {
                let [sp, bl, single] = [sp, bl, single].map(|t| t * 1e3 / k as f64);
                println!(
                    "| {name} | {n} | {k} | {stat} | {sp:.3} | {bl:.3} | {single:.3} | {:.2} | {:.2} |",
                    bl / sp,
                    single / sp
                );
            }
        }
    }
    println!();
    println!(
        "| matrix | stat | block, 4 active ms/col-step | block, 3 of 4 active | 4 × Bicgstab | speed-up |"
    );
    println!("|---|---|---|---|---|---|");
    for name in &args.matrices {
        let spec: GenSpec = name.parse().expect("matrix spec");
        let a = generate(&spec).expect("generate");
        solver_steps(name, &a, args.reps);
    }
}
