//! The §4 imbalance metric, exact on the manual clock.

use lblib::{ClockMode, Comm, ImbalanceReport, LbError, ThreadComm, ThreadConfig, Traced};

#[test]
fn imbalance_of_fixed_work_on_speeds_1_2_4() {
    // Each rank computes 1 s of nominal work per iteration: 1, 2, 4 s at slowdowns 1, 2, 4.
    for latency in [0.0, 0.5] {
        let cfg = ThreadConfig {
            latency,
            ..ThreadConfig::with_slowdowns(&[1.0, 2.0, 4.0], ClockMode::Manual)
        };
        let out = ThreadComm::run_with(cfg, |c| {
            let t = Traced::new(c);
            {
                let _g = t.label_scope("phase");
                for _ in 0..2 {
                    t.inner().advance(1.0);
                    t.barrier();
                }
            }
            t.inner().advance(1.0);
            t.barrier();
            t.report().unwrap()
        });
        let rep = &out[0];
        assert!(
            out.iter().all(|r| r == rep),
            "report identical on every rank"
        );
        assert_eq!(rep.ranks, 3);
        assert_eq!(rep.calls, 3);
        // waits: 3, 2, 0 per call; wall = 3 × (4 + latency) per rank.
        assert_eq!(rep.imbalance_seconds_total, 15.0);
        assert_eq!(rep.wall_seconds_total, 3.0 * 3.0 * (4.0 + latency));
        let expect = 100.0 * 15.0 / (9.0 * (4.0 + latency));
        assert!((rep.imbalance_percent - expect).abs() < 1e-12);
        let phase = rep.label("phase").unwrap();
        assert_eq!((phase.calls, phase.imbalance_seconds), (2, 10.0));
        let barrier = rep.label("barrier").unwrap();
        assert_eq!((barrier.calls, barrier.imbalance_seconds), (1, 5.0));
        assert!(
            (phase.imbalance_percent + barrier.imbalance_percent - rep.imbalance_percent).abs()
                < 1e-12
        );
        let per_rank: Vec<f64> = rep.per_rank.iter().map(|r| r.imbalance_seconds).collect();
        assert_eq!(per_rank, vec![9.0, 6.0, 0.0]);
        let json = serde_json::to_string(rep).unwrap();
        let back: ImbalanceReport = serde_json::from_str(&json).unwrap();
        assert_eq!(back.per_rank, rep.per_rank);
        assert_eq!(back.per_label.len(), 2);
        assert!((back.imbalance_percent - rep.imbalance_percent).abs() < 1e-12);
    }
    // latency 0: 15 / 36 = 41.67 %, the theoretical Σ(max − t_i)/Σ max = (3+2+0)/12.
}

#[test]
fn paused_calls_are_not_counted_and_mismatch_is_an_error() {
    let out = ThreadComm::run_with(
        ThreadConfig::with_slowdowns(&[1.0, 3.0], ClockMode::Manual),
        |c| {
            let t = Traced::new(c);
            t.inner().advance(1.0);
            {
                let _p = t.pause_scope();
                t.barrier(); // intra-group style call, not traced
            }
            t.inner().advance(1.0);
            t.all_reduce(&mut [1.0], lblib::ReduceOp::Sum);
            let ok = t.report().unwrap();
            // now rank 1 traces one call that rank 0 does not
            if t.rank() == 0 {
                t.pause();
            }
            t.barrier();
            t.resume();
            (ok, t.report().unwrap_err())
        },
    );
    let (rep, err) = &out[0];
    assert_eq!(rep.calls, 1);
    // paused barrier synchronizes both at 3; traced all_reduce: rank 0 enters at 4,
    // rank 1 at 6, so 2 s wasted over 2 × 6 s of wall-clock time.
    assert_eq!(rep.imbalance_seconds_total, 2.0);
    assert_eq!(rep.wall_seconds_total, 12.0);
    assert!((rep.imbalance_percent - 100.0 / 6.0).abs() < 1e-12);
    assert_eq!(*err, LbError::CallCountMismatch { counts: vec![1, 2] });
    assert_eq!(out[1].1, *err);
}

#[test]
fn every_call_is_traced_with_its_name() {
    let out = ThreadComm::run_with(
        ThreadConfig::with_slowdowns(&[1.0, 2.0], ClockMode::Manual),
        |c| {
            let t = Traced::new(c);
            let n = t.size();
            let mut f = [1.0];
            let mut u = [1u64];
            let mut g = vec![0.0; n];
            let mut gu = vec![0u64; n];
            t.all_reduce(&mut f, lblib::ReduceOp::Max);
            t.all_reduce_u64(&mut u, lblib::ReduceOp::Sum);
            t.all_gather(&[1.0], &mut g);
            t.all_gather_u64(&[1], &mut gu);
            t.all_gather_v(&[1.0], &[1, 1], &mut g);
            t.broadcast(&mut f, 0);
            t.broadcast_u64(&mut u, 1);
            t.all_to_all_v(&[1.0, 2.0], &[1, 1], &mut g, &[1, 1]);
            t.gather_v(&[1.0], &[1, 1], &mut g, 0);
            t.scatter_v(&[1.0, 2.0], &[1, 1], &mut g, 1);
            t.inner().advance(1.0);
            let sub = t.split(0, t.rank());
            t.barrier();
            assert_eq!(sub.calls(), 0);
            assert_eq!(u[0], 2);
            t.report().unwrap()
        },
    );
    let names: Vec<&str> = out[0].per_label.iter().map(|l| l.label.as_str()).collect();
    assert_eq!(
        names,
        vec![
            "all_reduce",
            "all_reduce_u64",
            "all_gather",
            "all_gather_u64",
            "all_gather_v",
            "broadcast",
            "broadcast_u64",
            "all_to_all_v",
            "gather_v",
            "scatter_v",
            "split",
            "barrier"
        ]
    );
    assert_eq!(out[0].label("split").unwrap().imbalance_seconds, 1.0);
    assert_eq!(out[0].imbalance_seconds_total, 1.0);
}
