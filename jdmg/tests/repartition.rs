//! Semi-static re-balancing of the fine-grain projection phase (Boudet et al. §2.1,
//! §4.5; issue #10): on the thread backend with manual clocks, one rank becomes
//! 4× slower in the middle of a multigrain solve; the solver notices it in the
//! projection phase, moves rows away from that rank and still returns the
//! reference eigenpairs. Without balancing nothing moves and runs are
//! bit-identical.

mod common;

use jdmg::{BasisSettings, CorrectionSettings, ExecutionSettings, ProblemSettings};
use std::cell::Cell;

use jdmg::{
    fine_rank_keys, solve_distributed, solve_multigrain, Balance, InnerStop, JdParams,
    MultigrainParams, MultigrainStats, RepartitionParams, Solution,
};
use lblib::{ClockMode, Comm, ThreadComm, ThreadConfig, Traced};
use matrices::generate::{generate, GenSpec};
use matrices::CsrMatrix;

/// A communicator whose rank `target` becomes `factor` times slower after
/// `after` collectives (a load that arrives mid-run, Boudet et al. §2.1).
struct SlowAfter<C> {
    inner: C,
    calls: Cell<usize>,
    after: usize,
    target: usize,
    factor: f64,
}

impl<C: Comm> SlowAfter<C> {
    fn tick(&self) {
        let c = self.calls.get() + 1;
        self.calls.set(c);
        if c == self.after && self.inner.rank() == self.target {
            assert!(self.inner.set_slowdown(self.factor));
        }
    }

    fn through<T>(&self, f: impl FnOnce(&C) -> T) -> T {
        self.tick();
        f(&self.inner)
    }
}

impl<C: Comm> Comm for SlowAfter<C> {
    fn rank(&self) -> usize {
        self.inner.rank()
    }
    fn size(&self) -> usize {
        self.inner.size()
    }
    fn wtime(&self) -> f64 {
        self.inner.wtime()
    }
    lblib::forward_collectives!(through);
    fn set_slowdown(&self, factor: f64) -> bool {
        self.inner.set_slowdown(factor)
    }
    fn real_clock(&self) -> bool {
        self.inner.real_clock()
    }
    fn split(&self, color: usize, key: usize) -> Self {
        SlowAfter {
            inner: self.inner.split(color, key),
            calls: Cell::new(0),
            after: usize::MAX,
            target: self.target,
            factor: self.factor,
        }
    }
}

/// The clocks are manual: the products charge their nonzeros
/// (`precond::dist::CHARGE_PER_NONZERO`, times the rank's slowdown) and nothing
/// else moves them, so rates, splits and imbalances are exact, whatever the
/// machine's load.
fn params() -> JdParams {
    JdParams {
        problem: ProblemSettings {
            nev: 4,
            tol: 1e-9,
            ..Default::default()
        },
        basis: BasisSettings {
            block: 2,
            ..Default::default()
        },
        correction: CorrectionSettings {
            maxits: Some(20),
            stop: InnerStop::Fixed,
            ..Default::default()
        },
        execution: ExecutionSettings {
            max_matvecs: Some(400_000),
            ..Default::default()
        },
        ..JdParams::default()
    }
}

/// The eigenvectors of every rank's rows, whole (rank order = row order).
fn whole<C: Comm>(comm: &C, n: usize, mut s: Solution) -> Solution {
    let mut counts = vec![0u64; comm.size()];
    comm.all_gather_u64(&[s.n_local as u64], &mut counts);
    let counts: Vec<usize> = counts.iter().map(|&c| c as usize).collect();
    let mut full = vec![0.0; n * s.eigenvalues.len()];
    for j in 0..s.eigenvalues.len() {
        comm.all_gather_v(s.eigenvector(j), &counts, &mut full[j * n..(j + 1) * n]);
    }
    s.eigenvectors = full;
    s.n_local = n;
    s.row_offset = 0;
    s
}

/// Multigrain of `a` over 4 thread ranks in 2 equal groups (hierarchical layout),
/// fine rank `slow` 4× slower after `after` fine-grain collectives. Per rank: the
/// whole solution and the multigrain stats.
fn run(
    a: &CsrMatrix,
    balance: Balance,
    slow: usize,
    after: usize,
    hierarchical: bool,
    repartition: bool,
) -> Vec<(Solution, MultigrainStats)> {
    let rp = RepartitionParams {
        enabled: repartition,
        ..Default::default()
    };
    run_with(a, &params(), balance, slow, after, hierarchical, rp)
}

