//! Barbosa, Morais, Tadeu: cost model, Algorithms 1–3, the
//! improvement index, and the reproduction of Figures 8, 10 and 11 with the
//! model choices documented in `hetdense::sched::malleable`.

use hetdense::sched::malleable::*;

#[test]
fn cost_model_section_2_2_1() {
    let m = CostModel::default();
    // T_P = f(n)/ΣS: a 1000-order matrix product (2n³ flop) on one 1000 Mflop/s processor: 2 s.
    assert!((m.time(KernelKind::Mm, 1000, &[1000.0]) - 2.0).abs() < 1e-12);
    assert_eq!(m.comm(KernelKind::Mm, 1000, 1), 0.0);
    // One message on two processors is the paper's T_C = k·T_L + b/ω when nothing
    // is overlapped: b = 1460 words = 8 packets of 1460 bytes.
    let full = CostModel {
        overlap: 0.0,
        ..CostModel::default()
    };
    let b = 1460.0;
    let k = 8.0;
    let want = k * full.latency + b * 8.0 * 8.0 / 100e6;
    assert!((full.broadcast(b, 2) - want).abs() < 1e-12);
    // Each extra processor adds one packet time to the pipelined broadcast.
    let pkt = full.latency + 1460.0 * 8.0 / 100e6;
    assert!((full.broadcast(b, 5) - full.broadcast(b, 4) - pkt).abs() < 1e-12);
    // The time has an interior minimum in p: the best number of processors grows with n.
    let speeds = ramp_speeds(45, 805.0, 0.5).unwrap();
    let p1 = best_fastest(KernelKind::Lu, 1000, &speeds, &m);
    let p3 = best_fastest(KernelKind::Lu, 3000, &speeds, &m);
    assert!(1 < p1 && p1 < p3 && p3 <= 45, "{p1} {p3}");
    assert!(CostModel {
        nb: 0,
        ..CostModel::default()
    }
    .validate()
    .is_err());
}

#[test]
fn mean_capacity_eqs_1_2_and_bpc() {
    let speeds = ramp_speeds(45, 805.0, 0.5).unwrap();
    let st: f64 = speeds.iter().sum();
    assert!((st / 45.0 - 805.0).abs() < 1e-9, "S̄_M = S_T / P");
    let m = CostModel::default();
    let (p, bpc) = best_processing_capacity(KernelKind::Qr, 1000, &speeds, &m);
    assert!((bpc - p as f64 * 805.0).abs() < 1e-9);
    // The BPC is the minimiser of the homogeneous-machine time.
    let t = |q: usize| m.time(KernelKind::Qr, 1000, &vec![805.0; q]);
    for q in 1..=45 {
        assert!(t(p) <= t(q) + 1e-12);
    }
}

#[test]
fn dags_of_figures_5_and_9() {
    let d = Dag::fig5(2000, 3000);
    assert_eq!(d.tasks.len(), 7);
    assert_eq!(d.levels(), vec![0, 1, 2, 0, 1, 2, 3]);
    // HNF: level by level, heaviest first (LU(3000) before LU(2000)).
    assert_eq!(d.hnf_order(), vec![3, 0, 4, 1, 5, 2, 6]);
    assert_eq!(Dag::dag1(1, 2).levels(), vec![0, 0, 1, 1, 1, 1, 2, 2]);
    assert_eq!(Dag::dag2(1, 2).levels(), vec![0, 0, 0, 0, 1, 1, 2]);
}

#[test]
fn algorithms_1_2_3_are_valid_schedules() {
    let speeds = ramp_speeds(20, 700.0, 0.5).unwrap();
    let m = CostModel::default();
    for dag in [
        Dag::fig5(1500, 2500),
        Dag::dag1(1000, 1500),
        Dag::dag2(2000, 3000),
    ] {
        let s1 = algorithm1(&dag, &speeds, &m).unwrap();
        let s2 = algorithm2(&dag, &speeds, &m).unwrap();
        let s3 = algorithm3(&dag, &speeds, &m, &Alg3Params::default()).unwrap();
        for s in [&s1, &s2, &s3] {
            s.check(&dag, speeds.len()).unwrap();
            assert_eq!(s.placements.len(), dag.tasks.len());
            // Each task lasts its model time on the processors it got.
            for p in &s.placements {
                let caps: Vec<f64> = p.procs.iter().map(|&q| speeds[q]).collect();
                let t = &dag.tasks[p.task];
                assert!((p.end - p.start - m.time(t.kind, t.n, &caps)).abs() < 1e-9);
            }
        }
        // Algorithm 1: one processor per task; Algorithm 2: one task at a time.
        assert!(s1.placements.iter().all(|p| p.procs.len() == 1));
        let total2: f64 = s2.placements.iter().map(|p| p.end - p.start).sum();
        assert!((total2 - s2.makespan).abs() < 1e-9);
        // Task parallelism alone is the worst (Figure 6).
        assert!(s1.makespan > s2.makespan && s1.makespan > s3.makespan);
    }
}

