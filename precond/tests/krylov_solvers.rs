//! Step-wise BiCGSTAB, CG and GMRES(m) against known solutions, work counts,
//! breakdowns, and distributed dot products over `ThreadComm`.

mod precond_common;

use lbcomm::{SelfComm, ThreadComm};
use matrices::CsrMatrix;
use precond::krylov::{Bicgstab, BreakdownKind, Cg, Gmres, StopCriteria};
use precond::preconditioners::{build, PrecondKind};
use precond::IdentityPreconditioner;
use precond_common::{laplace3d, rel_residual, CsrOp};

/// Deterministic pseudo-random vector in [-1, 1] (xorshift64*).
fn rand_vec(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            let u = s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11;
            2.0 * (u as f64 / (1u64 << 53) as f64) - 1.0
        })
        .collect()
}

fn rel_err(x: &[f64], y: &[f64]) -> f64 {
    let d: f64 = x
        .iter()
        .zip(y)
        .map(|(a, b)| (a - b) * (a - b))
        .sum::<f64>()
        .sqrt();
    d / y.iter().map(|v| v * v).sum::<f64>().sqrt()
}

/// Nonsymmetric 2D convection-diffusion (upwind), g x g grid: 4 + c on the diagonal.
fn convection_diffusion(g: usize, c: f64) -> CsrMatrix {
    let n = g * g;
    let mut t = Vec::new();
    for j in 0..g {
        for i in 0..g {
            let r = j * g + i;
            t.push((r, r, 4.0 + c));
            if i > 0 {
                t.push((r, r - 1, -1.0 - c));
            }
            if i + 1 < g {
                t.push((r, r + 1, -1.0));
            }
            if j > 0 {
                t.push((r, r - g, -1.0));
            }
            if j + 1 < g {
                t.push((r, r + g, -1.0));
            }
        }
    }
    CsrMatrix::from_triplets(n, n, &t).unwrap()
}

const KINDS: [&str; 6] = ["none", "jacobi", "ilu0", "ilut", "spai", "fsai"];

#[test]
fn krylov_bicgstab_known_solution_all_preconditioners() {
    let a = laplace3d(10);
    let n = a.nrows();
    let xs = rand_vec(n, 1);
    let mut b = vec![0.0; n];
    a.mul_vec(&xs, &mut b);
    let comm = SelfComm::new();
    let stop = StopCriteria {
        max_steps: 500,
        rtol: 1e-10,
        atol: 0.0,
    };
    let mut solver = Bicgstab::new(n);
    let mut iters = Vec::new();
    for k in KINDS {
        let kind: PrecondKind = k.parse().unwrap();
        let m = build(&kind, &a, 0.0).unwrap();
        let res = solver.solve(&CsrOp(&a), m.as_ref(), &comm, &b, None, &stop);
        assert!(res.converged, "{k}: {res:?}");
        let rr = rel_residual(&a, solver.solution(), &b);
        assert!(rr <= 1e-10, "{k}: true residual {rr:e}");
        assert!(
            (res.true_residual_norm / res.b_norm - rr).abs() <= 1e-12,
            "{k}"
        );
        // cond(A) < 50, so the error is at most 50 x the residual.
        assert!(rel_err(solver.solution(), &xs) <= 5e-9, "{k}");
        iters.push(res.steps);
    }
    // Preconditioning helps: ILU(0), ILUT and SPAI need fewer steps than none.
    assert!(
        iters[2] < iters[0] && iters[3] <= iters[2] && iters[4] < iters[0],
        "{iters:?}"
    );
}

#[test]
fn krylov_bicgstab_step_counts_work() {
    let a = laplace3d(6);
    let n = a.nrows();
    let b = vec![1.0; n];
    let comm = SelfComm::new();
    let m = IdentityPreconditioner { n };
    let mut s = Bicgstab::new(n);
    let r0 = s.start(&CsrOp(&a), &comm, &b, None);
    assert!((r0 - (n as f64).sqrt()).abs() < 1e-12);
    assert!((s.b_norm() - (n as f64).sqrt()).abs() < 1e-12);
    let st = s.stats();
    assert_eq!(
        (st.steps, st.matvecs, st.precond_applies, st.global_sums),
        (0, 0, 0, 1)
    );
    let mut last = r0;
    for _ in 0..5 {
        last = s.step(&CsrOp(&a), &m, &comm).unwrap();
    }
    assert_eq!(last, s.residual_norm());
    let st = s.stats();
    assert_eq!(
        (st.steps, st.matvecs, st.precond_applies, st.global_sums),
        (5, 10, 10, 16)
    );
    // The true residual of the best iterate costs one matvec and one global sum.
    let t = s.true_residual_norm(&CsrOp(&a), &comm);
    assert!(t.is_finite() && t < 0.5 * r0, "{t} vs {r0}");
    let st = s.stats();
    assert_eq!((st.matvecs, st.global_sums), (11, 17));
}