/// [`run`] with the given parameters.
fn run_with(
    a: &CsrMatrix,
    params: &JdParams,
    balance: Balance,
    slow: usize,
    after: usize,
    hierarchical: bool,
    repartition: RepartitionParams,
) -> Vec<(Solution, MultigrainStats)> {
    let groups = jdmg::parse_groups("equal", 4, 2).unwrap();
    let keys = fine_rank_keys(&groups, hierarchical);
    let cfg = ThreadConfig::with_slowdowns(&[1.0; 4], ClockMode::Manual);
    ThreadComm::run_with(cfg, |comm| {
        let world = SlowAfter {
            inner: Traced::new(comm.split(0, keys[comm.rank()])),
            calls: Cell::new(0),
            after,
            target: slow,
            factor: 4.0,
        };
        let mg = MultigrainParams {
            groups: groups.clone(),
            balance,
            rate_weighted_rows: balance != Balance::None,
            hierarchical,
            repartition: repartition.clone(),
            ..MultigrainParams::default()
        };
        // the re-partitions, as the solver's hook sees them
        let mut seen = Vec::new();
        let mut watch = |ev: &jdmg::RepartitionEvent| seen.push(ev.clone());
        let mut out = jdmg::Solver::new(a, params)
            .comm(&world)
            .groups(&comm, &mg)
            .on_repartition(&mut watch)
            .run()
            .expect("converges");
        let st = out.multigrain.take().expect("multigrain stats");
        // (the imbalance after a re-partition is measured at the next check)
        let mut events = st.repartition.events.clone();
        events.iter_mut().for_each(|e| e.imbalance_after = None);
        assert_eq!(seen, events, "the hook saw every re-partition");
        (whole(&world, a.nrows(), out), st)
    })
}

#[test]
fn a_rank_slowed_mid_run_loses_rows_and_the_answer_holds() {
    let spec: GenSpec = "lap3d:15x16x17".parse().unwrap();
    let a = generate(&spec).unwrap();
    let exact = matrices::generate::exact_eigenvalues(&spec).unwrap();
    let serial = ThreadComm::run(1, |comm| {
        solve_distributed(&a, &comm, &params(), None)
            .unwrap()
            .eigenvalues
    });
    for hierarchical in [true, false] {
        // fine rank 3 becomes 4x slower after a few outer iterations
        let res = run(&a, Balance::Fastest, 3, 60, hierarchical, true);
        let off = run(&a, Balance::Fastest, 3, 60, hierarchical, false);
        eprintln!(
            "without re-partitioning: {:?} verified {:?}",
            off[0].0.eigenvalues, off[0].0.stats.verified
        );
        eprintln!(
            "with: verified {:?} outer {}",
            res[0].0.stats.verified, res[0].0.stats.outer_iterations
        );
        for (r, (sol, st)) in res.iter().enumerate() {
            let rp = &st.repartition;
            eprintln!(
                "hierarchical {hierarchical} rank {r}: {:?} repartitions {} checks {:?} \
                 rows {:?} seconds {:.3} moved {}",
                sol.eigenvalues,
                rp.count,
                rp.measured_imbalance,
                st.fine_rows,
                rp.seconds,
                rp.values_sent_total
            );
            for j in 0..4 {
                assert!(
                    (sol.eigenvalues[j] - exact[j]).abs() < 1e-7,
                    "{} vs exact {}",
                    sol.eigenvalues[j],
                    exact[j]
                );
                assert!((sol.eigenvalues[j] - serial[0][j]).abs() < 1e-7);
            }
            common::assert_pairs(&a, sol, 1e-6);
            assert!(rp.active && rp.errors.is_empty(), "{:?}", rp.errors);
            assert!(
                rp.count >= 1,
                "no re-partition: {:?}",
                rp.measured_imbalance
            );
            assert!(rp.count <= jdmg::RepartitionParams::default().max_repartitions);
            let ev = &rp.events[0];
            // the slow rank measured slowest, and it lost rows: at the first
            // re-partition (its window may straddle the slowdown, so less than
            // the 4x) and, by the end, more than half of them
            let slowest = (0..4)
                .min_by(|&i, &j| ev.rates[i].total_cmp(&ev.rates[j]))
                .unwrap();
            assert_eq!(slowest, 3, "rates {:?}", ev.rates);
            assert!(ev.imbalance_before > 0.1, "{ev:?}");
            assert!(ev.imbalance_predicted < ev.imbalance_before, "{ev:?}");
            assert!(
                ev.rows_after[3] < ev.rows_before[3] && st.fine_rows[3] * 2 < ev.rows_before[3],
                "rows {:?} -> {:?}, at the end {:?}",
                ev.rows_before,
                ev.rows_after,
                st.fine_rows
            );
            assert_eq!(ev.rows_after.iter().sum::<usize>(), a.nrows());
            if hierarchical {
                // rows move inside the coarse part of ranks 2 and 3 only
                assert_eq!(
                    ev.rows_after[2] + ev.rows_after[3],
                    ev.rows_before[2] + ev.rows_before[3]
                );
                assert!(ev.rows_after[2] > ev.rows_before[2]);
            }
            assert!(rp.values_sent_total > 0 && rp.seconds > 0.0);
            assert_eq!(st.fine_rows, rp.events.last().unwrap().rows_after);
            if let Some(after) = ev.imbalance_after {
                assert!(after < ev.imbalance_before, "{ev:?}");
            }
        }
    }
}

