//! Complex Hermitian eigenproblems through the real embedding, checked against
//! dense LAPACK-style Hermitian eigensolves (faer) on small problems: the
//! eigenvalues, residuals and (M-)orthonormality recomputed from the returned
//! complex vectors.

use faer::{c64, Mat, Side};
use jdmg::hermitian::{solve_hermitian, HermitianProblem, HermitianSolution};
use jdmg::prelude::*;
use jdmg::{Outcome, Solution};
use matrices::{ComplexCsr, MagSpec};

fn maglap(spec: &str) -> ComplexCsr {
    spec.parse::<MagSpec>().unwrap().build().unwrap()
}

fn dense(a: &ComplexCsr) -> Mat<c64> {
    Mat::from_fn(a.nrows(), a.ncols(), |i, j| a.get(i, j))
}

fn params(nev: usize, target: Target) -> JdParams {
    JdParams {
        problem: ProblemSettings {
            nev,
            target,
            tol: 1e-10,
            ..Default::default()
        },
        ..JdParams::default()
    }
}

/// Eigenvalues of the pencil (A, M) by M^{-1/2} A M^{-1/2}, ascending.
fn reference(a: &ComplexCsr, m: Option<&ComplexCsr>) -> Vec<f64> {
    let a = dense(a);
    let c = match m {
        None => a,
        Some(m) => {
            let e = dense(m).self_adjoint_eigen(Side::Lower).unwrap();
            let s = e.S().column_vector();
            let u = e.U();
            let half = Mat::from_fn(u.nrows(), u.ncols(), |i, j| {
                u[(i, j)] * (1.0 / s[j].re.sqrt())
            });
            let inv_sqrt = &half * u.adjoint();
            &inv_sqrt * &a * &inv_sqrt
        }
    };
    let mut l = c.self_adjoint_eigenvalues(Side::Lower).unwrap();
    l.sort_by(f64::total_cmp);
    l
}

/// Residuals ‖Ax − λMx‖ and ‖XᴴMX − I‖ recomputed from the returned vectors.
fn check_vectors(a: &ComplexCsr, m: Option<&ComplexCsr>, sol: &HermitianSolution, tol: f64) {
    let k = sol.solution.eigenvalues.len();
    let n = a.nrows();
    let xs: Vec<Vec<c64>> = (0..k).map(|j| sol.eigenvector(j)).collect();
    let apply = |mat: Option<&ComplexCsr>, x: &[c64]| {
        let mut y = vec![c64::new(0.0, 0.0); n];
        match mat {
            Some(mat) => mat.mul_vec(x, &mut y),
            None => y.copy_from_slice(x),
        }
        y
    };
    for (j, x) in xs.iter().enumerate() {
        let (ax, mx) = (apply(Some(a), x), apply(m, x));
        let lam = sol.solution.eigenvalues[j];
        let r: f64 = ax
            .iter()
            .zip(&mx)
            .map(|(u, v)| (u - v * lam).norm_sqr())
            .sum();
        assert!(r.sqrt() <= tol, "pair {j}: residual {:e}", r.sqrt());
        assert!((r.sqrt() - sol.solution.residual_norms[j]).abs() <= 1e-3 * tol);
        for (i, y) in xs.iter().enumerate() {
            let g: c64 = y.iter().zip(&mx).map(|(u, v)| u.conj() * v).sum();
            let want = if i == j { 1.0 } else { 0.0 };
            assert!((g - c64::new(want, 0.0)).norm() < 1e-8, "x{i}ᴴMx{j} = {g}");
        }
    }
}

fn assert_values(got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{got:?} against {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() < 1e-8 * (1.0 + w.abs()),
            "{got:?} against {want:?}"
        );
    }
}

#[test]
fn smallest_and_largest_of_a_magnetic_laplacian_match_dense() {
    let a = maglap("maglap2d:12x10:0.15");
    let exact = reference(&a, None);
    let sol = solve_hermitian(&a, None, &params(4, Target::Smallest)).unwrap();
    assert!(sol.solution.is_converged());
    assert_values(&sol.solution.eigenvalues, &exact[..4]);
    check_vectors(&a, None, &sol, 1e-9 * 8.0);
    let sol = solve_hermitian(&a, None, &params(3, Target::Largest)).unwrap();
    let top: Vec<f64> = exact.iter().rev().take(3).copied().collect();
    assert_values(&sol.solution.eigenvalues, &top);
    check_vectors(&a, None, &sol, 1e-9 * 8.0);
}

