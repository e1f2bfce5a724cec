//! Sparse matrix data layer of jdmg: the [`CsrMatrix`] type, MatrixMarket I/O,
//! generators and row partitioning (see `../shared/DESIGN.md`).

pub mod complex;
pub mod csr;
pub mod generate;
pub mod info;
pub mod mm;
pub mod ordering;
pub mod partition;
pub mod rectangular;
pub mod shared;

pub use complex::{ComplexCsr, MagSpec};
pub use csr::{CsrError, CsrMatrix};
pub use partition::{
    split_ranks, GroupPartition, HaloPlan, PartitionError, Redistribution, RowPartition, Transfer,
};
