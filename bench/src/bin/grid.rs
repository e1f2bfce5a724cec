//! Grid experiments of issue 5 (McCombs et al. §4 Table 1, §7 Table 3) under `mpirun` on
//! one machine: every run is a fresh `mpirun --oversubscribe --bind-to none` of
//! `jdmg solve --mpi ... --json`; the harness collects the JSON printed by rank 0 and
//! writes `DIR/<experiment>.json` (every run and the medians), `DIR/<experiment>.md`
//! (a markdown table of medians) and `DIR/<experiment>.svg` (bars of time and
//! %imbalance per configuration). Logs of every run go to `DIR/logs/`.
//!
//! Per-phase group rates (hetero and changing): jdmg's JSON of a balanced multigrain
//! run has `multigrain.group_rate_history` (row p−1: every solve group's rate, inner
//! steps per second, measured in correction phase p) and `multigrain.time_limits`
//! (T of phases 2, 3, ...). Each run record keeps them; for every configuration that
//! has them, the converged run of median time is the representative one: its rates
//! are drawn in `DIR/<experiment>_rates.svg` (one panel per configuration: a line per
//! group, T on a right axis), summarized in the markdown (first, middle and last
//! phase per group; with a competitor, the medians before and after it and each
//! group's share of the steps) and stored under `summary[i].rates` in the JSON.
//!
//! Usage (build first: `CARGO_TARGET_DIR=target-exp cargo build --release -p jdmg-cli -p
//! lblib --features jdmg-cli/mpi,lblib/mpi --bins --examples`):
//!
//! ```text
//! CARGO_TARGET_DIR=target-exp cargo run --release -p bench --bin grid -- \
//!     --experiment hetero|competing|changing [--jdmg target-exp/release/jdmg] [--np 4]
//!     [--problem lap3d:20] [--repeat 3] [--out bench/out] [--maxits 100] [--slow 4]
//! ```
//!
//! The documented runs (2 cores; results in the issue 5 report):
//!
//! ```text
//! target-exp/release/grid --experiment hetero --problem lap3d:40 --repeat 3
//! target-exp/release/grid --experiment competing --problem lap3d:30 --scale 4 --repeat 3
//! target-exp/release/grid --experiment changing --np 2 --problem lap3d:40 --repeat 3
//! ```
//!
//! As root, the harness sets `OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1`
//! for mpirun itself.
//!
//! * **hetero** (Table 3): two solve groups (first and second half of the ranks); the
//!   second group is `--slow` times slower (`--slowdown`, lblib::Slowed: sleeps
//!   `slow − 1` times each compute segment, so the cores are really left idle).
//!   Configurations: fine grain without slowdown (reference), fine grain, multigrain
//!   (`--balance none`) and balanced multigrain (`--balance fastest`), all with the same
//!   slowdown. Rank r is pinned (taskset) to CPU r mod #CPUs, so that on two cores
//!   each core runs one fast and one slow rank (`--pin none` to let the kernel place
//!   them, `--pin 0,0,1,1` for another layout).
//!   Acceptance (issue 5): balanced multigrain %imbalance ≤ 10 and time ≤ 0.6 × the
//!   unbalanced multigrain time, same eigenvalues to tolerance.
//! * **competing** (Table 1): three JDcg jobs (`--block NP --groups equal`, one rank
//!   per solve group) run at the same time on the machine's cores, and the paper's
//!   node overlap (jobs on nodes 1-4, 3-6, 4,7-9: node 3 runs two jobs, node 4 three) is
//!   emulated by `--slowdown`: job 1 = 1,1,2,3; job 2 = 2,3,1,1; job 3 = 3,1,1,1. One
//!   round without balancing (all three jobs `--balance none`), one with
//!   (`--balance fastest`); per job: time, matvecs, %imbalance.
//! * **changing**: two solve groups, ranks pinned by `--pin` (default: first half on
//!   CPU 0, second half on CPU 1); for each of `--balance none|fastest`, a quiet run,
//!   then a run where `--competitors` busy processes pinned to `--competitor-cpu`
//!   start halfway through (at half of the quiet run's time of the same repetition).
//!   The table shows the total inner steps per group and the last measured group
//!   rates; the rate plot and table show every phase's rates of the balanced runs.
//!   jdmg's JSON has no per-phase times, so the phase where the competitor started is
//!   bracketed from timing (shaded in the plot; see `RateRun::new`: an early-biased
//!   estimate and a bound), and the first sustained rate drop (< 70 % of the group's
//!   earlier median) is marked as the data's own evidence.
//!
//! Eigenvalues are checked against the analytic spectrum of the generated problem:
//! a run is "same" when every eigenvalue is within `tol·‖A‖` of the exact one.
//! Competitors run under `timeout` (so they end even if the harness is killed) and are
//! killed by the harness when their run ends.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bench::median;
use clap::{Parser, ValueEnum};
use jdmg::SolveReport;
use matrices::generate::{exact_eigenvalues, GenSpec};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde_json::{json, Value};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Experiment {
    Hetero,
    Competing,
    Changing,
    Contention,
    Slowlink,
}

impl Experiment {
    fn name(self) -> &'static str {
        match self {
            Experiment::Hetero => "hetero",
            Experiment::Competing => "competing",
            Experiment::Changing => "changing",
            Experiment::Contention => "contention",
            Experiment::Slowlink => "slowlink",
        }
    }
}

#[derive(Parser, Debug)]
#[command(about = "mpirun grid experiments of issue 5 (McCombs et al. Tables 1 and 3)")]
struct Args {
    /// Which experiment.
    #[arg(long, value_enum)]
    experiment: Experiment,
    /// The jdmg binary (built with --features jdmg-cli/mpi).
    #[arg(long, default_value = "target-exp/release/jdmg")]
    jdmg: PathBuf,
    /// MPI ranks per job.
    #[arg(long, default_value_t = 4)]
    np: usize,
    /// Generator spec of the matrix.
    #[arg(long, default_value = "lap3d:20")]
    problem: String,
    /// Repetitions (interleaved); medians are reported.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Output directory.
    #[arg(long, default_value = "bench/out")]
    out: PathBuf,
    /// Eigenpairs wanted (smallest).
    #[arg(long, default_value_t = 2)]
    nev: usize,
    /// Block size (= number of solve groups) of hetero and changing; competing uses NP.
    #[arg(long, default_value_t = 2)]
    block: usize,
    /// Convergence tolerance (‖r‖ ≤ tol·‖A‖).
    #[arg(long, default_value_t = 1e-8)]
    tol: f64,
    /// Inner BiCGSTAB step cap passed to jdmg; default: jdmg's own (150 in solve
    /// groups, each phase running McCombs et al. §4's optimal m).
    #[arg(long)]
    maxits: Option<usize>,
    /// Inner stopping rule passed to jdmg (fixed | adaptive); default: jdmg's own.
    #[arg(long)]
    inner: Option<String>,
    /// Niceness of the runs and of the busy loops (`nice -n`): -10 shields them from
    /// other work on a shared machine, so that the only contention is the one the
    /// experiment makes (needs /proc/sys/kernel/sched_autogroup_enabled = 0, else
    /// niceness only ranks processes within one session). 0: no nice.
    #[arg(long, default_value_t = -10, allow_hyphen_values = true)]
    nice: i32,
    /// contention and competing --real: busy loops pinned to CPU 1 during every run
    /// (contention default: NP, i.e. 2 loops beside 1 rank, 4 beside 2 ranks).
    #[arg(long)]
    busy: Option<usize>,
    /// competing: real contention instead of --slowdown: three 2-rank JDcg jobs
    /// pinned by --job-pins overlap on the cores.
    #[arg(long)]
    real: bool,
    /// competing --real: each job's CPUs, jobs separated by ';' (default
    /// "0,1;1,1;0,1": CPU 1 runs four ranks, CPU 0 two, as node 4 of the paper runs
    /// three jobs).
    #[arg(long, default_value = "0,1;1,1;0,1")]
    job_pins: String,
    /// slowlink: latencies (seconds per collective crossing the link) to sweep.
    #[arg(long, value_delimiter = ',', default_value = "0,0.0005,0.002,0.005")]
    latencies: Vec<f64>,
    /// hetero: slowdown factor of the second solve group.
    #[arg(long, default_value_t = 4.0)]
    slow: f64,
    /// Per-rank CPU for taskset, e.g. 0,1,0,1, or "none". Default: hetero and
    /// competing rank r on CPU r mod #CPUs (each core gets fast and slow ranks);
    /// changing: first half of the ranks on CPU 0, second half on CPU 1.
    #[arg(long, value_delimiter = ',')]
    pin: Vec<String>,
    /// competing: every job's slowdown factors are multiplied by this (the paper's
    /// 1/2/3 node sharing × scale), so that 12 ranks fit on few cores.
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// changing: number of busy competitor processes.
    #[arg(long, default_value_t = 2)]
    competitors: usize,
    /// changing: CPU the competitors are pinned to.
    #[arg(long, default_value = "1")]
    competitor_cpu: String,
    /// Extra jdmg solve arguments, whitespace-separated (e.g. "--precond jacobi").
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    extra: String,
    /// Seconds before a run is killed.
    #[arg(long, default_value_t = 900)]
    timeout: u64,
    /// The mpirun command.
    #[arg(long, default_value = "mpirun")]
    mpirun: String,
}

