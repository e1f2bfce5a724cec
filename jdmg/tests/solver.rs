//! The one entry point, `jdmg::Solver`: serial, fine-grain and multigrain
//! solves take the same hooks. Solve groups get the observer, checkpoints
//! (written, then resumed to the same eigenvalues), JDQMR and the internal
//! scale, each checked against the fine-grain answer.

use jdmg::{BasisSettings, CorrectionSettings, ProblemSettings};
use std::ops::ControlFlow;

use jdmg::{
    Balance, Checkpoint, CheckpointRequest, CheckpointSink, InnerSolver, IterationEvent, JdParams,
    MultigrainParams, Solver, Stats,
};
use lblib::{Comm, ThreadComm};
use matrices::generate::{generate, GenSpec};
use matrices::CsrMatrix;

fn lap3d(n: usize) -> CsrMatrix {
    generate(&format!("lap3d:{n}").parse::<GenSpec>().unwrap()).unwrap()
}

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
        ..JdParams::default()
    }
}

/// Deterministic solve groups: 2 groups of 2 ranks, no balancing (rows by
/// equal nonzeros, no timed rates, no re-partition).
fn groups() -> MultigrainParams {
    MultigrainParams {
        groups: jdmg::parse_groups("equal", 4, 2).unwrap(),
        balance: Balance::None,
        rate_weighted_rows: false,
        ..MultigrainParams::default()
    }
}

/// The fine-grain eigenvalues of `a` on 4 thread ranks.
fn fine_grain(a: &CsrMatrix, params: &JdParams) -> Vec<f64> {
    let out = ThreadComm::run(4, |comm| {
        Solver::new(a, params)
            .comm(&comm)
            .run()
            .expect("fine grain converges")
            .eigenvalues
    });
    out[0].clone()
}

fn assert_close(got: &[f64], want: &[f64], rel: f64) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= rel * w.abs().max(f64::MIN_POSITIVE),
            "{got:?} vs {want:?}"
        );
    }
}

/// A multigrain solve of `a` on 4 thread ranks with `f` adding hooks; every
/// rank's outcome.
fn multigrain<T: Send>(
    a: &CsrMatrix,
    params: &JdParams,
    mg: &MultigrainParams,
    f: impl Fn(&lblib::ThreadComm, &CsrMatrix, &JdParams, &MultigrainParams) -> T + Sync,
) -> Vec<T> {
    ThreadComm::run(4, |comm| f(&comm, a, params, mg))
}

#[test]
fn serial_and_fine_grain_take_several_observers() {
    let a = lap3d(8);
    let p = params();
    let (mut first, mut second) = (Vec::new(), 0usize);
    let mut one = |ev: &IterationEvent| {
        first.push(ev.residual_norms.clone());
        ControlFlow::Continue(())
    };
    let mut two = |_: &IterationEvent| {
        second += 1;
        ControlFlow::Continue(())
    };
    let serial = Solver::new(&a, &p)
        .observer(&mut one)
        .observer(&mut two)
        .run()
        .unwrap();
    assert_eq!(first.len(), second);
    assert_eq!(first.len(), serial.stats.outer_iterations);
    assert!(first.iter().flatten().all(|r| r.is_finite() && *r >= 0.0));
    assert_close(&serial.eigenvalues, &fine_grain(&a, &p), 1e-9);
}

/// The observer of a multigrain solve sees every outer iteration's Ritz
/// values and residuals, and the eigenvalues are the fine-grain ones.
#[test]
fn solve_groups_call_the_observer_with_residuals() {
    let a = lap3d(10);
    let p = params();
    let want = fine_grain(&a, &p);
    let out = multigrain(&a, &p, &groups(), |comm, a, p, mg| {
        let mut events: Vec<IterationEvent> = Vec::new();
        let mut watch = |ev: &IterationEvent| {
            events.push(ev.clone());
            ControlFlow::Continue(())
        };
        let s = Solver::new(a, p)
            .groups(comm, mg)
            .observer(&mut watch)
            .run()
            .expect("converges");
        (s.eigenvalues, s.stats.outer_iterations, events)
    });
    for (vals, outer, events) in &out {
        assert_close(vals, &want, 1e-8);
        assert_eq!(events.len(), *outer, "one event per outer iteration");
        let first = &events[0];
        let last = events.last().unwrap();
        assert!(!first.residual_norms.is_empty());
        assert!(first
            .residual_norms
            .iter()
            .all(|r| r.is_finite() && *r > 0.0));
        assert!(last.nconverged >= 4, "{}", last.nconverged);
        assert!(last.outer_iteration == *outer);
        // the residuals fell by orders of magnitude over the run
        let r0 = first.residual_norms[0];
        let best = events
            .iter()
            .flat_map(|e| e.residual_norms.iter().copied())
            .fold(f64::INFINITY, f64::min);
        assert!(best < 1e-6 * r0, "{r0} -> {best}");
    }
}

