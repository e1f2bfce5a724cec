//! Sleep-based slowdown emulation used under mpirun.

use lbcomm::cputime::ThreadCpuClock;
use lbcomm::{Comm, SelfComm, SlowdownBasis, Slowed};

fn burn(iters: usize) -> f64 {
    let mut x = 0.0f64;
    for i in 0..iters {
        x += ((i as f64) * 1e-3).sin();
    }
    std::hint::black_box(x)
}

#[test]
fn slowed_comm_stretches_compute_by_its_factor() {
    for basis in [SlowdownBasis::CpuTime, SlowdownBasis::WallTime] {
        // The window starts when the communicator does, with no sleep before
        // it: a barrier here used to oversleep its tiny debt on a loaded
        // machine, and that credit shortened the sleep measured below (2.75 x).
        let c = Slowed::with_basis(SelfComm::new(), 3.0, basis);
        let cpu = ThreadCpuClock::current();
        let wall0 = std::time::Instant::now();
        let t0 = c.wtime();
        let c0 = cpu.seconds();
        let w0 = wall0.elapsed().as_secs_f64();
        burn(2_000_000);
        let c1 = cpu.seconds();
        let w1 = wall0.elapsed().as_secs_f64();
        c.barrier(); // pays the whole debt
        let t1 = c.wtime();
        let segment = match basis {
            SlowdownBasis::CpuTime => c1 - c0,
            SlowdownBasis::WallTime => w1 - w0,
        };
        // the debt (factor - 1) * segment is paid in full before the barrier
        // returns, and the communicator's segment starts before ours (3 % slack:
        // the clocks read the segment at slightly different instants).
        assert!(
            t1 - t0 >= 2.9 * segment,
            "{basis:?}: {} < 3 x {segment}",
            t1 - t0
        );
        assert_eq!(c.factor(), 3.0);
    }
}

#[test]
fn factor_one_does_not_sleep_and_split_keeps_the_factor() {
    let c = Slowed::new(SelfComm::new(), 1.0);
    let sub = c.split(0, 0);
    assert_eq!(sub.factor(), 1.0);
    assert_eq!((sub.rank(), sub.size()), (0, 1));
    let mut b = [2.0];
    sub.all_reduce(&mut b, lbcomm::ReduceOp::Sum);
    assert_eq!(b, [2.0]);
}