/// One mpirun job.
#[derive(Clone, Debug)]
struct Job {
    /// Configuration label (table row).
    label: String,
    /// jdmg solve arguments after the common ones.
    args: Vec<String>,
    /// Per-rank taskset CPU lists (empty: no pinning).
    pin: Vec<String>,
}

impl Job {
    /// The job `label` running `jdmg solve` with `args`, pinned to `pin`.
    fn new(label: &str, args: Vec<String>, pin: &[String]) -> Self {
        Job {
            label: label.into(),
            args,
            pin: pin.to_vec(),
        }
    }
}

/// A running job.
struct Running {
    child: Child,
    start: Instant,
    out: PathBuf,
    err: PathBuf,
    cmdline: String,
}

/// Busy processes; killed (process group) on drop.
struct Competitors(Vec<Child>);

/// `program` under `nice -n k` (k ≠ 0).
fn niced(k: i32, program: impl AsRef<std::ffi::OsStr>) -> Command {
    if k == 0 {
        Command::new(program)
    } else {
        let mut c = Command::new("nice");
        c.args(["-n", &k.to_string()]).arg(program);
        c
    }
}

impl Competitors {
    fn start(n: usize, cpu: &str, max_secs: u64, nice: i32) -> Competitors {
        let mut v = Vec::new();
        for _ in 0..n {
            let mut c = niced(nice, "timeout");
            c.arg(max_secs.to_string());
            if !cpu.is_empty() {
                c.args(["taskset", "-c", cpu]);
            }
            c.args(["sh", "-c", "while :; do :; done"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0);
            match c.spawn() {
                Ok(ch) => v.push(ch),
                Err(e) => eprintln!("grid: cannot start competitor: {e}"),
            }
        }
        Competitors(v)
    }
}

impl Drop for Competitors {
    fn drop(&mut self) {
        for c in &mut self.0 {
            kill_group(c.id());
            let _ = c.wait();
        }
    }
}

/// SIGKILL to the process group `pgid` (the harness starts every child as the leader
/// of its own group).
fn kill_group(pgid: u32) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pgid}")])
        .stderr(Stdio::null())
        .status();
}

fn fmt_list(v: &[f64], prec: usize) -> String {
    let s: Vec<String> = v.iter().map(|x| format!("{x:.prec$}")).collect();
    s.join(" / ")
}

struct Ctx {
    args: Args,
    exact: Vec<f64>,
    anorm: f64,
    logs: PathBuf,
    counter: usize,
}

impl Ctx {
    fn common(&self) -> Vec<String> {
        let a = &self.args;
        let mut v: Vec<String> = vec![
            "solve".into(),
            "--mpi".into(),
            "--generate".into(),
            a.problem.clone(),
            "--nev".into(),
            a.nev.to_string(),
            "--tol".into(),
            a.tol.to_string(),
            "--threads".into(),
            "1".into(),
            "--json".into(),
        ];
        if let Some(m) = a.maxits {
            v.extend(["--maxits".into(), m.to_string()]);
        }
        if let Some(i) = &a.inner {
            v.extend(["--inner".into(), i.clone()]);
        }
        v.extend(a.extra.split_whitespace().map(String::from));
        v
    }

    /// Starts `job` under mpirun (own process group), stdout/stderr to log files.
    fn launch(&mut self, job: &Job, tag: &str) -> std::io::Result<Running> {
        self.launch_np(job, tag, self.args.np)
    }

    /// [`Ctx::launch`] on `np` ranks.
    fn launch_np(&mut self, job: &Job, tag: &str, np: usize) -> std::io::Result<Running> {
        self.counter += 1;
        let stem = format!(
            "{}_{:03}_{}_{}",
            self.args.experiment.name(),
            self.counter,
            tag,
            job.label.replace(|c: char| !c.is_ascii_alphanumeric(), "-")
        );
        let out = self.logs.join(format!("{stem}.out"));
        let err = self.logs.join(format!("{stem}.err"));
        let mut solve = self.common();
        solve.extend(job.args.iter().cloned());
        let jdmg = self.args.jdmg.to_string_lossy().to_string();
        let mut argv: Vec<String> =
            vec!["--oversubscribe".into(), "--bind-to".into(), "none".into()];
        if job.pin.is_empty() {
            argv.extend(["-np".into(), np.to_string(), jdmg]);
            argv.extend(solve);
        } else {
            // MPMD: one application context per rank, each under its own taskset.
            for r in 0..np {
                if r > 0 {
                    argv.push(":".into());
                }
                let cpu = job.pin[r % job.pin.len()].clone();
                argv.extend([
                    "-np".into(),
                    "1".into(),
                    "taskset".into(),
                    "-c".into(),
                    cpu,
                    jdmg.clone(),
                ]);
                argv.extend(solve.iter().cloned());
            }
        }
        let cmdline = format!("{} {}", self.args.mpirun, argv.join(" "));
        let cmdline = match self.args.nice {
            0 => cmdline,
            k => format!("nice -n {k} {cmdline}"),
        };
        let mut c = niced(self.args.nice, &self.args.mpirun);
        c.args(&argv)
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .stdin(Stdio::null())
            .stdout(fs::File::create(&out)?)
            .stderr(fs::File::create(&err)?)
            .process_group(0);
        eprintln!("grid: {cmdline}");
        let child = c.spawn()?;
        Ok(Running {
            child,
            start: Instant::now(),
            out,
            err,
            cmdline,
        })
    }

