//! `BlockBicgstab` against `k` separate `Bicgstab` runs, step by step: residual norms,
//! iterates and outcomes agree (bitwise with `SelfComm` and a column-wise operator), also
//! with a different operator per column, a column stopped early (then moved out of the
//! block applications), a breakdown and restarts; 3 global sums per step whatever `k`.

mod precond_common;

use std::cell::RefCell;

use lbcomm::SelfComm;
use matrices::CsrMatrix;
use precond::krylov::{Bicgstab, BlockBicgstab, Breakdown, BreakdownKind};
use precond::preconditioners::{build, PrecondKind};
use precond::{Operator, Preconditioner};
use precond_common::{laplace3d, CsrOp};

/// A different matrix per original column. `map[s]` is the original column of block slot
/// `s`; the test sets it before every call, as the documented contract says.
struct PerColumn<'a> {
    mats: Vec<&'a CsrMatrix>,
    map: RefCell<Vec<usize>>,
}

impl PerColumn<'_> {
    fn set(&self, cols: &[usize]) {
        let mut m = self.map.borrow_mut();
        m.clear();
        m.extend_from_slice(cols);
    }
    fn all(&self, k: usize) {
        self.set(&(0..k).collect::<Vec<_>>());
    }
}

impl Operator for PerColumn<'_> {
    fn nrows(&self) -> usize {
        self.mats[0].nrows()
    }
    fn apply_block(&self, x: &[f64], y: &mut [f64], k: usize) {
        let n = self.nrows();
        let map = self.map.borrow();
        assert_eq!(
            map.len(),
            k,
            "block width differs from the announced columns"
        );
        for (s, &c) in map.iter().enumerate() {
            self.mats[c].mul_vec(&x[s * n..(s + 1) * n], &mut y[s * n..(s + 1) * n]);
        }
    }
}

/// The preconditioner applied per column, so each column's `apply` equals the block's.
fn shifted(a: &CsrMatrix, sigma: f64) -> CsrMatrix {
    let n = a.nrows();
    let mut t = Vec::new();
    for i in 0..n {
        let (c, v) = a.row(i);
        for (&c, &v) in c.iter().zip(v) {
            t.push((i, c as usize, v));
        }
        t.push((i, i, -sigma));
    }
    CsrMatrix::from_triplets(n, n, &t).unwrap()
}

fn rhs(n: usize, k: usize) -> Vec<f64> {
    (0..n * k)
        .map(|p| {
            let (i, j) = (p % n, p / n);
            1.0 + ((i * (j + 3) * 31 + 7 * j) % 17) as f64 / 17.0
        })
        .collect()
}

/// Bitwise equality: every column performs the single solver's operations in its order.
fn same(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits()
}

fn same_outcome(a: &Result<f64, Breakdown>, b: &Result<f64, Breakdown>) -> bool {
    match (a, b) {
        (Ok(x), Ok(y)) => same(*x, *y),
        (Err(x), Err(y)) => x.kind == y.kind && same(x.residual_norm, y.residual_norm),
        _ => false,
    }
}

fn assert_same_vec(what: &str, a: &[f64], b: &[f64]) {
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            x.to_bits() == y.to_bits(),
            "{what}: entry {i}: {x:e} vs {y:e}"
        );
    }
}

/// Runs `steps` lockstep steps and the single solvers side by side; `stop_at` marks
/// (column, step) done; columns are also marked done once converged to 1e-10. Returns
/// how many columns were stopped on convergence.
fn lockstep(
    mats: &[&CsrMatrix],
    m: &dyn Preconditioner,
    steps: usize,
    stop_at: Option<(usize, usize)>,
) -> usize {
    let k = mats.len();
    let n = mats[0].nrows();
    let comm = SelfComm::new();
    let op = PerColumn {
        mats: mats.to_vec(),
        map: RefCell::new(Vec::new()),
    };
    let b = rhs(n, k);
    let x0: Vec<f64> = (0..n * k).map(|p| ((p % 5) as f64) * 0.01).collect();
    let mut block = BlockBicgstab::new(n, k + 2);
    op.all(k);
    let r0 = block.start(&op, &comm, &b, Some(&x0), k).to_vec();
    let mut singles: Vec<Bicgstab> = (0..k).map(|_| Bicgstab::new(n)).collect();
    let mut stopped = vec![false; k];
    let mut converged_cols = 0;
    for c in 0..k {
        let r = singles[c].start(
            &CsrOp(mats[c]),
            &comm,
            &b[c * n..(c + 1) * n],
            Some(&x0[c * n..(c + 1) * n]),
        );
        assert!(same(r, r0[c]), "start norm of column {c}: {r} vs {}", r0[c]);
    }
    assert_eq!(block.stats().global_sums, 1);
    let mut work_steps = 0;
    let mut restarts = 0;
    for it in 0..steps {
        let active = block.active().to_vec();
        // Inactive when stopped, broken, exactly solved, or about to break down before
        // any work (then the single solver's step must report that breakdown).
        let mut early = vec![false; k];
        for c in 0..k {
            let live =
                !stopped[c] && singles[c].residual_norm() != 0.0 && block.breakdown(c).is_none();
            assert!(!active.contains(&c) || live, "step {it}: column {c} active");
            early[c] = live && !active.contains(&c);
        }
        op.set(&active);
        let out = block.step(&op, m, &comm).to_vec();
        if !active.is_empty() {
            work_steps += 1;
        }
        for c in 0..k {
            let want = if stopped[c] {
                Ok(singles[c].residual_norm())
            } else {
                singles[c].step(&CsrOp(mats[c]), m, &comm)
            };
            assert!(
                !early[c] || want.is_err(),
                "step {it}, column {c}: early skip"
            );
            assert!(
                same_outcome(&out[c], &want),
                "step {it}, column {c}: {:?} vs {want:?}",
                out[c]
            );
            assert!(same(block.residual_norm(c), singles[c].residual_norm()));
            assert_same_vec(
                &format!("step {it}, column {c}: best iterate"),
                block.solution(c),
                singles[c].solution(),
            );
        }
        // Every step with work costs 3 global sums, whatever k (a restart one).
        assert_eq!(
            block.stats().global_sums,
            1 + 3 * work_steps + restarts,
            "step {it}"
        );
        for c in 0..k {
            let converged = singles[c].residual_norm() <= 1e-10 * singles[c].b_norm();
            if !stopped[c] && (converged || stop_at == Some((c, it))) {
                converged_cols += usize::from(converged);
                stopped[c] = true;
                block.set_done(c);
                assert!(block.is_done(c));
            }
        }
        // Restart broken columns in both.
        let broken: Vec<usize> = (0..k)
            .filter(|&c| !stopped[c] && block.breakdown(c).is_some())
            .collect();
        if !broken.is_empty() {
            op.set(&broken);
            block.restart(&op, &comm, &broken);
            restarts += 1;
            for &c in &broken {
                let r = singles[c].restart(&CsrOp(mats[c]), &comm);
                assert!(same(r, block.residual_norm(c)), "restart of column {c}");
            }
        }
    }
    // True residuals of the best iterates.
    let mut tr = vec![0.0; k];
    op.all(k);
    block.true_residual_norms(&op, &comm, &mut tr);
    for c in 0..k {
        let want = singles[c].true_residual_norm(&CsrOp(mats[c]), &comm);
        assert!(same(tr[c], want), "true residual of column {c}");
    }
    converged_cols
}

