//! The balancer (McCombs et al. §5) on ThreadComm with the deterministic manual clock.
//! Operation times are powers of two so that every figure is exact.

use lblib::lbs::group_continue;
use lblib::{
    ClockMode, Comm, LbError, Lbs, LbsConfig, Method, RateKind, SelfComm, ThreadComm, ThreadConfig,
};

const OP: f64 = 0.0625;

fn manual(slowdowns: &[f64]) -> ThreadConfig {
    ThreadConfig::with_slowdowns(slowdowns, ClockMode::Manual)
}

#[test]
fn paper_rules_are_typed_errors() {
    let out = ThreadComm::run_with(manual(&[1.0, 2.0]), |c| {
        let mut lbs = Lbs::new(&c);
        let before = lbs.decide(10.0, Method::Fastest).unwrap_err();
        assert_eq!(
            lbs.should_continue(0.0, 1.0).unwrap_err(),
            LbError::ContinueOutsideSection
        );
        assert_eq!(
            lbs.section_end(1.0).unwrap_err(),
            LbError::EndOutsideSection
        );
        assert_eq!(lbs.rates().unwrap_err(), LbError::RatesBeforeDecide);
        assert_eq!(lbs.index().unwrap_err(), LbError::RatesBeforeDecide);
        lbs.section_start().unwrap();
        assert_eq!(
            lbs.section_start().unwrap_err(),
            LbError::NestedSection { started_at: 0.0 }
        );
        c.advance(OP);
        let inside = lbs.decide(10.0, Method::Fastest).unwrap_err();
        lbs.section_end(1.0).unwrap();
        assert!(matches!(
            lbs.should_continue(-1.0, 1.0),
            Err(LbError::ContinueOutsideSection)
        ));
        let bad_ops = lbs.decide(-3.0, Method::Fastest).unwrap_err();
        let bad_user = lbs
            .decide(3.0, Method::User(Box::new(|_, _| f64::NAN)))
            .unwrap_err();
        (before, inside, bad_ops, bad_user)
    });
    for (before, inside, bad_ops, bad_user) in out {
        assert_eq!(before, LbError::DecideBeforeSection { ranks: vec![0, 1] });
        assert_eq!(inside, LbError::DecideInsideSection { ranks: vec![0, 1] });
        assert!(matches!(bad_ops, LbError::InvalidOps { ops, .. } if ops == -3.0));
        assert!(matches!(bad_user, LbError::InvalidTime { time } if time.is_nan()));
    }
    assert!(matches!(
        Lbs::with_config(
            &SelfComm::new(),
            LbsConfig {
                window: 0.0,
                ..Default::default()
            }
        ),
        Err(LbError::InvalidConfig {
            field: "window",
            ..
        })
    ));
}

#[test]
fn first_section_measures_rates_then_all_finish_at_t() {
    let cfg = LbsConfig {
        first_section_ops: 10.0,
        window: 0.25,
        ..LbsConfig::default()
    };
    let out = ThreadComm::run_with(manual(&[1.0, 2.0, 4.0]), |c| {
        let mut lbs = Lbs::with_config(&c, cfg.clone()).unwrap();
        // First section: a fixed number of operations.
        lbs.section_start().unwrap();
        let mut ops = 0.0;
        while lbs.should_continue(ops, 1.0).unwrap() {
            c.advance(OP);
            ops += 1.0;
        }
        let rate = lbs.section_end(ops).unwrap();
        let first_ops = ops;
        let t_fast = lbs.decide(20.0, Method::Fastest).unwrap();
        let rates = lbs.rates().unwrap().to_vec();
        let index = lbs.index().unwrap().to_vec();
        let t_slow = lbs.decide(20.0, Method::Slowest).unwrap();
        let t_user = lbs
            .decide(20.0, Method::User(Box::new(|ops, r: &[f64]| ops / r[1])))
            .unwrap();
        let t = lbs.decide(20.0, Method::Fastest).unwrap();
        // Balanced section: run until T.
        c.barrier();
        let t0 = c.wtime();
        lbs.section_start().unwrap();
        let mut ops = 0.0;
        while lbs.should_continue(ops, 1.0).unwrap() {
            c.advance(OP);
            ops += 1.0;
        }
        let finish = c.wtime() - t0;
        lbs.section_end(ops).unwrap();
        (
            first_ops, rate, t_fast, rates, index, t_slow, t_user, t, ops, finish,
        )
    });
    let speeds = [16.0, 8.0, 4.0];
    for (r, o) in out.iter().enumerate() {
        assert_eq!(o.0, 10.0, "first section runs first_section_ops");
        assert_eq!(o.1, speeds[r], "rate of rank {r}");
        assert_eq!(o.2, 20.0 / 16.0);
        assert_eq!(o.3, vec![4.0, 8.0, 16.0]);
        assert_eq!(o.4, vec![2, 1, 0]);
        assert_eq!(o.5, 20.0 / 4.0);
        assert_eq!(o.6, 20.0 / 8.0);
        // every rank does what fits into T = 1.25 s and finishes exactly at T.
        assert_eq!(o.8, [20.0, 10.0, 5.0][r]);
        assert_eq!(o.9, 1.25);
    }
}

