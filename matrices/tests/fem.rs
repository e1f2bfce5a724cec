//! Finite-element stiffness/mass pairs: the closed-form generalized eigenvalues
//! against a dense generalized solve (faer: Cholesky M = LLᵀ, then the
//! eigenvalues of L⁻¹KL⁻ᵀ), the matrices alone against faer's dense solver,
//! spec strings.

use faer::linalg::triangular_solve::solve_lower_triangular_in_place;
use faer::{Mat, Par, Side};
use matrices::generate::{
    exact_eigenvalues, fem_pair, generalized_eigenvalues, generate, FemPart, GenSpec,
};
use matrices::info::matrix_info;
use matrices::CsrMatrix;

fn dense(a: &CsrMatrix) -> Mat<f64> {
    Mat::from_fn(a.nrows(), a.ncols(), |i, j| a.get(i, j))
}

/// Eigenvalues of K x = λ M x (M SPD), ascending, by the Cholesky reduction.
fn dense_generalized(k: &CsrMatrix, m: &CsrMatrix) -> Vec<f64> {
    let n = k.nrows();
    let l = dense(m).llt(Side::Lower).expect("M is SPD").L().to_owned();
    // C = L⁻¹ K L⁻ᵀ: solve L Y = K, then L Cᵀ = Yᵀ.
    let mut y = dense(k);
    solve_lower_triangular_in_place(l.as_ref(), y.as_mut(), Par::Seq);
    let mut c = y.transpose().to_owned();
    solve_lower_triangular_in_place(l.as_ref(), c.as_mut(), Par::Seq);
    let c = Mat::from_fn(n, n, |i, j| 0.5 * (c[(i, j)] + c[(j, i)]));
    let mut ev = c.self_adjoint_eigenvalues(Side::Lower).unwrap();
    ev.sort_by(f64::total_cmp);
    ev
}

fn dense_eigenvalues(a: &CsrMatrix) -> Vec<f64> {
    let mut ev = dense(a).self_adjoint_eigenvalues(Side::Lower).unwrap();
    ev.sort_by(f64::total_cmp);
    ev
}

fn assert_close(what: &str, exact: &[f64], got: &[f64], rel: f64) {
    assert_eq!(exact.len(), got.len(), "{what}");
    let scale = exact.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for (j, (e, g)) in exact.iter().zip(got).enumerate() {
        assert!(
            (e - g).abs() <= rel * scale,
            "{what}: eigenvalue {j}: closed form {e}, dense {g}"
        );
    }
}

#[test]
fn fem_pairs_match_dense_generalized_solve() {
    for s in ["fem1d:9", "fem2d:5x4", "fem2d:4", "fem3d:3x4x2", "fem3d:4"] {
        let spec: GenSpec = s.parse().unwrap();
        let (k, m) = fem_pair(&spec).unwrap();
        assert_eq!(k.nrows(), spec.nrows(), "{s}");
        assert!(matrix_info(&k, None).symmetric, "{s}: K exactly symmetric");
        assert!(matrix_info(&m, None).symmetric, "{s}: M exactly symmetric");
        let exact = generalized_eigenvalues(&spec).unwrap();
        assert_close(s, &exact, &dense_generalized(&k, &m), 1e-11);
        // Each matrix alone.
        assert_close(
            &format!("{s} K"),
            &exact_eigenvalues(&spec).unwrap(),
            &dense_eigenvalues(&k),
            1e-12,
        );
        let mass = spec.fem_part(FemPart::Mass).unwrap();
        assert_close(
            &format!("{s} M"),
            &exact_eigenvalues(&mass).unwrap(),
            &dense_eigenvalues(&m),
            1e-12,
        );
    }
}

#[test]
fn fem_closed_forms_at_known_points() {
    // 1-D, one interior node: h = 1/2, K = [4], M = [1/3], λ = 12.
    let ev = generalized_eigenvalues(&"fem1d:1".parse().unwrap()).unwrap();
    assert!((ev[0] - 12.0).abs() < 1e-12, "{ev:?}");
    // The smallest eigenvalue tends to the continuous π²·d from above.
    for (s, d) in [("fem1d:200", 1.0), ("fem2d:60", 2.0), ("fem3d:30", 3.0)] {
        let l0 = generalized_eigenvalues(&s.parse().unwrap()).unwrap()[0];
        let pi2 = std::f64::consts::PI.powi(2) * d;
        assert!(l0 > pi2 && l0 < pi2 * 1.01, "{s}: {l0} vs {pi2}");
    }
    // On a cube the second eigenvalue (modes (2,1,1), (1,2,1), (1,1,2)) is triple.
    let ev = generalized_eigenvalues(&"fem3d:6".parse().unwrap()).unwrap();
    assert!(ev[1] > ev[0] * 1.5);
    assert!((ev[2] - ev[1]).abs() <= 1e-12 * ev[1]);
    assert!((ev[3] - ev[1]).abs() <= 1e-12 * ev[1]);
    assert!(ev[4] > ev[3] * 1.1);
}

#[test]
fn fem_structure_and_spec_strings() {
    for (s, nnz_row) in [("fem1d:10", 3), ("fem2d:10", 9), ("fem3d:10", 27)] {
        let a = generate(&s.parse().unwrap()).unwrap();
        assert_eq!(matrix_info(&a, None).max_row_nnz, nnz_row, "{s}");
    }
    for s in [
        "fem1d:10",
        "fem2d:10x12",
        "fem3d:8",
        "fem3d:4x5x6:mass",
        "fem2d:7:mass",
    ] {
        let spec: GenSpec = s.parse().unwrap();
        assert_eq!(spec.to_string(), s);
    }
    assert_eq!(
        "fem3d:4:stiffness".parse::<GenSpec>().unwrap().to_string(),
        "fem3d:4"
    );
    assert_eq!(
        "fem2d:3x5:mass".parse::<GenSpec>().unwrap(),
        GenSpec::Fem {
            dim: 2,
            nx: 3,
            ny: 5,
            nz: 1,
            part: FemPart::Mass
        }
    );
    for bad in [
        "fem3d:4:lumped",
        "fem1d:3x4",
        "fem2d:0",
        "fem4d:3",
        "fem3d",
        "fem2d:3:mass:1",
    ] {
        assert!(bad.parse::<GenSpec>().is_err(), "{bad} must be rejected");
    }
    assert!(fem_pair(&"lap2d:4".parse().unwrap()).is_err());
    assert!(generalized_eigenvalues(&"lap2d:4".parse().unwrap()).is_none());
}
