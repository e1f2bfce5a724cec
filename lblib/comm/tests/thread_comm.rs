//! ThreadComm: every collective, split, clocks and panic propagation.

use lbcomm::{ClockMode, Comm, ReduceOp, ThreadComm, ThreadConfig};

#[test]
fn results_come_back_in_rank_order() {
    let out = ThreadComm::run(5, |c| (c.rank(), c.size()));
    assert_eq!(out, (0..5).map(|r| (r, 5)).collect::<Vec<_>>());
}

#[test]
fn every_collective_on_four_ranks() {
    let out = ThreadComm::run(4, |c| {
        let r = c.rank();
        let n = c.size();
        // all_reduce f64
        let mut s = [r as f64 + 1.0, -(r as f64)];
        c.all_reduce(&mut s, ReduceOp::Sum);
        assert_eq!(s, [10.0, -6.0]);
        let mut m = [r as f64];
        c.all_reduce(&mut m, ReduceOp::Max);
        assert_eq!(m, [3.0]);
        c.all_reduce(&mut m, ReduceOp::Min);
        assert_eq!(m, [3.0]);
        let mut m = [r as f64 * 2.0];
        c.all_reduce(&mut m, ReduceOp::Min);
        assert_eq!(m, [0.0]);
        // u64
        let mut u = [r as u64 + 1, 7];
        c.all_reduce_u64(&mut u, ReduceOp::Sum);
        assert_eq!(u, [10, 28]);
        let mut u = [r as u64 * 5];
        c.all_reduce_u64(&mut u, ReduceOp::Max);
        assert_eq!(u, [15]);
        // gathers
        let mut g = vec![0.0; 2 * n];
        c.all_gather(&[r as f64, 10.0 * r as f64], &mut g);
        assert_eq!(g, vec![0.0, 0.0, 1.0, 10.0, 2.0, 20.0, 3.0, 30.0]);
        let mut gu = vec![0u64; n];
        c.all_gather_u64(&[100 + r as u64], &mut gu);
        assert_eq!(gu, vec![100, 101, 102, 103]);
        let counts: Vec<usize> = (0..n).collect();
        let mine = vec![r as f64; r];
        let mut gv = vec![0.0; 6];
        c.all_gather_v(&mine, &counts, &mut gv);
        assert_eq!(gv, vec![1.0, 2.0, 2.0, 3.0, 3.0, 3.0]);
        // broadcasts
        let mut b = if r == 2 { [4.5, 5.5] } else { [0.0, 0.0] };
        c.broadcast(&mut b, 2);
        assert_eq!(b, [4.5, 5.5]);
        let mut bu = if r == 3 { [9u64] } else { [0] };
        c.broadcast_u64(&mut bu, 3);
        assert_eq!(bu, [9]);
        // all_to_all_v: rank r sends (q+1) copies of 100r+q to rank q.
        let send_counts: Vec<usize> = (0..n).map(|q| q + 1).collect();
        let send: Vec<f64> = (0..n)
            .flat_map(|q| std::iter::repeat_n((100 * r + q) as f64, q + 1))
            .collect();
        let recv_counts = vec![r + 1; n];
        let mut recv = vec![-1.0; n * (r + 1)];
        c.all_to_all_v(&send, &send_counts, &mut recv, &recv_counts);
        let want: Vec<f64> = (0..n)
            .flat_map(|p| std::iter::repeat_n((100 * p + r) as f64, r + 1))
            .collect();
        assert_eq!(recv, want);
        c.barrier();
        true
    });
    assert_eq!(out, vec![true; 4]);
}

