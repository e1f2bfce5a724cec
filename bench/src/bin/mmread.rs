//! MatrixMarket read benchmark: our reader vs `fast_matrix_market` and
//! `scipy.io.mmread` on the same generated file.
//!
//! Generates a 27-point stencil matrix (`stencil27:S`, `S = round(cbrt(rows))`,
//! about 27 nonzeros per row, written `general` so every nonzero is a line),
//! writes it once to `--out-dir` (reused if present), times
//! `matrices::mm::read_matrix_market` (median of `--repeat` runs, file in page
//! cache, after one untimed warm-up read), then runs `bench/scripts/mmread_compare.py` with `$JDMG_PYTHON`
//! (default `python3`) and prints one markdown table.
//!
//! ```text
//! cargo run --release -p bench --bin mmread -- --rows 1000000 --repeat 3
//! ```

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use bench::median;
use clap::{Parser, ValueEnum};
use matrices::generate::{generate, GenSpec};
use matrices::mm::{read_matrix_market, write_coordinate_file};

/// How values are spelled in the generated file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Values {
    /// Stencil values perturbed to 16-17 significant digits (`-1.0003417...`).
    Full,
    /// The stencil's own short values (`26.0`, `-1.0`).
    Short,
}

/// Command-line arguments.
#[derive(Debug, Parser)]
#[command(about = "Time MatrixMarket readers on a generated ~27M-nonzero file")]
struct Args {
    /// Approximate rows; the grid side is round(cbrt(rows)).
    #[arg(long, default_value_t = 1_000_000)]
    rows: usize,
    /// Directory for the generated file.
    #[arg(long, default_value = "/tmp")]
    out_dir: PathBuf,
    /// Timed reads per reader (the median is reported).
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Value spelling in the generated file.
    #[arg(long, value_enum, default_value_t = Values::Full)]
    values: Values,
    /// Rewrite the file even if it exists.
    #[arg(long)]
    force: bool,
    /// Skip the Python readers.
    #[arg(long)]
    no_python: bool,
}

/// One row of the result table.
struct Row {
    reader: String,
    median_s: Option<f64>,
    /// Median CPU seconds (all threads) per read.
    cpu_s: Option<f64>,
    times: Vec<f64>,
    nnz: Option<u64>,
    note: String,
}

/// Deterministic multiplier in [1 - 1e-3, 1 + 1e-3) for entry `k`.
fn perturb(k: u64) -> f64 {
    let mut z = k
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(0x6A09_E667_F3BC_C908);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    1.0 + 2e-3 * ((z >> 11) as f64 / (1u64 << 53) as f64 - 0.5)
}

