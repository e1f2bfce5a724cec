//! `jdmg solve --initial FILE.mtx --deflate FILE.mtx --st sinvert`: start and
//! deflation vectors read from MatrixMarket arrays, and the checks of the
//! shift-and-invert transformation's options.

use std::path::Path;

use clap::ValueEnum;
use faer::c64;
use jdmg::hermitian::embed_vectors;
use jdmg::{JdParams, Spaces, Target};
use matrices::mm::{read_complex_array_bytes, read_dense_array, DenseArray};

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
    let bad = d.data.iter().position(|v| !v.is_finite());
    check_block(flag, path, (d.nrows, d.ncols), n, bad)?;
    Ok(d)
}

/// Exit 2 unless a block of `shape` read from `path` has n rows, a column
/// and no NaN or Inf (`bad`: the position of the first, column-major).
fn check_block(
    flag: &str,
    path: &Path,
    shape: (usize, usize),
    n: usize,
    bad: Option<usize>,
) -> Result<(), Fail> {
    let file = path.display();
    if shape.0 != n {
        return Err(Fail::bad(format!(
            "{flag} {file}: {} rows, but the matrix has n = {n}",
            shape.0
        )));
    }
    if shape.1 == 0 {
        return Err(Fail::bad(format!("{flag} {file}: no vectors (0 columns)")));
    }
    if let Some(i) = bad {
        return Err(Fail::bad(format!(
            "{flag} {file}: entry ({}, {}) is NaN or Inf",
            i % n + 1,
            i / n + 1
        )));
    }
    Ok(())
}

/// Reads a complex MatrixMarket array of n rows (a real array is taken with
/// zero imaginary parts): the vectors, column-major. Exit 2 as [`read_block`].
fn read_complex_block(flag: &str, path: &Path, n: usize) -> Result<Vec<c64>, Fail> {
    if !matrices::mm::is_complex_file(path) {
        let d = read_block(flag, path, n)?;
        return Ok(d.data.iter().map(|&v| c64::new(v, 0.0)).collect());
    }
    let fail = |e: String| Fail::bad(format!("{flag} {}: {e}", path.display()));
    let bytes = std::fs::read(path).map_err(|e| fail(e.to_string()))?;
    let (rows, cols, z) = read_complex_array_bytes(&bytes).map_err(|e| fail(e.to_string()))?;
    let bad = z
        .iter()
        .position(|v| !(v.re.is_finite() && v.im.is_finite()));
    check_block(flag, path, (rows, cols), n, bad)?;
    Ok(z)
}

/// The vectors of `--initial` and `--deflate` of a complex problem of order
/// n, in the form its real embedding is solved with
/// ([`jdmg::hermitian::embed_vectors`]: z and i·z for each complex z), and
/// the complex deflation vectors the recovery projects out.
pub fn load_complex(
    initial: Option<&Path>,
    deflate: Option<&Path>,
    n: usize,
) -> Result<(Vectors, Vec<c64>), Fail> {
    let embed = |z: &[c64]| DenseArray {
        nrows: 2 * n,
        ncols: 2 * z.len() / n,
        data: embed_vectors(z, n),
    };
    let init = initial
        .map(|p| read_complex_block("--initial", p, n))
        .transpose()?;
    let defl = deflate
        .map(|p| read_complex_block("--deflate", p, n))
        .transpose()?;
    let vectors = Vectors {
        initial: init.as_deref().map(embed),
        deflation: defl.as_deref().map(embed),
    };
    Ok((vectors, defl.unwrap_or_default()))
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
