//! Generators: exact eigenvalues against faer's dense self-adjoint solver,
//! spec syntax round trips, structure of the large 27-point matrix.

use matrices::generate::{exact_eigenvalues, generate, GenError, GenSpec};
use matrices::info::matrix_info;
use matrices::CsrMatrix;

fn dense_eigenvalues(a: &CsrMatrix) -> Vec<f64> {
    let n = a.nrows();
    let m = faer::Mat::<f64>::from_fn(n, n, |i, j| a.get(i, j));
    let mut ev = m.self_adjoint_eigenvalues(faer::Side::Lower).unwrap();
    ev.sort_by(f64::total_cmp);
    ev
}

#[test]
fn exact_eigenvalues_match_dense_solver() {
    let specs = [
        "lap2d:5x4",
        "lap2d:9",
        "lap3d:3x4x5",
        "stencil27:4x3x5",
        "stencil27:5",
        "aniso2d:6x5:1,0.01",
        "aniso3d:4:1,1,0.01",
        "spectrum:60:-1:3:7",
        "spectrum:61:0.5:0.5",
        "spectrum:1:2:9",
    ];
    for s in specs {
        let spec: GenSpec = s.parse().unwrap();
        let a = generate(&spec).unwrap();
        assert_eq!(a.nrows(), spec.nrows(), "{s}");
        let info = matrix_info(&a, None);
        assert!(info.symmetric, "{s} must be exactly symmetric");
        let exact = exact_eigenvalues(&spec).unwrap();
        let dense = dense_eigenvalues(&a);
        assert_eq!(exact.len(), dense.len(), "{s}");
        let scale = exact.iter().fold(1.0f64, |m, v| m.max(v.abs()));
        for (k, (e, d)) in exact.iter().zip(&dense).enumerate() {
            assert!(
                (e - d).abs() <= 1e-12 * scale,
                "{s}: eigenvalue {k}: exact {e} dense {d}"
            );
        }
        // Gershgorin bounds contain the spectrum.
        assert!(
            info.gershgorin_lower.unwrap() <= exact[0] + 1e-12 * scale,
            "{s}"
        );
        assert!(
            info.gershgorin_upper.unwrap() >= exact[exact.len() - 1] - 1e-12 * scale,
            "{s}"
        );
    }
}

#[test]
fn closed_forms_at_known_points() {
    // 1D-like lap2d:3x1: 2 - 2cos(kπ/4) + (2 - 2cos(π/2)) = {2+2-√2, 4, 4+√2}.
    let ev = exact_eigenvalues(&"lap2d:3x1".parse().unwrap()).unwrap();
    let r2 = std::f64::consts::SQRT_2;
    let want = [4.0 - r2, 4.0, 4.0 + r2];
    for (e, w) in ev.iter().zip(want) {
        assert!((e - w).abs() < 1e-14, "{e} vs {w}");
    }
    // spectrum endpoints are exact.
    let ev = exact_eigenvalues(&"spectrum:5:-2:6".parse().unwrap()).unwrap();
    assert_eq!(ev, vec![-2.0, 0.0, 2.0, 4.0, 6.0]);
    // stencil27:1 is the 1x1 matrix [26].
    assert_eq!(
        exact_eigenvalues(&"stencil27:1".parse().unwrap()).unwrap(),
        vec![26.0]
    );
}

