//! SpMV throughput, side by side in one run (issue 4, "Acceptance"):
//!
//! * STREAM triad bandwidth (own implementation, arrays far larger than the caches)
//!   on 1 and 2 threads — the machine's attainable memory bandwidth;
//! * `precond::CsrOperator` SpMV on 1 and 2 threads, in GB/s of matrix traffic
//!   (values 8 B + u32 column indices 4 B per entry, indptr 8 B per row, x and y 8 B per
//!   row each);
//! * faer 0.24 sparse × dense (`SparseRowMatRef<u32, f64>`; faer's sparse×dense kernel
//!   is sequential whatever `Par` says);
//! * `scipy.sparse` CSR matvec through `bench/scripts/spmv_compare.py` (run with
//!   `$JDMG_PYTHON`, default `python3`) on the same arrays, written raw to `/tmp`;
//! * block SpMV with k = 4 against 4 single SpMVs.
//!
//! Usage: `cargo run --release -p bench --bin spmv -- [--grid 64] [--reps 30]
//! [--no-python]`. Prints a markdown table of medians on stdout.
//! All Rust kernels are timed round-robin (one call of each per round) so that on a
//! shared machine they see the same background load; scipy runs in its own process
//! right after. The matrix arrays and all vectors are backed by transparent huge pages
//! (`precond::advise_huge_pages`, done by `CsrOperator::new`, and
//! `precond::huge_page_vec`); numpy does the same for scipy's arrays.
//!
//! The matrix is the 27-point stencil on a `grid³` mesh (26 on the diagonal, -1 per
//! neighbour; `grid = 64` gives 262,144 rows, close to the papers' 268k-row FE matrix),
//! built here directly in CSR form.

use std::hint::black_box;
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use bench::median;
use matrices::CsrMatrix;
use precond::{advise_huge_pages, huge_page_vec, CsrOperator, Operator};
use rayon::prelude::*;

/// 27-point stencil on an `m³` grid, x fastest, built row by row (sorted columns).
fn stencil27(m: usize) -> CsrMatrix {
    let n = m * m * m;
    let mut indptr = Vec::with_capacity(n + 1);
    let mut indices = Vec::with_capacity(27 * n);
    let mut data = Vec::with_capacity(27 * n);
    indptr.push(0);
    for z in 0..m {
        for y in 0..m {
            for x in 0..m {
                for dz in [-1i64, 0, 1] {
                    for dy in [-1i64, 0, 1] {
                        for dx in [-1i64, 0, 1] {
                            let (a, b, c) = (x as i64 + dx, y as i64 + dy, z as i64 + dz);
                            let m = m as i64;
                            if a < 0 || b < 0 || c < 0 || a >= m || b >= m || c >= m {
                                continue;
                            }
                            indices.push((a + m * (b + m * c)) as u32);
                            data.push(if (dx, dy, dz) == (0, 0, 0) {
                                26.0
                            } else {
                                -1.0
                            });
                        }
                    }
                }
                indptr.push(indices.len());
            }
        }
    }
    CsrMatrix::new(n, n, indptr, indices, data).expect("stencil27 arrays are valid")
}

/// One timed kernel of the round-robin.
struct Case<'a> {
    kernel: &'static str,
    threads: usize,
    /// Bytes moved per call (for GB/s).
    bytes: f64,
    run: Box<dyn FnMut() + 'a>,
    times: Vec<f64>,
}

impl<'a> Case<'a> {
    fn new(kernel: &'static str, threads: usize, bytes: f64, run: impl FnMut() + 'a) -> Self {
        Self {
            kernel,
            threads,
            bytes,
            run: Box::new(run),
            times: Vec::new(),
        }
    }
}

/// Results of one case.
struct Timed {
    kernel: &'static str,
    threads: usize,
    bytes: f64,
    times: Vec<f64>,
}

impl From<Case<'_>> for Timed {
    fn from(c: Case<'_>) -> Self {
        Self {
            kernel: c.kernel,
            threads: c.threads,
            bytes: c.bytes,
            times: c.times,
        }
    }
}

