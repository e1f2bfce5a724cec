//! Test-problem generators: Laplacians, the 27-point stencil, anisotropic
//! variants and matrices with a prescribed spectrum, for problems bigger than
//! the real files (the papers' FE matrix has 268,515 rows).
//!
//! Grid matrices number unknowns `x + nx * (y + ny * z)` (x fastest) with
//! homogeneous Dirichlet boundaries. Their spectra are analytic (Kronecker sums
//! and products of 1D operators), given by [`exact_eigenvalues`]. Rows are
//! generated in parallel.
//!
//! String syntax ([`GenSpec`] implements `FromStr`/`Display`, serde as string):
//!
//! | spec | matrix |
//! |---|---|
//! | `lap2d:N`, `lap2d:NXxNY` | 5-point Laplacian, diagonal 4, neighbours -1 |
//! | `lap3d:N`, `lap3d:NXxNYxNZ` | 7-point Laplacian, diagonal 6, neighbours -1 |
//! | `stencil27:N`, `stencil27:NXxNYxNZ` | 27-point stencil (HPCG-like), diagonal 26, all 26 neighbours -1; SPD |
//! | `aniso2d:N:EX,EY` | 5-point with coefficient `EX` along x, `EY` along y |
//! | `aniso3d:N:EX,EY,EZ` | 7-point with coefficients per direction |
//! | `spectrum:N:LO:HI[:SEED]` | `Q D Qᵀ`, `D` = N equispaced values in `[LO, HI]`, `Q` three layers of sparse Givens rotations (≤ 8 nonzeros per row) |
//! | `fem1d:N`, `fem2d:N[xNY]`, `fem3d:N[xNYxNZ]`, then `:mass` or `:stiffness` | stiffness K (default) or consistent mass M of linear (1-D), bilinear (2-D) or trilinear (3-D) elements on the unit interval, square or cube, `N` interior nodes per direction, Dirichlet boundary (3, 9 or 27 nonzeros per row) |
//!
//! **Finite-element pairs.** With `h = 1/(N+1)`, the 1-D P1 matrices are
//! `K₁ = tridiag(−1, 2, −1)/h` and `M₁ = h·tridiag(1, 4, 1)/6`; the tensor-product
//! elements give `K = K₁⊗M₁⊗M₁ + M₁⊗K₁⊗M₁ + M₁⊗M₁⊗K₁` and `M = M₁⊗M₁⊗M₁` (fewer
//! factors in 1-D and 2-D). `K₁` and `M₁` share the eigenvectors `sin(jkπ/(N+1))`,
//! so the generalized eigenvalues of `K x = λ M x` are the sums `λ_i + λ_j + λ_k`
//! of the 1-D ones `6(1 − cos θ)/(h²(2 + cos θ))`, `θ = jπ/(N+1)`
//! ([`generalized_eigenvalues`]); on a square or cube they are multiple.
//! [`fem_pair`] generates both matrices.

use std::fmt;
use std::str::FromStr;

use rayon::prelude::*;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use thiserror::Error;

use crate::CsrMatrix;

/// A generated test matrix, described by its string spec (see module docs).
#[derive(Debug, Clone, PartialEq)]
pub enum GenSpec {
    /// 2D 5-point Dirichlet Laplacian on an `nx x ny` grid.
    Lap2d {
        /// Grid points along x.
        nx: usize,
        /// Grid points along y.
        ny: usize,
    },
    /// 3D 7-point Dirichlet Laplacian on an `nx x ny x nz` grid.
    Lap3d {
        /// Grid points along x.
        nx: usize,
        /// Grid points along y.
        ny: usize,
        /// Grid points along z.
        nz: usize,
    },
    /// 3D 27-point stencil: `27 I - T⊗T⊗T` with `T = tridiag(1, 1, 1)`,
    /// i.e. 26 on the diagonal and -1 for each of the 26 neighbours.
    Stencil27 {
        /// Grid points along x.
        nx: usize,
        /// Grid points along y.
        ny: usize,
        /// Grid points along z.
        nz: usize,
    },
    /// 2D anisotropic 5-point operator `ex·(-∂xx) + ey·(-∂yy)`.
    Aniso2d {
        /// Grid points along x.
        nx: usize,
        /// Grid points along y.
        ny: usize,
        /// Positive coefficients per direction.
        eps: [f64; 2],
    },
    /// 3D anisotropic 7-point operator `Σ e_d·(-∂dd)`.
    Aniso3d {
        /// Grid points along x.
        nx: usize,
        /// Grid points along y.
        ny: usize,
        /// Grid points along z.
        nz: usize,
        /// Positive coefficients per direction.
        eps: [f64; 3],
    },
    /// `Q D Qᵀ` with `D` = `n` equispaced eigenvalues in `[lo, hi]` (randomly
    /// placed on the diagonal) and `Q` a product of three layers of disjoint
    /// Givens rotations (pairs `(2k, 2k+1)`, `(2k+1, 2k+2)`, a random matching)
    /// with random angles from `seed`. At most 8 nonzeros per row.
    Spectrum {
        /// Order.
        n: usize,
        /// Smallest eigenvalue.
        lo: f64,
        /// Largest eigenvalue.
        hi: f64,
        /// Seed of the permutation and rotation angles.
        seed: u64,
    },
    /// A matrix of the finite-element pair of tensor-product linear elements on
    /// the unit interval, square or cube (see the module docs): `K x = λ M x`
    /// has its eigenvalues in closed form ([`generalized_eigenvalues`]).
    Fem {
        /// Space dimension: 1, 2 or 3.
        dim: usize,
        /// Interior nodes along x.
        nx: usize,
        /// Interior nodes along y (1 in 1-D).
        ny: usize,
        /// Interior nodes along z (1 in 1-D and 2-D).
        nz: usize,
        /// The stiffness or the mass matrix.
        part: FemPart,
    },
}

