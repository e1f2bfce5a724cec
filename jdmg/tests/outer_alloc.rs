//! One outer iteration allocates no vector-sized buffer: the basis, its image, the
//! Ritz vectors, residuals and correction work space are sized once per solve. A
//! counting global allocator (this test binary only, the solving thread only)
//! records the bytes allocated between consecutive iteration events; after the
//! first iterations (work space set up, first locks) every iteration stays far
//! below the size of one vector, so what allocates per iteration is the small
//! dense projected problem (O(m²) for a basis of m ≤ 30 columns), not O(n).

use jdmg::ProblemSettings;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use jdmg::{solve_matrix, IterationEvent, JdParams};
use matrices::generate::{generate, GenSpec};

struct Counting;

static BYTES: AtomicUsize = AtomicUsize::new(0);
static LARGEST: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static TRACKED: Cell<bool> = const { Cell::new(false) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if TRACKED.try_with(Cell::get).unwrap_or(false) {
            BYTES.fetch_add(layout.size(), Ordering::SeqCst);
            LARGEST.fetch_max(layout.size(), Ordering::SeqCst);
        }
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if TRACKED.try_with(Cell::get).unwrap_or(false) {
            BYTES.fetch_add(new_size, Ordering::SeqCst);
            LARGEST.fetch_max(new_size, Ordering::SeqCst);
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn an_outer_iteration_allocates_no_vector() {
    let a = generate(&"lap3d:24".parse::<GenSpec>().unwrap()).unwrap();
    let n = a.nrows();
    let vector_bytes = n * std::mem::size_of::<f64>();
    let params = JdParams {
        problem: ProblemSettings {
            nev: 4,
            tol: 1e-8,
            ..Default::default()
        },
        ..JdParams::default()
    };
    // (outer iteration, bytes, largest single allocation) between two events
    let mut per_iter: Vec<(usize, usize, usize)> = Vec::new();
    let mut obs = |ev: &IterationEvent| {
        let bytes = BYTES.swap(0, Ordering::SeqCst);
        let largest = LARGEST.swap(0, Ordering::SeqCst);
        per_iter.push((ev.outer_iteration, bytes, largest));
        std::ops::ControlFlow::Continue(())
    };
    TRACKED.with(|t| t.set(true));
    let sol = solve_matrix(&a, &params, Some(&mut obs)).expect("converges");
    TRACKED.with(|t| t.set(false));
    assert_eq!(sol.nconverged(), 4);
    assert!(per_iter.len() > 10, "{} iterations", per_iter.len());
    // Iterations that lock a pair copy its vector into the locked set (amortized
    // growth); all others must not allocate anything vector-sized.
    let mut checked = 0;
    for &(it, bytes, largest) in per_iter.iter().skip(3) {
        eprintln!("outer {it}: {bytes} bytes, largest {largest} (one vector: {vector_bytes})");
        if largest < vector_bytes {
            checked += 1;
            assert!(
                bytes < vector_bytes,
                "outer {it}: {bytes} bytes allocated, one vector is {vector_bytes}"
            );
        }
    }
    let skipped = per_iter.len() - 3 - checked;
    // at most the locking iterations (nev) and the verification pass may allocate
    assert!(
        skipped <= params.problem.nev + 2,
        "{skipped} iterations allocated a vector-sized buffer"
    );
}
