//! Acceptance of issue 4: right-preconditioned BiCGSTAB with none / Jacobi / ILU(0) /
//! ILUT(20,0) / SPAI on bcsstk13, 1138_bus, crystm01, nos4 (shared matrices) and a 3D
//! Laplacian, `b = A · ones`. Every combination that converges is checked on the TRUE
//! relative residual `‖b − Ax‖/‖b‖ ≤ 1e-10`, recomputed here independently of the solver;
//! the combinations that cannot reach it within a cap assert their documented outcome.
//! Also: shifted (indefinite) systems `A − σI` as in the JD correction equation, and
//! block-Jacobi.
//!
//! The shared directory is `$JDMG_MATRICES` or `../shared/matrices`; if it is missing the
//! tests are ignored (`testenv::matrix_test`), or fail with `JDMG_REQUIRE_MATRICES=1`.

mod precond_common;

use lbcomm::SelfComm;
use matrices::CsrMatrix;
use precond::krylov::{Bicgstab, Gmres, KrylovResult, StopCriteria};
use precond::preconditioners::{build_with_info, BlockJacobi, Ilu0, PivotParams, PrecondKind};
use precond::Preconditioner;
use precond_common::{laplace3d, read_shared, rel_residual, rhs_ones, shared_dir, CsrOp};

const RTOL: f64 = 1e-10;

fn run(a: &CsrMatrix, m: &dyn Preconditioner, b: &[f64], cap: usize) -> (KrylovResult, Vec<f64>) {
    let mut s = Bicgstab::new(a.nrows());
    let stop = StopCriteria {
        max_steps: cap,
        rtol: RTOL,
        atol: 0.0,
    };
    let res = s.solve(&CsrOp(a), m, &SelfComm::new(), b, None, &stop);
    (res, s.solution().to_vec())
}

/// Builds `kind` for `a`, solves with a cap, and checks the outcome: `Some(max_steps)`
/// means "converges to a true residual <= 1e-10 in at most that many steps"; `None`
/// means "documented not to converge within `cap`".
fn check(name: &str, a: &CsrMatrix, kind: &str, cap: usize, expect_within: Option<usize>) -> usize {
    let b = rhs_ones(a);
    let (m, _) = build_with_info(&kind.parse::<PrecondKind>().unwrap(), a, 0.0)
        .unwrap_or_else(|e| panic!("{name}/{kind}: {e}"));
    let (res, x) = run(a, m.as_ref(), &b, cap);
    let rr = rel_residual(a, &x, &b);
    // The solver's reported true residual is the one recomputed here.
    assert!(
        (res.true_residual_norm / res.b_norm - rr).abs() <= 1e-3 * rr + 1e-15,
        "{name}/{kind}"
    );
    match expect_within {
        Some(max) => {
            assert!(res.converged, "{name}/{kind}: {res:?}");
            assert!(rr <= RTOL, "{name}/{kind}: true residual {rr:e}");
            assert!(
                res.steps <= max,
                "{name}/{kind}: {} steps > {max}",
                res.steps
            );
        }
        None => {
            assert!(
                !res.converged && rr > RTOL && rr.is_finite(),
                "{name}/{kind}: {res:?}"
            );
            assert_eq!(res.steps, cap, "{name}/{kind}");
        }
    }
    res.steps
}

