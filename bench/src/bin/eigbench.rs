//! Eigensolvers side by side in one run: `jdmg` against PRIMME (`primme.eigsh`, its
//! default method, and `primme-b4` with maxBlockSize=4), SLEPc (`slepc-lobpcg`, its
//! default LOBPCG, which preconditions with block Jacobi/ILU(0); `slepc-lobpcg-nopc`;
//! `slepc-ks`, Krylov-Schur) and SciPy `eigsh` (ARPACK), the `nev` smallest
//! eigenpairs of the same MatrixMarket files at the same tolerance.
//!
//! Usage: `cargo run --release -p bench --bin eigbench -- [--jdmg target/release/jdmg]
//! [--python $JDMG_PYTHON] [--repeat 3] [--threads 1,2]
//! [--problems lap3d:64,stencil27:64x64x65,bcsstk13,crystm01,lap3d:40] [--out DIR]`.
//!
//! * Problems are generator specs (`matrices::generate`, written once into a temporary
//!   directory, with their analytic spectra as the exact values) or names of files in
//!   `$JDMG_MATRICES` (default `../shared/matrices` beside the repository), checked
//!   against `reference/NAME.eig` there (20 smallest and 20 largest eigenvalues).
//! * Every measurement is a fresh process: `jdmg solve FILE --nev --tol --json
//!   --threads T` (defaults otherwise, `--precond` only where `--jdmg-precond` says so;
//!   `--jdmg-variant NAME=ARGS` adds configurations run under their own NAME),
//!   and `bench/scripts/eig_compare.py --solver NAME` (see its docstring) under `OMP_NUM_THREADS`
//!   = `OPENBLAS_NUM_THREADS` = T. Runs are interleaved (for each problem and
//!   repetition: each thread count, then each solver) so that background load hits all
//!   solvers alike. Wall time is the solve only (not reading the file), as each solver
//!   reports it.
//! * Same test for all: ‖Ax − λx‖ ≤ tol·‖A‖. jdmg (`--conv norm`) and PRIMME estimate
//!   ‖A‖ themselves. ARPACK's test is ‖r‖ ≤ tol_a·|θ| per Ritz value; it gets
//!   tol_a = tol·‖A‖ / max(max|λ_i|, ε^(2/3)) over the wanted exact λ_i, with ‖A‖ the
//!   exact largest |eigenvalue| (ARPACK's dsconv floors |θ| at ε^(2/3)), so every pair
//!   meets the common bound (the largest wanted one exactly). Residuals in the table are true residuals ‖Ax − λx‖ of the returned
//!   vectors, recomputed by each solver's harness.
//! * A set is "wrong" when fewer than `nev` pairs come back or, sorted, the i-th value
//!   is nearest to a known eigenvalue other than the i-th exact one (values within 1e-9
//!   relative count as one multiple eigenvalue): missed copies of a multiple
//!   eigenvalue, or a value nearer another eigenvalue. The table also gives the largest
//!   |λ_i − λ*_i| (sorted against sorted).
//! * A run whose solver claims convergence but whose true residuals exceed 10·tol·‖A‖
//!   is counted as "false convergence". `--arpack-tol NAME=X` replaces the mapped ARPACK
//!   tolerance where it is vacuous (bcsstk13: tol·‖A‖/λ₄ = 53 lets ARPACK stop after 21
//!   matvecs at θ ≈ 1.5e10; it gets tol 1e-8 there, its plain relative test).
//! * `--max-matvecs` caps every solver (PRIMME `maxMatvecs`, ARPACK `maxiter` in
//!   restarts, jdmg `--max-matvecs`) so that hopeless runs end; `--timeout` kills a run.
//!
//! Output: a markdown table of medians on stdout (matvecs, wall, wall / PRIMME's wall
//! for the same problem and thread count, worst eigenvalue error, worst residual), and
//! `DIR/eigbench.json` with every run and the summary (rewritten after each run).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bench::median;
use clap::Parser;
use matrices::generate::{exact_eigenvalues, generate, GenSpec};
use serde_json::{json, Value};

