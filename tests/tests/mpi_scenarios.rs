//! The MPI scenarios, run through `mpirun` on 4 ranks: every `Comm` collective
//! over rsmpi, the annealing example balanced and not, fine-grain jdmg solves
//! (the serial answer, JDQMR), shift-and-invert with and without a mass
//! matrix (the serial answer), a balanced multigrain solve, a checkpoint whose
//! ranks are SIGKILLed and resumed, a rank killed mid-solve, a rank SIGTERMed
//! mid-solve, and the dense LU and QR.
//!
//! They need `mpirun` and binaries built with MPI:
//!
//! ```text
//! cargo build -p lbcomm -p lblib -p jdmg-cli --features lbcomm/mpi,lblib/mpi,jdmg-cli/mpi --bins --examples
//! cargo test -p jdmg-tests --test mpi_scenarios -- --ignored
//! ```
//!
//! The binaries are looked for in `$JDMG_MPI_BIN_DIR`, else in the target
//! directory of this test (`target/debug`). Every test is `#[ignore]`d
//! (`testenv::mpi_test`): `cargo test` never makes an MPI build (a workspace
//! run even rebuilds `target/debug/jdmg` without MPI), so they run only when
//! asked for, with `-- --ignored`, and then fail without `mpirun` or an MPI
//! build, saying which. The scenarios run one at a time (a lock):
//! 4 ranks each are already more than the cores of a small machine.
//!
//! Nothing waits for a time: a kill is sent once the ranks' checkpoint files
//! exist, and what is checked after it holds whether the kill landed mid-solve
//! or not; time limits (10 minutes) only turn a hang into a failure.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;

/// One scenario at a time.
static LOCK: Mutex<()> = Mutex::new(());

const RANKS: &str = "4";

/// Where mpirun and the MPI binaries are.
struct Mpi {
    mpirun: PathBuf,
    bin: PathBuf,
}

impl Mpi {
    /// `mpirun --oversubscribe -np <np> <program>` with OpenMPI's run-as-root
    /// switches (containers run as root).
    fn run(&self, np: &str, program: &Path) -> Command {
        let mut c = Command::new(&self.mpirun);
        c.args(["--oversubscribe", "-np", np])
            .arg(program)
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .env("OMPI_MCA_rmaps_base_oversubscribe", "1");
        c
    }

    /// `jdmg` under mpirun on `np` ranks.
    fn jdmg(&self, np: &str) -> Command {
        self.run(np, &self.bin.join("jdmg"))
    }

    /// `jdmg` as one process, without MPI.
    fn jdmg_serial(&self) -> Command {
        Command::new(self.bin.join("jdmg"))
    }

    fn example(&self, name: &str) -> PathBuf {
        self.bin.join("examples").join(name)
    }
}

/// Writes a line to the process's stderr, past the test harness's capture.
fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

fn find_in_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// The target directory of the binaries: `$JDMG_MPI_BIN_DIR`, else the one
/// holding this test (`target/debug/deps/..`).
fn bin_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("JDMG_MPI_BIN_DIR") {
        return PathBuf::from(d);
    }
    let exe = std::env::current_exe().expect("the test's path");
    exe.parent()
        .and_then(Path::parent)
        .map_or_else(|| PathBuf::from("target/debug"), Path::to_path_buf)
}

/// Why the scenarios cannot run here, if they cannot.
fn missing() -> Result<Mpi, String> {
    let mpirun = find_in_path("mpirun").ok_or("mpirun is not on the PATH")?;
    let bin = bin_dir();
    for p in [
        bin.join("jdmg"),
        bin.join("examples/mpi_allreduce"),
        bin.join("examples/anneal"),
    ] {
        if !p.is_file() {
            return Err(format!("{} is missing", p.display()));
        }
    }
    let mpi = Mpi { mpirun, bin };
    // A jdmg built without MPI refuses to run under mpirun (exit 2).
    let probe = output(
        mpi.jdmg("2")
            .args(["solve", "--generate", "lap3d:4", "--nev", "1", "--json"])
            .stdin(Stdio::null()),
    );
    match serde_json::from_slice::<Value>(&probe.stdout) {
        Ok(v) if v["nprocs"] == 2 => Ok(mpi),
        _ => Err(format!(
            "{} under mpirun is not an MPI build ({})",
            mpi.bin.join("jdmg").display(),
            String::from_utf8_lossy(&probe.stderr).trim()
        )),
    }
}