#[testenv::matrix_test]
fn precond_table_bcsstk13() {
    let dir = shared_dir();
    let a = read_shared(&dir, "bcsstk13");
    assert_eq!((a.nrows(), a.nnz()), (2003, 83883));
    // Iteration counts on bcsstk13 and 1138_bus are sensitive to rounding (another SpMV
    // summation order moves them by up to ±50%), so the caps leave room.
    // cond(bcsstk13) ~ 1e10: plain BiCGSTAB stalls (true residual 2.3e-7 after 10000 steps).
    check("bcsstk13", &a, "none", 1000, None);
    check("bcsstk13", &a, "jacobi", 6000, Some(6000));
    check("bcsstk13", &a, "ilut(20,0)", 12000, Some(12000));
    check("bcsstk13", &a, "spai", 5000, Some(5000));
    check("bcsstk13", &a, "fsai", 3000, Some(3000));
    // Plain ILU(0) is unstable on bcsstk13: 79 negative pivots although A is SPD, and
    // BiCGSTAB does not converge (true residual 5e-3 after 10000 steps). Manteuffel's
    // diagonal shift alpha = 0.2 removes every negative pivot and restores convergence.
    let plain = Ilu0::new(&a, 0.0, &PivotParams::default()).unwrap();
    let neg = (0..a.nrows())
        .filter(|&i| plain.factors().pivot(i) < 0.0)
        .count();
    assert_eq!(neg, 79);
    check("bcsstk13", &a, "ilu0", 300, None);
    let shifted = Ilu0::new(
        &a,
        0.0,
        &PivotParams {
            diag_shift: 0.2,
            ..PivotParams::default()
        },
    )
    .unwrap();
    assert!((0..a.nrows()).all(|i| shifted.factors().pivot(i) > 0.0));
    check("bcsstk13", &a, "ilu0(0.2)", 3000, Some(3000));
    let fast = check("bcsstk13", &a, "ilut(20,0,0.05)", 2000, Some(2000));
    assert!(fast < 1000, "{fast}");
}

#[testenv::matrix_test]
fn precond_table_1138_bus() {
    let dir = shared_dir();
    let a = read_shared(&dir, "1138_bus");
    assert_eq!(a.nrows(), 1138);
    let none = check("1138_bus", &a, "none", 8000, Some(8000));
    check("1138_bus", &a, "jacobi", 5000, Some(5000));
    let ilu0 = check("1138_bus", &a, "ilu0", 1000, Some(1000));
    let ilut = check("1138_bus", &a, "ilut(20,0)", 100, Some(100));
    check("1138_bus", &a, "spai", 1000, Some(1000));
    check("1138_bus", &a, "fsai", 1000, Some(1000));
    assert!(ilut < ilu0 && ilu0 < none, "{ilut} {ilu0} {none}");
}

#[testenv::matrix_test]
fn precond_table_crystm01() {
    let dir = shared_dir();
    let a = read_shared(&dir, "crystm01");
    assert_eq!(a.nrows(), 4875);
    let none = check("crystm01", &a, "none", 500, Some(500));
    let jac = check("crystm01", &a, "jacobi", 200, Some(200));
    // crystm01 is a mass matrix, strongly diagonally dominant: ILU converges in <= 3 steps.
    check("crystm01", &a, "ilu0", 3, Some(3));
    check("crystm01", &a, "ilut(20,0)", 3, Some(3));
    check("crystm01", &a, "spai", 50, Some(50));
    check("crystm01", &a, "fsai", 50, Some(50));
    assert!(jac < none);
}

#[testenv::matrix_test]
fn precond_table_nos4() {
    let dir = shared_dir();
    let a = read_shared(&dir, "nos4");
    assert_eq!(a.nrows(), 100);
    check("nos4", &a, "none", 500, Some(500));
    check("nos4", &a, "jacobi", 500, Some(500));
    check("nos4", &a, "ilu0", 100, Some(100));
    // nos4 has bandwidth < 20: ILUT(20,0) is the exact LU, one step.
    check("nos4", &a, "ilut(20,0)", 2, Some(1));
    check("nos4", &a, "spai", 200, Some(200));
    check("nos4", &a, "fsai", 200, Some(200));
}

#[test]
fn precond_table_laplace3d() {
    let a = laplace3d(20);
    assert_eq!((a.nrows(), a.nnz()), (8000, 53600));
    let none = check("laplace3d", &a, "none", 200, Some(200));
    let ilu0 = check("laplace3d", &a, "ilu0", 200, Some(200));
    let ilut = check("laplace3d", &a, "ilut(20,0)", 200, Some(200));
    let spai = check("laplace3d", &a, "spai", 200, Some(200));
    check("laplace3d", &a, "jacobi", 200, Some(200));
    check("laplace3d", &a, "fsai", 200, Some(200));
    assert!(
        ilut < ilu0 && ilu0 < none && spai < none,
        "{ilut} {ilu0} {spai} {none}"
    );
}

