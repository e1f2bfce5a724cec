//! Checkpoint sets of several processes: one file per rank, written on a
//! timer, and the consistent set a resume starts from.
//!
//! With `nprocs` processes, rank `r` writes its rows to `FILE.rank<r>`
//! ([`rank_path`]); one process writes `FILE` itself. A rank's previous
//! checkpoint is kept as `FILE.rank<r>.prev` ([`prev_path`]): the ranks rename
//! their files one after the other, so a kill between two renames leaves
//! newest files of two different outer iterations, but the previous files
//! still complete one of them. A resume takes the newest outer iteration for
//! which every rank has a checkpoint ([`common_iteration`]): [`read_set`]
//! when one process reads every rank's files (thread ranks), [`agree_on_set`]
//! when each process reads its own ([`rank_options`]) and the ranks agree over
//! a communicator (MPI).
//!
//! ```
//! use jdmg::checkpoint::set::{read_set, FileSink};
//! use jdmg::prelude::*;
//!
//! let dir = std::env::temp_dir().join(format!("jdmg-set-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let file = dir.join("state.ckpt");
//! let a = matrices::generate::generate(&"lap3d:8".parse().unwrap()).unwrap();
//! let params = JdParams {
//!     problem: ProblemSettings { nev: 2, tol: 1e-10, ..Default::default() },
//!     ..JdParams::default()
//! };
//! // two thread ranks, a checkpoint at every outer iteration (0 seconds apart)
//! ThreadComm::run(2, |comm| {
//!     let mut sink = FileSink::new(&file, comm.rank(), comm.size(), 0.0);
//!     Solver::new(&a, &params).comm(&comm).checkpoint(&mut sink).run().map(|s| s.eigenvalues)
//! });
//! let set = read_set(&file, 2).expect("a checkpoint of each rank");
//! assert_eq!(set.checkpoints.len(), 2);
//! let resumed = ThreadComm::run(2, |comm| {
//!     let ck = &set.checkpoints[comm.rank()];
//!     Solver::new(&a, &params).comm(&comm).resume(ck).run().map(|s| s.eigenvalues)
//! });
//! assert!(resumed.iter().all(|r| r.is_ok()));
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```

use std::path::{Path, PathBuf};
use std::time::Instant;

use lblib::Comm;
use thiserror::Error;

use super::{rank_path, Checkpoint, CheckpointError, CheckpointRequest, CheckpointSink};
use crate::solution::Stats;

/// Where a rank's previous checkpoint is kept: `FILE.rank<r>.prev` for the
/// rank file `FILE.rank<r>`.
pub fn prev_path(p: &Path) -> PathBuf {
    let mut s = p.as_os_str().to_os_string();
    s.push(".prev");
    PathBuf::from(s)
}

/// Why a checkpoint set cannot be resumed from. Every message starts with
/// the file (or the set's base path) it is about.
#[derive(Debug, Error)]
pub enum ResumeError {
    /// The rank's file does not exist (and no checkpoint of another process
    /// count was found in its place).
    #[error("{}: {source}", path.display())]
    Missing {
        /// The file looked for.
        path: PathBuf,
        /// The error of opening it.
        source: std::io::Error,
    },
    /// The file cannot be read or decoded.
    #[error("{}: {source}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why it cannot be used.
        source: CheckpointError,
    },
    /// The checkpoint was written by another number of processes.
    #[error("{}: the checkpoint was written by {found} process(es), this run has {expected}: resume with as many ranks as wrote it", path.display())]
    ProcessCount {
        /// The file.
        path: PathBuf,
        /// Processes that wrote it.
        found: usize,
        /// Processes of this run.
        expected: usize,
    },
    /// The file holds another rank's rows.
    #[error("{}: the file holds rank {found}, expected {expected}", path.display())]
    Rank {
        /// The file.
        path: PathBuf,
        /// The rank in the file.
        found: usize,
        /// The rank reading it.
        expected: usize,
    },
    /// No outer iteration has a checkpoint of every rank.
    #[error("{}: the ranks' checkpoints are of different outer iterations ({iterations:?}): no consistent set", path.display())]
    NoCommonIteration {
        /// The set's base path.
        path: PathBuf,
        /// The outer iterations of each rank's checkpoints, newest first.
        iterations: Vec<Vec<usize>>,
    },
    /// The checkpoints are of a matrix of another dimension.
    #[error("{}: the checkpoint is of a matrix of dimension n = {found}, this one has n = {expected}", path.display())]
    Dimension {
        /// The set's base path.
        path: PathBuf,
        /// Dimension in the checkpoint.
        found: usize,
        /// Dimension of this run's matrix.
        expected: usize,
    },
}

/// The checkpoints rank `r` of `nprocs` processes may resume from, newest
/// first: its file and, with several processes, its `.prev`. Each is checked
/// against the process count and the rank (the dimension is checked later,
/// once the matrix is known: [`check_dimension`]).
///
/// # Errors
/// When the newest file is missing (naming the process count of a checkpoint
/// found under the other naming: `FILE` or `FILE.rank0`), unreadable,
/// corrupt, or of another process count or rank, and no `.prev` is usable.
pub fn rank_options(path: &Path, r: usize, nprocs: usize) -> Result<Vec<Checkpoint>, ResumeError> {
    let check = |p: &Path, ck: Checkpoint| -> Result<Checkpoint, ResumeError> {
        if ck.nprocs != nprocs {
            return Err(ResumeError::ProcessCount {
                path: p.to_path_buf(),
                found: ck.nprocs,
                expected: nprocs,
            });
        }
        if ck.rank != r {
            return Err(ResumeError::Rank {
                path: p.to_path_buf(),
                found: ck.rank,
                expected: r,
            });
        }
        Ok(ck)
    };
    let p = rank_path(path, r, nprocs);
    let newest = match Checkpoint::read(&p) {
        Ok(ck) => check(&p, ck),
        Err(CheckpointError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            // written by another number of processes?
            let other = if nprocs > 1 {
                path.to_path_buf()
            } else {
                rank_path(path, 0, 2)
            };
            match Checkpoint::read(&other) {
                Ok(ck) => Err(ResumeError::ProcessCount {
                    path: other,
                    found: ck.nprocs,
                    expected: nprocs,
                }),
                Err(_) => Err(ResumeError::Missing { path: p, source }),
            }
        }
        Err(source) => Err(ResumeError::Unreadable { path: p, source }),
    };
    let mut out = Vec::new();
    let err = match newest {
        Ok(ck) => {
            out.push(ck);
            None
        }
        Err(e) => Some(e),
    };
    if nprocs > 1 {
        let pp = prev_path(&rank_path(path, r, nprocs));
        if let Some(ck) = Checkpoint::read(&pp)
            .ok()
            .and_then(|ck| check(&pp, ck).ok())
        {
            out.push(ck);
        }
    }
    match (out.is_empty(), err) {
        (true, Some(e)) => Err(e),
        _ => Ok(out),
    }
}

/// The newest outer iteration for which every rank has a checkpoint
/// (`iters[r]`: the outer iterations of rank r's checkpoints).
pub fn common_iteration(iters: &[Vec<usize>]) -> Option<usize> {
    let first = iters.first()?;
    first
        .iter()
        .copied()
        .filter(|it| iters.iter().all(|v| v.contains(it)))
        .max()
}

/// Picks the checkpoint of outer iteration `it` from each rank's options.
fn pick(options: Vec<Vec<Checkpoint>>, it: usize) -> Vec<Checkpoint> {
    options
        .into_iter()
        .filter_map(|v| v.into_iter().find(|c| c.stats.outer_iterations == it))
        .collect()
}

/// The checkpoints a resume starts from.
#[derive(Debug, Clone)]
pub struct ResumeSet {
    /// One checkpoint per rank ([`read_set`]: rank r at index r;
    /// [`agree_on_set`]: this rank's), all of outer iteration `iteration`.
    pub checkpoints: Vec<Checkpoint>,
    /// The outer iteration of the set.
    pub iteration: usize,
    /// Whether the newest files did not form a set, so that some ranks'
    /// previous checkpoints were taken.
    pub previous: bool,
}

/// Reads the checkpoints of every rank of `nprocs` processes (all in this
/// process: thread ranks, or one process) and returns the newest set of one
/// outer iteration.
///
/// # Errors
/// As [`rank_options`], or [`ResumeError::NoCommonIteration`].
pub fn read_set(path: &Path, nprocs: usize) -> Result<ResumeSet, ResumeError> {
    let options = (0..nprocs)
        .map(|r| rank_options(path, r, nprocs))
        .collect::<Result<Vec<_>, _>>()?;
    let iters: Vec<Vec<usize>> = options
        .iter()
        .map(|v| v.iter().map(|c| c.stats.outer_iterations).collect())
        .collect();
    let Some(it) = common_iteration(&iters) else {
        return Err(ResumeError::NoCommonIteration {
            path: path.to_path_buf(),
            iterations: iters,
        });
    };
    Ok(ResumeSet {
        previous: iters.iter().any(|v| v.first() != Some(&it)),
        checkpoints: pick(options, it),
        iteration: it,
    })
}

/// The newest set of one outer iteration when every process read its own
/// options (`mine`, from [`rank_options`]): the ranks of `comm` exchange the
/// outer iterations they hold (one all-gather) and each keeps its checkpoint
/// of the newest common one. Collective; every rank gets the same outcome.
///
/// # Errors
/// [`ResumeError::NoCommonIteration`] (with `path`, the set's base path) on
/// every rank.
pub fn agree_on_set<C: Comm + ?Sized>(
    comm: &C,
    path: &Path,
    mine: Vec<Checkpoint>,
) -> Result<ResumeSet, ResumeError> {
    let mut slots = [u64::MAX; 2];
    for (slot, c) in slots.iter_mut().zip(&mine) {
        *slot = c.stats.outer_iterations as u64;
    }
    let mut all = vec![0u64; 2 * comm.size()];
    comm.all_gather_u64(&slots, &mut all);
    let iters: Vec<Vec<usize>> = all
        .chunks(2)
        .map(|c| {
            c.iter()
                .filter(|&&i| i != u64::MAX)
                .map(|&i| i as usize)
                .collect()
        })
        .collect();
    match common_iteration(&iters) {
        Some(it) => Ok(ResumeSet {
            previous: iters.iter().any(|v| v.first() != Some(&it)),
            checkpoints: pick(vec![mine], it),
            iteration: it,
        }),
        None => Err(ResumeError::NoCommonIteration {
            path: path.to_path_buf(),
            iterations: iters,
        }),
    }
}

/// Checks that the checkpoints to resume from are of a matrix of dimension
/// `n` (`path`: the set's base path, for the message).
///
/// # Errors
/// [`ResumeError::Dimension`] naming both dimensions.
pub fn check_dimension(path: &Path, set: &[Checkpoint], n: usize) -> Result<(), ResumeError> {
    match set.iter().find(|c| c.n_global != n) {
        Some(c) => Err(ResumeError::Dimension {
            path: path.to_path_buf(),
            found: c.n_global,
            expected: n,
        }),
        None => Ok(()),
    }
}

/// A [`CheckpointSink`] writing this rank's checkpoints to its file of a set
/// ([`rank_path`]) every `every` seconds, atomically; with several processes
/// the previous one is kept as `.prev` ([`prev_path`]). An optional stop test
/// ([`FileSink::stop_when`], e.g. a signal flag) asks for a last checkpoint
/// and a stop. Write errors do not stop the solve: the last one is kept
/// ([`FileSink::last_error`]).
pub struct FileSink {
    path: PathBuf,
    every: f64,
    last: Instant,
    keep_previous: bool,
    stop: Option<Box<dyn FnMut() -> bool + Send>>,
    error: Option<CheckpointError>,
}

impl FileSink {
    /// The sink of rank `rank` of `nprocs` processes for the set `path`,
    /// saving every `every_seconds` (0: at every outer iteration).
    pub fn new(path: &Path, rank: usize, nprocs: usize, every_seconds: f64) -> Self {
        Self {
            path: rank_path(path, rank, nprocs),
            every: every_seconds,
            last: Instant::now(),
            keep_previous: nprocs > 1,
            stop: None,
            error: None,
        }
    }

    /// Asks for a last checkpoint and a stop as soon as `stop()` is true
    /// (tested at every outer iteration).
    pub fn stop_when(mut self, stop: impl FnMut() -> bool + Send + 'static) -> Self {
        self.stop = Some(Box::new(stop));
        self
    }

    /// This rank's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The error of the latest save, if it failed.
    pub fn last_error(&self) -> Option<&CheckpointError> {
        self.error.as_ref()
    }
}

impl CheckpointSink for FileSink {
    fn poll(&mut self, _stats: &Stats) -> CheckpointRequest {
        if self.stop.as_mut().is_some_and(|stop| stop()) {
            CheckpointRequest::SaveAndStop
        } else if self.last.elapsed().as_secs_f64() >= self.every {
            CheckpointRequest::Save
        } else {
            CheckpointRequest::Continue
        }
    }

    fn save(&mut self, ck: &Checkpoint, _last: bool) {
        if self.keep_previous && self.path.is_file() {
            let _ = std::fs::rename(&self.path, prev_path(&self.path));
        }
        self.error = ck.write_atomic(&self.path).err();
        self.last = Instant::now();
    }
}

/// A [`CheckpointSink`] that writes nothing but stops the solve when `F`
/// returns true. Under several processes the sinks' requests are combined
/// (one global max per outer iteration), so a stop seen by one rank (a
/// signal) stops every rank at the same outer iteration: give one on every
/// rank.
pub struct StopWhen<F>(pub F);

impl<F: FnMut() -> bool> CheckpointSink for StopWhen<F> {
    fn poll(&mut self, _stats: &Stats) -> CheckpointRequest {
        if (self.0)() {
            CheckpointRequest::SaveAndStop
        } else {
            CheckpointRequest::Continue
        }
    }

    fn save(&mut self, _ck: &Checkpoint, _last: bool) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_iterations() {
        assert_eq!(common_iteration(&[vec![5, 3], vec![3]]), Some(3));
        assert_eq!(common_iteration(&[vec![5, 3], vec![5, 3]]), Some(5));
        assert_eq!(common_iteration(&[vec![5], vec![3]]), None);
        assert_eq!(common_iteration(&[]), None);
    }

    #[test]
    fn prev_paths() {
        assert_eq!(
            prev_path(Path::new("/tmp/x.ckpt.rank1")),
            Path::new("/tmp/x.ckpt.rank1.prev")
        );
    }

    #[test]
    fn missing_files_name_the_rank_file() {
        let dir = std::env::temp_dir().join(format!("jdmg-set-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let e = read_set(&dir.join("none.ckpt"), 2).unwrap_err();
        assert!(matches!(e, ResumeError::Missing { .. }), "{e}");
        assert!(e.to_string().contains("none.ckpt.rank0"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