#[test]
fn krylov_bicgstab_rho_breakdown_keeps_best_iterate() {
    // A = [[0,1],[1,0]], b = e1: (r̂, A r̂) = 0 at the first step.
    let a = CsrMatrix::from_triplets(2, 2, &[(0, 1, 1.0), (1, 0, 1.0)]).unwrap();
    let comm = SelfComm::new();
    let m = IdentityPreconditioner { n: 2 };
    let mut s = Bicgstab::new(2);
    // x0 = (0, 0.5): r0 = (0.5, 0), A r0 = (0, 0.5) is orthogonal to r̂ = r0.
    let x0 = [0.0, 0.5];
    let r0 = s.start(&CsrOp(&a), &comm, &[1.0, 0.0], Some(&x0));
    assert_eq!(r0, 0.5);
    let e = s.step(&CsrOp(&a), &m, &comm).unwrap_err();
    assert_eq!(e.kind, BreakdownKind::Rho);
    assert_eq!(e.residual_norm, r0);
    assert_eq!(s.solution(), &x0);
    // The breakdown is latched: no work until restart.
    let st = s.stats();
    assert_eq!(s.step(&CsrOp(&a), &m, &comm), Err(e));
    assert_eq!(s.stats(), st);
    assert_eq!(s.restart(&CsrOp(&a), &comm), 0.5);
    assert_eq!(
        s.step(&CsrOp(&a), &m, &comm).unwrap_err().kind,
        BreakdownKind::Rho
    );
    // NaN in b: non-finite breakdown, not a panic.
    let r = s.start(&CsrOp(&a), &comm, &[f64::NAN, 0.0], None);
    assert!(r.is_nan());
    assert_eq!(
        s.step(&CsrOp(&a), &m, &comm).unwrap_err().kind,
        BreakdownKind::NonFinite
    );
}

#[test]
fn krylov_cg_known_solution_and_counts() {
    let a = laplace3d(10);
    let n = a.nrows();
    let xs = rand_vec(n, 2);
    let mut b = vec![0.0; n];
    a.mul_vec(&xs, &mut b);
    let comm = SelfComm::new();
    let stop = StopCriteria {
        max_steps: 500,
        rtol: 1e-10,
        atol: 0.0,
    };
    let mut cg = Cg::new(n);
    let mut steps = Vec::new();
    for k in ["none", "jacobi", "ilu0", "fsai"] {
        let m = build(&k.parse().unwrap(), &a, 0.0).unwrap();
        let res = cg.solve(&CsrOp(&a), m.as_ref(), &comm, &b, None, &stop);
        assert!(res.converged, "{k}: {res:?}");
        assert!(rel_residual(&a, cg.solution(), &b) <= 1e-10, "{k}");
        assert!(rel_err(cg.solution(), &xs) <= 5e-9, "{k}");
        let st = res.stats;
        // start: 1 sum; first step 3 sums, then 2 per step; 1 true-residual check.
        assert_eq!(st.global_sums, 1 + 2 * st.steps + 1 + 1, "{k}: {st:?}");
        assert_eq!(st.matvecs, st.steps + 1, "{k}");
        steps.push(res.steps);
    }
    // Constant diagonal: Jacobi is a scaling and CG is invariant to it.
    assert_eq!(steps[0], steps[1]);
    assert!(steps[2] < steps[0]);
    // Unpreconditioned CG on the 10^3 Laplacian: the Chebyshev bound with cond < 49
    // gives at most ~80 steps to 1e-10.
    assert!(steps[0] <= 80, "{steps:?}");
}

