//! Fine-grain mode on the thread backend: 1, 2, 4 ranks give the same eigenvalues.
#![allow(clippy::needless_range_loop)] // index-aligned comparisons with references

use jdmg::{solve_distributed, solve_matrix, JdParams};
use jdmg::{ExecutionSettings, ProblemSettings};
use lblib::ThreadComm;
use matrices::generate::{generate, GenSpec};

#[test]
fn same_eigenvalues_on_1_2_4_ranks() {
    let spec: GenSpec = "lap3d:10x9x8".parse().unwrap();
    let a = generate(&spec).unwrap();
    let exact = matrices::generate::exact_eigenvalues(&spec).unwrap();
    let params = JdParams {
        problem: ProblemSettings {
            nev: 4,
            tol: 1e-10,
            ..Default::default()
        },
        execution: ExecutionSettings {
            max_matvecs: Some(100_000),
            ..Default::default()
        },
        ..JdParams::default()
    };
    let serial = solve_matrix(&a, &params, None).unwrap();
    for ranks in [1, 2, 4] {
        let out = ThreadComm::run(ranks, |comm| {
            let s = solve_distributed(&a, &comm, &params, None).unwrap();
            let range = s.rows();
            (s.eigenvalues, s.stats.matvecs, range)
        });
        for (r, (vals, mv, range)) in out.iter().enumerate() {
            assert_eq!(vals.len(), 4, "rank {r}");
            assert!(!range.is_empty());
            for j in 0..4 {
                assert!(
                    (vals[j] - exact[j]).abs() < 1e-8,
                    "{ranks} ranks, rank {r}, eig {j}: {} vs {}",
                    vals[j],
                    exact[j]
                );
                assert!((vals[j] - serial.eigenvalues[j]).abs() < 1e-8);
            }
            // Same iteration history up to rounding: matvec counts stay close.
            assert!(
                (*mv as f64) < 1.5 * serial.stats.matvecs as f64 + 50.0,
                "{ranks} ranks: {mv} matvecs vs {}",
                serial.stats.matvecs
            );
        }
    }
}