/// The JD correction operator is `A − θI` with θ inside the spectrum: indefinite. ILU
/// variants still build (tiny pivots perturbed, never a failure on a nonzero row) and the
/// preconditioned solvers reach the tolerance on the TRUE residual.
#[testenv::matrix_test]
fn precond_shifted_indefinite_nos4() {
    let dir = shared_dir();
    let a = read_shared(&dir, "nos4");
    let n = a.nrows();
    // nos4's spectrum lies in (0, 0.85); shift into the middle.
    let sigma = 0.3;
    let mut t = Vec::new();
    for i in 0..n {
        let (c, v) = a.row(i);
        for (&c, &v) in c.iter().zip(v) {
            t.push((i, c as usize, v));
        }
        t.push((i, i, -sigma));
    }
    let shifted = CsrMatrix::from_triplets(n, n, &t).unwrap();
    let b = rhs_ones(&a);
    // (kind, GMRES restart length, converges?)
    for (kind, restart, converges) in [
        ("ilu0", 50, true),
        ("ilut(20,0)", 50, true),
        // Jacobi and SPAI (pattern of A) are poor inverses of the indefinite A − σI:
        // GMRES(50) stagnates (true residual ~6e-5 and ~8e-2 after 2000 steps); full
        // GMRES (m = n = 100) converges.
        ("jacobi", 100, true),
        ("spai", 50, false),
        ("spai", 100, true),
        // FSAI with signs (Gᵀ S G) is symmetric but weak for an interior shift: GMRES(50)
        // stagnates near 0.5 relative residual; full GMRES converges.
        ("fsai", 50, false),
        ("fsai", 100, true),
    ] {
        let (m, info) = build_with_info(&kind.parse().unwrap(), &a, sigma).unwrap();
        let mut g = Gmres::new(n, restart);
        let stop = StopCriteria {
            max_steps: 2000,
            rtol: RTOL,
            atol: 0.0,
        };
        let res = g.solve(
            &CsrOp(&shifted),
            m.as_ref(),
            &SelfComm::new(),
            &b,
            None,
            &stop,
        );
        let rr = rel_residual(&shifted, g.solution(), &b);
        if converges {
            assert!(res.converged && rr <= RTOL, "{kind}: {res:?} {info:?}");
        } else {
            assert!(!res.converged && rr > 1e-3, "{kind}: {res:?}");
        }
    }
    // ILUT(20,0) of nos4 − σI is its exact LU (bandwidth < 20): BiCGSTAB in one step.
    let (m, _) = build_with_info(&"ilut(20,0)".parse().unwrap(), &a, sigma).unwrap();
    let (res, x) = run(&shifted, m.as_ref(), &b, 10);
    assert!(
        res.converged && res.steps <= 1 && rel_residual(&shifted, &x, &b) <= RTOL,
        "{res:?}"
    );
    // Shift exactly onto a diagonal entry: Jacobi perturbs instead of failing.
    let d0 = a.get(0, 0);
    let (_, info) = build_with_info(&"jacobi".parse().unwrap(), &a, d0).unwrap();
    let hits = (0..n).filter(|&i| a.get(i, i) == d0).count();
    assert!(hits >= 1);
    assert_eq!(info.perturbed_pivots, hits);
}

