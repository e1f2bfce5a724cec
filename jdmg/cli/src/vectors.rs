//! `jdmg solve --initial FILE.mtx --deflate FILE.mtx --st sinvert`: start and
//! deflation vectors read from MatrixMarket arrays, and the checks of the
//! shift-and-invert transformation's options.

use std::path::Path;

use clap::ValueEnum;
use jdmg::{JdParams, Spaces, Target};
use matrices::mm::{read_dense_array, DenseArray};

use crate::output::Fail;

/// Spectral transformation of `--st`.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum St {
    /// None: the solver works on A (default).
    None,
    /// Shift-and-invert on a sparse direct factorization of A − σI, or K − σM
    /// with --mass (σ: --target).
    Sinvert,
}

/// The method on each slice of `--interval` (`--slice-method`).
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SliceMethod {
    /// Block thick-restart Lanczos (Krylov-Schur) on (A − σI)⁻¹ (default).
    Lanczos,
    /// The block Davidson loop on (A − σI)⁻¹.
    Davidson,
}

impl From<SliceMethod> for jdmg::slicing::SliceMethod {
    fn from(m: SliceMethod) -> Self {
        match m {
            SliceMethod::Lanczos => Self::Lanczos,
            SliceMethod::Davidson => Self::Davidson,
        }
    }
}

/// How `--interval` shares the interval among solve groups (`--slice-split`).
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SliceSplit {
    /// Shares proportional to each group's rate, measured by a flexible
    /// phase of lblib (default).
    Rates,
    /// Equal counts per group.
    Equal,
}

impl From<SliceSplit> for jdmg::slice_groups::GroupSplit {
    fn from(m: SliceSplit) -> Self {
        match m {
            SliceSplit::Rates => Self::Rates,
            SliceSplit::Equal => Self::Equal,
        }
    }
}

/// The vectors of `--initial` and `--deflate`, n × p each (column-major).
#[derive(Default)]
pub struct Vectors {
    pub initial: Option<DenseArray>,
    pub deflation: Option<DenseArray>,
}

impl Vectors {
    /// The global blocks for the library's drivers.
    pub fn spaces(&self) -> Spaces<'_> {
        Spaces {
            initial: self.initial.as_ref().map_or(&[], |d| &d.data),
            deflation: self.deflation.as_ref().map_or(&[], |d| &d.data),
        }
    }
}

/// Reads one MatrixMarket array of n rows; exit 2 with the flag, the file and
/// the reason (unreadable, not an array, a malformed line, wrong row count,
/// no columns, NaN or Inf).
fn read_block(flag: &str, path: &Path, n: usize) -> Result<DenseArray, Fail> {
    let d =
        read_dense_array(path).map_err(|e| Fail::bad(format!("{flag} {}: {e}", path.display())))?;
    if d.nrows != n {
        return Err(Fail::bad(format!(
            "{flag} {}: {} rows, but the matrix has n = {n}",
            path.display(),
            d.nrows
        )));
    }
    if d.ncols == 0 {
        return Err(Fail::bad(format!(
            "{flag} {}: no vectors (0 columns)",
            path.display()
        )));
    }
    if let Some(i) = d.data.iter().position(|v| !v.is_finite()) {
        return Err(Fail::bad(format!(
            "{flag} {}: entry ({}, {}) is NaN or Inf",
            path.display(),
            i % n + 1,
            i / n + 1
        )));
    }
    Ok(d)
}

/// Reads `--initial` and `--deflate` for a matrix of n rows.
pub fn load(initial: Option<&Path>, deflate: Option<&Path>, n: usize) -> Result<Vectors, Fail> {
    Ok(Vectors {
        initial: initial.map(|p| read_block("--initial", p, n)).transpose()?,
        deflation: deflate.map(|p| read_block("--deflate", p, n)).transpose()?,
    })
}

/// Exit 2 for a combination the options cannot honour: `--st sinvert` without
/// an interior target, or with solve groups and inner steps (`--maxits` > 0).
pub fn check_options(st: St, groups: bool, params: &JdParams) -> Result<(), Fail> {
    if st == St::Sinvert {
        if !matches!(params.problem.target, Target::Closest(_)) {
            return Err(Fail::bad(
                "--st sinvert needs the shift: --target σ (the eigenvalues closest to σ)",
            ));
        }
        if groups && params.correction.maxits.is_some_and(|m| m > 0) {
            return Err(Fail::bad(
                "--st sinvert with --groups takes GD+k steps (--maxits 0): it runs fine grain \
                 over the groups' ranks, rank 0 factoring",
            ));
        }
    }
    Ok(())
}
