//! The second application (McCombs et al. §2): simulated annealing on 4 ranks with
//! speeds 1, 1, 1/2, 1/4 (slowdowns 1, 1, 2, 4), imbalance from the tracer (§4).

use lblib::demo::{run_anneal, AnnealOutcome, AnnealParams};
use lblib::{ClockMode, ThreadComm, ThreadConfig};

fn run(balance: bool) -> AnnealOutcome {
    let params = AnnealParams {
        phases: 12,
        ops_per_phase: 100.0,
        // the first (rate-measuring) phase is unbalanced: keep it short.
        first_section_ops: 5.0,
        balance,
        ..Default::default()
    };
    let cfg = ThreadConfig::with_slowdowns(&[1.0, 1.0, 2.0, 4.0], ClockMode::Virtual);
    let mut out = ThreadComm::run_with(cfg, |c| run_anneal(c, &params).unwrap());
    let first = out.remove(0);
    for o in &out {
        assert_eq!(o.imbalance_percent, first.imbalance_percent);
        assert_eq!(o.best_energy, first.best_energy);
    }
    first
}

#[test]
fn unbalanced_imbalance_is_near_the_theoretical_50_percent() {
    let o = run(false);
    eprintln!(
        "off: imbalance {:.2}% best {:.3}",
        o.imbalance_percent, o.best_energy
    );
    // Virtual clocks scale each thread's CPU time: work on the other cores
    // (cache and memory-bandwidth sharing) shifts it by a few points (44.8 % seen
    // with both cores busy), hence the 8-point band.
    assert!(
        (o.imbalance_percent - 50.0).abs() < 8.0,
        "imbalance {}",
        o.imbalance_percent
    );
    assert_eq!(o.ops_per_rank, vec![1200.0; 4]);
    assert!(o.best_energy < lblib::demo::rastrigin(&[5.12; 64]));
}

#[test]
fn balanced_imbalance_is_below_5_percent() {
    let o = run(true);
    eprintln!(
        "on: imbalance {:.2}% best {:.3} ops {:?} T {:?}",
        o.imbalance_percent, o.best_energy, o.ops_per_rank, o.time_limits
    );
    assert!(
        o.imbalance_percent < 5.0,
        "imbalance {}",
        o.imbalance_percent
    );
    assert_eq!(o.time_limits.len(), 11);
    // ops are proportional to speed: rank 0 about 4x rank 3.
    let ratio = o.ops_per_rank[0] / o.ops_per_rank[3];
    assert!((3.0..5.0).contains(&ratio), "ops ratio {ratio}");
    assert!(o.best_energy.is_finite());
}
