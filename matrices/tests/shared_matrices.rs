//! All real matrices of `../shared/matrices` load with the right sizes, and
//! their Gershgorin intervals contain the reference extreme eigenvalues.
//!
//! The directory comes from `$JDMG_MATRICES`, else `../shared/matrices`
//! relative to the workspace root. Without it the tests are ignored
//! (`testenv::matrix_test`), or fail with `JDMG_REQUIRE_MATRICES=1`.

use std::collections::HashMap;
use std::path::PathBuf;

use matrices::info::matrix_info;
use matrices::mm::{read_matrix_market, MmFormat, MmSymmetry};

fn matrices_dir() -> PathBuf {
    matrices::shared::test_dir()
}

/// Independent count of a coordinate file: declared (n, m, entries) and the
/// number of diagonal entries, by plain text splitting.
fn count_file(text: &str) -> (usize, usize, usize, usize, usize) {
    let mut lines = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('%') && !l.trim().is_empty());
    let size: Vec<usize> = lines
        .next()
        .unwrap()
        .split_whitespace()
        .map(|t| t.parse().unwrap())
        .collect();
    let (mut found, mut diag) = (0, 0);
    for l in lines {
        let mut t = l.split_whitespace();
        let (i, j): (usize, usize) = (
            t.next().unwrap().parse().unwrap(),
            t.next().unwrap().parse().unwrap(),
        );
        found += 1;
        diag += usize::from(i == j);
    }
    (size[0], size[1], size[2], found, diag)
}

/// `(min, max)` eigenvalue from a reference file (first and last numbers).
fn reference(path: &std::path::Path) -> Option<(f64, f64)> {
    let text = std::fs::read_to_string(path).ok()?;
    let vals: Vec<f64> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())
        .map(|l| l.trim().parse().unwrap())
        .collect();
    Some((vals[0], *vals.last().unwrap()))
}

/// SuiteSparse's own full nnz per matrix name.
fn meta_nnz(dir: &std::path::Path) -> HashMap<String, usize> {
    let text = std::fs::read_to_string(dir.join("reference/suitesparse_meta.tsv")).unwrap();
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let name = f[0].rsplit('/').next()?.to_string();
            Some((name, f[2].parse().ok()?))
        })
        .collect()
}

#[testenv::matrix_test]
fn all_shared_matrices_load_with_header_sizes_and_gershgorin_bounds() {
    let dir = matrices_dir();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".mtx").map(str::to_string)
        })
        .collect();
    names.sort();
    assert_eq!(
        names.len(),
        22,
        "expected the 22 shared matrices, found {names:?}"
    );
    let meta = meta_nnz(&dir);
    let mut with_reference = 0;
    let mut meta_checked = 0;
    for name in &names {
        let path = dir.join(format!("{name}.mtx"));
        let text = std::fs::read_to_string(&path).unwrap();
        let (n, m, entries, found, diag) = count_file(&text);
        assert_eq!(
            found, entries,
            "{name}: test's own count disagrees with the header"
        );

        let mm = read_matrix_market(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let h = mm.header;
        assert_eq!(h.format, MmFormat::Coordinate, "{name}");
        assert_eq!(h.symmetry, MmSymmetry::Symmetric, "{name}");
        assert_eq!((h.nrows, h.ncols, h.entries), (n, m, entries), "{name}");
        let a = &mm.matrix;
        assert_eq!((a.nrows(), a.ncols()), (n, m), "{name}");
        // Symmetric storage: every off-diagonal entry is mirrored.
        let expanded = 2 * entries - diag;
        assert_eq!(a.nnz(), expanded, "{name}: expanded nnz");
        if let Some(&full) = meta.get(name.as_str()) {
            assert_eq!(a.nnz(), full, "{name}: nnz vs SuiteSparse metadata");
            meta_checked += 1;
        }

        let info = matrix_info(a, Some(&h));
        assert!(
            info.symmetric,
            "{name}: expanded matrix must be exactly symmetric"
        );
        assert_eq!(info.max_asymmetry, Some(0.0), "{name}");
        assert_eq!(info.storage, "symmetric");
        assert_eq!(info.nnz_file, Some(entries));
        let (lo, hi) = (
            info.gershgorin_lower.unwrap(),
            info.gershgorin_upper.unwrap(),
        );
        if let Some((emin, emax)) = reference(&dir.join(format!("reference/{name}.eig"))) {
            let tol = 1e-10 * emin.abs().max(emax.abs());
            assert!(
                lo <= emin + tol,
                "{name}: Gershgorin lower {lo} > lambda_min {emin}"
            );
            assert!(
                hi >= emax - tol,
                "{name}: Gershgorin upper {hi} < lambda_max {emax}"
            );
            with_reference += 1;
        }
    }
    assert_eq!(with_reference, 14, "reference eigenvalue files checked");
    assert_eq!(
        meta_checked, 22,
        "matrices checked against suitesparse_meta.tsv"
    );
}

#[testenv::matrix_test]
fn leading_dot_numbers_and_values_of_1138_bus() {
    let dir = matrices_dir();
    let a = read_matrix_market(dir.join("1138_bus.mtx")).unwrap().matrix;
    // Line 29 of the file: `27 4 -.4755112` (lower triangle, mirrored).
    assert_eq!(a.get(26, 3), -0.4755112);
    assert_eq!(a.get(3, 26), -0.4755112);
    assert_eq!(a.get(0, 0), 1474.779);
}

#[testenv::matrix_test]
fn gr_30_30_against_analytic_extremes() {
    let dir = matrices_dir();
    let mm = read_matrix_market(dir.join("gr_30_30.mtx")).unwrap();
    let info = matrix_info(&mm.matrix, Some(&mm.header));
    // 9-point stencil: diagonal 8, at most 8 off-diagonal -1: interval [0, 16].
    assert_eq!(info.gershgorin_lower, Some(0.0));
    assert_eq!(info.gershgorin_upper, Some(16.0));
    assert_eq!(info.max_row_nnz, 9);
    assert_eq!(info.min_row_nnz, 4);
}
