//! Complex sparse matrices: [`ComplexCsr`], its real embedding, and the
//! magnetic Laplacian generator ([`MagSpec`]), a complex Hermitian test
//! problem.
//!
//! A complex matrix A acts on x = a + ib. Stored interleaved,
//! w = (Re x₀, Im x₀, Re x₁, Im x₁, …) (the memory layout of a `c64` slice), x
//! is acted on by the real matrix [`ComplexCsr::real_embedding`] of twice the
//! order, whose 2×2 block (i, j) is [[Re aᵢⱼ, −Im aᵢⱼ], [Im aᵢⱼ, Re aᵢⱼ]].
//! For a Hermitian A the embedding is real symmetric; its eigenvalues are A's,
//! each twice (x and i·x), and every real eigenvector w of it is a complex
//! eigenvector x of A.

use std::fmt;
use std::str::FromStr;

use faer::c64;

use crate::csr::{CsrError, CsrMatrix};

/// A complex sparse matrix in CSR form: the real and imaginary parts share one
/// pattern (an entry of either part is stored in both).
#[derive(Debug, Clone, PartialEq)]
pub struct ComplexCsr {
    re: CsrMatrix,
    im: CsrMatrix,
}

impl ComplexCsr {
    /// Builds a matrix from `(row, col, value)` triplets (0-based); duplicates
    /// are summed.
    ///
    /// # Errors
    /// [`CsrError`] for an index out of range or a dimension too large.
    pub fn from_triplets(
        nrows: usize,
        ncols: usize,
        triplets: &[(usize, usize, c64)],
    ) -> Result<Self, CsrError> {
        let re: Vec<_> = triplets.iter().map(|&(i, j, v)| (i, j, v.re)).collect();
        let im: Vec<_> = triplets.iter().map(|&(i, j, v)| (i, j, v.im)).collect();
        Ok(Self {
            re: CsrMatrix::from_triplets(nrows, ncols, &re)?,
            im: CsrMatrix::from_triplets(nrows, ncols, &im)?,
        })
    }

    /// A real matrix seen as complex (zero imaginary part).
    pub fn from_real(a: &CsrMatrix) -> Self {
        let mut im = a.clone();
        im.data_mut().fill(0.0);
        Self { re: a.clone(), im }
    }

    /// Rows.
    pub fn nrows(&self) -> usize {
        self.re.nrows()
    }
    /// Columns.
    pub fn ncols(&self) -> usize {
        self.re.ncols()
    }
    /// Stored entries.
    pub fn nnz(&self) -> usize {
        self.re.nnz()
    }
    /// The real part (the pattern of the whole matrix).
    pub fn re(&self) -> &CsrMatrix {
        &self.re
    }
    /// The imaginary part (the same pattern as [`ComplexCsr::re`]).
    pub fn im(&self) -> &CsrMatrix {
        &self.im
    }

    /// Row `i`: column indices, real parts, imaginary parts.
    pub fn row(&self, i: usize) -> (&[u32], &[f64], &[f64]) {
        let (cols, re) = self.re.row(i);
        (cols, re, self.im.row(i).1)
    }

    /// Entry `(i, j)` (zero when not stored).
    pub fn get(&self, i: usize, j: usize) -> c64 {
        c64::new(self.re.get(i, j), self.im.get(i, j))
    }

    /// `y = A x`.
    ///
    /// # Panics
    /// If `x.len() != ncols` or `y.len() != nrows` (a contract violation).
    pub fn mul_vec(&self, x: &[c64], y: &mut [c64]) {
        assert_eq!(x.len(), self.ncols(), "mul_vec: x has wrong length");
        assert_eq!(y.len(), self.nrows(), "mul_vec: y has wrong length");
        for (i, yi) in y.iter_mut().enumerate() {
            let (cols, re, im) = self.row(i);
            let mut s = c64::new(0.0, 0.0);
            for ((&c, &r), &m) in cols.iter().zip(re).zip(im) {
                s += c64::new(r, m) * x[c as usize];
            }
            *yi = s;
        }
    }

    /// The conjugate transpose Aᴴ.
    pub fn adjoint(&self) -> Self {
        let mut im = self.im.transpose();
        for v in im.data_mut() {
            *v = -*v;
        }
        Self {
            re: self.re.transpose(),
            im,
        }
    }

