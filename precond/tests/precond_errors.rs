//! Typed errors of the preconditioner builders (never a panic on user input), and
//! edge cases of the solvers.

mod precond_common;

use lbcomm::SelfComm;
use matrices::CsrMatrix;
use precond::krylov::{Bicgstab, Cg, Gmres, StopCriteria};
use precond::preconditioners::{
    build, build_with_info, BlockJacobi, IlutParams, PivotParams, PrecondError, PrecondKind,
    SpaiParams,
};
use precond::IdentityPreconditioner;
use precond_common::{laplace3d, CsrOp};

const ALL: [&str; 5] = ["none", "jacobi", "ilu0", "ilut", "spai"];

fn kind(s: &str) -> PrecondKind {
    s.parse().unwrap()
}

#[test]
fn precond_errors_not_square_and_non_finite() {
    let rect = CsrMatrix::from_triplets(2, 3, &[(0, 0, 1.0), (1, 1, 1.0)]).unwrap();
    for k in ALL {
        assert_eq!(
            build(&kind(k), &rect, 0.0).err(),
            Some(PrecondError::NotSquare { nrows: 2, ncols: 3 }),
            "{k}"
        );
    }
    let nan = CsrMatrix::from_triplets(
        3,
        3,
        &[(0, 0, 1.0), (1, 1, 1.0), (2, 2, 1.0), (2, 1, f64::INFINITY)],
    )
    .unwrap();
    for k in ALL {
        assert_eq!(
            build(&kind(k), &nan, 0.0).err(),
            Some(PrecondError::NonFinite { row: 2, col: 1 }),
            "{k}"
        );
    }
    let a = laplace3d(3);
    for k in ALL {
        assert!(
            matches!(
                build(&kind(k), &a, f64::NAN).err(),
                Some(PrecondError::NonFiniteShift { .. })
            ),
            "{k}"
        );
    }
}

#[test]
fn precond_errors_bad_parameters() {
    let a = laplace3d(3);
    let bad = [
        PrecondKind::Jacobi(PivotParams {
            pivot_tol: -1.0,
            ..PivotParams::default()
        }),
        PrecondKind::Ilu0(PivotParams {
            pivot_tol: f64::NAN,
            ..PivotParams::default()
        }),
        PrecondKind::Ilu0(PivotParams {
            diag_shift: -0.1,
            ..PivotParams::default()
        }),
        PrecondKind::Ilut(IlutParams {
            drop_tol: -1e-3,
            ..IlutParams::default()
        }),
        PrecondKind::Ilut(IlutParams {
            diag_shift: f64::INFINITY,
            ..IlutParams::default()
        }),
        PrecondKind::Spai(SpaiParams {
            drop_tol: -1.0,
            ..SpaiParams::default()
        }),
        PrecondKind::Spai(SpaiParams {
            threads: 0,
            ..SpaiParams::default()
        }),
    ];
    for k in bad {
        assert!(
            matches!(
                build(&k, &a, 0.0).err(),
                Some(PrecondError::InvalidParameter { .. })
            ),
            "{k:?}"
        );
    }
}

#[test]
fn precond_errors_zero_rows_and_disabled_perturbation() {
    // Row 1 entirely zero: every factorization kind reports the row.
    let z = CsrMatrix::from_triplets(3, 3, &[(0, 0, 2.0), (2, 2, 2.0), (0, 2, 1.0), (2, 0, 1.0)])
        .unwrap();
    for k in ["jacobi", "ilu0", "ilut", "spai"] {
        assert_eq!(
            build(&kind(k), &z, 0.0).err(),
            Some(PrecondError::ZeroPivot { row: 1 }),
            "{k}"
        );
    }
    // A shift that zeroes a pivot: perturbed by default (and reported), an error when
    // perturbation is disabled.
    let d = CsrMatrix::from_triplets(2, 2, &[(0, 0, 1.0), (1, 1, 3.0), (0, 1, 0.5), (1, 0, 0.5)])
        .unwrap();
    let (_, info) = build_with_info(&kind("ilu0"), &d, 1.0).unwrap();
    assert_eq!(info.perturbed_pivots, 1);
    let strict = PrecondKind::Ilu0(PivotParams {
        pivot_tol: 0.0,
        ..PivotParams::default()
    });
    assert_eq!(
        build(&strict, &d, 1.0).err(),
        Some(PrecondError::ZeroPivot { row: 0 })
    );
    // Block ranges that do not tile the rows.
    let a = laplace3d(3);
    assert!(matches!(
        BlockJacobi::new(&a, &[0..10, 10..20], &kind("ilu0"), 0.0),
        Err(PrecondError::SizeMismatch {
            expected: 27,
            got: 20,
            ..
        })
    ));
    // A local block whose columns exceed the matrix.
    let local = a.row_slice(20, 27);
    assert!(matches!(
        BlockJacobi::local(&local, 21, &kind("jacobi"), 0.0),
        Err(PrecondError::SizeMismatch { .. })
    ));
}

#[test]
fn krylov_zero_rhs_and_exact_start() {
    let a = laplace3d(4);
    let n = a.nrows();
    let comm = SelfComm::new();
    let m = IdentityPreconditioner { n };
    let stop = StopCriteria::default();
    let zero = vec![0.0; n];
    // b = 0: x = 0 is exact, no step is taken.
    let r = Bicgstab::new(n).solve(&CsrOp(&a), &m, &comm, &zero, None, &stop);
    assert!(
        r.converged && r.steps == 0 && r.true_residual_norm == 0.0,
        "{r:?}"
    );
    let r = Cg::new(n).solve(&CsrOp(&a), &m, &comm, &zero, None, &stop);
    assert!(r.converged && r.steps == 0, "{r:?}");
    let r = Gmres::new(n, 5).solve(&CsrOp(&a), &m, &comm, &zero, None, &stop);
    assert!(r.converged && r.steps == 0, "{r:?}");
    // Exact initial guess: converged at once, and step() on a zero residual is a no-op.
    let x = vec![1.0; n];
    let mut b = vec![0.0; n];
    a.mul_vec(&x, &mut b);
    let mut s = Bicgstab::new(n);
    assert_eq!(s.start(&CsrOp(&a), &comm, &b, Some(&x)), 0.0);
    assert_eq!(s.step(&CsrOp(&a), &m, &comm), Ok(0.0));
    assert_eq!(s.solution(), &x[..]);
    // The iteration cap is honoured and reported.
    let capped = StopCriteria {
        max_steps: 3,
        rtol: 1e-14,
        atol: 0.0,
    };
    let r = Bicgstab::new(n).solve(&CsrOp(&a), &m, &comm, &b, None, &capped);
    assert!(
        !r.converged && r.steps == 3 && r.breakdown.is_none(),
        "{r:?}"
    );
}