#[test]
fn krylov_gmres_known_solution_nonsymmetric() {
    let a = convection_diffusion(20, 2.0);
    let n = a.nrows();
    let xs = rand_vec(n, 3);
    let mut b = vec![0.0; n];
    a.mul_vec(&xs, &mut b);
    let comm = SelfComm::new();
    let stop = StopCriteria {
        max_steps: 2000,
        rtol: 1e-10,
        atol: 0.0,
    };
    for (k, restart) in [("none", 20), ("ilu0", 20), ("ilu0", 5), ("spai", 30)] {
        let m = build(&k.parse().unwrap(), &a, 0.0).unwrap();
        let mut g = Gmres::new(n, restart);
        let res = g.solve(&CsrOp(&a), m.as_ref(), &comm, &b, None, &stop);
        assert!(res.converged, "{k}/{restart}: {res:?}");
        assert!(rel_residual(&a, g.solution(), &b) <= 1e-10, "{k}/{restart}");
        assert!(rel_err(g.solution(), &xs) <= 1e-8, "{k}/{restart}");
        // 2 sums per Arnoldi step.
        assert!(res.stats.global_sums >= 2 * res.steps, "{res:?}");
        // BiCGSTAB on the same nonsymmetric system.
        let mut bi = Bicgstab::new(n);
        let rb = bi.solve(&CsrOp(&a), m.as_ref(), &comm, &b, None, &stop);
        assert!(
            rb.converged && rel_residual(&a, bi.solution(), &b) <= 1e-10,
            "{k}: {rb:?}"
        );
    }
    // GMRES residual estimates never increase.
    let mut g = Gmres::new(n, 10);
    let m = IdentityPreconditioner { n };
    let mut prev = g.start(&CsrOp(&a), &comm, &b, None);
    for _ in 0..35 {
        let r = g.step(&CsrOp(&a), &m, &comm).unwrap();
        assert!(r <= prev * (1.0 + 1e-12), "{r} > {prev}");
        prev = r;
    }
}

/// Block-diagonal operator: each rank owns one decoupled block, so the local product is
/// exact and only the dot products are global (summation order differs from the
/// serial run, so agreement is to rounding, amplified over 15 steps).
#[test]
fn krylov_thread_comm_matches_serial() {
    let a0 = laplace3d(5);
    let mut a1 = laplace3d(5);
    a1.data_mut()
        .iter_mut()
        .enumerate()
        .for_each(|(i, v)| *v *= 1.0 + (i % 3) as f64 * 0.1);
    let n = a0.nrows();
    // Serial: the full block-diagonal matrix.
    let mut t = Vec::new();
    for (off, blk) in [(0, &a0), (n, &a1)] {
        for i in 0..n {
            let (c, v) = blk.row(i);
            for (&c, &v) in c.iter().zip(v) {
                t.push((off + i, off + c as usize, v));
            }
        }
    }
    let full = CsrMatrix::from_triplets(2 * n, 2 * n, &t).unwrap();
    let b: Vec<f64> = rand_vec(2 * n, 4);
    let kind: PrecondKind = "jacobi".parse().unwrap();
    let mut serial = Bicgstab::new(2 * n);
    let ms = build(&kind, &full, 0.0).unwrap();
    let comm = SelfComm::new();
    let mut hist_serial = vec![serial.start(&CsrOp(&full), &comm, &b, None)];
    for _ in 0..15 {
        hist_serial.push(serial.step(&CsrOp(&full), ms.as_ref(), &comm).unwrap());
    }
    let xs = serial.solution().to_vec();
    let out = ThreadComm::run(2, |c| {
        let rank = lbcomm::Comm::rank(&c);
        let blk = if rank == 0 { &a0 } else { &a1 };
        let m = build(&kind, blk, 0.0).unwrap();
        let mut s = Bicgstab::new(n);
        let mut h = vec![s.start(&CsrOp(blk), &c, &b[rank * n..(rank + 1) * n], None)];
        for _ in 0..15 {
            h.push(s.step(&CsrOp(blk), m.as_ref(), &c).unwrap());
        }
        (h, s.solution().to_vec(), s.stats())
    });
    for (rank, (h, x, st)) in out.iter().enumerate() {
        assert_eq!(st.global_sums, 1 + 3 * 15);
        for (p, q) in h.iter().zip(&hist_serial) {
            assert!((p - q).abs() <= 1e-9 * q, "rank {rank}: {p} vs {q}");
        }
        for (p, q) in x.iter().zip(&xs[rank * n..]) {
            assert!((p - q).abs() <= 1e-10, "rank {rank}");
        }
    }
}