    /// max |aᵢⱼ − conj(aⱼᵢ)| over the stored entries, relative to the largest
    /// |aᵢⱼ| (0 for an exactly Hermitian matrix, `inf` for a rectangular one).
    pub fn hermitian_defect(&self) -> f64 {
        if self.nrows() != self.ncols() {
            return f64::INFINITY;
        }
        let mut big = 0f64;
        let mut defect = 0f64;
        for i in 0..self.nrows() {
            let (cols, re, im) = self.row(i);
            for ((&j, &r), &m) in cols.iter().zip(re).zip(im) {
                let a = c64::new(r, m);
                big = big.max(a.norm());
                defect = defect.max((a - self.get(j as usize, i).conj()).norm());
            }
        }
        if big == 0.0 {
            0.0
        } else {
            defect / big
        }
    }

    /// The largest column sum of |aᵢⱼ|, ‖A‖₁ (an upper bound of ‖A‖₂ for a
    /// Hermitian matrix).
    pub fn norm1(&self) -> f64 {
        let mut col = vec![0f64; self.ncols()];
        for i in 0..self.nrows() {
            let (cols, re, im) = self.row(i);
            for ((&j, &r), &m) in cols.iter().zip(re).zip(im) {
                col[j as usize] += r.hypot(m);
            }
        }
        col.into_iter().fold(0.0, f64::max)
    }

    /// The real embedding of twice the order, interleaved (see the module
    /// documentation): block (i, j) is [[Re, −Im], [Im, Re]] of aᵢⱼ, and the
    /// parts that are exactly zero are not stored (a real entry gives two
    /// entries, not four). Real symmetric when A is Hermitian.
    ///
    /// # Errors
    /// [`CsrError::TooLarge`] when twice the order does not fit the indices.
    pub fn real_embedding(&self) -> Result<CsrMatrix, CsrError> {
        let (m, n) = (self.nrows(), self.ncols());
        if 2 * n > u32::MAX as usize {
            return Err(CsrError::TooLarge(2 * n));
        }
        let mut indptr = Vec::with_capacity(2 * m + 1);
        let mut indices = Vec::with_capacity(4 * self.nnz());
        let mut data = Vec::with_capacity(4 * self.nnz());
        indptr.push(0);
        for i in 0..m {
            let (cols, re, im) = self.row(i);
            // Row 2i: Re(Ax)ᵢ = Σ Re a·Re x − Im a·Im x;
            // row 2i+1: Im(Ax)ᵢ = Σ Im a·Re x + Re a·Im x.
            let real_row = cols.iter().zip(re).zip(im).map(|((&j, &r), &q)| (j, r, -q));
            let imag_row = cols.iter().zip(re).zip(im).map(|((&j, &r), &q)| (j, q, r));
            for row in [real_row.collect::<Vec<_>>(), imag_row.collect()] {
                for (j, on_re, on_im) in row {
                    if on_re != 0.0 {
                        indices.push(2 * j);
                        data.push(on_re);
                    }
                    if on_im != 0.0 {
                        indices.push(2 * j + 1);
                        data.push(on_im);
                    }
                }
                indptr.push(indices.len());
            }
        }
        CsrMatrix::new(2 * m, 2 * n, indptr, indices, data)
    }
}

/// The interleaved real form of complex vectors: `(Re x₀, Im x₀, …)`.
pub fn interleave(x: &[c64]) -> Vec<f64> {
    x.iter().flat_map(|z| [z.re, z.im]).collect()
}

/// The complex vectors of an interleaved real array ([`interleave`]'s inverse).
///
/// # Panics
/// If `w.len()` is odd (a contract violation).
pub fn deinterleave(w: &[f64]) -> Vec<c64> {
    assert!(w.len().is_multiple_of(2), "deinterleave: odd length");
    w.chunks_exact(2).map(|p| c64::new(p[0], p[1])).collect()
}