#[test]
fn lockstep_equals_single_runs() {
    let a = laplace3d(7);
    let mats = [0.0, 0.3, 1.1, 2.5, 0.7]
        .iter()
        .map(|&s| shifted(&a, s))
        .collect::<Vec<_>>();
    let refs: Vec<&CsrMatrix> = mats.iter().collect();
    // The preconditioner is the same for every column (built for shift 0); the operator
    // differs per column.
    for kind in ["none", "jacobi", "ilu0", "fsai"] {
        let m = build(&kind.parse::<PrecondKind>().unwrap(), &a, 0.0).unwrap();
        let converged = lockstep(&refs, m.as_ref(), 25, Some((1, 3)));
        if kind == "ilu0" {
            // Columns converge at different steps and are stopped one by one.
            assert!(converged >= 2, "{kind}: {converged} columns converged");
        }
        lockstep(&refs[..1], m.as_ref(), 10, None);
    }
}

#[test]
fn lockstep_with_breakdown_and_restart() {
    // Column 0: a skew-symmetric operator, so (r̂, A r̂) = 0 on every fresh Krylov space:
    // a ρ breakdown on each first step, latched, then restarted. Column 1: SPD.
    let n = 40;
    let mut t = Vec::new();
    for i in 0..n - 1 {
        t.push((i, i + 1, 1.0));
        t.push((i + 1, i, -1.0));
    }
    let skew = CsrMatrix::from_triplets(n, n, &t).unwrap();
    let mut t = Vec::new();
    for i in 0..n {
        t.push((i, i, 3.0));
        if i > 0 {
            t.push((i, i - 1, -1.0));
            t.push((i - 1, i, -1.0));
        }
    }
    let spd = CsrMatrix::from_triplets(n, n, &t).unwrap();
    let m = build(&PrecondKind::None, &spd, 0.0).unwrap();
    lockstep(&[&skew, &spd, &skew], m.as_ref(), 12, None);

    // Directly: the breakdown is reported and latched, the healthy column goes on.
    let comm = SelfComm::new();
    let op = PerColumn {
        mats: vec![&skew, &spd],
        map: RefCell::new(Vec::new()),
    };
    let mut block = BlockBicgstab::new(n, 2);
    op.all(2);
    // b = ones: (r̂, A r̂) = 1 − 1 = 0 exactly for the skew column.
    block.start(&op, &comm, &vec![1.0; 2 * n], None, 2);
    assert_eq!(block.active(), &[0, 1]);
    let out = block.step(&op, m.as_ref(), &comm).to_vec();
    assert!(matches!(
        out[0],
        Err(Breakdown {
            kind: BreakdownKind::Rho,
            ..
        })
    ));
    assert!(out[1].is_ok());
    assert_eq!(block.active(), &[1]);
    op.set(block.active());
    let out2 = block.step(&op, m.as_ref(), &comm).to_vec();
    assert_eq!(out2[0], out[0]);
    assert_eq!(block.stats().global_sums, 1 + 3 + 3);
    assert_eq!(block.stats().matvecs, 2 * 2 + 2);
}

#[test]
fn nothing_active_does_nothing() {
    let a = laplace3d(3);
    let n = a.nrows();
    let comm = SelfComm::new();
    let op = CsrOp(&a);
    let m = build(&"ilu0".parse().unwrap(), &a, 0.0).unwrap();
    let mut block = BlockBicgstab::new(n, 4);
    let mut b = rhs(n, 2);
    b[n..].fill(0.0); // column 1 already exact
    block.start(&op, &comm, &b, None, 2);
    assert_eq!(block.active(), &[0]);
    block.set_done(0);
    assert!(block.active().is_empty());
    let sums = block.stats().global_sums;
    let out = block.step(&op, m.as_ref(), &comm).to_vec();
    assert_eq!(out, vec![Ok(block.residual_norm(0)), Ok(0.0)]);
    assert_eq!(block.stats().global_sums, sums);
    assert_eq!(block.stats().steps, 0);
}
