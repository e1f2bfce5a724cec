//! Test matrices shared by the SpMV tests (kept local so the tests stand alone).
#![allow(dead_code)]

use matrices::CsrMatrix;

/// xorshift64* in [0, 1).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// 3D grid operator on nx x ny x nz points (x fastest): the 7-point Laplacian (6 on
/// the diagonal, -1 per face neighbour) or, with `full`, the 27-point stencil (26 on the
/// diagonal, -1 per neighbour).
pub fn stencil(nx: usize, ny: usize, nz: usize, full: bool) -> CsrMatrix {
    let n = nx * ny * nz;
    let mut t = Vec::new();
    for z in 0..nz as i64 {
        for y in 0..ny as i64 {
            for x in 0..nx as i64 {
                let i = (x + nx as i64 * (y + ny as i64 * z)) as usize;
                for dz in -1..=1i64 {
                    for dy in -1..=1i64 {
                        for dx in -1..=1i64 {
                            let d = dx.abs() + dy.abs() + dz.abs();
                            if !full && d > 1 {
                                continue;
                            }
                            let (a, b, c) = (x + dx, y + dy, z + dz);
                            if a < 0
                                || b < 0
                                || c < 0
                                || a >= nx as i64
                                || b >= ny as i64
                                || c >= nz as i64
                            {
                                continue;
                            }
                            let j = (a + nx as i64 * (b + ny as i64 * c)) as usize;
                            let v = if d == 0 {
                                if full {
                                    26.0
                                } else {
                                    6.0
                                }
                            } else {
                                -1.0
                            };
                            t.push((i, j, v));
                        }
                    }
                }
            }
        }
    }
    CsrMatrix::from_triplets(n, n, &t).unwrap()
}

/// Random square sparse matrix: about `per_row` entries per row, rows of varying
/// length (some empty), values in [-1, 1).
pub fn random_sparse(n: usize, per_row: usize, seed: u64) -> CsrMatrix {
    let mut rng = Rng(seed);
    let mut t = Vec::new();
    for i in 0..n {
        let len = (rng.next() * (2 * per_row) as f64) as usize;
        for _ in 0..len {
            let j = (rng.next() * n as f64) as usize;
            t.push((i, j, 2.0 * rng.next() - 1.0));
        }
    }
    CsrMatrix::from_triplets(n, n, &t).unwrap()
}

/// A block of `n * k` values in [-1, 1).
pub fn random_block(n: usize, k: usize, seed: u64) -> Vec<f64> {
    let mut rng = Rng(seed);
    (0..n * k).map(|_| 2.0 * rng.next() - 1.0).collect()
}

/// Asserts y == A x column by column (`x` has `k` columns of length `ncols`), entrywise
/// to 1e-14 relative to Σ_j |a_ij x_j|.
pub fn check(a: &CsrMatrix, x: &[f64], y: &[f64], k: usize) {
    let (n, m) = (a.nrows(), a.ncols());
    for j in 0..k {
        let xj = &x[j * m..(j + 1) * m];
        let mut want = vec![0.0; n];
        a.mul_vec(xj, &mut want);
        for i in 0..n {
            let (c, v) = a.row(i);
            let scale: f64 = c
                .iter()
                .zip(v)
                .map(|(&c, &v)| (v * xj[c as usize]).abs())
                .sum();
            let d = (y[j * n + i] - want[i]).abs();
            assert!(
                d <= 1e-14 * scale.max(f64::MIN_POSITIVE),
                "vec {j} row {i}: {} vs {}",
                y[j * n + i],
                want[i]
            );
        }
    }
}
