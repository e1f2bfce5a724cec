//! Rectangular test matrices with known singular values.
//!
//! `grad2d:N[xM][:alpha]` and `grad3d:N[xMxK][:alpha]`: the gradient (edge-node
//! incidence) matrix D of the grid graph, one row per edge (−1 at its first
//! node, +1 at its second), stacked over alpha·I when alpha > 0. DᵀD is the
//! graph Laplacian, whose eigenvalues are the sums over the axes of
//! 2 − 2cos(jπ/n), j = 0, …, n − 1 (the path graph's Neumann Laplacian), so the
//! singular values of [D; alpha·I] are the square roots of those sums plus
//! alpha². Without alpha, σ = 0 once (the constant vector).

use crate::generate::GenError;
use crate::CsrMatrix;

/// A parsed `grad2d` / `grad3d` spec.
#[derive(Debug, Clone, PartialEq)]
pub struct GradSpec {
    /// Grid points per axis (1 for the unused third axis of `grad2d`).
    pub dims: [usize; 3],
    /// The weight of the identity block (0: none).
    pub alpha: f64,
}

impl GradSpec {
    /// Parses `grad2d:N[xM][:alpha]` or `grad3d:N[xMxK][:alpha]` (one size
    /// for all axes, or one per axis).
    ///
    /// # Errors
    /// [`GenError::Parse`] for another syntax; [`GenError::Invalid`] for a zero
    /// size, a grid of one point, or an alpha that is negative or not finite.
    pub fn parse(spec: &str) -> Result<Self, GenError> {
        let bad = |reason: &str| GenError::Parse {
            spec: spec.to_string(),
            reason: reason.to_string(),
        };
        let mut parts = spec.split(':');
        let axes = match parts.next() {
            Some("grad2d") => 2,
            Some("grad3d") => 3,
            _ => {
                return Err(bad(
                    "expected grad2d:N[xM][:alpha] or grad3d:N[xMxK][:alpha]",
                ))
            }
        };
        let sizes: Vec<usize> = parts
            .next()
            .ok_or_else(|| bad("missing the grid size"))?
            .split('x')
            .map(|s| {
                s.parse::<usize>()
                    .map_err(|_| bad("grid sizes are positive integers"))
            })
            .collect::<Result<_, _>>()?;
        let dims = match (axes, sizes.as_slice()) {
            (2, [n]) => [*n, *n, 1],
            (2, [n, m]) => [*n, *m, 1],
            (3, [n]) => [*n, *n, *n],
            (3, [n, m, k]) => [*n, *m, *k],
            _ => return Err(bad("give one size, or one per axis")),
        };
        let alpha = match parts.next() {
            None => 0.0,
            Some(a) => a.parse::<f64>().map_err(|_| bad("alpha is a number"))?,
        };
        if parts.next().is_some() {
            return Err(bad("too many fields"));
        }
        let invalid = |reason: String| GenError::Invalid {
            spec: spec.to_string(),
            reason,
        };
        if dims.contains(&0) {
            return Err(invalid("grid sizes must be at least 1".into()));
        }
        if dims.iter().product::<usize>() < 2 {
            return Err(invalid("the grid needs at least two points".into()));
        }
        if !(alpha.is_finite() && alpha >= 0.0) {
            return Err(invalid(format!(
                "alpha must be finite and >= 0, got {alpha}"
            )));
        }
        let limit = u32::MAX as u128;
        let rows = dims.iter().map(|&d| d as u128).product::<u128>() * 4;
        if rows > limit {
            return Err(GenError::TooLarge {
                spec: spec.to_string(),
                rows,
                limit: u32::MAX as u64,
            });
        }
        Ok(Self { dims, alpha })
    }

    /// Grid points: the number of columns.
    pub fn ncols(&self) -> usize {
        self.dims.iter().product()
    }

    /// Edges of the grid graph.
    pub fn edges(&self) -> usize {
        let [a, b, c] = self.dims;
        (a - 1) * b * c + a * (b - 1) * c + a * b * (c - 1)
    }

    /// Rows: the edges, plus the columns when alpha > 0.
    pub fn nrows(&self) -> usize {
        self.edges() + if self.alpha > 0.0 { self.ncols() } else { 0 }
    }

    /// The matrix [D; alpha·I].
    pub fn matrix(&self) -> CsrMatrix {
        let [a, b, c] = self.dims;
        let node = |i: usize, j: usize, k: usize| (i + a * (j + b * k)) as u32;
        let mut indptr = vec![0usize];
        let mut indices = Vec::with_capacity(2 * self.edges() + self.ncols());
        let mut data = Vec::with_capacity(indices.capacity());
        let steps = [(1, 0, 0), (0, 1, 0), (0, 0, 1)];
        for (di, dj, dk) in steps {
            for k in 0..c - dk {
                for j in 0..b - dj {
                    for i in 0..a - di {
                        indices.extend([node(i, j, k), node(i + di, j + dj, k + dk)]);
                        data.extend([-1.0, 1.0]);
                        indptr.push(indices.len());
                    }
                }
            }
        }
        if self.alpha > 0.0 {
            for col in 0..self.ncols() {
                indices.push(col as u32);
                data.push(self.alpha);
                indptr.push(indices.len());
            }
        }
        CsrMatrix::from_parts_unchecked(self.nrows(), self.ncols(), indptr, indices, data)
    }

    /// Every singular value, ascending (one per column).
    pub fn singular_values(&self) -> Vec<f64> {
        let axis = |n: usize| -> Vec<f64> {
            (0..n)
                .map(|j| 2.0 - 2.0 * (std::f64::consts::PI * j as f64 / n as f64).cos())
                .collect()
        };
        let [ea, eb, ec] = self.dims.map(axis);
        let mut s = Vec::with_capacity(self.ncols());
        for z in &ec {
            for y in &eb {
                for x in &ea {
                    s.push((x + y + z + self.alpha * self.alpha).max(0.0).sqrt());
                }
            }
        }
        s.sort_by(f64::total_cmp);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_builds() {
        let g = GradSpec::parse("grad2d:3x2:0.5").unwrap();
        assert_eq!(g.dims, [3, 2, 1]);
        assert_eq!(g.edges(), 2 * 2 + 3);
        let a = g.matrix();
        assert_eq!((a.nrows(), a.ncols()), (7 + 6, 6));
        // the first edge joins nodes 0 and 1
        assert_eq!(a.get(0, 0), -1.0);
        assert_eq!(a.get(0, 1), 1.0);
        assert_eq!(a.get(7, 0), 0.5);
        for bad in [
            "grad2d",
            "grad2d:0",
            "grad2d:1",
            "grad4d:3",
            "grad2d:3:-1",
            "grad3d:2x2",
            "grad2d:3:1:2",
        ] {
            assert!(GradSpec::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn dtd_is_the_laplacian_with_its_eigenvalues() {
        let g = GradSpec::parse("grad3d:3x2x2:0.3").unwrap();
        let a = g.matrix();
        let n = a.ncols();
        // ‖A x‖² = xᵀ(L + alpha² I)x for a few x, against the trace of the sum
        let at = a.transpose();
        let mut trace = 0.0;
        for c in 0..n {
            let (_, v) = at.row(c);
            trace += v.iter().map(|x| x * x).sum::<f64>();
        }
        let s2: f64 = g.singular_values().iter().map(|s| s * s).sum();
        assert!((trace - s2).abs() < 1e-12 * s2);
        // the Laplacian's smallest eigenvalue is 0: σ_min = alpha
        assert!((g.singular_values()[0] - 0.3).abs() < 1e-15);
    }
}
