//! `step()` of every solver and `apply` of every preconditioner do not allocate: a
//! counting global allocator (this test binary only) sees zero allocations across many
//! steps once `new`/`start` have run. Only allocations made by the test's own thread are
//! counted (rayon workers of the matrix generator may still be starting up elsewhere).

mod precond_common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use lbcomm::SelfComm;
use precond::krylov::{Bicgstab, BlockBicgstab, Cg, Gmres};
use precond::preconditioners::{build, BlockJacobi, PrecondKind};
use precond::Preconditioner;
use precond_common::{laplace3d, rhs_ones, CsrOp};

struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Set on the measuring thread only.
    static TRACKED: Cell<bool> = const { Cell::new(false) };
}

fn count() {
    if TRACKED.try_with(Cell::get).unwrap_or(false) {
        ALLOCS.fetch_add(1, Ordering::SeqCst);
    }
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> usize {
    ALLOCS.load(Ordering::SeqCst)
}

#[test]
fn krylov_steps_and_preconditioners_do_not_allocate() {
    TRACKED.with(|t| t.set(true));
    // The counter is live: constructing a solver allocates.
    let c0 = allocs();
    let probe = Bicgstab::new(10);
    assert!(allocs() > c0);
    drop(probe);
    let a = laplace3d(8);
    let n = a.nrows();
    let b = rhs_ones(&a);
    let comm = SelfComm::new();
    let op = CsrOp(&a);
    let kinds = ["none", "jacobi", "ilu0", "ilut", "spai", "fsai"];
    let mut precs: Vec<Box<dyn Preconditioner + Send + Sync>> = kinds
        .iter()
        .map(|k| build(&k.parse::<PrecondKind>().unwrap(), &a, 0.5).unwrap())
        .collect();
    let q = n / 3;
    precs.push(Box::new(
        BlockJacobi::new(
            &a,
            &[0..q, q..2 * q, 2 * q..n],
            &"ilu0".parse().unwrap(),
            0.5,
        )
        .unwrap(),
    ));
    let mut bi = Bicgstab::new(n);
    let mut cg = Cg::new(n);
    let mut gm = Gmres::new(n, 7);
    let mut z = vec![0.0; 2 * n];
    let rr = [b.clone(), b.clone()].concat();
    let b3: Vec<f64> = (0..3 * n).map(|p| 1.0 + (p % 7) as f64).collect();
    let mut bb = BlockBicgstab::new(n, 3);
    let mut norms = [0.0; 3];
    let mut z3 = vec![0.0; 3 * n];
    for (i, m) in precs.iter().enumerate() {
        bi.start(&op, &comm, &b, None);
        cg.start(&op, &comm, &b, None);
        gm.start(&op, &comm, &b, None);
        bb.start(&op, &comm, &b3, None, 3);
        // Blocked preconditioners grow their scratch on the first block apply of the
        // widest block only.
        m.apply_block(&b3, &mut z3, 3);
        let before = allocs();
        for _ in 0..20 {
            // Steps may legitimately stop on convergence; errors are fine too: this test
            // is about memory, not convergence.
            let _ = bi.step(&op, m.as_ref(), &comm);
            let _ = cg.step(&op, m.as_ref(), &comm);
            let _ = gm.step(&op, m.as_ref(), &comm); // crosses two GMRES(7) restarts
            let _ = bb.step(&op, m.as_ref(), &comm);
        }
        // A column marked done: the slots are permuted to keep the others first.
        bb.set_done(1);
        for _ in 0..5 {
            let _ = bb.step(&op, m.as_ref(), &comm);
        }
        bb.restart(&op, &comm, &[0, 2]);
        bb.true_residual_norms(&op, &comm, &mut norms);
        let _ = bi.true_residual_norm(&op, &comm);
        let _ = bi.restart(&op, &comm);
        let _ = gm.true_residual_norm(&op, &comm);
        m.apply_block(&rr, &mut z, 2);
        let after = allocs();
        assert_eq!(
            after - before,
            0,
            "preconditioner #{i} ({}): allocations",
            if i < kinds.len() {
                kinds[i]
            } else {
                "block-jacobi"
            }
        );
    }
}
