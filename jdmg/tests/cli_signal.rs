//! SIGINT and SIGTERM stop a solve at the next outer iteration: the pairs found so
//! far are printed and jdmg exits 130 or 143 (issue: "no lost work").

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn interrupted_by(sig: libc::c_int) -> (i32, String) {
    // Far more work than the wait below: the signal always lands mid-solve.
    let child = Command::new(env!("CARGO_BIN_EXE_jdmg"))
        .args([
            "solve",
            "--generate",
            "lap3d:48",
            "--nev",
            "12",
            "--tol",
            "1e-13",
        ])
        .args(["--quiet", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("jdmg runs");
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, sig) };
    let t = Instant::now();
    let out = child.wait_with_output().expect("jdmg ends");
    assert!(t.elapsed() < Duration::from_secs(60), "stops promptly");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn sigint_prints_what_converged_and_exits_130() {
    let (code, stdout) = interrupted_by(libc::SIGINT);
    assert_eq!(code, 130, "{stdout}");
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    assert_eq!(v["eigenvalues"].as_array().map(|a| a.len()), Some(12));
    assert_eq!(v["converged"], false);
}

#[test]
fn sigterm_exits_143_with_the_partial_result() {
    let (code, stdout) = interrupted_by(libc::SIGTERM);
    assert_eq!(code, 143, "{stdout}");
    assert!(stdout.contains("\"eigenvalues\""), "{stdout}");
}
