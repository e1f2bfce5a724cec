//! Row partitions, solve-group layouts, redistributions and halo plans on small
//! hand-checked cases, plus a simulated distributed SpMV against the serial product.

use matrices::{
    split_ranks, CsrMatrix, GroupPartition, HaloPlan, PartitionError, Redistribution, RowPartition,
    Transfer,
};

/// 1D Laplacian tridiag(-1, 2, -1) of order n.
fn lap1d(n: usize) -> CsrMatrix {
    let mut t = Vec::new();
    for i in 0..n {
        t.push((i, i, 2.0));
        if i > 0 {
            t.push((i, i - 1, -1.0));
        }
        if i + 1 < n {
            t.push((i, i + 1, -1.0));
        }
    }
    CsrMatrix::from_triplets(n, n, &t).unwrap()
}

/// 5-point Laplacian on an nx x ny grid (x fastest).
fn lap2d(nx: usize, ny: usize) -> CsrMatrix {
    let mut t = Vec::new();
    for y in 0..ny {
        for x in 0..nx {
            let i = x + nx * y;
            t.push((i, i, 4.0));
            if x > 0 {
                t.push((i, i - 1, -1.0));
            }
            if x + 1 < nx {
                t.push((i, i + 1, -1.0));
            }
            if y > 0 {
                t.push((i, i - nx, -1.0));
            }
            if y + 1 < ny {
                t.push((i, i + nx, -1.0));
            }
        }
    }
    CsrMatrix::from_triplets(nx * ny, nx * ny, &t).unwrap()
}

#[test]
fn balanced_by_nnz_hand_case() {
    // Row nnz: 1 1 1 1 8 1 1 1 1 (total 16). Targets 8 for 2 parts: boundary after
    // rows 0..4 gives 4, after 0..5 gives 12: |8-4| = 4 <= |12-8| = 4 -> boundary 4.
    let mut t = Vec::new();
    for i in 0..9 {
        t.push((i, i, 1.0));
    }
    for j in 0..9 {
        if j != 4 && t.len() < 16 {
            t.push((4, j, 1.0));
        }
    }
    let a = CsrMatrix::from_triplets(9, 9, &t).unwrap();
    assert_eq!(a.nnz(), 16);
    let p = RowPartition::balanced_by_nnz(&a, 2).unwrap();
    assert_eq!(p.offsets(), &[0, 4, 9]);
    assert_eq!(p.nnz_per_part(&a).unwrap(), vec![4, 12]);
    // Four parts, targets 4, 8, 12: boundaries 4 (nnz 4), 4 or 5 for 8 -> |8-4|=4 <= |12-8|
    // -> 4, and 12 -> row 5 exactly.
    let p4 = RowPartition::balanced_by_nnz(&a, 4).unwrap();
    assert_eq!(p4.offsets(), &[0, 4, 4, 5, 9]);
    assert_eq!(p4.owner(4), Some(2));
    assert_eq!(p4.len(1), 0);
}

#[test]
fn balanced_by_nnz_uniform_rows_is_equal_rows() {
    let a = lap1d(12);
    // nnz per row 2,3,...,3,2 (total 34); 3 parts -> targets 11.33, 22.67.
    let p = RowPartition::balanced_by_nnz(&a, 3).unwrap();
    assert_eq!(p.offsets(), &[0, 4, 8, 12]);
    assert_eq!(p.nnz_per_part(&a).unwrap(), vec![11, 12, 11]);
}

#[test]
fn weighted_by_nnz_follows_speeds() {
    let a = CsrMatrix::identity(100);
    let p = RowPartition::weighted_by_nnz(&a, &[1.0, 3.0, 0.0, 1.0]).unwrap();
    assert_eq!(p.offsets(), &[0, 20, 80, 80, 100]);
    assert_eq!(
        RowPartition::weighted_by_nnz(&a, &[1.0, -1.0]),
        Err(PartitionError::BadWeight {
            index: 1,
            value: -1.0
        })
    );
    assert!(matches!(
        RowPartition::weighted_by_nnz(&a, &[f64::NAN]),
        Err(PartitionError::BadWeight { index: 0, .. })
    ));
    assert_eq!(
        RowPartition::weighted_by_nnz(&a, &[]),
        Err(PartitionError::NoParts)
    );
    assert_eq!(
        RowPartition::balanced_by_nnz(&a, 0),
        Err(PartitionError::NoParts)
    );
    // No stored entries: rows are split instead.
    let empty = CsrMatrix::from_triplets(10, 10, &[]).unwrap();
    let p = RowPartition::weighted_by_nnz(&empty, &[1.0, 4.0]).unwrap();
    assert_eq!(p.offsets(), &[0, 2, 10]);
}

