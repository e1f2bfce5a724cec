//! Malleable task scheduling on a heterogeneous cluster (Barbosa,
//! Morais, Tadeu, "Data parallel scheduling of operations in linear algebra on
//! heterogeneous clusters").
//!
//! * §2.2.1 the cost model: T_P = f(n)/ΣS_i, T_C = k·T_L + b/ω ([`CostModel`]);
//! * §2.1 Algorithm 1, HNF + max-min ([`algorithm1`]); §2.2 Algorithm 2, the best
//!   number of fastest processors per task, one task at a time ([`algorithm2`]);
//!   §3 Algorithm 3, best processing capacity from S̄_M, modified BLF packing with
//!   10 % overload, regrouping per DAG level ([`algorithm3`]);
//! * §4 eq. 3, the improvement index ([`improvement`]);
//! * the DAGs of Figure 5 and of Figure 9 ([`Dag::fig5`], [`Dag::dag1`], [`Dag::dag2`]),
//!   built from LU, QR, tridiagonal reduction and matrix product kernels;
//! * the cluster simulator: every algorithm returns a [`Schedule`] whose times come
//!   from the cost model on the processors actually chosen.
//!
//! ## What the paper leaves open, and the values chosen here
//!
//! | open point | choice (default) |
//! |---|---|
//! | flop counts f(n) | LU 2n³/3, QR 4n³/3, tridiagonal reduction 4n³/3 (symmetric, LAPACK `sytrd`), correlation = matrix product 2n³ |
//! | messages of a data-parallel kernel | ⌈n/nb⌉ panel steps, `m` broadcasts per step (LU 2, QR 1, TRD 2, MM 2) of b = n·nb/2 words (the average panel) |
//! | a broadcast to p processors on switched Ethernet | pipelined along a chain in k packets: (p − 2 + k)·(T_L + b/(kω)), i.e. the paper's k·T_L + b/ω plus one packet time per extra hop; the (k − 1)-packet volume part is hidden behind the trailing update (look-ahead, `overlap` = 1), leaving (p − 1) packet times per broadcast |
//! | T_L, ω, packet, nb, word | 200 µs, 100 Mbit/s (paper), 1460 bytes, 16, 8 bytes. T_L and nb were chosen from the sweep T_L ∈ {50, 100, 200} µs × nb ∈ {16, 32, 64} as the pair closest to Figure 10 (only T_L/nb-like products matter: the exposed cost is ⌈n/nb⌉·(p − 1) packet times); the CLI's `--sweep` prints the whole dependence |
//! | processor capacities of Figure 4 | linear ramp S_i = S̄_M·(1 + h·(2i/(P−1) − 1)), spread h = 0.5 |
//! | DAG1, DAG2 (Figure 9 is not in the text) | see [`Dag::dag1`], [`Dag::dag2`] |
//! | Fig. 8 test cases ("> 2500²") | every n1 ≤ n2 in {2500, 3000, 3500, 4000, 5000} |
//! | Fig. 11 case 5 (the text lists four sizes) | [5000, 5000] |
//! | Algorithm 3 second step (re-evaluating S̄_M) | not done |

use serde::{Deserialize, Serialize};

use super::{check_speeds, SchedError};

/// A dense linear algebra kernel of a DAG node (`002` §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KernelKind {
    /// LU factorization.
    Lu,
    /// QR factorization.
    Qr,
    /// Tridiagonal reduction.
    Trd,
    /// Matrix product (the correlation task of Figure 5).
    Mm,
}

impl KernelKind {
    /// f(n) in flop (see the module's table).
    pub fn flops(self, n: usize) -> f64 {
        let n3 = (n as f64).powi(3);
        match self {
            KernelKind::Lu => 2.0 * n3 / 3.0,
            KernelKind::Qr | KernelKind::Trd => 4.0 * n3 / 3.0,
            KernelKind::Mm => 2.0 * n3,
        }
    }

    /// Broadcasts per panel step.
    pub fn broadcasts_per_step(self) -> usize {
        match self {
            KernelKind::Qr => 1,
            _ => 2,
        }
    }

    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            KernelKind::Lu => "LU",
            KernelKind::Qr => "QR",
            KernelKind::Trd => "TRD",
            KernelKind::Mm => "MM",
        }
    }
}