/// Takes a checkpoint at its `at`-th poll and stops there.
struct SaveAt {
    at: usize,
    polls: usize,
    saved: Option<Checkpoint>,
}

impl CheckpointSink for SaveAt {
    fn poll(&mut self, _stats: &Stats) -> CheckpointRequest {
        self.polls += 1;
        if self.polls == self.at {
            CheckpointRequest::SaveAndStop
        } else {
            CheckpointRequest::Continue
        }
    }

    fn save(&mut self, ck: &Checkpoint, _last: bool) {
        self.saved = Some(ck.clone());
    }
}

/// A multigrain solve writes a checkpoint (each rank its fine rows), stops,
/// and a solve resumed from the checkpoints ends with the eigenvalues of the
/// uninterrupted solve.
#[test]
fn solve_groups_write_and_resume_checkpoints() {
    let a = lap3d(10);
    let p = params();
    let mg = groups();
    let whole = multigrain(&a, &p, &mg, |comm, a, p, mg| {
        let s = Solver::new(a, p).groups(comm, mg).run().expect("converges");
        (s.eigenvalues, s.stats.outer_iterations, s.stats.matvecs)
    });
    let (want, outer, matvecs) = whole[0].clone();
    assert!(outer > 6, "{outer} outer iterations");
    assert_close(&want, &fine_grain(&a, &p), 1e-8);
    let saved = multigrain(&a, &p, &mg, |comm, a, p, mg| {
        let mut sink = SaveAt {
            at: 5,
            polls: 0,
            saved: None,
        };
        let r = Solver::new(a, p)
            .groups(comm, mg)
            .checkpoint(&mut sink)
            .run();
        assert!(
            matches!(&r, Ok(s) if s.outcome == jdmg::Outcome::Stopped),
            "{r:?}"
        );
        sink.saved.expect("a checkpoint")
    });
    // a checkpoint is of the fine-grain rank (ordered by fine part in the
    // hierarchical layout), held by the process of its base rank
    let fine_ranks = jdmg::fine_rank_keys(&mg.groups, mg.hierarchical);
    for (r, ck) in saved.iter().enumerate() {
        assert_eq!(ck.nprocs, 4);
        assert_eq!(ck.rank, fine_ranks[r]);
        assert_eq!(ck.stats.outer_iterations, 5);
        assert!(ck.n_local > 0 && ck.n_local < a.nrows());
    }
    // through the file format, as `jdmg solve --groups --resume` reads them
    let saved: Vec<Checkpoint> = saved
        .iter()
        .map(|c| Checkpoint::from_bytes(&c.to_bytes()).unwrap())
        .collect();
    let resumed = multigrain(&a, &p, &mg, |comm, a, p, mg| {
        let s = Solver::new(a, p)
            .groups(comm, mg)
            .resume(&saved[comm.rank()])
            .run()
            .expect("the resumed solve converges");
        (s.eigenvalues, s.stats.outer_iterations, s.stats.matvecs)
    });
    for (vals, o, mv) in &resumed {
        assert_close(vals, &want, 1e-10);
        // the counters go on from the checkpoint's
        assert_eq!(*o, outer);
        assert_eq!(*mv, matvecs);
    }
}

/// `inner_solver = qmrs` in solve groups (it used to be refused): the JDQMR
/// inner solves give the fine-grain eigenvalues.
#[test]
fn solve_groups_run_jdqmr() {
    let a = lap3d(10);
    let p = JdParams {
        correction: CorrectionSettings {
            solver: InnerSolver::Qmrs,
            ..params().correction
        },
        ..params()
    };
    let want = fine_grain(&a, &params());
    let out = multigrain(&a, &p, &groups(), |comm, a, p, mg| {
        let s = Solver::new(a, p).groups(comm, mg).run().expect("converges");
        (s.eigenvalues, s.stats.inner_solver)
    });
    for (vals, solver) in &out {
        assert_close(vals, &want, 1e-8);
        assert_eq!(*solver, InnerSolver::Qmrs);
    }
}

/// A matrix of norm 1e-120 in solve groups (it used to be refused: the
/// groups did not know the solver's internal scale): the eigenvalues are
/// 1e-120 times those of the unscaled matrix.
#[test]
fn solve_groups_scale_tiny_matrices() {
    let a = lap3d(10);
    let mut tiny = a.clone();
    tiny.data_mut().iter_mut().for_each(|v| *v *= 1e-120);
    let p = params();
    let want: Vec<f64> = fine_grain(&a, &p).iter().map(|v| v * 1e-120).collect();
    let out = multigrain(&tiny, &p, &groups(), |comm, a, p, mg| {
        let s = Solver::new(a, p).groups(comm, mg).run().expect("converges");
        (s.eigenvalues, s.stats.scale)
    });
    for (vals, scale) in &out {
        assert!(*scale > 1e100, "scale {scale:e}");
        assert_close(vals, &want, 1e-8);
    }
}

