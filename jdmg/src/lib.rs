//! jdmg: block Jacobi-Davidson for a few extreme or interior eigenpairs of large
//! sparse symmetric matrices (the block JD of McCombs et al. §3, see
//! [References](#references)), in fine-grain, coarse-grain and multigrain modes.
//!
//! `use jdmg::prelude::*;` brings what the examples below use: the entry points
//! ([`solve_matrix`], [`solve`], [`solve_distributed`]), [`JdParams`],
//! [`Target`], [`Problem`], [`Solution`], [`JdError`], the [`Operator`](precond::Operator)
//! and [`Preconditioner`](precond::Preconditioner) traits and the
//! [`SelfComm`](lblib::SelfComm) and [`ThreadComm`](lblib::ThreadComm) communicators.
//!
//! # A sparse matrix
//!
//! [`solve_matrix`] takes a `sprs::CsMat<f64>` (CSR or CSC), a faer sparse
//! matrix or a [`matrices::CsrMatrix`] ([`AsCsr`]). The 4 smallest eigenvalues of
//! the 1-D Laplacian tridiag(−1, 2, −1), whose eigenvalues are
//! 2 − 2 cos(jπ/(n+1)):
//!
//! ```
//! use jdmg::prelude::*;
//!
//! let n = 200;
//! let mut t = sprs::TriMat::new((n, n));
//! for i in 0..n {
//!     t.add_triplet(i, i, 2.0);
//!     if i + 1 < n {
//!         t.add_triplet(i, i + 1, -1.0);
//!         t.add_triplet(i + 1, i, -1.0);
//!     }
//! }
//! let a: sprs::CsMat<f64> = t.to_csr();
//! let params = JdParams {
//!     problem: ProblemSettings { nev: 4, tol: 1e-10, ..Default::default() },
//!     ..JdParams::default()
//! };
//! let sol = solve_matrix(&a, &params, None)?;
//! for (j, lambda) in sol.eigenvalues.iter().enumerate() {
//!     let exact = 2.0 - 2.0 * (std::f64::consts::PI * (j + 1) as f64 / (n + 1) as f64).cos();
//!     assert!((lambda - exact).abs() < 1e-8);
//! }
//! assert_eq!(sol.eigenvector(0).len(), n); // the eigenvectors, column by column
//! # Ok::<(), JdError>(())
//! ```
//!
//! # Matrix-free, with a preconditioner
//!
//! An operator that is never stored implements [`Operator`](precond::Operator)
//! (`apply_block` on `k` column-major vectors, into a buffer the solver owns); a
//! preconditioner K ≈ A − σI implements [`Preconditioner`](precond::Preconditioner)
//! and is handed to [`Problem::with_preconditioner`] (a user preconditioner is
//! always used). Here the 2-D Laplacian on an m × m grid and the inverse of its
//! diagonal:
//!
//! ```
//! use jdmg::prelude::*;
//!
//! struct Laplacian2d { m: usize }
//!
//! impl Operator for Laplacian2d {
//!     fn nrows(&self) -> usize { self.m * self.m }
//!     fn apply_block(&self, x: &[f64], y: &mut [f64], k: usize) {
//!         let (m, n) = (self.m, self.nrows());
//!         for c in 0..k {
//!             let (x, y) = (&x[c * n..(c + 1) * n], &mut y[c * n..(c + 1) * n]);
//!             for r in 0..n {
//!                 let (i, j) = (r % m, r / m);
//!                 let mut v = 4.0 * x[r];
//!                 if i > 0 { v -= x[r - 1]; }
//!                 if i + 1 < m { v -= x[r + 1]; }
//!                 if j > 0 { v -= x[r - m]; }
//!                 if j + 1 < m { v -= x[r + m]; }
//!                 y[r] = v;
//!             }
//!         }
//!     }
//! }
//!
//! /// z = r / 4: the inverse of the diagonal.
//! struct Jacobi { n: usize }
//!
//! impl Preconditioner for Jacobi {
//!     fn nrows(&self) -> usize { self.n }
//!     fn apply_block(&self, r: &[f64], z: &mut [f64], _k: usize) {
//!         z.iter_mut().zip(r).for_each(|(z, r)| *z = r / 4.0);
//!     }
//! }
//!
//! let a = Laplacian2d { m: 30 };
//! let k = Jacobi { n: a.nrows() };
//! let comm = SelfComm::new();
//! let problem = Problem::new(&a, &comm)?.with_preconditioner(&k)?;
//! let params = JdParams {
//!     problem: ProblemSettings { nev: 3, tol: 1e-9, ..Default::default() },
//!     ..JdParams::default()
//! };
//! let sol = solve(&problem, &params, None)?;
//! let e = |i: usize| 2.0 - 2.0 * (std::f64::consts::PI * i as f64 / 31.0).cos();
//! assert!((sol.eigenvalues[0] - 2.0 * e(1)).abs() < 1e-7);
//! assert!((sol.eigenvalues[1] - (e(1) + e(2))).abs() < 1e-7); // a double eigenvalue
//! assert!((sol.eigenvalues[2] - (e(1) + e(2))).abs() < 1e-7);
//! # Ok::<(), JdError>(())
//! ```
//!
//! # Interior eigenvalues
//!
//! [`Target::Closest`]`(σ)` asks for the eigenvalues nearest σ, in order of
//! distance. The matrix below has the eigenvalues 1, 2, …, 100 (a diagonal
//! matrix: any symmetric matrix works the same way); a few more inner steps
//! (`maxits`) help inside the spectrum:
//!
//! ```
//! use jdmg::prelude::*;
//!
//! let n = 100;
//! let diag: Vec<(usize, usize, f64)> = (0..n).map(|i| (i, i, (i + 1) as f64)).collect();
//! let a = CsrMatrix::from_triplets(n, n, &diag).expect("a 100 x 100 matrix");
//! let params = JdParams {
//!     problem: ProblemSettings {
//!         nev: 3,
//!         target: Target::Closest(50.2),
//!         tol: 1e-10,
//!         ..Default::default()
//!     },
//!     correction: CorrectionSettings { maxits: Some(20), ..Default::default() },
//!     ..JdParams::default()
//! };
//! let sol = solve_matrix(&a, &params, None)?;
//! let mut found = sol.eigenvalues.clone();
//! found.sort_by(f64::total_cmp);
//! for (x, want) in found.iter().zip([49.0, 50.0, 51.0]) {
//!     assert!((x - want).abs() < 1e-8, "{found:?}");
//! }
//! # Ok::<(), JdError>(())
//! ```
//!
//! # A generalized problem K x = λ M x, and shift-and-invert
//!
//! [`Solver`] takes the mass matrix M ([`Solver::mass`], symmetric positive
//! definite) and the spectral transformation ([`Solver::shift_invert`]) as
//! parts of one solve. Linear finite elements on (0, 1) with n interior nodes
//! (h = 1/(n+1)): K = tridiag(−1, 2, −1)/h and M = h/6·tridiag(1, 4, 1), whose
//! eigenvalues are 6(1 − cos θⱼ)/(h²(2 + cos θⱼ)), θⱼ = jπ/(n+1); the
//! eigenvectors come out M-orthonormal:
//!
//! ```
//! use jdmg::prelude::*;
//!
//! let n = 300;
//! let h = 1.0 / (n + 1) as f64;
//! let tri = |d: f64, o: f64| {
//!     let mut t = Vec::new();
//!     for i in 0..n {
//!         t.push((i, i, d));
//!         if i + 1 < n {
//!             t.push((i, i + 1, o));
//!             t.push((i + 1, i, o));
//!         }
//!     }
//!     CsrMatrix::from_triplets(n, n, &t).expect("a tridiagonal matrix")
//! };
//! let (k, m) = (tri(2.0 / h, -1.0 / h), tri(4.0 * h / 6.0, h / 6.0));
//! let exact = |j: usize| {
//!     let c = (std::f64::consts::PI * j as f64 / (n + 1) as f64).cos();
//!     6.0 * (1.0 - c) / (h * h * (2.0 + c))
//! };
//! let params = JdParams {
//!     problem: ProblemSettings { nev: 3, tol: 1e-10, ..Default::default() },
//!     ..JdParams::default()
//! };
//! // The 3 smallest.
//! let sol = Solver::new(&k, &params).mass(&m).run()?;
//! for (j, lambda) in sol.eigenvalues.iter().enumerate() {
//!     assert!((lambda - exact(j + 1)).abs() < 1e-7 * exact(j + 1));
//! }
//! // The 3 closest to σ = 2·10⁴, by a sparse LDLᵀ of K − σM.
//! let sol = Solver::new(&k, &params).mass(&m).shift_invert(2.0e4).run()?;
//! let mut want: Vec<f64> = (1..=n).map(exact).collect();
//! want.sort_by(|a, b| (a - 2.0e4).abs().total_cmp(&(b - 2.0e4).abs()));
//! for (lambda, w) in sol.eigenvalues.iter().zip(&want) {
//!     assert!((lambda - w).abs() < 1e-7 * w, "{lambda} against {w}");
//! }
//! # Ok::<(), JdError>(())
//! ```
//!
//! # Watching the iterations, and stopping
//!
//! An observer ([`jd::Observer`]) sees an [`IterationEvent`] after every outer
//! iteration. Returning `ControlFlow::Break(())` stops the solve (a time limit,
//! Ctrl-C, a custom test). A stop, like a spent budget, is not an error: the
//! solution says how the solve ended ([`Outcome`]) and carries what converged so
//! far and the best estimates of the rest ([`Solution::into_converged`] makes
//! it an error for `?`):
//!
//! ```
//! use jdmg::prelude::*;
//! use std::ops::ControlFlow;
//!
//! let a = matrices::generate::generate(&"lap3d:12".parse().unwrap()).unwrap();
//! let params = JdParams {
//!     problem: ProblemSettings { nev: 4, tol: 1e-12, ..Default::default() },
//!     ..JdParams::default()
//! };
//! let mut seen = 0;
//! let mut observer = |ev: &IterationEvent| {
//!     seen = ev.outer_iteration;
//!     if ev.outer_iteration >= 3 { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
//! };
//! let sol = solve_matrix(&a, &params, Some(&mut observer))?;
//! assert_eq!(sol.outcome, Outcome::Stopped);
//! assert_eq!(sol.wanted, 4);
//! assert_eq!(sol.eigenvalues.len(), 4); // estimates of the unconverged ones
//! assert!(sol.nconverged() < 4);
//! assert_eq!(seen, 3);
//! # Ok::<(), JdError>(())
//! ```
//!
//! # Threads
//!
//! [`crate::ExecutionSettings::threads`] sets the threads of one process's sparse products and
//! dense kernels. [`solve_distributed`] runs the fine-grain solver over the
//! ranks of any [`Comm`](lblib::Comm): [`ThreadComm`](lblib::ThreadComm) runs
//! them as threads of this process (`MpiComm`, with the feature `mpi`, as MPI
//! processes); each rank keeps its block of rows and every rank gets the same
//! eigenvalues:
//!
//! ```
//! use jdmg::prelude::*;
//!
//! let a = matrices::generate::generate(&"lap3d:10".parse().unwrap()).unwrap();
//! let params = JdParams {
//!     problem: ProblemSettings { nev: 2, tol: 1e-10, ..Default::default() },
//!     execution: ExecutionSettings { threads: 2, ..Default::default() },
//!     ..JdParams::default()
//! };
//! let one = solve_matrix(&a, &params, None)?;
//!
//! let ranks = ThreadComm::run(2, |comm| {
//!     let mut params = params.clone();
//!     params.execution.threads = 1;
//!     solve_distributed(&a, &comm, &params, None).map(|s| (s.rows(), s.eigenvalues))
//! });
//! for rank in ranks {
//!     let (rows, values) = rank?;
//!     assert!(rows.len() < a.nrows()); // this rank's rows only
//!     for (x, y) in values.iter().zip(&one.eigenvalues) {
//!         assert!((x - y).abs() < 1e-8);
//!     }
//! }
//! # Ok::<(), JdError>(())
//! ```
//!
//! Checkpoints ([`checkpoint`], [`Solver::checkpoint`], [`Solver::resume`]),
//! multigrain solve groups ([`Solver::groups`], [`multigrain`]) and the `jdmg`
//! command line are described in the repository's README.
//!
//! # References
//!
//! Papers are cited by their first authors (in places by number) and section
//! numbers:
//!
//! * 003, McCombs et al.: J. R. McCombs, R. T. Mills, A. Stathopoulos, *Dynamic Load
//!   Balancing of an Iterative Eigensolver on Grids of Heterogeneous Clusters*
//!   (block Jacobi-Davidson, the flexible phase, LBLIB, multigrain).
//! * 000, Boudet et al.: V. Boudet, F. Rastello, Y. Robert, *A Proposal for a
//!   Heterogeneous Cluster ScaLAPACK (Dense Linear Solvers)* (heterogeneous
//!   cyclic(B), semi-static re-partitioning).
//! * 001, Mehaut and Robert: J.-F. Mehaut, Y. Robert, *Algorithms and Tools for
//!   (Distributed) Heterogeneous Computing: A Prospective Report* (2-D grids,
//!   clusters of clusters).
//! * 002, Barbosa et al.: J. Barbosa, C. Morais, P. Tadeu, *Data Parallel Scheduling
//!   of Operations in Linear Algebra on Heterogeneous Clusters*.
//! * 004, Beaumont et al.: O. Beaumont, L. Eyraud-Dubois, M. Vérité, *2D Static
//!   Resource Allocation for Compressed Linear Algebra and Communication
//!   Constraints*.
#![warn(missing_docs)]