/// The MPI setup, probed once.
///
/// # Panics
/// When it is missing (these tests run only when asked for, `-- --ignored`).
fn mpi() -> &'static Mpi {
    static SETUP: OnceLock<Result<Mpi, String>> = OnceLock::new();
    match SETUP.get_or_init(missing) {
        Ok(m) => m,
        Err(why) => panic!(
            "{why}; build with: cargo build -p lbcomm -p lblib -p jdmg-cli \
             --features lbcomm/mpi,lblib/mpi,jdmg-cli/mpi --bins --examples"
        ),
    }
}

/// Runs `c` to its end (at most 10 minutes, then it is killed: a hang fails).
fn output(c: &mut Command) -> Output {
    let child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the command starts");
    wait_output(child, Duration::from_secs(600))
}

/// Waits for `child` (its output read meanwhile), killing it after `limit`.
fn wait_output(child: Child, limit: Duration) -> Output {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.expect("the command ends"),
        Err(_) => {
            // SAFETY: kill(2) on our own child.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            panic!("still running after {limit:?}: killed");
        }
    }
}

fn json(out: &Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "not one JSON object ({e}): {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn ok_json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "{:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    json(out)
}

fn values(v: &Value, key: &str) -> Vec<f64> {
    v[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} in {v}"))
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// The `count` smallest eigenvalues of the 3-D Dirichlet Laplacian on an
/// `m`³ grid.
fn lap3d_smallest(m: usize, count: usize) -> Vec<f64> {
    let e = |i: usize| 2.0 - 2.0 * (std::f64::consts::PI * i as f64 / (m + 1) as f64).cos();
    let mut all = Vec::new();
    for i in 1..=count {
        for j in 1..=count {
            for k in 1..=count {
                all.push(e(i) + e(j) + e(k));
            }
        }
    }
    all.sort_by(f64::total_cmp);
    all.truncate(count);
    all
}

/// Pids of the processes named `name` whose parent is `parent` (from /proc).
fn children_named(parent: u32, name: &str) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let pid: i32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // pid (comm) state ppid ...
        let (open, close) = (stat.find('(')?, stat.rfind(')')?);
        let comm = &stat[open + 1..close];
        let ppid: u32 = stat[close + 2..].split_whitespace().nth(1)?.parse().ok()?;
        (ppid == parent && comm == name).then_some(pid)
    })
    .collect()
}