/// Block-Jacobi with ILU(0) blocks over 4 contiguous row ranges of 1138_bus converges, and
/// needs more steps than global ILU(0) (couplings are dropped) but fewer than none.
#[testenv::matrix_test]
fn precond_block_jacobi_1138_bus() {
    let dir = shared_dir();
    let a = read_shared(&dir, "1138_bus");
    let n = a.nrows();
    let b = rhs_ones(&a);
    let q = n / 4;
    let ranges = [0..q, q..2 * q, 2 * q..3 * q, 3 * q..n];
    let kind: PrecondKind = "ilu0".parse().unwrap();
    let bj = BlockJacobi::new(&a, &ranges, &kind, 0.0).unwrap();
    assert_eq!(bj.num_blocks(), 4);
    let (res, x) = run(&a, &bj, &b, 5000);
    assert!(res.converged && rel_residual(&a, &x, &b) <= RTOL, "{res:?}");
    let (m, _) = build_with_info(&kind, &a, 0.0).unwrap();
    let (global, _) = run(&a, m.as_ref(), &b, 5000);
    assert!(
        global.steps <= res.steps,
        "{} vs {}",
        global.steps,
        res.steps
    );
    // One block covering everything is global ILU(0): identical application.
    let whole = std::ops::Range { start: 0, end: n };
    let one = BlockJacobi::new(&a, std::slice::from_ref(&whole), &kind, 0.0).unwrap();
    let (mut z1, mut z2) = (vec![0.0; n], vec![0.0; n]);
    one.apply(&b, &mut z1);
    m.apply(&b, &mut z2);
    assert_eq!(z1, z2);
}

/// CG with the symmetric preconditioners on the SPD matrices: FSAI (`GᵀG`, SPD by
/// construction) converges on bcsstk13 where plain ILU(0) (negative pivots) cannot.
#[testenv::matrix_test]
fn precond_cg_fsai_bcsstk13() {
    let dir = shared_dir();
    let a = read_shared(&dir, "bcsstk13");
    let b = rhs_ones(&a);
    let stop = StopCriteria {
        max_steps: 2000,
        rtol: RTOL,
        atol: 0.0,
    };
    let (m, _) = build_with_info(&"fsai".parse().unwrap(), &a, 0.0).unwrap();
    let mut cg = precond::krylov::Cg::new(a.nrows());
    let res = cg.solve(&CsrOp(&a), m.as_ref(), &SelfComm::new(), &b, None, &stop);
    assert!(res.converged, "{res:?}");
    assert!(rel_residual(&a, cg.solution(), &b) <= RTOL);
    assert!(res.steps <= 1000, "{}", res.steps);
    // Plain ILU(0) is indefinite here: CG reports a Rho breakdown, not a wrong answer.
    let (m, _) = build_with_info(&"ilu0".parse().unwrap(), &a, 0.0).unwrap();
    let res = cg.solve(&CsrOp(&a), m.as_ref(), &SelfComm::new(), &b, None, &stop);
    assert!(!res.converged, "{res:?}");
    assert_eq!(
        res.breakdown.map(|e| e.kind),
        Some(precond::krylov::BreakdownKind::Rho)
    );
}

/// The dropping parameters act: ILUT with τ > 0 and smaller p, and SPAI post-filtering,
/// give sparser preconditioners that still converge.
#[testenv::matrix_test]
fn precond_dropping_parameters_1138_bus() {
    let dir = shared_dir();
    let a = read_shared(&dir, "1138_bus");
    let nnz = |k: &str| build_with_info(&k.parse().unwrap(), &a, 0.0).unwrap().1.nnz;
    let full = nnz("ilut(20,0)");
    let sparse = nnz("ilut(5,1e-3)");
    assert!(sparse < full, "{sparse} vs {full}");
    check("1138_bus", &a, "ilut(5,1e-3)", 2000, Some(2000));
    // SPAI post-filtering (drop_tol = 0.2), on the 3D Laplacian (on 1138_bus, whose entries span many
    // orders of magnitude, even drop_tol = 0.01 stalls BiCGSTAB near 2e-4).
    let lap = laplace3d(10);
    let k = PrecondKind::Spai(precond::preconditioners::SpaiParams {
        drop_tol: 0.2,
        ..Default::default()
    });
    let full = build_with_info(&"spai".parse().unwrap(), &lap, 0.0)
        .unwrap()
        .1
        .nnz;
    let (m, info) = build_with_info(&k, &lap, 0.0).unwrap();
    assert!(info.nnz < full, "{} vs {full}", info.nnz);
    let b = rhs_ones(&lap);
    let (res, x) = run(&lap, m.as_ref(), &b, 500);
    assert!(
        res.converged && rel_residual(&lap, &x, &b) <= RTOL,
        "{res:?}"
    );
}
