//! `jdmg solve --initial / --deflate / --st sinvert` and `jdmg generate fem…`:
//! what comes back, and exit 2 with a clear message for bad files and options.

mod common;

use common::values;
use std::path::PathBuf;
use std::process::{Command, Output};

fn jdmg(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_jdmg"))
        .args(args)
        .output()
        .expect("run jdmg")
}

fn json(out: &Output) -> serde_json::Value {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().expect("a JSON line")).expect("valid JSON")
}

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("jdmg-cli-problems-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn path(name: &str) -> String {
    dir().join(name).display().to_string()
}

fn ok(out: &Output) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn bad(out: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(needle), "expected {needle:?} in: {err}");
}

/// `--eigenvectors` of a loose solve restart a tight one with fewer matvecs;
/// `--deflate` with the same file gives the next eigenvalues (serial and
/// `--ranks 2`).
#[test]
fn initial_and_deflate_files() {
    let m = "spectrum:400:1:400:2";
    let vecs = path("loose.mtx");
    let out = jdmg(&[
        "solve",
        "--generate",
        m,
        "--nev",
        "3",
        "--tol",
        "1e-4",
        "--eigenvectors",
        &vecs,
        "--json",
    ]);
    ok(&out);
    // A fixed correction method: the default (auto) switches on timings.
    let tight = [
        "solve",
        "--generate",
        m,
        "--nev",
        "3",
        "--tol",
        "1e-10",
        "--json",
        "--inner-solver",
        "bicgstab",
    ];
    let cold = jdmg(&tight);
    ok(&cold);
    let mut args = tight.to_vec();
    args.extend(["--initial", &vecs]);
    let warm = jdmg(&args);
    ok(&warm);
    let (c, w) = (json(&cold), json(&warm));
    assert!(
        w["matvecs"].as_u64() < c["matvecs"].as_u64(),
        "{} vs {}",
        w["matvecs"],
        c["matvecs"]
    );
    assert_eq!(w["stats"]["initial_vectors"], 3);
    for (a, b) in values(&w).iter().zip(values(&c)) {
        assert!((a - b).abs() < 1e-8);
    }
    // Deflating the three smallest eigenvectors gives the next three.
    let exact = jdmg(&[
        "solve",
        "--generate",
        m,
        "--nev",
        "3",
        "--tol",
        "1e-12",
        "--eigenvectors",
        &vecs,
        "--json",
    ]);
    ok(&exact);
    for ranks in ["1", "2"] {
        let mut args = tight.to_vec();
        args.extend(["--deflate", &vecs, "--ranks", ranks]);
        let out = jdmg(&args);
        ok(&out);
        let v = json(&out);
        assert_eq!(v["stats"]["deflation_vectors"], 3);
        for (g, want) in values(&v).iter().zip([4.0, 5.0, 6.0]) {
            assert!((g - want).abs() < 1e-7, "--ranks {ranks}: {:?}", values(&v));
        }
    }
}