/// Waits until `done()` or the child ended (at most 10 minutes).
fn wait_until(child: &mut Child, mut done: impl FnMut() -> bool) {
    let t = Instant::now();
    while !done() {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(600),
            "nothing after 10 minutes"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("jdmg-mpi-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[testenv::mpi_test]
fn every_comm_collective_over_rsmpi() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let m = mpi();
    let out = output(&mut m.run(RANKS, &m.example("mpi_allreduce")));
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[testenv::mpi_test]
fn annealing_with_one_rank_slowed_balanced_and_not() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let m = mpi();
    for balance in ["off", "on"] {
        let out = output(m.run(RANKS, &m.example("anneal")).args([
            "--mpi",
            "--slowdown",
            "1,1,1,3",
            "--balance",
            balance,
            "--phases",
            "10",
            "--ops",
            "3000",
        ]));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let last = text.lines().last().unwrap_or_default();
        let v: Value = serde_json::from_str(last).expect("a JSON summary line");
        say(&format!("anneal --balance {balance}: {last}"));
        assert!(v.is_object(), "{last}");
    }
}

#[testenv::mpi_test]
fn fine_grain_solve_on_4_ranks_equals_the_serial_solve() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let m = mpi();
    let args = [
        "solve",
        "--generate",
        "lap3d:16",
        "--nev",
        "4",
        "--tol",
        "1e-10",
        "--json",
    ];
    let serial = ok_json(&output(m.jdmg_serial().args(args)));
    // MPI detected from mpirun's environment, no --mpi
    let par = ok_json(&output(m.jdmg(RANKS).args(args)));
    assert_eq!(par["nprocs"], 4);
    assert_eq!(
        (serial["converged"].clone(), par["converged"].clone()),
        (Value::Bool(true), Value::Bool(true))
    );
    let exact = lap3d_smallest(16, 4);
    for ((a, b), x) in values(&serial, "eigenvalues")
        .iter()
        .zip(values(&par, "eigenvalues"))
        .zip(&exact)
    {
        assert!((a - x).abs() < 1e-8 && (b - x).abs() < 1e-8, "{a} {b} {x}");
    }
}

/// `--st sinvert` under mpirun (rank 0 factors, every product gathers the
/// block on it and scatters back): the serial answer, standard (spectrum
/// 1..1000 at σ = 500.3) and generalized (fem2d:20 with its mass matrix,
/// K − σM), the same inertia.
#[testenv::mpi_test]
fn shift_invert_on_4_ranks_equals_the_serial_solve() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let m = mpi();
    let standard: &[&str] = &["--generate", "spectrum:1000:1:1000", "--target", "500.3"];
    let pencil: &[&str] = &[
        "--generate",
        "fem2d:20",
        "--mass-generate",
        "--target",
        "5000",
    ];
    for problem in [standard, pencil] {
        let mut args = vec![
            "solve", "--st", "sinvert", "--nev", "4", "--tol", "1e-11", "--json",
        ];
        args.extend_from_slice(problem);
        let serial = ok_json(&output(m.jdmg_serial().args(&args)));
        let par = ok_json(&output(m.jdmg(RANKS).args(&args)));
        assert_eq!(par["nprocs"], 4);
        assert_eq!(par["converged"], Value::Bool(true), "{problem:?}");
        assert_eq!(
            serial["stats"]["eigenvalues_below_shift"],
            par["stats"]["eigenvalues_below_shift"]
        );
        let (s, p) = (values(&serial, "eigenvalues"), values(&par, "eigenvalues"));
        assert_eq!(s.len(), 4);
        for (a, b) in s.iter().zip(&p) {
            assert!(
                (a - b).abs() <= 1e-9 * a.abs(),
                "{problem:?}: {s:?} against {p:?}"
            );
        }
    }
}

/// Harmonic extraction of a pencil (fem2d:20 with its mass matrix, σ = 5000)
/// under mpirun: its solves with M are distributed conjugate gradients; the
/// serial eigenvalues, harmonic extraction reported by both.
#[testenv::mpi_test]
fn harmonic_pencil_on_4_ranks_equals_the_serial_solve() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let m = mpi();
    let args = [
        "solve",
        "--generate",
        "fem2d:20",
        "--mass-generate",
        "--target",
        "5000",
        "--extraction",
        "harmonic",
        "--nev",
        "4",
        "--tol",
        "1e-10",
        "--json",
    ];
    let serial = ok_json(&output(m.jdmg_serial().args(args)));
    let par = ok_json(&output(m.jdmg(RANKS).args(args)));
    assert_eq!(par["nprocs"], 4);
    assert_eq!(par["converged"], Value::Bool(true));
    for r in [&serial, &par] {
        assert_eq!(r["stats"]["extraction"], "harmonic");
    }
    let (s, p) = (values(&serial, "eigenvalues"), values(&par, "eigenvalues"));
    assert_eq!(s.len(), 4);
    for (a, b) in s.iter().zip(&p) {
        assert!((a - b).abs() <= 1e-9 * a.abs(), "{s:?} against {p:?}");
    }
}