/// gather_v to a root and scatter_v back (rank r owns r + 1 values), on
/// threads, on one process, and through the default implementation (over
/// all_to_all_v) that a wrapper without its own gets.
#[test]
fn gather_v_and_scatter_v_round_trip() {
    /// A communicator that keeps the trait's default gather_v and scatter_v.
    struct Defaults(ThreadComm);
    impl Comm for Defaults {
        fn rank(&self) -> usize {
            self.0.rank()
        }
        fn size(&self) -> usize {
            self.0.size()
        }
        fn wtime(&self) -> f64 {
            self.0.wtime()
        }
        fn barrier(&self) {
            self.0.barrier()
        }
        fn all_reduce(&self, buf: &mut [f64], op: ReduceOp) {
            self.0.all_reduce(buf, op)
        }
        fn all_reduce_u64(&self, buf: &mut [u64], op: ReduceOp) {
            self.0.all_reduce_u64(buf, op)
        }
        fn all_gather(&self, send: &[f64], recv: &mut [f64]) {
            self.0.all_gather(send, recv)
        }
        fn all_gather_u64(&self, send: &[u64], recv: &mut [u64]) {
            self.0.all_gather_u64(send, recv)
        }
        fn all_gather_v(&self, send: &[f64], counts: &[usize], recv: &mut [f64]) {
            self.0.all_gather_v(send, counts, recv)
        }
        fn broadcast(&self, buf: &mut [f64], root: usize) {
            self.0.broadcast(buf, root)
        }
        fn broadcast_u64(&self, buf: &mut [u64], root: usize) {
            self.0.broadcast_u64(buf, root)
        }
        fn all_to_all_v(&self, s: &[f64], sc: &[usize], r: &mut [f64], rc: &[usize]) {
            self.0.all_to_all_v(s, sc, r, rc)
        }
        fn split(&self, color: usize, key: usize) -> Self {
            Defaults(self.0.split(color, key))
        }
    }
    fn round_trip<C: Comm>(c: &C, root: usize) {
        let (r, n) = (c.rank(), c.size());
        let counts: Vec<usize> = (0..n).map(|q| q + 1).collect();
        let total: usize = counts.iter().sum();
        let mut all = if r == root {
            vec![-1.0; total]
        } else {
            Vec::new()
        };
        let mine: Vec<f64> = (0..=r).map(|i| (10 * r + i) as f64).collect();
        c.gather_v(&mine, &counts, &mut all, root);
        if r == root {
            let want: Vec<f64> = (0..n)
                .flat_map(|q| (0..=q).map(move |i| (10 * q + i) as f64))
                .collect();
            assert_eq!(all, want);
            all.iter_mut().for_each(|v| *v *= 2.0);
        }
        let mut back = vec![-1.0; r + 1];
        c.scatter_v(&all, &counts, &mut back, root);
        let twice: Vec<f64> = mine.iter().map(|v| 2.0 * v).collect();
        assert_eq!(back, twice, "rank {r}, root {root}");
    }
    let out = ThreadComm::run(3, |c| {
        for root in 0..3 {
            round_trip(&c, root);
            round_trip(&Defaults(c.split(0, c.rank())), root);
        }
        true
    });
    assert_eq!(out, vec![true; 3]);
    round_trip(&lbcomm::SelfComm::new(), 0);
}

#[test]
fn split_by_color_orders_by_key_and_nests() {
    let out = ThreadComm::run(6, |c| {
        let r = c.rank();
        // colors: even / odd; key reversed so rank order flips.
        let sub = c.split(r % 2, 100 - r);
        let mut s = [r as f64];
        sub.all_reduce(&mut s, ReduceOp::Sum);
        let mut ranks = vec![0u64; sub.size()];
        sub.all_gather_u64(&[r as u64], &mut ranks);
        // nested split of the sub-communicator into singletons and pairs.
        let sub2 = sub.split(sub.rank() / 2, sub.rank());
        let mut t = [1.0];
        sub2.all_reduce(&mut t, ReduceOp::Sum);
        c.barrier();
        (sub.rank(), sub.size(), s[0], ranks, sub2.size(), t[0])
    });
    assert_eq!(out[0], (2, 3, 6.0, vec![4, 2, 0], 1, 1.0));
    assert_eq!(out[4], (0, 3, 6.0, vec![4, 2, 0], 2, 2.0));
    assert_eq!(out[1], (2, 3, 9.0, vec![5, 3, 1], 1, 1.0));
    assert_eq!(out[5], (0, 3, 9.0, vec![5, 3, 1], 2, 2.0));
    assert_eq!(out[3].0, 1);
}

#[test]
fn charge_moves_only_the_manual_clock() {
    // Manual: the charge times the slowdown; through a wrapper too.
    let out = ThreadComm::run_with(
        ThreadConfig::with_slowdowns(&[1.0, 2.0], ClockMode::Manual),
        |c| {
            // A sub-communicator shares the rank's clock.
            let d = lbcomm::Delayed::new(c.split(0, c.rank()), 0.0);
            c.charge(1.5);
            d.charge(0.5);
            c.wtime()
        },
    );
    assert_eq!(out, vec![2.0, 4.0]);
    // Virtual: the clock measures CPU time; a charge adds nothing to it.
    let out = ThreadComm::run_with(
        ThreadConfig::with_slowdowns(&[1.0], ClockMode::Virtual),
        |c| {
            c.charge(100.0);
            c.wtime()
        },
    );
    assert!(out[0] < 50.0, "{}", out[0]);
}

