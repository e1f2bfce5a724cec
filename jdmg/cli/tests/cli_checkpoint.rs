//! `jdmg solve --checkpoint FILE --resume FILE` (issue #13): a solve killed
//! with SIGKILL resumes to the uninterrupted answer; SIGTERM writes a last
//! checkpoint and exits 143 with the partial pairs; thread ranks write one file
//! per rank and resume with the same count only; bad checkpoints are exit 2.
//!
//! Nothing here depends on the speed of the machine. Checkpoints are written at
//! every outer iteration (`--checkpoint-every 0`) and the tests wait for files,
//! never for a time. A SIGKILL may land mid-solve or after the solve ended: what
//! is checked (a resume from any checkpoint gives the uninterrupted answer) holds
//! either way. A signal that must land mid-solve goes to a solve that cannot end
//! by itself (tolerance 1e-300, a budget of minutes), and the checkpoint then
//! resumes at the real tolerance.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use jdmg::Checkpoint;

/// A fixed correction method (`--inner-solver auto` starts its choice afresh
/// in a resumed run, and these tests compare the steps of two runs).
const PROBLEM: [&str; 9] = [
    "solve",
    "--generate",
    "lap3d:24",
    "--nev",
    "4",
    "--tol",
    "1e-10",
    "--inner-solver",
    "bicgstab",
];

fn jdmg() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_jdmg"));
    c.args(PROBLEM).args(["--quiet", "--json"]);
    c
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("jdmg-cli-ckpt-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run(c: &mut Command) -> (i32, serde_json::Value, String) {
    let out: Output = c.output().expect("jdmg runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_str(stdout.trim()).unwrap_or(serde_json::Value::Null);
    (out.status.code().unwrap_or(-1), v, stderr)
}

fn eigenvalues(v: &serde_json::Value) -> Vec<f64> {
    v["eigenvalues"]
        .as_array()
        .expect("eigenvalues")
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// Waits (up to 10 minutes) until every file of `files` exists, or the child ended.
fn wait_for(child: &mut Child, files: &[PathBuf]) {
    let t = Instant::now();
    while !files.iter().all(|f| f.exists()) {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(600),
            "no checkpoint {files:?} after 10 minutes"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn kill(child: &mut Child, sig: libc::c_int) {
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, sig) };
}

fn assert_close(a: &[f64], b: &[f64]) {
    assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() <= 1e-10 * x.abs().max(1.0), "{a:?} vs {b:?}");
    }
}

/// Starts `c` with `--checkpoint f --checkpoint-every every`, its output piped
/// (to read it) or discarded.
fn spawn_checkpointing(
    c: &mut Command,
    f: &std::path::Path,
    every: &str,
    piped: bool,
) -> std::process::Child {
    let out = || if piped { Stdio::piped() } else { Stdio::null() };
    c.arg("--checkpoint")
        .arg(f)
        .args(["--checkpoint-every", every])
        .stdout(out())
        .stderr(out())
        .spawn()
        .unwrap()
}

