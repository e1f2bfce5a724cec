//! A real tiled LU factorization run as a task graph on worker threads, with a
//! static tile allocation (BC, BCE or RS of [`super::tiles`]), compared with the
//! 𝔇(M) simulator fed with the measured kernel times.
//!
//! * Tiles are dense b×b faer matrices; the kernels are faer's LU with partial
//!   pivoting on the diagonal tile (GETRF), its triangular solves (TRSM) and its
//!   matrix product (GEMM). There is no pivoting across tiles: the generated
//!   matrix is strictly diagonally dominant by columns, so partial pivoting inside
//!   a diagonal tile makes no interchange either (checked: a row interchange is
//!   reported as an error).
//! * Worker w executes every task that writes a tile it owns. The executor is
//!   dependency driven: a task enters its owner's ready queue when its last
//!   predecessor finishes; a worker takes its ready task of highest priority, the
//!   same priorities as the simulator (longest path to the end, `004` §3.5),
//!   without preemption.
//! * A slower worker is emulated by running each kernel `repeats[w]` times: the
//!   first `repeats[w] − 1` times on a scratch copy of its output tile, then once
//!   in place.
//!
//! The comparison: [`predict_makespan`] runs [`super::tiles::simulate`] without
//! preemption, each task lasting the mean measured time of its kernel on its
//! worker.

use std::collections::BinaryHeap;
use std::sync::{Condvar, Mutex, RwLock};
use std::time::Instant;

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::lu::partial_pivoting::factor::lu_in_place;
use faer::linalg::matmul::matmul;
use faer::linalg::triangular_solve::{
    solve_lower_triangular_in_place, solve_unit_lower_triangular_in_place,
};
use faer::{Accum, Mat, MatRef, Par};
use serde::{Deserialize, Serialize};

use super::tiles::{simulate, Kernel, KernelCosts, Mapping, TileDag};
use super::{Rng, SchedError};

/// Parameters of [`run_tiled_lu`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LuRunParams {
    /// Tile order b. Default 96.
    pub tile: usize,
    /// Kernel repetitions per worker (slowdown emulation; its length is the number
    /// of workers). Default `[1, 2]`.
    pub repeats: Vec<usize>,
    /// Seed of the matrix. Default 1.
    pub seed: u64,
}

impl Default for LuRunParams {
    fn default() -> Self {
        Self {
            tile: 96,
            repeats: vec![1, 2],
            seed: 1,
        }
    }
}

/// One executed task.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    /// Task index in the DAG.
    pub task: usize,
    /// Worker.
    pub worker: usize,
    /// Start, seconds from the start of the run.
    pub start: f64,
    /// End, seconds.
    pub end: f64,
}

/// Result of [`run_tiled_lu`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LuRun {
    /// Measured makespan, seconds (first task start to last task end).
    pub makespan: f64,
    /// Every task as executed.
    pub records: Vec<TaskRecord>,
    /// ‖A − L·U‖_F / ‖A‖_F.
    pub backward_error: f64,
    /// Mean measured time of GETRF, TRSM, GEMM on each worker (NaN if the worker
    /// ran none of that kernel).
    pub kernel_means: Vec<[f64; 3]>,
}

fn kidx(k: Kernel) -> usize {
    match k {
        Kernel::Getrf => 0,
        Kernel::Trsm => 1,
        Kernel::Gemm => 2,
    }
}

/// The test matrix: entries uniform in (−½, ½), diagonal + n (strictly
/// diagonally dominant by rows and columns). Column-major n×n.
pub fn diag_dominant_matrix(n: usize, seed: u64) -> Mat<f64> {
    let mut rng = Rng::new(seed);
    Mat::from_fn(n, n, |i, j| {
        let x = rng.uniform() - 0.5;
        if i == j {
            x + n as f64
        } else {
            x
        }
    })
}

#[derive(PartialEq)]
struct Ready(f64, u32);
impl Eq for Ready {}
impl PartialOrd for Ready {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Ready {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&o.0).then(o.1.cmp(&self.1))
    }
}

/// Seconds a worker without a ready task keeps polling before it sleeps.
const SPIN: f64 = 2e-2;

struct Shared {
    queues: Vec<BinaryHeap<Ready>>,
    npred: Vec<usize>,
    done: usize,
    failed: Option<SchedError>,
}

