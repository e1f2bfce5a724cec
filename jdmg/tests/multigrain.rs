//! Multigrain JD (McCombs et al. §6–7) on the thread backend with injected per-rank
//! slowdowns: balanced JDmg returns the fine-grain eigenvalues, and its
//! tracer-measured %imbalance is 3.3 % where the unbalanced run's is the model's
//! 37.5 %. The clocks are manual: the products charge their nonzeros
//! (`precond::dist::CHARGE_PER_NONZERO`, times the slowdown), so the figures do not
//! depend on the machine's load.

use jdmg::{
    fine_rank_keys, solve_distributed, solve_multigrain, AlltoallScope, Balance, InnerStop,
    JdError, JdParams, MultigrainParams, MultigrainStats,
};
use jdmg::{BasisSettings, CorrectionSettings, ExecutionSettings, ProblemSettings};
use lblib::{ClockMode, Comm, ThreadComm, ThreadConfig, Traced};
use matrices::generate::{generate, GenSpec};

/// Per rank: eigenvalues, %imbalance, inner steps per group, time limits T.
type RankResult = (Vec<f64>, f64, Vec<u64>, Vec<f64>);

fn run(balance: Balance, slowdowns: &[f64], params: &JdParams) -> Vec<RankResult> {
    run_stats(balance, slowdowns, params)
        .into_iter()
        .map(|(vals, imb, mgs)| (vals, imb, mgs.group_inner_steps, mgs.time_limits))
        .collect()
}

/// Balanced or not multigrain of lap3d:14 in equal groups of 2 on thread ranks
/// with manual-clock `slowdowns`; per rank: eigenvalues, %imbalance, stats.
fn run_stats(
    balance: Balance,
    slowdowns: &[f64],
    params: &JdParams,
) -> Vec<(Vec<f64>, f64, MultigrainStats)> {
    let spec: GenSpec = "lap3d:14".parse().unwrap();
    let a = generate(&spec).unwrap();
    let cfg = ThreadConfig::with_slowdowns(slowdowns, ClockMode::Manual);
    let groups = jdmg::parse_groups("equal", slowdowns.len(), 2).unwrap();
    let keys = fine_rank_keys(&groups, true);
    ThreadComm::run_with(cfg, |comm| {
        let traced = Traced::new(comm.split(0, keys[comm.rank()]));
        let mg = MultigrainParams {
            groups: groups.clone(),
            balance,
            rate_weighted_rows: balance != Balance::None,
            hierarchical: true,
            ..MultigrainParams::default()
        };
        let out = solve_multigrain(&a, &traced, &comm, params, &mg).expect("converges");
        let rep = traced.report().unwrap();
        if comm.rank() == 0 {
            for l in &rep.per_label {
                eprintln!(
                    "  {:?} {} {} calls {:.2}%",
                    balance, l.label, l.calls, l.imbalance_percent
                );
            }
        }
        let mgs = out.multigrain.expect("multigrain stats");
        assert_eq!(mgs.alltoall_scope, AlltoallScope::Hierarchical);
        // fine-grain collectives plus the waits in the all-to-all groups
        let imb = mgs.imbalance_percent(&rep);
        (out.eigenvalues, imb, mgs)
    })
}

