//! `jdmg dense` (hetdense, Boudet et al.; Mehaut and Robert) from the command line: the JSON
//! keys the issue names, backward errors at rounding level, semi-static
//! re-planning counters, and exit 2 with a message on bad input.

use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_jdmg"))
        .args(args)
        .env_remove("OMPI_COMM_WORLD_SIZE")
        .env_remove("PMI_SIZE")
        .env_remove("PMIX_RANK")
        .output()
        .expect("run jdmg")
}

fn json(args: &[&str]) -> serde_json::Value {
    let o = run(args);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("one JSON object")
}

const EPS: f64 = f64::EPSILON;

#[test]
fn lu_and_qr_report_every_key_at_rounding_level() {
    let lu = json(&[
        "dense",
        "lu",
        "--n",
        "256",
        "--block",
        "16",
        "--ranks",
        "2",
        "--slowdown",
        "1,3",
        "--layout",
        "hetero",
        "--rhs",
        "--json",
    ]);
    for key in [
        "op",
        "n",
        "block",
        "layout",
        "nprocs",
        "wall_seconds",
        "gflops",
        "backward_error",
        "orthogonality",
        "rates",
        "columns_per_rank",
        "imbalance_percent",
        "replans",
        "relayouts",
        "bytes_moved",
    ] {
        assert!(lu.get(key).is_some(), "missing {key}: {lu}");
    }
    assert_eq!(lu["op"], "lu");
    assert_eq!(lu["nprocs"], 2);
    let cols: Vec<u64> = serde_json::from_value(lu["columns_per_rank"].clone()).unwrap();
    assert_eq!(cols.iter().sum::<u64>(), 256);
    // rank 1 measured slower (virtual clocks) holds fewer columns
    assert!(cols[0] > cols[1], "{cols:?}");
    assert!(lu["backward_error"].as_f64().unwrap() <= 256.0 * EPS);
    assert!(lu["solve_residual"].as_f64().unwrap() <= 256.0 * EPS);
    let qr = json(&[
        "dense", "qr", "--n", "192", "--block", "16", "--ranks", "3", "--json",
    ]);
    assert!(qr["backward_error"].as_f64().unwrap() <= 192.0 * EPS);
    assert!(qr["orthogonality"].as_f64().unwrap() <= 192.0 * EPS);
}

#[test]
fn replanning_after_a_load_change_moves_blocks() {
    // rank 1 becomes 4x slower at panel 8 of 48; re-planning every 8 panels from
    // the updates' rates (windows of any length)
    let r = json(&[
        "dense",
        "lu",
        "--n",
        "768",
        "--block",
        "16",
        "--ranks",
        "2",
        "--layout",
        "hetero",
        "--slowdown-after",
        "8:1,4",
        "--replan",
        "8",
        "--replan-seconds",
        "0",
        "--json",
    ]);
    assert_eq!(r["replans"], 5, "{r}");
    assert!(r["relayouts"].as_u64().unwrap() >= 1, "{r}");
    assert!(r["bytes_moved"].as_u64().unwrap() > 0, "{r}");
    let cols: Vec<u64> = serde_json::from_value(r["columns_per_rank"].clone()).unwrap();
    assert!(cols[0] > cols[1], "{cols:?}");
    assert!(r["backward_error"].as_f64().unwrap() <= 768.0 * EPS);
}

#[test]
fn bad_options_exit_2_with_a_message() {
    for (args, says) in [
        (
            &[
                "dense",
                "lu",
                "--n",
                "64",
                "--block",
                "8",
                "--replan-gain",
                "1.5",
            ][..],
            "replan-gain",
        ),
        (
            &["dense", "lu", "--n", "64", "--block", "8", "--replan", "2"][..],
            "--layout hetero",
        ),
        (&["dense", "lu", "--n", "64", "--block", "0"][..], "block"),
        (&["dense", "qr", "/nonexistent/m.mtx"][..], "nonexistent"),
    ] {
        let o = run(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
