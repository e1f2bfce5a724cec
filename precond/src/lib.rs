//! precond: linear operators on blocks of vectors, sparse matrix-vector products,
//! preconditioners and step-wise Krylov inner solvers (BiCGSTAB first).
//!
//! Block convention used everywhere: a block of `k` vectors of local length `n`
//! is a column-major slice of length `n * k` (vector `j` is `x[j*n..(j+1)*n]`).

pub mod complex;
pub mod dist;
pub mod krylov;
pub mod operator;
pub mod pages;
pub mod preconditioners;
pub mod scratch;
pub mod simd;
pub mod spmv;

pub use complex::ComplexCsrOperator;
pub use dist::{redistribute, DistCsrOperator, DistError, DistOptions, RedistScratch};
pub use krylov::{
    Bicgstab, BlockBicgstab, Breakdown, BreakdownKind, Cg, Gmres, KrylovResult, KrylovStats,
    Stepwise, StopCriteria,
};
pub use operator::{dot, IdentityPreconditioner, Operator, Preconditioner, Scalar};
pub use preconditioners::{build, build_with_info, PrecondError, PrecondInfo, PrecondKind};
pub use spmv::{advise_huge_pages, huge_page_vec, spmv_block, CsrOperator, SpmvError};