#[test]
fn balanced_multigrain_matches_fine_grain_and_removes_imbalance() {
    let params = JdParams {
        problem: ProblemSettings {
            nev: 2,
            tol: 1e-10,
            ..Default::default()
        },
        basis: BasisSettings {
            block: 2,
            ..Default::default()
        },
        correction: CorrectionSettings {
            maxits: Some(300),
            stop: InnerStop::Fixed,
            ..Default::default()
        },
        execution: ExecutionSettings {
            max_matvecs: Some(200_000),
            ..Default::default()
        },
        ..JdParams::default()
    };
    let spec: GenSpec = "lap3d:14".parse().unwrap();
    let a = generate(&spec).unwrap();
    let exact = matrices::generate::exact_eigenvalues(&spec).unwrap();
    let fine = ThreadComm::run(4, |comm| {
        solve_distributed(&a, &comm, &params, None)
            .unwrap()
            .eigenvalues
    });
    let slow = [1.0, 1.0, 4.0, 4.0];
    let unbalanced = run(Balance::None, &slow, &params);
    let balanced = run(Balance::Fastest, &slow, &params);
    for (name, res) in [("unbalanced", &unbalanced), ("balanced", &balanced)] {
        for (r, (vals, imb, steps, tl)) in res.iter().enumerate() {
            eprintln!(
                "{name} rank {r}: {vals:?} imbalance {imb:.2}% group steps {steps:?} T {:?}",
                tl.first()
            );
            for j in 0..2 {
                assert!(
                    (vals[j] - exact[j]).abs() < 1e-7,
                    "{name}: {} vs {}",
                    vals[j],
                    exact[j]
                );
                assert!((vals[j] - fine[0][j]).abs() < 1e-7);
            }
        }
    }
    let imb_u = unbalanced[0].1;
    let imb_b = balanced[0].1;
    // Unbalanced, every phase waits for the 4× slower group: 1 − mean/max of
    // 1, 1, 4, 4 is 37.5 %.
    assert!(
        (imb_u - 37.5).abs() < 0.01,
        "unbalanced imbalance {imb_u:.2}%"
    );
    assert!(imb_b < 5.0, "balanced imbalance {imb_b:.2}%");
    // Balanced: the fast group does more inner steps than the slow one.
    let st = &balanced[0].2;
    assert!(st[0] > 2 * st[1], "group steps {st:?}");
}

#[test]
fn groups_from_keys_and_specs() {
    assert_eq!(
        jdmg::multigrain::groups_by_key(&[7, 7, 3, 7, 3]),
        vec![vec![0, 1, 3], vec![2, 4]]
    );
    assert_eq!(
        jdmg::parse_groups("equal", 4, 2).unwrap(),
        vec![vec![0, 1], vec![2, 3]]
    );
    assert_eq!(
        jdmg::parse_groups("0-1,2,3", 4, 2).unwrap(),
        vec![vec![0, 1], vec![2], vec![3]]
    );
    assert!(jdmg::parse_groups("0-1,1", 4, 2).is_err(), "repeated rank");
    assert!(
        jdmg::parse_groups("0-1", 4, 2).is_err(),
        "ranks 2, 3 missing"
    );
    // the same host on every rank: one group
    let k = jdmg::multigrain::host_key();
    assert_eq!(
        jdmg::multigrain::groups_by_key(&[k, k, k]),
        vec![vec![0, 1, 2]]
    );
}

/// What `jdmg solve --groups` builds, from the library: the groups of a spec
/// (`host`: one group on one machine), the fine-grain world, and the whole
/// eigenvectors gathered on every rank.
#[test]
fn groups_world_and_gathered_vectors_from_the_library() {
    let a = generate(&"lap3d:6".parse::<GenSpec>().unwrap()).unwrap();
    let params = layout_params(2);
    let out = ThreadComm::run(4, |comm| {
        let host = jdmg::groups_on("host", &comm, &params).unwrap();
        let groups = jdmg::groups_on("equal", &comm, &params).unwrap();
        let world = jdmg::fine_world(&comm, Some(&groups), true, 0.0);
        let mg = MultigrainParams {
            groups: groups.clone(),
            rate_weighted_rows: false,
            balance: Balance::None,
            ..MultigrainParams::default()
        };
        let r = solve_multigrain(&a, &world, &comm, &params, &mg);
        let s = jdmg::gather_eigenvectors(&world, a.nrows(), r).unwrap();
        let traced = world.report().unwrap().ranks;
        (host, groups, traced, s)
    });
    for (host, groups, traced, s) in &out {
        assert_eq!(host, &vec![vec![0, 1, 2, 3]]);
        assert_eq!(groups, &vec![vec![0, 1], vec![2, 3]]);
        assert_eq!(*traced, 4);
        assert_eq!((s.n_local, s.row_offset), (a.nrows(), 0));
        assert_eq!(s.eigenvectors, out[0].3.eigenvectors);
        // whole eigenvectors: A x = λ x on every row
        let mut ax = vec![0.0; a.nrows()];
        for j in 0..2 {
            a.mul_vec(s.eigenvector(j), &mut ax);
            let r: f64 = ax
                .iter()
                .zip(s.eigenvector(j))
                .map(|(y, x)| (y - s.eigenvalues[j] * x).powi(2))
                .sum::<f64>()
                .sqrt();
            assert!(r < 1e-8, "pair {j}: ‖Ax − λx‖ = {r:e}");
        }
    }
}

