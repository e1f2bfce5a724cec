//! The real tiled LU (faer tile kernels on worker threads, static BC / BCE / RS
//! tile owners, the 𝔇(M) priorities) and the measured GEMM rates.

use hetdense::sched::measure::{measure_gemm_rates, relative_speeds, MeasureParams};
use hetdense::sched::taskgraph::{predict_makespan, run_tiled_lu, LuRunParams};
use hetdense::sched::tiles::*;
use lbcomm::ClockMode;

#[test]
fn tiled_lu_is_backward_stable_on_every_allocation() {
    let n = 6;
    let d = vec![1.0; n * n];
    let c = KernelCosts::default();
    let w = tile_weights(&d, n, Op::Lu, &c);
    let speeds = [1.0, 0.5];
    let maps = [
        block_cyclic(n, 2).unwrap(),
        block_cyclic_extended(&w, n, &speeds, 2.0, BceGrid::Best).unwrap(),
        random_subsets(&w, n, &speeds, 2.0, &RsParams::default()).unwrap(),
    ];
    let params = LuRunParams {
        tile: 16,
        repeats: vec![1, 2],
        seed: 3,
    };
    let dag = TileDag::lu(n);
    for m in &maps {
        let run = run_tiled_lu(m, &c, &params).unwrap();
        assert!(run.backward_error < 1e-14, "{}", run.backward_error);
        assert_eq!(run.records.len(), dag.tasks.len());
        // Every task ran on the owner of its tile, after all its predecessors.
        for r in &run.records {
            let t = dag.tasks[r.task];
            assert_eq!(r.worker, m.at(t.i, t.j));
            for &p in &dag.preds[r.task] {
                assert!(run.records[p as usize].end <= r.start);
            }
        }
        // A worker runs one task at a time.
        for wk in 0..2 {
            let mut iv: Vec<(f64, f64)> = run
                .records
                .iter()
                .filter(|r| r.worker == wk)
                .map(|r| (r.start, r.end))
                .collect();
            iv.sort_by(|a, b| a.0.total_cmp(&b.0));
            assert!(iv.windows(2).all(|x| x[0].1 <= x[1].0));
        }
        // The prediction is a non-preemptive simulation: it is at least the largest
        // total of mean kernel times of a worker.
        let pred = predict_makespan(m, &c, &run, &params.repeats);
        assert!(pred > 0.0 && pred.is_finite());
    }
    // A mapping for another number of processors is refused.
    assert!(run_tiled_lu(&block_cyclic(n, 3).unwrap(), &c, &params).is_err());
}

#[test]
fn measured_rates_follow_emulated_slowdowns() {
    // Manual clock: each update's flops are charged at 10 Gflop/s times the
    // slowdown, so a rank slowed 3× reports exactly a third of the rate.
    let p = MeasureParams {
        slowdowns: vec![1.0, 3.0],
        tile: 64,
        updates: 20,
        repeats: vec![],
        clock: ClockMode::Manual,
    };
    let r = measure_gemm_rates(&p).unwrap();
    assert_eq!(r.len(), 2);
    assert!((r[0] - 10_000.0).abs() < 1e-6, "{r:?}");
    assert!((r[0] / r[1] - 3.0).abs() < 1e-12, "{r:?}");
    let rel = relative_speeds(&r);
    assert!((rel[0] - 1.0).abs() < 1e-12 && (rel[1] - 1.0 / 3.0).abs() < 1e-12);
    // Repeating each GEMM twice halves the rate too.
    let r2 = measure_gemm_rates(&MeasureParams {
        slowdowns: vec![1.0, 1.0],
        repeats: vec![1, 2],
        ..p.clone()
    })
    .unwrap();
    assert!((r2[0] / r2[1] - 2.0).abs() < 1e-12, "{r2:?}");
    // On the CPU-time clock the order holds too (a 3× gap beats any jitter).
    let rv = measure_gemm_rates(&MeasureParams {
        clock: ClockMode::Virtual,
        ..p.clone()
    })
    .unwrap();
    assert!(rv[0] > rv[1], "{rv:?}");
    assert!(measure_gemm_rates(&MeasureParams {
        slowdowns: vec![],
        ..MeasureParams::default()
    })
    .is_err());
}