/// The computational model of `002` §2.2.1 (defaults: see the module's table).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CostModel {
    /// T_L, latency of one packet, seconds. Default 2e-4.
    pub latency: f64,
    /// ω, bandwidth, Mbit/s. Default 100 (the paper's Ethernet).
    pub bandwidth_mbit: f64,
    /// Bytes per packet (TCP segment). Default 1460.
    pub packet_bytes: f64,
    /// Panel width nb. Default 16.
    pub nb: usize,
    /// Bytes per matrix element. Default 8.
    pub word_bytes: f64,
    /// Fraction of the pipelined volume term hidden behind computation
    /// (look-ahead): 1 leaves only the pipeline fill, (p − 1) packet times, 0 the
    /// whole (p − 2 + k) packet times. Default 1.
    pub overlap: f64,
}

impl Default for CostModel {
    fn default() -> Self {
        Self {
            latency: 2e-4,
            bandwidth_mbit: 100.0,
            packet_bytes: 1460.0,
            nb: 16,
            word_bytes: 8.0,
            overlap: 1.0,
        }
    }
}

impl CostModel {
    /// Checks the parameters.
    ///
    /// # Errors
    /// [`SchedError::BadParam`] for a non-positive or non-finite value.
    pub fn validate(&self) -> Result<(), SchedError> {
        for (what, v) in [
            ("latency", self.latency),
            ("bandwidth_mbit", self.bandwidth_mbit),
            ("packet_bytes", self.packet_bytes),
            ("word_bytes", self.word_bytes),
        ] {
            if !(v.is_finite() && v >= 0.0) || (what != "latency" && v == 0.0) {
                return Err(SchedError::BadParam {
                    what,
                    got: v.to_string(),
                    why: "must be finite and positive",
                });
            }
        }
        if !(0.0..=1.0).contains(&self.overlap) {
            return Err(SchedError::BadParam {
                what: "overlap",
                got: self.overlap.to_string(),
                why: "must lie in [0, 1]",
            });
        }
        if self.nb == 0 {
            return Err(SchedError::BadParam {
                what: "nb",
                got: "0".into(),
                why: "the panel width must be >= 1",
            });
        }
        Ok(())
    }

    /// T_C of one message of `b` elements broadcast to `p` processors, pipelined
    /// along a chain in k packets: (p − 2 + k)·(T_L + b/(kω)) of which the
    /// `overlap` fraction of the (k − 1) volume packets is hidden; 0 if p ≤ 1.
    pub fn broadcast(&self, b: f64, p: usize) -> f64 {
        if p <= 1 {
            return 0.0;
        }
        let bytes = b * self.word_bytes;
        let k = (bytes / self.packet_bytes).ceil().max(1.0);
        let per_packet = self.latency + bytes * 8.0 / (self.bandwidth_mbit * 1e6) / k;
        (p as f64 - 1.0 + (1.0 - self.overlap) * (k - 1.0)) * per_packet
    }

    /// Communication time of kernel `kind` of size `n` on `p` processors.
    pub fn comm(&self, kind: KernelKind, n: usize, p: usize) -> f64 {
        if p <= 1 {
            return 0.0;
        }
        let steps = n.div_ceil(self.nb) as f64;
        let b = n as f64 * self.nb.min(n) as f64 / 2.0;
        steps * kind.broadcasts_per_step() as f64 * self.broadcast(b, p)
    }

    /// Time of kernel `kind` of size `n` on processors of capacities `caps`
    /// (Mflop/s): T_P + T_C = f(n)/ΣS_i + comm.
    pub fn time(&self, kind: KernelKind, n: usize, caps: &[f64]) -> f64 {
        let s: f64 = caps.iter().sum::<f64>() * 1e6;
        kind.flops(n) / s + self.comm(kind, n, caps.len())
    }
}

/// One node of a DAG.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// Name (T1, ...).
    pub name: String,
    /// Kernel.
    pub kind: KernelKind,
    /// Matrix order.
    pub n: usize,
    /// Predecessors (indices).
    pub preds: Vec<usize>,
}

/// A DAG of linear algebra kernels (`002` §2.1), tasks in topological order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dag {
    /// The tasks.
    pub tasks: Vec<Task>,
}

fn t(name: &str, kind: KernelKind, n: usize, preds: &[usize]) -> Task {
    Task {
        name: name.into(),
        kind,
        n,
        preds: preds.to_vec(),
    }
}