/// Every eigenvalue of lap3d:12 in [0, 1.2] on 4 MPI ranks in 2 solve
/// groups, shared by measured rates and equally: the closed-form set,
/// multiplicities included, from every rank's report, as the serial solve.
#[testenv::mpi_test]
fn interval_slices_over_two_solve_groups_give_the_exact_set() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let m = mpi();
    let e = |i: usize| 2.0 - 2.0 * (std::f64::consts::PI * i as f64 / 13.0).cos();
    let mut want = Vec::new();
    for i in 1..=12 {
        for j in 1..=12 {
            for k in 1..=12 {
                let l = e(i) + e(j) + e(k);
                if l <= 1.2 {
                    want.push(l);
                }
            }
        }
    }
    want.sort_by(f64::total_cmp);
    assert!(want.len() > 20, "{}", want.len());
    for split in ["rates", "equal"] {
        let args = [
            "solve",
            "--generate",
            "lap3d:12",
            "--interval",
            "0:1.2",
            "--per-slice",
            "12",
            "--groups",
            "2",
            "--slice-split",
            split,
            "--tol",
            "1e-10",
            "--json",
        ];
        let par = ok_json(&output(m.jdmg(RANKS).args(args)));
        assert_eq!(par["nprocs"], 4);
        assert_eq!(par["converged"], Value::Bool(true), "{split}");
        assert_eq!(par["stats"]["interval"]["groups"], 2, "{split}");
        let got = values(&par, "eigenvalues");
        assert_eq!(got.len(), want.len(), "{split}: {got:?}");
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (g - w).abs() <= 1e-9 * w,
                "{split}: {got:?} against {want:?}"
            );
        }
    }
}

#[testenv::mpi_test]
fn fine_grain_jdqmr_on_4_ranks_equals_the_analytic_spectrum() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let m = mpi();
    let v = ok_json(&output(m.jdmg(RANKS).args([
        "solve",
        "--mpi",
        "--generate",
        "lap3d:16",
        "--nev",
        "4",
        "--tol",
        "1e-10",
        "--inner-solver",
        "qmrs",
        "--maxits",
        "50",
        "--precond",
        "jacobi",
        "--json",
    ])));
    assert_eq!(v["nprocs"], 4);
    assert_eq!(v["converged"], true);
    assert_eq!(v["params"]["correction"]["solver"], "qmrs");
    for (b, x) in values(&v, "eigenvalues").iter().zip(lap3d_smallest(16, 4)) {
        assert!((b - x).abs() < 1e-8, "{b} {x}");
    }
}

#[testenv::mpi_test]
fn balanced_multigrain_with_two_solve_groups_and_a_slowed_rank() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let m = mpi();
    let v = ok_json(&output(m.jdmg(RANKS).args([
        "solve",
        "--mpi",
        "--generate",
        "lap3d:12",
        "--nev",
        "2",
        "--block",
        "2",
        "--tol",
        "1e-8",
        "--groups",
        "equal",
        "--balance",
        "fastest",
        "--maxits",
        "40",
        "--inner",
        "fixed",
        "--slowdown",
        "1,1,2,2",
        "--json",
    ])));
    assert_eq!(v["converged"], true);
    assert_eq!(v["nprocs"], 4);
    assert_eq!(v["mode"], "multigrain");
    for (a, x) in values(&v, "eigenvalues").iter().zip(lap3d_smallest(12, 2)) {
        assert!((a - x).abs() < 1e-6, "{a} {x}");
    }
    say(&format!(
        "JDmg x4: imbalance {}%, group steps {}",
        v["imbalance_percent"], v["multigrain"]["group_inner_steps"]
    ));
}