/// Which matrix of a finite-element pair [`GenSpec::Fem`] generates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FemPart {
    /// The stiffness matrix K (spec suffix `:stiffness`, the default).
    #[default]
    Stiffness,
    /// The consistent mass matrix M (spec suffix `:mass`).
    Mass,
}

/// Why a spec string or spec was rejected.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum GenError {
    /// The spec string does not follow the syntax of the module docs.
    #[error("bad generator spec {spec:?}: {reason}")]
    Parse {
        /// The string given.
        spec: String,
        /// What is wrong.
        reason: String,
    },
    /// A parameter is out of range (zero dimension, non-positive coefficient,
    /// `lo > hi`, non-finite value).
    #[error("generator {spec}: {reason}")]
    Invalid {
        /// The spec.
        spec: String,
        /// What is wrong.
        reason: String,
    },
    /// The matrix would have more rows than `u32` column indices allow.
    #[error("generator {spec}: {rows} rows exceed the limit {limit}")]
    TooLarge {
        /// The spec.
        spec: String,
        /// Rows requested.
        rows: u128,
        /// Largest order allowed.
        limit: u64,
    },
}

impl GenSpec {
    /// Grid dimensions `[nx, ny, nz]` (`nz = 1` in 2D; `[n, 1, 1]` for spectrum).
    fn dims(&self) -> [usize; 3] {
        match *self {
            GenSpec::Lap2d { nx, ny } | GenSpec::Aniso2d { nx, ny, .. } => [nx, ny, 1],
            GenSpec::Lap3d { nx, ny, nz }
            | GenSpec::Stencil27 { nx, ny, nz }
            | GenSpec::Aniso3d { nx, ny, nz, .. } => [nx, ny, nz],
            GenSpec::Spectrum { n, .. } => [n, 1, 1],
            GenSpec::Fem { nx, ny, nz, .. } => [nx, ny, nz],
        }
    }

    /// The same finite-element spec with the other matrix of the pair `part`;
    /// `None` for the other generators.
    pub fn fem_part(&self, part: FemPart) -> Option<GenSpec> {
        match *self {
            GenSpec::Fem {
                dim, nx, ny, nz, ..
            } => Some(GenSpec::Fem {
                dim,
                nx,
                ny,
                nz,
                part,
            }),
            _ => None,
        }
    }

    /// Order (rows = columns) of the generated matrix (saturating).
    pub fn nrows(&self) -> usize {
        self.dims().iter().fold(1usize, |a, &d| a.saturating_mul(d))
    }

    /// Checks every parameter.
    ///
    /// # Errors
    /// [`GenError::Invalid`] or [`GenError::TooLarge`].
    pub fn validate(&self) -> Result<(), GenError> {
        let invalid = |reason: &str| GenError::Invalid {
            spec: self.to_string(),
            reason: reason.into(),
        };
        let dims = self.dims();
        if dims.contains(&0) {
            return Err(invalid("every dimension must be at least 1"));
        }
        let rows: u128 = dims.iter().map(|&d| d as u128).product();
        if rows > u32::MAX as u128 {
            return Err(GenError::TooLarge {
                spec: self.to_string(),
                rows,
                limit: u32::MAX as u64,
            });
        }
        match self {
            GenSpec::Aniso2d { eps, .. } if eps.iter().any(|e| !(e.is_finite() && *e > 0.0)) => {
                Err(invalid("coefficients must be positive and finite"))
            }
            GenSpec::Aniso3d { eps, .. } if eps.iter().any(|e| !(e.is_finite() && *e > 0.0)) => {
                Err(invalid("coefficients must be positive and finite"))
            }
            GenSpec::Spectrum { lo, hi, .. } if !(lo.is_finite() && hi.is_finite() && lo <= hi) => {
                Err(invalid("need finite lo <= hi"))
            }
            GenSpec::Fem { dim, ny, nz, .. }
                if !(1..=3).contains(dim) || (*dim < 3 && *nz != 1) || (*dim < 2 && *ny != 1) =>
            {
                Err(invalid(
                    "fem: dimension 1, 2 or 3, and one node along the unused directions",
                ))
            }
            _ => Ok(()),
        }
    }
}

