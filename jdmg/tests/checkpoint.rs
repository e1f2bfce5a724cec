//! Checkpoint and restart through the library (issue #13): a solve checkpointed
//! at outer iteration k and resumed reaches the uninterrupted solve's
//! eigenvalues with fewer matvecs than starting over; files round-trip and
//! corrupt or foreign checkpoints are refused with typed errors.

mod common;

use jdmg::{
    solve_matrix, Checkpoint, CheckpointError, CheckpointRequest, CheckpointSink, Checkpointing,
    JdError, JdParams, Solution, Stats,
};
use jdmg::{BasisSettings, CorrectionSettings, ProblemSettings};
use lblib::{Comm, ThreadComm};
use matrices::generate::{generate, GenSpec};
use matrices::CsrMatrix;

/// Takes one checkpoint at outer iteration `at` (and stops there when `stop`).
struct AtIteration {
    at: usize,
    stop: bool,
    taken: Vec<(Checkpoint, bool)>,
}

impl AtIteration {
    fn new(at: usize, stop: bool) -> Self {
        Self {
            at,
            stop,
            taken: Vec::new(),
        }
    }
}

impl CheckpointSink for AtIteration {
    fn poll(&mut self, stats: &Stats) -> CheckpointRequest {
        match (stats.outer_iterations == self.at, self.stop) {
            (true, true) => CheckpointRequest::SaveAndStop,
            (true, false) => CheckpointRequest::Save,
            _ => CheckpointRequest::Continue,
        }
    }
    fn save(&mut self, ck: &Checkpoint, last: bool) {
        self.taken.push((ck.clone(), last));
    }
}

fn lap3d(n: usize) -> CsrMatrix {
    let spec: GenSpec = format!("lap3d:{n}").parse().unwrap();
    generate(&spec).unwrap()
}

/// A fixed correction method: `InnerSolver::Auto` switches on timings, and these
/// tests compare the steps of two runs.
fn params() -> JdParams {
    JdParams {
        problem: ProblemSettings {
            nev: 4,
            tol: 1e-10,
            ..Default::default()
        },
        correction: CorrectionSettings {
            solver: jdmg::InnerSolver::Bicgstab,
            ..Default::default()
        },
        ..JdParams::default()
    }
}

fn assert_same_eigenvalues(a: &Solution, b: &Solution) {
    assert_eq!(a.eigenvalues.len(), b.eigenvalues.len());
    for (x, y) in a.eigenvalues.iter().zip(&b.eigenvalues) {
        assert!(
            (x - y).abs() <= 1e-10 * x.abs().max(1.0),
            "{:?} vs {:?}",
            a.eigenvalues,
            b.eigenvalues
        );
    }
}

