//! Blocked `apply_block` of every preconditioner equals `k` single applications, bitwise,
//! for k = 1, 2, 3, 4, 5, 8, 11 (groups of 8 plus a remainder, every specialised group
//! width on the way), on a generated 3-D Laplacian and on shared real matrices.
//!
//! The shared directory is `$JDMG_MATRICES` or `../shared/matrices`; if it is missing the
//! test that reads it is ignored (`testenv::matrix_test`), or fails with
//! `JDMG_REQUIRE_MATRICES=1`.

mod precond_common;

use matrices::CsrMatrix;
use precond::preconditioners::{build, BlockJacobi, PrecondKind};
use precond::Preconditioner;
use precond_common::{laplace3d, read_shared, shared_dir};

const KS: [usize; 7] = [1, 2, 3, 4, 5, 8, 11];

/// Deterministic, column-dependent input block.
fn block(n: usize, k: usize) -> Vec<f64> {
    (0..n * k)
        .map(|p| {
            let (i, j) = (p % n, p / n);
            ((i * 37 + j * 101 + 13) % 997) as f64 / 997.0 - 0.5 + 0.25 * j as f64
        })
        .collect()
}

/// Asserts `m.apply_block` on `k` vectors equals `k` calls of `m.apply`, bitwise
/// (and that a second block apply, reusing the scratch, gives the same bits).
fn check_blocked(what: &str, m: &dyn Preconditioner) {
    let n = m.nrows();
    for k in KS {
        let r = block(n, k);
        let mut single = vec![f64::NAN; n * k];
        for j in 0..k {
            m.apply(&r[j * n..(j + 1) * n], &mut single[j * n..(j + 1) * n]);
        }
        for round in 0..2 {
            let mut z = vec![f64::NAN; n * k];
            m.apply_block(&r, &mut z, k);
            for (p, (a, b)) in z.iter().zip(&single).enumerate() {
                assert!(
                    a.to_bits() == b.to_bits(),
                    "{what}: k = {k}, round {round}, vector {}, row {}: {a:e} (block) vs {b:e} (single)",
                    p / n,
                    p % n
                );
            }
        }
    }
}

fn kinds(a: &CsrMatrix, names: &[&str], shift: f64, tag: &str) {
    for name in names {
        let kind: PrecondKind = name.parse().unwrap();
        let m = build(&kind, a, shift).unwrap_or_else(|e| panic!("{tag}/{name}: {e}"));
        check_blocked(&format!("{tag}/{name}"), m.as_ref());
        // Block-Jacobi over three uneven blocks (gather/scatter path) and one block.
        let n = a.nrows();
        let ranges = [0..n / 3, n / 3..n / 2, n / 2..n];
        let bj = BlockJacobi::new(a, &ranges, &kind, shift)
            .unwrap_or_else(|e| panic!("{tag}/block-jacobi {name}: {e}"));
        check_blocked(&format!("{tag}/block-jacobi(3) {name}"), &bj);
        let bj1 = BlockJacobi::local(a, 0, &kind, shift).unwrap();
        check_blocked(&format!("{tag}/block-jacobi(1) {name}"), &bj1);
    }
}

#[test]
fn blocked_equals_single_on_laplacian() {
    let a = laplace3d(12);
    kinds(
        &a,
        &[
            "jacobi",
            "ilu0",
            "ilut(20,0)",
            "ilut(10,1e-3)",
            "spai",
            "fsai",
        ],
        0.0,
        "lap3d:12",
    );
    // Indefinite shift: perturbed pivots, negative FSAI signs.
    kinds(
        &a,
        &["jacobi", "ilu0", "ilut(20,0)", "fsai"],
        3.0,
        "lap3d:12-3",
    );
}

/// Factors large enough (≥ 2^20 off-diagonal entries) for the prefetching variants of the
/// substitutions.
#[test]
fn blocked_equals_single_on_large_ilu() {
    let a = laplace3d(64);
    let m = build(&"ilu0".parse().unwrap(), &a, 0.0).unwrap();
    check_blocked("lap3d:64/ilu0", m.as_ref());
}

#[testenv::matrix_test]
fn blocked_equals_single_on_shared_matrices() {
    let dir = shared_dir();
    let a = read_shared(&dir, "bcsstk13");
    kinds(
        &a,
        &["jacobi", "ilu0(0.2)", "ilut(20,0,0.2)"],
        0.0,
        "bcsstk13",
    );
    let a = read_shared(&dir, "crystm01");
    kinds(
        &a,
        &["jacobi", "ilu0", "ilut(20,0)", "spai", "fsai"],
        0.0,
        "crystm01",
    );
}

#[test]
fn empty_block_and_zero_rows() {
    let a = laplace3d(3);
    let m = build(&"ilu0".parse().unwrap(), &a, 0.0).unwrap();
    let mut z: Vec<f64> = Vec::new();
    m.apply_block(&[], &mut z, 0);
    // Concurrent applies of one preconditioner (the scratch is taken, not waited for).
    let n = a.nrows();
    let r = block(n, 4);
    let mut want = vec![0.0; n * 4];
    m.apply_block(&r, &mut want, 4);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..50 {
                    let mut z = vec![0.0; n * 4];
                    m.apply_block(&r, &mut z, 4);
                    assert_eq!(z, want);
                }
            });
        }
    });
}