#[test]
fn algorithm3_packs_concurrent_tasks() {
    // Two small independent LUs whose BPC is well below S_T run side by side on
    // disjoint processors: the 10 % overload rule is not needed.
    let speeds = vec![800.0; 40];
    let m = CostModel::default();
    let dag = Dag::fig5(1000, 1000);
    let s3 = algorithm3(&dag, &speeds, &m, &Alg3Params::default()).unwrap();
    let (a, b) = (&s3.placements[0], &s3.placements[3]);
    assert_eq!(a.start, 0.0);
    assert_eq!(b.start, 0.0);
    assert!(a.procs.iter().all(|p| !b.procs.contains(p)));
    let s2 = algorithm2(&dag, &speeds, &m).unwrap();
    assert!(improvement(s2.makespan, s3.makespan) > 0.3);
    assert!(algorithm3(&dag, &speeds, &m, &Alg3Params { overload: 1.5 }).is_err());
}

#[test]
fn improvement_index_eq_3() {
    assert_eq!(improvement(10.0, 8.0), 0.2);
    assert_eq!(improvement(4.0, 4.0), 0.0);
}

fn repro(fig: Figure) -> Vec<f64> {
    reproduce(fig, &CostModel::default(), 0.5, &Alg3Params::default())
        .unwrap()
        .iter()
        .map(|c| c.improvement_percent)
        .collect()
}

/// Figure 10 (DAG1, 45 processors, S̄_M = 805): paper 33.8, 51.3, 41.8, 11.0,
/// 1.7 %. Ours (default model, spread 0.5): 31.6, 56.0, 40.6, 15.3, 10.9 %.
/// Cases 1–4 within 5 points; case 5 is 9 points above the paper's (our DAG1 and
/// communication model leave room for some concurrency at [3000, 5000]).
#[test]
fn figure_10() {
    let got = repro(Figure::Fig10);
    let ours = [31.6, 56.0, 40.6, 15.3, 10.9];
    let paper = [33.8, 51.3, 41.8, 11.0, 1.7];
    for i in 0..5 {
        assert!((got[i] - ours[i]).abs() < 0.2, "case {}: {}", i + 1, got[i]);
    }
    for i in 0..4 {
        assert!(
            (got[i] - paper[i]).abs() < 5.0,
            "case {}: {} vs {}",
            i + 1,
            got[i],
            paper[i]
        );
    }
    // The paper's ordering: case 2 best, case 5 smallest.
    assert!(got[1] > got[2] && got[2] > got[0] && got[0] > got[3] && got[3] > got[4]);
}

/// Figure 11 (DAG2, 50 processors, S̄_M = 700): paper 19.9, 21.4, 16.8, 16.2,
/// 10.3 %. Ours: 25.3, 31.2, 10.5, 7.5, 7.0 % — all positive, case 2 largest, as
/// in the paper; within 10 points.
#[test]
fn figure_11() {
    let got = repro(Figure::Fig11);
    let ours = [25.3, 31.2, 10.5, 7.5, 7.0];
    let paper = [19.9, 21.4, 16.8, 16.2, 10.3];
    for i in 0..5 {
        assert!((got[i] - ours[i]).abs() < 0.2, "case {}: {}", i + 1, got[i]);
        assert!((got[i] - paper[i]).abs() < 10.0, "case {}", i + 1);
        assert!(got[i] > 0.0);
    }
}

/// Figure 8 (Fig. 5 DAG, 40 processors, inputs > 2500²): paper 9.5 % to 22.8 %.
/// Ours: from −0.6 % to 25.3 %: the top of the range matches; the largest pairs
/// (both ≥ 4000) get no improvement because their BPC fills the 40-processor
/// machine, so Algorithm 3 falls back to Algorithm 2 (paper §3).
#[test]
fn figure_8() {
    let got = repro(Figure::Fig8);
    let lo = got.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = got.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    assert!((hi - 25.3).abs() < 0.3, "max {hi}");
    assert!((lo + 0.6).abs() < 0.3, "min {lo}");
    // Similar input sizes give the larger improvements (paper §4).
    let cases = reproduce(
        Figure::Fig8,
        &CostModel::default(),
        0.5,
        &Alg3Params::default(),
    )
    .unwrap();
    let find = |a, b| {
        cases
            .iter()
            .find(|c| c.sizes == [a, b])
            .unwrap()
            .improvement_percent
    };
    assert!(find(2500, 2500) > find(2500, 5000));
    assert!(find(3000, 3000) > find(3000, 5000));
}
