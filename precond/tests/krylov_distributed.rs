//! The same step-wise solvers run distributed: 4 ranks as threads (`ThreadComm`), the
//! distributed SpMV (`DistCsrOperator`, halo exchange), and block-Jacobi where each rank
//! factors only its own diagonal block (`BlockJacobi::local`). The result must match the
//! serial run with the equivalent block-Jacobi preconditioner, and the gathered solution
//! must have a true relative residual <= 1e-10.

mod precond_common;

use lbcomm::{Comm, SelfComm, ThreadComm};
use matrices::partition::RowPartition;
use precond::dist::{DistCsrOperator, DistOptions};
use precond::krylov::{Bicgstab, Cg, StopCriteria};
use precond::preconditioners::{BlockJacobi, PrecondKind};
use precond_common::{laplace3d, rel_residual, rhs_ones, CsrOp};

const P: usize = 4;

#[test]
fn krylov_distributed_bicgstab_and_cg_match_serial_block_jacobi() {
    let a = laplace3d(12);
    let n = a.nrows();
    let b = rhs_ones(&a);
    let part = RowPartition::equal_rows(n, P).unwrap();
    let ranges: Vec<_> = (0..P).map(|p| part.range(p)).collect();
    let stop = StopCriteria {
        max_steps: 500,
        rtol: 1e-10,
        atol: 0.0,
    };

    // CG needs a symmetric M: ILU(0) of symmetric blocks and Jacobi are; SPAI is not, so
    // it is checked with BiCGSTAB only.
    for (kind_name, with_cg) in [("ilu0", true), ("jacobi", true), ("spai", false)] {
        let kind: PrecondKind = kind_name.parse().unwrap();
        // Serial reference with the same block-Jacobi preconditioner.
        let mserial = BlockJacobi::new(&a, &ranges, &kind, 0.0).unwrap();
        let mut s = Bicgstab::new(n);
        let ref_bi = s.solve(&CsrOp(&a), &mserial, &SelfComm::new(), &b, None, &stop);
        assert!(ref_bi.converged, "{kind_name}: {ref_bi:?}");
        let mut c = Cg::new(n);
        let ref_cg = c.solve(&CsrOp(&a), &mserial, &SelfComm::new(), &b, None, &stop);

        let out = ThreadComm::run(P, |comm| {
            let r = comm.rank();
            let rows = part.range(r);
            let local = a.row_slice(rows.start, rows.end);
            let op = DistCsrOperator::new(&local, &part, &comm, DistOptions::default()).unwrap();
            let m = BlockJacobi::local(&local, rows.start, &kind, 0.0).unwrap();
            let mut s = Bicgstab::new(rows.len());
            let bi = s.solve(&op, &m, &comm, &b[rows.clone()], None, &stop);
            let xb = s.solution().to_vec();
            let mut c = Cg::new(rows.len());
            let cg = c.solve(&op, &m, &comm, &b[rows.clone()], None, &stop);
            (bi, xb, cg, c.solution().to_vec())
        });
        let mut xb = Vec::with_capacity(n);
        let mut xc = Vec::with_capacity(n);
        for (bi, x, cg, y) in &out {
            // Every rank took the same decisions (global dot products).
            assert_eq!(bi.steps, out[0].0.steps);
            assert!(bi.converged, "{kind_name}: {bi:?}");
            assert!(cg.converged || !with_cg, "{kind_name}: {cg:?}");
            assert_eq!(bi.stats.global_sums, out[0].0.stats.global_sums);
            xb.extend_from_slice(x);
            xc.extend_from_slice(y);
        }
        // Same iteration counts as the serial run, up to rounding-order effects.
        assert!(
            out[0].0.steps.abs_diff(ref_bi.steps) <= 1,
            "{kind_name}: {} vs {}",
            out[0].0.steps,
            ref_bi.steps
        );
        assert!(
            !with_cg || out[0].2.steps.abs_diff(ref_cg.steps) <= 1,
            "{kind_name}: {} vs {}",
            out[0].2.steps,
            ref_cg.steps
        );
        assert!(rel_residual(&a, &xb, &b) <= 1e-10, "{kind_name}");
        assert!(
            !with_cg || rel_residual(&a, &xc, &b) <= 1e-10,
            "{kind_name}"
        );
    }
}
