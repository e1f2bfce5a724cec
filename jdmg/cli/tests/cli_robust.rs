//! The jdmg command under hostile conditions (issue "no panic, no lost work"):
//! closed pipes, full devices, closed standard output, absurd thread, rank and
//! memory requests, garbage input, unwritable outputs, atomic writes, config
//! forms, MPI launchers. Every probe ends with a documented exit code (never
//! 101) and a message naming the problem.

use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn cmd(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_jdmg"));
    c.args(args)
        .env_remove("OMPI_COMM_WORLD_SIZE")
        .env_remove("PMI_SIZE")
        .env_remove("PMI_RANK")
        .env_remove("PMIX_RANK")
        .env_remove("SLURM_PROCID")
        .env_remove("JDMG_MEMORY_LIMIT");
    c
}

fn run(args: &[&str]) -> Output {
    cmd(args).output().expect("run jdmg")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("jdmg-cli-robust-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn small_matrix(d: &std::path::Path) -> PathBuf {
    let p = d.join("sym.mtx");
    std::fs::write(
        &p,
        "%%MatrixMarket matrix coordinate real symmetric\n3 3 4\n1 1 2.0\n2 2 2.0\n3 3 2.0\n2 1 -1.0\n",
    )
    .unwrap();
    p
}

/// Exact eigenvalues of the generated `spec`.
fn exact(spec: &str) -> Vec<f64> {
    matrices::generate::exact_eigenvalues(&spec.parse().unwrap()).unwrap()
}

#[test]
fn closed_pipe_ends_quietly_with_141() {
    let d = dir("pipe");
    let m = small_matrix(&d);
    let mut fds = [0i32; 2];
    // SAFETY: pipe fills two descriptors we then own.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read_end); // the reader is gone before jdmg writes: `| true`
    for args in [
        vec!["info", m.to_str().unwrap(), "--json"],
        vec!["solve", "--generate", "lap2d:4", "--nev", "2"],
        vec!["generate", "lap2d:20", "-o", "-"],
    ] {
        let out = cmd(&args)
            .stdout(Stdio::from(write_end.try_clone().unwrap()))
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(141), "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    }
}

#[test]
fn full_device_and_closed_stdout_exit_2_with_a_message() {
    let d = dir("full");
    let m = small_matrix(&d);
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = cmd(&["info", m.to_str().unwrap()])
        .stdout(Stdio::from(full))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("No space left on device"),
        "{}",
        stderr(&out)
    );

    let mut c = cmd(&["solve", "--generate", "lap2d:4", "--nev", "2"]);
    // SAFETY: close(2) of the child's standard output between fork and exec.
    unsafe {
        c.pre_exec(|| {
            libc::close(1);
            Ok(())
        });
    }
    let out = c.stderr(Stdio::piped()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("standard output is closed"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn absurd_thread_rank_and_group_requests_exit_2() {
    let max = "18446744073709551615";
    for (args, want) in [
        (
            vec!["--threads", max],
            "--threads 18446744073709551615: must be between 1 and 1024",
        ),
        (
            vec!["--ranks", max],
            "--ranks 18446744073709551615: must be between 1 and 256",
        ),
        (
            vec!["--ranks", "2000"],
            "--ranks 2000: must be between 1 and 256",
        ),
        (vec!["--ranks", "0"], "--ranks 0: must be between 1 and 256"),
        (
            vec!["--ranks", "4", "--groups", "0-18446744073709551615"],
            "not a rank range inside 0-3",
        ),
        (
            vec!["--ranks", "4", "--groups", "9"],
            "between 1 and the 4 processes",
        ),
    ] {
        let mut a = vec!["solve", "--generate", "lap2d:4", "--nev", "1"];
        a.extend(args.iter().copied());
        let out = run(&a);
        assert_eq!(out.status.code(), Some(2), "{a:?}");
        assert!(stderr(&out).contains(want), "{a:?}: {}", stderr(&out));
    }
    // more ranks than rows: each rank needs a row
    let out = run(&[
        "solve",
        "--generate",
        "lap2d:2",
        "--nev",
        "1",
        "--ranks",
        "5",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("5 ranks for a matrix of n = 4 rows"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn memory_requests_are_refused_with_the_figures() {
    let d = dir("mem");
    // 10^8 rows, five entries: 2.2 GiB of row arrays, over a 64 MiB cap
    let huge = d.join("huge.mtx");
    std::fs::write(
        &huge,
        "%%MatrixMarket matrix coordinate real symmetric\n100000000 100000000 5\n1 1 1\n2 2 1\n3 3 1\n4 4 1\n5 5 1\n",
    )
    .unwrap();
    for sub in ["info", "solve"] {
        let out = cmd(&[sub, huge.to_str().unwrap()])
            .env("JDMG_MEMORY_LIMIT", "64M")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{sub}");
        assert!(
            stderr(&out).contains(
                "line 2: the declared size needs 2.2 GiB to read, more than the 64.0 MiB available"
            ),
            "{sub}: {}",
            stderr(&out)
        );
    }
    // the basis of --max-basis 100000 (capped at n = 8000): V and AV, 2 n² doubles, and
    // four n² dense matrices
    let out = cmd(&["solve", "--generate", "lap3d:20", "--max-basis", "100000"])
        .env("JDMG_MEMORY_LIMIT", "1G")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out)
            .contains("the solve needs about 2.9 GiB, more than the 1.0 GiB of memory available"),
        "{}",
        stderr(&out)
    );
    // the LDLᵀ factor of shift-and-invert (lap3d:40: about 155 MiB by its symbolic
    // factorization under nested dissection, 180 MiB peak measured) counts, beside
    // 30 MiB of vectors
    for extra in [&["--st", "sinvert"][..], &["--verify", "always"][..]] {
        let mut args = vec![
            "solve",
            "--generate",
            "lap3d:40",
            "--nev",
            "2",
            "--target",
            "1",
        ];
        args.extend_from_slice(extra);
        let out = cmd(&args)
            .env("JDMG_MEMORY_LIMIT", "150M")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {}", stderr(&out));
        let err = stderr(&out);
        let mib: f64 = err
            .split("the solve needs about ")
            .nth(1)
            .and_then(|r| r.split(" MiB").next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{extra:?}: {err}"));
        assert!((170.0..260.0).contains(&mib), "{extra:?}: {err}");
    }
    // lap3d:1000: 10^9 rows, 7·10^9 entries; the output file is not created
    let big = d.join("big.mtx");
    let out = cmd(&["generate", "lap3d:1000", "-o", big.to_str().unwrap()])
        .env("JDMG_MEMORY_LIMIT", "1G")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("generating lap3d:1000 needs about 85.7 GiB"),
        "{}",
        stderr(&out)
    );
    assert!(!big.exists());
}

#[test]
fn garbage_input_is_rejected_at_its_first_line() {
    let out = run(&["info", "/dev/urandom"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("/dev/urandom: line 1:"),
        "{}",
        stderr(&out)
    );

    let d = dir("garbage");
    let p = d.join("u64.mtx");
    std::fs::write(
        &p,
        "%%MatrixMarket matrix coordinate real general\n3 99999999999999999999999 1\n1 1 1\n",
    )
    .unwrap();
    let out = run(&["info", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(
        e.contains("line 2") && e.contains("does not fit in 64 bits"),
        "{e}"
    );
    assert!(!e.contains("exceeds the limit 18446744073709551615"), "{e}");

    let p = d.join("mirror.mtx");
    std::fs::write(
        &p,
        "%%MatrixMarket matrix coordinate real symmetric\n2 2 3\n1 1 2\n2 1 -1\n1 2 -1\n",
    )
    .unwrap();
    let out = run(&["solve", p.to_str().unwrap(), "--nev", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out)
            .contains("line 5: symmetric storage holds both (1, 2) and its mirror (2, 1) (line 4)"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn unwritable_outputs_fail_before_the_solve() {
    for opt in ["--eigenvectors", "--plot"] {
        let out = run(&[
            "solve",
            "--generate",
            "lap3d:6",
            "--nev",
            "2",
            opt,
            "/nonexistent/dir/x",
        ]);
        assert_eq!(out.status.code(), Some(2), "{opt}");
        assert!(
            out.stdout.is_empty(),
            "{opt}: no solve before the path check"
        );
        assert!(
            stderr(&out).contains(&format!("{opt} /nonexistent/dir/x: cannot write")),
            "{}",
            stderr(&out)
        );
    }
}

#[test]
fn generate_writes_stdout_for_dash_and_files_atomically() {
    let d = dir("gen");
    let out = cmd(&["generate", "lap2d:3", "-o", "-"])
        .current_dir(&d)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let m = matrices::mm::read_matrix_market_bytes(&out.stdout)
        .unwrap()
        .matrix;
    assert_eq!((m.nrows(), m.nnz()), (9, 33));
    assert!(!d.join("-").exists(), "no file named '-'");

    // a refused generate leaves an existing file untouched
    let f = d.join("m.mtx");
    std::fs::write(&f, "old").unwrap();
    let out = cmd(&["generate", "lap3d:200", "-o", f.to_str().unwrap()])
        .env("JDMG_MEMORY_LIMIT", "1M")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "old");
    // a successful one replaces it whole and leaves no temporary file
    let out = run(&[
        "generate",
        "lap2d:3",
        "-o",
        f.to_str().unwrap(),
        "--symmetric",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let m = matrices::mm::read_matrix_market(&f).unwrap().matrix;
    assert_eq!(m.nnz(), 33);
    let names: Vec<_> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("m.mtx")]);
    // a symbolic link keeps pointing at the replaced file
    let link = d.join("link.mtx");
    std::os::unix::fs::symlink(&f, &link).unwrap();
    let out = run(&["generate", "lap2d:4", "-o", link.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        matrices::mm::read_matrix_market(&f).unwrap().matrix.nrows(),
        16
    );
    // devices are written in place, never renamed over
    use std::os::unix::fs::FileTypeExt;
    let out = run(&["generate", "lap2d:3", "-o", "/dev/null"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(std::fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
    let out = run(&["generate", "lap2d:3", "-o", "/dev/full"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("No space left on device"));
    assert!(std::fs::metadata("/dev/full")
        .unwrap()
        .file_type()
        .is_char_device());
}

#[test]
fn negative_numbers_nan_shift_and_config_targets() {
    let out = run(&["solve", "--generate", "lap2d:4", "--tol", "-1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("tol must be positive and finite, got -1"),
        "{}",
        stderr(&out)
    );

    for pc in ["jacobi", "ilu0", "fsai"] {
        let out = run(&[
            "solve",
            "--generate",
            "lap2d:4",
            "--precond",
            pc,
            "--precond-shift",
            "nan",
        ]);
        assert_eq!(out.status.code(), Some(2), "{pc}");
        assert!(stderr(&out).contains("finite"), "{pc}: {}", stderr(&out));
    }

    let d = dir("config");
    let bare = d.join("bare.toml");
    std::fs::write(&bare, "target = \"closest\"\n").unwrap();
    let out = run(&[
        "solve",
        "--generate",
        "lap3d:6",
        "--config",
        bare.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(
        e.contains("needs the shift") && e.contains("target = \"closest:1.5\""),
        "{e}"
    );

    // the three accepted forms give the 2 eigenvalues closest to 1.0
    let mut want = exact("lap3d:6");
    want.sort_by(|a, b| (a - 1.0).abs().total_cmp(&(b - 1.0).abs()));
    for (k, text) in [
        "target = 1.0",
        "target = \"closest:1.0\"",
        "target = { closest = 1.0 }",
    ]
    .iter()
    .enumerate()
    {
        let p = d.join(format!("t{k}.toml"));
        std::fs::write(&p, format!("{text}\nnev = 2\ntol = 1e-10\n")).unwrap();
        let out = run(&[
            "solve",
            "--generate",
            "lap3d:6",
            "--config",
            p.to_str().unwrap(),
            "--json",
        ]);
        assert_eq!(out.status.code(), Some(0), "{text}: {}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let mut got: Vec<f64> = v["eigenvalues"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        got.sort_by(|a, b| (a - 1.0).abs().total_cmp(&(b - 1.0).abs()));
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() < 1e-8, "{text}: {g} vs {w}");
        }
    }
}

#[test]
fn plot_draws_the_residual_history_of_every_pair() {
    let d = dir("plot");
    let svg = d.join("conv.svg");
    let out = run(&[
        "solve",
        "--generate",
        "lap3d:8",
        "--nev",
        "3",
        "--tol",
        "1e-10",
        "--plot",
        svg.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg") && text.trim_end().ends_with("</svg>"));
    for j in 0..3 {
        assert!(text.contains(&format!("pair {j}")), "legend of pair {j}");
    }
    assert!(text.contains("convergence threshold") && text.contains("matvecs"));
    // one polyline per pair (plus the legend's samples and the threshold dashes)
    let lines = text.matches("<polyline").count();
    assert!(lines >= 3, "{lines} polylines");
    assert_eq!(v["converged"], true);
    // thread ranks: rank 0 observes the fine-grain iterations
    let svg2 = d.join("ranks.svg");
    let out = run(&[
        "solve",
        "--generate",
        "lap3d:8",
        "--nev",
        "2",
        "--ranks",
        "2",
        "--plot",
        svg2.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = std::fs::read_to_string(&svg2).unwrap();
    assert!(text.contains("pair 1") && !text.contains("pair 2"));
    // multigrain solves report their iterations too
    std::fs::remove_file(&svg2).unwrap();
    let out = run(&[
        "solve",
        "--generate",
        "lap3d:8",
        "--nev",
        "2",
        "--block",
        "2",
        "--ranks",
        "2",
        "--groups",
        "equal",
        "--plot",
        svg2.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = std::fs::read_to_string(&svg2).unwrap();
    assert!(text.contains("pair 0") && text.contains("pair 1") && !text.contains("pair 2"));
}

#[test]
fn mpi_launcher_is_detected_from_the_environment() {
    // this test binary is built without the mpi feature: under an MPI launcher
    // with several processes jdmg refuses to solve alone on each rank
    // (an mpi build would start MPI here: covered by the mpirun scenarios of CI)
    if cfg!(feature = "mpi") {
        return;
    }
    let out = cmd(&["solve", "--generate", "lap2d:4", "--nev", "1"])
        .env("OMPI_COMM_WORLD_SIZE", "4")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(
        e.contains("one of 4 MPI processes (OMPI_COMM_WORLD_SIZE is set)")
            && e.contains("--no-mpi"),
        "{e}"
    );
    let out = cmd(&["solve", "--generate", "lap2d:4", "--nev", "1", "--no-mpi"])
        .env("OMPI_COMM_WORLD_SIZE", "4")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // a single Slurm task is not an MPI job
    let out = cmd(&["solve", "--generate", "lap2d:4", "--nev", "1"])
        .env("SLURM_PROCID", "0")
        .env("SLURM_NTASKS", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn help_documents_the_exit_codes() {
    let out = run(&["--help"]);
    let text = String::from_utf8_lossy(&out.stdout);
    for code in [
        "0    success",
        "2    bad input",
        "3    not converged",
        "141  standard output is a closed pipe",
        "130  interrupted by SIGINT",
    ] {
        assert!(text.contains(code), "{code}");
    }
}

#[test]
fn help_to_a_full_device_or_closed_pipe_is_reported() {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = cmd(&["solve", "--help"])
        .stdout(Stdio::from(full))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("No space left on device"),
        "{}",
        stderr(&out)
    );
    let out = run(&["--version"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("jdmg "));
}

/// SIGKILL during `generate`: the output path holds nothing or the whole matrix,
/// never a truncated file (the partial data is in the temporary file beside it).
#[test]
fn generate_killed_mid_write_leaves_no_truncated_output() {
    let d = dir("kill");
    let out = d.join("big.mtx");
    let mut child = cmd(&["generate", "lap3d:60", "-o", out.to_str().unwrap()])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let tmp = d.join(format!(".big.mtx.tmp.{}", child.id()));
    // wait until the temporary file has data (or the process ended): no time
    // limit but a generous one against a hang, so a slow machine waits longer
    let mut finished = false;
    let t = std::time::Instant::now();
    loop {
        if std::fs::metadata(&tmp).is_ok_and(|m| m.len() > 0) {
            break;
        }
        if child.try_wait().unwrap().is_some() {
            finished = true;
            break;
        }
        assert!(
            t.elapsed() < std::time::Duration::from_secs(600),
            "no data in {} after 10 minutes",
            tmp.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    if out.exists() {
        // the rename happened before the kill: the file is complete
        let m = matrices::mm::read_matrix_market(&out).unwrap().matrix;
        assert_eq!((m.nrows(), m.nnz()), (216_000, 216_000 * 7 - 6 * 3600));
    } else {
        assert!(!finished, "a finished generate must leave its output");
        assert!(tmp.exists(), "the partial data stays in the temporary file");
    }
    std::fs::remove_dir_all(&d).unwrap();
}