/// Multigrain on the thread backend with the given groups (fine rows split by equal
/// nonzeros); the fine-grain communicator ordered by `fine_rank_keys`. Per rank: eigenvalues and multigrain stats.
fn run_layout(
    spec: &str,
    groups: &[Vec<usize>],
    hierarchical: bool,
    params: &JdParams,
) -> Vec<(Vec<f64>, MultigrainStats)> {
    let a = generate(&spec.parse::<GenSpec>().unwrap()).unwrap();
    let p: usize = groups.iter().map(Vec::len).sum();
    let keys = fine_rank_keys(groups, hierarchical);
    ThreadComm::run(p, |comm| {
        let world = Traced::new(comm.split(0, keys[comm.rank()]));
        let mg = MultigrainParams {
            groups: groups.to_vec(),
            hierarchical,
            // equal nonzeros, no balancing: layouts, values sent and results
            // independent of timing
            rate_weighted_rows: false,
            balance: Balance::None,
            ..MultigrainParams::default()
        };
        let out = solve_multigrain(&a, &world, &comm, params, &mg).expect("converges");
        (out.eigenvalues, out.multigrain.expect("multigrain stats"))
    })
}

fn layout_params(k: usize) -> JdParams {
    JdParams {
        problem: ProblemSettings {
            nev: 2,
            tol: 1e-10,
            ..Default::default()
        },
        basis: BasisSettings {
            block: k,
            ..Default::default()
        },
        correction: CorrectionSettings {
            maxits: Some(40),
            stop: InnerStop::Fixed,
            ..Default::default()
        },
        execution: ExecutionSettings {
            max_matvecs: Some(200_000),
            ..Default::default()
        },
        ..JdParams::default()
    }
}

/// McCombs et al. §6 "Multigrain algorithm for MPP's": equal groups use the hierarchical
/// layout (all-to-alls inside groups of k ranks) and return the fine-grain eigenvalues;
/// `hierarchical: false` falls back to the global all-to-all with the same result.
#[test]
fn hierarchical_equal_groups_match_fine_grain() {
    let spec = "lap3d:10";
    let a = generate(&spec.parse::<GenSpec>().unwrap()).unwrap();
    let exact = matrices::generate::exact_eigenvalues(&spec.parse().unwrap()).unwrap();
    for (p, k) in [(4usize, 2usize), (6, 2), (6, 3)] {
        let params = layout_params(k);
        let fine = ThreadComm::run(p, |comm| {
            solve_distributed(&a, &comm, &params, None)
                .unwrap()
                .eigenvalues
        });
        let groups = jdmg::parse_groups("equal", p, k).unwrap();
        let mut totals = Vec::new();
        for hierarchical in [true, false] {
            let res = run_layout(spec, &groups, hierarchical, &params);
            for (r, (vals, st)) in res.iter().enumerate() {
                for j in 0..2 {
                    assert!(
                        (vals[j] - fine[0][j]).abs() < 1e-8,
                        "P={p} k={k} hier={hierarchical} rank {r}: {} vs fine {}",
                        vals[j],
                        fine[0][j]
                    );
                    assert!((vals[j] - exact[j]).abs() < 1e-8);
                }
                let (scope, size) = if hierarchical {
                    (AlltoallScope::Hierarchical, k)
                } else {
                    (AlltoallScope::Global, p)
                };
                assert_eq!(st.alltoall_scope, scope);
                assert_eq!(st.alltoall_group_size, size);
                assert!(st.alltoall_values_sent > 0, "rank {r} sent nothing");
                assert!(st.phases > 0 && st.alltoall_seconds > 0.0);
            }
            let total: u64 = res.iter().map(|r| r.1.alltoall_values_sent).sum();
            assert_eq!(res[0].1.alltoall_values_sent_total, total);
            totals.push((total, res[0].1.phases));
            eprintln!(
                "P={p} k={k} hierarchical={hierarchical}: phases {} values sent {total} \
                 alltoall {:.2e} s",
                res[0].1.phases, res[0].1.alltoall_seconds
            );
        }
        // Per correction phase, the hierarchical scheme sends fewer values.
        let per = |(t, ph): (u64, usize)| t as f64 / ph as f64;
        assert!(
            per(totals[0]) < per(totals[1]),
            "P={p} k={k}: per phase {} vs {}",
            per(totals[0]),
            per(totals[1])
        );
    }
}