#[test]
fn manual_clock_is_exact_and_collectives_take_the_max() {
    let cfg = ThreadConfig {
        latency: 0.25,
        ..ThreadConfig::with_slowdowns(&[1.0, 2.0, 4.0], ClockMode::Manual)
    };
    let out = ThreadComm::run_with(cfg, |c| {
        c.advance(1.0);
        let before = c.wtime();
        c.barrier();
        let after = c.wtime();
        let sub = c.split(usize::from(c.rank() == 0), 0);
        c.advance(0.5);
        sub.barrier();
        (before, after, c.wtime())
    });
    // split adds one latency (4.5); rank 0 alone: 4.5 + 0.5 + 0.25.
    assert_eq!(out[0], (1.0, 4.25, 5.25));
    // ranks 1, 2: max(4.5 + 1.0, 4.5 + 2.0) + 0.25.
    assert_eq!(out[1], (2.0, 4.25, 6.75));
    assert_eq!(out[2], (4.0, 4.25, 6.75));
}

fn burn(iters: usize) -> f64 {
    let mut x = 0.0f64;
    for i in 0..iters {
        x += ((i as f64) * 1e-3).sin();
    }
    std::hint::black_box(x)
}

#[test]
fn virtual_clock_scales_cpu_time_by_slowdown() {
    let cfg = ThreadConfig::with_slowdowns(&[1.0, 3.0], ClockMode::Virtual);
    let out = ThreadComm::run_with(cfg, |c| {
        c.barrier();
        let cpu = lbcomm::cputime::ThreadCpuClock::current();
        let (t0, c0) = (c.wtime(), cpu.seconds());
        burn(3_000_000);
        let (t1, c1) = (c.wtime(), cpu.seconds());
        c.barrier();
        (t1 - t0, c.wtime(), c1 - c0)
    });
    // Each rank's virtual time is its slowdown times its own CPU time (comparing
    // the two ranks' CPU times instead fails when other work shares the cores).
    for (r, factor) in [(0, 1.0), (1, 3.0)] {
        let ratio = out[r].0 / (factor * out[r].2);
        assert!(
            (ratio - 1.0).abs() < 0.1,
            "rank {r}: virtual {} vs {factor} x cpu {}",
            out[r].0,
            out[r].2
        );
    }
    // After the barrier both clocks are equal to the slowest entry.
    assert!((out[0].1 - out[1].1).abs() < 1e-3 * out[1].1.max(1e-3));
}

#[test]
fn real_clock_sleeps_slow_ranks() {
    let cfg = ThreadConfig::with_slowdowns(&[1.0, 2.0], ClockMode::Real);
    let out = ThreadComm::run_with(cfg, |c| {
        let cpu = lbcomm::cputime::ThreadCpuClock::current();
        let t0 = c.wtime();
        let c0 = cpu.seconds();
        burn(2_000_000);
        let c1 = cpu.seconds();
        let t1 = c.wtime();
        (t1 - t0, c1 - c0)
    });
    let (wall, cpu) = out[1];
    // Sleeping at least (f-1)*cpu is guaranteed; wall >= cpu always.
    assert!(wall >= 1.99 * cpu, "slowed rank: wall {wall}, cpu {cpu}");
}

#[test]
fn panic_in_one_rank_is_propagated_without_deadlock() {
    let res = std::panic::catch_unwind(|| {
        ThreadComm::run(3, |c| {
            if c.rank() == 1 {
                panic!("rank one failed");
            }
            c.barrier();
            c.barrier();
        })
    });
    let err = res.expect_err("run must propagate the panic");
    let msg = err.downcast_ref::<&str>().copied().unwrap_or("");
    assert_eq!(msg, "rank one failed");
}

#[test]
fn zero_ranks_run_nothing() {
    let out: Vec<()> = ThreadComm::run(0, |_| unreachable!());
    assert!(out.is_empty());
}

#[test]
fn mismatched_collectives_panic_instead_of_hanging() {
    let res = std::panic::catch_unwind(|| {
        ThreadComm::run(2, |c| {
            if c.rank() == 0 {
                c.barrier(); // rank 1 never calls it
            }
        })
    });
    let err = res.expect_err("mismatch must be reported");
    let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("rank 1 (world) returned"), "message: {msg}");
}
