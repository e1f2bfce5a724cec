//! Reference timings for `jdmg dense` (issue #11, bench/README.md "Dense kernels"):
//! faer's own LU / QR / GEMM in one process, on the same seeded random matrix, so
//! that `jdmg dense … --ranks 1` can be compared with it side by side.
//!
//! ```text
//! densebench --op lu --n 4000 --threads 1
//! ```
//! prints one JSON line: `op`, `n`, `threads`, `seconds` (factorization only),
//! `gflops`, `backward_error` (with `--check`).

use std::time::Instant;

use clap::{Parser, ValueEnum};
use lblib::dense::check;
use lblib::dense::{par_for, DenseOp, Source};

#[derive(Clone, Copy, ValueEnum)]
enum Op {
    Lu,
    Qr,
    Gemm,
}

#[derive(Parser)]
#[command(about = "faer's LU / QR / GEMM in one process (reference for jdmg dense)")]
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
    let cli = Cli::parse();
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
            let c = lblib::dense::gemm::gemm_slab(&a, &b, n, n, par);
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