#[derive(Parser, Debug)]
#[command(about = "jdmg vs PRIMME vs ARPACK, side by side (issue 6)")]
struct Args {
    /// The jdmg binary.
    #[arg(long, default_value = "target/release/jdmg")]
    jdmg: PathBuf,
    /// Python with numpy, scipy (and primme); default $JDMG_PYTHON or python3.
    #[arg(long)]
    python: Option<String>,
    /// The Python driver.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/eig_compare.py"))]
    script: PathBuf,
    /// Runs per (problem, solver, threads); medians are reported.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Thread counts.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    threads: Vec<usize>,
    /// Generator specs or matrix names (files NAME.mtx in the matrices directory).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "lap3d:64,stencil27:64x64x65,bcsstk13,crystm01,lap3d:40"
    )]
    problems: Vec<String>,
    /// Solvers, in the order they run within a round.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "jdmg,primme,primme-b4,slepc-lobpcg,slepc-ks,arpack"
    )]
    solvers: Vec<String>,
    /// Eigenpairs wanted (smallest).
    #[arg(long, default_value_t = 4)]
    nev: usize,
    /// Tolerance: ‖Ax − λx‖ ≤ tol·‖A‖ for every solver.
    #[arg(long, default_value_t = 1e-8)]
    tol: f64,
    /// Matvec cap for every solver (0: none).
    #[arg(long, default_value_t = 0)]
    max_matvecs: u64,
    /// Per-problem matvec caps, NAME=N (override --max-matvecs).
    #[arg(long, value_delimiter = ',', default_value = "bcsstk13=60000")]
    cap: Vec<String>,
    /// ARPACK tolerance per problem, NAME=X, instead of the mapped one (bcsstk13: the
    /// mapped tol·‖A‖/λ₄ = 53 is vacuous, so ARPACK gets its plain relative test).
    #[arg(long, value_delimiter = ',', default_value = "bcsstk13=1e-8")]
    arpack_tol: Vec<String>,
    /// jdmg preconditioner per problem, NAME=PREC (e.g. bcsstk13=jacobi).
    #[arg(long, value_delimiter = ',', default_value = "bcsstk13=jacobi")]
    jdmg_precond: Vec<String>,
    /// Extra jdmg configurations, NAME=ARGS (e.g. `jdqmr=--inner-solver qmrs --maxits
    /// 100`, repeatable); list NAME in --solvers to run `jdmg solve ... ARGS` under it.
    /// --jdmg-precond, where given for a problem, replaces a variant's own `--precond`.
    #[arg(long)]
    jdmg_variant: Vec<String>,
    /// Directory of the real matrices (default $JDMG_MATRICES or ../shared/matrices).
    #[arg(long)]
    matrices: Option<PathBuf>,
    /// Output directory for eigbench.json and eigbench.md.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Seconds before a run is killed.
    #[arg(long, default_value_t = 900)]
    timeout: u64,
}

/// One problem: the file every solver reads and the values to check against.
struct Problem {
    name: String,
    file: PathBuf,
    n: usize,
    /// The `nev` smallest exact (or reference) eigenvalues, ascending.
    exact: Vec<f64>,
    /// Known eigenvalues, ascending (the smallest few hundred of an analytic spectrum,
    /// or a reference file's 20 smallest and 20 largest), for the set check.
    known: Vec<f64>,
    /// ‖A‖₂ (largest |eigenvalue|).
    anorm: f64,
}

fn lookup<'a>(pairs: &'a [String], name: &str) -> Option<&'a str> {
    pairs.iter().find_map(|p| {
        let (k, v) = p.split_once('=')?;
        (k == name).then_some(v)
    })
}

fn default_matrices() -> PathBuf {
    matrices::shared::default_dir()
}

/// Reads `reference/NAME.eig`: comment lines, then the 20 smallest and 20 largest
/// eigenvalues, ascending.
fn reference(path: &Path) -> Result<Vec<f64>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            l.parse::<f64>()
                .map_err(|e| format!("{}: {l:?}: {e}", path.display()))
        })
        .collect()
}