impl Dag {
    /// Figure 5, the matching algorithm: two paths LU → tridiagonal reduction →
    /// QR on matrices of orders `n1` (T1–T3) and `n2` (T4–T6), joined by the
    /// correlation T7 (a matrix product of order min(n1, n2)).
    pub fn fig5(n1: usize, n2: usize) -> Self {
        use KernelKind::*;
        Dag {
            tasks: vec![
                t("T1", Lu, n1, &[]),
                t("T2", Trd, n1, &[0]),
                t("T3", Qr, n1, &[1]),
                t("T4", Lu, n2, &[]),
                t("T5", Trd, n2, &[3]),
                t("T6", Qr, n2, &[4]),
                t("T7", Mm, n1.min(n2), &[2, 5]),
            ],
        }
    }

    /// DAG1 of Figure 9 (the figure is not in the text; our choice): two
    /// fork–join paths, one per matrix size: LU(a) → {QR(a), TRD(a)} → MM(a) and
    /// the same for b.
    pub fn dag1(a: usize, b: usize) -> Self {
        use KernelKind::*;
        Dag {
            tasks: vec![
                t("T1", Lu, a, &[]),
                t("T2", Lu, b, &[]),
                t("T3", Qr, a, &[0]),
                t("T4", Trd, a, &[0]),
                t("T5", Qr, b, &[1]),
                t("T6", Trd, b, &[1]),
                t("T7", Mm, a, &[2, 3]),
                t("T8", Mm, b, &[4, 5]),
            ],
        }
    }

    /// DAG2 of Figure 9 (our choice): four independent factorizations LU(a),
    /// QR(a), LU(b), QR(b); TRD(a) after both a's, TRD(b) after both b's; a final
    /// matrix product of order max(a, b) after both reductions.
    pub fn dag2(a: usize, b: usize) -> Self {
        use KernelKind::*;
        Dag {
            tasks: vec![
                t("T1", Lu, a, &[]),
                t("T2", Qr, a, &[]),
                t("T3", Lu, b, &[]),
                t("T4", Qr, b, &[]),
                t("T5", Trd, a, &[0, 1]),
                t("T6", Trd, b, &[2, 3]),
                t("T7", Mm, a.max(b), &[4, 5]),
            ],
        }
    }

    /// DAG levels (longest number of edges from a source), as HNF uses them.
    pub fn levels(&self) -> Vec<usize> {
        let mut lv = vec![0; self.tasks.len()];
        for (i, task) in self.tasks.iter().enumerate() {
            lv[i] = task.preds.iter().map(|&p| lv[p] + 1).max().unwrap_or(0);
        }
        lv
    }

    /// HNF order (`002` §2.1, Heavy Node First): level by level, inside a level by
    /// decreasing f(n) (ties: lower index).
    pub fn hnf_order(&self) -> Vec<usize> {
        let lv = self.levels();
        let mut o: Vec<usize> = (0..self.tasks.len()).collect();
        o.sort_by(|&a, &b| {
            lv[a]
                .cmp(&lv[b])
                .then(self.flops(b).total_cmp(&self.flops(a)))
                .then(a.cmp(&b))
        });
        o
    }

    /// The tasks of each level in HNF order (level 0 first).
    pub fn hnf_levels(&self) -> Vec<Vec<usize>> {
        let lv = self.levels();
        let nlev = lv.iter().max().map_or(0, |m| m + 1);
        let mut out = vec![Vec::new(); nlev];
        for i in self.hnf_order() {
            out[lv[i]].push(i);
        }
        out
    }

    /// f(n) of task `i`.
    pub fn flops(&self, i: usize) -> f64 {
        self.tasks[i].kind.flops(self.tasks[i].n)
    }

    fn validate(&self) -> Result<(), SchedError> {
        for (i, task) in self.tasks.iter().enumerate() {
            if task.n == 0 || task.preds.iter().any(|&p| p >= i) {
                return Err(SchedError::BadParam {
                    what: "dag",
                    got: task.name.clone(),
                    why: "tasks need n >= 1 and predecessors listed before them",
                });
            }
        }
        Ok(())
    }
}

/// One task of a schedule: it runs on `procs` from `start` to `end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Placement {
    /// Task index.
    pub task: usize,
    /// Processors used.
    pub procs: Vec<usize>,
    /// Start time, seconds.
    pub start: f64,
    /// End time, seconds.
    pub end: f64,
}