/// Runs the tiled LU of an (N·b)×(N·b) diagonally dominant matrix on
/// `params.repeats.len()` worker threads with tile owners `m` (N = `m.n`,
/// processors = workers) and the priorities of [`TileDag::bottom_levels`] of the
/// full-rank kernel costs `costs`.
///
/// # Errors
/// [`SchedError::BadParam`] if the mapping's processor count differs from the
/// number of workers, a repeat count is 0, or the tile size is 0; a GETRF that
/// needed a row interchange.
pub fn run_tiled_lu(
    m: &Mapping,
    costs: &KernelCosts,
    params: &LuRunParams,
) -> Result<LuRun, SchedError> {
    let nw = params.repeats.len();
    if nw == 0 || nw != m.p || params.repeats.contains(&0) || params.tile == 0 {
        return Err(SchedError::BadParam {
            what: "lu run",
            got: format!(
                "{nw} workers (repeats {:?}) for a mapping on {} processors, tile {}",
                params.repeats, m.p, params.tile
            ),
            why: "need one repeat count >= 1 per mapped processor and tile >= 1",
        });
    }
    let nt = m.n;
    let b = params.tile;
    let a0 = diag_dominant_matrix(nt * b, params.seed);
    let tiles: Vec<RwLock<Mat<f64>>> = (0..nt * nt)
        .map(|t| {
            let (i, j) = (t / nt, t % nt);
            RwLock::new(a0.submatrix(i * b, j * b, b, b).to_owned())
        })
        .collect();
    let dag = TileDag::lu(nt);
    let w: Vec<f64> = dag.tasks.iter().map(|t| costs.of(t.kind)).collect();
    let prio = dag.bottom_levels(&w);
    let owner: Vec<usize> = dag.tasks.iter().map(|t| m.at(t.i, t.j)).collect();
    let mut queues: Vec<BinaryHeap<Ready>> = (0..nw).map(|_| BinaryHeap::new()).collect();
    let npred: Vec<usize> = dag.preds.iter().map(|p| p.len()).collect();
    for (t, &np) in npred.iter().enumerate() {
        if np == 0 {
            queues[owner[t]].push(Ready(prio[t], t as u32));
        }
    }
    let shared = Mutex::new(Shared {
        queues,
        npred,
        done: 0,
        failed: None,
    });
    let cv = Condvar::new();
    let total = dag.tasks.len();
    let t0 = Instant::now();
    let per_worker: Vec<Vec<TaskRecord>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..nw)
            .map(|wk| {
                let (shared, cv, dag, tiles, prio, owner) =
                    (&shared, &cv, &dag, &tiles, &prio, &owner);
                let reps = params.repeats[wk];
                s.spawn(move || {
                    let mut recs = Vec::new();
                    loop {
                        // Spin (yielding) for up to SPIN before sleeping on the condition
                        // variable: on a loaded machine the wake-up of a sleeping thread
                        // costs far more than a kernel, and the simulator has no such delay.
                        let task = {
                            let spin_start = Instant::now();
                            let mut g = shared.lock().expect("executor lock");
                            loop {
                                if g.done == total || g.failed.is_some() {
                                    return recs;
                                }
                                if let Some(r) = g.queues[wk].pop() {
                                    break r.1 as usize;
                                }
                                if spin_start.elapsed().as_secs_f64() < SPIN {
                                    drop(g);
                                    std::thread::yield_now();
                                    g = shared.lock().expect("executor lock");
                                } else {
                                    g = cv.wait(g).expect("executor lock");
                                }
                            }
                        };
                        let start = t0.elapsed().as_secs_f64();
                        let r = run_kernel(dag, tiles, task, reps);
                        let end = t0.elapsed().as_secs_f64();
                        recs.push(TaskRecord {
                            task,
                            worker: wk,
                            start,
                            end,
                        });
                        let mut g = shared.lock().expect("executor lock");
                        if let Err(e) = r {
                            g.failed = Some(e);
                            cv.notify_all();
                            return recs;
                        }
                        g.done += 1;
                        for &sc in &dag.succs[task] {
                            let sc = sc as usize;
                            g.npred[sc] -= 1;
                            if g.npred[sc] == 0 {
                                g.queues[owner[sc]].push(Ready(prio[sc], sc as u32));
                            }
                        }
                        cv.notify_all();
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("LU worker panicked"))
            .collect()
    });
    if let Some(e) = shared.into_inner().expect("executor lock").failed {
        return Err(e);
    }
    let mut records: Vec<TaskRecord> = per_worker.into_iter().flatten().collect();
    records.sort_by_key(|r| r.task);
    let first = records
        .iter()
        .map(|r| r.start)
        .fold(f64::INFINITY, f64::min);
    for r in &mut records {
        r.start -= first;
        r.end -= first;
    }
    let makespan = records.iter().map(|r| r.end).fold(0.0, f64::max);
    let mut sums = vec![[0.0f64; 3]; nw];
    let mut counts = vec![[0usize; 3]; nw];
    for r in &records {
        let k = kidx(dag.tasks[r.task].kind);
        sums[r.worker][k] += r.end - r.start;
        counts[r.worker][k] += 1;
    }
    let kernel_means = sums
        .iter()
        .zip(&counts)
        .map(|(s, c)| {
            [0, 1, 2].map(|k| {
                if c[k] > 0 {
                    s[k] / c[k] as f64
                } else {
                    f64::NAN
                }
            })
        })
        .collect();
    let backward_error = lu_backward_error(&a0, &tiles, nt, b);
    Ok(LuRun {
        makespan,
        records,
        backward_error,
        kernel_means,
    })
}

fn run_kernel(
    dag: &TileDag,
    tiles: &[RwLock<Mat<f64>>],
    task: usize,
    reps: usize,
) -> Result<(), SchedError> {
    let nt = dag.n;
    let t = dag.tasks[task];
    let rd = |i: usize, j: usize| tiles[i * nt + j].read().expect("tile lock");
    let mut out = tiles[t.i * nt + t.j].write().expect("tile lock");
    for rep in 0..reps {
        let mut scratch;
        let target: &mut Mat<f64> = if rep + 1 < reps {
            scratch = out.clone();
            &mut scratch
        } else {
            &mut out
        };
        match t.kind {
            Kernel::Getrf => {
                let b = target.nrows();
                let mut perm = vec![0usize; b];
                let mut perm_inv = vec![0usize; b];
                let req = faer::linalg::lu::partial_pivoting::factor::lu_in_place_scratch::<
                    usize,
                    f64,
                >(b, b, Par::Seq, Default::default());
                let mut buf = MemBuffer::new(req);
                let (info, _) = lu_in_place(
                    target.as_mut(),
                    &mut perm,
                    &mut perm_inv,
                    Par::Seq,
                    MemStack::new(&mut buf),
                    Default::default(),
                );
                if info.transposition_count != 0 {
                    return Err(SchedError::BadParam {
                        what: "matrix",
                        got: format!("tile ({}, {})", t.i, t.j),
                        why:
                            "GETRF needed a row interchange: the matrix is not diagonally dominant",
                    });
                }
            }
            Kernel::Trsm if t.i == t.k => {
                // Row panel: A_kj <- L_kk^{-1} A_kj.
                let d = rd(t.k, t.k);
                solve_unit_lower_triangular_in_place(d.as_ref(), target.as_mut(), Par::Seq);
            }
            Kernel::Trsm => {
                // Column panel: A_ik <- A_ik U_kk^{-1}, i.e. U^T X^T = A^T.
                let d = rd(t.k, t.k);
                solve_lower_triangular_in_place(
                    d.as_ref().transpose(),
                    target.as_mut().transpose_mut(),
                    Par::Seq,
                );
            }
            Kernel::Gemm => {
                let l = rd(t.i, t.k);
                let u = rd(t.k, t.j);
                matmul(
                    target.as_mut(),
                    Accum::Add,
                    l.as_ref(),
                    u.as_ref(),
                    -1.0,
                    Par::Seq,
                );
            }
        }
        std::hint::black_box(&*target);
    }
    Ok(())
}

fn lu_backward_error(a0: &Mat<f64>, tiles: &[RwLock<Mat<f64>>], nt: usize, b: usize) -> f64 {
    let n = nt * b;
    let f = Mat::<f64>::from_fn(n, n, |i, j| {
        tiles[(i / b) * nt + j / b].read().expect("tile lock")[(i % b, j % b)]
    });
    let l = Mat::<f64>::from_fn(n, n, |i, j| match i.cmp(&j) {
        std::cmp::Ordering::Greater => f[(i, j)],
        std::cmp::Ordering::Equal => 1.0,
        std::cmp::Ordering::Less => 0.0,
    });
    let u = Mat::<f64>::from_fn(n, n, |i, j| if i <= j { f[(i, j)] } else { 0.0 });
    let mut r = a0.clone();
    matmul(
        r.as_mut(),
        Accum::Add,
        l.as_ref(),
        u.as_ref(),
        -1.0,
        Par::Seq,
    );
    fro(r.as_ref()) / fro(a0.as_ref())
}

fn fro(a: MatRef<'_, f64>) -> f64 {
    let mut s = 0.0;
    for j in 0..a.ncols() {
        for i in 0..a.nrows() {
            s += a[(i, j)] * a[(i, j)];
        }
    }
    s.sqrt()
}

/// 𝔇(M) predicted for a run: the non-preemptive simulation (same priorities as
/// the executor) in which every task lasts the mean measured time of its kernel
/// on its worker (a kernel a worker never ran takes the mean over workers of its
/// per-repeat time, times that worker's repeats).
pub fn predict_makespan(m: &Mapping, costs: &KernelCosts, run: &LuRun, repeats: &[usize]) -> f64 {
    let dag = TileDag::lu(m.n);
    let w: Vec<f64> = dag.tasks.iter().map(|t| costs.of(t.kind)).collect();
    let fallback: [f64; 3] = [0, 1, 2].map(|k| {
        let v: Vec<f64> = run
            .kernel_means
            .iter()
            .zip(repeats)
            .filter(|(x, _)| x[k].is_finite())
            .map(|(x, &r)| x[k] / r as f64)
            .collect();
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    });
    let sim = simulate(
        &dag,
        |t| m.owner[t],
        m.p,
        &w,
        |t, q| {
            let k = kidx(dag.tasks[t].kind);
            let x = run.kernel_means[q][k];
            if x.is_finite() {
                x
            } else {
                fallback[k] * repeats[q] as f64
            }
        },
        false,
    );
    sim.makespan
}