#[test]
fn split_ranks_and_group_partition() {
    assert_eq!(split_ranks(5, 2).unwrap(), vec![vec![0, 1, 2], vec![3, 4]]);
    assert_eq!(
        split_ranks(4, 4).unwrap(),
        vec![vec![0], vec![1], vec![2], vec![3]]
    );
    assert_eq!(
        split_ranks(2, 3),
        Err(PartitionError::BadGroupCount {
            nranks: 2,
            ngroups: 3
        })
    );
    assert_eq!(
        split_ranks(2, 0),
        Err(PartitionError::BadGroupCount {
            nranks: 2,
            ngroups: 0
        })
    );

    let rows = RowPartition::equal_rows(6, 2).unwrap();
    let g = GroupPartition::new(rows.clone(), vec![3, 1], 4).unwrap();
    assert_eq!(g.rank_of_part(0), 3);
    assert_eq!(g.part_of_rank(1), Some(1));
    assert_eq!(g.part_of_rank(0), None);
    assert_eq!(g.rows_of_rank(3), 0..3);
    assert_eq!(g.rows_of_rank(2), 0..0);
    assert!(matches!(
        GroupPartition::new(rows.clone(), vec![1, 1], 4),
        Err(PartitionError::BadRankMap { .. })
    ));
    assert!(matches!(
        GroupPartition::new(rows.clone(), vec![0, 4], 4),
        Err(PartitionError::BadRankMap { .. })
    ));
    assert!(matches!(
        GroupPartition::new(rows, vec![0], 4),
        Err(PartitionError::BadRankMap { .. })
    ));
}

#[test]
fn redistribution_fine_to_group_hand_case() {
    // Fine: 6 rows over ranks 0,1,2 as [0,2) [2,4) [4,6). Group on ranks 1,2: [0,3) [3,6).
    let fine = GroupPartition::all(RowPartition::equal_rows(6, 3).unwrap());
    let group =
        GroupPartition::new(RowPartition::equal_rows(6, 2).unwrap(), vec![1, 2], 3).unwrap();
    let rd = Redistribution::between(&fine, &group).unwrap();
    let t = |src, dst, lo, hi, so, d| Transfer {
        src,
        dst,
        rows: lo..hi,
        src_offset: so,
        dst_offset: d,
    };
    assert_eq!(
        rd.transfers(),
        &[
            t(0, 1, 0, 2, 0, 0),
            t(1, 1, 2, 3, 0, 2),
            t(1, 2, 3, 4, 1, 0),
            t(2, 2, 4, 6, 0, 1)
        ]
    );
    assert_eq!(rd.send_counts(1), vec![0, 1, 1]);
    assert_eq!(rd.recv_counts(2), vec![0, 1, 2]);
    assert_eq!(rd.to_len(0), 0);
    assert_eq!(rd.from_len(0), 2);

    // Simulate the all-to-all for k = 2 vectors: x_j[global i] = 10 j + i.
    let k = 2;
    let mut sends: Vec<Vec<f64>> = Vec::new();
    for r in 0..3 {
        let rows = fine.rows_of_rank(r);
        let n = rows.len();
        let x: Vec<f64> = (0..k)
            .flat_map(|j| rows.clone().map(move |i| (10 * j + i) as f64))
            .collect();
        let mut s = vec![0.0; rd.send_counts(r).iter().sum::<usize>() * k];
        rd.pack(r, &x, k, &mut s);
        assert_eq!(x.len(), n * k);
        sends.push(s);
    }
    for r in 0..3 {
        // Gather what every source sends to r, in source order.
        let mut recv = Vec::new();
        for (src, s) in sends.iter().enumerate() {
            let mut off = 0;
            for dst in 0..3 {
                let c = rd.send_counts(src)[dst] * k;
                if dst == r {
                    recv.extend_from_slice(&s[off..off + c]);
                }
                off += c;
            }
        }
        let rows = group.rows_of_rank(r);
        let mut y = vec![f64::NAN; rows.len() * k];
        rd.unpack(r, &recv, k, &mut y);
        let want: Vec<f64> = (0..k)
            .flat_map(|j| rows.clone().map(move |i| (10 * j + i) as f64))
            .collect();
        assert_eq!(y, want, "rank {r}");
    }
    // Back from the group to the fine layout.
    let back = Redistribution::between(&group, &fine).unwrap();
    assert_eq!(back.transfers().len(), 4);
    assert_eq!(back.send_counts(0), vec![0, 0, 0]);
    let other = GroupPartition::all(RowPartition::equal_rows(7, 3).unwrap());
    assert!(matches!(
        Redistribution::between(&fine, &other),
        Err(PartitionError::RowMismatch { .. })
    ));
}