    /// Waits for all running jobs (killing those past the timeout); while waiting,
    /// `at(elapsed)` is called so that competitors can be started.
    fn wait_all(
        &self,
        mut runs: Vec<(Job, Running)>,
        mut at: impl FnMut(f64),
        rep: usize,
    ) -> Vec<Value> {
        let timeout = Duration::from_secs(self.args.timeout);
        let t0 = Instant::now();
        let mut done: Vec<Option<(Option<i32>, f64, bool)>> = vec![None; runs.len()];
        while done.iter().any(|d| d.is_none()) {
            at(t0.elapsed().as_secs_f64());
            for (i, (_, r)) in runs.iter_mut().enumerate() {
                if done[i].is_some() {
                    continue;
                }
                match r.child.try_wait() {
                    Ok(Some(st)) => {
                        done[i] = Some((st.code(), r.start.elapsed().as_secs_f64(), false))
                    }
                    Ok(None) if r.start.elapsed() > timeout => {
                        kill_group(r.child.id());
                        let _ = r.child.wait();
                        done[i] = Some((None, r.start.elapsed().as_secs_f64(), true));
                    }
                    Ok(None) => {}
                    Err(_) => done[i] = Some((None, r.start.elapsed().as_secs_f64(), false)),
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        runs.iter()
            .zip(done)
            .map(|((job, r), d)| {
                let (code, secs, killed) = d.unwrap_or((None, f64::NAN, false));
                self.record(job, r, code, secs, killed, rep)
            })
            .collect()
    }

    fn record(
        &self,
        job: &Job,
        r: &Running,
        code: Option<i32>,
        secs: f64,
        killed: bool,
        rep_no: usize,
    ) -> Value {
        let so = fs::read_to_string(&r.out).unwrap_or_default();
        // the report of `jdmg solve --json`; its figures are NaN when there is none
        let rep: Option<SolveReport> = so
            .find('{')
            .and_then(|i| serde_json::from_str(so[i..].trim()).ok());
        let f = |x: Option<f64>| x.unwrap_or(f64::NAN);
        let mg = rep.as_ref().and_then(|j| j.multigrain.as_ref());
        let floats = |v: Option<&Vec<f64>>| v.cloned().unwrap_or_default();
        let counts = |v: Option<Vec<f64>>| v.unwrap_or_default();
        let mut ev = rep
            .as_ref()
            .map(|j| j.eigenvalues.clone())
            .unwrap_or_default();
        ev.sort_by(f64::total_cmp);
        let err = if ev.len() == self.args.nev && self.exact.len() >= ev.len() {
            ev.iter()
                .zip(&self.exact)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max)
        } else {
            f64::INFINITY
        };
        let converged = rep.as_ref().is_some_and(|j| j.converged);
        let same = err <= self.args.tol * self.anorm;
        let wall = f(rep.as_ref().map(|j| j.wall_seconds));
        let corr = f(rep.as_ref().map(|j| j.stats.correction_seconds));
        let matvecs = f(rep.as_ref().map(|j| j.matvecs as f64));
        let imbalance = f(rep.as_ref().and_then(|j| j.imbalance_percent));
        let tail = if rep.is_none() {
            let se = fs::read_to_string(&r.err).unwrap_or_default();
            let n = se.len();
            se[n.saturating_sub(400)..].to_string()
        } else {
            String::new()
        };
        if rep.is_none() || !converged {
            eprintln!(
                "grid: {} rep {rep_no}: exit {code:?} killed {killed} converged {converged}; {}",
                job.label,
                tail.trim()
            );
        } else {
            eprintln!(
                "grid: {} rep {rep_no}: {:.2} s, {} matvecs, imbalance {:.1}%, |dλ| {err:.1e}",
                job.label, wall, matvecs, imbalance
            );
        }
        json!({
            "label": job.label,
            "rep": rep_no,
            "command": r.cmdline,
            "exit_code": code,
            "killed": killed,
            "harness_seconds": secs,
            "converged": converged,
            "same_eigenvalues": same,
            "eig_error": if err.is_finite() { json!(err) } else { Value::Null },
            "wall_seconds": wall,
            "matvecs": matvecs,
            "outer_iterations": f(rep.as_ref().map(|j| j.outer_iterations as f64)),
            "imbalance_percent": imbalance,
            "projection_seconds": f(rep.as_ref().map(|j| j.stats.projection_seconds)),
            "correction_seconds": corr,
            "correction_fraction": corr / wall,
            "alltoall_seconds": f(mg.map(|m| m.alltoall_seconds)),
            "phases": f(mg.map(|m| m.phases as f64)),
            "group_inner_steps": counts(mg.map(|m| m.group_inner_steps.iter().map(|&x| x as f64).collect())),
            "group_rates": floats(mg.map(|m| &m.group_rates)),
            "time_limits": floats(mg.map(|m| &m.time_limits)),
            // row k: every group's rate (inner steps/s) measured in correction phase k+1
            "group_rate_history": mg.map(|m| m.group_rate_history.clone()).unwrap_or_default(),
            "optimal_steps": counts(mg.map(|m| m.optimal_steps.iter().map(|&x| x as f64).collect())),
            "startup_rates": floats(mg.map(|m| &m.startup_rates)),
            "fine_rows": counts(mg.map(|m| m.fine_rows.iter().map(|&x| x as f64).collect())),
            // every re-partition: rows before and after (fine-rank order), the rates
            // and imbalances it acted on
            "repartitions": mg.map(|m| json!(m.repartition.events)).unwrap_or(Value::Null),
            "repartition_checks": mg.map(|m| json!(m.repartition.measured_imbalance)).unwrap_or(Value::Null),
            // every fine rank's share of its core before each check
            "core_shares": mg.map(|m| json!(m.repartition.core_shares)).unwrap_or(Value::Null),
            "eigenvalues": ev,
            "stderr_tail": tail,
        })
    }

    fn run_one(&mut self, job: &Job, rep: usize) -> Value {
        match self.launch(job, &format!("r{rep}")) {
            Ok(r) => self.wait_all(vec![(job.clone(), r)], |_| {}, rep).remove(0),
            Err(e) => json!({"label": job.label, "rep": rep, "error": e.to_string()}),
        }
    }
}

fn num(v: &Value, k: &str) -> f64 {
    v.get(k).and_then(Value::as_f64).unwrap_or(f64::NAN)
}

fn vecf(v: &Value, k: &str) -> Vec<f64> {
    v.get(k)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default()
}

/// Medians per label, in first-appearance order.
fn summarize(runs: &[Value]) -> Vec<Value> {
    let mut labels: Vec<String> = Vec::new();
    for r in runs {
        if let Some(l) = r.get("label").and_then(Value::as_str) {
            if !labels.iter().any(|x| x == l) {
                labels.push(l.to_string());
            }
        }
    }
    labels
        .iter()
        .map(|l| {
            let rs: Vec<&Value> = runs
                .iter()
                .filter(|r| r.get("label").and_then(Value::as_str) == Some(l))
                .collect();
            let ok: Vec<&Value> = rs
                .iter()
                .copied()
                .filter(|r| r.get("converged").and_then(Value::as_bool) == Some(true))
                .collect();
            let med = |k: &str| median(ok.iter().map(|r| num(r, k)));
            let medv = |k: &str| -> Vec<f64> {
                let n = ok.iter().map(|r| vecf(r, k).len()).max().unwrap_or(0);
                (0..n)
                    .map(|i| median(ok.iter().filter_map(|r| vecf(r, k).get(i).copied())))
                    .collect()
            };
            let same = ok
                .iter()
                .all(|r| r.get("same_eigenvalues").and_then(Value::as_bool) == Some(true));
            let err = ok.iter().map(|r| num(r, "eig_error")).fold(0.0, f64::max);
            json!({
                "label": l,
                "runs": rs.len(),
                "converged_runs": ok.len(),
                "same_eigenvalues": same && !ok.is_empty(),
                "max_eig_error": err,
                "wall_seconds": med("wall_seconds"),
                "wall_seconds_all": rs.iter().map(|r| num(r, "wall_seconds")).collect::<Vec<_>>(),
                "matvecs": med("matvecs"),
                "imbalance_percent": med("imbalance_percent"),
                "imbalance_percent_all": rs.iter().map(|r| num(r, "imbalance_percent")).collect::<Vec<_>>(),
                "correction_fraction": med("correction_fraction"),
                "alltoall_seconds": med("alltoall_seconds"),
                "phases": med("phases"),
                "group_inner_steps": medv("group_inner_steps"),
                "group_rates": medv("group_rates"),
                "time_limits": medv("time_limits"),
            })
        })
        .collect()
}

fn markdown(title: &str, summary: &[Value], notes: &[String]) -> String {
    let mut s = format!("## {title}\n\n");
    s.push_str(
        "| configuration | runs ok | time (s) | matvecs | %imbal | correction % | all-to-all (s) | phases | inner steps per group | last group rates (steps/s) | max \\|Δλ\\| |\n",
    );
    s.push_str("|---|---|---|---|---|---|---|---|---|---|---|\n");
    for r in summary {
        let f = |k: &str| num(r, k);
        let opt = |x: f64, p: usize| {
            if x.is_finite() {
                format!("{x:.p$}")
            } else {
                "–".into()
            }
        };
        s.push_str(&format!(
            "| {} | {}/{} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1e}{} |\n",
            r["label"].as_str().unwrap_or(""),
            f("converged_runs"),
            f("runs"),
            opt(f("wall_seconds"), 2),
            opt(f("matvecs"), 0),
            opt(f("imbalance_percent"), 1),
            opt(100.0 * f("correction_fraction"), 0),
            opt(f("alltoall_seconds"), 3),
            opt(f("phases"), 0),
            fmt_list(&vecf(r, "group_inner_steps"), 0),
            fmt_list(&vecf(r, "group_rates"), 0),
            f("max_eig_error"),
            if r["same_eigenvalues"].as_bool() == Some(true) {
                ""
            } else {
                " (differs)"
            },
        ));
    }
    s.push_str("\nMedians over the converged runs; time = jdmg's wall_seconds (rank 0).\n");
    for n in notes {
        s.push_str(&format!("\n{n}\n"));
    }
    s
}

/// Colours of the configurations and groups (Tableau 10).
const COLORS: [RGBColor; 6] = [
    RGBColor(0x4e, 0x79, 0xa7),
    RGBColor(0xe1, 0x57, 0x59),
    RGBColor(0x59, 0xa1, 0x4f),
    RGBColor(0xf2, 0x8e, 0x2b),
    RGBColor(0xb0, 0x7a, 0xa1),
    RGBColor(0x76, 0xb7, 0xb2),
];

/// A plotters error as text (the harness reports it and writes no figure).
fn plot_err(e: impl std::fmt::Display) -> String {
    format!("plot: {e}")
}

/// Two horizontal bar panels (time, %imbalance) per configuration, and when any
/// configuration has time limits, a third panel with T per balanced phase; drawn
/// with plotters.
///
/// # Errors
/// A plotters drawing error, as text.
fn svg(title: &str, summary: &[Value]) -> Result<String, String> {
    let n = summary.len().max(1);
    let series: Vec<(String, Vec<f64>)> = summary
        .iter()
        .map(|r| {
            (
                r["label"].as_str().unwrap_or("").to_string(),
                vecf(r, "time_limits"),
            )
        })
        .filter(|(_, v)| !v.is_empty())
        .collect();
    let bars_h = 90 + 30 * n as u32;
    let line_h = if series.is_empty() { 0 } else { 300 };
    let (width, height) = (1000u32, bars_h + line_h);
    let labels: Vec<String> = summary
        .iter()
        .map(|r| r["label"].as_str().unwrap_or("").to_string())
        .collect();
    let mut s = String::new();
    {
        let root = SVGBackend::with_string(&mut s, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let root = root
            .titled(title, ("sans-serif", 16).into_font().style(FontStyle::Bold))
            .map_err(plot_err)?;
        let (bars, lines) = root.split_vertically(bars_h - 20);
        let panels = bars.split_evenly((1, 2));
        for (p, (key, name)) in [
            ("wall_seconds", "time (s)"),
            ("imbalance_percent", "%imbalance"),
        ]
        .iter()
        .enumerate()
        {
            let vmax = summary
                .iter()
                .map(|r| num(r, key))
                .filter(|x| x.is_finite())
                .fold(0.0, f64::max)
                .max(if *key == "imbalance_percent" {
                    10.0
                } else {
                    1e-9
                });
            let mut chart = ChartBuilder::on(&panels[p])
                .caption(*name, ("sans-serif", 13))
                .margin(8)
                .x_label_area_size(24)
                .y_label_area_size(if p == 0 { 250 } else { 10 })
                .build_cartesian_2d(0.0..vmax * 1.25, (0..n as i32 - 1).into_segmented())
                .map_err(plot_err)?;
            // first configuration on top
            let row = |i: usize| (n - 1 - i) as i32;
            chart
                .configure_mesh()
                .disable_y_mesh()
                .light_line_style(TRANSPARENT)
                .y_labels(n)
                .y_label_formatter(&|v| match v {
                    SegmentValue::CenterOf(k) if p == 0 => {
                        let i = n as i32 - 1 - k;
                        labels.get(i as usize).cloned().unwrap_or_default()
                    }
                    _ => String::new(),
                })
                .draw()
                .map_err(plot_err)?;
            chart
                .draw_series(summary.iter().enumerate().map(|(i, r)| {
                    let v = num(r, key);
                    let w = if v.is_finite() { v } else { 0.0 };
                    let mut bar = Rectangle::new(
                        [
                            (0.0, SegmentValue::Exact(row(i))),
                            (w, SegmentValue::Exact(row(i) + 1)),
                        ],
                        COLORS[i % COLORS.len()].filled(),
                    );
                    bar.set_margin(4, 4, 0, 0);
                    bar
                }))
                .map_err(plot_err)?;
            chart
                .draw_series(summary.iter().enumerate().map(|(i, r)| {
                    let v = num(r, key);
                    let (x, text) = if v.is_finite() {
                        (v, format!(" {v:.2}"))
                    } else {
                        (0.0, " failed".to_string())
                    };
                    Text::new(
                        text,
                        (x, SegmentValue::CenterOf(row(i))),
                        TextStyle::from(("sans-serif", 12).into_font())
                            .pos(Pos::new(HPos::Left, VPos::Center)),
                    )
                }))
                .map_err(plot_err)?;
            if *key == "imbalance_percent" {
                chart
                    .draw_series(DashedLineSeries::new(
                        [
                            (10.0, SegmentValue::Exact(0)),
                            (10.0, SegmentValue::Exact(n as i32)),
                        ],
                        4,
                        3,
                        BLACK.into(),
                    ))
                    .map_err(plot_err)?;
            }
        }
        if !series.is_empty() {
            let nmax = series
                .iter()
                .map(|(_, v)| v.len())
                .max()
                .unwrap_or(1)
                .max(2);
            let tmax = series
                .iter()
                .flat_map(|(_, v)| v.iter().copied())
                .filter(|t| t.is_finite())
                .fold(0.0, f64::max)
                .max(1e-9);
            let mut chart = ChartBuilder::on(&lines)
                .caption(
                    "time limit T per balanced correction phase",
                    ("sans-serif", 13),
                )
                .margin(10)
                .x_label_area_size(30)
                .y_label_area_size(60)
                .build_cartesian_2d(0.0..(nmax - 1) as f64, 0.0..tmax * 1.1)
                .map_err(plot_err)?;
            chart
                .configure_mesh()
                .light_line_style(TRANSPARENT)
                .x_labels(nmax.min(12))
                .x_label_formatter(&|x| format!("{x:.0}"))
                .x_desc("balanced phase")
                .y_desc("T (s)")
                .draw()
                .map_err(plot_err)?;
            for (k, (name, v)) in series.iter().enumerate() {
                let c = COLORS[k % COLORS.len()];
                chart
                    .draw_series(LineSeries::new(
                        v.iter()
                            .enumerate()
                            .filter(|(_, t)| t.is_finite())
                            .map(|(i, t)| (i as f64, *t)),
                        c.stroke_width(2),
                    ))
                    .map_err(plot_err)?
                    .label(name.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2))
                    });
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(plot_err)?;
        }
        root.present().map_err(plot_err)?;
    }
    Ok(s)
}

/// The `group_rate_history` rows of a run record (row p−1: the rates measured in
/// correction phase p).
fn rate_hist(v: &Value) -> Vec<Vec<f64>> {
    v.get("group_rate_history")
        .and_then(Value::as_array)
        .map(|rows| {
            rows.iter()
                .map(|row| {
                    row.as_array()
                        .map(|a| a.iter().map(|x| x.as_f64().unwrap_or(f64::NAN)).collect())
                        .unwrap_or_default()
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Per-phase group rates of one representative run of a configuration (the converged
/// run of median time), with the estimated phase in which a competitor started.
struct RateRun {
    label: String,
    rep: f64,
    wall: f64,
    /// Row p−1: each group's rate (inner steps per second) measured in correction
    /// phase p (jdmg's `group_rate_history`: the rates gathered by the decide of
    /// phase p+1; the last phase's rates are never gathered).
    hist: Vec<Vec<f64>>,
    /// `limits[k]`: time limit T of correction phase k+2 (phase 1 is not balanced).
    limits: Vec<f64>,
    ngroups: usize,
    /// Competitor start in seconds after the solve started (estimated), if one started.
    comp_secs: Option<f64>,
    /// Correction phase during which the competitor started, estimated from timing
    /// (biased early: see [`RateRun::new`]).
    comp_phase: Option<usize>,
    /// The competitor started in this phase or earlier (bound from timing).
    comp_phase_max: Option<usize>,
    /// First phase (and group) whose rate fell below 70 % of the group's median over
    /// the earlier phases and stayed there over the next phases.
    drop: Option<(usize, usize)>,
}

/// Relative drop that [`rate_drop`] looks for.
const DROP: f64 = 0.7;

fn rate_drop(hist: &[Vec<f64>], ngroups: usize) -> Option<(usize, usize)> {
    let col = |g: usize, a: usize, b: usize| -> Vec<f64> {
        hist[a..b]
            .iter()
            .filter_map(|r| r.get(g).copied())
            .collect()
    };
    for k in 3..hist.len() {
        for g in 0..ngroups {
            let base = median(col(g, 0, k));
            let now = hist[k].get(g).copied().unwrap_or(f64::NAN);
            let next = median(col(g, k, (k + 3).min(hist.len())));
            if now < DROP * base && next < DROP * base {
                return Some((k + 1, g));
            }
        }
    }
    None
}

impl RateRun {
    /// From a run record. jdmg's JSON has no per-phase times, so the competitor's
    /// phase is bracketed from timing. Phase durations d_1 = maxits / (slowest rate
    /// of phase 1) and d_p = T of phase p (the fastest group works about T seconds)
    /// are lower bounds of the phases' wall times. The competitor started `delay`
    /// seconds after mpirun's launch, so at most `delay` seconds into the solve: it
    /// started no later than the first phase p with Σ_{q≤p} d_q ≥ delay
    /// (`comp_phase_max`). The estimate `comp_phase` moves the start to the solve's
    /// clock (minus mpirun's start-up, taken as harness time − jdmg wall time) and
    /// spreads the wall time over the phases in proportion to d_p; it is biased early
    /// because the loaded rank also slows the fine-grain projection and the
    /// all-to-alls after the competitor starts. The detected rate drop (`drop`) is
    /// the data's own marker.
    fn new(label: &str, r: &Value, maxits: usize) -> RateRun {
        let hist = rate_hist(r);
        let limits = vecf(r, "time_limits");
        let ngroups = hist.iter().map(Vec::len).max().unwrap_or(0);
        let wall = num(r, "wall_seconds");
        let p = num(r, "phases");
        let phases = if p.is_finite() && p as usize > hist.len() {
            p as usize
        } else {
            hist.len() + 1
        };
        let tdefault = median(limits.clone());
        let dur: Vec<f64> = (1..=phases)
            .map(|p| {
                if p == 1 {
                    let slow = hist
                        .first()
                        .map(|row| {
                            row.iter()
                                .copied()
                                .filter(|x| *x > 0.0)
                                .fold(f64::INFINITY, f64::min)
                        })
                        .unwrap_or(f64::NAN);
                    // the first phase runs the §4 optimal m (older runs: maxits)
                    let m1 = vecf(r, "optimal_steps").first().copied();
                    m1.unwrap_or(maxits as f64) / slow
                } else {
                    limits.get(p - 2).copied().unwrap_or(tdefault)
                }
            })
            .map(|d| if d.is_finite() && d > 0.0 { d } else { 0.0 })
            .collect();
        let total: f64 = dur.iter().sum();
        let started = r.get("competitor_started").and_then(Value::as_bool) == Some(true);
        let comp_secs = if started {
            let overhead = (num(r, "harness_seconds") - wall).max(0.0);
            let c = num(r, "competitor_start_seconds") - overhead;
            c.is_finite().then_some(c.max(0.0))
        } else {
            None
        };
        let comp_phase = comp_secs.and_then(|c| {
            if !(total > 0.0 && wall.is_finite()) {
                return None;
            }
            let mut cum = 0.0;
            for (i, d) in dur.iter().enumerate() {
                cum += d;
                if wall * cum / total > c {
                    return Some(i + 1);
                }
            }
            None
        });
        let comp_phase_max = if started {
            let delay = num(r, "competitor_start_seconds");
            let mut cum = 0.0;
            dur.iter().position(|d| {
                cum += d;
                cum >= delay
            })
        } else {
            None
        }
        .map(|i| i + 1);
        let drop = rate_drop(&hist, ngroups);
        RateRun {
            label: label.to_string(),
            rep: num(r, "rep"),
            wall,
            hist,
            limits,
            ngroups,
            comp_secs,
            comp_phase,
            comp_phase_max,
            drop,
        }
    }

    /// Group g's rates of the phases p (1-based) with `keep(p)`.
    fn col(&self, g: usize, keep: impl Fn(usize) -> bool) -> Vec<f64> {
        self.hist
            .iter()
            .enumerate()
            .filter(|(k, _)| keep(k + 1))
            .filter_map(|(_, r)| r.get(g).copied())
            .collect()
    }

    /// T of the phases p with `keep(p)`.
    fn tcol(&self, keep: impl Fn(usize) -> bool) -> Vec<f64> {
        self.limits
            .iter()
            .enumerate()
            .filter(|(k, _)| keep(k + 2))
            .map(|(_, t)| *t)
            .collect()
    }

    /// The phases before (`p < first`) and after (`p > last`) the competitor's start:
    /// `first` = the timing estimate, `last` = the detected rate drop if it is not
    /// earlier, else the timing bound.
    fn split(&self) -> Option<(usize, usize)> {
        let first = self.comp_phase?;
        let last = match (self.drop, self.comp_phase_max) {
            (Some((d, _)), _) if d >= first => d,
            (_, Some(m)) => m.max(first),
            _ => first,
        };
        Some((first, last))
    }

    /// Median rate per group and median T of the phases before and after the
    /// competitor's start ([`RateRun::split`]; the phases between are left out).
    fn before_after(&self) -> Option<[(Vec<f64>, f64); 2]> {
        let (first, last) = self.split()?;
        let side = |after: bool| {
            let keep = |p: usize| if after { p > last } else { p < first };
            (
                (0..self.ngroups)
                    .map(|g| median(self.col(g, keep)))
                    .collect(),
                median(self.tcol(keep)),
            )
        };
        Some([side(false), side(true)])
    }

    fn to_json(&self) -> Value {
        let ba = self.before_after();
        let share = |v: &[f64]| -> Vec<f64> {
            let s: f64 = v.iter().sum();
            v.iter().map(|x| x / s).collect()
        };
        json!({
            "representative_rep": self.rep,
            "representative": "converged run of median wall time",
            "wall_seconds": self.wall,
            "group_rate_history": self.hist,
            "time_limits": self.limits,
            "competitor_start_solve_seconds_est": self.comp_secs,
            "competitor_phase_est": self.comp_phase,
            "competitor_phase_max": self.comp_phase_max,
            "before_phases_below": self.split().map(|s| s.0),
            "after_phases_above": self.split().map(|s| s.1),
            "rate_drop_phase": self.drop.map(|d| d.0),
            "rate_drop_group": self.drop.map(|d| d.1),
            "rates_before": ba.as_ref().map(|b| b[0].0.clone()),
            "rates_after": ba.as_ref().map(|b| b[1].0.clone()),
            "step_share_before": ba.as_ref().map(|b| share(&b[0].0)),
            "step_share_after": ba.as_ref().map(|b| share(&b[1].0)),
            "time_limit_before": ba.as_ref().map(|b| b[0].1),
            "time_limit_after": ba.as_ref().map(|b| b[1].1),
        })
    }
}

/// The representative [`RateRun`] of every configuration that has rate history.
fn rate_runs(runs: &[Value], summary: &[Value], maxits: usize) -> Vec<RateRun> {
    summary
        .iter()
        .filter_map(|s| {
            let label = s["label"].as_str()?;
            let mut c: Vec<&Value> = runs
                .iter()
                .filter(|r| {
                    r.get("label").and_then(Value::as_str) == Some(label)
                        && r.get("converged").and_then(Value::as_bool) == Some(true)
                        && !rate_hist(r).is_empty()
                })
                .collect();
            c.sort_by(|a, b| num(a, "wall_seconds").total_cmp(&num(b, "wall_seconds")));
            let r = c.get(c.len().checked_sub(1)? / 2)?;
            Some(RateRun::new(label, r, maxits))
        })
        .collect()
}

fn group_name(names: &[String], g: usize) -> String {
    names
        .get(g)
        .cloned()
        .unwrap_or_else(|| format!("group {g}"))
}

/// Markdown table of the per-phase rates: first, middle and last phase per group and,
/// with a competitor, the medians before and after its phase.
fn rates_markdown(rr: &[RateRun], names: &[String]) -> String {
    if rr.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "\n### Per-phase group rates (inner steps/s; representative run = median time)\n\n",
    );
    s.push_str("| configuration (rep, time) | group | first phase | middle phase | last phase | median before competitor | median after | step share before → after |\n");
    s.push_str("|---|---|---|---|---|---|---|---|\n");
    let opt = |x: Option<f64>, p: usize| match x {
        Some(v) if v.is_finite() => format!("{v:.p$}"),
        _ => "–".into(),
    };
    for r in rr {
        let n = r.hist.len();
        let ba = r.before_after();
        let cell = |k: usize, g: usize| {
            format!(
                "{} (p{})",
                opt(r.hist.get(k).and_then(|row| row.get(g).copied()), 0),
                k + 1
            )
        };
        for g in 0..r.ngroups {
            let (b, a, sh) = match &ba {
                Some([(b, _), (a, _)]) => {
                    let sb: f64 = b.iter().sum();
                    let sa: f64 = a.iter().sum();
                    (
                        opt(b.get(g).copied(), 0),
                        opt(a.get(g).copied(), 0),
                        format!(
                            "{} → {} %",
                            opt(b.get(g).map(|x| 100.0 * x / sb), 0),
                            opt(a.get(g).map(|x| 100.0 * x / sa), 0)
                        ),
                    )
                }
                None => ("–".into(), "–".into(), "–".into()),
            };
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {b} | {a} | {sh} |\n",
                if g == 0 {
                    format!("{} (rep {}, {:.2} s)", r.label, r.rep, r.wall)
                } else {
                    String::new()
                },
                group_name(names, g),
                cell(0, g),
                cell(n / 2, g),
                cell(n.saturating_sub(1), g),
            ));
        }
        let m = r.limits.len();
        let tcell = |k: usize| format!("{} (p{})", opt(r.limits.get(k).map(|t| 1e3 * t), 1), k + 2);
        s.push_str(&format!(
            "| | T (ms) | {} | {} | {} | {} | {} | |\n",
            tcell(0),
            tcell(m / 2),
            tcell(m.saturating_sub(1)),
            opt(ba.as_ref().map(|b| 1e3 * b[0].1), 1),
            opt(ba.as_ref().map(|b| 1e3 * b[1].1), 1),
        ));
    }
    s.push_str("\nThe rates of phase p are those measured in correction phase p (gathered by the next phase's decide; phase 1 is unbalanced, T starts at phase 2). Step share = the group's share of the summed rates (all groups work the same T).\n");
    for r in rr {
        if let Some(c) = r.comp_secs {
            let (b, a) = r.split().unwrap_or((0, 0));
            s.push_str(&format!(
                "\n{}: the competitor started ≈ {c:.2} s into the solve; from timing (no per-phase times in jdmg's JSON) in phase ≈ {} (early-biased estimate) and no later than phase {}, of {}; first sustained rate drop (< {:.0} % of the group's earlier median): {}. Before = phases < {b}, after = phases > {a}.\n",
                r.label,
                r.comp_phase.map_or("–".into(), |p| p.to_string()),
                r.comp_phase_max.map_or("–".into(), |p| p.to_string()),
                r.hist.len() + 1,
                100.0 * DROP,
                r.drop
                    .map_or("none".into(), |(p, g)| format!("phase {p}, {}", group_name(names, g))),
            ));
        }
    }
    s
}

/// One line-plot panel per [`RateRun`]: each group's rate per correction phase (left
/// axis), T per phase (right axis, dashed grey), the estimated competitor start
/// (shaded) and the detected rate drop (dotted); drawn with plotters.
///
/// # Errors
/// A plotters drawing error, as text.
fn rates_svg(title: &str, rr: &[RateRun], names: &[String]) -> Result<String, String> {
    let panel_h = 340u32;
    let (width, height) = (960u32, 40 + panel_h * rr.len().max(1) as u32);
    let grey = RGBColor(0x88, 0x88, 0x88);
    let band = RGBColor(0xf2, 0xc1, 0x4e);
    let mut s = String::new();
    {
        let root = SVGBackend::with_string(&mut s, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let root = root
            .titled(
                &format!("{title}: per-phase group rates"),
                ("sans-serif", 16).into_font().style(FontStyle::Bold),
            )
            .map_err(plot_err)?;
        let panels = root.split_evenly((rr.len().max(1), 1));
        for (r, area) in rr.iter().zip(&panels) {
            let xmax = r.hist.len().max(r.limits.len() + 1).max(2) as f64;
            let ymax = r
                .hist
                .iter()
                .flatten()
                .copied()
                .filter(|v| v.is_finite())
                .fold(0.0, f64::max)
                .max(1e-9)
                * 1.1;
            let tmax = r
                .limits
                .iter()
                .copied()
                .filter(|v| v.is_finite())
                .fold(0.0, f64::max)
                .max(1e-9)
                * 1e3
                * 1.1;
            let mut chart = ChartBuilder::on(area)
                .caption(
                    format!(
                        "{} — repetition {} (median time, {:.2} s)",
                        r.label, r.rep, r.wall
                    ),
                    ("sans-serif", 13),
                )
                .margin(10)
                .x_label_area_size(36)
                .y_label_area_size(70)
                .right_y_label_area_size(if r.limits.is_empty() { 10 } else { 70 })
                .build_cartesian_2d(1.0..xmax, 0.0..ymax)
                .map_err(plot_err)?
                .set_secondary_coord(1.0..xmax, 0.0..tmax);
            chart
                .configure_mesh()
                .light_line_style(TRANSPARENT)
                .x_labels((xmax as usize).min(12))
                .x_label_formatter(&|x| format!("{x:.0}"))
                .y_label_formatter(&|y| format!("{y:.0}"))
                .x_desc("correction phase (rates measured in the phase; T = its time limit)")
                .y_desc("inner steps per second")
                .draw()
                .map_err(plot_err)?;
            if !r.limits.is_empty() {
                chart
                    .configure_secondary_axes()
                    .y_label_formatter(&|y| format!("{y:.0}"))
                    .y_desc("time limit T (ms)")
                    .draw()
                    .map_err(plot_err)?;
            }
            if let Some(cp) = r.comp_phase {
                // timing bracket of the competitor's start: shaded band
                let hi = (r.comp_phase_max.unwrap_or(cp).max(cp) as f64 + 0.5).min(xmax);
                let lo = (cp as f64 - 0.5).max(1.0);
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(lo, 0.0), (hi, ymax)],
                        band.mix(0.25).filled(),
                    )))
                    .map_err(plot_err)?
                    .label(format!(
                        "competitor start by timing (phases {cp}–{})",
                        r.comp_phase_max.map_or("?".into(), |m| m.to_string())
                    ))
                    .legend(move |(x, y)| {
                        Rectangle::new([(x, y - 5), (x + 16, y + 5)], band.mix(0.4).filled())
                    });
                if let Some((d, g)) = r.drop {
                    chart
                        .draw_series(DashedLineSeries::new(
                            [(d as f64, 0.0), (d as f64, ymax)],
                            2,
                            3,
                            BLACK.stroke_width(1),
                        ))
                        .map_err(plot_err)?
                        .label(format!(
                            "sustained rate drop detected (phase {d}, group {g})"
                        ))
                        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLACK));
                }
            }
            for g in 0..r.ngroups {
                let c = COLORS[g % COLORS.len()];
                let pts: Vec<(f64, f64)> = r
                    .hist
                    .iter()
                    .enumerate()
                    .filter_map(|(k, row)| row.get(g).map(|v| (k as f64 + 1.0, *v)))
                    .filter(|(_, v)| v.is_finite())
                    .collect();
                chart
                    .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))
                    .map_err(plot_err)?
                    .label(group_name(names, g))
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2))
                    });
                chart
                    .draw_series(pts.iter().map(|&p| Circle::new(p, 2, c.filled())))
                    .map_err(plot_err)?;
            }
            if !r.limits.is_empty() {
                chart
                    .draw_secondary_series(DashedLineSeries::new(
                        r.limits
                            .iter()
                            .enumerate()
                            .filter(|(_, t)| t.is_finite())
                            .map(|(k, t)| (k as f64 + 2.0, 1e3 * t)),
                        6,
                        3,
                        grey.stroke_width(2),
                    ))
                    .map_err(plot_err)?
                    .label("time limit T (right axis)")
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], grey));
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::LowerRight)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .draw()
                .map_err(plot_err)?;
        }
        root.present().map_err(plot_err)?;
    }
    Ok(s)
}