fn ensure_file(args: &Args) -> Result<(PathBuf, usize), String> {
    let side = ((args.rows as f64).cbrt().round() as usize).max(2);
    let spec: GenSpec = format!("stencil27:{side}")
        .parse()
        .map_err(|e| format!("{e}"))?;
    let tag = match args.values {
        Values::Full => "full",
        Values::Short => "short",
    };
    std::fs::create_dir_all(&args.out_dir)
        .map_err(|e| format!("{}: {e}", args.out_dir.display()))?;
    let path = args
        .out_dir
        .join(format!("jdmg_mmread_stencil27_{side}_{tag}.mtx"));
    if path.exists() && !args.force {
        eprintln!("reusing {} (--force to rewrite)", path.display());
        return Ok((path, side));
    }
    let t = Instant::now();
    let mut a = generate(&spec).map_err(|e| format!("{e}"))?;
    if args.values == Values::Full {
        for (k, v) in a.data_mut().iter_mut().enumerate() {
            *v *= perturb(k as u64);
        }
    }
    eprintln!(
        "generated {spec}: {} rows, {} nnz in {:.2} s",
        a.nrows(),
        a.nnz(),
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    write_coordinate_file(&path, &a, false).map_err(|e| format!("{}: {e}", path.display()))?;
    eprintln!(
        "wrote {} in {:.2} s",
        path.display(),
        t.elapsed().as_secs_f64()
    );
    Ok((path, side))
}

/// CPU time (user + system, all threads) of this process in seconds, from
/// `/proc/self/stat` (Linux; clock ticks of 1/100 s), `None` elsewhere.
fn process_cpu_s() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields of the whole line.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

fn time_ours(path: &Path, repeat: usize) -> Result<Row, String> {
    let mut times = Vec::new();
    let mut cpu = Vec::new();
    // Untimed warm-up, as for the Python readers.
    let mut nnz = read_matrix_market(path)
        .map_err(|e| format!("{e}"))?
        .matrix
        .nnz();
    for _ in 0..repeat.max(1) {
        let c = process_cpu_s();
        let t = Instant::now();
        let m = read_matrix_market(path).map_err(|e| format!("{e}"))?;
        times.push(t.elapsed().as_secs_f64());
        if let (Some(c0), Some(c1)) = (c, process_cpu_s()) {
            cpu.push(c1 - c0);
        }
        nnz = m.matrix.nnz();
    }
    Ok(Row {
        reader: "jdmg matrices::mm::read_matrix_market (CSR)".into(),
        median_s: Some(median(&times)),
        cpu_s: (!cpu.is_empty()).then(|| median(&cpu)),
        times,
        nnz: Some(nnz as u64),
        note: format!("{} rayon threads", rayon::current_num_threads()),
    })
}

fn time_python(path: &Path, repeat: usize) -> Vec<Row> {
    let python = std::env::var("JDMG_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/mmread_compare.py");
    let out = Command::new(&python)
        .arg(script)
        .arg(path)
        .arg("--repeat")
        .arg(repeat.to_string())
        .output();
    let out = match out {
        Ok(o) if o.status.success() => o,
        Ok(o) => {
            return vec![Row {
                reader: format!("{python} {script}"),
                median_s: None,
                cpu_s: None,
                times: vec![],
                nnz: None,
                note: format!("failed: {}", String::from_utf8_lossy(&o.stderr).trim()),
            }]
        }
        Err(e) => {
            return vec![Row {
                reader: python,
                median_s: None,
                cpu_s: None,
                times: vec![],
                nnz: None,
                note: format!("cannot run: {e}"),
            }]
        }
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| Row {
            reader: v["reader"].as_str().unwrap_or("?").to_string(),
            median_s: v["median_s"].as_f64(),
            cpu_s: v["cpu_s"].as_f64(),
            times: v["times"]
                .as_array()
                .map(|a| a.iter().filter_map(|x| x.as_f64()).collect())
                .unwrap_or_default(),
            nnz: v["nnz"].as_u64(),
            note: v["note"].as_str().unwrap_or("").to_string(),
        })
        .collect()
}

fn main() {
    let args = Args::parse();
    let (path, side) = match ensure_file(&args) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    // The header is in the first lines; read 4 KiB, not the whole file.
    let mut head = Vec::new();
    let header = std::fs::File::open(&path)
        .and_then(|f| f.take(4096).read_to_end(&mut head))
        .ok()
        .and_then(|_| matrices::mm::read_header_bytes(&head).ok());
    let entries = header.map_or(0, |h| h.entries);
    let mut rows = Vec::new();
    match time_ours(&path, args.repeat) {
        Ok(r) => rows.push(r),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
    if !args.no_python {
        rows.extend(time_python(&path, args.repeat));
    }
    let mb = bytes as f64 / 1e6;
    println!(
        "\nFile: {} ({:.1} MB, stencil27:{side}, {} entries, general), median of {} reads\n",
        path.display(),
        mb,
        entries,
        args.repeat
    );
    println!("| reader | median s | MB/s | Mnnz/s | time / ours | CPU s/read | runs (s) | note |");
    println!("|---|---:|---:|---:|---:|---:|---|---|");
    let ours = rows[0].median_s.unwrap_or(f64::NAN);
    let ours_nnz = rows[0].nnz;
    for r in &rows {
        let runs: Vec<String> = r.times.iter().map(|t| format!("{t:.3}")).collect();
        // Python readers return COO with the file's entries; ours the CSR nnz.
        let mismatch = r
            .nnz
            .is_some_and(|n| n != entries as u64 && Some(n) != ours_nnz);
        match r.median_s {
            Some(t) => println!(
                "| {} | {:.3} | {:.0} | {:.1} | {:.2} | {} | {} | {}{} |",
                r.reader,
                t,
                mb / t,
                entries as f64 / 1e6 / t,
                t / ours,
                r.cpu_s.map_or("–".to_string(), |c| format!("{c:.2}")),
                runs.join(", "),
                r.note,
                if mismatch { " (nnz mismatch!)" } else { "" }
            ),
            None => println!("| {} | – | – | – | – | – | – | {} |", r.reader, r.note),
        }
    }
}