/// A simulated schedule of a DAG on the cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    /// Makespan, seconds.
    pub makespan: f64,
    /// One placement per task.
    pub placements: Vec<Placement>,
}

impl Schedule {
    fn new(mut placements: Vec<Placement>) -> Self {
        placements.sort_by_key(|p| p.task);
        let makespan = placements.iter().map(|p| p.end).fold(0.0, f64::max);
        Schedule {
            makespan,
            placements,
        }
    }

    /// Checks that precedences hold and that no processor runs two tasks at once
    /// (the cluster simulator's invariants). Returns a description of the first
    /// violation.
    pub fn check(&self, dag: &Dag, nprocs: usize) -> Result<(), String> {
        for p in &self.placements {
            for &q in &dag.tasks[p.task].preds {
                if self.placements[q].end > p.start + 1e-9 {
                    return Err(format!(
                        "task {} starts before its predecessor {q} ends",
                        p.task
                    ));
                }
            }
        }
        for proc in 0..nprocs {
            let mut iv: Vec<(f64, f64)> = self
                .placements
                .iter()
                .filter(|p| p.procs.contains(&proc))
                .map(|p| (p.start, p.end))
                .collect();
            iv.sort_by(|a, b| a.0.total_cmp(&b.0));
            for w in iv.windows(2) {
                if w[0].1 > w[1].0 + 1e-9 {
                    return Err(format!("processor {proc} runs two tasks at {}", w[1].0));
                }
            }
        }
        Ok(())
    }
}

/// Processor capacities of a heterogeneous cluster: a linear ramp of `p`
/// capacities with mean `mean` (Mflop/s) from (1 − h)·mean to (1 + h)·mean.
///
/// # Errors
/// [`SchedError::BadParam`] if `p == 0`, `mean <= 0` or `h ∉ [0, 1)`.
pub fn ramp_speeds(p: usize, mean: f64, h: f64) -> Result<Vec<f64>, SchedError> {
    if p == 0 || !(mean.is_finite() && mean > 0.0) || !(0.0..1.0).contains(&h) {
        return Err(SchedError::BadParam {
            what: "cluster",
            got: format!("P = {p}, mean = {mean}, spread = {h}"),
            why: "need P >= 1, mean > 0 and 0 <= spread < 1",
        });
    }
    if p == 1 {
        return Ok(vec![mean]);
    }
    Ok((0..p)
        .map(|i| mean * (1.0 + h * (2.0 * i as f64 / (p - 1) as f64 - 1.0)))
        .collect())
}

fn sorted_desc(speeds: &[f64]) -> Vec<usize> {
    let mut o: Vec<usize> = (0..speeds.len()).collect();
    o.sort_by(|&a, &b| speeds[b].total_cmp(&speeds[a]).then(a.cmp(&b)));
    o
}

/// Algorithm 1 (`002` §2.1): task parallelism only. HNF gives the levels and
/// the order; on each level max-min maps every task to one processor: among the
/// unmapped tasks, the one whose best completion time is the largest goes to the
/// processor giving that best completion time.
///
/// # Errors
/// Bad speeds, model or DAG.
pub fn algorithm1(dag: &Dag, speeds: &[f64], model: &CostModel) -> Result<Schedule, SchedError> {
    check_speeds(speeds)?;
    model.validate()?;
    dag.validate()?;
    let mut free = vec![0.0; speeds.len()];
    let mut end = vec![0.0; dag.tasks.len()];
    let mut out = Vec::new();
    for mut left in dag.hnf_levels() {
        while !left.is_empty() {
            let mut pick = (0, 0, f64::NEG_INFINITY, 0.0);
            for (pos, &i) in left.iter().enumerate() {
                let ready = ready_time(dag, i, &end);
                let mut best = (0, f64::INFINITY, 0.0);
                for (p, &s) in speeds.iter().enumerate() {
                    let st = ready.max(free[p]);
                    let c = st + model.time(dag.tasks[i].kind, dag.tasks[i].n, &[s]);
                    if c < best.1 {
                        best = (p, c, st);
                    }
                }
                if best.1 > pick.2 {
                    pick = (pos, best.0, best.1, best.2);
                }
            }
            let (pos, p, c, st) = pick;
            let i = left.remove(pos);
            free[p] = c;
            end[i] = c;
            out.push(Placement {
                task: i,
                procs: vec![p],
                start: st,
                end: c,
            });
        }
    }
    Ok(Schedule::new(out))
}

