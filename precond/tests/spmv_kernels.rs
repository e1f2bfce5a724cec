//! Shared-memory SpMV kernels against the reference `CsrMatrix::mul_vec`.

use matrices::CsrMatrix;
use precond::spmv::{spmv_block, CsrOperator, SpmvError};
use precond::Operator;

mod spmv_common;

use spmv_common::{check, random_block, random_sparse};

#[test]
fn serial_block_all_k_random() {
    let a = random_sparse(300, 9, 7);
    for k in 1..=11 {
        let x = random_block(300, k, 100 + k as u64);
        let mut y = vec![f64::NAN; 300 * k];
        spmv_block(&a, &x, &mut y, k);
        check(&a, &x, &y, k);
    }
}

#[test]
fn threaded_operator_matches_reference() {
    let a = random_sparse(517, 12, 3);
    let l = spmv_common::stencil(9, 8, 7, false);
    let s = spmv_common::stencil(7, 7, 7, true);
    for m in [&a, &l, &s] {
        for threads in [1, 2, 3] {
            let op = CsrOperator::new(m, threads).unwrap();
            assert_eq!(op.threads(), threads);
            assert_eq!(op.nrows(), m.nrows());
            for k in [1, 2, 3, 4, 5, 8, 13] {
                let x = random_block(m.nrows(), k, k as u64 * 31 + threads as u64);
                let mut y = vec![f64::NAN; m.nrows() * k];
                op.apply_block(&x, &mut y, k);
                check(m, &x, &y, k);
            }
        }
    }
}

#[test]
fn exact_values_on_stencil27() {
    // 27-point stencil 26 I - neighbours: A * ones = 26 - (#neighbours); interior rows 0,
    // a corner of the 4^3 grid has 7 neighbours -> 19.
    let a = spmv_common::stencil(4, 4, 4, true);
    let op = CsrOperator::new(&a, 2).unwrap();
    let x = vec![1.0; 64 * 2];
    let mut y = vec![0.0; 64 * 2];
    op.apply_block(&x, &mut y, 2);
    assert_eq!(y[0], 19.0);
    assert_eq!(y[1 + 4 + 16], 0.0); // interior point (1,1,1)
    assert_eq!(y[64], 19.0);
    assert_eq!(y.iter().sum::<f64>(), 2.0 * a.data().iter().sum::<f64>());
}

#[test]
fn more_threads_than_rows_and_empty_matrix() {
    let a = CsrMatrix::identity(3);
    let op = CsrOperator::new(&a, 8).unwrap();
    let x = [1.0, 2.0, 3.0];
    let mut y = [0.0; 3];
    op.apply(&x, &mut y);
    assert_eq!(y, x);
    let e = CsrMatrix::identity(0);
    let op = CsrOperator::new(&e, 2).unwrap();
    op.apply_block(&[], &mut [], 4);
}

#[test]
fn typed_errors() {
    let a = CsrMatrix::from_triplets(3, 4, &[(0, 3, 1.0)]).unwrap();
    assert_eq!(
        CsrOperator::new(&a, 1).err(),
        Some(SpmvError::NotSquare { nrows: 3, ncols: 4 })
    );
    assert_eq!(
        CsrOperator::new(&CsrMatrix::identity(2), 0).err(),
        Some(SpmvError::ZeroThreads)
    );
}

#[test]
fn huge_page_advice_keeps_contents() {
    // 600k rows: 4.8 MB of values, so at least one aligned 2 MiB page exists.
    let n = 600_000;
    let t: Vec<(usize, usize, f64)> = (0..n).map(|i| (i, i, 1.0 + (i % 13) as f64)).collect();
    let a = CsrMatrix::from_triplets(n, n, &t).unwrap();
    let before = a.clone();
    let advised = precond::advise_huge_pages(&a);
    assert!(advised <= a.memory_bytes());
    assert_eq!(a, before);
    let mut x = precond::huge_page_vec(n);
    assert!(x.iter().all(|&v| v == 0.0));
    x.iter_mut().enumerate().for_each(|(i, v)| *v = i as f64);
    let mut y = precond::huge_page_vec(n);
    CsrOperator::new(&a, 2).unwrap().apply(&x, &mut y);
    assert_eq!(y[12], 12.0 * 13.0);
    assert_eq!(y[13], 13.0);
    assert!(precond::huge_page_vec(0).is_empty());
}

#[test]
fn results_are_bitwise_independent_of_threads_and_repeats() {
    // Each row is summed by one thread in a fixed order, whichever thread claims its
    // block: products must be bitwise identical for 1, 2 and 4 threads, every time.
    let a = random_sparse(3000, 10, 21);
    for k in [1, 3, 4] {
        let x = random_block(3000, k, 77 + k as u64);
        let mut want = vec![0.0; 3000 * k];
        CsrOperator::new(&a, 1)
            .unwrap()
            .apply_block(&x, &mut want, k);
        check(&a, &x, &want, k);
        for threads in [2, 4] {
            let op = CsrOperator::new(&a, threads).unwrap();
            let mut y = vec![0.0; 3000 * k];
            for _ in 0..50 {
                y.fill(f64::NAN);
                op.apply_block(&x, &mut y, k);
                assert!(y.iter().zip(&want).all(|(u, v)| u.to_bits() == v.to_bits()));
            }
        }
    }
}
