//! Absurd sizes and values on the command line or in a file header are refused
//! with exit 2 and the figure, before anything is allocated (issue 22: panics,
//! aborts and tens of GB on tiny inputs).

use std::path::PathBuf;
use std::process::{Command, Output};

fn jdmg(args: &[&str]) -> Output {
    // The same memory figure on every machine, and an address space of 2 GiB: a
    // refusal must come before any allocation the sizes control (an allocation
    // beyond it aborts, which fails the exit-code check), whatever the machine's
    // speed or memory.
    let mut c = Command::new(env!("CARGO_BIN_EXE_jdmg"));
    c.args(args).env("JDMG_MEMORY_LIMIT", "8G");
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: setrlimit(2) between fork and exec, no allocation.
        unsafe {
            c.pre_exec(|| {
                let lim = libc::rlimit {
                    rlim_cur: 2 << 30,
                    rlim_max: 2 << 30,
                };
                if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    c.output().expect("jdmg runs")
}

/// Exit 2 (never 101 or 134) with every word of `words` on stderr, within an
/// address space of 2 GiB (see [`jdmg`]).
fn refused(args: &[&str], words: &[&str]) {
    let out = jdmg(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    for w in words {
        assert!(err.contains(w), "{args:?}: {w:?} not in {err}");
    }
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("jdmg-guards-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Before: a panic (exit 101) on a Duration overflow.
#[test]
fn link_latency_is_bounded() {
    refused(
        &[
            "solve",
            "--generate",
            "lap3d:5",
            "--nev",
            "2",
            "--ranks",
            "2",
            "--link-latency",
            "1e308",
        ],
        &["--link-latency", "3600"],
    );
}

/// Before: a 78-byte file declaring 1e9 × 1e9 with one entry read for 50 s at
/// 15.6 GB (`info`: 30 s, 11.7 GB) whenever the machine had that much free.
#[test]
fn tiny_files_declaring_huge_sizes_are_refused_at_once() {
    let d = scratch("mm");
    let huge = d.join("huge.mtx");
    std::fs::write(
        &huge,
        "%%MatrixMarket matrix coordinate real symmetric\n1000000000 1000000000 1\n1 1 1\n",
    )
    .unwrap();
    let arr = d.join("arr.mtx");
    std::fs::write(
        &arr,
        "%%MatrixMarket matrix array real general\n3000 3000\n1\n",
    )
    .unwrap();
    for sub in ["info", "solve"] {
        let h = huge.to_str().unwrap();
        // refused for its rows per entry, or for the memory (both at line 2)
        refused(
            &[sub, h, "--nev", "1"][..if sub == "info" { 2 } else { 4 }],
            &["line 2"],
        );
        let a = arr.to_str().unwrap();
        refused(
            &[sub, a, "--nev", "1"][..if sub == "info" { 2 } else { 4 }],
            &[
                "line 2",
                "3000 x 3000 array (9000000 values), but only 2 bytes",
            ],
        );
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// Before: `--n 3000000000` panicked (capacity overflow after 3 GB),
/// `--n 100000` aborted on an 80 GB allocation, `--slowdown 1e308,1` panicked
/// on mismatched collectives, `--ranks 1000` failed to spawn threads and hung,
/// `--slice 100000000` took 4.6 GB for n = 40.
#[test]
fn dense_sizes_are_checked_before_allocating() {
    refused(
        &["dense", "lu", "--n", "3000000000"],
        &["dense --n 3000000000 needs about"],
    );
    refused(
        &["dense", "lu", "--n", "100000"],
        &["dense --n 100000 needs about 298.0 GiB"],
    );
    refused(
        &[
            "dense",
            "lu",
            "--block",
            "4",
            "--n",
            "40",
            "--ranks",
            "2",
            "--slowdown",
            "1e308,1",
        ],
        &["--slowdown needs 2 factors in (0, 1e6]"],
    );
    refused(
        &["dense", "lu", "--n", "10", "--ranks", "1000"],
        &["--ranks 1000", "256"],
    );
    refused(
        &[
            "dense",
            "lu",
            "--n",
            "40",
            "--layout",
            "hetero",
            "--slice",
            "100000000",
        ],
        &["slice = 100000000", "column blocks"],
    );
}

/// Before: `plan tiles --run-lu --n 2 --tile 100000` panicked in faer,
/// `plan tiles --n 100000` and `--alpha 1e308` aborted on 80 and 8.4 GB
/// allocations, `plan tiles --p 1000000` and `plan dag --p 1000000000` ran
/// out of memory at 13–16 GB.
#[test]
fn plan_sizes_are_checked_before_allocating() {
    refused(
        &["plan", "tiles", "--run-lu", "--n", "2", "--tile", "100000"],
        &["--run-lu with --n 2 --tile 100000 (order 200000) needs about"],
    );
    refused(&["plan", "tiles", "--n", "100000"], &["--n 100000", "400"]);
    refused(
        &["plan", "tiles", "--alpha", "1e308"],
        &["--alpha 1e308:", "[1, 64]"],
    );
    refused(
        &["plan", "tiles", "--p", "1000000"],
        &["--p 1000000", "4096"],
    );
    refused(
        &["plan", "dag", "--p", "1000000000"],
        &["--p 1000000000", "4096"],
    );
    let out = jdmg(&["plan", "tiles", "--run-lu", "--n", "2", "--tile", "16"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Before: `dense lu --n 40` was refused ("block = 64: must be in 1..=n")
/// although the user gave no block. The default is min(64, n); a block the
/// user gave is still checked.
#[test]
fn dense_default_block_fits_small_orders() {
    let out = jdmg(&["dense", "lu", "--n", "40", "--json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["block"], 40);
    assert!(v["backward_error"].as_f64().unwrap() < 1e-12, "{v}");
    let out = jdmg(&["dense", "lu", "--n", "100", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["block"], 64);
    refused(
        &["dense", "lu", "--n", "40", "--block", "64"],
        &["block = 64"],
    );
}

/// Before: `tol = nan` gave "invalid type: null, expected f64", and
/// `precond_shift = nan` or `anorm = inf` were silently ignored.
#[test]
fn toml_nan_and_inf_are_refused_naming_the_key() {
    let d = scratch("toml");
    for (line, key) in [
        ("tol = nan", "tol"),
        ("precond_shift = nan", "precond_shift"),
        ("anorm = inf", "anorm"),
        ("tol = -inf", "tol"),
    ] {
        let c = d.join("c.toml");
        std::fs::write(&c, format!("{line}\n")).unwrap();
        let c = c.to_str().unwrap();
        refused(
            &[
                "solve",
                "--generate",
                "lap2d:5x5",
                "--nev",
                "1",
                "--config",
                c,
            ],
            &[&format!("{key}: nan and inf are not accepted")],
        );
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// Before: `--rate-seconds 1e308` named the library's `first_section_ops`,
/// `--clusters 0,0` said "owner 0 of block 1 is out of range", and an
/// --svg-dir that is a file gave a bare "File exists".
#[test]
fn messages_name_the_options() {
    refused(
        &[
            "dense",
            "lu",
            "--n",
            "40",
            "--ranks",
            "2",
            "--rate-seconds",
            "1e308",
        ],
        &["--rate-seconds 1e308: must lie in [0, 3600] seconds"],
    );
    refused(
        &[
            "dense",
            "lu",
            "--n",
            "40",
            "--ranks",
            "2",
            "--layout",
            "clusters",
            "--clusters",
            "0,0",
        ],
        &["--clusters: rank 0 is in two clusters"],
    );
    refused(
        &[
            "dense",
            "lu",
            "--n",
            "40",
            "--ranks",
            "3",
            "--layout",
            "clusters",
            "--clusters",
            "0-1",
        ],
        &["--clusters: rank 2 is in no cluster"],
    );
    let d = scratch("svg");
    let f = d.join("a-file");
    std::fs::write(&f, "x").unwrap();
    refused(
        &["plan", "tiles", "--svg-dir", f.to_str().unwrap()],
        &["--svg-dir", "is a file, not a directory"],
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// Before: `spectrum:5:-1e308:1e308` generated NaN entries (hi − lo
/// overflowed) and the solve said only "non-finite value in projected matrix
/// H"; a matrix scaled by 1e-310 said the same. The generator now gives
/// finite entries, and both matrices are solved (their internal scales are
/// powers of two that bring ‖A‖ to about 1, within the range of doubles).
#[test]
fn extreme_scales_are_solved() {
    let d = scratch("scales");
    let sp = d.join("sp.mtx");
    let out = jdmg(&[
        "generate",
        "spectrum:5:-1e308:1e308",
        "-o",
        sp.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m = matrices::mm::read_matrix_market(&sp).unwrap().matrix;
    assert!(m.data().iter().all(|v| v.is_finite()));
    let tiny = d.join("tiny.mtx");
    let mut text = String::from("%%MatrixMarket matrix coordinate real symmetric\n20 20 39\n");
    for i in 1..=20 {
        text += &format!("{i} {i} 2e-310\n");
    }
    for i in 1..20 {
        text += &format!("{} {i} -1e-310\n", i + 1);
    }
    std::fs::write(&tiny, text).unwrap();
    // 1e-310: solved, the internal scale 2^1000 (2^1030 overflowed to an
    // infinite scale, and the solve failed with "non-finite value in projected
    // matrix H"); the eigenvalues of tridiag(−1, 2, −1)·1e-310
    let out = jdmg(&["solve", tiny.to_str().unwrap(), "--nev", "2", "--json"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let scale = v["stats"]["scale"].as_f64().expect("scale");
    assert!((scale / 2f64.powi(1000) - 1.0).abs() < 1e-12, "{v}");
    for (k, got) in v["eigenvalues"].as_array().unwrap().iter().enumerate() {
        let exact = (2.0 - 2.0 * (std::f64::consts::PI * (k + 1) as f64 / 21.0).cos()) * 1e-310;
        let got = got.as_f64().unwrap();
        // subnormal entries carry about 12 significant digits
        assert!((got - exact).abs() <= 1e-9 * exact, "{got:e} vs {exact:e}");
    }
    // ±1e308: solved as well (the scale estimate max|Aq|·√n overflowed to
    // infinity, which left the matrix unscaled and its residuals' squares
    // infinite); the two smallest of 5 equispaced values in [−1e308, 1e308].
    let out = jdmg(&["solve", sp.to_str().unwrap(), "--nev", "2", "--json"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    for (k, got) in v["eigenvalues"].as_array().unwrap().iter().enumerate() {
        let exact = -1e308 + k as f64 * 5e307;
        let got = got.as_f64().unwrap();
        assert!((got - exact).abs() <= 1e-10 * 1e308, "{got:e} vs {exact:e}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// Before: `--ranks 64` under an address-space limit aborted (134) in a rank
/// ("memory allocation of 67108864 bytes failed": each rank thread reserves its
/// stack and the dense kernels' workspace, twice the L3 cache, plus up to eight
/// malloc arenas of 64 MiB per core). Now the arenas are shared, the ranks'
/// reservations are checked against the limit (exit 2 with the figures), and
/// the ranks that fit run. Within 2 GiB (see [`jdmg`]).
#[test]
fn thread_ranks_fit_the_address_space_or_are_refused() {
    for args in [
        &[
            "solve",
            "--generate",
            "lap3d:12",
            "--nev",
            "2",
            "--ranks",
            "200",
        ][..],
        &["dense", "lu", "--n", "40", "--block", "4", "--ranks", "200"][..],
    ] {
        refused(
            args,
            &[
                "--ranks 200",
                "address space",
                "ulimit -v",
                "use fewer ranks",
            ],
        );
    }
    // 8 ranks: 8 × (16 MiB + 2 × L3) and two arenas fit 2 GiB unless the L3
    // cache is over 100 MiB, in which case the refusal must say so
    let out = jdmg(&[
        "solve",
        "--generate",
        "lap3d:12",
        "--nev",
        "2",
        "--ranks",
        "8",
        "--json",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => {
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
            assert_eq!(v["nprocs"], 8);
            assert_eq!(v["converged"], true);
        }
        Some(2) => assert!(err.contains("address space"), "{err}"),
        other => panic!("exit {other:?}: {err}"),
    }
}
