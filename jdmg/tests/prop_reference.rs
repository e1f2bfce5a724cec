//! Property test (issue 22): small symmetric matrices with planted
//! multiplicities, clusters and scales, solved with drawn options (block,
//! nev, target); every answer reported as converged is compared with a dense
//! reference (faer's self-adjoint eigendecomposition of the same matrix):
//! true residuals recomputed from the returned vectors, orthonormal vectors,
//! and the wanted eigenvalues, copies included.

mod common;

use jdmg::{solve_matrix, JdError, JdParams, Target};
use jdmg::{BasisSettings, ProblemSettings};
use matrices::CsrMatrix;
use proptest::prelude::*;

/// A planted spectrum: `groups` of (value, copies, cluster spread).
#[derive(Debug, Clone)]
struct Planted {
    values: Vec<f64>,
    scale: f64,
    rotations: Vec<(usize, usize, f64)>,
}

fn planted() -> impl Strategy<Value = Planted> {
    let group = (
        -4.0f64..4.0,
        1usize..=4,
        prop_oneof![Just(0.0), Just(1e-9), Just(1e-4)],
    );
    (
        prop::collection::vec(group, 2..8),
        prop_oneof![Just(1e-6), Just(1.0), Just(1e6)],
        any::<u64>(),
    )
        .prop_map(|(groups, scale, seed)| {
            let mut values = Vec::new();
            for (v, copies, spread) in groups {
                for c in 0..copies {
                    values.push(v + spread * c as f64);
                }
            }
            // A Givens rotation for every pair of a few random sweeps: a dense
            // orthogonal Q, so that copies are not aligned with the axes.
            let n = values.len();
            let mut s = seed | 1;
            let mut next = move || {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                s
            };
            let mut rotations = Vec::new();
            for _ in 0..3 {
                for i in 0..n {
                    let j = (next() % n as u64) as usize;
                    if i != j {
                        let angle = (next() % 10_000) as f64 / 10_000.0 * std::f64::consts::TAU;
                        rotations.push((i, j, angle));
                    }
                }
            }
            Planted {
                values,
                scale,
                rotations,
            }
        })
}

/// A = Q diag(values·scale) Qᵀ, dense and exactly symmetric (row-major).
fn matrix(p: &Planted) -> (usize, Vec<f64>) {
    (
        p.values.len(),
        common::planted(&p.values, p.scale, &p.rotations),
    )
}

fn csr(n: usize, a: &[f64]) -> CsrMatrix {
    let t: Vec<(usize, usize, f64)> = (0..n * n)
        .filter(|&k| a[k] != 0.0)
        .map(|k| (k / n, k % n, a[k]))
        .collect();
    CsrMatrix::from_triplets(n, n, &t).unwrap()
}

/// Eigenvalues of the dense symmetric matrix, ascending (faer).
fn reference(n: usize, a: &[f64]) -> Vec<f64> {
    let m = faer::Mat::<f64>::from_fn(n, n, |i, j| a[i * n + j]);
    let mut v = m
        .self_adjoint_eigenvalues(faer::Side::Lower)
        .expect("dense reference");
    v.sort_by(f64::total_cmp);
    v
}

fn key(t: Target, l: f64) -> f64 {
    match t {
        Target::Smallest => l,
        Target::Largest => -l,
        Target::Closest(s) => (l - s).abs(),
        Target::LargestMagnitude => -l.abs(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn converged_answers_match_the_dense_reference(
        p in planted(),
        block in 0usize..=3,
        nev_pick in 1usize..=6,
        target_pick in 0usize..3,
        shift in -4.0f64..4.0,
        seed in 1u64..50,
    ) {
        let (n, dense) = matrix(&p);
        let a = csr(n, &dense);
        let exact = reference(n, &dense);
        let anorm = exact.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(f64::MIN_POSITIVE);
        let nev = nev_pick.min(n - 1);
        let target = match target_pick {
            0 => Target::Smallest,
            1 => Target::Largest,
            _ => Target::Closest(shift * p.scale),
        };
        let tol = 1e-10;
        let prm = JdParams {
            problem: ProblemSettings { nev, target, tol, ..Default::default() },
            basis: BasisSettings { block, seed, ..Default::default() },
            ..JdParams::default()
        };
        let (sol, complete) = match solve_matrix(&a, &prm, None) {
            Ok(s) => {
                let complete = s.is_converged();
                (s, complete)
            }
            Err(JdError::InvalidParams { .. }) => return Ok(()),
            Err(e) => return Err(TestCaseError::fail(format!("{e}"))),
        };
        // Every pair marked converged: its true residual.
        let bound = 100.0 * tol * anorm;
        let res = common::true_residuals(&a, &sol);
        for (j, r) in res.iter().enumerate() {
            if sol.converged[j] {
                prop_assert!(*r <= bound, "pair {j}: true residual {r:e} > {bound:e}, {:?}", sol.eigenvalues);
            }
        }
        prop_assert!(common::orthonormality_error(&sol) <= 1e-8);
        if !complete {
            return Ok(());
        }
        // The wanted set, copies included: the nev best eigenvalues by target,
        // unless the boundary is a tie (then either member is right).
        let mut by_key = exact.clone();
        by_key.sort_by(|x, y| key(target, *x).total_cmp(&key(target, *y)));
        if n > nev && (key(target, by_key[nev]) - key(target, by_key[nev - 1])).abs() <= 4.0 * bound {
            return Ok(());
        }
        let mut want: Vec<f64> = by_key[..nev].to_vec();
        let mut got = sol.eigenvalues.clone();
        prop_assert_eq!(got.len(), nev);
        want.sort_by(f64::total_cmp);
        got.sort_by(f64::total_cmp);
        for (g, w) in got.iter().zip(&want) {
            prop_assert!((g - w).abs() <= 2.0 * bound, "got {:?}, want {:?} (scale {})", got, want, p.scale);
        }
    }
}
