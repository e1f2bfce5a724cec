//! End-to-end tests of the `jdmg` command: outputs and documented exit codes
//! (0 converged, 2 bad input or options, 3 not converged with partial results).

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

/// The JSON report of a run that must exit 0 (its stderr in the failure).
fn solved(out: &Output) -> serde_json::Value {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json(out)
}

fn json(out: &Output) -> serde_json::Value {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().expect("a JSON line")).expect("valid JSON")
}

fn tmp(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("jdmg-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn solve_generated_prints_json_and_exits_0() {
    let out = jdmg(&[
        "solve",
        "--generate",
        "lap3d:8",
        "--nev",
        "2",
        "--tol",
        "1e-10",
        "--json",
    ]);
    let v = solved(&out);
    assert_eq!(v["converged"], true);
    assert_eq!(v["nprocs"], 1);
    assert!(v["matvecs"].as_u64().unwrap() > 0);
    // exact: 3 (2 - 2 cos(pi/9)) and the triple 2(2 - 2cos(pi/9)) + 2 - 2cos(2pi/9)
    let e = |i: f64| 2.0 - 2.0 * (std::f64::consts::PI * i / 9.0).cos();
    let want = [3.0 * e(1.0), 2.0 * e(1.0) + e(2.0)];
    let got: Vec<f64> = v["eigenvalues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 1e-9, "{g} vs {w}");
    }
}

#[test]
fn eigenvectors_are_written_as_matrix_market_array() {
    let dir = std::env::temp_dir().join(format!("jdmg-cli-ev-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ev.mtx");
    let out = jdmg(&[
        "solve",
        "--generate",
        "lap2d:6",
        "--nev",
        "3",
        "--eigenvectors",
        path.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let ev = matrices::mm::read_dense_array(&path).unwrap();
    assert_eq!((ev.nrows, ev.ncols), (36, 3));
    let n0: f64 = (0..36).map(|i| ev.get(i, 0).powi(2)).sum();
    assert!((n0 - 1.0).abs() < 1e-10, "unit eigenvectors: {n0}");
}

#[test]
fn bad_inputs_exit_2_with_a_message() {
    let missing = jdmg(&["solve", "/nonexistent/dir/a.mtx"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/dir/a.mtx"));

    let bad = tmp(
        "bad.mtx",
        "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1.0\n3 1 2.0\n",
    );
    let out = jdmg(&["solve", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("line 4"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let nonsym = tmp(
        "nonsym.mtx",
        "%%MatrixMarket matrix coordinate real general\n2 2 3\n1 1 1.0\n2 2 1.0\n1 2 0.5\n",
    );
    let out = jdmg(&["solve", nonsym.to_str().unwrap(), "--nev", "1"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not symmetric") && err.contains("5.000e-1"),
        "{err}"
    );

    let big = jdmg(&["solve", "--generate", "lap2d:3", "--nev", "10"]);
    assert_eq!(big.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&big.stderr).contains("exceeds the matrix dimension"));

    let flag = jdmg(&["solve", "--generate", "lap2d:3", "--precond", "magic"]);
    assert_eq!(flag.status.code(), Some(2));
}

#[test]
fn not_converged_exits_3_and_still_prints() {
    let short = [
        "solve",
        "--generate",
        "lap3d:10",
        "--nev",
        "4",
        "--tol",
        "1e-12",
        "--max-matvecs",
        "40",
    ];
    let out = jdmg(&[&short[..], &["--json"]].concat());
    assert_eq!(out.status.code(), Some(3));
    let v = json(&out);
    assert_eq!(v["converged"], false);
    assert_eq!(v["outcome"], "budget_spent");
    assert_eq!(v["eigenvalues"].as_array().unwrap().len(), 4);
    let text = jdmg(&short);
    assert_eq!(text.status.code(), Some(3));
    let out = String::from_utf8_lossy(&text.stdout);
    assert!(out.contains("of 4 converged (budget spent)"), "{out}");
    let err = String::from_utf8_lossy(&text.stderr);
    assert!(err.contains("not converged (budget spent)"), "{err}");
}

#[test]
fn info_reports_symmetry_and_gershgorin() {
    let p = tmp("sym.mtx", "%%MatrixMarket matrix coordinate real symmetric\n3 3 4\n1 1 2.0\n2 2 2.0\n3 3 2.0\n2 1 -1.0\n");
    let out = jdmg(&["info", p.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let v = json(&out);
    assert_eq!(v["nrows"], 3);
    assert_eq!(v["nnz"], 5);
    assert_eq!(v["symmetric"], true);
    assert_eq!(v["gershgorin_lower"].as_f64(), Some(1.0));
    assert_eq!(v["gershgorin_upper"].as_f64(), Some(3.0));
}

/// `--inner-solver qmrs` (JDQMR) from the command line and from a config file; the
/// multigrain mode rejects it with exit 2.
#[test]
fn inner_solver_qmrs_flag_and_config() {
    let args = [
        "solve",
        "--generate",
        "lap3d:8",
        "--nev",
        "3",
        "--tol",
        "1e-10",
        "--json",
    ];
    let mut a = args.to_vec();
    a.extend(["--inner-solver", "qmrs", "--maxits", "50"]);
    let out = jdmg(&a);
    let j = solved(&out);
    assert_eq!(j["params"]["correction"]["solver"], "qmrs");
    let ev: Vec<f64> = j["eigenvalues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    // lap3d:8: λ = Σ 2 − 2cos(πi/9): (1,1,1) and the triple (1,1,2).
    let e = |i: f64| 2.0 - 2.0 * (std::f64::consts::PI * i / 9.0).cos();
    let want = [3.0 * e(1.0), 2.0 * e(1.0) + e(2.0), 2.0 * e(1.0) + e(2.0)];
    for (g, w) in ev.iter().zip(want) {
        assert!((g - w).abs() < 1e-9, "{g} vs {w}");
    }
    let cfg = tmp("qmrs.toml", "inner_solver = \"qmrs\"\nmaxits = 50\n");
    let mut a = args.to_vec();
    a.extend(["--config", cfg.to_str().unwrap()]);
    let out = jdmg(&a);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(json(&out)["params"]["correction"]["solver"], "qmrs");
    // The same settings as the groups of JdParams, one table each.
    let cfg = tmp(
        "qmrs_grouped.toml",
        "[correction]\nsolver = \"qmrs\"\nmaxits = 50\n[problem]\ntarget = 0.5\n",
    );
    let mut a = args.to_vec();
    a.extend(["--config", cfg.to_str().unwrap()]);
    let out = jdmg(&a);
    assert_eq!(out.status.code(), Some(0));
    let j = json(&out);
    assert_eq!(j["params"]["correction"]["solver"], "qmrs");
    assert_eq!(j["params"]["correction"]["maxits"], 50);
    assert_eq!(j["params"]["problem"]["target"]["closest"], 0.5);
    // A group's key at the top is refused naming its group.
    let cfg = tmp("kind.toml", "kind = \"ilu0\"\n");
    let mut a = args.to_vec();
    a.extend(["--config", cfg.to_str().unwrap()]);
    let out = jdmg(&a);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("preconditioner.kind"), "{err}");
    let out = jdmg(&[
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
        "--inner-solver",
        "qmrs",
        "--balance",
        "none",
        "--json",
    ]);
    // solve groups run JDQMR too (they used to refuse it)
    let j = solved(&out);
    assert_eq!(j["stats"]["inner_solver"], "qmrs");
    assert_eq!(j["mode"], "multigrain");
}

/// The default text says what was solved, the test with its threshold and how
/// many converged; the counters come with `--verbose` only.
#[test]
fn text_output_says_what_was_solved_and_counters_wait_for_verbose() {
    let out = jdmg(&["solve", "--generate", "lap3d:8", "--nev", "3"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("3 smallest eigenpairs, tol 1e-8: ‖r‖ ≤ tol·‖A‖ = "),
        "{text}"
    );
    assert!(text.contains("3 of 3 converged in "), "{text}");
    assert!(!text.contains("global sums"), "{text}");
    let out = jdmg(&["solve", "--generate", "lap3d:8", "--nev", "3", "-v"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("global sums") && text.contains("projection"),
        "{text}"
    );
}

/// `--which` takes SciPy's SA, LA and LM: the closed-form ends of lap3d:8 and,
/// for LM, the largest in magnitude (its largest, the spectrum being positive).
#[test]
fn which_takes_scipy_names() {
    let e = |i: f64| 2.0 - 2.0 * (std::f64::consts::PI * i / 9.0).cos();
    let (lo, hi) = (3.0 * e(1.0), 3.0 * e(8.0));
    for (which, want) in [
        ("SA", lo),
        ("sa", lo),
        ("LA", hi),
        ("LM", hi),
        ("magnitude", hi),
    ] {
        let out = jdmg(&[
            "solve",
            "--generate",
            "lap3d:8",
            "--nev",
            "1",
            "--tol",
            "1e-10",
            "--which",
            which,
            "--json",
        ]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{which}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got = json(&out)["eigenvalues"][0].as_f64().unwrap();
        assert!((got - want).abs() < 1e-8, "{which}: {got} vs {want}");
    }
}

/// `jdmg svd INPUT -k 3 --which WHICH --tol 1e-10 --json`, which must exit 0.
fn svd_json(input: &str, which: &str) -> serde_json::Value {
    let out = jdmg(&[
        "svd", input, "-k", "3", "--which", which, "--tol", "1e-10", "--json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json(&out)
}

#[test]
fn svd_of_a_generated_gradient_matches_its_closed_form() {
    let g = matrices::rectangular::GradSpec::parse("grad2d:16x11:0.1").unwrap();
    let truth = g.singular_values();
    for (which, want) in [
        ("smallest", truth[..3].to_vec()),
        ("LM", truth.iter().rev().take(3).copied().collect()),
    ] {
        let v = svd_json("grad2d:16x11:0.1", which);
        assert_eq!(v["nrows"], g.nrows());
        assert_eq!(v["ncols"], g.ncols());
        for (got, want) in v["values"].as_array().unwrap().iter().zip(&want) {
            let got = got.as_f64().unwrap();
            assert!(
                (got - want).abs() <= 1e-9 * want,
                "{which}: {got} vs {want}"
            );
        }
        let bound = 1e-10 * v["stats"]["anorm"].as_f64().unwrap();
        assert!(v["residual_norms"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r.as_f64().unwrap() <= bound));
    }
    let text = jdmg(&["svd", "grad2d:16x11:0.1", "-k", "2"]);
    let s = String::from_utf8_lossy(&text.stdout);
    assert!(
        s.contains("2 largest singular values of a 501 x 176 matrix"),
        "{s}"
    );
    assert!(s.contains("2 of 2 converged"), "{s}");
}

#[test]
fn svd_bad_input_exits_2_and_a_spent_budget_exits_3() {
    for args in [
        &["svd", "grad2d:0"][..],
        &["svd", "grad2d:5x5:1", "-k", "26"],
        &["svd", "/nonexistent.mtx"],
        &["svd", "grad2d:5x5:1", "--tol", "0"],
    ] {
        let out = jdmg(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!out.stderr.is_empty());
    }
    let out = jdmg(&[
        "svd",
        "grad2d:30x30:0.01",
        "-k",
        "4",
        "--which",
        "smallest",
        "--tol",
        "1e-12",
        "--max-products",
        "30",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(3));
    let v = json(&out);
    assert_eq!(v["converged_all"], false);
    assert_eq!(v["values"].as_array().unwrap().len(), 4);
}

/// A config file is read as strictly as the command line: a key given twice is
/// refused with exit 2 naming it (a JSON parser keeps the last one silently),
/// and `check_symmetry = false` lets a file through as `--no-symmetry-check`
/// does (it was applied to the library only, after the reader had refused).
#[test]
fn config_files_refuse_duplicate_keys_and_honour_check_symmetry() {
    for (name, text) in [
        ("dup.json", r#"{"nev": 3, "tol": 1e-9, "nev": 5}"#),
        ("dup.toml", "nev = 3\ntol = 1e-9\nnev = 5\n"),
    ] {
        let cfg = tmp(name, text);
        let out = jdmg(&[
            "solve",
            "--generate",
            "lap3d:6",
            "--config",
            cfg.to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains("nev"), "{name}: {err}");
    }
    // the 1-D Laplacian, stored as general with the upper entries 1e-14 off
    let n = 12;
    let mut text = format!(
        "%%MatrixMarket matrix coordinate real general\n{n} {n} {}\n",
        3 * n - 2
    );
    for i in 1..=n {
        text += &format!("{i} {i} 2\n");
        if i < n {
            text += &format!("{} {i} -1\n{i} {} -1.00000000000001\n", i + 1, i + 1);
        }
    }
    let file = tmp("almost.mtx", &text);
    let f = file.to_str().unwrap();
    let refused = jdmg(&["solve", f, "--nev", "2"]);
    assert_eq!(refused.status.code(), Some(2));
    let cfg = tmp("nocheck.toml", "check_symmetry = false\n");
    let by_config = jdmg(&[
        "solve",
        f,
        "--nev",
        "2",
        "--json",
        "--config",
        cfg.to_str().unwrap(),
    ]);
    let by_flag = jdmg(&["solve", f, "--nev", "2", "--json", "--no-symmetry-check"]);
    for out in [&by_config, &by_flag] {
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let e = |i: f64| 2.0 - 2.0 * (std::f64::consts::PI * i / (n + 1) as f64).cos();
    for out in [&by_config, &by_flag] {
        let ev = json(out)["eigenvalues"].clone();
        for (j, want) in [e(1.0), e(2.0)].iter().enumerate() {
            let got = ev[j].as_f64().unwrap();
            assert!((got - want).abs() < 1e-8, "{got} against {want}");
        }
    }
}

/// The magnetic Laplacian `spec` and a MatrixMarket file of it named `name`.
fn maglap_file(spec: &str, name: &str) -> (matrices::ComplexCsr, PathBuf) {
    let a = spec.parse::<matrices::MagSpec>().unwrap().build().unwrap();
    let mut text = Vec::new();
    matrices::mm::write_complex_coordinate(&mut text, &a, true).unwrap();
    let file = tmp(name, std::str::from_utf8(&text).unwrap());
    (a, file)
}

/// A complex Hermitian file, read, solved on 1 and 2 ranks, its vectors
/// written as a complex array: eigenvalues against a dense Hermitian solve,
/// residuals recomputed from the written vectors; `info` on it; a file that
/// is not Hermitian exits 2.
#[test]
fn complex_hermitian_files_are_solved_and_their_vectors_written() {
    use faer::c64;
    let (a, file) = maglap_file("maglap2d:9x7:0.2", "maglap.mtx");
    let dense = faer::Mat::from_fn(a.nrows(), a.nrows(), |i, j| a.get(i, j));
    let mut exact = dense.self_adjoint_eigenvalues(faer::Side::Lower).unwrap();
    exact.sort_by(f64::total_cmp);
    let vecs = file.with_file_name("maglap-vectors.mtx");
    for ranks in ["1", "2"] {
        let out = jdmg(&[
            "solve",
            file.to_str().unwrap(),
            "--nev",
            "4",
            "--tol",
            "1e-10",
            "--ranks",
            ranks,
            "--json",
            "--eigenvectors",
            vecs.to_str().unwrap(),
        ]);
        let v = solved(&out);
        assert_eq!(v["n"], a.nrows());
        let got = values(&v);
        assert_eq!(got.len(), 4);
        for (g, w) in got.iter().zip(&exact) {
            assert!((g - w).abs() < 1e-8, "{got:?} against {:?}", &exact[..4]);
        }
        let (n, k, x) =
            matrices::mm::read_complex_array_bytes(&std::fs::read(&vecs).unwrap()).unwrap();
        assert_eq!((n, k), (a.nrows(), 4));
        for (j, lam) in got.iter().enumerate() {
            let col = &x[j * n..(j + 1) * n];
            let mut ax = vec![c64::new(0.0, 0.0); n];
            a.mul_vec(col, &mut ax);
            let r: f64 = ax
                .iter()
                .zip(col)
                .map(|(u, v)| (u - v * *lam).norm_sqr())
                .sum();
            let norm: f64 = col.iter().map(|v| v.norm_sqr()).sum();
            assert!(r.sqrt() < 1e-9 * 8.0, "residual {}", r.sqrt());
            assert!((norm - 1.0).abs() < 1e-10);
        }
    }
    let out = jdmg(&["info", file.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let v = json(&out);
    assert_eq!(
        (v["hermitian"].as_bool(), v["nnz"].as_u64()),
        (Some(true), Some(a.nnz() as u64))
    );
    let skew = tmp(
        "skew.mtx",
        "%%MatrixMarket matrix coordinate complex general\n2 2 3\n1 1 1 0\n1 2 0 1\n2 1 0 1\n",
    );
    let out = jdmg(&["solve", skew.to_str().unwrap(), "--nev", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not Hermitian"));
}

/// Complex start and deflation vectors: deflating A's first two eigenvectors
/// gives its third and fourth eigenvalues, and the residuals of the deflated
/// operator; the vectors as a start block converge at once. One process and
/// two ranks.
#[test]
fn complex_start_and_deflation_vectors() {
    use faer::c64;
    let (a, file) = maglap_file("maglap2d:8x6:0.15", "maglap-defl.mtx");
    let n = a.nrows();
    let dense = faer::Mat::from_fn(n, n, |i, j| a.get(i, j));
    let eig = dense.self_adjoint_eigen(faer::Side::Lower).unwrap();
    let exact: Vec<f64> = (0..n).map(|j| eig.S().column_vector()[j].re).collect();
    let block = |cols: std::ops::Range<usize>| {
        let z: Vec<c64> = cols
            .clone()
            .flat_map(|j| (0..n).map(move |i| (i, j)))
            .map(|(i, j)| eig.U()[(i, j)])
            .collect();
        let mut text = Vec::new();
        matrices::mm::write_complex_array(&mut text, n, cols.len(), &z).unwrap();
        String::from_utf8(text).unwrap()
    };
    let defl = tmp("maglap-defl-y.mtx", &block(0..2));
    let start = tmp("maglap-defl-x.mtx", &block(2..4));
    for ranks in ["1", "2"] {
        let base = [
            "solve",
            file.to_str().unwrap(),
            "--nev",
            "2",
            "--tol",
            "1e-10",
            "--ranks",
            ranks,
            "--json",
        ];
        let vecs = file.with_file_name(format!("maglap-defl-out-{ranks}.mtx"));
        let out = jdmg(
            &[
                &base[..],
                &["--deflate", defl.to_str().unwrap()],
                &["--eigenvectors", vecs.to_str().unwrap()],
            ]
            .concat(),
        );
        let v = solved(&out);
        let got = values(&v);
        assert_eq!(got.len(), 2);
        for (g, w) in got.iter().zip(&exact[2..4]) {
            assert!((g - w).abs() < 1e-8, "{got:?} against {:?}", &exact[2..4]);
        }
        assert_eq!(v["stats"]["deflation_vectors"], 2);
        // what came back: residuals, orthonormality, and orthogonality to Y
        let (rows, k, x) =
            matrices::mm::read_complex_array_bytes(&std::fs::read(&vecs).unwrap()).unwrap();
        assert_eq!((rows, k), (n, 2));
        let col = |j: usize| &x[j * n..(j + 1) * n];
        let dot =
            |u: &[c64], w: &[c64]| -> c64 { u.iter().zip(w).map(|(a, b)| a.conj() * b).sum() };
        for (j, lam) in got.iter().enumerate() {
            let mut ax = vec![c64::new(0.0, 0.0); n];
            a.mul_vec(col(j), &mut ax);
            let r: f64 = ax
                .iter()
                .zip(col(j))
                .map(|(u, w)| (u - w * *lam).norm_sqr())
                .sum();
            assert!(r.sqrt() < 1e-10 * a.norm1(), "residual {}", r.sqrt());
            for i in 0..2 {
                let want = if i == j { 1.0 } else { 0.0 };
                assert!((dot(col(i), col(j)) - want).norm() < 1e-10);
                let y: Vec<c64> = (0..n).map(|r| eig.U()[(r, i)]).collect();
                assert!(dot(&y, col(j)).norm() < 1e-8, "against eigenvector {i}");
            }
        }
        let fresh = json(&jdmg(&base));
        let out = jdmg(
            &[
                &base[..],
                &[
                    "--deflate",
                    defl.to_str().unwrap(),
                    "--initial",
                    start.to_str().unwrap(),
                ],
            ]
            .concat(),
        );
        let warm = solved(&out);
        for (g, w) in values(&warm).iter().zip(&exact[2..4]) {
            assert!((g - w).abs() < 1e-8);
        }
        assert!(
            warm["stats"]["matvecs"].as_u64() < fresh["stats"]["matvecs"].as_u64(),
            "{} products from the eigenvectors, {} from random vectors",
            warm["stats"]["matvecs"],
            fresh["stats"]["matvecs"]
        );
    }
    let short = tmp(
        "maglap-defl-short.mtx",
        "%%MatrixMarket matrix array complex general\n2 1\n1 0\n0 1\n",
    );
    let out = jdmg(&[
        "solve",
        file.to_str().unwrap(),
        "--deflate",
        short.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("2 rows, but the matrix has n = 48"));
}

/// `jdmg svd` of a complex rectangular file: the singular values of a dense
/// complex SVD, at both ends.
#[test]
fn svd_of_a_complex_file_matches_a_dense_svd() {
    use faer::c64;
    let t: Vec<(usize, usize, c64)> = (0..30)
        .flat_map(|i| {
            let x = i as f64;
            [
                (i, i % 20, c64::new(2.0 + (0.7 * x).sin(), (0.3 * x).cos())),
                (
                    i,
                    (3 * i + 1) % 20,
                    c64::new((1.3 * x).cos(), -(0.9 * x).sin()),
                ),
            ]
        })
        .collect();
    let a = matrices::ComplexCsr::from_triplets(30, 20, &t).unwrap();
    let mut text = Vec::new();
    matrices::mm::write_complex_coordinate(&mut text, &a, false).unwrap();
    let file = tmp("rect-complex.mtx", std::str::from_utf8(&text).unwrap());
    let dense = faer::Mat::from_fn(30, 20, |i, j| a.get(i, j));
    let mut exact = dense.singular_values().unwrap();
    exact.sort_by(f64::total_cmp);
    for (which, want) in [
        ("smallest", exact[..3].to_vec()),
        ("largest", exact[17..].iter().rev().copied().collect()),
    ] {
        let v = svd_json(file.to_str().unwrap(), which);
        for (got, want) in v["values"].as_array().unwrap().iter().zip(&want) {
            assert!(
                (got.as_f64().unwrap() - want).abs() < 1e-8,
                "{got} against {want}"
            );
        }
    }
}