/// Unequal groups (clusters of clusters, §6) keep the global all-to-all even with
/// `hierarchical: true`, and a fine-grain communicator in the wrong order for the
/// hierarchical layout is an `InvalidParams` error on every rank.
#[test]
fn unequal_groups_fall_back_to_global_and_bad_order_is_refused() {
    let spec = "lap3d:10";
    let a = generate(&spec.parse::<GenSpec>().unwrap()).unwrap();
    let params = layout_params(2);
    let fine = ThreadComm::run(4, |comm| {
        solve_distributed(&a, &comm, &params, None)
            .unwrap()
            .eigenvalues
    });
    let groups = vec![vec![0, 1, 2], vec![3]];
    assert_eq!(fine_rank_keys(&groups, true), vec![0, 1, 2, 3]);
    for (vals, st) in run_layout(spec, &groups, true, &params) {
        assert_eq!(st.alltoall_scope, AlltoallScope::Global);
        assert_eq!(st.alltoall_group_size, 4);
        for j in 0..2 {
            assert!((vals[j] - fine[0][j]).abs() < 1e-8, "{vals:?} vs {fine:?}");
        }
    }
    // equal groups, hierarchical on, but world in base order: refused everywhere
    let equal = jdmg::parse_groups("equal", 4, 2).unwrap();
    let errs = ThreadComm::run(4, |comm| {
        let world = comm.split(0, comm.rank());
        let mg = MultigrainParams {
            groups: equal.clone(),
            ..MultigrainParams::default()
        };
        match solve_multigrain(&a, &world, &comm, &params, &mg) {
            Err(JdError::InvalidParams { reason: m, .. }) => m,
            other => panic!(
                "expected InvalidParams, got {:?}",
                other.map(|s| s.multigrain)
            ),
        }
    });
    assert!(
        errs.iter().all(|m| m.contains("fine_rank_keys")),
        "{errs:?}"
    );
}

/// `--balance none` is deterministic: rows split by equal nonzeros and a fixed step
/// rule, so two runs give bit-identical eigenvalues and the same inner steps.
#[test]
fn unbalanced_multigrain_is_deterministic() {
    let groups = jdmg::parse_groups("equal", 4, 2).unwrap();
    let params = JdParams {
        correction: CorrectionSettings {
            stop: InnerStop::Adaptive,
            ..layout_params(2).correction
        },
        ..layout_params(2)
    };
    let first = run_layout("lap3d:10", &groups, true, &params);
    let second = run_layout("lap3d:10", &groups, true, &params);
    for ((e1, s1), (e2, s2)) in first.iter().zip(&second) {
        assert_eq!(e1, e2, "eigenvalues differ between runs");
        assert_eq!(s1.group_inner_steps, s2.group_inner_steps);
    }
}

