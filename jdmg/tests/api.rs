//! The library API for solver authors: matrices from sprs and faer in one call, a
//! matrix-free operator through the validating `Problem` constructor, and a user
//! preconditioner that is used whatever `PrecondSettings::kind` says.

mod common;

use jdmg::ProblemSettings;
use jdmg::{solve, solve_matrix, JdParams, Problem};
use lblib::SelfComm;
use precond::{Operator, Preconditioner};

fn lap1d_triplets(n: usize) -> Vec<(usize, usize, f64)> {
    let mut t = Vec::new();
    for i in 0..n {
        t.push((i, i, 2.0));
        if i > 0 {
            t.extend([(i, i - 1, -1.0), (i - 1, i, -1.0)]);
        }
    }
    t
}

fn lap1d_exact(n: usize, k: usize) -> Vec<f64> {
    let h = std::f64::consts::PI / (n + 1) as f64;
    (1..=k).map(|j| 2.0 - 2.0 * (h * j as f64).cos()).collect()
}

fn params() -> JdParams {
    JdParams {
        problem: ProblemSettings {
            nev: 3,
            tol: 1e-10,
            ..Default::default()
        },
        ..JdParams::default()
    }
}

#[test]
fn sprs_and_faer_matrices_in_one_call() {
    let n = 200;
    let t = lap1d_triplets(n);
    let exact = lap1d_exact(n, 3);
    let mut tri = sprs::TriMat::new((n, n));
    for &(i, j, v) in &t {
        tri.add_triplet(i, j, v);
    }
    let csr: sprs::CsMat<f64> = tri.to_csr();
    let csc: sprs::CsMat<f64> = tri.to_csc();
    let ft: Vec<faer::sparse::Triplet<usize, usize, f64>> = t
        .iter()
        .map(|&(i, j, v)| faer::sparse::Triplet::new(i, j, v))
        .collect();
    let frow = faer::sparse::SparseRowMat::<usize, f64>::try_new_from_triplets(n, n, &ft).unwrap();
    let fcol = faer::sparse::SparseColMat::<usize, f64>::try_new_from_triplets(n, n, &ft).unwrap();
    let sols = [
        solve_matrix(&csr, &params(), None).unwrap(),
        solve_matrix(&csc, &params(), None).unwrap(),
        solve_matrix(&frow.as_ref(), &params(), None).unwrap(),
        solve_matrix(&fcol.as_ref(), &params(), None).unwrap(),
    ];
    let a = matrices::CsrMatrix::from_triplets(n, n, &t).unwrap();
    for sol in &sols {
        for (l, e) in sol.eigenvalues.iter().zip(&exact) {
            assert!((l - e).abs() < 1e-12, "{l} vs {e}");
        }
        common::assert_pairs(&a, sol, 1e-10 * 4.0);
    }
}

/// The 1-D Laplacian applied on the fly (no matrix is ever formed).
struct Stencil {
    n: usize,
}

impl Operator for Stencil {
    fn nrows(&self) -> usize {
        self.n
    }
    fn apply_block(&self, x: &[f64], y: &mut [f64], k: usize) {
        let n = self.n;
        for c in 0..k {
            let (x, y) = (&x[c * n..(c + 1) * n], &mut y[c * n..(c + 1) * n]);
            for i in 0..n {
                let l = if i > 0 { x[i - 1] } else { 0.0 };
                let r = if i + 1 < n { x[i + 1] } else { 0.0 };
                y[i] = 2.0 * x[i] - l - r;
            }
        }
    }
}

/// K = 2I as a user preconditioner that counts its applications.
struct Scaled {
    n: usize,
    calls: std::sync::atomic::AtomicUsize,
}

impl Preconditioner for Scaled {
    fn nrows(&self) -> usize {
        self.n
    }
    fn apply_block(&self, r: &[f64], z: &mut [f64], _k: usize) {
        self.calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        z.iter_mut().zip(r).for_each(|(z, r)| *z = 0.5 * r);
    }
}

#[test]
fn matrix_free_operator_and_user_preconditioner() {
    let n = 300;
    let op = Stencil { n };
    let comm = SelfComm::new();
    let pb = Problem::new(&op, &comm).unwrap();
    assert_eq!((pb.n_global, pb.row_offset), (n, 0));
    let sol = solve(&pb, &params(), None).unwrap();
    for (l, e) in sol.eigenvalues.iter().zip(lap1d_exact(n, 3)) {
        assert!((l - e).abs() < 1e-12, "{l} vs {e}");
    }
    // A user preconditioner is used although `params.precond` is `None`.
    let k = Scaled { n, calls: 0.into() };
    let pb = Problem::new(&op, &comm)
        .unwrap()
        .with_preconditioner(&k)
        .unwrap();
    let sol = solve(&pb, &params(), None).unwrap();
    assert!(k.calls.load(std::sync::atomic::Ordering::Relaxed) > 0);
    assert!(sol.stats.precond_applications > 0);
    for (l, e) in sol.eigenvalues.iter().zip(lap1d_exact(n, 3)) {
        assert!((l - e).abs() < 1e-12, "{l} vs {e}");
    }
}

#[test]
fn problem_constructor_validates() {
    let op = Stencil { n: 10 };
    let comm = SelfComm::new();
    let d = vec![2.0; 9];
    assert!(Problem::new(&op, &comm).unwrap().with_diagonal(&d).is_err());
    let k = Scaled {
        n: 11,
        calls: 0.into(),
    };
    assert!(Problem::new(&op, &comm)
        .unwrap()
        .with_preconditioner(&k)
        .is_err());
    let empty = Stencil { n: 0 };
    assert!(Problem::new(&empty, &comm).is_err());
}