fn prepare(name: &str, nev: usize, mats: &Path, tmp: &Path) -> Result<Problem, String> {
    if name.contains(':') {
        let spec: GenSpec = name.parse().map_err(|e| format!("{name}: {e}"))?;
        let a = generate(&spec).map_err(|e| format!("{name}: {e}"))?;
        let ev = exact_eigenvalues(&spec).ok_or(format!("{name}: no exact spectrum"))?;
        let file = tmp.join(format!("{}.mtx", name.replace([':', ','], "_")));
        matrices::mm::write_coordinate_file(&file, &a, true)
            .map_err(|e| format!("{}: {e}", file.display()))?;
        let anorm = ev.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        Ok(Problem {
            name: name.to_string(),
            file,
            n: a.nrows(),
            exact: ev[..nev].to_vec(),
            known: ev[..ev.len().min(nev + 300)].to_vec(),
            anorm,
        })
    } else {
        let file = mats.join(format!("{name}.mtx"));
        let refv = reference(&mats.join("reference").join(format!("{name}.eig")))?;
        if refv.len() < nev.max(1) {
            return Err(format!("{name}: reference has {} values", refv.len()));
        }
        let header = std::fs::read_to_string(&file)
            .map_err(|e| format!("{}: {e}", file.display()))?
            .lines()
            .find(|l| !l.starts_with('%'))
            .and_then(|l| l.split_whitespace().next().and_then(|t| t.parse().ok()))
            .ok_or(format!("{}: no size line", file.display()))?;
        let anorm = refv.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        Ok(Problem {
            name: name.to_string(),
            file,
            n: header,
            exact: refv[..nev].to_vec(),
            known: refv,
            anorm,
        })
    }
}

/// Runs `cmd`, returns (stdout, stderr, exit code, seconds); kills it after `timeout`.
fn run(mut cmd: Command, timeout: Duration) -> (String, String, Option<i32>, f64) {
    let t0 = Instant::now();
    let mut child = match cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn() {
        Ok(c) => c,
        Err(e) => return (String::new(), format!("spawn: {e}"), None, 0.0),
    };
    let mut out = child.stdout.take().expect("piped stdout");
    let mut err = child.stderr.take().expect("piped stderr");
    let ho = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let he = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let mut killed = false;
    let code = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st.code(),
            Ok(None) if t0.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                killed = true;
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => break None,
        }
    };
    let secs = t0.elapsed().as_secs_f64();
    let so = ho.join().unwrap_or_default();
    let mut se = he.join().unwrap_or_default();
    if killed {
        se.push_str(&format!("\nkilled after {timeout:?}"));
    }
    (so, se, code, secs)
}