/// Best number of fastest processors for one task (`002` Algorithm 2): the
/// p ∈ 1..=P minimising the model time on the p fastest processors.
pub fn best_fastest(kind: KernelKind, n: usize, speeds: &[f64], model: &CostModel) -> usize {
    let o = sorted_desc(speeds);
    let caps: Vec<f64> = o.iter().map(|&i| speeds[i]).collect();
    (1..=caps.len())
        .min_by(|&a, &b| {
            model
                .time(kind, n, &caps[..a])
                .total_cmp(&model.time(kind, n, &caps[..b]))
        })
        .unwrap_or(1)
}

/// Algorithm 2 (`002` §2.2): data parallelism only. Every task runs on its best
/// number of fastest processors ([`best_fastest`]), one task at a time, in HNF order.
///
/// # Errors
/// Bad speeds, model or DAG.
pub fn algorithm2(dag: &Dag, speeds: &[f64], model: &CostModel) -> Result<Schedule, SchedError> {
    check_speeds(speeds)?;
    model.validate()?;
    dag.validate()?;
    let o = sorted_desc(speeds);
    let mut now = 0.0;
    let mut out = Vec::new();
    for i in dag.hnf_order() {
        let task = &dag.tasks[i];
        let p = best_fastest(task.kind, task.n, speeds, model);
        let procs: Vec<usize> = o[..p].to_vec();
        let caps: Vec<f64> = procs.iter().map(|&q| speeds[q]).collect();
        let d = model.time(task.kind, task.n, &caps);
        out.push(Placement {
            task: i,
            procs,
            start: now,
            end: now + d,
        });
        now += d;
    }
    Ok(Schedule::new(out))
}

/// Parameters of Algorithm 3 (`002` §3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Alg3Params {
    /// Allowed overload of the modified BLF packing: a task is placed on the
    /// bottom line if at most this fraction of its BPC lies above the free
    /// capacity. Default 0.10 (the paper's 10 %).
    pub overload: f64,
}

impl Default for Alg3Params {
    fn default() -> Self {
        Self { overload: 0.10 }
    }
}

/// Best processing capacity of a task (`002` §3, eqs. 1–2): the machine seen as
/// P processors of capacity S̄_M = S_T/P; the p minimising the model time gives
/// BPC = p·S̄_M. Returns (p, BPC).
pub fn best_processing_capacity(
    kind: KernelKind,
    n: usize,
    speeds: &[f64],
    model: &CostModel,
) -> (usize, f64) {
    let p_all = speeds.len();
    let sm = speeds.iter().sum::<f64>() / p_all as f64;
    let p = (1..=p_all)
        .min_by(|&a, &b| {
            model
                .time(kind, n, &vec![sm; a])
                .total_cmp(&model.time(kind, n, &vec![sm; b]))
        })
        .unwrap_or(1);
    (p, p as f64 * sm)
}