fn fmt_dims(f: &mut fmt::Formatter<'_>, d: &[usize]) -> fmt::Result {
    if d.iter().all(|&x| x == d[0]) {
        write!(f, "{}", d[0])
    } else {
        let s: Vec<String> = d.iter().map(|x| x.to_string()).collect();
        write!(f, "{}", s.join("x"))
    }
}

impl fmt::Display for GenSpec {
    /// The canonical spec string (parses back to an equal spec).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [nx, ny, nz] = self.dims();
        match self {
            GenSpec::Lap2d { .. } => {
                write!(f, "lap2d:")?;
                fmt_dims(f, &[nx, ny])
            }
            GenSpec::Lap3d { .. } => {
                write!(f, "lap3d:")?;
                fmt_dims(f, &[nx, ny, nz])
            }
            GenSpec::Stencil27 { .. } => {
                write!(f, "stencil27:")?;
                fmt_dims(f, &[nx, ny, nz])
            }
            GenSpec::Aniso2d { eps, .. } => {
                write!(f, "aniso2d:")?;
                fmt_dims(f, &[nx, ny])?;
                write!(f, ":{},{}", eps[0], eps[1])
            }
            GenSpec::Aniso3d { eps, .. } => {
                write!(f, "aniso3d:")?;
                fmt_dims(f, &[nx, ny, nz])?;
                write!(f, ":{},{},{}", eps[0], eps[1], eps[2])
            }
            GenSpec::Spectrum { n, lo, hi, seed } => {
                write!(f, "spectrum:{n}:{}:{}:{seed}", Short(*lo), Short(*hi))
            }
            GenSpec::Fem { dim, part, .. } => {
                write!(f, "fem{dim}d:")?;
                fmt_dims(f, &[nx, ny, nz][..(*dim).clamp(1, 3)])?;
                match part {
                    FemPart::Stiffness => Ok(()),
                    FemPart::Mass => write!(f, ":mass"),
                }
            }
        }
    }
}

/// A value as the spec parser reads it back, in exponent form when plain
/// digits would be long (1e308, not 309 digits).
struct Short(f64);

impl std::fmt::Display for Short {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let a = self.0.abs();
        if a != 0.0 && !(1e-4..1e16).contains(&a) {
            write!(f, "{:e}", self.0)
        } else {
            write!(f, "{}", self.0)
        }
    }
}

/// Default seed of `spectrum:N:LO:HI` when none is given.
pub const DEFAULT_SEED: u64 = 1;

impl FromStr for GenSpec {
    type Err = GenError;