/// The magnetic Laplacian on a 2-D or 3-D grid with Dirichlet boundaries, a
/// complex Hermitian test problem: H = 2d·I − Σ over grid edges of
/// e^{iθᵢⱼ}, with Peierls phases for a uniform flux `flux` (in flux quanta per
/// plaquette of the xy-plane) in the Landau gauge: θ = 2π·flux·x on the edges
/// along y at column x, 0 on the others. Flux 0 is the real Laplacian
/// (`lap2d`/`lap3d`). Spelled `maglap2d:NX[xNY][:FLUX]` or
/// `maglap3d:N[xNYxNZ][:FLUX]`; the flux defaults to 0.1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MagSpec {
    /// Grid points per direction (nz = 1 in 2-D).
    pub dims: [usize; 3],
    /// Flux quanta per xy-plaquette.
    pub flux: f64,
    /// 2 or 3.
    pub dim: usize,
}

/// Default flux of [`MagSpec`].
pub const DEFAULT_FLUX: f64 = 0.1;

impl MagSpec {
    /// Rows of the matrix.
    pub fn nrows(&self) -> usize {
        self.dims.iter().product()
    }

    /// Builds the matrix.
    ///
    /// # Errors
    /// [`CsrError::TooLarge`] when the grid does not fit 32-bit indices.
    pub fn build(&self) -> Result<ComplexCsr, CsrError> {
        let [nx, ny, nz] = self.dims;
        let id = |x: usize, y: usize, z: usize| x + nx * (y + ny * z);
        let mut t = Vec::with_capacity(self.nrows() * (1 + 2 * self.dim));
        let phase = |x: usize| {
            let th = 2.0 * std::f64::consts::PI * self.flux * x as f64;
            c64::new(th.cos(), th.sin())
        };
        for z in 0..nz {
            for y in 0..ny {
                for x in 0..nx {
                    let i = id(x, y, z);
                    t.push((i, i, c64::new(2.0 * self.dim as f64, 0.0)));
                    let mut edge = |j: usize, w: c64| {
                        t.push((i, j, -w));
                        t.push((j, i, -w.conj()));
                    };
                    if x + 1 < nx {
                        edge(id(x + 1, y, z), c64::new(1.0, 0.0));
                    }
                    if y + 1 < ny {
                        edge(id(x, y + 1, z), phase(x));
                    }
                    if self.dim == 3 && z + 1 < nz {
                        edge(id(x, y, z + 1), c64::new(1.0, 0.0));
                    }
                }
            }
        }
        let n = self.nrows();
        ComplexCsr::from_triplets(n, n, &t)
    }
}

impl fmt::Display for MagSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [nx, ny, nz] = self.dims;
        if self.dim == 2 {
            write!(f, "maglap2d:{nx}x{ny}:{}", self.flux)
        } else {
            write!(f, "maglap3d:{nx}x{ny}x{nz}:{}", self.flux)
        }
    }
}

/// Why a [`MagSpec`] string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad magnetic Laplacian spec {spec:?}: {reason} (maglap2d:NX[xNY][:FLUX] or maglap3d:N[xNYxNZ][:FLUX])")]
pub struct MagSpecError {
    /// The string as given.
    pub spec: String,
    /// What is wrong.
    pub reason: String,
}