#[test]
fn instantaneous_rates_follow_a_change_of_speed() {
    ThreadComm::run_with(manual(&[1.0]), |c| {
        let mut lbs = Lbs::with_config(
            &c,
            LbsConfig {
                first_section_ops: 20.0,
                window: 0.5,
                ..LbsConfig::default()
            },
        )
        .unwrap();
        lbs.section_start().unwrap();
        let mut ops = 0.0;
        while lbs
            .should_continue_with(ops, 1.0, RateKind::Instantaneous)
            .unwrap()
        {
            // external load arrives after 10 operations: 4x slower
            c.advance(if ops < 10.0 { OP } else { 4.0 * OP });
            ops += 1.0;
        }
        let avg = lbs.section_end(ops).unwrap();
        assert_eq!(ops, 20.0);
        assert_eq!(avg, 20.0 / 3.125);
        assert_eq!(lbs.last_rate(RateKind::Average), Some(6.4));
        assert_eq!(lbs.last_rate(RateKind::Instantaneous), Some(4.0));
        // decide with instantaneous rates predicts from the recent speed.
        let t_inst = lbs
            .decide_with(8.0, Method::Fastest, RateKind::Instantaneous)
            .unwrap();
        assert_eq!(t_inst, 2.0);
        assert_eq!(lbs.rates_with(RateKind::Instantaneous).unwrap(), &[4.0]);
        assert_eq!(lbs.rates_with(RateKind::Average).unwrap(), &[6.4]);
        // should_continue with instantaneous rates: 0.75 s left at 4 ops/s → 3 ops... from T=2:
        lbs.section_start().unwrap();
        let mut ops = 0.0;
        while lbs
            .should_continue_with(ops, 1.0, RateKind::Instantaneous)
            .unwrap()
        {
            c.advance(4.0 * OP);
            ops += 1.0;
        }
        lbs.section_end(ops).unwrap();
        assert_eq!(ops, 8.0);
    });
}

/// §7: group leaders balance the solve groups with one Lbs on the leaders'
/// communicator, nested around per-group Lbs sections; decisions are broadcast
/// inside each group.
#[test]
fn nested_sections_of_leaders_and_groups() {
    let out = ThreadComm::run_with(manual(&[1.0, 1.0, 2.0, 2.0]), |c| {
        let r = c.rank();
        let group = c.split(r / 2, r);
        let leaders = c.split(usize::from(group.rank() != 0), r);
        let is_leader = group.rank() == 0;
        let lcfg = LbsConfig {
            first_section_ops: 8.0,
            window: 1.0,
            ..LbsConfig::default()
        };
        let mut outer = Lbs::with_config(&leaders, lcfg.clone()).unwrap();
        let mut inner = Lbs::with_config(&group, lcfg).unwrap();
        let mut done = Vec::new();
        let mut limits = Vec::new();
        for phase in 0..2 {
            if phase > 0 && is_leader {
                limits.push(outer.decide(16.0, Method::Fastest).unwrap());
                assert_eq!(outer.index().unwrap(), &[1, 0]); // group 1 is slower
            }
            if is_leader {
                outer.section_start().unwrap();
            }
            inner.section_start().unwrap();
            let mut ops = 0.0;
            loop {
                let mine = if is_leader {
                    outer.should_continue(ops, 1.0).unwrap()
                } else {
                    false
                };
                if !group_continue(&group, 0, mine) {
                    break;
                }
                c.advance(OP);
                ops += 1.0;
            }
            let inner_rate = inner.section_end(ops).unwrap();
            if is_leader {
                let outer_rate = outer.section_end(ops).unwrap();
                assert_eq!(outer_rate, inner_rate);
            }
            done.push(ops);
        }
        // the per-group Lbs can decide on its own communicator too.
        let t_group = inner.decide(4.0, Method::Slowest).unwrap();
        (done, limits, t_group)
    });
    // Group 0's non-leader waited 0.5 s for its leader's decide (which synchronized
    // with the slow group's leader), so its second-section rate is 16 / 1.5 and the
    // group's Slowest T is 4 / (16 / 1.5) = 0.375.
    assert_eq!(out[0], (vec![8.0, 16.0], vec![1.0], 0.375));
    assert_eq!(out[1], (vec![8.0, 16.0], vec![], 0.375));
    assert_eq!(out[2], (vec![8.0, 8.0], vec![1.0], 0.5));
    assert_eq!(out[3], (vec![8.0, 8.0], vec![], 0.5));
}

#[test]
fn works_on_self_comm() {
    let c = SelfComm::new();
    let mut lbs = Lbs::new(&c);
    lbs.section_start().unwrap();
    let mut ops = 0.0;
    while lbs.should_continue(ops, 1.0).unwrap() {
        std::hint::black_box((0..1000).sum::<u64>());
        ops += 1.0;
    }
    assert_eq!(ops, 10.0);
    std::thread::sleep(std::time::Duration::from_millis(1));
    let rate = lbs.section_end(ops).unwrap();
    assert!(rate > 0.0 && rate < 10_000.0);
    let t = lbs.decide(5.0, Method::Fastest).unwrap();
    assert_eq!(t, 5.0 / rate);
    assert_eq!(lbs.index().unwrap(), &[0]);
}

