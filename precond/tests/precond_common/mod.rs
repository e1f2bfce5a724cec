//! Shared helpers of the `krylov_*` / `precond_*` integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

use matrices::CsrMatrix;
use precond::Operator;

/// Test-only operator: serial `CsrMatrix::mul_vec` per vector.
pub struct CsrOp<'a>(pub &'a CsrMatrix);

impl Operator for CsrOp<'_> {
    fn nrows(&self) -> usize {
        self.0.nrows()
    }
    fn apply_block(&self, x: &[f64], y: &mut [f64], k: usize) {
        let n = self.0.nrows();
        for j in 0..k {
            self.0
                .mul_vec(&x[j * n..(j + 1) * n], &mut y[j * n..(j + 1) * n]);
        }
    }
}

/// 3D 7-point Dirichlet Laplacian on a `g x g x g` grid (6 on the diagonal, -1 off).
pub fn laplace3d(g: usize) -> CsrMatrix {
    let n = g * g * g;
    let mut t = Vec::with_capacity(7 * n);
    let id = |i: usize, j: usize, k: usize| (k * g + j) * g + i;
    for k in 0..g {
        for j in 0..g {
            for i in 0..g {
                let r = id(i, j, k);
                t.push((r, r, 6.0));
                if i > 0 {
                    t.push((r, id(i - 1, j, k), -1.0));
                }
                if i + 1 < g {
                    t.push((r, id(i + 1, j, k), -1.0));
                }
                if j > 0 {
                    t.push((r, id(i, j - 1, k), -1.0));
                }
                if j + 1 < g {
                    t.push((r, id(i, j + 1, k), -1.0));
                }
                if k > 0 {
                    t.push((r, id(i, j, k - 1), -1.0));
                }
                if k + 1 < g {
                    t.push((r, id(i, j, k + 1), -1.0));
                }
            }
        }
    }
    CsrMatrix::from_triplets(n, n, &t).unwrap()
}

/// The shared matrix directory: `$JDMG_MATRICES` or `../shared/matrices`. Returns `None`
/// (skip) only when `JDMG_SKIP_SHARED=1`; otherwise a missing directory fails the test.
pub fn shared_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("JDMG_MATRICES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../shared/matrices"
            ))
        });
    if dir.is_dir() {
        return Some(dir);
    }
    if std::env::var("JDMG_SKIP_SHARED").as_deref() == Ok("1") {
        eprintln!(
            "skipping: shared matrices not found at {} (JDMG_SKIP_SHARED=1)",
            dir.display()
        );
        return None;
    }
    panic!(
        "shared matrix directory {} is missing (set JDMG_MATRICES, or JDMG_SKIP_SHARED=1 to skip)",
        dir.display()
    );
}

/// Reads a shared MatrixMarket matrix (symmetric storage expanded).
pub fn read_shared(dir: &std::path::Path, name: &str) -> CsrMatrix {
    let path = dir.join(format!("{name}.mtx"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    read_mm_coordinate(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Minimal MatrixMarket coordinate reader (real/integer, general/symmetric), used until
/// the tests switch to `matrices::mm`.
pub fn read_mm_coordinate(text: &str) -> Result<CsrMatrix, String> {
    let mut lines = text.lines();
    let banner = lines.next().ok_or("empty file")?.to_ascii_lowercase();
    if !banner.starts_with("%%matrixmarket matrix coordinate") {
        return Err(format!("unsupported banner {banner:?}"));
    }
    let symmetric = banner.contains("symmetric");
    let mut data = lines.filter(|l| !l.starts_with('%') && !l.trim().is_empty());
    let size: Vec<usize> = data
        .next()
        .ok_or("no size line")?
        .split_whitespace()
        .map(|t| t.parse().map_err(|e| format!("size line: {e}")))
        .collect::<Result<_, _>>()?;
    let (nr, nc) = (size[0], size[1]);
    let mut t = Vec::with_capacity(2 * size[2]);
    for l in data {
        let mut it = l.split_whitespace();
        let i: usize = it
            .next()
            .ok_or("row")?
            .parse()
            .map_err(|e| format!("{e}"))?;
        let j: usize = it
            .next()
            .ok_or("col")?
            .parse()
            .map_err(|e| format!("{e}"))?;
        let v: f64 = it
            .next()
            .ok_or("value")?
            .parse()
            .map_err(|e| format!("{l}: {e}"))?;
        t.push((i - 1, j - 1, v));
        if symmetric && i != j {
            t.push((j - 1, i - 1, v));
        }
    }
    CsrMatrix::from_triplets(nr, nc, &t).map_err(|e| e.to_string())
}

/// `‖b − A x‖ / ‖b‖`.
pub fn rel_residual(a: &CsrMatrix, x: &[f64], b: &[f64]) -> f64 {
    let mut ax = vec![0.0; b.len()];
    a.mul_vec(x, &mut ax);
    let r: f64 = ax
        .iter()
        .zip(b)
        .map(|(p, q)| (q - p) * (q - p))
        .sum::<f64>()
        .sqrt();
    r / b.iter().map(|v| v * v).sum::<f64>().sqrt()
}

/// `b = A · ones`.
pub fn rhs_ones(a: &CsrMatrix) -> Vec<f64> {
    let mut b = vec![0.0; a.nrows()];
    a.mul_vec(&vec![1.0; a.ncols()], &mut b);
    b
}
