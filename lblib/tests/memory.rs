//! Anti-thrashing memory balancing with injected readings.

use lblib::memory::{MemoryStats, ScriptedReadings};
use lblib::{
    Advice, LbError, Lbs, LbsConfig, MemoryBalancer, MemoryParams, ProcReadings, Reading, SelfComm,
    SystemReadings,
};

fn rd(wall: f64, faults: u64, cpu: f64) -> Reading {
    Reading {
        major_faults: faults,
        cpu_seconds: cpu,
        wall_seconds: wall,
    }
}

#[test]
fn thrashing_is_high_faults_with_idle_cpu() {
    let script = vec![
        rd(0.0, 0, 0.0),
        rd(0.1, 50, 0.01), // before the sample interval: ignored
        rd(1.0, 10, 0.9),  // 10 faults/s, busy: fine
        rd(2.0, 110, 1.8), // 100 faults/s but CPU busy (0.9): paging in, not thrashing
        rd(3.0, 210, 1.9), // 100 faults/s, CPU 0.1: thrashing
        rd(4.0, 210, 2.9), // (not read: receding sticks for the section)
    ];
    let mut mb =
        MemoryBalancer::new(MemoryParams::default(), ScriptedReadings::new(script)).unwrap();
    mb.section_start().unwrap();
    assert_eq!(mb.check().unwrap(), Advice::Continue);
    assert_eq!(mb.stats().samples, 0);
    assert_eq!(mb.check().unwrap(), Advice::Continue);
    assert_eq!(mb.check().unwrap(), Advice::Continue);
    let a = mb.check().unwrap();
    match a {
        Advice::Recede {
            fault_rate,
            cpu_utilization,
            backoff_seconds,
        } => {
            assert_eq!(fault_rate, 100.0);
            assert!((cpu_utilization - 0.1).abs() < 1e-12);
            assert_eq!(backoff_seconds, 0.5);
        }
        Advice::Continue => panic!("thrashing not detected"),
    }
    assert!(mb.check().unwrap().recede());
    mb.section_end();
    assert_eq!(
        mb.stats(),
        MemoryStats {
            samples: 3,
            thrashing_samples: 1,
            recessions: 1
        }
    );
}

#[test]
fn backoff_doubles_then_resets_and_consecutive_samples_are_required() {
    // every sample thrashes: 1 s apart, 100 faults, no CPU.
    let script: Vec<Reading> = (0..40).map(|i| rd(i as f64, 100 * i as u64, 0.0)).collect();
    let params = MemoryParams {
        consecutive: 2,
        backoff_max: 1.5,
        ..MemoryParams::default()
    };
    let mut mb = MemoryBalancer::new(params, ScriptedReadings::new(script)).unwrap();
    let mut backoffs = Vec::new();
    for _ in 0..3 {
        mb.section_start().unwrap();
        assert_eq!(
            mb.check().unwrap(),
            Advice::Continue,
            "one sample is not enough"
        );
        match mb.check().unwrap() {
            Advice::Recede {
                backoff_seconds, ..
            } => backoffs.push(backoff_seconds),
            Advice::Continue => panic!("second thrashing sample must recede"),
        }
        mb.section_end();
    }
    assert_eq!(backoffs, vec![0.5, 1.0, 1.5]);
    // a clean section resets the back-off
    let clean = vec![
        rd(0.0, 0, 0.0),
        rd(1.0, 0, 1.0),
        rd(2.0, 0, 2.0),
        rd(3.0, 500, 2.0),
        rd(4.0, 1000, 2.0),
    ];
    let mut mb2 =
        MemoryBalancer::new(MemoryParams::default(), ScriptedReadings::new(clean)).unwrap();
    mb2.section_start().unwrap();
    assert_eq!(mb2.check().unwrap(), Advice::Continue);
    mb2.section_end();
    mb2.section_start().unwrap();
    assert!(
        matches!(mb2.check().unwrap(), Advice::Recede { backoff_seconds, .. } if backoff_seconds == 0.5)
    );
}

#[test]
fn lbs_recedes_when_memory_balancer_advises() {
    let script = vec![rd(0.0, 0, 0.0), rd(0.5, 100, 0.05), rd(0.6, 100, 0.06)];
    let mb = MemoryBalancer::new(
        MemoryParams::default(),
        Box::new(ScriptedReadings::new(script)) as Box<dyn SystemReadings + Send>,
    )
    .unwrap();
    let c = SelfComm::new();
    let mut lbs = Lbs::with_config(
        &c,
        LbsConfig {
            first_section_ops: 1000.0,
            ..Default::default()
        },
    )
    .unwrap();
    lbs.enable_memory_balancing(mb);
    lbs.section_start().unwrap();
    let mut ops = 0.0;
    while lbs.should_continue(ops, 1.0).unwrap() {
        ops += 1.0;
    }
    // first check: 0.5 s, 200 faults/s, CPU 0.1 → recede before any operation.
    assert_eq!(ops, 0.0);
    assert_eq!(lbs.receded(), Some(0.5));
    assert_eq!(lbs.memory_balancer().unwrap().stats().recessions, 1);
}

#[test]
fn real_readings_and_validation() {
    let mut p = ProcReadings::new();
    let a = p.read().unwrap();
    let mut x = 0.0f64;
    for i in 0..3_000_000 {
        x += (i as f64).sqrt();
    }
    std::hint::black_box(x);
    let b = p.read().unwrap();
    assert!(b.cpu_seconds > a.cpu_seconds);
    assert!(b.wall_seconds >= a.wall_seconds);
    assert!(b.major_faults >= a.major_faults);
    let bad = MemoryParams {
        threads: 0.0,
        ..MemoryParams::default()
    };
    assert!(matches!(
        MemoryBalancer::new(bad, ProcReadings::new()),
        Err(LbError::InvalidConfig {
            field: "threads",
            ..
        })
    ));
}
