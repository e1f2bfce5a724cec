//! Multigrain JD (`seeds/003` §6–7) on the thread backend with injected per-rank
//! slowdowns (virtual clocks): balanced JDmg returns the fine-grain eigenvalues, and
//! its tracer-measured %imbalance is below 10% where the unbalanced run's is above 30%.

use jdmg::{solve_distributed, solve_multigrain, Balance, InnerStop, JdParams, MultigrainParams};
use lblib::{ClockMode, Comm, ThreadComm, ThreadConfig, Traced};
use matrices::generate::{generate, GenSpec};

/// Per rank: eigenvalues, %imbalance, inner steps per group, time limits T.
type RankResult = (Vec<f64>, f64, Vec<u64>, Vec<f64>);

fn run(balance: Balance, slowdowns: &[f64], params: &JdParams) -> Vec<RankResult> {
    let spec: GenSpec = "lap3d:14".parse().unwrap();
    let a = generate(&spec).unwrap();
    let cfg = ThreadConfig::with_slowdowns(slowdowns, ClockMode::Virtual);
    let groups = jdmg::parse_groups("equal", slowdowns.len(), 2).unwrap();
    ThreadComm::run_with(cfg, |comm| {
        let traced = Traced::new(comm.split(0, comm.rank()));
        let mg = MultigrainParams {
            groups: groups.clone(),
            balance,
            rate_weighted_rows: balance != Balance::None,
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
        (
            out.solution.eigenvalues,
            rep.imbalance_percent,
            out.multigrain.group_inner_steps,
            out.multigrain.time_limits,
        )
    })
}

#[test]
fn balanced_multigrain_matches_fine_grain_and_removes_imbalance() {
    let params = JdParams {
        nev: 2,
        block: 2,
        tol: 1e-10,
        maxits: 300,
        inner: InnerStop::Fixed,
        max_matvecs: 200_000,
        ..JdParams::default()
    };
    let spec: GenSpec = "lap3d:14".parse().unwrap();
    let a = generate(&spec).unwrap();
    let exact = matrices::generate::exact_eigenvalues(&spec).unwrap();
    let fine = ThreadComm::run(4, |comm| {
        solve_distributed(&a, &comm, &params, None)
            .unwrap()
            .0
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
    assert!(imb_u > 30.0, "unbalanced imbalance {imb_u:.2}%");
    assert!(imb_b < 10.0, "balanced imbalance {imb_b:.2}%");
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