impl FromStr for MagSpec {
    type Err = MagSpecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |reason: &str| MagSpecError {
            spec: s.to_string(),
            reason: reason.to_string(),
        };
        let mut parts = s.split(':');
        let dim = match parts.next() {
            Some("maglap2d") => 2,
            Some("maglap3d") => 3,
            _ => return Err(bad("the name is maglap2d or maglap3d")),
        };
        let sizes = parts.next().ok_or_else(|| bad("missing grid size"))?;
        let sizes: Vec<usize> = sizes
            .split('x')
            .map(|t| t.parse::<usize>().ok().filter(|&v| v > 0))
            .collect::<Option<_>>()
            .ok_or_else(|| bad("grid sizes are positive integers"))?;
        let mut dims = [1usize; 3];
        match sizes.len() {
            1 => dims[..dim].fill(sizes[0]),
            k if k == dim => dims[..dim].copy_from_slice(&sizes),
            _ => return Err(bad("give one size or one per direction")),
        }
        let flux = match parts.next() {
            None => DEFAULT_FLUX,
            Some(t) => t
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite())
                .ok_or_else(|| bad("the flux is a finite number"))?,
        };
        if parts.next().is_some() {
            return Err(bad("too many fields"));
        }
        dims.iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .filter(|&n| n <= (u32::MAX / 2) as usize)
            .ok_or_else(|| bad("the grid is too large"))?;
        Ok(Self { dims, flux, dim })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dense(a: &ComplexCsr) -> faer::Mat<c64> {
        faer::Mat::from_fn(a.nrows(), a.ncols(), |i, j| a.get(i, j))
    }

    #[test]
    fn magnetic_laplacian_is_hermitian_and_its_embedding_symmetric() {
        let a: ComplexCsr = "maglap2d:5x4:0.3"
            .parse::<MagSpec>()
            .unwrap()
            .build()
            .unwrap();
        assert_eq!(a.nrows(), 20);
        assert_eq!(a.hermitian_defect(), 0.0);
        let e = a.real_embedding().unwrap();
        let t = e.transpose();
        assert_eq!(e, t);
        // The embedding applied to interleaved x is A x interleaved.
        let x: Vec<c64> = (0..20)
            .map(|k| c64::new((k as f64).sin(), (k as f64 * 0.7).cos()))
            .collect();
        let mut y = vec![c64::new(0.0, 0.0); 20];
        a.mul_vec(&x, &mut y);
        let mut w = vec![0.0; 40];
        e.mul_vec(&interleave(&x), &mut w);
        for (u, v) in deinterleave(&w).iter().zip(&y) {
            assert!((u - v).norm() < 1e-14);
        }
    }

    #[test]
    fn embedding_spectrum_is_the_hermitian_spectrum_twice() {
        let a = "maglap3d:3:0.25"
            .parse::<MagSpec>()
            .unwrap()
            .build()
            .unwrap();
        let lam = dense(&a)
            .self_adjoint_eigenvalues(faer::Side::Lower)
            .unwrap();
        let e = a.real_embedding().unwrap();
        let d = faer::Mat::from_fn(54, 54, |i, j| e.get(i, j));
        let mu = d.self_adjoint_eigenvalues(faer::Side::Lower).unwrap();
        for (k, l) in lam.iter().enumerate() {
            assert!((mu[2 * k] - l).abs() < 1e-12 && (mu[2 * k + 1] - l).abs() < 1e-12);
        }
        // Flux 0 is the real 3-D Laplacian: 6 − 2Σcos(kπ/4).
        let z = "maglap3d:3:0".parse::<MagSpec>().unwrap().build().unwrap();
        let low = dense(&z)
            .self_adjoint_eigenvalues(faer::Side::Lower)
            .unwrap()[0];
        let exact = 6.0 - 6.0 * (std::f64::consts::PI / 4.0).cos();
        assert!((low - exact).abs() < 1e-12);
    }

    #[test]
    fn specs_parse_and_refuse() {
        let s: MagSpec = "maglap2d:10".parse().unwrap();
        assert_eq!((s.dims, s.flux), ([10, 10, 1], DEFAULT_FLUX));
        let s: MagSpec = "maglap3d:4x5x6:0.5".parse().unwrap();
        assert_eq!((s.dims, s.flux, s.nrows()), ([4, 5, 6], 0.5, 120));
        assert_eq!(s.to_string().parse::<MagSpec>().unwrap(), s);
        for bad in [
            "maglap2d",
            "maglap2d:0",
            "maglap2d:3x3x3",
            "lap2d:4",
            "maglap2d:4:nan",
            "maglap2d:4:1:2",
        ] {
            assert!(bad.parse::<MagSpec>().is_err(), "{bad}");
        }
    }

    #[test]
    fn adjoint_and_defect() {
        let t = [
            (0, 1, c64::new(1.0, 2.0)),
            (1, 0, c64::new(1.0, -2.0)),
            (0, 0, c64::new(3.0, 0.0)),
        ];
        let a = ComplexCsr::from_triplets(2, 2, &t).unwrap();
        assert_eq!(a.hermitian_defect(), 0.0);
        assert_eq!(a.adjoint(), a);
        let b = ComplexCsr::from_triplets(2, 2, &[(0, 1, c64::new(1.0, 2.0))]).unwrap();
        assert!(b.hermitian_defect() > 0.9);
        assert!((a.norm1() - (3.0 + 5f64.sqrt())).abs() < 1e-14);
    }
}