/// One measurement, normalized: solver, threads, status, eigenvalues, residual norms,
/// converged, matvecs, wall_seconds (for jdmg the solve plus its preconditioner's
/// setup), plus the raw output.
#[allow(clippy::too_many_arguments)]
fn measure(
    args: &Args,
    python: &str,
    p: &Problem,
    solver: &str,
    threads: usize,
    cap: u64,
    rep: usize,
) -> Value {
    let t = threads.to_string();
    let mut cmd;
    let variant = lookup(&args.jdmg_variant, solver);
    let is_jdmg = solver == "jdmg" || variant.is_some();
    if is_jdmg {
        cmd = Command::new(&args.jdmg);
        cmd.arg("solve")
            .arg(&p.file)
            .args(["--nev", &args.nev.to_string()])
            .args(["--tol", &args.tol.to_string()])
            .args(["--threads", &t])
            .arg("--json");
        let mut extra: Vec<&str> = variant
            .map(|v| v.split_whitespace().collect())
            .unwrap_or_default();
        if let Some(pc) = lookup(&args.jdmg_precond, &p.name) {
            // The per-problem preconditioner wins over a variant's own.
            if let Some(i) = extra.iter().position(|&a| a == "--precond") {
                extra.drain(i..(i + 2).min(extra.len()));
            }
            cmd.args(["--precond", pc]);
        }
        cmd.args(&extra);
        if cap > 0 {
            cmd.args(["--max-matvecs", &cap.to_string()]);
        }
    } else {
        cmd = Command::new(python);
        let wanted_max = p.exact.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        // ARPACK floors |θ| at ε^(2/3) in its test (dsconv).
        let arpack_tol = lookup(&args.arpack_tol, &p.name)
            .and_then(|v| v.parse().ok())
            .unwrap_or(args.tol * p.anorm / wanted_max.max(f64::EPSILON.powf(2.0 / 3.0)));
        cmd.arg(&args.script)
            .args(["--solver", solver])
            .arg("--matrix")
            .arg(&p.file)
            .args(["--nev", &args.nev.to_string()])
            .args(["--tol", &args.tol.to_string()])
            .args(["--arpack-tol", &format!("{arpack_tol:e}")]);
        if cap > 0 {
            cmd.args(["--max-matvecs", &cap.to_string()]);
        }
    }
    for v in [
        "OMP_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "MKL_NUM_THREADS",
        "RAYON_NUM_THREADS",
    ] {
        cmd.env(v, &t);
    }
    let (so, se, code, secs) = run(cmd, Duration::from_secs(args.timeout));
    let parsed: Option<Value> = so
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<Value>(l.trim()).ok());
    let mut rec = json!({
        "problem": p.name, "n": p.n, "solver": solver, "threads": threads, "rep": rep,
        "exit_code": code, "process_seconds": secs,
    });
    let Some(o) = parsed else {
        rec["status"] = json!("error");
        rec["error"] = json!(se.trim().chars().take(400).collect::<String>());
        return rec;
    };
    let f64s = |k: &str| -> Vec<f64> {
        o[k].as_array()
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default()
    };
    let status = match (is_jdmg, o["status"].as_str()) {
        (true, _) => {
            if o["converged"].as_bool() == Some(true) {
                "ok"
            } else {
                "not converged"
            }
        }
        (false, Some(s)) => s,
        _ => "error",
    };
    rec["status"] = json!(status);
    if is_jdmg {
        rec["jdmg_stats"] = o["stats"].clone();
    }
    for k in [
        "converged",
        "matvecs",
        "wall_seconds",
        "version",
        "error",
        "solver_tol",
    ] {
        if !o[k].is_null() {
            rec[k] = o[k].clone();
        }
    }
    // jdmg's solve time with its preconditioner's setup (the factorization and
    // the stability tests of `--precond auto`), as SLEPc's EPSSolve and PRIMME's
    // call include theirs.
    if let (true, Some(w), Some(setup)) = (
        is_jdmg,
        rec["wall_seconds"].as_f64(),
        o["stats"]["setup_seconds"].as_f64(),
    ) {
        rec["wall_seconds"] = json!(w + setup);
    }
    let ev = f64s("eigenvalues");
    let res = f64s("residual_norms");
    let mut sorted = ev.clone();
    sorted.sort_by(f64::total_cmp);
    let max_err = sorted
        .iter()
        .zip(&p.exact)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f64, f64::max);
    let right = right_set(&sorted, p);
    let max_res = res.iter().fold(0.0f64, |m, &r| m.max(r));
    rec["eigenvalues"] = json!(ev);
    rec["residual_norms"] = json!(res);
    rec["max_abs_error"] = json!(max_err);
    rec["right_set"] = json!(right && !sorted.is_empty());
    rec["max_residual_over_anorm"] = json!(max_res / p.anorm);
    // A claim of convergence is checked against the true residuals (10x slack for the
    // solvers' own residual estimates).
    if status == "ok" && (res.len() < p.exact.len() || max_res > 10.0 * args.tol * p.anorm) {
        rec["status"] = json!("false convergence");
    }
    rec
}

/// Cluster index of every known eigenvalue: consecutive values within 1e-9 relative
/// (plus 100 ε‖A‖, the references' own error) are one (multiple) eigenvalue.
fn clusters(p: &Problem) -> Vec<usize> {
    let mut c = Vec::with_capacity(p.known.len());
    let mut id = 0;
    for (i, &v) in p.known.iter().enumerate() {
        if i > 0 {
            let u = p.known[i - 1];
            if (v - u).abs() > 1e-9 * u.abs().max(v.abs()) + 100.0 * f64::EPSILON * p.anorm {
                id += 1;
            }
        }
        c.push(id);
    }
    c
}