/// `balance none`: rows by equal nonzeros, no re-partitioning even when a rank
/// slows down, and two runs give bit-identical eigenvalues and counters.
#[test]
fn unbalanced_runs_never_repartition_and_are_bit_identical() {
    let a = generate(&"lap3d:12".parse::<GenSpec>().unwrap()).unwrap();
    let first = run(&a, Balance::None, 3, 60, true, true);
    let second = run(&a, Balance::None, 3, 60, true, true);
    for ((s1, m1), (s2, m2)) in first.iter().zip(&second) {
        assert!(!m1.repartition.active && m1.repartition.count == 0);
        assert_eq!(m1.repartition, m2.repartition);
        assert_eq!(s1.eigenvalues, s2.eigenvalues);
        assert_eq!(s1.eigenvectors, s2.eigenvectors);
        assert_eq!(s1.stats.matvecs, s2.stats.matvecs);
        assert_eq!(s1.stats.global_sums, s2.stats.global_sums);
        assert_eq!(m1.fine_rows, m2.fine_rows);
        common::assert_pairs(&a, s1, 1e-6);
    }
}

/// The split converges to the speed ratio and does not overshoot it (issue #22):
/// fine rank 3 becomes 4× slower early in the solve, from rows balanced for equal
/// speeds. The rates are those of the correction phases, which do not change when
/// rows move; before, the projection phase's busy rate of a rank fell as it lost
/// rows (4.9, 2.6, then 1.7 M/s at slowdowns 1,1,4,4) and the slow ranks ended with
/// a quarter of their share. Manual clocks: the measured rates are the speeds
/// exactly (4:1); the split is by nonzeros, so rank 3's rows land within 15 % of
/// its fair share of rows.
#[test]
fn the_split_converges_to_the_speed_ratio_without_overshoot() {
    let a = generate(&"lap3d:15x16x17".parse::<GenSpec>().unwrap()).unwrap();
    let prm = JdParams {
        problem: ProblemSettings {
            nev: 4,
            tol: 1e-11,
            ..params().problem
        },
        ..params()
    };
    // eager: a check every 3 outer iterations, a re-partition at the first one
    // above 3 %: the split must not drift
    let eager = RepartitionParams {
        threshold: 0.03,
        check_every: 3,
        consecutive: 1,
        ..Default::default()
    };
    // every re-partition, not only the last, lands near the speed ratio
    for (hierarchical, rprm) in [
        (false, RepartitionParams::default()),
        (true, RepartitionParams::default()),
        (false, eager),
    ] {
        let res = run_with(
            &a,
            &prm,
            Balance::Fastest,
            3,
            20,
            hierarchical,
            rprm.clone(),
        );
        let (_, st) = &res[0];
        let rp = &st.repartition;
        eprintln!(
            "hierarchical {hierarchical}: checks {:?}, outer {}",
            rp.measured_imbalance, res[0].0.stats.outer_iterations
        );
        for ev in &rp.events {
            eprintln!(
                "  at {}: {:?} -> {:?}, rates {:?}",
                ev.outer_iteration, ev.rows_before, ev.rows_after, ev.rates
            );
        }
        assert!(rp.errors.is_empty(), "{:?}", rp.errors);
        assert!(
            rp.count >= 1,
            "no re-partition: {:?}",
            rp.measured_imbalance
        );
        // rank 3's fair share of the rows it competes for: 1/4 of a fast rank's
        // (hierarchical: it shares coarse part 1 with rank 2 only)
        let fair = |rows: &[usize]| -> f64 {
            if hierarchical {
                (rows[2] + rows[3]) as f64 / 5.0
            } else {
                rows.iter().sum::<usize>() as f64 / 13.0
            }
        };
        for ev in &rp.events {
            let r = ev.rates[3] / ev.rates[0];
            assert!((r - 0.25).abs() < 1e-9, "rates {:?}", ev.rates);
            let f = fair(&ev.rows_after);
            assert!(
                ev.rows_after[3] as f64 >= 0.85 * f,
                "overshoot: rank 3 holds {} rows, its share is {f:.0}: {:?}",
                ev.rows_after[3],
                ev.rows_after
            );
            // the other fast ranks keep equal shares
            let fast: Vec<usize> = if hierarchical {
                vec![ev.rows_after[0], ev.rows_after[1]]
            } else {
                ev.rows_after[..3].to_vec()
            };
            let (lo, hi) = (fast.iter().min().unwrap(), fast.iter().max().unwrap());
            assert!(*hi as f64 <= 1.05 * *lo as f64, "{:?}", ev.rows_after);
        }
        let f = fair(&st.fine_rows);
        let r3 = st.fine_rows[3] as f64;
        assert!(
            (0.85 * f..=1.15 * f).contains(&r3),
            "rank 3 ends with {r3} rows, its share is {f:.0}: {:?}",
            st.fine_rows
        );
        for (sol, _) in &res {
            common::assert_pairs(&a, sol, 1e-8);
        }
    }
}