#[test]
fn halo_plan_tridiagonal_hand_case() {
    let a = lap1d(6);
    let part = RowPartition::equal_rows(6, 3).unwrap();
    let plans = HaloPlan::build_all(&a, &part).unwrap();
    let p1 = &plans[1];
    assert_eq!(p1.owned(), 2..4);
    assert_eq!(p1.ghosts(), &[1, 4]);
    assert_eq!(p1.requests_to(0), &[1]);
    assert_eq!(p1.requests_to(2), &[4]);
    assert_eq!(p1.recv_counts(), vec![1, 0, 1]);
    assert_eq!(p1.sends_to(0), &[0]); // global row 2
    assert_eq!(p1.sends_to(2), &[1]); // global row 3
    assert_eq!(p1.send_counts(), vec![1, 0, 1]);
    // Local rows in [owned 2, 3 | ghost 1, ghost 4] numbering.
    let l = p1.local();
    assert_eq!((l.nrows(), l.ncols()), (2, 4));
    assert_eq!(l.indptr(), &[0, 3, 6]);
    assert_eq!(l.indices(), &[0, 1, 2, 0, 1, 3]);
    assert_eq!(l.data(), &[2.0, -1.0, -1.0, -1.0, 2.0, -1.0]);
    // End parts.
    assert_eq!(plans[0].ghosts(), &[2]);
    assert_eq!(plans[0].sends_to(1), &[1]);
    assert_eq!(plans[2].ghosts(), &[3]);
    // Row 4 reads global (3, 4, 5) = (ghost, owned, owned): owned first after renumbering.
    assert_eq!(plans[2].local().indices(), &[0, 1, 2, 0, 1]);
    assert_eq!(plans[2].local().data(), &[2.0, -1.0, -1.0, -1.0, 2.0]);
}

#[test]
fn halo_plan_errors() {
    let a = lap1d(6);
    let part = RowPartition::equal_rows(6, 3).unwrap();
    let rows = a.row_slice(2, 4);
    assert_eq!(
        HaloPlan::new(&rows, &part, 3),
        Err(PartitionError::NoSuchPart { part: 3, nparts: 3 })
    );
    assert_eq!(
        HaloPlan::new(&a.row_slice(0, 3), &part, 0),
        Err(PartitionError::RowMismatch {
            what: "local rows",
            got: 3,
            expected: 2
        })
    );
    let mut p = HaloPlan::new(&rows, &part, 1).unwrap();
    assert_eq!(
        p.set_sends(&[vec![2usize], vec![], vec![5]]),
        Err(PartitionError::NotOwned {
            part: 1,
            row: 5,
            lo: 2,
            hi: 4
        })
    );
    assert_eq!(
        p.set_sends(&[Vec::<usize>::new()]),
        Err(PartitionError::RequestCount {
            got: 1,
            expected: 3
        })
    );
    let rect = CsrMatrix::from_triplets(6, 5, &[(0, 0, 1.0)]).unwrap();
    assert!(matches!(
        HaloPlan::build_all(&rect, &part),
        Err(PartitionError::NotSquare { .. })
    ));
}

/// Distributed SpMV simulated with the plans (exchange done by hand) equals `A x`.
#[test]
fn halo_plans_reproduce_serial_product() {
    let a = lap2d(9, 7);
    let n = a.nrows();
    let x: Vec<f64> = (0..n)
        .map(|i| ((i * 37 % 11) as f64) - 5.0 + 0.1 * i as f64)
        .collect();
    let mut want = vec![0.0; n];
    a.mul_vec(&x, &mut want);
    for parts in [1, 2, 3, 5] {
        let part = RowPartition::balanced_by_nnz(&a, parts).unwrap();
        let plans = HaloPlan::build_all(&a, &part).unwrap();
        for p in 0..parts {
            let own = part.range(p);
            let mut xl: Vec<f64> = x[own.clone()].to_vec();
            // Ghost values come from the owners' send lists, in source-rank order.
            for src in 0..parts {
                let lo = part.range(src).start;
                let sent: Vec<f64> = plans[src].sends_to(p).iter().map(|&i| x[lo + i]).collect();
                assert_eq!(sent.len(), plans[p].requests_to(src).len());
                xl.extend(sent);
            }
            let mut y = vec![0.0; own.len()];
            plans[p].local().mul_vec(&xl, &mut y);
            for (i, g) in own.clone().enumerate() {
                assert!(
                    (y[i] - want[g]).abs() <= 1e-14 * want[g].abs().max(1.0),
                    "part {p} row {g}"
                );
            }
        }
        // Boundary volume of a 9x7 grid split by rows of x-lines: each cut exchanges one line.
        let total_ghosts: usize = plans.iter().map(|pl| pl.nghost()).sum();
        assert!(parts == 1 || total_ghosts > 0);
        if parts == 1 {
            assert_eq!(total_ghosts, 0);
        }
    }
}