/// Rank lists of two halves: "0-1,2-3" (or "0,1").
fn halves(np: usize) -> String {
    let h = np / 2;
    let part = |a: usize, b: usize| {
        if a == b {
            a.to_string()
        } else {
            format!("{a}-{b}")
        }
    };
    format!("{},{}", part(0, h - 1), part(h, np - 1))
}

fn csv(v: &[f64]) -> String {
    let s: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    s.join(",")
}

fn sv(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The per-rank CPUs of `--pin`, or `default` when not given ("none": no pinning).
fn pins(a: &Args, default: impl Fn(usize) -> String) -> Vec<String> {
    if a.pin.len() == 1 && a.pin[0] == "none" {
        Vec::new()
    } else if a.pin.is_empty() {
        (0..a.np).map(default).collect()
    } else {
        a.pin.clone()
    }
}

fn ncpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The note on the goals of balancing multigrain (issues 5 and 10), from the
/// medians of `runs`: the balanced run's %imbalance (≤ 10), its time over the
/// unbalanced run's (≤ 0.6), and whether it found the same eigenvalues;
/// `(balanced, unbalanced)` are the configurations' indices, `head` names the
/// goals and `ratio_name` the time ratio.
fn balance_goals_note(
    runs: &[Value],
    (balanced, unbalanced): (usize, usize),
    head: &str,
    ratio_name: &str,
) -> String {
    let s = summarize(runs);
    let get = |i: usize, k: &str| s.get(i).map(|r| num(r, k)).unwrap_or(f64::NAN);
    let ratio = get(balanced, "wall_seconds") / get(unbalanced, "wall_seconds");
    let imb = get(balanced, "imbalance_percent");
    let same = s
        .get(balanced)
        .and_then(|r| r["same_eigenvalues"].as_bool())
        .unwrap_or(false);
    format!(
        "{head}: balanced multigrain %imbalance {imb:.1} (≤ 10: {}), {ratio_name} {ratio:.2} (≤ 0.6: {}), same eigenvalues to tol·‖A‖: {same}.",
        if imb <= 10.0 { "PASS" } else { "FAIL" },
        if ratio <= 0.6 { "PASS" } else { "FAIL" },
    )
}

/// Names of the two solve groups of `groups` ("0-1,2-3") for the rate plots,
/// each with its ranks and what sets it apart (`what0`, `what1`).
fn group_names(groups: &str, what0: String, what1: String) -> Vec<String> {
    let (g0, g1) = groups.split_once(',').unwrap_or((groups, ""));
    vec![
        format!("group 0 (ranks {g0}, {what0})"),
        format!("group 1 (ranks {g1}, {what1})"),
    ]
}

/// Runs, notes, and names of the solve groups (for the rate plots).
type Outcome = (Vec<Value>, Vec<String>, Vec<String>);

fn hetero(ctx: &mut Ctx) -> Outcome {
    let a = &ctx.args;
    let np = a.np;
    let slow: Vec<f64> = (0..np)
        .map(|r| if r < np / 2 { 1.0 } else { a.slow })
        .collect();
    let sd = csv(&slow);
    let groups = halves(np);
    let block = a.block.to_string();
    let pin = pins(a, |r| (r % ncpus()).to_string());
    let mk = |label: &str, extra: Vec<String>| Job::new(label, extra, &pin);
    let jobs = vec![
        mk("fine grain, no slowdown", sv(&["--block", &block])),
        mk(
            &format!("fine grain, slowdown {sd}"),
            sv(&["--block", &block, "--slowdown", &sd]),
        ),
        mk(
            &format!("multigrain {groups}"),
            sv(&[
                "--block",
                &block,
                "--groups",
                &groups,
                "--balance",
                "none",
                "--slowdown",
                &sd,
            ]),
        ),
        mk(
            &format!("balanced multigrain {groups}"),
            sv(&[
                "--block",
                &block,
                "--groups",
                &groups,
                "--balance",
                "fastest",
                "--slowdown",
                &sd,
            ]),
        ),
    ];
    let mut runs = Vec::new();
    for rep in 0..ctx.args.repeat {
        for j in &jobs {
            runs.push(ctx.run_one(j, rep));
        }
    }
    let notes = vec![
        format!(
            "Groups {groups}; --slowdown {sd} (lblib::Slowed sleeps); ranks pinned to CPUs {}.",
            if pin.is_empty() {
                "none".to_string()
            } else {
                pin.join(",")
            }
        ),
        balance_goals_note(
            &runs,
            (3, 2),
            "Acceptance (issue 5)",
            "time ratio balanced/unbalanced multigrain",
        ),
    ];
    let names = group_names(
        &groups,
        "slowdown 1".into(),
        format!("slowdown {}", ctx.args.slow),
    );
    (runs, notes, names)
}

/// Whether the kernel groups processes by session for scheduling (then `nice`
/// only ranks processes within a session).
fn autogroup_note() -> String {
    match fs::read_to_string("/proc/sys/kernel/sched_autogroup_enabled") {
        Ok(v) if v.trim() == "0" => "sched_autogroup_enabled = 0 (niceness holds across sessions)".into(),
        Ok(v) => format!(
            "sched_autogroup_enabled = {}: niceness only holds within a session, other sessions' work competes too (echo 0 > /proc/sys/kernel/sched_autogroup_enabled)",
            v.trim()
        ),
        Err(_) => "sched_autogroup_enabled unknown".into(),
    }
}

/// Real contention (the Table 3 analogue, and the setups of issue 10): the first
/// half of the ranks (solve group 0) on CPU 0, the second half (group 1) on CPU 1
/// with `--busy` busy loops pinned beside them for the whole run; fine grain, and
/// multigrain unbalanced and balanced, at jdmg's default settings.
fn contention(ctx: &mut Ctx) -> Outcome {
    let a = &ctx.args;
    let np = a.np;
    let busy = a.busy.unwrap_or(np);
    let groups = halves(np);
    let block = a.block.to_string();
    let pin = pins(a, |r| if r < np / 2 { "0".into() } else { "1".into() });
    let (nice, tmax) = (a.nice, a.timeout);
    let mk = |label: &str, extra: Vec<String>| Job::new(label, extra, &pin);
    // multigrain over the two halves, balanced by the fastest rule, and `more`
    let balanced = |more: &[&str]| {
        let mut v = sv(&[
            "--block",
            &block,
            "--groups",
            "equal",
            "--balance",
            "fastest",
        ]);
        v.extend(sv(more));
        v
    };
    let jobs = vec![
        mk("fine grain", sv(&["--block", &block])),
        mk(
            &format!("multigrain {groups}, balance none"),
            sv(&["--block", &block, "--groups", "equal", "--balance", "none"]),
        ),
        mk(
            &format!("multigrain {groups}, balance fastest"),
            balanced(&[]),
        ),
        // semi-static re-partitioning (on by default with balancing) switched off
        mk(
            &format!("multigrain {groups}, balance fastest, repartition off"),
            balanced(&["--repartition", "off"]),
        ),
        // re-partitioning rates as busy seconds, not at the core's share
        mk(
            &format!("multigrain {groups}, balance fastest, core share off"),
            balanced(&["--core-share", "off"]),
        ),
    ];
    let mut runs = Vec::new();
    for rep in 0..ctx.args.repeat {
        for j in &jobs {
            let comp = Competitors::start(busy, "1", tmax, nice);
            // let the loops reach the CPU before the ranks start
            std::thread::sleep(Duration::from_millis(100));
            runs.push(ctx.run_one(j, rep));
            drop(comp);
        }
    }
    let notes = vec![
        format!(
            "Groups {groups} (--groups equal); ranks pinned to CPUs {}; {busy} busy loops pinned to CPU 1 during every run; runs and loops at nice {nice}; {}.",
            pin.join(","),
            autogroup_note()
        ),
        balance_goals_note(
            &runs,
            (2, 1),
            "Goals (issue 10)",
            "time balanced / unbalanced multigrain",
        ),
    ];
    let mut notes = notes;
    // the fine rows are in fine-rank order (hierarchical: member m of group j is
    // fine rank m·k + j), the CPUs in MPI rank order
    // the fine rows are in fine-rank order (hierarchical: member m of group j is
    // fine rank m·k + j), the CPUs in MPI rank order
    let (shares, cpus) = {
        let by_rank = cpu_shares(&pin, busy, "1");
        let groups = jdmg::parse_groups(&groups, np, 2).unwrap_or_default();
        let keys = jdmg::fine_rank_keys(&groups, true);
        let (mut s, mut c) = (by_rank.clone(), pin.clone());
        for (rank, &key) in keys.iter().enumerate() {
            if let (Some(d), Some(&v)) = (s.get_mut(key), by_rank.get(rank)) {
                *d = v;
                c[key] = pin[rank].clone();
            }
        }
        (s, c)
    };
    for label in [&jobs[2].label, &jobs[4].label] {
        notes.push(rows_against_shares(&runs, label, &shares, &cpus));
    }
    let names = group_names(
        &groups,
        "CPU 0".into(),
        format!("CPU 1 with {busy} busy loops"),
    );
    (runs, notes, names)
}

/// Each rank's share of its CPU when every process on it wants to run: ranks
/// pinned to CPU `pin[r]`, `busy` loops of the same priority on CPU `loaded`.
fn cpu_shares(pin: &[String], busy: usize, loaded: &str) -> Vec<f64> {
    pin.iter()
        .map(|c| {
            let ranks = pin.iter().filter(|d| *d == c).count();
            let loops = if c == loaded { busy } else { 0 };
            1.0 / (ranks + loops) as f64
        })
        .collect()
}

/// The fine rows each fine rank ends with (medians over the converged runs of
/// `label`) against the rows proportional to its CPU share (`shares`, in fine-rank
/// order): each fine rank's ratio and
/// whether all are within 10 % (issue 39, class 7).
fn rows_against_shares(runs: &[Value], label: &str, shares: &[f64], cpus: &[String]) -> String {
    let ok: Vec<&Value> = runs
        .iter()
        .filter(|r| r["label"].as_str() == Some(label) && r["converged"].as_bool() == Some(true))
        .collect();
    let rows: Vec<f64> = (0..shares.len())
        .map(|i| {
            median(
                ok.iter()
                    .filter_map(|r| vecf(r, "fine_rows").get(i).copied()),
            )
        })
        .collect();
    let (total, stotal) = (rows.iter().sum::<f64>(), shares.iter().sum::<f64>());
    let ratios: Vec<f64> = rows
        .iter()
        .zip(shares)
        .map(|(r, s)| (r / total) / (s / stotal))
        .collect();
    let within = ratios.iter().all(|q| (q - 1.0).abs() <= 0.10);
    // per CPU: the fine-grain phase waits for the CPU whose ranks' rows take longest
    let mut per_cpu: Vec<(String, f64, f64)> = Vec::new();
    for ((r, sh), c) in rows.iter().zip(shares).zip(cpus) {
        match per_cpu.iter_mut().find(|e| &e.0 == c) {
            Some(e) => {
                e.1 += r;
                e.2 += sh;
            }
            None => per_cpu.push((c.clone(), *r, *sh)),
        }
    }
    let cpu_text: Vec<String> = per_cpu
        .iter()
        .map(|(c, r, sh)| format!("CPU {c} {:.2}", (r / total) / (sh / stotal)))
        .collect();
    format!(
        "Fine rows of \"{label}\" (medians of {} runs) {:?} against rows in proportion to the CPU shares {:?}: ratios {} (within 10 %: {}); rows per CPU against its ranks' shares: {}.",
        ok.len(),
        rows.iter().map(|r| r.round() as i64).collect::<Vec<_>>(),
        shares.iter().map(|s| (total * s / stotal).round() as i64).collect::<Vec<_>>(),
        ratios.iter().map(|q| format!("{q:.2}")).collect::<Vec<_>>().join(" / "),
        if within { "PASS" } else { "FAIL" },
        cpu_text.join(", "),
    )
}

/// A slow link between solve groups (Tables 2–3 analogue): `jdmg --link-latency L`
/// delays every fine-grain collective and fine↔group all-to-all by L, not the
/// solve groups' own collectives; fine grain against multigrain (`--groups equal
/// --hierarchical off`, whose all-to-alls cross the link) for each L.
fn slowlink(ctx: &mut Ctx) -> Outcome {
    let a = &ctx.args;
    let block = a.block.to_string();
    let pin = pins(a, |r| (r % ncpus()).to_string());
    let lats = a.latencies.clone();
    let mut jobs = Vec::new();
    for &l in &lats {
        let ls = l.to_string();
        let ms = l * 1e3;
        jobs.push(Job {
            label: format!("fine grain, link {ms} ms"),
            args: sv(&["--block", &block, "--link-latency", &ls]),
            pin: pin.clone(),
        });
        jobs.push(Job {
            label: format!("multigrain, link {ms} ms"),
            args: sv(&[
                "--block",
                &block,
                "--groups",
                "equal",
                "--hierarchical",
                "off",
                "--link-latency",
                &ls,
            ]),
            pin: pin.clone(),
        });
    }
    let mut runs = Vec::new();
    for rep in 0..ctx.args.repeat {
        for j in &jobs {
            runs.push(ctx.run_one(j, rep));
        }
    }
    let s = summarize(&runs);
    let t = |i: usize| s.get(i).map(|r| num(r, "wall_seconds")).unwrap_or(f64::NAN);
    let cross: Vec<String> = lats
        .iter()
        .enumerate()
        .map(|(i, l)| format!("{} ms: {:.2}", l * 1e3, t(2 * i + 1) / t(2 * i)))
        .collect();
    let notes = vec![
        format!(
            "{} ranks pinned to CPUs {}; --link-latency L delays every fine-grain collective and fine↔group all-to-all by L (lblib::Delayed), not the solve groups' own collectives; nice {}; {}.",
            ctx.args.np,
            pin.join(","),
            ctx.args.nice,
            autogroup_note()
        ),
        format!("Multigrain / fine-grain time per latency: {}.", cross.join(", ")),
    ];
    (runs, notes, Vec::new())
}

/// Three 2-rank JDcg jobs at once, each rank pinned by `--job-pins`, so that the
/// jobs really share cores (the Table 1 analogue on two cores).
fn competing_real(ctx: &mut Ctx) -> Outcome {
    let jobs_pins: Vec<Vec<String>> = ctx
        .args
        .job_pins
        .split(';')
        .map(|j| j.split(',').map(|c| c.trim().to_string()).collect())
        .collect();
    let busy = ctx.args.busy.unwrap_or(0);
    let (nice, tmax) = (ctx.args.nice, ctx.args.timeout);
    let mut runs = Vec::new();
    for rep in 0..ctx.args.repeat {
        for bal in ["none", "fastest"] {
            let comp = Competitors::start(busy, "1", tmax, nice);
            let mut started = Vec::new();
            for (j, pin) in jobs_pins.iter().enumerate() {
                let job = Job {
                    label: format!("job {} (CPUs {}), balance {bal}", j + 1, pin.join(",")),
                    args: sv(&[
                        "--block",
                        &pin.len().to_string(),
                        "--groups",
                        "equal",
                        "--balance",
                        bal,
                    ]),
                    pin: pin.clone(),
                };
                match ctx.launch_np(&job, &format!("r{rep}"), pin.len()) {
                    Ok(r) => started.push((job, r)),
                    Err(e) => eprintln!("grid: launch failed: {e}"),
                }
            }
            runs.extend(ctx.wait_all(started, |_| {}, rep));
            drop(comp);
        }
    }
    let notes = vec![format!(
        "Three JDcg jobs (--block = ranks, --groups equal: one rank per solve group) run at the same time, ranks pinned to CPUs {} (jobs separated by ';'); {busy} extra busy loops on CPU 1; nice {nice}; {}.",
        ctx.args.job_pins,
        autogroup_note()
    )];
    (runs, notes, Vec::new())
}

fn competing(ctx: &mut Ctx) -> Outcome {
    if ctx.args.real {
        return competing_real(ctx);
    }
    let np = ctx.args.np;
    // Paper node overlap: job 1 on nodes 1-4, job 2 on 3-6, job 3 on 4,7,8,9; node 3
    // runs two jobs (2x slower), node 4 three (3x).
    let paper = [
        [1.0, 1.0, 2.0, 3.0],
        [2.0, 3.0, 1.0, 1.0],
        [3.0, 1.0, 1.0, 1.0],
    ];
    let block = np.to_string();
    let mut runs = Vec::new();
    for rep in 0..ctx.args.repeat {
        for bal in ["none", "fastest"] {
            let mut started = Vec::new();
            for (j, f) in paper.iter().enumerate() {
                let sd: Vec<f64> = (0..np).map(|r| f[r % 4] * ctx.args.scale).collect();
                let job = Job {
                    label: format!("job {} ({}), balance {bal}", j + 1, csv(&sd)),
                    args: sv(&[
                        "--block",
                        &block,
                        "--groups",
                        "equal",
                        "--balance",
                        bal,
                        "--slowdown",
                        &csv(&sd),
                    ]),
                    pin: pins(&ctx.args, |r| (r % ncpus()).to_string()),
                };
                match ctx.launch(&job, &format!("r{rep}")) {
                    Ok(r) => started.push((job, r)),
                    Err(e) => eprintln!("grid: launch failed: {e}"),
                }
            }
            runs.extend(ctx.wait_all(started, |_| {}, rep));
        }
    }
    let notes = vec![format!(
        "Three {np}-rank JDcg jobs (--block {np} --groups equal) run at the same time on this machine's cores; the paper's node sharing is emulated with --slowdown (lblib::Slowed), factors × {}.",
        ctx.args.scale
    )];
    (runs, notes, Vec::new())
}

fn changing(ctx: &mut Ctx) -> Outcome {
    let np = ctx.args.np;
    let pin = pins(
        &ctx.args,
        |r| if r < np / 2 { "0".into() } else { "1".into() },
    );
    let groups = halves(np);
    let block = ctx.args.block.to_string();
    let ncomp = ctx.args.competitors;
    let ccpu = ctx.args.competitor_cpu.clone();
    let tmax = ctx.args.timeout;
    let nice = ctx.args.nice;
    let mut runs = Vec::new();
    for rep in 0..ctx.args.repeat {
        for bal in ["none", "fastest"] {
            let base = sv(&["--block", &block, "--groups", &groups, "--balance", bal]);
            let quiet = Job {
                label: format!("balance {bal}, quiet"),
                args: base.clone(),
                pin: pin.clone(),
            };
            let q = ctx.run_one(&quiet, rep);
            let tq = num(&q, "harness_seconds");
            runs.push(q);
            let delay = if tq.is_finite() { tq / 2.0 } else { 1.0 };
            let job = Job {
                label: format!("balance {bal}, {ncomp} busy on CPU {ccpu} from t/2"),
                args: base,
                pin: pin.clone(),
            };
            let r = match ctx.launch(&job, &format!("r{rep}")) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("grid: launch failed: {e}");
                    continue;
                }
            };
            let mut comp: Option<Competitors> = None;
            let res = ctx.wait_all(
                vec![(job, r)],
                |t| {
                    if comp.is_none() && t >= delay {
                        comp = Some(Competitors::start(ncomp, &ccpu, tmax, nice));
                    }
                },
                rep,
            );
            let started = comp.is_some();
            drop(comp);
            if !started {
                eprintln!("grid: run ended before t/2 = {delay:.2} s: competitor never started");
            }
            for mut v in res {
                v["competitor_start_seconds"] = json!(delay);
                v["competitor_started"] = json!(started);
                runs.push(v);
            }
        }
    }
    let notes = vec![format!(
        "Groups {groups}, ranks pinned to CPUs {}; {ncomp} busy loops pinned to CPU {ccpu} start at half of the quiet run's time (same repetition) and are killed when the run ends ({} of {} competitor runs ended before the competitor started). The main table's group rates are the last measured ones; per-phase rates of the balanced runs follow.",
        pin.join(","),
        runs.iter()
            .filter(|r| r.get("competitor_started") == Some(&json!(false)))
            .count(),
        runs.iter()
            .filter(|r| r.get("competitor_started").is_some())
            .count()
    )];
    let cpu = |r: usize| pin.get(r).cloned().unwrap_or_else(|| "any".into());
    let comp = |c: String| {
        if c == ccpu {
            format!("CPU {c}, the competitors' CPU")
        } else {
            format!("CPU {c}")
        }
    };
    let names = group_names(&groups, comp(cpu(0)), comp(cpu(np / 2)));
    (runs, notes, names)
}

