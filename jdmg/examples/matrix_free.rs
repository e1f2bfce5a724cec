//! A matrix-free eigensolve: the 3-D Dirichlet Laplacian (7-point stencil) is
//! applied on the fly, never stored; jdmg only sees the `Operator` trait.
//!
//! `cargo run --release -p jdmg --example matrix_free -- [N] [NEV]` (default 48, 4):
//! the NEV smallest eigenvalues of the N³ grid, checked against the analytic ones.

use jdmg::ProblemSettings;
use jdmg::{JdParams, Problem, Solver};
use lblib::SelfComm;
use precond::Operator;

/// y = A x for the 7-point Laplacian on an N×N×N grid (Dirichlet boundary).
struct Laplacian3d {
    n: usize,
}

impl Operator for Laplacian3d {
    fn nrows(&self) -> usize {
        self.n * self.n * self.n
    }
    fn apply_block(&self, x: &[f64], y: &mut [f64], k: usize) {
        let (n, len) = (self.n, self.nrows());
        for c in 0..k {
            let (x, y) = (&x[c * len..(c + 1) * len], &mut y[c * len..(c + 1) * len]);
            for kz in 0..n {
                for j in 0..n {
                    for i in 0..n {
                        let r = (kz * n + j) * n + i;
                        let mut v = 6.0 * x[r];
                        if i > 0 {
                            v -= x[r - 1];
                        }
                        if i + 1 < n {
                            v -= x[r + 1];
                        }
                        if j > 0 {
                            v -= x[r - n];
                        }
                        if j + 1 < n {
                            v -= x[r + n];
                        }
                        if kz > 0 {
                            v -= x[r - n * n];
                        }
                        if kz + 1 < n {
                            v -= x[r + n * n];
                        }
                        y[r] = v;
                    }
                }
            }
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(48);
    let nev: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(4);
    let op = Laplacian3d { n };
    let comm = SelfComm::new();
    let problem = match Problem::new(&op, &comm) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("matrix_free: {e}");
            std::process::exit(2);
        }
    };
    let params = JdParams {
        problem: ProblemSettings {
            nev,
            ..Default::default()
        },
        ..JdParams::default()
    };
    let sol = match Solver::problem(&problem, &params).run() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("matrix_free: {e}");
            std::process::exit(3);
        }
    };
    let e = |i: usize| 2.0 - 2.0 * (std::f64::consts::PI * i as f64 / (n + 1) as f64).cos();
    let mut exact: Vec<f64> = (1..=4)
        .flat_map(|i| (1..=4).flat_map(move |j| (1..=4).map(move |k| (i, j, k))))
        .map(|(i, j, k)| e(i) + e(j) + e(k))
        .collect();
    exact.sort_by(f64::total_cmp);
    println!(
        "{n}^3 Laplacian, applied on the fly: {} matvecs",
        sol.stats.matvecs
    );
    for (j, (l, r)) in sol.eigenvalues.iter().zip(&sol.residual_norms).enumerate() {
        let x = exact.get(j).copied().unwrap_or(f64::NAN);
        println!(
            "{j:>3}  {l:.15e}  exact {x:.15e}  |diff| {:.1e}  residual {r:.1e}",
            (l - x).abs()
        );
    }
}
