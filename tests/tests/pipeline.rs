//! Cross-crate pipeline: generate (matrices) → write and read MatrixMarket (matrices)
//! → solve serially and fine grain on threads (jdmg over precond and lblib), against
//! the analytic spectrum; and a real shared matrix through the same path.

#![allow(clippy::needless_range_loop)] // index-aligned comparisons with references

use jdmg::ProblemSettings;
use jdmg::{solve_distributed, solve_matrix, JdParams, Target};
use jdmg_tests::shared_matrices_dir;
use lblib::ThreadComm;
use matrices::generate::{exact_eigenvalues, generate, GenSpec};
use matrices::mm::{read_matrix_market, write_coordinate_file};

#[test]
fn generated_matrix_round_trips_through_a_file_and_solves() {
    let spec: GenSpec = "aniso3d:9:1,2,0.5".parse().unwrap();
    let a = generate(&spec).unwrap();
    let exact = exact_eigenvalues(&spec).unwrap();
    let path = std::env::temp_dir().join(format!("jdmg-pipeline-{}.mtx", std::process::id()));
    write_coordinate_file(&path, &a, true).unwrap();
    let back = read_matrix_market(&path).unwrap().matrix;
    assert_eq!(back, a, "symmetric write + read is exact");
    let params = JdParams {
        problem: ProblemSettings {
            nev: 3,
            tol: 1e-10,
            target: Target::Largest,
            ..Default::default()
        },
        ..JdParams::default()
    };
    let serial = solve_matrix(&back, &params, None).unwrap();
    let n = exact.len();
    for j in 0..3 {
        assert!((serial.eigenvalues[j] - exact[n - 1 - j]).abs() < 1e-8);
    }
    let dist = ThreadComm::run(3, |c| {
        solve_distributed(&back, &c, &params, None)
            .unwrap()
            .eigenvalues
    });
    for vals in dist {
        for j in 0..3 {
            assert!((vals[j] - serial.eigenvalues[j]).abs() < 1e-8);
        }
    }
}

#[testenv::matrix_test]
fn shared_matrix_nos4_solves_against_its_reference() {
    let dir = shared_matrices_dir();
    let a = read_matrix_market(dir.join("nos4.mtx"))
        .unwrap_or_else(|e| panic!("{e} (set JDMG_MATRICES)"))
        .matrix;
    let text = std::fs::read_to_string(dir.join("reference/nos4.eig")).unwrap();
    let reference: Vec<f64> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.trim().parse().unwrap())
        .collect();
    let params = JdParams {
        problem: ProblemSettings {
            nev: 3,
            tol: 1e-10,
            ..Default::default()
        },
        ..JdParams::default()
    };
    let s = solve_matrix(&a, &params, None).unwrap();
    for j in 0..3 {
        // residual bound: |λ − λ*| ≤ ‖r‖ ≤ 1e-10 ‖A‖ (‖A‖ < 1)
        assert!(
            (s.eigenvalues[j] - reference[j]).abs() < 1e-9,
            "{} vs {}",
            s.eigenvalues[j],
            reference[j]
        );
    }
}