pub mod certify;
pub mod checkpoint;
pub mod complex_svd;
mod correction;
mod dense;
pub mod driver;
pub mod error;
pub mod generalized;
pub mod hermitian;
pub mod input;
pub mod jd;
pub mod lanczos;
pub mod multigrain;
pub mod names;
pub mod optimal_m;
pub mod params;
mod random;
pub mod repartition;
pub mod report;
mod scaling;
mod setup;
pub mod slice_groups;
pub mod slicing;
pub mod solution;
pub mod solver;
pub mod st;
pub mod svd;
pub mod symmetry;
pub mod tall_skinny;

pub use checkpoint::{Checkpoint, CheckpointRequest, CheckpointSink, Checkpointing};
pub use complex_svd::svds_complex;
pub use driver::{gather_eigenvectors, solve, solve_distributed, solve_matrix, solve_multigrain};
pub use error::{CheckpointError, JdError};
pub use input::AsCsr;
pub use jd::{Mass, Problem, Spaces};
pub use multigrain::{
    fine_rank_keys, fine_world, groups_on, parse_groups, AlltoallScope, Balance, MultigrainParams,
    MultigrainStats,
};
pub use params::{
    BasisSettings, ConvTest, CorrectionSettings, ExecutionSettings, Extraction, InnerSolver,
    InnerStop, JdParams, PrecondChoice, PrecondSettings, ProblemSettings, Target, Verify,
};
pub use repartition::{RepartitionEvent, RepartitionParams, RepartitionStats};
pub use report::{ResumedFrom, RunMode, SolveReport};
pub use solution::{InnerStops, IterationEvent, Outcome, PhaseSeconds, Solution, Stats};
pub use solver::Solver;
pub use svd::{
    svds, svds_operator, CsrPair, RectOperator, SvdError, SvdParams, SvdSolution, SvdWhich,
};

