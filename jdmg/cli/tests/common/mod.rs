//! Helpers of the CLI tests: the eigenvalues of a `--json` report, and for
//! the tests that signal a running `jdmg`, waiting until it catches the
//! signals, then until it ends.
#![allow(dead_code)]

/// The `eigenvalues` array of a `jdmg solve --json` report.
pub fn values(v: &serde_json::Value) -> Vec<f64> {
    v["eigenvalues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// Whether process `pid` catches every signal of `sigs` (`SigCgt` in
/// `/proc/PID/status`, a hex mask with bit `sig - 1` per signal); false once it is
/// gone. Linux only.
#[cfg(target_os = "linux")]
pub fn catches(pid: u32, sigs: &[libc::c_int]) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    let mask = status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .unwrap_or(0);
    sigs.iter().all(|&s| mask & (1u64 << (s - 1)) != 0)
}

/// Waits (up to 10 minutes) until `child` catches every signal of `sigs`: a
/// signal sent after that lands in jdmg's handler whatever the machine's speed.
///
/// # Panics
/// When the child ends first or 10 minutes pass.
#[cfg(target_os = "linux")]
pub fn wait_for_handlers(child: &mut std::process::Child, sigs: &[libc::c_int]) {
    let t = std::time::Instant::now();
    while !catches(child.id(), sigs) {
        if let Ok(Some(s)) = child.try_wait() {
            panic!("jdmg ended ({s}) before catching the signals");
        }
        assert!(
            t.elapsed() < std::time::Duration::from_secs(600),
            "jdmg did not catch the signals within 10 minutes"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Waits (up to 10 minutes: a lost signal fails rather than hangs) until `child`
/// ends after a signal; its exit code and standard output. The output is one
/// small JSON object at the end, so the pipes cannot fill meanwhile.
///
/// # Panics
/// When the child still runs after 10 minutes.
pub fn wait_after_signal(mut child: std::process::Child) -> (i32, String) {
    let t = std::time::Instant::now();
    while child.try_wait().expect("jdmg runs").is_none() {
        if t.elapsed() > std::time::Duration::from_secs(600) {
            let _ = child.kill();
            panic!("jdmg still runs 10 minutes after the signal");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let out = child.wait_with_output().expect("jdmg ends");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}