#[test]
fn interior_target_and_shift_and_invert_match_dense() {
    let a = maglap("maglap3d:5:0.2");
    let exact = reference(&a, None);
    let sigma = 3.1;
    let mut near = exact.clone();
    near.sort_by(|x, y| (x - sigma).abs().total_cmp(&(y - sigma).abs()));
    let p = params(3, Target::Closest(sigma));
    let pb = HermitianProblem::new(&a, None).unwrap();
    let inner = pb.embedded_params(&p);
    let sol = Solver::new(pb.embedding(), &inner)
        .shift_invert(sigma)
        .run()
        .unwrap();
    let sol = pb.recover(sol, &p).unwrap();
    assert!(sol.solution.is_converged(), "{:?}", sol.solution.outcome);
    assert_values(&sol.solution.eigenvalues, &near[..3]);
    check_vectors(&a, None, &sol, 1e-9 * 12.0);
}

#[test]
fn every_eigenvalue_of_an_interval_multiplicities_included() {
    // diag(H, H): every eigenvalue of H twice.
    let h = maglap("maglap2d:6x5:0.25");
    let n = h.nrows();
    let mut t = Vec::new();
    for i in 0..n {
        let (cols, re, im) = h.row(i);
        for ((&j, &r), &q) in cols.iter().zip(re).zip(im) {
            for off in [0, n] {
                t.push((i + off, j as usize + off, c64::new(r, q)));
            }
        }
    }
    let a = ComplexCsr::from_triplets(2 * n, 2 * n, &t).unwrap();
    let exact = reference(&a, None);
    let (lo, hi) = (0.9, 2.6);
    let inside: Vec<f64> = exact
        .iter()
        .copied()
        .filter(|l| (lo..=hi).contains(l))
        .collect();
    assert!(inside.len() >= 6 && inside.len().is_multiple_of(2));
    let p = params(4, Target::Smallest);
    let pb = HermitianProblem::new(&a, None).unwrap();
    let inner = pb.embedded_params(&p);
    let sol = Solver::new(pb.embedding(), &inner)
        .interval(lo, hi, Default::default())
        .run()
        .unwrap();
    let sol = pb.recover(sol, &p).unwrap();
    assert!(sol.solution.is_converged(), "{:?}", sol.solution.outcome);
    let mut got = sol.solution.eigenvalues.clone();
    got.sort_by(f64::total_cmp);
    assert_values(&got, &inside);
    // And the 4 smallest, a double eigenvalue twice.
    let sol = solve_hermitian(&a, None, &p).unwrap();
    assert_values(&sol.solution.eigenvalues, &exact[..4]);
    check_vectors(&a, None, &sol, 1e-9 * 8.0);
}

#[test]
fn generalized_pencil_with_hermitian_mass_matches_dense() {
    let a = maglap("maglap2d:9x8:0.1");
    let n = a.nrows();
    // M = I + 0.1·H' with H' another magnetic Laplacian: Hermitian, eigenvalues in [1, 1.8].
    let h2 = maglap("maglap2d:9x8:0.35");
    let mut t: Vec<(usize, usize, c64)> = (0..n).map(|i| (i, i, c64::new(1.0, 0.0))).collect();
    for i in 0..n {
        let (cols, re, im) = h2.row(i);
        for ((&j, &r), &q) in cols.iter().zip(re).zip(im) {
            t.push((i, j as usize, c64::new(0.1 * r, 0.1 * q)));
        }
    }
    let m = ComplexCsr::from_triplets(n, n, &t).unwrap();
    let exact = reference(&a, Some(&m));
    let sol = solve_hermitian(&a, Some(&m), &params(4, Target::Smallest)).unwrap();
    assert!(sol.solution.is_converged());
    assert_values(&sol.solution.eigenvalues, &exact[..4]);
    check_vectors(&a, Some(&m), &sol, 1e-9 * 12.0);
}

