//! No lost work (issue 22): SIGTERM, SIGINT and SIGHUP stop thread-rank solves
//! (fine grain or solve groups) without --checkpoint as they stop serial ones (converged pairs printed, exit
//! 128 + signal), and outputs that would overwrite each other, an input or the
//! redirected standard output are refused before any work (exit 2).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn jdmg() -> Command {
    Command::new(env!("CARGO_BIN_EXE_jdmg"))
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("jdmg-lost-work-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

mod common;

/// `jdmg solve --ranks 2` on a solve that cannot end by itself (tolerance 1e-300),
/// stopped by `sig` once jdmg catches it: nothing depends on the machine's speed.
#[cfg(target_os = "linux")]
fn ranks_interrupted_by(sig: libc::c_int, extra: &[&str]) -> (i32, String) {
    let mut child = jdmg()
        .args([
            "solve",
            "--generate",
            "lap3d:24",
            "--nev",
            "12",
            // A block of 12: the basis holds 12 Ritz pairs from the first iteration on.
            "--block",
            "12",
            "--tol",
            "1e-300",
            "--max-matvecs",
            "50000000",
        ])
        .args(["--ranks", "2", "--quiet", "--json"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("jdmg runs");
    common::wait_for_handlers(&mut child, &[libc::SIGINT, libc::SIGTERM, libc::SIGHUP]);
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, sig) };
    common::wait_after_signal(child)
}

/// Before: exit 143/130/129 with an empty standard output.
#[cfg(target_os = "linux")]
#[test]
fn signals_to_thread_ranks_print_the_pairs() {
    for (sig, code) in [
        (libc::SIGTERM, 143),
        (libc::SIGINT, 130),
        (libc::SIGHUP, 129),
    ] {
        let (got, stdout) = ranks_interrupted_by(sig, &[]);
        assert_eq!(got, code, "signal {sig}: {stdout}");
        let v: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
        assert_eq!(
            v["eigenvalues"].as_array().map(|a| a.len()),
            Some(12),
            "{v}"
        );
        assert_eq!(v["converged"], false);
        assert_eq!(v["nprocs"], 2);
    }
}

/// The same with solve groups (multigrain, a re-partitioning monitor polled
/// beside the stop), without --checkpoint. Before: no handler, exit 143/130
/// with nothing printed.
#[cfg(target_os = "linux")]
#[test]
fn signals_to_solve_groups_print_the_pairs() {
    for (sig, code) in [(libc::SIGTERM, 143), (libc::SIGINT, 130)] {
        let (got, stdout) = ranks_interrupted_by(sig, &["--groups", "equal"]);
        assert_eq!(got, code, "signal {sig}: {stdout}");
        let v: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
        assert_eq!(v["mode"], "multigrain", "{v}");
        let ev = v["eigenvalues"].as_array().expect("eigenvalues");
        assert_eq!(ev.len(), 12, "{v}");
        // estimates of the smallest eigenvalues, ascending, inside lap3d's [0, 12]
        let ev: Vec<f64> = ev.iter().map(|x| x.as_f64().expect("a number")).collect();
        assert!(ev.windows(2).all(|w| w[0] <= w[1]), "{v}");
        assert!(ev.iter().all(|&x| x > 0.0 && x < 12.0), "{v}");
        assert_eq!(v["converged"], false);
        assert_eq!(v["nprocs"], 2);
    }
}

/// SIGHUP (a closed terminal) to a serial solve with --checkpoint: pairs
/// printed, exit 129 and a last checkpoint written. Before: exit 129, nothing.
/// The solve cannot end by itself (tolerance 1e-300) and the signal is sent once
/// jdmg catches it.
#[cfg(target_os = "linux")]
#[test]
fn sighup_writes_the_last_checkpoint() {
    let d = scratch("hup");
    let ck = d.join("state.ckpt");
    let mut child = jdmg()
        .args([
            "solve",
            "--generate",
            "lap3d:24",
            "--nev",
            "12",
            "--tol",
            "1e-300",
            "--max-matvecs",
            "50000000",
        ])
        .args(["--quiet", "--json", "--checkpoint"])
        .arg(&ck)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_for_handlers(&mut child, &[libc::SIGHUP]);
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGHUP) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(129));
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"eigenvalues\""));
    assert!(
        jdmg::Checkpoint::read(&ck).is_ok(),
        "no checkpoint at {}",
        ck.display()
    );
    let _ = std::fs::remove_dir_all(&d);
}

fn small_matrix(dir: &Path) -> PathBuf {
    let p = dir.join("a.mtx");
    std::fs::write(
        &p,
        "%%MatrixMarket matrix coordinate real symmetric\n3 3 4\n1 1 2\n2 2 3\n3 3 4\n2 1 -1\n",
    )
    .unwrap();
    p
}

fn refused(out: &Output, words: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    for w in words {
        assert!(err.contains(w), "{w:?} not in {err}");
    }
}

#[test]
fn outputs_over_each_other_or_the_input_are_refused() {
    let d = scratch("outputs");
    let a = small_matrix(&d);
    let before = std::fs::read(&a).unwrap();
    let same = d.join("same.out");
    let solve = || {
        let mut c = jdmg();
        c.arg("solve").arg(&a).args(["--nev", "2"]);
        c
    };
    let out = solve()
        .arg("--eigenvectors")
        .arg(&same)
        .arg("--plot")
        .arg(&same)
        .output()
        .unwrap();
    refused(&out, &["--eigenvectors", "--plot", "same file"]);
    let out = solve()
        .arg("--eigenvectors")
        .arg(&same)
        .arg("--checkpoint")
        .arg(d.join(".").join("same.out"))
        .output()
        .unwrap();
    refused(&out, &["--eigenvectors", "--checkpoint", "same file"]);
    let out = solve().arg("--eigenvectors").arg(&a).output().unwrap();
    refused(&out, &["--eigenvectors", "input matrix"]);
    assert_eq!(
        std::fs::read(&a).unwrap(),
        before,
        "the input was overwritten"
    );
    assert!(!same.exists(), "work was done before the refusal");
    // Standard output redirected to a file, --eigenvectors /dev/stdout: the
    // table must survive (it was truncated).
    let table = d.join("table.txt");
    let out = solve()
        .args(["--eigenvectors", "/dev/stdout"])
        .stdout(std::fs::File::create(&table).unwrap())
        .output()
        .unwrap();
    refused(&out, &["--eigenvectors /dev/stdout", "standard output"]);
    // Resuming from and checkpointing to the same file stays allowed.
    let ck = d.join("ck");
    let lap = || {
        let mut c = jdmg();
        c.args(["solve", "--generate", "lap3d:6", "--nev", "2"])
            .args(["--checkpoint-every", "0", "--checkpoint"])
            .arg(&ck);
        c
    };
    let out = lap().output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let out = lap().arg("--resume").arg(&ck).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&d);
}