/// Algorithm 3 (`002` §3): mixed task and data parallelism. For each task its BPC
/// ([`best_processing_capacity`]); then, DAG level by level (so that the groups of
/// processors change between levels), the modified Bottom-Left-Fill packing:
/// (a) the heaviest unplaced task goes on the bottom line (the earliest time at
/// which processors are free); (b) if more than `overload` of its BPC lies above
/// the free capacity, the next heaviest is tried; (c) repeat. A placed task takes
/// free processors, fastest first, until their capacities approximate the BPC
/// (with an overload: all free ones, and a longer time). A task whose BPC exceeds
/// S_T runs alone on Algorithm 2's processors.
///
/// # Errors
/// Bad speeds, model, DAG, or `overload ∉ [0, 1)`.
pub fn algorithm3(
    dag: &Dag,
    speeds: &[f64],
    model: &CostModel,
    params: &Alg3Params,
) -> Result<Schedule, SchedError> {
    check_speeds(speeds)?;
    model.validate()?;
    dag.validate()?;
    if !(0.0..1.0).contains(&params.overload) {
        return Err(SchedError::BadParam {
            what: "overload",
            got: params.overload.to_string(),
            why: "must lie in [0, 1)",
        });
    }
    let st: f64 = speeds.iter().sum();
    let order = sorted_desc(speeds);
    let mut free = vec![0.0f64; speeds.len()];
    let mut end = vec![0.0f64; dag.tasks.len()];
    let mut out = Vec::new();
    for mut left in dag.hnf_levels() {
        let bpc: Vec<f64> = (0..dag.tasks.len())
            .map(|i| best_processing_capacity(dag.tasks[i].kind, dag.tasks[i].n, speeds, model).1)
            .collect();
        let mut line = free.iter().copied().fold(f64::INFINITY, f64::min);
        while !left.is_empty() {
            let avail: Vec<usize> = order
                .iter()
                .copied()
                .filter(|&p| free[p] <= line + 1e-12)
                .collect();
            let cap: f64 = avail.iter().map(|&p| speeds[p]).sum();
            let mut placed = None;
            for (pos, &i) in left.iter().enumerate() {
                let ready = ready_time(dag, i, &end);
                if ready > line + 1e-12 {
                    continue;
                }
                let need = bpc[i];
                if need >= st * (1.0 - 1e-9) {
                    // Alone on the machine: Algorithm 2's choice, when all of it is free.
                    if avail.len() == speeds.len() {
                        let p = best_fastest(dag.tasks[i].kind, dag.tasks[i].n, speeds, model);
                        placed = Some((pos, order[..p].to_vec()));
                        break;
                    }
                    continue;
                }
                if need - cap <= params.overload * need + 1e-9 && !avail.is_empty() {
                    // Fastest free processors until the capacity approximates the BPC.
                    let mut chosen = Vec::new();
                    let mut sum = 0.0;
                    for &p in &avail {
                        if sum >= need {
                            break;
                        }
                        if sum > 0.0 && (sum + speeds[p] - need) > (need - sum) {
                            break;
                        }
                        chosen.push(p);
                        sum += speeds[p];
                    }
                    placed = Some((pos, chosen));
                    break;
                }
            }
            match placed {
                Some((pos, procs)) => {
                    let i = left.remove(pos);
                    let caps: Vec<f64> = procs.iter().map(|&p| speeds[p]).collect();
                    let d = model.time(dag.tasks[i].kind, dag.tasks[i].n, &caps);
                    for &p in &procs {
                        free[p] = line + d;
                    }
                    end[i] = line + d;
                    out.push(Placement {
                        task: i,
                        procs,
                        start: line,
                        end: line + d,
                    });
                }
                None => {
                    // Raise the bottom line to the next processor release or task release.
                    let mut next = f64::INFINITY;
                    for &f in &free {
                        if f > line + 1e-12 {
                            next = next.min(f);
                        }
                    }
                    for &i in &left {
                        let ready = ready_time(dag, i, &end);
                        if ready > line + 1e-12 {
                            next = next.min(ready);
                        }
                    }
                    debug_assert!(next.is_finite());
                    line = next;
                }
            }
        }
    }
    Ok(Schedule::new(out))
}

/// Improvement index of `002` eq. 3: (T_Alg2 − T_Alg3) / T_Alg2.
pub fn improvement(t_alg2: f64, t_alg3: f64) -> f64 {
    (t_alg2 - t_alg3) / t_alg2
}

/// The time task `i` of `dag` can start: the latest end (`end`) of its
/// predecessors, or 0 for a task without any.
fn ready_time(dag: &Dag, i: usize, end: &[f64]) -> f64 {
    dag.tasks[i]
        .preds
        .iter()
        .map(|&q| end[q])
        .fold(0.0, f64::max)
}

/// A reproduced case of `002` Figures 8, 10, 11.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReproCase {
    /// Case label (1-based, or "n1xn2" for Figure 8).
    pub case: String,
    /// Matrix orders.
    pub sizes: [usize; 2],
    /// Makespan of Algorithm 1, seconds.
    pub t_alg1: f64,
    /// Makespan of Algorithm 2, seconds.
    pub t_alg2: f64,
    /// Makespan of Algorithm 3, seconds.
    pub t_alg3: f64,
    /// 100 × eq. 3.
    pub improvement_percent: f64,
    /// The paper's value (Figure 8: its range, as [low, high]).
    pub paper_percent: Vec<f64>,
}