/// Times all cases round-robin (`reps` rounds after one warm-up round), so that on a
/// shared machine every kernel sees the same background load.
fn round_robin(cases: &mut [Case<'_>], reps: usize) {
    for c in cases.iter_mut() {
        (c.run)();
    }
    for _ in 0..reps {
        for c in cases.iter_mut() {
            let s = Instant::now();
            (c.run)();
            c.times.push(s.elapsed().as_secs_f64());
        }
    }
}

/// Sum of `b` on a pool of `threads` threads (8 bytes read per element).
fn read_sum(pool: &rayon::ThreadPool, b: &[f64]) -> f64 {
    let chunk = b.len().div_ceil(pool.current_num_threads());
    pool.install(|| {
        b.par_chunks(chunk)
            .map(|c| {
                let mut s = [0.0f64; 4];
                for q in c.chunks_exact(4) {
                    for j in 0..4 {
                        s[j] += q[j];
                    }
                }
                s.iter().sum::<f64>()
            })
            .sum()
    })
}

/// STREAM triad `a = b + s c` on a pool of `threads` threads, one call (24 bytes per
/// element moved, the STREAM convention: write-allocate traffic not counted).
fn triad(pool: &rayon::ThreadPool, a: &mut [f64], b: &[f64], c: &[f64]) {
    let chunk = a.len().div_ceil(pool.current_num_threads());
    pool.install(|| {
        a.par_chunks_mut(chunk)
            .zip(b.par_chunks(chunk))
            .zip(c.par_chunks(chunk))
            .for_each(|((a, b), c)| {
                for ((ai, &bi), &ci) in a.iter_mut().zip(b).zip(c) {
                    *ai = bi + 3.0 * ci;
                }
            })
    });
    black_box(&a);
}

/// Bytes moved by one SpMV with one vector: values, u32 indices, indptr, x and y.
fn spmv_bytes(a: &CsrMatrix) -> f64 {
    (a.nnz() * (8 + 4) + (a.nrows() + 1) * 8 + a.ncols() * 8 + a.nrows() * 8) as f64
}

/// Bytes moved by one block SpMV with `k` vectors (matrix once, x and y k times).
fn spmv_block_bytes(a: &CsrMatrix, k: usize) -> f64 {
    (a.nnz() * (8 + 4) + (a.nrows() + 1) * 8 + k * (a.ncols() + a.nrows()) * 8) as f64
}

/// Runs the scipy script; returns (median s, best s, Σy).
fn python_compare(a: &CsrMatrix, x: &[f64], reps: usize) -> Result<(f64, f64, f64), String> {
    let dir = std::env::temp_dir().join(format!("jdmg_spmv_{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let write = |name: &str, bytes: Vec<u8>| {
        std::fs::write(dir.join(name), bytes).map_err(|e| e.to_string())
    };
    write(
        "indptr.i64",
        a.indptr()
            .iter()
            .flat_map(|&v| (v as i64).to_le_bytes())
            .collect(),
    )?;
    write(
        "indices.i32",
        a.indices()
            .iter()
            .flat_map(|&v| (v as i32).to_le_bytes())
            .collect(),
    )?;
    write(
        "data.f64",
        a.data().iter().flat_map(|v| v.to_le_bytes()).collect(),
    )?;
    write("x.f64", x.iter().flat_map(|v| v.to_le_bytes()).collect())?;
    let python = std::env::var("JDMG_PYTHON").unwrap_or_else(|_| "python3".into());
    let script: PathBuf = [env!("CARGO_MANIFEST_DIR"), "scripts", "spmv_compare.py"]
        .iter()
        .collect();
    let out = Command::new(&python)
        .arg(&script)
        .arg(&dir)
        .arg(a.nrows().to_string())
        .arg(reps.to_string())
        .output()
        .map_err(|e| format!("cannot run {python}: {e}"))?;
    let _ = std::fs::remove_dir_all(&dir);
    if !out.status.success() {
        return Err(format!(
            "{python} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("bad script output: {e}"))?;
    let t = v["median_s"].as_f64().ok_or("no median_s")?;
    let best = v["best_s"].as_f64().ok_or("no best_s")?;
    let sum = v["sum_y"].as_f64().ok_or("no sum_y")?;
    Ok((t, best, sum))
}

fn main() {
    let mut grid = 64usize;
    let mut reps = 30usize;
    let mut python = true;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--grid" => grid = args.next().and_then(|v| v.parse().ok()).expect("--grid N"),
            "--reps" => reps = args.next().and_then(|v| v.parse().ok()).expect("--reps N"),
            "--no-python" => python = false,
            other => {
                eprintln!(
                    "unknown argument {other}; usage: spmv [--grid N] [--reps R] [--no-python]"
                );
                std::process::exit(2);
            }
        }
    }
    let t0 = Instant::now();
    let a = stencil27(grid);
    let n = a.nrows();
    eprintln!(
        "stencil27:{grid}: n = {n}, nnz = {}, built in {:.2} s",
        a.nnz(),
        t0.elapsed().as_secs_f64()
    );

    // STREAM arrays: 3 x 24M doubles (576 MB) >> 32 MB L3.
    let slen = 24 << 20;
    let pools: Vec<rayon::ThreadPool> = [1, 2]
        .iter()
        .map(|&t| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(t)
                .build()
                .expect("pool")
        })
        .collect();
    // STREAM arrays always on huge pages: the reference is the best attainable bandwidth.
    let mut sa = huge_page_vec(slen);
    let mut sb = huge_page_vec(slen);
    let mut sc = huge_page_vec(slen);
    sb.fill(1.0);
    sc.fill(2.0);
    pools[1].install(|| sa.par_chunks_mut(slen / 2).for_each(|s| s.fill(0.5)));

    // Huge pages for the matrix (shared by jdmg and faer) and every vector, as numpy
    // does for scipy's arrays; see `precond::advise_huge_pages`.
    // (CsrOperator::new advises the matrix anyway; calling it first makes faer's
    // timing independent of the order of construction.)
    let advised = advise_huge_pages(&a);
    let vec = huge_page_vec;
    let mut x = vec(n);
    x.iter_mut()
        .enumerate()
        .for_each(|(i, v)| *v = 1.0 + 0.1 * (i % 7) as f64);
    let mut x4 = vec(4 * n);
    x4.iter_mut()
        .enumerate()
        .for_each(|(i, v)| *v = 1.0 + 0.1 * (i % 11) as f64);
    let ops: Vec<CsrOperator<'_>> = [1, 2]
        .iter()
        .map(|&t| CsrOperator::new(&a, t).expect("operator"))
        .collect();
    let bytes = spmv_bytes(&a);
    let bytes4 = spmv_block_bytes(&a, 4);
    let rp: Vec<u32> = a.indptr().iter().map(|&p| p as u32).collect();
    let sym = faer::sparse::SymbolicSparseRowMatRef::new_checked(n, n, &rp, None, a.indices());
    let fa = faer::sparse::SparseRowMatRef::new(sym, a.data());

    let mut y1 = [vec(n), vec(n)];
    let mut yb = [vec(4 * n), vec(4 * n)];
    let mut ys = [vec(4 * n), vec(4 * n)];
    let mut yf = vec(n);
    let timed: Vec<Timed>;
    {
        let [y1a, y1b] = &mut y1;
        let [yba, ybb] = &mut yb;
        let [ysa, ysb] = &mut ys;
        let (sa, sb, sc, x, x4) = (&mut sa, &sb, &sc, &x, &x4);
        let p = &pools;
        let (o1, o2) = (&ops[0], &ops[1]);
        let yf = &mut yf;
        let singles = |op: &CsrOperator<'_>, y: &mut [f64]| {
            for j in 0..4 {
                op.apply(
                    black_box(&x4[j * n..(j + 1) * n]),
                    &mut y[j * n..(j + 1) * n],
                );
            }
        };
        let sa_ptr = std::cell::RefCell::new(sa);
        let mut cases = vec![
            Case::new("STREAM triad", 1, 24.0 * slen as f64, || {
                triad(&p[0], &mut sa_ptr.borrow_mut(), sb, sc)
            }),
            Case::new("STREAM triad", 2, 24.0 * slen as f64, || {
                triad(&p[1], &mut sa_ptr.borrow_mut(), sb, sc)
            }),
            Case::new("jdmg CsrOperator SpMV", 1, bytes, || {
                o1.apply(black_box(x), y1a)
            }),
            Case::new("jdmg CsrOperator SpMV", 2, bytes, || {
                o2.apply(black_box(x), y1b)
            }),
            Case::new("jdmg block SpMV k=4 (one call)", 1, bytes4, || {
                o1.apply_block(black_box(x4), yba, 4)
            }),
            Case::new("jdmg block SpMV k=4 (one call)", 2, bytes4, || {
                o2.apply_block(black_box(x4), ybb, 4)
            }),
            Case::new("jdmg 4 single SpMVs", 1, 4.0 * bytes, move || {
                singles(o1, ysa)
            }),
            Case::new("jdmg 4 single SpMVs", 2, 4.0 * bytes, move || {
                singles(o2, ysb)
            }),
            Case::new(
                "faer 0.24 sparse×dense (sequential kernel)",
                1,
                bytes,
                || {
                    let xm = faer::MatRef::from_column_major_slice(black_box(&x[..]), n, 1);
                    let ym = faer::MatMut::from_column_major_slice_mut(&mut yf[..], n, 1);
                    faer::sparse::linalg::matmul::sparse_dense_matmul(
                        ym,
                        faer::Accum::Replace,
                        fa,
                        xm,
                        1.0,
                        faer::Par::Seq,
                    );
                },
            ),
            // Context: SpMV mostly reads, and reads are cheaper than triad's
            // read-read-write(+allocate) mix on this machine.
            Case::new("read-only sum (context)", 1, 8.0 * slen as f64, || {
                black_box(read_sum(&p[0], sb));
            }),
            Case::new("read-only sum (context)", 2, 8.0 * slen as f64, || {
                black_box(read_sum(&p[1], sb));
            }),
        ];
        round_robin(&mut cases, reps);
        timed = cases.into_iter().map(Timed::from).collect();
    }
    {
        print_table(
            grid,
            &a,
            reps,
            &timed,
            python.then(|| python_compare(&a, &x, reps)),
            &y1,
            &yb,
            &ys,
            &yf,
        );
        println!(
            "- matrix arrays advised as huge pages: {:.1} of {:.1} MB (precond::advise_huge_pages); vectors from precond::huge_page_vec",
            advised as f64 / 1e6,
            a.memory_bytes() as f64 / 1e6
        );
    }
}

/// Prints the markdown table, the goal checks and the cross-checks.
#[allow(clippy::too_many_arguments)]
fn print_table(
    grid: usize,
    a: &CsrMatrix,
    reps: usize,
    cases: &[Timed],
    scipy: Option<Result<(f64, f64, f64), String>>,
    y1: &[Vec<f64>; 2],
    yb: &[Vec<f64>; 2],
    ys: &[Vec<f64>; 2],
    yf: &[f64],
) {
    let n = a.nrows();
    let bytes = spmv_bytes(a);
    let med = |i: usize| median(cases[i].times.clone());
    let stream = [med(0), med(1)].map(|t| 24.0 * (24 << 20) as f64 / t / 1e9);
    println!(
        "SpMV on stencil27:{grid} (n = {n}, nnz = {}, {:.1} MB of traffic per SpMV), medians of {reps} round-robin runs\n",
        a.nnz(),
        bytes / 1e6
    );
    println!(
        "| kernel | threads | median ms | best ms | GB/s (median) | % of STREAM, same threads |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    let row = |kernel: &str, threads: usize, t: f64, best: f64, bytes: f64| {
        let gbs = bytes / t / 1e9;
        let pct = 100.0 * gbs / stream[threads - 1];
        println!(
            "| {kernel} | {threads} | {:.2} | {:.2} | {gbs:.2} | {pct:.0}% |",
            t * 1e3,
            best * 1e3
        );
    };
    for c in cases {
        let best = c.times.iter().copied().fold(f64::INFINITY, f64::min);
        row(c.kernel, c.threads, median(c.times.clone()), best, c.bytes);
    }
    let sum_ours: f64 = y1[0].iter().sum();
    let mut notes = Vec::new();
    let mut scipy_t = None;
    match scipy {
        Some(Ok((t, best, s))) => {
            scipy_t = Some((t, best));
            row("scipy.sparse CSR matvec", 1, t, best, bytes);
            notes.push(format!(
                "scipy Σy = {s:.10e}, jdmg Σy = {sum_ours:.10e} (rel. diff {:.1e})",
                (s - sum_ours).abs() / sum_ours.abs().max(1e-300)
            ));
        }
        Some(Err(e)) => notes.push(format!("scipy comparison skipped: {e}")),
        None => notes.push("scipy comparison disabled (--no-python)".into()),
    }
    println!();
    let best = |i: usize| cases[i].times.iter().copied().fold(f64::INFINITY, f64::min);
    for (ti, bw) in stream.iter().enumerate() {
        println!(
            "- {} thread(s): SpMV at {:.0}% of STREAM triad; block k=4 throughput = {:.2}x that of 4 single SpMVs (medians; {:.2}x on best times)",
            ti + 1,
            100.0 * bytes / med(2 + ti) / 1e9 / bw,
            med(6 + ti) / med(4 + ti),
            best(6 + ti) / best(4 + ti)
        );
    }
    println!(
        "- jdmg (2 threads) vs faer: {:.2}x faster on medians, {:.2}x on best times",
        med(8) / med(3),
        best(8) / best(3)
    );
    if let Some((t, tb)) = scipy_t {
        println!(
            "- jdmg (2 threads) vs scipy: {:.2}x faster on medians, {:.2}x on best times",
            t / med(3),
            tb / best(3)
        );
    }
    // Cross-checks: every variant computed the same products.
    let rel = |u: f64, v: f64| (u - v).abs() / v.abs().max(1e-300);
    let sf: f64 = yf.iter().sum();
    notes.push(format!(
        "faer Σy rel. diff to jdmg {:.1e}",
        rel(sf, sum_ours)
    ));
    let d1 = rel(y1[1].iter().sum(), sum_ours);
    let db = yb
        .iter()
        .chain(ys.iter())
        .map(|v| v.iter().sum::<f64>())
        .collect::<Vec<_>>();
    notes.push(format!(
        "2-thread Σy rel. diff {d1:.1e}; block vs singles Σy rel. diff {:.1e}",
        rel(db[0], db[2]).max(rel(db[1], db[3]))
    ));
    for nte in notes {
        println!("- {nte}");
    }
}