#[test]
fn a_matrix_that_is_not_hermitian_is_refused() {
    let t = [
        (0, 1, c64::new(1.0, 1.0)),
        (1, 0, c64::new(1.0, 1.0)),
        (0, 0, c64::new(2.0, 0.0)),
    ];
    let a = ComplexCsr::from_triplets(2, 2, &t).unwrap();
    let e = solve_hermitian(&a, None, &params(1, Target::Smallest)).unwrap_err();
    assert!(e.to_string().contains("not Hermitian"), "{e}");
    let rect = ComplexCsr::from_triplets(2, 3, &[(0, 0, c64::new(1.0, 0.0))]).unwrap();
    assert!(HermitianProblem::new(&rect, None).is_err());
}

/// Vectors of a tight cluster, each a little off its eigenspace: Rayleigh-Ritz
/// on their span alone leaves residuals above the test; the recovery's step
/// on the span widened by the residual vectors brings every pair under it.
#[test]
fn recovery_refines_pairs_that_rayleigh_ritz_leaves_short() {
    // Diagonal Hermitian matrix (real diagonal, complex off-diagonal zero
    // apart from a coupling): eigenvalues 1, 1 + 1e-9, then 2, 3, …
    let n = 40;
    let mut t: Vec<(usize, usize, c64)> = (0..n)
        .map(|i| {
            let d = if i < 2 {
                1.0 + 1e-9 * i as f64
            } else {
                i as f64
            };
            (i, i, c64::new(d, 0.0))
        })
        .collect();
    t.push((2, 3, c64::new(0.0, 0.3)));
    t.push((3, 2, c64::new(0.0, -0.3)));
    let a = ComplexCsr::from_triplets(n, n, &t).unwrap();
    let exact = reference(&a, None);
    // Two complex vectors near e0, e1 (each with its twin i·x), perturbed
    // towards the eigenvectors of 10 and 11 by 1e-6: residuals about 1e-5,
    // 2.5 times what the test allows.
    let eps = 1e-6;
    let mut cols: Vec<Vec<c64>> = Vec::new();
    for k in 0..2 {
        let mut x = vec![c64::new(0.0, 0.0); n];
        x[k] = c64::new(1.0, 0.0);
        x[10 + k] = c64::new(eps, eps);
        let norm = x.iter().map(|v| v.norm_sqr()).sum::<f64>().sqrt();
        x.iter_mut().for_each(|v| *v /= norm);
        let ix: Vec<c64> = x.iter().map(|v| v * c64::new(0.0, 1.0)).collect();
        cols.push(x);
        cols.push(ix);
    }
    let before: f64 = cols
        .iter()
        .map(|x| {
            let mut ax = vec![c64::new(0.0, 0.0); n];
            a.mul_vec(x, &mut ax);
            let th: f64 = x.iter().zip(&ax).map(|(u, v)| (u.conj() * v).re).sum();
            ax.iter()
                .zip(x)
                .map(|(u, v)| (u - v * th).norm_sqr())
                .sum::<f64>()
                .sqrt()
        })
        .fold(0.0, f64::max);
    let mut p = params(2, Target::Smallest);
    p.problem.tol = 1e-7;
    p.problem.anorm = Some(n as f64);
    assert!(
        before > p.problem.tol * n as f64,
        "the input must miss the test: {before:e}"
    );
    let sol = Solution {
        outcome: Outcome::Converged,
        wanted: 4,
        eigenvalues: vec![1.0, 1.0, 1.0 + 1e-9, 1.0 + 1e-9],
        residual_norms: vec![before; 4],
        converged: vec![true; 4],
        eigenvectors: cols
            .iter()
            .flat_map(|x| matrices::complex::interleave(x))
            .collect(),
        n_local: 2 * n,
        ..Default::default()
    };
    let pb = HermitianProblem::new(&a, None).unwrap();
    let rec = pb.recover(sol, &p).unwrap();
    assert!(
        rec.solution.is_converged(),
        "{:?}",
        rec.solution.residual_norms
    );
    assert_values(&rec.solution.eigenvalues, &exact[..2]);
    check_vectors(&a, None, &rec, p.problem.tol * n as f64);
}