fn main() {
    let args = Args::parse();
    if args.np < 2 {
        eprintln!("grid: --np must be at least 2");
        std::process::exit(2);
    }
    let spec: GenSpec = match args.problem.parse() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("grid: {}: {e}", args.problem);
            std::process::exit(2);
        }
    };
    let mut all = exact_eigenvalues(&spec).unwrap_or_default();
    all.sort_by(f64::total_cmp);
    let anorm = all.iter().map(|x| x.abs()).fold(0.0, f64::max);
    let exact: Vec<f64> = all.iter().take(args.nev).copied().collect();
    if !args.jdmg.exists() {
        eprintln!("grid: {} not found (build it first)", args.jdmg.display());
        std::process::exit(2);
    }
    let logs = args.out.join("logs");
    if let Err(e) = fs::create_dir_all(&logs) {
        eprintln!("grid: {}: {e}", logs.display());
        std::process::exit(2);
    }
    let exp = args.experiment;
    let mut ctx = Ctx {
        args,
        exact,
        anorm,
        logs,
        counter: 0,
    };
    let (runs, notes, names) = match exp {
        Experiment::Hetero => hetero(&mut ctx),
        Experiment::Competing => competing(&mut ctx),
        Experiment::Changing => changing(&mut ctx),
        Experiment::Contention => contention(&mut ctx),
        Experiment::Slowlink => slowlink(&mut ctx),
    };
    let mut summary = summarize(&runs);
    let a = &ctx.args;
    let rr = if exp == Experiment::Competing {
        Vec::new()
    } else {
        rate_runs(&runs, &summary, a.maxits.unwrap_or(150))
    };
    for r in &rr {
        if let Some(e) = summary
            .iter_mut()
            .find(|s| s["label"].as_str() == Some(r.label.as_str()))
        {
            e["rates"] = r.to_json();
        }
    }
    let title = format!(
        "grid {}: {} on {} ranks, nev {}, tol {:e}, maxits {}, inner {}, {} repeats",
        exp.name(),
        a.problem,
        a.np,
        a.nev,
        a.tol,
        a.maxits.map_or("default".into(), |m| m.to_string()),
        a.inner.as_deref().unwrap_or("default"),
        a.repeat
    );
    let md = markdown(&title, &summary, &notes) + &rates_markdown(&rr, &names);
    let out: &Path = &a.out;
    let doc = json!({
        "experiment": exp.name(),
        "title": title,
        "problem": a.problem,
        "np": a.np,
        "exact_eigenvalues": ctx.exact,
        "anorm": ctx.anorm,
        "notes": notes,
        "summary": summary,
        "runs": runs,
    });
    let write = |name: String, text: String| {
        let p = out.join(name);
        if let Err(e) =
            matrices::mm::write_file_atomic(&p, |w| std::io::Write::write_all(w, text.as_bytes()))
        {
            eprintln!("grid: {}: {e}", p.display());
        }
    };
    write(
        format!("{}.json", exp.name()),
        serde_json::to_string_pretty(&doc).unwrap_or_default(),
    );
    write(format!("{}.md", exp.name()), md.clone());
    match svg(&title, &summary) {
        Ok(s) => write(format!("{}.svg", exp.name()), s),
        Err(e) => eprintln!("grid: {}.svg: {e}", exp.name()),
    }
    if !rr.is_empty() {
        match rates_svg(&title, &rr, &names) {
            Ok(s) => write(format!("{}_rates.svg", exp.name()), s),
            Err(e) => eprintln!("grid: {}_rates.svg: {e}", exp.name()),
        }
    }
    println!("{md}");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The summary figure has one bar per configuration in each panel, the labels,
    /// and the T panel when a configuration has time limits.
    #[test]
    fn summary_figure_with_plotters() {
        let summary = vec![
            json!({"label": "fine grain", "wall_seconds": 5.5, "imbalance_percent": 29.1}),
            json!({"label": "balanced multigrain", "wall_seconds": 2.7,
                   "imbalance_percent": 7.1, "time_limits": [0.07, 0.065, 0.077]}),
            json!({"label": "failed run", "wall_seconds": f64::NAN}),
        ];
        let s = svg("hetero", &summary).unwrap();
        assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
        for text in [
            "hetero",
            "fine grain",
            "balanced multigrain",
            "5.50",
            "7.10",
            "failed",
            "time limit T per balanced correction phase",
        ] {
            assert!(s.contains(text), "{text}");
        }
        let no_t = svg("t", &summary[..1]).unwrap();
        assert!(!no_t.contains("time limit T"));
    }

    /// The rates figure: one line per group, T on the right axis, the competitor band.
    #[test]
    fn rates_figure_with_plotters() {
        let r = RateRun {
            label: "balanced, busy loops".into(),
            rep: 0.0,
            wall: 3.92,
            hist: vec![
                vec![1205.0, 1198.0],
                vec![1210.0, 1190.0],
                vec![1258.0, 368.0],
            ],
            limits: vec![0.0828, 0.0795],
            ngroups: 2,
            comp_secs: Some(1.76),
            comp_phase: Some(2),
            comp_phase_max: Some(3),
            drop: Some((3, 1)),
        };
        let names = vec!["group 0 (CPU 0)".to_string()];
        let s = rates_svg("changing", &[r], &names).unwrap();
        for text in [
            "changing: per-phase group rates",
            "group 0 (CPU 0)",
            "group 1",
            "time limit T (right axis)",
            "competitor start by timing (phases 2–3)",
            "sustained rate drop detected (phase 3, group 1)",
            "inner steps per second",
        ] {
            assert!(s.contains(text), "{text}");
        }
    }
}