/// Which figure of `002` to reproduce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Figure {
    /// Figure 8: Fig. 5 DAG, 40 processors.
    Fig8,
    /// Figure 10: DAG1, 45 processors, S̄_M = 805 Mflop/s.
    Fig10,
    /// Figure 11: DAG2, 50 processors, S̄_M = 700 Mflop/s.
    Fig11,
}

/// Cluster and cases of a figure: (P, S̄_M, cases, paper values).
#[allow(clippy::type_complexity)]
pub fn figure_setup(fig: Figure) -> (usize, f64, Vec<[usize; 2]>, Vec<Vec<f64>>) {
    match fig {
        Figure::Fig8 => {
            let s = [2500, 3000, 3500, 4000, 5000];
            let mut c = Vec::new();
            for (a, &x) in s.iter().enumerate() {
                for &y in &s[a..] {
                    c.push([x, y]);
                }
            }
            let k = c.len();
            // Figure 4's capacities are not in the text: 40 processors, mean 750 Mflop/s.
            (40, 750.0, c, vec![vec![9.5, 22.8]; k])
        }
        Figure::Fig10 => five_cases(
            45,
            805.0,
            [
                [1000, 2000],
                [1000, 1000],
                [1000, 1500],
                [3000, 4000],
                [3000, 5000],
            ],
            [33.8, 51.3, 41.8, 11.0, 1.7],
        ),
        Figure::Fig11 => five_cases(
            50,
            700.0,
            [
                [3000, 4000],
                [3000, 3000],
                [2500, 5000],
                [4000, 5000],
                [5000, 5000],
            ],
            [19.9, 21.4, 16.8, 16.2, 10.3],
        ),
    }
}

/// The set-up of a figure of five size pairs with one printed improvement each
/// (Figures 10 and 11 of Barbosa, Morais and Tadeu), as [`figure_setup`]
/// returns it.
#[allow(clippy::type_complexity)]
fn five_cases(
    p: usize,
    mean: f64,
    sizes: [[usize; 2]; 5],
    paper: [f64; 5],
) -> (usize, f64, Vec<[usize; 2]>, Vec<Vec<f64>>) {
    (
        p,
        mean,
        sizes.to_vec(),
        paper.iter().map(|&x| vec![x]).collect(),
    )
}

/// The lowest and highest improvement (percent) over `cases`: what Figure 8 of
/// Barbosa, Morais and Tadeu gives, a range over all size pairs.
pub fn improvement_range(cases: &[ReproCase]) -> (f64, f64) {
    let lo = cases
        .iter()
        .map(|c| c.improvement_percent)
        .fold(f64::INFINITY, f64::min);
    let hi = cases
        .iter()
        .map(|c| c.improvement_percent)
        .fold(f64::NEG_INFINITY, f64::max);
    (lo, hi)
}

/// Reproduces one figure of `002` with the given model, capacity spread `h` and
/// Algorithm 3 parameters; returns one [`ReproCase`] per case.
///
/// # Errors
/// Bad model or spread.
pub fn reproduce(
    fig: Figure,
    model: &CostModel,
    spread: f64,
    params: &Alg3Params,
) -> Result<Vec<ReproCase>, SchedError> {
    let (p, mean, cases, paper) = figure_setup(fig);
    let speeds = ramp_speeds(p, mean, spread)?;
    let mut out = Vec::new();
    for (idx, (sz, pp)) in cases.iter().zip(paper).enumerate() {
        let dag = match fig {
            Figure::Fig8 => Dag::fig5(sz[0], sz[1]),
            Figure::Fig10 => Dag::dag1(sz[0], sz[1]),
            Figure::Fig11 => Dag::dag2(sz[0], sz[1]),
        };
        let t1 = algorithm1(&dag, &speeds, model)?.makespan;
        let t2 = algorithm2(&dag, &speeds, model)?.makespan;
        let t3 = algorithm3(&dag, &speeds, model, params)?.makespan;
        out.push(ReproCase {
            case: match fig {
                Figure::Fig8 => format!("{}x{}", sz[0], sz[1]),
                _ => (idx + 1).to_string(),
            },
            sizes: *sz,
            t_alg1: t1,
            t_alg2: t2,
            t_alg3: t3,
            improvement_percent: 100.0 * improvement(t2, t3),
            paper_percent: pp,
        });
    }
    Ok(out)
}