    /// Parses the syntax of the module docs and validates the parameters.
    fn from_str(s: &str) -> Result<Self, GenError> {
        let perr = |reason: String| GenError::Parse {
            spec: s.to_string(),
            reason,
        };
        let parts: Vec<&str> = s.trim().split(':').collect();
        let kind = parts[0].to_ascii_lowercase();
        let dims = |t: &str, k: usize| -> Result<Vec<usize>, GenError> {
            let v: Vec<usize> = t
                .split(['x', 'X'])
                .map(|d| d.trim().parse::<usize>())
                .collect::<Result<_, _>>()
                .map_err(|_| perr(format!("bad dimensions {t:?}")))?;
            match v.len() {
                1 => Ok(vec![v[0]; k]),
                n if n == k => Ok(v),
                n => Err(perr(format!("expected 1 or {k} dimensions, found {n}"))),
            }
        };
        let floats = |t: &str, k: usize| -> Result<Vec<f64>, GenError> {
            let v: Vec<f64> = t
                .split(',')
                .map(|d| d.trim().parse::<f64>())
                .collect::<Result<_, _>>()
                .map_err(|_| perr(format!("bad coefficients {t:?}")))?;
            if v.len() == k {
                Ok(v)
            } else {
                Err(perr(format!(
                    "expected {k} coefficients, found {}",
                    v.len()
                )))
            }
        };
        let nargs = |want: &[usize]| -> Result<(), GenError> {
            if want.contains(&(parts.len() - 1)) {
                Ok(())
            } else {
                Err(perr(format!(
                    "wrong number of ':'-separated fields for {kind}"
                )))
            }
        };
        let spec = match kind.as_str() {
            "lap2d" => {
                nargs(&[1])?;
                let d = dims(parts[1], 2)?;
                GenSpec::Lap2d { nx: d[0], ny: d[1] }
            }
            "lap3d" => {
                nargs(&[1])?;
                let d = dims(parts[1], 3)?;
                GenSpec::Lap3d {
                    nx: d[0],
                    ny: d[1],
                    nz: d[2],
                }
            }
            "stencil27" => {
                nargs(&[1])?;
                let d = dims(parts[1], 3)?;
                GenSpec::Stencil27 {
                    nx: d[0],
                    ny: d[1],
                    nz: d[2],
                }
            }
            "aniso2d" => {
                nargs(&[2])?;
                let d = dims(parts[1], 2)?;
                let e = floats(parts[2], 2)?;
                GenSpec::Aniso2d {
                    nx: d[0],
                    ny: d[1],
                    eps: [e[0], e[1]],
                }
            }
            "aniso3d" => {
                nargs(&[2])?;
                let d = dims(parts[1], 3)?;
                let e = floats(parts[2], 3)?;
                GenSpec::Aniso3d {
                    nx: d[0],
                    ny: d[1],
                    nz: d[2],
                    eps: [e[0], e[1], e[2]],
                }
            }
            "spectrum" => {
                nargs(&[3, 4])?;
                let n = parts[1]
                    .trim()
                    .parse()
                    .map_err(|_| perr(format!("bad order {:?}", parts[1])))?;
                let lo = floats(parts[2], 1)?[0];
                let hi = floats(parts[3], 1)?[0];
                let seed = match parts.get(4) {
                    Some(t) => t
                        .trim()
                        .parse()
                        .map_err(|_| perr(format!("bad seed {t:?}")))?,
                    None => DEFAULT_SEED,
                };
                GenSpec::Spectrum { n, lo, hi, seed }
            }
            "fem1d" | "fem2d" | "fem3d" => {
                nargs(&[1, 2])?;
                let dim = usize::from(kind.as_bytes()[3] - b'0');
                let d = dims(parts[1], dim)?;
                let part = match parts.get(2).map(|p| p.trim().to_ascii_lowercase()) {
                    None => FemPart::Stiffness,
                    Some(p) if p == "stiffness" || p == "k" => FemPart::Stiffness,
                    Some(p) if p == "mass" || p == "m" => FemPart::Mass,
                    Some(p) => {
                        return Err(perr(format!("bad fem matrix {p:?} (stiffness or mass)")))
                    }
                };
                GenSpec::Fem {
                    dim,
                    nx: d[0],
                    ny: d.get(1).copied().unwrap_or(1),
                    nz: d.get(2).copied().unwrap_or(1),
                    part,
                }
            }
            _ => {
                return Err(perr(
                    "unknown generator (lap2d, lap3d, stencil27, aniso2d, aniso3d, spectrum, \
                     fem1d, fem2d, fem3d)"
                        .into(),
                ))
            }
        };
        spec.validate()?;
        Ok(spec)
    }
}