/// McCombs et al. §4 at default settings (no maxits, adaptive inner rule): every
/// phase's step count is the optimal m of the CG bound, capped by the groups'
/// default of 150, growing over the run; balancing cuts the imbalance of a 4×
/// slower group on the same spectrum.
#[test]
fn default_settings_use_the_optimal_m_and_balance() {
    let params = JdParams {
        problem: ProblemSettings {
            nev: 2,
            tol: 1e-10,
            ..Default::default()
        },
        basis: BasisSettings {
            block: 2,
            ..Default::default()
        },
        ..JdParams::default()
    };
    assert_eq!(params.correction.maxits, None);
    let spec: GenSpec = "lap3d:14".parse().unwrap();
    let exact = matrices::generate::exact_eigenvalues(&spec).unwrap();
    let slow = [1.0, 1.0, 4.0, 4.0];
    let ub = run_stats(Balance::None, &slow, &params);
    let bal = run_stats(Balance::Fastest, &slow, &params);
    for (vals, _, _) in ub.iter().chain(&bal) {
        for j in 0..2 {
            assert!(
                (vals[j] - exact[j]).abs() < 1e-7,
                "{} vs {}",
                vals[j],
                exact[j]
            );
        }
    }
    let m = &bal[0].2.optimal_steps;
    eprintln!(
        "m per phase {m:?}; imbalance unbalanced {:.1}% balanced {:.1}%; T {:?}",
        ub[0].1, bal[0].1, bal[0].2.time_limits
    );
    assert_eq!(m.len(), bal[0].2.phases);
    assert!(m.iter().all(|&s| (1..=150).contains(&s)), "{m:?}");
    assert!(
        m.last() > m.first() && *m.iter().max().unwrap() > 3,
        "{m:?}"
    );
    // phase 1 measures rates; every later phase has a time limit
    assert_eq!(bal[0].2.time_limits.len() + 1, bal[0].2.phases);
    assert!(ub[0].2.time_limits.is_empty());
    assert!(ub[0].1 > 25.0, "unbalanced {:.1}%", ub[0].1);
    assert!(
        bal[0].1 < 0.5 * ub[0].1,
        "balanced {:.1}% vs {:.1}%",
        bal[0].1,
        ub[0].1
    );
}

/// Asks to stop once, on one rank only, after `after` polls.
struct StopOnce {
    after: usize,
    polls: usize,
    saves: usize,
}

impl jdmg::CheckpointSink for StopOnce {
    fn poll(&mut self, _stats: &jdmg::Stats) -> jdmg::CheckpointRequest {
        self.polls += 1;
        if self.polls == self.after {
            jdmg::CheckpointRequest::SaveAndStop
        } else {
            jdmg::CheckpointRequest::Continue
        }
    }

    fn save(&mut self, _ck: &jdmg::Checkpoint, _last: bool) {
        self.saves += 1;
    }
}

/// A sink's stop on one rank (a signal that reached one process) stops every
/// rank of a balanced multigrain solve at the same outer iteration, with the
/// pairs so far (issue #22: `--groups` had no collective stop).
#[test]
fn a_stop_on_one_rank_stops_every_rank_of_a_multigrain_solve() {
    let a = generate(&"lap3d:14".parse::<GenSpec>().unwrap()).unwrap();
    let params = JdParams {
        problem: ProblemSettings {
            nev: 4,
            tol: 1e-300,
            ..Default::default()
        },
        basis: BasisSettings {
            block: 2,
            ..Default::default()
        },
        execution: ExecutionSettings {
            max_matvecs: Some(50_000_000),
            ..Default::default()
        },
        ..JdParams::default()
    };
    let groups = jdmg::parse_groups("equal", 4, 2).unwrap();
    let keys = fine_rank_keys(&groups, true);
    let cfg = ThreadConfig::with_slowdowns(&[1.0, 1.0, 2.0, 2.0], ClockMode::Manual);
    let out = ThreadComm::run_with(cfg, |comm| {
        let world = comm.split(0, keys[comm.rank()]);
        let mg = MultigrainParams {
            groups: groups.clone(),
            balance: Balance::Fastest,
            rate_weighted_rows: true,
            ..MultigrainParams::default()
        };
        // rank 2 asks at its 7th poll, the others never
        let mut sink = StopOnce {
            after: if comm.rank() == 2 { 7 } else { usize::MAX },
            polls: 0,
            saves: 0,
        };
        let r = jdmg::Solver::new(&a, &params)
            .comm(&world)
            .groups(&comm, &mg)
            .checkpoint(&mut sink)
            .run();
        match r {
            Ok(partial) if partial.outcome == jdmg::Outcome::Stopped => (
                partial.wanted,
                partial.stats.outer_iterations,
                partial.eigenvalues,
                sink,
            ),
            other => panic!("rank {}: {other:?}", comm.rank()),
        }
    });
    let it = out[0].1;
    for (wanted, outer, vals, sink) in &out {
        assert_eq!(*wanted, 4);
        assert_eq!(*outer, it, "every rank stopped at the same outer iteration");
        assert_eq!(vals.len(), 4);
        assert!(vals.iter().all(|v| v.is_finite()), "{vals:?}");
        assert!(sink.polls >= 7 && sink.saves >= 1);
    }
}