/// Kill -9 mid-solve, resume, compare with an uninterrupted run.
#[test]
fn sigkill_then_resume_gives_the_uninterrupted_answer() {
    let d = dir("kill");
    let f = d.join("state.ckpt");
    let (code, full, err) = run(&mut jdmg());
    assert_eq!(code, 0, "{err}");
    let full_matvecs = full["matvecs"].as_u64().unwrap();

    // A checkpoint at every loop top from the second on: the newest one, whenever
    // the kill lands (even after the solve ended), is a state before the last
    // iteration.
    let mut child = spawn_checkpointing(&mut jdmg(), &f, "0", false);
    wait_for(&mut child, std::slice::from_ref(&f));
    kill(&mut child, libc::SIGKILL);
    let _ = child.wait();
    let ck = Checkpoint::read(&f).expect("a whole checkpoint");
    assert_eq!((ck.nprocs, ck.n_global), (1, 13824));
    assert!(ck.stats.matvecs > 0);
    assert!(ck.stats.matvecs < full_matvecs);

    let (code, resumed, err) = run(jdmg().args(["--resume", f.to_str().unwrap()]));
    assert_eq!(code, 0, "{err}");
    assert_close(&eigenvalues(&resumed), &eigenvalues(&full));
    // The same steps as the uninterrupted solve: the same total, of which
    // the checkpoint's share was not spent again.
    assert_eq!(resumed["matvecs"].as_u64(), Some(full_matvecs));
    assert_eq!(
        resumed["resumed_from"]["matvecs"].as_u64(),
        Some(ck.stats.matvecs)
    );
    eprintln!(
        "full solve {full_matvecs} matvecs; killed at {} (outer {}), the resumed run spent {}",
        ck.stats.matvecs,
        ck.stats.outer_iterations,
        full_matvecs - ck.stats.matvecs
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// A 46-iteration solve (lap3d:24, nev 8, tol 1e-12), quiet, JSON, plus `extra`.
fn long_solve(extra: &[&str]) -> Command {
    solve_at("1e-12", extra)
}

/// [`long_solve`] at a tolerance it never reaches (1e-300): it runs
/// until a signal stops it (or for minutes, to its matvec budget), so that a
/// signal sent once a checkpoint exists always lands mid-solve. Its checkpoints
/// resume under [`long_solve`] (the tolerance may change on resume).
fn endless_solve(extra: &[&str]) -> Command {
    let mut c = solve_at("1e-300", extra);
    c.args(["--max-matvecs", "20000000"]);
    c
}

fn solve_at(tol: &str, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_jdmg"));
    c.args([
        "solve",
        "--generate",
        "lap3d:24",
        "--nev",
        "8",
        "--tol",
        tol,
        "--inner-solver",
        "bicgstab",
        "--quiet",
        "--json",
    ])
    .args(extra);
    c
}

/// Kills a child left running by a failed assertion.
struct KillOnDrop(Option<Child>);

impl KillOnDrop {
    fn child(&mut self) -> &mut Child {
        self.0.as_mut().expect("a child")
    }

    fn take(&mut self) -> Child {
        self.0.take().expect("a child")
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// SIGTERM: a last checkpoint, the partial pairs printed, exit 143; the
/// checkpoint then resumes to the full answer.
#[test]
fn sigterm_writes_a_last_checkpoint_and_exits_143() {
    let d = dir("term");
    let f = d.join("state.ckpt");
    // A solve that never converges, a checkpoint at each outer iteration: the
    // first checkpoint shows that the solve (and its signal handler) runs, and
    // the signal lands before any end.
    let longer = || long_solve(&[]);
    let mut child = KillOnDrop(Some(spawn_checkpointing(
        &mut endless_solve(&[]),
        &f,
        "0",
        true,
    )));
    wait_for(child.child(), std::slice::from_ref(&f));
    kill(child.child(), libc::SIGTERM);
    let out = child.take().wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(143), "{stdout}\n{stderr}");
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    assert_eq!(eigenvalues(&v).len(), 8);
    assert_eq!(v["converged"], false);
    assert!(stderr.contains("checkpoint written to"), "{stderr}");
    let ck = Checkpoint::read(&f).unwrap();
    // The last checkpoint is the state the solve stopped in.
    assert_eq!(
        Some(ck.stats.outer_iterations as u64),
        v["outer_iterations"].as_u64()
    );
    assert_eq!(Some(ck.stats.matvecs), v["matvecs"].as_u64());
    let (code, resumed, err) = run(longer().args(["--resume", f.to_str().unwrap()]));
    assert_eq!(code, 0, "{err}");
    assert_eq!(resumed["converged"], true);
    assert!(resumed["outer_iterations"].as_u64() > v["outer_iterations"].as_u64());
    let _ = std::fs::remove_dir_all(&d);
}

fn rank_file(f: &Path, r: usize) -> PathBuf {
    PathBuf::from(format!("{}.rank{r}", f.display()))
}

/// Rank `r`'s previous checkpoint, kept beside the newest one.
fn prev_file(f: &Path, r: usize) -> PathBuf {
    PathBuf::from(format!("{}.prev", rank_file(f, r).display()))
}

/// `--ranks 2`: one file per rank; resume with 2 ranks reaches the 2-rank
/// answer; 3 ranks or one process on a 2-rank checkpoint is exit 2.
#[test]
fn two_rank_checkpoint_resumes_with_two_ranks_only() {
    let d = dir("ranks");
    let f = d.join("state.ckpt");
    let fs = f.to_str().unwrap();
    let (code, full, err) = run(jdmg().args(["--ranks", "2"]));
    assert_eq!(code, 0, "{err}");
    // A checkpoint set at every loop top; the kill lands mid-solve or after the
    // end: either way the newest complete set is a state of the same solve.
    let mut child = spawn_checkpointing(jdmg().args(["--ranks", "2"]), &f, "0", false);
    wait_for(&mut child, &[rank_file(&f, 0), rank_file(&f, 1)]);
    kill(&mut child, libc::SIGKILL);
    let _ = child.wait();
    for r in 0..2 {
        // A kill between a rank's move of its file to `.prev` and the write of
        // the next one leaves only the `.prev` (the resume below takes it, as
        // `two_rank_sigterm_and_an_incomplete_set` checks); put it back, so
        // that the refusals checked last read the newest file's process count.
        let newest = rank_file(&f, r);
        if !newest.exists() {
            std::fs::copy(prev_file(&f, r), &newest).unwrap();
        }
        let ck = Checkpoint::read(&newest).unwrap();
        assert_eq!((ck.rank, ck.nprocs), (r, 2));
        assert!(ck.stats.matvecs > 0);
    }
    let (code, resumed, err) = run(jdmg().args(["--ranks", "2", "--resume", fs]));
    assert_eq!(code, 0, "{err}");
    assert_close(&eigenvalues(&resumed), &eigenvalues(&full));
    assert_eq!(resumed["matvecs"], full["matvecs"]);

    let (code, _, err) = run(jdmg().args(["--ranks", "3", "--resume", fs]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("2 process(es), this run has 3"), "{err}");
    let (code, _, err) = run(jdmg().args(["--resume", fs]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("2 process(es), this run has 1"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

/// Bad paths and files: exit 2 up front with a message, never a panic.
#[test]
fn bad_checkpoints_are_exit_2() {
    let d = dir("bad");
    let small = |extra: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_jdmg"));
        c.args(["solve", "--generate", "lap3d:6", "--nev", "2", "--quiet"])
            .args(extra);
        run(&mut c)
    };
    // unwritable directory
    let (code, _, err) = small(&["--checkpoint", "/nonexistent-dir/x.ckpt"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--checkpoint"), "{err}");
    // missing, foreign and corrupt files
    let (code, _, err) = small(&["--resume", d.join("missing").to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    let junk = d.join("junk.ckpt");
    std::fs::write(&junk, b"not a checkpoint at all").unwrap();
    let (code, _, err) = small(&["--resume", junk.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a jdmg checkpoint"), "{err}");
    // a real checkpoint, then a flipped byte
    let f = d.join("s.ckpt");
    let (code, _, err) = small(&[
        "--checkpoint",
        f.to_str().unwrap(),
        "--checkpoint-every",
        "0",
    ]);
    assert_eq!(code, 0, "{err}");
    let mut bytes = std::fs::read(&f).unwrap();
    // a matrix of another dimension
    let (code, _, err) = run(Command::new(env!("CARGO_BIN_EXE_jdmg")).args([
        "solve",
        "--generate",
        "lap3d:7",
        "--nev",
        "2",
        "--quiet",
        "--resume",
        f.to_str().unwrap(),
    ]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("dimension"), "{err}");
    // other parameters
    let mut c = Command::new(env!("CARGO_BIN_EXE_jdmg"));
    c.args([
        "solve",
        "--generate",
        "lap3d:6",
        "--nev",
        "3",
        "--quiet",
        "--resume",
    ])
    .arg(&f);
    let (code, _, err) = run(&mut c);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("nev"), "{err}");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(&f, &bytes).unwrap();
    let (code, _, err) = small(&["--resume", f.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("checksum"), "{err}");
    // solve groups write checkpoints too (they used to be refused)
    let (code, _, err) = small(&[
        "--ranks",
        "2",
        "--groups",
        "2",
        "--checkpoint",
        f.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

/// `--ranks 2 --checkpoint`: SIGTERM stops both ranks at one iteration (the
/// checkpoint poll makes them agree), each writes its last checkpoint, exit
/// 143. A set left incomplete by a kill between the two ranks' writes
/// (emulated: rank 1's newest file replaced by its previous one) resumes from
/// the previous set, which every rank has.
#[test]
fn two_rank_sigterm_and_an_incomplete_set() {
    let d = dir("ranks-term");
    let f = d.join("state.ckpt");
    let longer = || long_solve(&["--ranks", "2"]);
    // never converges: the signal lands mid-solve
    let mut child = KillOnDrop(Some(spawn_checkpointing(
        &mut endless_solve(&["--ranks", "2"]),
        &f,
        "0",
        true,
    )));
    let prev = |r: usize| prev_file(&f, r);
    // two checkpoints per rank: the newest and the previous one
    wait_for(child.child(), &[prev(0), prev(1)]);
    kill(child.child(), libc::SIGTERM);
    let out = child.take().wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(143), "{stdout}\n{stderr}");
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    assert_eq!(eigenvalues(&v).len(), 8);
    let newest: Vec<Checkpoint> = (0..2)
        .map(|r| Checkpoint::read(&rank_file(&f, r)).unwrap())
        .collect();
    for ck in &newest {
        assert_eq!(
            Some(ck.stats.outer_iterations as u64),
            v["outer_iterations"].as_u64()
        );
    }
    let older = Checkpoint::read(&prev(1)).unwrap();
    assert!(older.stats.outer_iterations < newest[1].stats.outer_iterations);
    std::fs::copy(prev(1), rank_file(&f, 1)).unwrap();
    let (code, resumed, err) = run(longer().args(["--resume", f.to_str().unwrap()]));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("previous checkpoint set"), "{err}");
    assert_eq!(
        resumed["resumed_from"]["outer_iterations"].as_u64(),
        Some(older.stats.outer_iterations as u64)
    );
    assert_eq!(resumed["converged"], true);
    let _ = std::fs::remove_dir_all(&d);
}

/// Solve groups draw --plot and write checkpoints (each thread rank its fine
/// rows, named by its fine-grain rank) and resume from them to the uninterrupted answer: a
/// budget stops the first solve (exit 3) after a few checkpoints, the resumed
/// one converges with the eigenvalues of a solve never stopped.
#[test]
fn solve_groups_checkpoint_and_resume() {
    let d = dir("groups");
    let ck = d.join("groups.ckpt");
    let groups = [
        "--generate",
        "lap3d:8",
        "--nev",
        "2",
        "--ranks",
        "4",
        "--groups",
        "equal",
        "--balance",
        "none",
    ];
    let solve = |extra: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_jdmg"));
        c.args([
            "solve", "--tol", "1e-10", "--block", "2", "--quiet", "--json",
        ])
        .args(groups)
        .args(extra);
        run(&mut c)
    };
    // --plot draws the residual history of solve groups too
    let plot = d.join("groups.svg");
    let (code, whole, err) = solve(&["--plot", plot.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let svg = std::fs::read_to_string(&plot).expect("the plot");
    assert!(svg.contains("<svg"), "{}", &svg[..svg.len().min(200)]);
    let want = eigenvalues(&whole);
    let outer = whole["stats"]["outer_iterations"].as_u64().unwrap();
    assert!(outer > 3, "{outer}");
    let budget = (whole["stats"]["matvecs"].as_u64().unwrap() / 2).to_string();
    let (code, _, err) = solve(&[
        "--max-matvecs",
        &budget,
        "--checkpoint",
        ck.to_str().unwrap(),
        "--checkpoint-every",
        "0",
    ]);
    assert_eq!(code, 3, "the budget stops it: {err}");
    for r in 0..4 {
        let f = PathBuf::from(format!("{}.rank{r}", ck.display()));
        let c = Checkpoint::read(&f).expect("a checkpoint per rank");
        assert_eq!(c.rank, r);
        assert!(c.stats.outer_iterations >= 1);
    }
    let (code, resumed, err) = solve(&["--resume", ck.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        resumed["resumed_from"]["outer_iterations"]
            .as_u64()
            .unwrap()
            >= 1
    );
    assert_close(&eigenvalues(&resumed), &want);
    assert_eq!(resumed["mode"], "multigrain");
    let _ = std::fs::remove_dir_all(&d);
}

/// Shift-and-invert writes checkpoints (of the state on B = (A − σI)⁻¹) and
/// resumes from them to the uninterrupted answer, serial and on two thread
/// ranks; a resume with another σ or without the transformation is exit 2
/// naming it. The first run stops on its matvec budget (exit 3) after
/// checkpointing every outer iteration: nothing depends on time.
#[test]
fn shift_invert_checkpoints_resume_with_the_same_shift_only() {
    let d = dir("sinvert");
    let base = |sigma: &str| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_jdmg"));
        c.args([
            "solve",
            "--generate",
            "lap3d:16",
            "--nev",
            "6",
            "--tol",
            "1e-12",
        ])
        .args(["--target", sigma, "--quiet", "--json"]);
        c
    };
    let problem = |sigma: &str| {
        let mut c = base(sigma);
        c.args(["--st", "sinvert"]);
        c
    };
    for ranks in ["1", "2"] {
        let f = d.join(format!("st-{ranks}.ckpt"));
        let fs = f.to_str().unwrap();
        let (code, full, err) = run(problem("1.0").args(["--ranks", ranks]));
        assert_eq!(code, 0, "{err}");
        let (code, _, err) = run(problem("1.0").args(["--ranks", ranks]).args([
            "--checkpoint",
            fs,
            "--checkpoint-every",
            "0",
            "--max-matvecs",
            "30",
        ]));
        assert_eq!(code, 3, "{err}");
        let nprocs = ranks.parse().unwrap();
        let ck = Checkpoint::read(&jdmg::checkpoint::rank_path(&f, 0, nprocs))
            .expect("a whole checkpoint");
        assert_eq!(ck.shift_invert, Some(1.0));
        assert!(ck.stats.matvecs > 0 && ck.stats.matvecs <= 30);

        let (code, resumed, err) = run(problem("1.0").args(["--ranks", ranks, "--resume", fs]));
        assert_eq!(code, 0, "{err}");
        assert_close(&eigenvalues(&resumed), &eigenvalues(&full));
        assert_eq!(resumed["matvecs"], full["matvecs"]);

        let (code, _, err) = run(problem("1.01").args(["--ranks", ranks, "--resume", fs]));
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("spectral transformation"), "{err}");
        let mut plain = base("1.0");
        plain.args(["--ranks", ranks, "--resume", fs]);
        let (code, _, err) = run(&mut plain);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("none (a solve on A itself)"), "{err}");
    }
}