/// Every rank SIGKILLed once each has a checkpoint (one per outer iteration);
/// the resume on 4 ranks equals the uninterrupted solve, 3 ranks are refused.
/// Whether the kill lands mid-solve or after the solve ended, the newest
/// complete set is a state before the last iteration.
#[testenv::mpi_test]
fn checkpoint_of_4_killed_ranks_resumes_to_the_uninterrupted_answer() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let m = mpi();
    let d = scratch("ckpt");
    let ck = d.join("state.ckpt");
    let rank = |r: usize| PathBuf::from(format!("{}.rank{r}", ck.display()));
    let prev = |r: usize| PathBuf::from(format!("{}.rank{r}.prev", ck.display()));
    let base = [
        "solve",
        "--generate",
        "lap3d:24",
        "--nev",
        "8",
        "--tol",
        "1e-12",
        "--quiet",
    ];
    let full = ok_json(&output(m.jdmg(RANKS).args(base).arg("--json")));
    let child = m
        .jdmg(RANKS)
        .args(base)
        .arg("--checkpoint")
        .arg(&ck)
        .args(["--checkpoint-every", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut child = child;
    let have_set = || (0..4).all(|r| rank(r).exists() || prev(r).exists());
    wait_until(&mut child, have_set);
    let ranks = children_named(child.id(), "jdmg");
    say(&format!(
        "ranks still running when the checkpoint set was there: {}",
        ranks.len()
    ));
    for pid in ranks {
        // SAFETY: kill(2) on a rank of our own mpirun.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let status = wait_output(child, Duration::from_secs(600)).status;
    say(&format!("mpirun after the SIGKILL: {status}"));
    assert!(have_set(), "no complete checkpoint set");
    // A rank killed between its move to .prev and its next write has only the
    // .prev; the resume takes it, the 3-rank refusal reads rank 0's newest file.
    for r in 0..4 {
        if !rank(r).exists() {
            std::fs::copy(prev(r), rank(r)).unwrap();
        }
    }
    let resumed = ok_json(&output(
        m.jdmg(RANKS)
            .args(base)
            .arg("--resume")
            .arg(&ck)
            .arg("--json"),
    ));
    assert_eq!(full["converged"], true);
    assert_eq!(resumed["converged"], true);
    assert_eq!(resumed["nprocs"], 4);
    let before = resumed["resumed_from"]["matvecs"].as_u64().unwrap();
    assert!(0 < before && before < full["matvecs"].as_u64().unwrap());
    for (a, b) in values(&full, "eigenvalues")
        .iter()
        .zip(values(&resumed, "eigenvalues"))
    {
        assert!((a - b).abs() <= 1e-10 * a.abs(), "{a} {b}");
    }
    let three = output(m.jdmg("3").args(base).arg("--resume").arg(&ck));
    let err = String::from_utf8_lossy(&three.stderr);
    assert_eq!(three.status.code(), Some(2), "{err}");
    assert!(err.contains("process(es)"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

/// A rank SIGKILLed in the middle of a solve that cannot end by itself: mpirun
/// ends the job (non-zero) and names the dead rank, never hangs.
#[testenv::mpi_test]
fn a_rank_killed_mid_solve_ends_the_job_with_a_message() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let m = mpi();
    let d = scratch("death");
    let ck = d.join("alive.ckpt");
    // tol 1e-300: no convergence before the matvec cap; the checkpoint files
    // (one per outer iteration) show that every rank is in the solve loop
    let child = m
        .jdmg(RANKS)
        .args([
            "solve",
            "--generate",
            "lap3d:24",
            "--nev",
            "8",
            "--tol",
            "1e-300",
            "--max-matvecs",
            "100000000",
            "--quiet",
            "--checkpoint-every",
            "0",
            "--checkpoint",
        ])
        .arg(&ck)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = child;
    wait_until(&mut child, || {
        (0..4).all(|r| PathBuf::from(format!("{}.rank{r}", ck.display())).exists())
    });
    let ranks = children_named(child.id(), "jdmg");
    assert_eq!(ranks.len(), 4, "the 4 ranks run");
    // SAFETY: kill(2) on a rank of our own mpirun.
    unsafe { libc::kill(ranks[2], libc::SIGKILL) };
    let out = wait_output(child, Duration::from_secs(300));
    let err = String::from_utf8_lossy(&out.stderr).to_lowercase();
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("signal 9") || err.contains("killed"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

/// Whether process `pid` catches `sig` (`SigCgt` in `/proc/PID/status`).
fn catches(pid: i32, sig: libc::c_int) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            let m = s.lines().find_map(|l| l.strip_prefix("SigCgt:"))?;
            u64::from_str_radix(m.trim(), 16).ok()
        })
        .is_some_and(|mask| mask & (1u64 << (sig - 1)) != 0)
}

/// SIGTERM to one rank of a solve that cannot end by itself (tolerance
/// 1e-300), fine grain and with solve groups: every rank stops at the same
/// outer iteration, rank 0 prints the pairs and "interrupted" (before: "not
/// converged: 27 of 40", exit 3), and the ranks exit 143, which mpirun passes
/// on. The signal is sent once both ranks catch it.
#[testenv::mpi_test]
fn a_signal_to_one_rank_interrupts_every_rank() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let m = mpi();
    for extra in [&[][..], &["--groups", "equal"][..]] {
        let mut child = m
            .jdmg("2")
            .args([
                "solve",
                "--generate",
                "lap3d:16",
                "--nev",
                "4",
                "--block",
                "2",
            ])
            .args(["--tol", "1e-300", "--max-matvecs", "100000000", "--quiet"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (pid, mut ranks) = (child.id(), Vec::new());
        wait_until(&mut child, || {
            ranks = children_named(pid, "jdmg");
            ranks.len() == 2 && ranks.iter().all(|&r| catches(r, libc::SIGTERM))
        });
        assert_eq!(ranks.len(), 2, "the 2 ranks run");
        // SAFETY: kill(2) on a rank of our own mpirun.
        unsafe { libc::kill(ranks[1], libc::SIGTERM) };
        let out = wait_output(child, Duration::from_secs(600));
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        say(&format!("{extra:?}: {:?}\n{stdout}{stderr}", out.status));
        assert_eq!(out.status.code(), Some(143), "{extra:?}: {stderr}");
        assert!(
            stderr.contains("interrupted: 0 of 4"),
            "{extra:?}: {stderr}"
        );
        assert!(!stderr.contains("not converged"), "{extra:?}: {stderr}");
        // the table: the estimates so far, at least one block's (a stop at
        // the first outer iteration has no more)
        let rows = stdout
            .lines()
            .filter(|l| {
                let l = l.trim();
                l.starts_with(|c: char| c.is_ascii_digit())
                    && (l.ends_with(" true") || l.ends_with(" false"))
            })
            .count();
        assert!((2..=4).contains(&rows), "{extra:?}: {stdout}");
    }
}

#[testenv::mpi_test]
fn dense_lu_on_measured_rates_and_qr_on_4_ranks() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let m = mpi();
    let lu = ok_json(&output(m.jdmg(RANKS).args([
        "dense",
        "lu",
        "--mpi",
        "--n",
        "384",
        "--block",
        "32",
        "--layout",
        "hetero",
        "--slowdown",
        "1,1,1,3",
        "--rhs",
        "--json",
    ])));
    let qr = ok_json(&output(m.jdmg(RANKS).args([
        "dense",
        "qr",
        "--mpi",
        "--n",
        "384",
        "--block",
        "32",
        "--layout",
        "optimized",
        "--json",
    ])));
    let eps = f64::EPSILON;
    for r in [&lu, &qr] {
        assert_eq!(r["nprocs"], 4);
        let cols: u64 = r["columns_per_rank"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_u64().unwrap())
            .sum();
        assert_eq!(cols, 384);
        assert!(r["backward_error"].as_f64().unwrap() <= 384.0 * eps, "{r}");
    }
    assert!(
        lu["solve_residual"].as_f64().unwrap() <= 384.0 * eps,
        "{lu}"
    );
    assert!(qr["orthogonality"].as_f64().unwrap() <= 384.0 * eps, "{qr}");
}