#[test]
fn stencil27_64_structure() {
    let spec: GenSpec = "stencil27:64".parse().unwrap();
    let a = generate(&spec).unwrap();
    assert_eq!(a.nrows(), 262_144);
    // Entries = Π (3n - 2) over the three directions.
    assert_eq!(a.nnz(), 190usize.pow(3));
    let info = matrix_info(&a, None);
    assert_eq!((info.min_row_nnz, info.max_row_nnz), (8, 27));
    assert!(info.symmetric);
    assert_eq!(info.gershgorin_lower, Some(0.0));
    assert_eq!(info.gershgorin_upper, Some(52.0));
    // Row of an interior point: 26 on the diagonal, -1 elsewhere, sorted.
    let r = 1 + 64 * (1 + 64);
    let (cols, vals) = a.row(r);
    assert_eq!(cols.len(), 27);
    assert!(cols.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(vals.iter().sum::<f64>(), 0.0);
    assert_eq!(a.get(r, r), 26.0);
}

#[test]
fn papers_size_27_point_matrix_is_generated() {
    // 268,515 rows in the papers; 65 x 65 x 64 = 270,400 is the nearest box.
    let a = generate(&"stencil27:65x65x64".parse().unwrap()).unwrap();
    assert_eq!(a.nrows(), 270_400);
    assert_eq!(a.nnz(), 193 * 193 * 190);
    let mut y = vec![0.0; a.nrows()];
    a.mul_vec(&vec![1.0; a.ncols()], &mut y);
    // Row sums: 26 - (#neighbours) = 27 - row length.
    for (i, yi) in y.iter().enumerate().step_by(997) {
        assert_eq!(*yi, 27.0 - a.row(i).0.len() as f64);
    }
}

#[test]
fn spec_strings_round_trip_and_reject_bad_input() {
    for s in [
        "lap2d:30",
        "lap2d:30x40",
        "lap3d:40",
        "lap3d:20x30x40",
        "stencil27:64",
        "aniso3d:40:1,1,0.01",
        "aniso2d:10x12:0.5,2",
        "spectrum:100:-1:3:9",
    ] {
        let spec: GenSpec = s.parse().unwrap();
        assert_eq!(spec.to_string(), s);
        let json = serde_json::to_string(&spec).unwrap();
        assert_eq!(json, format!("\"{s}\""));
        let back: GenSpec = serde_json::from_str(&json).unwrap();
        assert_eq!(back, spec);
    }
    let s: GenSpec = "spectrum:10:0:1".parse().unwrap();
    assert_eq!(s.to_string(), "spectrum:10:0:1:1");
    assert_eq!(
        "lap3d:2x3x4".parse::<GenSpec>().unwrap(),
        GenSpec::Lap3d {
            nx: 2,
            ny: 3,
            nz: 4
        }
    );
    for bad in [
        "",
        "lap2d",
        "lap2d:0",
        "lap2d:3x4x5",
        "lap9d:3",
        "aniso3d:4:1,1",
        "aniso2d:4:1,-1",
        "spectrum:10:3:1",
        "stencil27:100000",
    ] {
        assert!(bad.parse::<GenSpec>().is_err(), "{bad} must be rejected");
    }
    assert!(matches!(
        "stencil27:100000".parse::<GenSpec>(),
        Err(GenError::TooLarge { .. })
    ));
    assert!(matches!(
        "aniso2d:4:1,-1".parse::<GenSpec>(),
        Err(GenError::Invalid { .. })
    ));
    assert!(generate(&GenSpec::Lap2d { nx: 0, ny: 3 }).is_err());
    assert!(exact_eigenvalues(&GenSpec::Lap2d { nx: 0, ny: 3 }).is_none());
}

/// Specs print in a form that parses back to the same spec, and extreme
/// spectrum bounds print in exponent form (not 309 digits).
#[test]
fn spectrum_spec_prints_short_and_round_trips() {
    for s in [
        "spectrum:5:-1e308:1e308:3",
        "spectrum:7:1e-300:2.5e-12:1",
        "spectrum:9:0:10:1",
        "spectrum:9:-0.5:123456.75:2",
    ] {
        let spec: GenSpec = s.parse().unwrap();
        let shown = spec.to_string();
        assert!(shown.len() < 40, "{shown}");
        let back: GenSpec = shown.parse().unwrap();
        assert_eq!(back.to_string(), shown);
        assert_eq!(
            exact_eigenvalues(&back).unwrap(),
            exact_eigenvalues(&spec).unwrap()
        );
    }
    assert_eq!(
        "spectrum:5:-1e308:1e308:3"
            .parse::<GenSpec>()
            .unwrap()
            .to_string(),
        "spectrum:5:-1e308:1e308:3"
    );
}