impl Serialize for GenSpec {
    /// Serialized as its spec string.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for GenSpec {
    /// Deserialized from a spec string.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Generates the matrix of `spec` (square, symmetric, sorted CSR).
///
/// # Errors
/// [`GenError::Invalid`] / [`GenError::TooLarge`] from [`GenSpec::validate`].
pub fn generate(spec: &GenSpec) -> Result<CsrMatrix, GenError> {
    spec.validate()?;
    let dims = spec.dims();
    Ok(match *spec {
        GenSpec::Lap2d { .. } => stencil(dims, &axis_taps(&[1.0, 1.0, 0.0])),
        GenSpec::Lap3d { .. } => stencil(dims, &axis_taps(&[1.0, 1.0, 1.0])),
        GenSpec::Aniso2d { eps, .. } => stencil(dims, &axis_taps(&[eps[0], eps[1], 0.0])),
        GenSpec::Aniso3d { eps, .. } => stencil(dims, &axis_taps(&eps)),
        GenSpec::Stencil27 { .. } => {
            let mut taps = Vec::with_capacity(27);
            for dz in -1..=1i8 {
                for dy in -1..=1i8 {
                    for dx in -1..=1i8 {
                        let center = dx == 0 && dy == 0 && dz == 0;
                        taps.push((dx, dy, dz, if center { 26.0 } else { -1.0 }));
                    }
                }
            }
            stencil(dims, &taps)
        }
        GenSpec::Spectrum { n, lo, hi, seed } => spectrum_matrix(n, lo, hi, seed),
        GenSpec::Fem { dim, part, .. } => stencil(dims, &fem_taps(dim, dims, part)),
    })
}

/// The stiffness and mass matrices `(K, M)` of a finite-element spec (either
/// part; see the module docs).
///
/// # Errors
/// [`GenError::Invalid`] for a spec that is not [`GenSpec::Fem`], else as
/// [`generate`].
pub fn fem_pair(spec: &GenSpec) -> Result<(CsrMatrix, CsrMatrix), GenError> {
    let (Some(k), Some(m)) = (
        spec.fem_part(FemPart::Stiffness),
        spec.fem_part(FemPart::Mass),
    ) else {
        return Err(GenError::Invalid {
            spec: spec.to_string(),
            reason: "not a finite-element spec (fem1d, fem2d, fem3d)".into(),
        });
    };
    Ok((generate(&k)?, generate(&m)?))
}

/// The 1-D P1 element matrices on `m` interior nodes of the unit interval,
/// `h = 1/(m+1)`: `(K₁[offset], M₁[offset])` for the offsets −1, 0, 1.
fn p1_entries(m: usize) -> ([f64; 3], [f64; 3]) {
    let h = 1.0 / (m as f64 + 1.0);
    (
        [-1.0 / h, 2.0 / h, -1.0 / h],
        [h / 6.0, 4.0 * h / 6.0, h / 6.0],
    )
}

/// Eigenvalues `(κ_j, μ_j)`, j = 1..m, of the 1-D P1 matrices of [`p1_entries`]
/// (shared eigenvectors `sin(jkπ/(m+1))`).
fn p1_eigenvalues(m: usize) -> Vec<(f64, f64)> {
    let h = 1.0 / (m as f64 + 1.0);
    (1..=m)
        .map(|j| {
            let c = (j as f64 * std::f64::consts::PI / (m as f64 + 1.0)).cos();
            // 2 − 2cos θ = 4 sin²(θ/2), exact for small θ.
            let s = (j as f64 * std::f64::consts::PI / (2.0 * (m as f64 + 1.0))).sin();
            (4.0 * s * s / h, h * (2.0 + c) / 3.0)
        })
        .collect()
}

/// Taps of the tensor-product element matrix: for the offsets `o` (the unused
/// directions only 0), K: `Σ_d K₁(o_d) Π_{e≠d} M₁(o_e)`, M: `Π_e M₁(o_e)`.
/// Sorted by `(dz, dy, dx)`; the weight of `o` and `−o` are computed alike
/// (exactly symmetric).
fn fem_taps(dim: usize, dims: [usize; 3], part: FemPart) -> Vec<(i8, i8, i8, f64)> {
    let el: Vec<([f64; 3], [f64; 3])> = (0..dim).map(|d| p1_entries(dims[d])).collect();
    let range = |d: usize| if d < dim { -1..=1i8 } else { 0..=0i8 };
    let mut taps = Vec::with_capacity(27);
    for dz in range(2) {
        for dy in range(1) {
            for dx in range(0) {
                let o = [dx, dy, dz];
                let mass = |skip: usize| -> f64 {
                    (0..dim)
                        .filter(|&e| e != skip)
                        .map(|e| el[e].1[(o[e] + 1) as usize])
                        .product()
                };
                let w = match part {
                    FemPart::Mass => mass(usize::MAX),
                    FemPart::Stiffness => (0..dim)
                        .map(|d| el[d].0[(o[d] + 1) as usize] * mass(d))
                        .sum(),
                };
                taps.push((dx, dy, dz, w));
            }
        }
    }
    taps
}

/// The eigenvalues λ of the finite-element pair `K x = λ M x` of `spec` (either
/// part), ascending: sums over the directions of the 1-D values
/// `κ_j/μ_j = 6(1 − cos θ_j)/(h²(2 + cos θ_j))`. `None` for another or an invalid spec.
pub fn generalized_eigenvalues(spec: &GenSpec) -> Option<Vec<f64>> {
    spec.validate().ok()?;
    let GenSpec::Fem { dim, .. } = *spec else {
        return None;
    };
    let dims = spec.dims();
    let mut out = vec![0.0];
    for &m in &dims[..dim] {
        let l: Vec<f64> = p1_eigenvalues(m).iter().map(|(k, m)| k / m).collect();
        out = out
            .iter()
            .flat_map(|&a| l.iter().map(move |&b| a + b))
            .collect();
    }
    out.par_sort_unstable_by(f64::total_cmp);
    Some(out)
}

/// Eigenvalues of the stiffness or the mass matrix alone (for
/// [`exact_eigenvalues`]): `Σ_d κ_d Π_{e≠d} μ_e` or `Π_e μ_e` over the index tuples.
fn fem_matrix_eigenvalues(dim: usize, dims: [usize; 3], part: FemPart) -> Vec<f64> {
    // (stiffness, mass) eigenvalue of the tensor product built direction by direction.
    let mut out = vec![(0.0, 1.0)];
    for &m in &dims[..dim] {
        let e = p1_eigenvalues(m);
        out = out
            .iter()
            .flat_map(|&(k, mm)| e.iter().map(move |&(ke, me)| (k * me + mm * ke, mm * me)))
            .collect();
    }
    out.iter()
        .map(|&(k, m)| match part {
            FemPart::Stiffness => k,
            FemPart::Mass => m,
        })
        .collect()
}

/// All eigenvalues of the generated matrix, ascending, where they are known
/// in closed form (every generator here), `None` for an invalid spec.
///
/// 1D Dirichlet Laplacian of order m: `μ_k = 4 sin²(kπ / (2(m+1)))`; Laplacians
/// and anisotropic operators are Kronecker sums `Σ e_d μ_{k_d}`; the 27-point
/// stencil is `27 - Π_d (1 + 2 cos(k_d π / (n_d+1)))`; spectrum: equispaced
/// `lo + (hi - lo) k / (n-1)`; the finite-element matrices alone: products and
/// sums of the 1-D eigenvalues (the pair's are [`generalized_eigenvalues`]).
pub fn exact_eigenvalues(spec: &GenSpec) -> Option<Vec<f64>> {
    spec.validate().ok()?;
    let [nx, ny, nz] = spec.dims();
    let mu = |m: usize| -> Vec<f64> {
        (1..=m)
            .map(|k| {
                let s = (k as f64 * std::f64::consts::PI / (2.0 * (m as f64 + 1.0))).sin();
                4.0 * s * s
            })
            .collect()
    };
    let kron_sum = |e: [f64; 3], dims: [usize; 3], used: usize| -> Vec<f64> {
        let mut out = vec![0.0];
        for d in 0..used {
            let m = mu(dims[d]);
            out = out
                .iter()
                .flat_map(|&a| m.iter().map(move |&b| a + e[d] * b))
                .collect();
        }
        out
    };
    let mut ev = match *spec {
        GenSpec::Lap2d { .. } => kron_sum([1.0, 1.0, 0.0], [nx, ny, 1], 2),
        GenSpec::Lap3d { .. } => kron_sum([1.0; 3], [nx, ny, nz], 3),
        GenSpec::Aniso2d { eps, .. } => kron_sum([eps[0], eps[1], 0.0], [nx, ny, 1], 2),
        GenSpec::Aniso3d { eps, .. } => kron_sum(eps, [nx, ny, nz], 3),
        GenSpec::Stencil27 { .. } => {
            let t = |m: usize| -> Vec<f64> {
                (1..=m)
                    .map(|k| 1.0 + 2.0 * (k as f64 * std::f64::consts::PI / (m as f64 + 1.0)).cos())
                    .collect()
            };
            let (tx, ty, tz) = (t(nx), t(ny), t(nz));
            let mut out = Vec::with_capacity(nx * ny * nz);
            for &c in &tz {
                for &b in &ty {
                    for &a in &tx {
                        out.push(27.0 - a * b * c);
                    }
                }
            }
            out
        }
        GenSpec::Spectrum { n, lo, hi, .. } => spectrum_values(n, lo, hi),
        GenSpec::Fem { dim, part, .. } => fem_matrix_eigenvalues(dim, spec.dims(), part),
    };
    ev.par_sort_unstable_by(f64::total_cmp);
    Some(ev)
}

/// Taps `(dx, dy, dz, weight)` of a 3/5/7-point axis stencil with coefficient
/// `e[d]` per direction (`e[d] = 0` skips the direction).
fn axis_taps(e: &[f64]) -> Vec<(i8, i8, i8, f64)> {
    let diag: f64 = 2.0 * e.iter().sum::<f64>();
    let mut taps = Vec::new();
    let unit = |d: usize, s: i8| -> (i8, i8, i8) {
        match d {
            0 => (s, 0, 0),
            1 => (0, s, 0),
            _ => (0, 0, s),
        }
    };
    for d in (0..3).rev() {
        if e[d] != 0.0 {
            let (x, y, z) = unit(d, -1);
            taps.push((x, y, z, -e[d]));
        }
    }
    taps.push((0, 0, 0, diag));
    for (d, &ed) in e.iter().enumerate() {
        if ed != 0.0 {
            let (x, y, z) = unit(d, 1);
            taps.push((x, y, z, -ed));
        }
    }
    taps
}

/// A grid stencil matrix. `taps` must be sorted by `(dz, dy, dx)` so that the
/// columns of every row come out increasing. Rows are filled in parallel.
fn stencil(dims: [usize; 3], taps: &[(i8, i8, i8, f64)]) -> CsrMatrix {
    let [nx, ny, nz] = dims;
    let n = nx * ny * nz;
    let inside = |c: usize, d: i8, m: usize| -> bool {
        match d {
            -1 => c > 0,
            1 => c + 1 < m,
            _ => true,
        }
    };
    let coords = |r: usize| (r % nx, (r / nx) % ny, r / (nx * ny));
    let row_len = |r: usize| {
        let (x, y, z) = coords(r);
        taps.iter()
            .filter(|t| inside(x, t.0, nx) && inside(y, t.1, ny) && inside(z, t.2, nz))
            .count()
    };
    fill_rows(n, row_len, |r, idx, val| {
        let (x, y, z) = coords(r);
        let mut k = 0;
        for &(dx, dy, dz, w) in taps {
            if inside(x, dx, nx) && inside(y, dy, ny) && inside(z, dz, nz) {
                let c = (x as isize + dx as isize)
                    + nx as isize
                        * ((y as isize + dy as isize) + ny as isize * (z as isize + dz as isize));
                idx[k] = c as u32;
                val[k] = w;
                k += 1;
            }
        }
    })
}

/// Builds an `n x n` CSR matrix whose row `r` has `row_len(r)` entries written
/// by `fill(r, cols, vals)` (sorted, unique columns). Parallel over row blocks.
fn fill_rows(
    n: usize,
    row_len: impl Fn(usize) -> usize + Sync,
    fill: impl Fn(usize, &mut [u32], &mut [f64]) + Sync,
) -> CsrMatrix {
    let lens: Vec<usize> = (0..n).into_par_iter().map(&row_len).collect();
    let mut indptr = Vec::with_capacity(n + 1);
    indptr.push(0usize);
    let mut acc = 0;
    for l in &lens {
        acc += l;
        indptr.push(acc);
    }
    let mut idx = vec![0u32; acc];
    let mut val = vec![0f64; acc];
    let block = n.div_ceil(8 * rayon::current_num_threads().max(1)).max(256);
    let mut jobs = Vec::new();
    let (mut ir, mut vr): (&mut [u32], &mut [f64]) = (&mut idx, &mut val);
    let mut lo = 0;
    while lo < n {
        let hi = (lo + block).min(n);
        let len = indptr[hi] - indptr[lo];
        let (a, rest) = std::mem::take(&mut ir).split_at_mut(len);
        ir = rest;
        let (b, rest) = std::mem::take(&mut vr).split_at_mut(len);
        vr = rest;
        jobs.push((lo, hi, a, b));
        lo = hi;
    }
    jobs.into_par_iter().for_each(|(lo, hi, a, b)| {
        let base = indptr[lo];
        for r in lo..hi {
            let (s, e) = (indptr[r] - base, indptr[r + 1] - base);
            fill(r, &mut a[s..e], &mut b[s..e]);
        }
    });
    CsrMatrix::from_parts_unchecked(n, n, indptr, idx, val)
}

/// SplitMix64: small deterministic generator for seeds, angles and shuffles.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `[0, 1)`.
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
    /// Fisher-Yates shuffle.
    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = (self.next_u64() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}

fn spectrum_values(n: usize, lo: f64, hi: f64) -> Vec<f64> {
    if n == 1 {
        return vec![lo];
    }
    (0..n)
        .map(|k| {
            // lo (1 − t) + hi t: hi − lo overflows for [−1e308, 1e308]
            let t = k as f64 / (n - 1) as f64;
            lo * (1.0 - t) + hi * t
        })
        .collect()
}

/// One layer of disjoint rotations: `partner[i]` and `(c, s)` with the
/// convention `row_p' = c row_p - s row_q`, `row_q' = s row_p + c row_q` for
/// the pair `(p, q)`, `p` the first of the pair.
struct Layer {
    partner: Vec<u32>,
    first: Vec<bool>,
    cs: Vec<(f64, f64)>,
}

impl Layer {
    fn new(n: usize, pairs: &[(usize, usize)], rng: &mut SplitMix64) -> Self {
        let mut partner: Vec<u32> = (0..n as u32).collect();
        let mut first = vec![false; n];
        let mut cs = vec![(1.0, 0.0); n];
        for &(p, q) in pairs {
            let th = rng.next_f64() * std::f64::consts::TAU;
            let (s, c) = th.sin_cos();
            partner[p] = q as u32;
            partner[q] = p as u32;
            first[p] = true;
            cs[p] = (c, s);
            cs[q] = (c, s);
        }
        Self { partner, first, cs }
    }

