//! hetdense: dense linear algebra on processes of different speeds, laid out from
//! the rates `lblib` measures. Planners of work from cycle-times or speeds (papers
//! 000, 001, 002, 004), their simulators, and distributed LU / QR / GEMM over any
//! `lbcomm` communicator on those layouts (faer for the local kernels).
//!
//! | paper | item |
//! |---|---|
//! | `000` §2–§4, `001` §4.3–4.5 allocation from cycle-times | [`alloc`] |
//! | `000` §2.2–2.3, §4.4 column-block layouts (cyclic, heterogeneous cyclic(B), optimized) | [`layout`] |
//! | `003` §5 rates of a flexible section, used as `000`'s cycle-times | [`rates`] |
//! | `000` §2.2 right-looking LU / QR on a 1-D column-block layout, §2.1/§4.5 semi-static re-planning | [`factor`] |
//! | `000` §2.1 matrix product (Algorithm 2.1 chunks) | [`gemm`] |
//! | `001` §4.3–4.5 outer-product matrix product, right-looking LU and Householder QR on a heterogeneous 2-D grid (panel or Kalinov–Lastovetsky allocation) | [`grid`] |
//! | `002` malleable task graphs, `004` BC/BCE/RS tile allocation, tiled LU on threads | [`sched`] |
//! | checks: backward error, orthogonality, serial faer references, solve | [`check`] |
//! | one call that runs an operation and reports (the `jdmg dense` CLI) | [`run`] |
//!
//! The papers, cited by number:
//!
//! * 000, Boudet et al.: V. Boudet, F. Rastello, Y. Robert, *A Proposal for a
//!   Heterogeneous Cluster ScaLAPACK (Dense Linear Solvers)*.
//! * 001, Mehaut and Robert: J.-F. Mehaut, Y. Robert, *Algorithms and Tools for
//!   (Distributed) Heterogeneous Computing: A Prospective Report*.
//! * 002, Barbosa et al.: J. Barbosa, C. Morais, P. Tadeu, *Data Parallel
//!   Scheduling of Operations in Linear Algebra on Heterogeneous Clusters*.
//! * 003, McCombs et al.: J. R. McCombs, R. T. Mills, A. Stathopoulos, *Dynamic
//!   Load Balancing of an Iterative Eigensolver on Grids of Heterogeneous
//!   Clusters* (the balancer of `lblib`).
//! * 004, Beaumont et al.: O. Beaumont, L. Eyraud-Dubois, M. Vérité, *2D Static
//!   Resource Allocation for Compressed Linear Algebra and Communication
//!   Constraints*.

pub mod alloc;
pub mod check;
pub mod factor;
pub mod gemm;
pub mod grid;
pub mod layout;
pub mod rates;
pub mod run;
pub mod sched;

pub use factor::{factor_distributed, DistFactors, FactorStats, LocalColumns, Replan, ReplanRates};
pub use layout::{ColumnLayout, LayoutKind};
pub use rates::{measure_cycle_times, RateParams, RateSample};
pub use run::{run_dense, DenseOp, DenseParams, DenseReport, LoadChange};

use alloc::AllocError;
use lblib::LbError;

/// Errors of the dense kernels: bad parameters and failed collectives, with what
/// is known about them.
#[derive(Debug, thiserror::Error)]
pub enum DenseError {
    /// A layout could not be planned from the cycle-times.
    #[error("layout: {0}")]
    Alloc(#[from] AllocError),
    /// The rate measurement (an `Lbs` flexible section) failed.
    #[error("rate measurement: {0}")]
    Lbs(#[from] LbError),
    /// A parameter is out of range.
    #[error("{what} = {value}: {reason}")]
    BadParam {
        /// Which parameter.
        what: &'static str,
        /// Its value, printed.
        value: String,
        /// Why it is rejected.
        reason: &'static str,
    },
    /// A matrix given as data has the wrong size.
    #[error("matrix data has {got} entries, expected {expected} for n = {n}")]
    BadMatrix {
        /// Entries received.
        got: usize,
        /// Entries expected (`n²`).
        expected: usize,
        /// Order requested.
        n: usize,
    },
    /// A zero pivot: the matrix is singular to working precision.
    #[error("zero pivot in column {column}: the matrix is singular")]
    Singular {
        /// Global column of the zero pivot.
        column: usize,
    },
}

/// `n >= 1` and `block >= 1`, as [`AllocError::TooSmall`].
pub(crate) fn alloc_check(n: usize, block: usize) -> Result<(), AllocError> {
    if n == 0 {
        return Err(AllocError::TooSmall {
            what: "matrix order n",
            got: 0,
            min: 1,
        });
    }
    if block == 0 {
        return Err(AllocError::TooSmall {
            what: "column block width",
            got: 0,
            min: 1,
        });
    }
    Ok(())
}

/// Where the entries of the input matrix come from. Every process fills its own
/// columns, so a random matrix needs no communication.
#[derive(Debug, Clone, Copy)]
pub enum Source<'a> {
    /// Entries uniform in `[-1, 1)`, a pure function of `(seed, i, j)`
    /// ([`random_entry`]).
    Random {
        /// Seed.
        seed: u64,
    },
    /// A full `n × n` matrix, column-major, replicated on every process.
    ColMajor(&'a [f64]),
}

impl Source<'_> {
    /// Entry `(i, j)` of the `n × n` matrix.
    pub fn entry(&self, n: usize, i: usize, j: usize) -> f64 {
        match self {
            Source::Random { seed } => random_entry(*seed, i, j),
            Source::ColMajor(a) => a[j * n + i],
        }
    }

    /// Checks that a [`Source::ColMajor`] holds `n²` entries.
    ///
    /// # Errors
    /// [`DenseError::BadMatrix`].
    pub fn validate(&self, n: usize) -> Result<(), DenseError> {
        if let Source::ColMajor(a) = self {
            if a.len() != n * n {
                return Err(DenseError::BadMatrix {
                    got: a.len(),
                    expected: n * n,
                    n,
                });
            }
        }
        Ok(())
    }

    /// The whole matrix, column-major.
    pub fn to_col_major(&self, n: usize) -> Vec<f64> {
        let mut a = vec![0.0; n * n];
        for j in 0..n {
            for i in 0..n {
                a[j * n + i] = self.entry(n, i, j);
            }
        }
        a
    }
}

/// Entry `(i, j)` of the seeded random test matrix: uniform in `[-1, 1)` from a
/// SplitMix64 hash of `(seed, i, j)`.
pub fn random_entry(seed: u64, i: usize, j: usize) -> f64 {
    let mut z = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add((i as u64) << 32 ^ j as u64)
        .wrapping_add(0x6A09_E667_F3BC_C909);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
}

/// faer's parallelism for `threads` threads inside one process (1 = sequential).
pub fn par_for(threads: usize) -> faer::Par {
    if threads <= 1 {
        faer::Par::Seq
    } else {
        faer::Par::rayon(threads)
    }
}