/// Files that cannot serve: missing, coordinate instead of array, wrong row
/// count, NaN; options that cannot go together. All exit 2 with the reason.
#[test]
fn bad_vector_files_and_options_exit_2() {
    let m = ["solve", "--generate", "lap2d:5", "--nev", "2"];
    let run = |extra: &[&str]| {
        let mut a = m.to_vec();
        a.extend_from_slice(extra);
        jdmg(&a)
    };
    bad(
        &run(&["--initial", "/nonexistent/x.mtx"]),
        "--initial /nonexistent/x.mtx",
    );
    let coord = path("coord.mtx");
    std::fs::write(
        &coord,
        "%%MatrixMarket matrix coordinate real general\n25 1 1\n1 1 1.0\n",
    )
    .unwrap();
    bad(&run(&["--deflate", &coord]), "array");
    let short = path("short.mtx");
    std::fs::write(
        &short,
        "%%MatrixMarket matrix array real general\n3 1\n1\n2\n3\n",
    )
    .unwrap();
    bad(
        &run(&["--deflate", &short]),
        "3 rows, but the matrix has n = 25",
    );
    let nan = path("nan.mtx");
    let mut text = String::from("%%MatrixMarket matrix array real general\n25 1\n");
    for i in 0..25 {
        text.push_str(if i == 7 { "nan\n" } else { "1\n" });
    }
    std::fs::write(&nan, text).unwrap();
    let out = run(&["--initial", &nan]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let many = path("many.mtx");
    let mut text = String::from("%%MatrixMarket matrix array real general\n25 24\n");
    for j in 0..24 {
        for i in 0..25 {
            let v = if i == j {
                1.0
            } else {
                0.01 * ((i + j) % 7) as f64
            };
            text.push_str(&format!("{v}\n"));
        }
    }
    std::fs::write(&many, text).unwrap();
    bad(&run(&["--deflate", &many]), "deflation vectors exceed");
    bad(&run(&["--st", "sinvert"]), "--target");
    bad(
        &run(&[
            "--st", "sinvert", "--target", "1", "--ranks", "2", "--groups", "2", "--maxits", "5",
        ]),
        "--maxits 0",
    );
}

/// `--st sinvert`: the 4 eigenvalues of spectrum 1..1000 closest to 500.3, in
/// order of distance, the inertia in the JSON and the text report.
#[test]
fn shift_invert_from_the_command_line() {
    let args = [
        "solve",
        "--generate",
        "spectrum:1000:1:1000",
        "--nev",
        "4",
        "--target",
        "500.3",
        "--st",
        "sinvert",
        "--tol",
        "1e-10",
    ];
    let mut a = args.to_vec();
    a.push("--json");
    let out = jdmg(&a);
    ok(&out);
    let v = json(&out);
    for (g, w) in values(&v).iter().zip([500.0, 501.0, 499.0, 502.0]) {
        assert!((g - w).abs() < 1e-8, "{:?}", values(&v));
    }
    assert_eq!(v["stats"]["eigenvalues_below_shift"], 500);
    for r in v["residual_norms"].as_array().unwrap() {
        assert!(r.as_f64().unwrap() < 1e-6);
    }
    let out = jdmg(&args);
    ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("500 eigenvalues below the shift"), "{text}");
    // on 3 thread ranks (rank 0 factors and solves for all): the same answer
    a.extend(["--ranks", "3"]);
    let out = jdmg(&a);
    ok(&out);
    let v = json(&out);
    assert_eq!(v["nprocs"], 3);
    for (g, w) in values(&v).iter().zip([500.0, 501.0, 499.0, 502.0]) {
        assert!((g - w).abs() < 1e-8, "{:?}", values(&v));
    }
    assert_eq!(v["stats"]["eigenvalues_below_shift"], 500);
}

/// A non-symmetric file is refused (exit 2); `--no-symmetry-check` turns off
/// the CLI's check and the library's (`ProblemSettings::check_symmetry`).
#[test]
fn library_symmetry_check_behind_the_cli() {
    let f = path("nonsym.mtx");
    std::fs::write(
        &f,
        "%%MatrixMarket matrix coordinate real general\n3 3 4\n1 1 2\n2 2 3\n3 3 4\n1 3 1\n",
    )
    .unwrap();
    bad(&jdmg(&["solve", &f, "--nev", "1"]), "not symmetric");
    // --no-symmetry-check turns off both checks: the solve runs (the solver's
    // own test may still find a Ritz pair that cannot converge, but the matrix
    // is not refused up front for its entries).
    let out = jdmg(&[
        "solve",
        &f,
        "--nev",
        "1",
        "--no-symmetry-check",
        "--max-matvecs",
        "200",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("a_ij - a_ji"), "{err}");
}

/// `jdmg generate fem3d:N` and `fem3d:N:mass` write the two matrices of a pair.
#[test]
fn generate_writes_fem_pairs() {
    for (spec, name) in [("fem3d:4", "k.mtx"), ("fem3d:4:mass", "m.mtx")] {
        let p = path(name);
        ok(&jdmg(&["generate", spec, "-o", &p]));
        let out = jdmg(&["info", &p, "--json"]);
        ok(&out);
        let v = json(&out);
        assert_eq!(v["nrows"], 64);
        assert_eq!(v["symmetric"], true);
        assert_eq!(v["max_row_nnz"], 27);
    }
    bad(
        &jdmg(&["generate", "fem3d:4:lumped", "-o", "-"]),
        "stiffness or mass",
    );
}