    /// `G A` for the layer's rotation `G` (rows combined pairwise).
    fn apply_rows(&self, a: &CsrMatrix) -> CsrMatrix {
        let n = a.nrows();
        let rows: Vec<(Vec<u32>, Vec<f64>)> = (0..n)
            .into_par_iter()
            .map(|i| {
                let q = self.partner[i] as usize;
                if q == i {
                    let (c, v) = a.row(i);
                    return (c.to_vec(), v.to_vec());
                }
                let (c, s) = self.cs[i];
                // This row = alpha * row_i + beta * row_q.
                let (alpha, beta) = if self.first[i] { (c, -s) } else { (c, s) };
                merge_rows(a.row(i), alpha, a.row(q), beta)
            })
            .collect();
        let mut indptr = Vec::with_capacity(n + 1);
        indptr.push(0);
        let mut idx = Vec::new();
        let mut val = Vec::new();
        for (c, v) in rows {
            idx.extend_from_slice(&c);
            val.extend_from_slice(&v);
            indptr.push(idx.len());
        }
        CsrMatrix::from_parts_unchecked(n, n, indptr, idx, val)
    }
}

/// `alpha * x + beta * y` of two sorted sparse rows.
fn merge_rows(
    x: (&[u32], &[f64]),
    alpha: f64,
    y: (&[u32], &[f64]),
    beta: f64,
) -> (Vec<u32>, Vec<f64>) {
    let (mut i, mut j) = (0, 0);
    let mut c = Vec::with_capacity(x.0.len() + y.0.len());
    let mut v = Vec::with_capacity(x.0.len() + y.0.len());
    while i < x.0.len() || j < y.0.len() {
        let cx = x.0.get(i).copied().unwrap_or(u32::MAX);
        let cy = y.0.get(j).copied().unwrap_or(u32::MAX);
        if cx < cy {
            c.push(cx);
            v.push(alpha * x.1[i]);
            i += 1;
        } else if cy < cx {
            c.push(cy);
            v.push(beta * y.1[j]);
            j += 1;
        } else {
            c.push(cx);
            v.push(alpha * x.1[i] + beta * y.1[j]);
            i += 1;
            j += 1;
        }
    }
    (c, v)
}

/// `Q D Qᵀ` with three rotation layers, made exactly symmetric by mirroring
/// the lower triangle.
fn spectrum_matrix(n: usize, lo: f64, hi: f64, seed: u64) -> CsrMatrix {
    let mut rng = SplitMix64(seed ^ 0x6A09_E667_F3BC_C908);
    let mut d = spectrum_values(n, lo, hi);
    rng.shuffle(&mut d);
    let mut a =
        CsrMatrix::from_parts_unchecked(n, n, (0..=n).collect(), (0..n as u32).collect(), d);
    let mut perm: Vec<usize> = (0..n).collect();
    rng.shuffle(&mut perm);
    let layers = [
        (0..n / 2).map(|k| (2 * k, 2 * k + 1)).collect::<Vec<_>>(),
        (0..n.saturating_sub(1) / 2)
            .map(|k| (2 * k + 1, 2 * k + 2))
            .collect(),
        (0..n / 2).map(|k| (perm[2 * k], perm[2 * k + 1])).collect(),
    ];
    for pairs in &layers {
        let layer = Layer::new(n, pairs, &mut rng);
        // G A Gᵀ = G (G A)ᵀ because A is symmetric.
        a = layer.apply_rows(&layer.apply_rows(&a).transpose());
    }
    // Exact symmetry: keep the lower triangle and mirror it.
    let t = a.transpose();
    fill_rows(
        n,
        |i| {
            let lower = a.row(i).0.partition_point(|&c| c as usize <= i);
            let upper = t.row(i).0.len() - t.row(i).0.partition_point(|&c| c as usize <= i);
            lower + upper
        },
        |i, idx, val| {
            let (c, v) = a.row(i);
            let k = c.partition_point(|&c| c as usize <= i);
            idx[..k].copy_from_slice(&c[..k]);
            val[..k].copy_from_slice(&v[..k]);
            // Upper part of row i = lower part of column i = row i of Aᵀ past i.
            let (tc, tv) = t.row(i);
            let m = tc.partition_point(|&c| c as usize <= i);
            idx[k..].copy_from_slice(&tc[m..]);
            val[k..].copy_from_slice(&tv[m..]);
        },
    )
}