/// What a user of the library needs, in one `use jdmg::prelude::*;`: the entry
/// points, the parameters and results, the operator and preconditioner traits
/// (from `precond`), the communicators (from `lblib`) and [`CsrMatrix`](matrices::CsrMatrix).
pub mod prelude {
    pub use crate::jd::Observer;
    pub use crate::{
        solve, solve_distributed, solve_matrix, solve_multigrain, AsCsr, Balance, BasisSettings,
        Checkpoint, CheckpointError, CheckpointRequest, CheckpointSink, Checkpointing, ConvTest,
        CorrectionSettings, ExecutionSettings, Extraction, InnerSolver, InnerStop, IterationEvent,
        JdError, JdParams, MultigrainParams, Outcome, PrecondChoice, PrecondSettings, Problem,
        ProblemSettings, Solution, Solver, Spaces, Stats, Target, Verify,
    };
    pub use lblib::{Comm, SelfComm, ThreadComm};
    pub use matrices::CsrMatrix;
    pub use precond::{Operator, Preconditioner};
}

/// The README's Rust blocks, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
mod readme {}

/// The user guide's Rust blocks (`docs/src/`), compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../docs/src/library.md")]
mod guide_library {}

#[cfg(doctest)]
#[doc = include_str!("../../docs/src/lblib.md")]
mod guide_lblib {}