/// The returned set is right when `nev` values came back and, sorted, the i-th is
/// nearest to a known eigenvalue of the same (multiple) eigenvalue as the i-th
/// exact one: a missed copy of a multiple eigenvalue, or a value nearer another
/// eigenvalue, makes the set wrong.
fn right_set(sorted: &[f64], p: &Problem) -> bool {
    if sorted.len() != p.exact.len() || p.known.is_empty() {
        return false;
    }
    let c = clusters(p);
    let nearest = |x: f64| -> usize {
        let mut best = 0;
        for (j, &v) in p.known.iter().enumerate() {
            if (v - x).abs() < (p.known[best] - x).abs() {
                best = j;
            }
        }
        best
    };
    sorted
        .iter()
        .enumerate()
        .all(|(i, &x)| c[nearest(x)] == c[i])
}

fn fmt_sig(x: f64) -> String {
    if x.is_nan() {
        "–".into()
    } else if x == 0.0 {
        "0".into()
    } else {
        format!("{x:.1e}")
    }
}

fn main() {
    let args = Args::parse();
    let python = args
        .python
        .clone()
        .or_else(|| std::env::var("JDMG_PYTHON").ok())
        .unwrap_or_else(|| "python3".into());
    let mats = args.matrices.clone().unwrap_or_else(default_matrices);
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("jdmg-eigbench"));
    std::fs::create_dir_all(&out).expect("create --out directory");
    let tmp = std::env::temp_dir().join(format!("jdmg-eigbench-mtx-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("create temporary directory");

    let mut problems = Vec::new();
    for name in &args.problems {
        let t = Instant::now();
        match prepare(name, args.nev, &mats, &tmp) {
            Ok(p) => {
                eprintln!(
                    "{name}: n = {}, ‖A‖ = {:.6e}, exact {:?} ({:.1} s)",
                    p.n,
                    p.anorm,
                    p.exact,
                    t.elapsed().as_secs_f64()
                );
                problems.push(p);
            }
            Err(e) => eprintln!("skipping {name}: {e}"),
        }
    }

    let command: Vec<String> = std::env::args().collect();
    let mut runs: Vec<Value> = Vec::new();
    let t_all = Instant::now();
    for p in &problems {
        let cap = lookup(&args.cap, &p.name)
            .and_then(|v| v.parse().ok())
            .unwrap_or(args.max_matvecs);
        for rep in 0..args.repeat {
            for &th in &args.threads {
                for s in &args.solvers {
                    let r = measure(&args, &python, p, s, th, cap, rep);
                    eprintln!(
                        "[{:7.1} s] {} {s} t{th} rep {rep}: {} matvecs {} wall {} right {} {}",
                        t_all.elapsed().as_secs_f64(),
                        p.name,
                        r["status"],
                        r["matvecs"],
                        r["wall_seconds"],
                        r["right_set"],
                        r["eigenvalues"]
                    );
                    runs.push(r);
                    write_json(&out, &command, &args, &problems, &runs, None);
                }
            }
        }
    }

    let (table, summary) = summarize(&args, &problems, &runs);
    let _ = std::fs::remove_dir_all(&tmp);
    println!("{table}");
    write_json(&out, &command, &args, &problems, &runs, Some(summary));
    let _ = std::fs::write(out.join("eigbench.md"), &table);
    eprintln!(
        "total {:.0} s; wrote {}",
        t_all.elapsed().as_secs_f64(),
        out.join("eigbench.json").display()
    );
}

fn write_json(
    out: &Path,
    command: &[String],
    args: &Args,
    problems: &[Problem],
    runs: &[Value],
    summary: Option<Value>,
) {
    let probs: Vec<Value> = problems
        .iter()
        .map(|p| json!({"name": p.name, "n": p.n, "file": p.file, "exact": p.exact, "anorm": p.anorm}))
        .collect();
    let obj = json!({
        "command": command, "nev": args.nev, "tol": args.tol, "repeat": args.repeat,
        "threads": args.threads, "problems": probs, "runs": runs, "summary": summary,
    });
    let _ = std::fs::write(
        out.join("eigbench.json"),
        serde_json::to_string_pretty(&obj).unwrap_or_default(),
    );
}

/// Medians per (problem, solver, threads) and the markdown table.
fn summarize(args: &Args, problems: &[Problem], runs: &[Value]) -> (String, Value) {
    let mut groups: BTreeMap<(usize, usize, usize), Vec<&Value>> = BTreeMap::new();
    for r in runs {
        let pi = problems
            .iter()
            .position(|p| r["problem"] == p.name)
            .unwrap_or(0);
        let si = args
            .solvers
            .iter()
            .position(|s| r["solver"] == s.as_str())
            .unwrap_or(0);
        let th = r["threads"].as_u64().unwrap_or(0) as usize;
        groups.entry((pi, th, si)).or_default().push(r);
    }
    let med_wall = |g: &[&Value]| median(g.iter().filter_map(|r| r["wall_seconds"].as_f64()));
    let mut t = String::from(
        "| problem | n | solver | threads | matvecs | median wall (s) | wall / PRIMME | max abs(λ − λ*) | max ‖r‖/‖A‖ | converged |\n|---|---:|---|---:|---:|---:|---:|---|---:|---|\n",
    );
    let mut rows = Vec::new();
    for (&(pi, th, si), g) in &groups {
        let p = &problems[pi];
        let solver = &args.solvers[si];
        let nruns = g.len();
        let status: Vec<&str> = g
            .iter()
            .map(|r| r["status"].as_str().unwrap_or("error"))
            .collect();
        if status
            .iter()
            .all(|s| *s == "not installed" || *s == "error")
        {
            let why = g[0]["error"].as_str().unwrap_or(status[0]).to_string();
            t.push_str(&format!(
                "| {} | {} | {solver} | {th} | – | – | – | {} | – | – |\n",
                p.name, p.n, status[0]
            ));
            rows.push(json!({"problem": p.name, "solver": solver, "threads": th, "status": status[0], "error": why}));
            continue;
        }
        let mv = median(g.iter().filter_map(|r| r["matvecs"].as_f64()));
        let wall = med_wall(g);
        let primme = args
            .solvers
            .iter()
            .position(|s| s == "primme")
            .and_then(|ps| groups.get(&(pi, th, ps)))
            .map(|pg| med_wall(pg));
        let ratio = match primme {
            Some(w) if w > 0.0 && wall.is_finite() => format!("{:.2}", wall / w),
            _ => "–".into(),
        };
        let err = g
            .iter()
            .filter_map(|r| r["max_abs_error"].as_f64())
            .fold(0.0f64, f64::max);
        let wrong = g.iter().filter(|r| r["right_set"] != json!(true)).count();
        let returned = g
            .iter()
            .any(|r| r["eigenvalues"].as_array().is_some_and(|a| !a.is_empty()));
        let err_s = match wrong {
            _ if !returned => "none returned".to_string(),
            0 => fmt_sig(err),
            w if w == nruns => format!("wrong set ({})", fmt_sig(err)),
            w => format!("wrong set in {w}/{nruns} ({})", fmt_sig(err)),
        };
        let res = if returned {
            g.iter()
                .filter_map(|r| r["max_residual_over_anorm"].as_f64())
                .fold(0.0f64, f64::max)
        } else {
            f64::NAN
        };
        let conv = status.iter().filter(|s| **s == "ok").count();
        let fake = status.iter().filter(|s| **s == "false convergence").count();
        let conv_s = if fake > 0 {
            format!("false convergence in {fake}/{nruns}")
        } else if conv == nruns {
            "yes".to_string()
        } else if conv == 0 {
            let capped = lookup(&args.cap, &p.name)
                .map(|c| format!(" (cap {c})"))
                .unwrap_or_default();
            format!("no{capped}")
        } else {
            format!("{conv}/{nruns}")
        };
        t.push_str(&format!(
            "| {} | {} | {solver} | {th} | {:.0} | {:.3} | {ratio} | {err_s} | {} | {conv_s} |\n",
            p.name,
            p.n,
            mv,
            wall,
            fmt_sig(res)
        ));
        rows.push(json!({
            "problem": p.name, "n": p.n, "solver": solver, "threads": th, "runs": nruns,
            "median_matvecs": mv, "median_wall_seconds": wall, "wall_over_primme": primme.map(|w| wall / w),
            "max_abs_error": err, "wrong_set_runs": wrong, "max_residual_over_anorm": res,
            "converged_runs": conv,
        }));
    }
    (t, Value::Array(rows))
}