/// Solve groups take start and deflation vectors: deflating the lowest
/// eigenvector of lap3d:6 (known in closed form) gives the next four
/// eigenvalues, and start vectors near the wanted eigenvectors give the same
/// eigenvalues as a serial solve, on every rank.
#[test]
fn solve_groups_take_start_and_deflation_vectors() {
    let m = 6;
    let a = lap3d(m);
    let n = a.nrows();
    let p = params();
    let five = JdParams {
        problem: ProblemSettings {
            nev: 5,
            ..p.problem
        },
        ..p.clone()
    };
    let serial = Solver::new(&a, &five).run().expect("serial converges");
    let pi = std::f64::consts::PI / (m + 1) as f64;
    let y: Vec<f64> = (0..n)
        .map(|r| {
            let (i, j, k) = (r % m + 1, (r / m) % m + 1, r / (m * m) + 1);
            (pi * i as f64).sin() * (pi * j as f64).sin() * (pi * k as f64).sin()
        })
        .collect();
    let x0: Vec<f64> = serial.eigenvectors[..4 * n]
        .iter()
        .enumerate()
        .map(|(q, v)| v + 1e-3 * ((q % 7) as f64 - 3.0))
        .collect();
    for (spaces, want) in [
        (
            jdmg::Spaces {
                deflation: &y,
                ..jdmg::Spaces::default()
            },
            &serial.eigenvalues[1..5],
        ),
        (
            jdmg::Spaces {
                initial: &x0,
                ..jdmg::Spaces::default()
            },
            &serial.eigenvalues[..4],
        ),
    ] {
        let out = multigrain(&a, &p, &groups(), |comm, a, p, mg| {
            Solver::new(a, p).spaces(spaces).groups(comm, mg).run()
        });
        for r in out {
            let s = r.expect("solve groups converge");
            assert_close(&s.eigenvalues, want, 1e-8);
            assert_eq!(
                s.stats.deflation_vectors,
                usize::from(!spaces.deflation.is_empty())
            );
        }
    }
}

/// The builder takes a mass matrix: with M = 2I the eigenvalues of K x = λ M x
/// are half those of K (serial, fine grain and solve groups).
#[test]
fn mass_matrix_through_the_builder() {
    let a = lap3d(8);
    let n = a.nrows();
    let two =
        CsrMatrix::from_triplets(n, n, &(0..n).map(|i| (i, i, 2.0)).collect::<Vec<_>>()).unwrap();
    let p = params();
    let plain = Solver::new(&a, &p).run().unwrap().eigenvalues;
    let halved: Vec<f64> = plain.iter().map(|l| l / 2.0).collect();
    let serial = Solver::new(&a, &p).mass(&two).run().unwrap();
    assert_close(&serial.eigenvalues, &halved, 1e-9);
    let fine = ThreadComm::run(2, |comm| {
        Solver::new(&a, &p)
            .mass(&two)
            .comm(&comm)
            .run()
            .unwrap()
            .eigenvalues
    });
    for ev in fine {
        assert_close(&ev, &halved, 1e-9);
    }
    let grouped = multigrain(&a, &p, &groups(), |comm, a, p, mg| {
        Solver::new(a, p).mass(&two).groups(comm, mg).run()
    });
    for r in grouped {
        let s = r.unwrap_or_else(|e| panic!("solve groups with a mass matrix: {e}"));
        assert_close(&s.eigenvalues, &halved, 1e-9);
        assert!(s.stats.mass_matvecs > 0);
    }
}

/// The projection phase's split (`Stats::phases`): every step that ran has
/// its time, the steps fit inside `projection_seconds`, and the split of the
/// whole solve into SpMV, preconditioner and dense work adds up.
#[test]
fn projection_steps_are_timed_inside_the_projection_phase() {
    let a = lap3d(12);
    let prm = JdParams {
        basis: BasisSettings {
            max_basis: 12,
            ..params().basis
        },
        ..params()
    };
    let sol = Solver::new(&a, &prm).run().expect("converges");
    let s = &sol.stats;
    assert!(s.restarts > 0 && s.locked == 4, "{s:?}");
    let ph = &s.phases;
    let steps = ph.values();
    for t in steps {
        assert!(t > 0.0 && t.is_finite(), "{ph:?}");
    }
    let sum: f64 = steps.iter().sum();
    assert!(
        sum <= s.projection_seconds + 1e-9,
        "{sum} > {}",
        s.projection_seconds
    );
    let split = s.spmv_seconds + s.precond_seconds + s.dense_seconds;
    assert!(
        (split - (s.projection_seconds + s.correction_seconds)).abs() <= 1e-9,
        "{split} vs {} + {}",
        s.projection_seconds,
        s.correction_seconds
    );
    // The split is in the JSON report too.
    let json = serde_json::to_value(s).unwrap();
    assert_eq!(json["phases"]["restart"].as_f64(), Some(ph.restart));
}
