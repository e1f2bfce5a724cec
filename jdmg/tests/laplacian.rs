//! Block JD on Dirichlet Laplacians against their analytic spectra.

use jdmg::{solve_matrix, JdParams, Target};
use matrices::CsrMatrix;

fn lap3d(nx: usize, ny: usize, nz: usize) -> CsrMatrix {
    let idx = |i: usize, j: usize, k: usize| (k * ny + j) * nx + i;
    let mut t = Vec::new();
    for k in 0..nz {
        for j in 0..ny {
            for i in 0..nx {
                let r = idx(i, j, k);
                t.push((r, r, 6.0));
                if i > 0 {
                    t.push((r, idx(i - 1, j, k), -1.0));
                }
                if i + 1 < nx {
                    t.push((r, idx(i + 1, j, k), -1.0));
                }
                if j > 0 {
                    t.push((r, idx(i, j - 1, k), -1.0));
                }
                if j + 1 < ny {
                    t.push((r, idx(i, j + 1, k), -1.0));
                }
                if k > 0 {
                    t.push((r, idx(i, j, k - 1), -1.0));
                }
                if k + 1 < nz {
                    t.push((r, idx(i, j, k + 1), -1.0));
                }
            }
        }
    }
    let n = nx * ny * nz;
    CsrMatrix::from_triplets(n, n, &t).unwrap()
}

fn lap3d_eigs(nx: usize, ny: usize, nz: usize) -> Vec<f64> {
    let e =
        |i: usize, n: usize| 2.0 - 2.0 * (std::f64::consts::PI * i as f64 / (n + 1) as f64).cos();
    let mut v = Vec::new();
    for i in 1..=nx {
        for j in 1..=ny {
            for k in 1..=nz {
                v.push(e(i, nx) + e(j, ny) + e(k, nz));
            }
        }
    }
    v.sort_by(f64::total_cmp);
    v
}

#[test]
fn lap3d_smallest_with_triple_eigenvalue() {
    let a = lap3d(12, 12, 12);
    let exact = lap3d_eigs(12, 12, 12);
    let params = JdParams {
        nev: 4,
        tol: 1e-10,
        max_matvecs: 200_000,
        ..JdParams::default()
    };
    let sol = solve_matrix(&a, &params, None).expect("converges");
    eprintln!("{:?} {:?}", sol.eigenvalues, sol.stats);
    for j in 0..4 {
        assert!(
            (sol.eigenvalues[j] - exact[j]).abs() < 1e-8,
            "{j}: {} vs {}",
            sol.eigenvalues[j],
            exact[j]
        );
        assert!(sol.residual_norms[j] <= 1e-10 * 12.0 * 10.0);
    }
}

#[test]
fn lap3d_largest() {
    let a = lap3d(10, 9, 8);
    let exact = lap3d_eigs(10, 9, 8);
    let params = JdParams {
        nev: 5,
        tol: 1e-10,
        target: Target::Largest,
        max_matvecs: 200_000,
        ..JdParams::default()
    };
    let sol = solve_matrix(&a, &params, None).expect("converges");
    let n = exact.len();
    for j in 0..5 {
        assert!(
            (sol.eigenvalues[j] - exact[n - 1 - j]).abs() < 1e-8,
            "{j}: {} vs {}",
            sol.eigenvalues[j],
            exact[n - 1 - j]
        );
    }
}
