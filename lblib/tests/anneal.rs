//! The second application (McCombs et al. §2): simulated annealing on 4 ranks with
//! speeds 1, 1, 1/2, 1/4 (slowdowns 1, 1, 2, 4), imbalance from the tracer (§4).
//!
//! The clocks are manual: each operation charges 1 ms at nominal speed
//! (`AnnealParams::op_seconds`), so the times, the decided T and the imbalance
//! follow from the counted operations alone, whatever else runs on the machine.

use lblib::demo::{run_anneal, AnnealOutcome, AnnealParams};
use lblib::{ClockMode, ThreadComm, ThreadConfig};

fn run(balance: bool) -> AnnealOutcome {
    let params = AnnealParams {
        phases: 12,
        ops_per_phase: 100.0,
        // the first (rate-measuring) phase is unbalanced: keep it short.
        first_section_ops: 5.0,
        balance,
        op_seconds: 1e-3,
        ..Default::default()
    };
    let cfg = ThreadConfig::with_slowdowns(&[1.0, 1.0, 2.0, 4.0], ClockMode::Manual);
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
    // Per phase 100 ops take 100, 100, 200 and 400 ms: idle 800 of 1600 ms-ranks.
    assert!(
        (o.imbalance_percent - 50.0).abs() < 1e-9,
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
    // Left: the rate-measuring first phase (5 ops each: 5 to 20 ms) and the last
    // operation of a phase that does not fit T.
    assert!(
        o.imbalance_percent < 2.0,
        "imbalance {}",
        o.imbalance_percent
    );
    assert_eq!(o.time_limits.len(), 11);
    // T is the fastest rank's 100 operations, 0.1 s.
    for t in &o.time_limits {
        assert!((t - 0.1).abs() < 1e-9, "T = {t}");
    }
    // ops are proportional to speed: 1 : 1 : 1/2 : 1/4.
    let ratio = o.ops_per_rank[0] / o.ops_per_rank[3];
    assert!((3.95..4.05).contains(&ratio), "ops ratio {ratio}");
    assert_eq!(o.ops_per_rank[0], o.ops_per_rank[1]);
    assert!(o.best_energy.is_finite());
}