/// §7 with the GroupLbs helper: three solve groups of sizes 3, 2, 1 and speeds
/// 1, 1/2, 1/4 (the slowest member sets the pace of a group).
#[test]
fn group_lbs_balances_solve_groups() {
    use lblib::lbs::GroupLbs;
    let out = ThreadComm::run_with(manual(&[1.0, 1.0, 1.0, 2.0, 2.0, 4.0]), |c| {
        let r = c.rank();
        let g = [0, 0, 0, 1, 1, 2][r];
        let group = c.split(g, r);
        let leaders = c.split(usize::from(group.rank() != 0), r);
        let cfg = LbsConfig {
            first_section_ops: 8.0,
            window: 1.0,
            ..LbsConfig::default()
        };
        let lref = if group.rank() == 0 {
            Some(&leaders)
        } else {
            None
        };
        let mut glbs = GroupLbs::new(&group, lref, cfg).unwrap();
        assert!(glbs.rates().is_err());
        let mut done = Vec::new();
        for phase in 0..3 {
            if phase > 0 {
                glbs.decide(16.0, Method::Fastest).unwrap();
            }
            glbs.section_start().unwrap();
            let mut ops = 0.0;
            while glbs.should_continue(ops, 1.0).unwrap() {
                c.advance(OP);
                ops += 1.0;
            }
            glbs.section_end(ops).unwrap();
            done.push(ops);
        }
        (
            done,
            glbs.time_limit(),
            glbs.rates().unwrap().to_vec(),
            glbs.index().unwrap().to_vec(),
        )
    });
    for (r, o) in out.iter().enumerate() {
        let g = [0, 0, 0, 1, 1, 2][r];
        assert_eq!(
            o.0,
            vec![8.0, [16.0, 8.0, 4.0][g], [16.0, 8.0, 4.0][g]],
            "rank {r}"
        );
        assert_eq!(o.1, Some(1.0));
        assert_eq!(o.2, vec![4.0, 8.0, 16.0]);
        assert_eq!(o.3, vec![2, 1, 0]);
    }
    // a leaders communicator on a non-leader is rejected
    ThreadComm::run(2, |c| {
        let g = c.split(0, c.rank());
        let err = GroupLbs::new(&g, Some(&c), LbsConfig::default()).map(|_| ());
        if g.rank() == 1 {
            assert_eq!(
                err.unwrap_err(),
                LbError::LeaderMismatch {
                    group_rank: 1,
                    has_leaders: true
                }
            );
        }
    });
}

/// `min_rate_seconds`: sections shorter than it add up; the previous rate stays
/// in force until together they reach it, then their joint rate replaces it.
#[test]
fn short_sections_add_up_to_min_rate_seconds() {
    let out = ThreadComm::run_with(manual(&[1.0]), |c| {
        let cfg = LbsConfig {
            min_rate_seconds: 0.25,
            ..LbsConfig::default()
        };
        let mut lbs = Lbs::with_config(&c, cfg).unwrap();
        let mut rates = Vec::new();
        // first section: 4 ops in 4·OP = 0.25 s → 16 ops/s (always taken)
        // then sections of 1 op in OP (16/s), 1 op in 2·OP (8/s), 2 ops in OP
        for (ops, secs) in [(4.0, 4.0 * OP), (1.0, OP), (1.0, 2.0 * OP), (2.0, OP)] {
            lbs.section_start().unwrap();
            c.advance(secs);
            rates.push(lbs.section_end(ops).unwrap());
        }
        rates
    });
    // sections 2 and 3 (0.1875 s together) keep 16/s; with section 4 the three
    // reach 0.25 s: 4 ops / 0.25 s = 16/s again, from different pieces
    assert_eq!(out[0], vec![16.0, 16.0, 16.0, 16.0]);
    let out = ThreadComm::run_with(manual(&[1.0]), |c| {
        let cfg = LbsConfig {
            min_rate_seconds: 0.125,
            ..LbsConfig::default()
        };
        let mut lbs = Lbs::with_config(&c, cfg).unwrap();
        let mut rates = Vec::new();
        for (ops, secs) in [(4.0, 4.0 * OP), (1.0, OP), (1.0, OP), (1.0, 2.0 * OP)] {
            lbs.section_start().unwrap();
            c.advance(secs);
            rates.push(lbs.section_end(ops).unwrap());
        }
        rates
    });
    // 1 op in OP alone is short (kept 16/s); with the next, 2 ops in 0.125 s =
    // 16/s; the last is long enough alone: 1 op / 0.125 s = 8/s
    assert_eq!(out[0], vec![16.0, 16.0, 16.0, 8.0]);
    assert!(matches!(
        Lbs::with_config(
            &SelfComm::new(),
            LbsConfig {
                min_rate_seconds: -1.0,
                ..Default::default()
            }
        ),
        Err(LbError::InvalidConfig {
            field: "min_rate_seconds",
            ..
        })
    ));
}