/// The example at slowdowns 1,1,4,4 from the start (lap3d:14, nev 2,
/// block 2, `--maxits 200 --inner fixed`): the start-up rows already follow the
/// speeds, and re-partitioning keeps them there (before: [1097, 275, 1054, 318]
/// became [1307, 65, 1296, 76] after three re-partitions).
#[test]
fn rows_that_follow_the_speeds_stay() {
    let a = generate(&"lap3d:14".parse::<GenSpec>().unwrap()).unwrap();
    let prm = JdParams {
        problem: ProblemSettings {
            nev: 2,
            tol: 1e-9,
            ..Default::default()
        },
        basis: BasisSettings {
            block: 2,
            ..Default::default()
        },
        correction: CorrectionSettings {
            maxits: Some(200),
            stop: InnerStop::Fixed,
            ..Default::default()
        },
        execution: ExecutionSettings {
            max_matvecs: Some(400_000),
            ..Default::default()
        },
        ..JdParams::default()
    };
    let groups = jdmg::parse_groups("equal", 4, 2).unwrap();
    let keys = fine_rank_keys(&groups, true);
    let cfg = ThreadConfig::with_slowdowns(&[1.0, 1.0, 4.0, 4.0], ClockMode::Manual);
    let res = ThreadComm::run_with(cfg, |comm| {
        let world = comm.split(0, keys[comm.rank()]);
        let mg = MultigrainParams {
            groups: groups.clone(),
            balance: Balance::Fastest,
            rate_weighted_rows: true,
            ..MultigrainParams::default()
        };
        let out = solve_multigrain(&a, &world, &comm, &prm, &mg).expect("converges");
        out.multigrain.expect("multigrain stats")
    });
    let st = &res[0];
    let rp = &st.repartition;
    eprintln!(
        "rows {:?}, checks {:?}, events {:?}",
        st.fine_rows, rp.measured_imbalance, rp.events
    );
    assert!(rp.active && rp.errors.is_empty(), "{:?}", rp.errors);
    // fine ranks 1 and 3 are the slow base ranks 2 and 3; each shares a coarse
    // part with a fast rank and should hold 1/5 of it
    for (fast, slow) in [(0, 1), (2, 3)] {
        let part = (st.fine_rows[fast] + st.fine_rows[slow]) as f64;
        let share = st.fine_rows[slow] as f64 / part;
        assert!(
            (0.15..=0.27).contains(&share),
            "slow rank {slow} holds {share:.3} of its coarse part: {:?}",
            st.fine_rows
        );
    }
}