/// Serial: checkpoint at iteration k, write it, read it back, resume; the
/// resumed solve ends where the uninterrupted one does.
#[test]
fn resumed_serial_solve_matches_the_uninterrupted_one() {
    let a = lap3d(12);
    let p = params();
    let full = solve_matrix(&a, &p, None).unwrap();
    assert!(full.stats.outer_iterations > 12, "{:?}", full.stats);

    // A solve with a sink takes the same steps as one without.
    let k = full.stats.outer_iterations / 2;
    let mut sink = AtIteration::new(k, false);
    let ck = Checkpointing {
        resume: None,
        sink: Some(&mut sink),
    };
    let with_sink = jdmg::Solver::new(&a, &p).checkpointing(ck).run().unwrap();
    assert_eq!(with_sink.eigenvalues, full.eigenvalues);
    assert_eq!(with_sink.stats.matvecs, full.stats.matvecs);
    assert_eq!(sink.taken.len(), 1);
    let (taken, last) = sink.taken.pop().unwrap();
    assert!(!last);
    assert_eq!(taken.stats.outer_iterations, k);
    assert!(taken.stats.matvecs > 0 && taken.stats.matvecs < full.stats.matvecs);

    // Through a file.
    let dir = std::env::temp_dir().join(format!("jdmg-ckpt-lib-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("serial.ckpt");
    taken.write_atomic(&path).unwrap();
    let back = Checkpoint::read(&path).unwrap();
    assert!(back == taken, "the file does not read back equal");

    let ck = Checkpointing {
        resume: Some(&back),
        sink: None,
    };
    let resumed = jdmg::Solver::new(&a, &p).checkpointing(ck).run().unwrap();
    assert_same_eigenvalues(&resumed, &full);
    // The same steps: the same totals.
    assert_eq!(resumed.stats.matvecs, full.stats.matvecs);
    assert_eq!(resumed.stats.outer_iterations, full.stats.outer_iterations);
    let extra = resumed.stats.matvecs - back.stats.matvecs;
    assert!(
        extra < full.stats.matvecs,
        "resumed run spent {extra} matvecs, the whole solve {}",
        full.stats.matvecs
    );
    // Residuals recomputed from the returned vectors.
    let bound = 10.0 * p.problem.tol * full.stats.anorm_estimate;
    common::assert_pairs(&a, &resumed, bound);
    for (l, want) in resumed.eigenvalues.iter().zip(&full.eigenvalues) {
        assert!((l - want).abs() <= 1e-10 * want.abs());
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// A SaveAndStop request ends the solve with `Stopped` after a last
/// checkpoint; resuming it finishes the job.
#[test]
fn stop_with_a_last_checkpoint_then_resume() {
    let a = lap3d(10);
    let p = params();
    let full = solve_matrix(&a, &p, None).unwrap();
    let k = full.stats.outer_iterations / 3;
    let mut sink = AtIteration::new(k, true);
    let ck = Checkpointing {
        resume: None,
        sink: Some(&mut sink),
    };
    let stopped = jdmg::Solver::new(&a, &p).checkpointing(ck).run();
    let partial = match stopped {
        Ok(partial) if partial.outcome == jdmg::Outcome::Stopped => {
            assert_eq!(partial.wanted, 4);
            partial
        }
        other => panic!("expected Stopped, got {other:?}"),
    };
    assert_eq!(partial.stats.outer_iterations, k);
    assert_eq!(sink.taken.len(), 1);
    let (last, is_last) = sink.taken.pop().unwrap();
    assert!(is_last);
    assert_eq!(last.stats.matvecs, partial.stats.matvecs);
    let resumed = jdmg::Solver::new(&a, &p)
        .checkpointing(Checkpointing {
            resume: Some(&last),
            sink: None,
        })
        .run()
        .unwrap();
    assert_same_eigenvalues(&resumed, &full);
    assert_eq!(resumed.stats.matvecs, full.stats.matvecs);
    assert!(resumed.stats.matvecs - last.stats.matvecs < full.stats.matvecs);
}

/// The checkpoint a solve of `a` takes (and stops at) at outer iteration 3.
fn checkpoint_at_iteration_3(a: &CsrMatrix, p: &JdParams) -> Checkpoint {
    let mut sink = AtIteration::new(3, true);
    let _ = jdmg::Solver::new(a, p)
        .checkpointing(Checkpointing {
            resume: None,
            sink: Some(&mut sink),
        })
        .run();
    sink.taken.pop().unwrap().0
}

/// A checkpoint of another problem or other parameters is refused.
#[test]
fn foreign_checkpoints_are_refused() {
    let a = lap3d(8);
    let p = params();
    let ck = checkpoint_at_iteration_3(&a, &p);
    let resume = |a: &CsrMatrix, p: &JdParams| {
        jdmg::Solver::new(a, p)
            .checkpointing(Checkpointing {
                resume: Some(&ck),
                sink: None,
            })
            .run()
    };
    match resume(&lap3d(9), &p) {
        Err(JdError::Checkpoint(CheckpointError::Mismatch {
            what,
            checkpoint,
            current,
        })) => {
            assert!(what.contains("dimension"), "{what}");
            assert_eq!((checkpoint.as_str(), current.as_str()), ("512", "729"));
        }
        other => panic!("expected a mismatch, got {other:?}"),
    }
    let other_nev = JdParams {
        problem: ProblemSettings {
            nev: 5,
            ..p.problem
        },
        ..p.clone()
    };
    let other_seed = JdParams {
        basis: BasisSettings { seed: 2, ..p.basis },
        ..p.clone()
    };
    for other in [&other_nev, &other_seed] {
        assert!(matches!(
            resume(&a, other),
            Err(JdError::Checkpoint(CheckpointError::Mismatch { .. }))
        ));
    }
    // A looser tolerance is allowed and converges.
    let looser = JdParams {
        problem: ProblemSettings {
            tol: 1e-8,
            ..p.problem
        },
        ..p
    };
    assert!(resume(&a, &looser).is_ok());
}

/// Write/read round trip of a real solver state; a flipped byte is a checksum
/// error, another version a version error, another file a magic error.
#[test]
fn file_round_trip_and_corruption() {
    let a = lap3d(8);
    let mut sink = AtIteration::new(5, true);
    let _ = jdmg::Solver::new(&a, &params())
        .checkpointing(Checkpointing {
            resume: None,
            sink: Some(&mut sink),
        })
        .run();
    let (ck, _) = sink.taken.pop().unwrap();
    assert!(ck.basis_size > 0 && ck.new_block > 0);
    let bytes = ck.to_bytes();
    assert!(
        Checkpoint::from_bytes(&bytes).unwrap() == ck,
        "round trip differs"
    );
    let mut flipped = bytes.clone();
    let mid = bytes.len() / 2;
    flipped[mid] ^= 0x01;
    assert!(matches!(
        Checkpoint::from_bytes(&flipped),
        Err(CheckpointError::Checksum { .. })
    ));
    let mut v2 = bytes.clone();
    v2[8..12].copy_from_slice(&(jdmg::checkpoint::FORMAT_VERSION + 1).to_le_bytes());
    match Checkpoint::from_bytes(&v2) {
        Err(CheckpointError::Version { found, expected }) => {
            assert_eq!(found, expected + 1);
        }
        other => panic!("expected a version error, got {other:?}"),
    }
    assert!(matches!(
        Checkpoint::from_bytes(b"%%MatrixMarket matrix coordinate real general\n"),
        Err(CheckpointError::BadMagic)
    ));
    assert!(matches!(
        Checkpoint::read(std::path::Path::new("/nonexistent/dir/x.ckpt")),
        Err(CheckpointError::Io { .. })
    ));
}

/// Fine grain on 2 thread ranks: each rank checkpoints its rows; a 2-rank
/// resume reaches the uninterrupted eigenvalues; a 3-rank resume is refused on
/// every rank.
#[test]
fn two_rank_checkpoint_resumes_on_two_ranks_only() {
    let a = lap3d(10);
    let p = params();
    let full: Vec<Solution> = ThreadComm::run(2, |comm| {
        jdmg::solve_distributed(&a, &comm, &p, None).unwrap()
    });
    let k = full[0].stats.outer_iterations / 2;
    let cks: Vec<Checkpoint> = ThreadComm::run(2, |comm| {
        let mut sink = AtIteration::new(k, true);
        let r = jdmg::Solver::new(&a, &p)
            .comm(&comm)
            .checkpointing(Checkpointing {
                resume: None,
                sink: Some(&mut sink),
            })
            .run();
        assert!(matches!(&r, Ok(s) if s.outcome == jdmg::Outcome::Stopped));
        let (ck, last) = sink.taken.pop().unwrap();
        assert!(last);
        assert_eq!(ck.rank, comm.rank());
        ck
    });
    assert_eq!(cks[0].nprocs, 2);
    assert_eq!(cks[0].n_local + cks[1].n_local, 1000);
    let resumed: Vec<Solution> = ThreadComm::run(2, |comm| {
        jdmg::Solver::new(&a, &p)
            .comm(&comm)
            .checkpointing(Checkpointing {
                resume: Some(&cks[comm.rank()]),
                sink: None,
            })
            .run()
            .unwrap()
    });
    assert_same_eigenvalues(&resumed[0], &full[0]);
    assert_eq!(resumed[0].stats.matvecs, full[0].stats.matvecs);
    assert!(resumed[0].stats.matvecs - cks[0].stats.matvecs < full[0].stats.matvecs);
    let three: Vec<bool> = ThreadComm::run(3, |comm| {
        let ck = &cks[comm.rank().min(1)];
        matches!(
            jdmg::Solver::new(&a, &p)
                .comm(&comm)
                .checkpointing(Checkpointing {
                    resume: Some(ck),
                    sink: None,
                })
                .run(),
            Err(JdError::Checkpoint(_))
        )
    });
    assert_eq!(three, vec![true, true, true]);
}

/// Issue 22: a checkpoint of another matrix of the same size (lap3d against
/// aniso3d, both 512 rows) was accepted and its eigenvalues reported as
/// converged. The checkpoint carries a fingerprint of the operator (uᵀAr and
/// ‖Ar‖² for fixed pseudo-random r, u), checked on resume; a matrix that
/// differs in one entry by 1e-6 is refused too, the same matrix is not.
#[test]
fn checkpoint_of_another_matrix_of_the_same_size_is_refused() {
    let a = lap3d(8);
    let p = params();
    let ck = checkpoint_at_iteration_3(&a, &p);
    assert!(ck.operator_fingerprint.iter().all(|f| f.is_finite()));
    let bytes = ck.to_bytes();
    let ck = Checkpoint::from_bytes(&bytes).unwrap();
    let resume = |a: &CsrMatrix| {
        jdmg::Solver::new(a, &p)
            .checkpointing(Checkpointing {
                resume: Some(&ck),
                sink: None,
            })
            .run()
    };
    let aniso: GenSpec = "aniso3d:8:1,1,1.5".parse().unwrap();
    // The diagonal entry of the middle row, up by 1e-6 (still symmetric).
    let mut data = a.data().to_vec();
    let r = 256;
    let k = (a.indptr()[r]..a.indptr()[r + 1])
        .find(|&k| a.indices()[k] as usize == r)
        .unwrap();
    data[k] += 1e-6;
    let nudged = CsrMatrix::new(512, 512, a.indptr().to_vec(), a.indices().to_vec(), data).unwrap();
    for other in [generate(&aniso).unwrap(), nudged] {
        assert_eq!(other.nrows(), 512);
        match resume(&other) {
            Err(JdError::Checkpoint(CheckpointError::Mismatch { what, .. })) => {
                assert!(what.contains("matrix"), "{what}");
            }
            other => panic!("expected a mismatch, got {other:?}"),
        }
    }
    let sol = resume(&a).unwrap();
    common::assert_pairs(&a, &sol, 1e-10 * 12.0);
}

/// Deflation vectors `y`, no start vectors.
fn deflating(y: &[f64]) -> jdmg::Spaces<'_> {
    jdmg::Spaces {
        deflation: y,
        ..jdmg::Spaces::default()
    }
}

/// A resume needs deflation vectors of the same span: another vector of the
/// same count is refused, naming the deflation vectors; the same span in
/// another basis (scaled) resumes to the uninterrupted answer.
#[test]
fn resume_with_deflation_vectors_of_another_span_is_refused() {
    let m = 8;
    let a = lap3d(m);
    let p = params();
    let mode = |kx: usize, ky: usize, kz: usize| -> Vec<f64> {
        let h = std::f64::consts::PI / (m + 1) as f64;
        (0..m * m * m)
            .map(|r| {
                let (i, j, k) = (r % m + 1, (r / m) % m + 1, r / (m * m) + 1);
                (h * (kx * i) as f64).sin()
                    * (h * (ky * j) as f64).sin()
                    * (h * (kz * k) as f64).sin()
            })
            .collect()
    };
    let y1 = mode(1, 1, 1);
    let y2 = mode(2, 1, 1);
    let y1_scaled: Vec<f64> = y1.iter().map(|v| -2.0 * v).collect();
    let full = jdmg::Solver::new(&a, &p)
        .spaces(deflating(&y1))
        .run()
        .unwrap();
    let mut sink = AtIteration::new(3, true);
    let stopped = jdmg::Solver::new(&a, &p)
        .spaces(deflating(&y1))
        .checkpoint(&mut sink)
        .run();
    assert!(
        matches!(&stopped, Ok(s) if s.outcome == jdmg::Outcome::Stopped),
        "{stopped:?}"
    );
    let ck = sink.taken.pop().unwrap().0;
    assert!(ck.deflation_fingerprint.is_some());
    match jdmg::Solver::new(&a, &p)
        .spaces(deflating(&y2))
        .resume(&ck)
        .run()
    {
        Err(JdError::Checkpoint(CheckpointError::Mismatch { what, .. })) => {
            assert!(what.contains("deflation vectors"), "{what}");
        }
        other => panic!("expected a mismatch, got {other:?}"),
    }
    let resumed = jdmg::Solver::new(&a, &p)
        .spaces(deflating(&y1_scaled))
        .resume(&ck)
        .run()
        .unwrap();
    assert_same_eigenvalues(&resumed, &full);
}
