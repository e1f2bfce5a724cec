//! Singular triplets of complex sparse matrices against a dense complex SVD
//! (faer): values, residuals ‖Av − σu‖, ‖Aᴴu − σv‖ and the orthonormality of
//! U and V recomputed from what is returned.

use faer::{c64, Mat};
use jdmg::{svds_complex, SvdParams, SvdWhich};
use matrices::complex::deinterleave;
use matrices::ComplexCsr;

/// A sparse complex m×n matrix with a few entries per row, deterministic.
fn random_complex(m: usize, n: usize, seed: u64) -> ComplexCsr {
    let mut state = seed;
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 11) as f64) / ((1u64 << 53) as f64) - 0.5
    };
    let mut t = Vec::new();
    for i in 0..m {
        t.push((i, i % n, c64::new(2.0 + next(), next())));
        for _ in 0..3 {
            let j = ((next() + 0.5) * n as f64) as usize % n;
            t.push((i, j, c64::new(next(), next())));
        }
    }
    ComplexCsr::from_triplets(m, n, &t).unwrap()
}

fn check(a: &ComplexCsr, which: SvdWhich, k: usize) {
    let (m, n) = (a.nrows(), a.ncols());
    let dense = Mat::from_fn(m, n, |i, j| a.get(i, j));
    let mut exact: Vec<f64> = dense.singular_values().unwrap();
    exact.sort_by(f64::total_cmp);
    if which == SvdWhich::Largest {
        exact.reverse();
    }
    let params = SvdParams {
        nsv: k,
        which,
        tol: 1e-10,
        ..SvdParams::default()
    };
    let s = svds_complex(a, &params).unwrap();
    assert!(s.is_converged(), "{:?}", s.outcome);
    assert_eq!((s.nrows, s.ncols), (m, n));
    let anorm = exact.iter().fold(0f64, |x, y| x.max(*y));
    let us: Vec<Vec<c64>> = (0..k)
        .map(|j| deinterleave(&s.u[2 * m * j..2 * m * (j + 1)]))
        .collect();
    let vs: Vec<Vec<c64>> = (0..k)
        .map(|j| deinterleave(&s.v[2 * n * j..2 * n * (j + 1)]))
        .collect();
    let ah = a.adjoint();
    for j in 0..k {
        assert!(
            (s.values[j] - exact[j]).abs() < 1e-8 * anorm,
            "{:?} against {:?}",
            s.values,
            &exact[..k]
        );
        let mut av = vec![c64::new(0.0, 0.0); m];
        let mut ahu = vec![c64::new(0.0, 0.0); n];
        a.mul_vec(&vs[j], &mut av);
        ah.mul_vec(&us[j], &mut ahu);
        let r: f64 = av
            .iter()
            .zip(&us[j])
            .map(|(x, y)| (x - y * s.values[j]).norm_sqr())
            .sum::<f64>()
            + ahu
                .iter()
                .zip(&vs[j])
                .map(|(x, y)| (x - y * s.values[j]).norm_sqr())
                .sum::<f64>();
        assert!(
            r.sqrt() <= 1e-9 * anorm,
            "triplet {j}: residual {:e}",
            r.sqrt()
        );
        for i in 0..k {
            let want = if i == j { 1.0 } else { 0.0 };
            let gu: c64 = us[i].iter().zip(&us[j]).map(|(x, y)| x.conj() * y).sum();
            let gv: c64 = vs[i].iter().zip(&vs[j]).map(|(x, y)| x.conj() * y).sum();
            assert!(
                (gu - c64::new(want, 0.0)).norm() < 1e-8
                    && (gv - c64::new(want, 0.0)).norm() < 1e-8
            );
        }
    }
}

#[test]
fn tall_and_wide_complex_matrices_both_ends() {
    let tall = random_complex(90, 60, 7);
    check(&tall, SvdWhich::Largest, 4);
    check(&tall, SvdWhich::Smallest, 3);
    let wide = random_complex(50, 80, 11);
    check(&wide, SvdWhich::Largest, 3);
    check(&wide, SvdWhich::Smallest, 4);
}

#[test]
fn a_bad_request_is_refused() {
    let a = random_complex(10, 6, 3);
    let params = SvdParams {
        nsv: 7,
        ..SvdParams::default()
    };
    assert!(svds_complex(&a, &params).is_err());
}
