//! Tall-skinny products of the outer iteration (issue 20), timed round-robin in
//! one run: `VᵀT` (n×m by n×p, [`jdmg::tall_skinny::gemm_tn`]), `V·Y` (n×m by m×p,
//! [`jdmg::tall_skinny::gemm_nn`]) and the fused Ritz-residual pass
//! ([`jdmg::tall_skinny::ritz_residuals`]), each in GB/s of the tall operands read
//! (and written), beside a STREAM-like read of the same bytes (a sum with eight
//! independent lanes, so that it is bound by memory and not by its add chain) as
//! the bandwidth bound.
//!
//! Usage: `cargo run --release -p bench --bin tsbench -- [--n 262144] [--m 24]
//! [--p 4] [--reps 30] [--threads 1] [--huge]`. Prints a markdown table of medians.

use std::hint::black_box;
use std::time::Instant;

use bench::median;
use clap::Parser;
use jdmg::tall_skinny::{gemm_nn, gemm_tn, ritz_residuals};

#[derive(Parser)]
struct Args {
    /// Rows of the tall operands.
    #[arg(long, default_value_t = 262_144)]
    n: usize,
    /// Columns of the basis V.
    #[arg(long, default_value_t = 24)]
    m: usize,
    /// Columns of the block T (and of Y).
    #[arg(long, default_value_t = 4)]
    p: usize,
    /// Timed rounds (one call of each kernel per round).
    #[arg(long, default_value_t = 30)]
    reps: usize,
    /// Threads of the products.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Allocate the tall operands on transparent huge pages (advised before
    /// first touch, as the solver's basis is).
    #[arg(long)]
    huge: bool,
    /// Evict the operands from the caches before each call (a write of 128 MB),
    /// as in a solve, where other work runs between two products.
    #[arg(long)]
    cold: bool,
}

fn data(len: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        })
        .collect()
}

fn main() {
    let a = Args::parse();
    let (n, m, p) = (a.n, a.m, a.p);
    let place = |d: Vec<f64>| {
        if a.huge {
            let mut h = precond::pages::huge_page_vec(d.len());
            h.copy_from_slice(&d);
            h
        } else {
            d
        }
    };
    let v = place(data(n * m, 1));
    let w = place(data(n * m, 2));
    let t = place(data(n * p, 3));
    let y = data(m * p, 4);
    let theta = data(p, 5);
    let mut out = vec![0.0; m * p];
    let mut x = place(vec![0.0; n * p]);
    let mut r = place(vec![0.0; n * p]);
    let mut norms = vec![0.0; p];
    let names = [
        "read V (sum)",
        "VᵀT (gemm_tn)",
        "V·Y (gemm_nn)",
        "X, R, ‖R‖ (ritz_residuals)",
    ];
    // Bytes moved per call: reads of the tall operands plus writes of n×p outputs.
    let f = 8.0 * n as f64;
    let bytes = [
        f * m as f64,
        f * (m + p) as f64,
        f * (m + p) as f64,
        f * (2 * m + 2 * p) as f64,
    ];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    let mut evict = if a.cold {
        vec![0.0f64; 16 << 20]
    } else {
        Vec::new()
    };
    for rep in 0..=a.reps {
        let mut clock = |k: usize, f: &mut dyn FnMut()| {
            if a.cold {
                evict.iter_mut().for_each(|e| *e += 1.0);
                black_box(&evict);
            }
            let t0 = Instant::now();
            f();
            if rep > 0 {
                times[k].push(t0.elapsed().as_secs_f64());
            }
        };
        clock(0, &mut || {
            black_box(v.chunks_exact(8).fold([0.0f64; 8], |mut s, c| {
                for (s, c) in s.iter_mut().zip(c) {
                    *s += c;
                }
                s
            }));
        });
        clock(1, &mut || gemm_tn(&mut out, &v, n, m, &t, p, a.threads));
        clock(2, &mut || gemm_nn(&mut x, &v, n, m, &y, p, a.threads));
        clock(3, &mut || {
            ritz_residuals(
                &mut x, &mut r, &mut norms, &v, &w, n, m, &y, &theta, a.threads,
            )
        });
        black_box((&out, &x, &r, &norms));
    }
    println!(
        "n = {n}, m = {m}, p = {p}, threads = {}, {} rounds",
        a.threads, a.reps
    );
    println!();
    println!("| kernel | median ms | GB/s |");
    println!("|---|---:|---:|");
    for (k, name) in names.iter().enumerate() {
        let med = median(&mut times[k]);
        println!(
            "| {name} | {:.3} | {:.1} |",
            med * 1e3,
            bytes[k] / med / 1e9
        );
    }
}
