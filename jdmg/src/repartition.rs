//! Semi-static re-balancing of the fine-grain projection phase (Boudet et al. §2.1
//! and §4.5, issue #10).
//!
//! The fine rows of a multigrain solve are weighted once by start-up SpMV rates;
//! when the loads change during the run (Boudet et al. §2.1: "won't they change during
//! program execution?") those rates go stale and the fine-grain collectives of the
//! projection phase wait for the slowest rank. §4.5's answer is a *semi-static*
//! strategy: "split the work into phases and use the actual processor speeds
//! computed in a given phase to load-balance the work for the next phase", with a
//! redistribution of the data between phases.
//!
//! Here a phase is a stretch of outer iterations. The rates are those of each
//! rank's correction phases (`RateClock`): nonzeros of its solve group's rows
//! per busy second of its group products (wall time minus the waits of their
//! halo exchanges), which
//! do not change when fine rows move, so that the split converges to the ratio of
//! the speeds instead of overshooting it. An lblib [`Lbs`] on that clock turns
//! them into rates (`RateKind::Average` over the stretch or LBLIB's
//! instantaneous rate over the last window). `Monitor`, polled at the top of
//! every outer iteration by the solver loop, compares the busy times the
//! ranks' fine rows would take at those rates every
//! [`RepartitionParams::check_every`] iterations; when that imbalance stays
//! above [`RepartitionParams::threshold`] for [`RepartitionParams::consecutive`]
//! checks it ends the loop with its plan: the weights and the layout built
//! from them once (the layout that predicted the gain). The loop returns the
//! plan and a snapshot of its state as an explicit outcome
//! (`Exit::Repartition`); the multigrain executor moves every row-distributed
//! array of the snapshot (`move_rows`, one all-to-all-v), rebuilds the local
//! rows and halo plans from the plan's layout and enters the same solver loop
//! again from the moved state.

use std::cell::Cell;
use std::time::Instant;

use lblib::sched::{self, SchedSample};
use lblib::{Comm, Lbs, LbsConfig, Method, RateKind};
use matrices::partition::{GroupPartition, Redistribution, RowPartition};
use serde::{Deserialize, Serialize};

use crate::checkpoint::Checkpoint;
use crate::error::JdError;
use crate::jd::LoopMonitor;
pub use crate::multigrain::stats::{RepartitionEvent, RepartitionStats};
use crate::solution::Stats;

/// Options of semi-static re-partitioning (part of
/// [`crate::MultigrainParams`]). Defaults: on, 10 % threshold, a check every 5
/// outer iterations, 2 checks in a row above the threshold, at most 4
/// re-partitions per solve, rates at the core's share.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RepartitionParams {
    /// Re-partition the fine rows during the solve. Default true; it takes effect
    /// only when the rows are weighted by measured rates
    /// (`MultigrainParams::rate_weighted_rows`), so that a deterministic solve
    /// (`--balance none`) stays deterministic.
    pub enabled: bool,
    /// Imbalance of the projection phase, `1 − mean(tᵢ)/max(tᵢ)` over the times
    /// tᵢ = nonzeros of rank i's fine rows / its measured rate, above which a re-partition is considered (the share
    /// of the phase an average rank spends waiting). Default 0.10. A re-partition
    /// also needs the predicted gain `1 − max(tᵢ')/max(tᵢ)` to reach half of it.
    pub threshold: f64,
    /// Outer iterations between two checks (each check is one all-gather over the
    /// fine-grain ranks). Default 5.
    pub check_every: usize,
    /// Checks in a row above the threshold before re-partitioning (hysteresis
    /// against noise). Default 2.
    pub consecutive: usize,
    /// Most re-partitions in one solve. Default 4.
    pub max_repartitions: usize,
    /// No rank's weight falls below this fraction of the largest rate, so that a
    /// rank measured during a transient stall keeps some rows. Default 0.05.
    pub min_weight: f64,
    /// Measure each rank's busy seconds at the share of its core it gets
    /// (Linux scheduler statistics, [`lblib::sched`]), so that a rank time-sliced
    /// with others on one core gets rows for its share of that core, not for
    /// the full speed its short products run at between slices. Default true;
    /// no effect where the statistics cannot be read.
    pub core_share: bool,
}

impl Default for RepartitionParams {
    fn default() -> Self {
        Self {
            enabled: true,
            threshold: 0.10,
            check_every: 5,
            consecutive: 2,
            max_repartitions: 4,
            min_weight: 0.05,
            core_share: true,
        }
    }
}

impl RepartitionParams {
    /// Checks the ranges: `threshold` in (0, 1), `check_every ≥ 1`,
    /// `consecutive ≥ 1`, `min_weight` in (0, 1].
    ///
    /// # Errors
    /// `InvalidParams` naming the field.
    pub fn validate(&self) -> Result<(), JdError> {
        let bad = |reason: String| JdError::invalid("repartition", reason);
        if !(self.threshold > 0.0 && self.threshold < 1.0) {
            return Err(bad(format!(
                "threshold {} must be in (0, 1)",
                self.threshold
            )));
        }
        if self.check_every == 0 || self.consecutive == 0 {
            return Err(bad("check_every and consecutive must be ≥ 1".into()));
        }
        if !(self.min_weight > 0.0 && self.min_weight <= 1.0) {
            return Err(bad(format!(
                "min_weight {} must be in (0, 1]",
                self.min_weight
            )));
        }
        Ok(())
    }
}

/// The clock of the re-partitioning rates, on the fine-grain communicator: its
/// [`Comm::wtime`] is the busy time credited so far ([`RateClock::credit`]: the
/// products of this rank's solve-group operator in the correction phases, each
/// timed without the waits of its halo exchange), not the wall time; its
/// collectives are those of the fine-grain communicator. An lblib [`Lbs`] on it
/// measures each rank's rate: nonzeros of its group rows per busy second.
///
/// Why the correction phase and not the projection phase: the work of a
/// correction phase on a rank (products with its solve group's rows) does not
/// depend on the fine rows, so its rate stays the same when rows move, and a
/// split weighted by it converges to the speed ratio. (Timing the products
/// alone, not the whole phase, keeps out the work of a phase that does not grow
/// with its steps, which made a fast rank in a slow group measure 20 % slow.) The projection phase's own
/// busy time does not: it holds work that every rank repeats whatever its rows
/// (the Rayleigh-Ritz problem, small dense products), so a rank that lost rows
/// measured slower per nonzero and lost more at the next check (lap3d:14 at
/// slowdowns 1,1,4,4: a quarter of the slow ranks' fair share after three
/// re-partitions). And on a core shared by time slices, the projection's short
/// spans between global sums run at full speed (the loaded rank is descheduled
/// while it waits), which made a loaded rank look as fast as a free one; a
/// flexible phase runs long enough to see the real share of the core.
pub(crate) struct RateClock<'a, W> {
    comm: &'a W,
    /// Busy seconds of correction phases credited so far (converted to the
    /// thread's share of its core when `share` is on).
    busy: Cell<f64>,
    /// Their work: nonzeros of this rank's group rows × vectors multiplied.
    work: Cell<f64>,
    /// The share of a time-sliced core (`RepartitionParams::core_share`).
    share: Option<ShareMeter>,
}

/// The spans credited since the last reading of the scheduler statistics, and
/// that reading (see [`RateClock::with_core_share`]).
#[derive(Default)]
struct ShareMeter {
    /// Kernel id of the thread that ran the products (0: none yet).
    tid: Cell<i32>,
    last: Cell<Option<SchedSample>>,
    /// The reading at the start of the stretch of [`RateClock::stretch_share`].
    stretch: Cell<Option<SchedSample>>,
    /// Busy seconds of the clock, real wall seconds and CPU seconds of the
    /// spans not yet converted.
    clock: Cell<f64>,
    wall: Cell<f64>,
    cpu: Cell<f64>,
}

/// Where a span credited with [`RateClock::credit_span`] started.
pub(crate) struct SpanStart {
    wall: Instant,
    cpu: f64,
}

impl ShareMeter {
    /// Converts the pending spans' busy seconds into seconds at the thread's
    /// share of its core since the last reading: a span that ran a fraction
    /// ρ = cpu/wall of its wall time, on a thread that got a share s of its core,
    /// took ρ/s times its busy seconds at that share (never fewer: a span whose
    /// wall time already holds the time slices of others has ρ ≈ s).
    fn convert(&self) -> f64 {
        let now = match self.tid.get() {
            0 => None,
            tid => SchedSample::of_thread(tid),
        };
        let share = match (now, self.last.get()) {
            (Some(b), Some(a)) => b.share_since(&a),
            _ => None,
        };
        if now.is_some() {
            self.last.set(now);
        }
        at_share(self.clock.take(), self.wall.take(), self.cpu.take(), share)
    }
}

/// `clock` busy seconds of spans that took `wall` real seconds and `cpu` CPU
/// seconds, at a share `share` of the core: `clock · max(1, (cpu/wall)/share)`.
fn at_share(clock: f64, wall: f64, cpu: f64, share: Option<f64>) -> f64 {
    match share {
        Some(s) if wall > 0.0 && cpu > 0.0 && s > 0.0 => clock * (cpu / wall / s).max(1.0),
        _ => clock,
    }
}

impl<'a, W: Comm> RateClock<'a, W> {
    /// A clock of credited busy seconds, as measured.
    pub(crate) fn new(world: &'a W) -> Self {
        Self {
            comm: world,
            busy: Cell::new(0.0),
            work: Cell::new(0.0),
            share: None,
        }
    }

    /// A clock that converts the busy seconds of spans credited with
    /// [`RateClock::credit_span`] into seconds at the share of its core the
    /// crediting thread gets ([`lblib::sched`]): on a core shared by time slices
    /// a product shorter than a slice runs at full speed, and only the scheduler
    /// statistics show the share. Where they cannot be read the seconds stay
    /// as measured.
    pub(crate) fn with_core_share(world: &'a W) -> Self {
        Self {
            share: Some(ShareMeter::default()),
            ..Self::new(world)
        }
    }

    /// Credits `seconds` of busy time for `work` nonzeros (figures that are not
    /// finite and positive are ignored).
    pub(crate) fn credit(&self, seconds: f64, work: f64) {
        if seconds.is_finite() && seconds > 0.0 && work.is_finite() && work > 0.0 {
            self.busy.set(self.busy.get() + seconds);
            self.work.set(self.work.get() + work);
        }
    }

    /// Starts a span for [`RateClock::credit_span`] (`None` without the core
    /// share: nothing to read).
    pub(crate) fn span_start(&self) -> Option<SpanStart> {
        let meter = self.share.as_ref()?;
        if meter.tid.get() == 0 {
            meter.tid.set(sched::thread_id());
            meter.last.set(SchedSample::of_thread(meter.tid.get()));
            meter.stretch.set(meter.last.get());
        }
        Some(SpanStart {
            wall: Instant::now(),
            cpu: sched::thread_cpu_seconds()?,
        })
    }

    /// Credits `seconds` of busy time (of the clock) for `work` nonzeros, done in
    /// the span begun by `start` on the calling thread; the seconds are
    /// converted to the thread's core share at the next reading of the clock.
    pub(crate) fn credit_span(&self, seconds: f64, start: Option<SpanStart>, work: f64) {
        let (Some(meter), Some(start)) = (&self.share, start) else {
            return self.credit(seconds, work);
        };
        if !(seconds.is_finite() && seconds > 0.0 && work.is_finite() && work > 0.0) {
            return;
        }
        let cpu = sched::thread_cpu_seconds().map_or(0.0, |c| (c - start.cpu).max(0.0));
        meter.clock.set(meter.clock.get() + seconds);
        meter
            .wall
            .set(meter.wall.get() + start.wall.elapsed().as_secs_f64());
        meter.cpu.set(meter.cpu.get() + cpu);
        self.work.set(self.work.get() + work);
    }

    /// The share of its core the crediting thread got since the last call (or
    /// its first span): `None` without the core share or a reading.
    pub(crate) fn stretch_share(&self) -> Option<f64> {
        let meter = self.share.as_ref()?;
        let now = SchedSample::of_thread(meter.tid.get())?;
        let earlier = meter.stretch.replace(Some(now))?;
        now.share_since(&earlier)
    }

    /// Whether busy seconds are converted to the core's share.
    pub(crate) fn has_core_share(&self) -> bool {
        self.share.is_some()
    }

    /// The work credited so far.
    pub(crate) fn work(&self) -> f64 {
        self.work.get()
    }

    fn via<T>(&self, f: impl FnOnce(&W) -> T) -> T {
        f(self.comm)
    }
}

impl<W: Comm> Comm for RateClock<'_, W> {
    fn rank(&self) -> usize {
        self.comm.rank()
    }
    fn size(&self) -> usize {
        self.comm.size()
    }
    /// Busy seconds of the correction phases credited so far (at the core's
    /// share with [`RateClock::with_core_share`]).
    fn wtime(&self) -> f64 {
        if let Some(meter) = &self.share {
            self.busy.set(self.busy.get() + meter.convert());
        }
        self.busy.get()
    }
    lblib::forward_collectives!(via);
    fn real_clock(&self) -> bool {
        self.comm.real_clock()
    }
    /// Not used: [`Monitor`] never splits its clock.
    fn split(&self, _color: usize, _key: usize) -> Self {
        unimplemented!("RateClock is not split")
    }
}

/// A communicator that adds up the seconds spent inside its collectives
/// ([`WaitTimer::waited`]; none on one process); everything else, the clock
/// included, is forwarded unchanged. On a solve group's communicator it separates a rank's own work in a
/// correction phase from its waits for the other members.
pub(crate) struct WaitTimer<G> {
    inner: G,
    waited: Cell<f64>,
}

impl<G: Comm> WaitTimer<G> {
    pub(crate) fn new(inner: G) -> Self {
        Self {
            inner,
            waited: Cell::new(0.0),
        }
    }

    /// Seconds (of the wrapped clock) spent inside collectives so far.
    pub(crate) fn waited(&self) -> f64 {
        self.waited.get()
    }

    fn timed<T>(&self, f: impl FnOnce(&G) -> T) -> T {
        // alone, nobody is waited for: under MPI a lone rank's collective may
        // still yield the core (Open MPI oversubscribed), and a loaded core's
        // time slices taken there would make its products look fast
        if self.inner.size() == 1 {
            return f(&self.inner);
        }
        let t0 = self.inner.wtime();
        let out = f(&self.inner);
        let dt = (self.inner.wtime() - t0).max(0.0);
        self.waited.set(self.waited.get() + dt);
        out
    }
}

impl<G: Comm> Comm for WaitTimer<G> {
    fn rank(&self) -> usize {
        self.inner.rank()
    }
    fn size(&self) -> usize {
        self.inner.size()
    }
    fn wtime(&self) -> f64 {
        self.inner.wtime()
    }
    lblib::forward_collectives!(timed);
    fn set_slowdown(&self, factor: f64) -> bool {
        self.inner.set_slowdown(factor)
    }
    fn charge(&self, seconds: f64) {
        self.inner.charge(seconds)
    }
    fn real_clock(&self) -> bool {
        self.inner.real_clock()
    }
    fn split(&self, color: usize, key: usize) -> Self {
        Self::new(self.timed(|c| c.split(color, key)))
    }
}

/// `1 − mean(t)/max(t)`: the share of a phase whose length is `max(t)` that an
/// average rank spends waiting (0 for equal times).
fn imbalance(t: &[f64]) -> f64 {
    let max = t.iter().copied().fold(0.0, f64::max);
    if max > 0.0 && !t.is_empty() {
        1.0 - t.iter().sum::<f64>() / t.len() as f64 / max
    } else {
        0.0
    }
}

/// Busy time of each rank's share `nnz[i]` at rate `rates[i]`.
fn times(nnz: &[usize], rates: &[f64]) -> Vec<f64> {
    nnz.iter().zip(rates).map(|(&z, &r)| z as f64 / r).collect()
}

/// The figures of a re-partition decided by [`Monitor`], for its event.
#[derive(Default)]
struct Pending {
    rates: Vec<f64>,
    before: f64,
    predicted: f64,
}

/// See [`Monitor::new`]: each rank's nonzeros under the layout built from
/// given weights, and that layout.
pub(crate) type Planner<'c, L> = Box<dyn Fn(&[f64]) -> Option<(Vec<usize>, L)> + 'c>;

/// A re-partition: the weights of the new rows (one per fine rank) and the
/// layout built from them.
pub(crate) struct Plan<L> {
    /// The rates the rows follow, floored (`RepartitionParams::min_weight`).
    pub weights: Vec<f64>,
    /// The layout of the new rows.
    pub layout: L,
}

/// Measures every rank's rate and decides when to re-partition
/// (see the module documentation). Polled by the solver loop as a
/// [`LoopMonitor`]: at every loop top on every rank (collective).
pub(crate) struct Monitor<'c, W: Comm, L> {
    lbs: Lbs<'c, RateClock<'c, W>>,
    clock: &'c RateClock<'c, W>,
    prm: RepartitionParams,
    kind: RateKind,
    /// Nonzeros of each fine rank's rows (the work of one projection phase is
    /// proportional to them on every rank).
    nnz: Vec<usize>,
    /// Outer iterations in the open section, and the clock's work at its start.
    phases: usize,
    work0: f64,
    above: usize,
    /// The decision of the last check that asked to stop.
    pending: Option<Pending>,
    /// The nonzeros of each rank under the partition weighted by given rates
    /// (with the layout's constraints), for the predicted imbalance.
    planner: Planner<'c, L>,
    /// Figures so far.
    pub stats: RepartitionStats,
}

impl<'c, W: Comm, L> Monitor<'c, W, L> {
    /// A monitor on `clock` for fine ranks holding `nnz` nonzeros; `kind` and
    /// `window`: the rates it compares (`MultigrainParams::rate_kind`,
    /// `rate_window`); `planner`: each rank's nonzeros under the partition the
    /// caller would build from given weights (`None`: none possible).
    ///
    /// # Errors
    /// `InvalidParams` for bad parameters or window.
    pub(crate) fn new(
        clock: &'c RateClock<'c, W>,
        prm: RepartitionParams,
        kind: RateKind,
        window: f64,
        nnz: Vec<usize>,
        planner: Planner<'c, L>,
    ) -> Result<Self, JdError> {
        prm.validate()?;
        let cfg = LbsConfig {
            first_section_ops: 0.0,
            window,
            min_rate_seconds: 0.0,
        };
        let lbs = Lbs::with_config(clock, cfg).map_err(|e| JdError::invalid("rate_window", e))?;
        Ok(Self {
            clock,
            lbs,
            prm,
            kind,
            nnz,
            phases: 0,
            work0: 0.0,
            above: 0,
            pending: None,
            planner,
            stats: RepartitionStats {
                active: true,
                ..RepartitionStats::default()
            },
        })
    }

    /// Records a re-partition done by the caller: the new rows' nonzeros, the
    /// rows before and after, this rank's seconds and the values all ranks sent.
    pub(crate) fn record(
        &mut self,
        nnz: Vec<usize>,
        rows: (Vec<usize>, Vec<usize>),
        seconds: f64,
        values: (u64, u64),
        outer_iteration: usize,
    ) {
        let p = self.pending.take().unwrap_or_default();
        self.nnz = nnz;
        self.stats.count += 1;
        self.stats.seconds += seconds;
        self.stats.values_sent += values.0;
        self.stats.values_sent_total += values.1;
        self.stats.events.push(RepartitionEvent {
            outer_iteration,
            imbalance_before: p.before,
            imbalance_predicted: p.predicted,
            imbalance_after: None,
            rates: p.rates,
            rows_before: rows.0,
            rows_after: rows.1,
            seconds,
            values_moved: values.1,
        });
        self.above = 0;
    }

    /// Ends the open section and gathers every rank's rate (collective). `None`
    /// (with the error recorded) when a rank could not measure one.
    fn measure(&mut self) -> Option<Vec<f64>> {
        let ops = self.clock.work() - self.work0;
        match self.lbs.section_end(ops) {
            // no correction work here in this stretch (a group without an
            // equation): the rank's previous rate, if any, stays in force
            Err(lblib::LbError::NoElapsedTime { .. }) if ops == 0.0 => {}
            Err(e) => self.stats.errors.push(format!("section_end: {e}")),
            Ok(_) => {}
        }
        // every rank calls decide, even after a local failure (it reports it)
        let decided = self.lbs.decide_with(1.0, Method::Fastest, self.kind);
        if self.clock.has_core_share() {
            let mine = [self.clock.stretch_share().unwrap_or(f64::NAN)];
            let mut all = vec![0.0; self.clock.size()];
            self.clock.all_gather(&mine, &mut all);
            self.stats.core_shares.push(all);
        }
        let res = decided.and_then(|_| {
            let (r, i) = (
                self.lbs.rates_with(self.kind)?,
                self.lbs.index_with(self.kind)?,
            );
            let mut rates = vec![0.0; r.len()];
            for (&rank, &v) in i.iter().zip(r) {
                rates[rank] = v;
            }
            Ok(rates)
        });
        match res {
            Ok(r) if r.iter().all(|v| v.is_finite() && *v > 0.0) => Some(r),
            Ok(r) => {
                self.stats.errors.push(format!("rates {r:?}"));
                None
            }
            Err(e) => {
                self.stats.errors.push(format!("decide: {e}"));
                None
            }
        }
    }

    /// One check (collective): the plan when the rows should move.
    fn check(&mut self) -> Option<Plan<L>> {
        let rates = self.measure()?;
        let t = times(&self.nnz, &rates);
        let imb = imbalance(&t);
        self.stats.checks += 1;
        self.stats.measured_imbalance.push(imb);
        if let Some(ev) = self.stats.events.last_mut() {
            ev.imbalance_after.get_or_insert(imb);
        }
        if imb <= self.prm.threshold {
            self.above = 0;
            return None;
        }
        self.above += 1;
        if self.above < self.prm.consecutive || self.stats.count >= self.prm.max_repartitions {
            return None;
        }
        // weights: the rates, floored so that no rank is starved of rows
        let top = rates.iter().copied().fold(0.0, f64::max);
        let weights: Vec<f64> = rates
            .iter()
            .map(|&r| r.max(self.prm.min_weight * top))
            .collect();
        // predicted busy times of the new rows at the same rates
        let (nnz, layout) = (self.planner)(&weights)?;
        let predicted = times(&nnz, &rates);
        let tmax = t.iter().copied().fold(0.0, f64::max);
        let pmax = predicted.iter().copied().fold(0.0, f64::max);
        if tmax <= 0.0 || 1.0 - pmax / tmax < 0.5 * self.prm.threshold {
            return None;
        }
        self.pending = Some(Pending {
            predicted: imbalance(&predicted),
            before: imb,
            rates,
        });
        Some(Plan { weights, layout })
    }
}

impl<W: Comm, L> LoopMonitor for Monitor<'_, W, L> {
    type Plan = Plan<L>;

    fn poll(&mut self, _stats: &Stats) -> Option<Plan<L>> {
        if !self.lbs.in_section() {
            // first loop top of a (resumed) solve: start timing
            self.phases = 0;
            self.work0 = self.clock.work();
            if let Err(e) = self.lbs.section_start() {
                self.stats.errors.push(format!("section_start: {e}"));
            }
            return None;
        }
        self.phases += 1;
        // the instantaneous rate's window moves at phase ends
        let ops = self.clock.work() - self.work0;
        let _ = self.lbs.should_continue_with(ops, 0.0, self.kind);
        if self.phases < self.prm.check_every {
            return None;
        }
        let plan = self.check();
        if plan.is_none() {
            self.phases = 0;
            self.work0 = self.clock.work();
            if let Err(e) = self.lbs.section_start() {
                self.stats.errors.push(format!("section_start: {e}"));
            }
        }
        plan
    }
}

/// Moves every row-distributed array of `ck` (locked vectors, basis, AV, new
/// block) from the rows of `old` to those of `new` with one all-to-all-v over
/// `comm` (the fine-grain ranks, part p on rank p); returns the moved checkpoint
/// and the f64 values this rank sent to others. Collective.
///
/// # Errors
/// `InvalidParams` when the partitions do not fit `comm` or `ck`.
pub(crate) fn move_rows<C: Comm + ?Sized>(
    comm: &C,
    old: &RowPartition,
    new: &RowPartition,
    ck: &Checkpoint,
) -> Result<(Checkpoint, u64), JdError> {
    let invalid = |e: &dyn std::fmt::Display| JdError::invalid("repartition", e);
    let me = comm.rank();
    let plan = Redistribution::between(
        &GroupPartition::all(old.clone()),
        &GroupPartition::all(new.clone()),
    )
    .map_err(|e| invalid(&e))?;
    let (n_old, n_new) = (plan.from_len(me), plan.to_len(me));
    if n_old != ck.n_local {
        return Err(invalid(&format!(
            "the snapshot has {} rows, the old partition {n_old}",
            ck.n_local
        )));
    }
    let arrays = [&ck.locked_vectors, &ck.basis, &ck.av, &ck.block_vectors];
    let cols: Vec<usize> = arrays
        .iter()
        .map(|a| a.len().checked_div(n_old).unwrap_or(0))
        .collect();
    let k: usize = cols.iter().sum();
    let mut x = Vec::with_capacity(n_old * k);
    for a in arrays {
        x.extend_from_slice(a);
    }
    let mut y = vec![0.0; n_new * k];
    let mut scratch = precond::dist::RedistScratch::default();
    precond::dist::redistribute(comm, &plan, &x, &mut y, k, &mut scratch);
    let sent = plan
        .sends(me)
        .filter(|t| t.dst != me)
        .map(|t| (t.rows.len() * k) as u64)
        .sum();
    let mut out = ck.clone();
    let mut at = 0;
    for (dst, c) in [
        &mut out.locked_vectors,
        &mut out.basis,
        &mut out.av,
        &mut out.block_vectors,
    ]
    .into_iter()
    .zip(cols)
    {
        *dst = y[at..at + n_new * c].to_vec();
        at += n_new * c;
    }
    out.n_local = n_new;
    out.row_offset = new.range(me).start;
    Ok((out, sent))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lblib::ReduceOp;

    #[test]
    fn imbalance_is_the_mean_wait_share() {
        assert_eq!(imbalance(&[1.0, 1.0, 1.0]), 0.0);
        assert!((imbalance(&[1.0, 1.0, 1.0, 4.0]) - (1.0 - 7.0 / 16.0)).abs() < 1e-15);
        assert_eq!(imbalance(&[]), 0.0);
        assert_eq!(times(&[10, 20], &[5.0, 5.0]), vec![2.0, 4.0]);
    }

    #[test]
    fn params_are_validated() {
        assert!(RepartitionParams::default().validate().is_ok());
        for p in [
            RepartitionParams {
                threshold: 0.0,
                ..Default::default()
            },
            RepartitionParams {
                threshold: f64::NAN,
                ..Default::default()
            },
            RepartitionParams {
                check_every: 0,
                ..Default::default()
            },
            RepartitionParams {
                min_weight: 2.0,
                ..Default::default()
            },
        ] {
            assert!(matches!(
                p.validate(),
                Err(JdError::InvalidParams {
                    field: "repartition",
                    ..
                })
            ));
        }
    }

    /// Busy seconds at the core's share: short spans at full speed on a sixth of
    /// a core take 6 times as long; spans whose wall time already holds the
    /// others' time slices, or that slept (an emulated slowdown), stay as they are.
    #[test]
    fn busy_seconds_at_the_core_share() {
        assert_eq!(at_share(2.0, 1.0, 1.0, Some(1.0 / 6.0)), 12.0);
        assert_eq!(at_share(2.0, 3.0, 1.0, Some(1.0 / 3.0)), 2.0);
        assert_eq!(at_share(2.0, 4.0, 1.0, Some(1.0)), 2.0);
        assert_eq!(at_share(2.0, 1.0, 1.0, None), 2.0);
        assert_eq!(at_share(2.0, 0.0, 0.0, Some(0.5)), 2.0);
        // half the wall time on the CPU, a quarter of the core: twice as long
        assert_eq!(at_share(1.0, 2.0, 1.0, Some(0.25)), 2.0);
    }

    /// On real clocks with the core share: every check records each rank's
    /// share of its core, a fraction in (0, 1], and the rates stay positive.
    #[cfg(target_os = "linux")]
    #[test]
    fn checks_record_the_core_shares() {
        use lblib::{ClockMode, ThreadComm, ThreadConfig};
        let cfg = ThreadConfig::with_slowdowns(&[1.0, 1.0], ClockMode::Real);
        let out = ThreadComm::run_with(cfg, |comm| {
            assert!(comm.real_clock());
            let clock = RateClock::with_core_share(&comm);
            let mut m = Monitor::new(
                &clock,
                RepartitionParams::default(),
                RateKind::Average,
                0.05,
                vec![1000; 2],
                Box::new(plan),
            )
            .unwrap();
            let stats = Stats::default();
            for _ in 0..12 {
                let _ = m.poll(&stats);
                // a "product": 2 ms of this thread's CPU time
                let t0 = comm.wtime();
                let span = clock.span_start();
                let c0 = sched::thread_cpu_seconds().unwrap();
                let mut x = 0u64;
                while sched::thread_cpu_seconds().unwrap() - c0 < 2e-3 {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
                clock.credit_span(comm.wtime() - t0, span, 1e6);
                comm.barrier();
            }
            m.stats.clone()
        });
        for st in out {
            assert_eq!(st.checks, 2, "{st:?}");
            assert_eq!(st.core_shares.len(), st.checks, "{st:?}");
            for row in &st.core_shares {
                assert_eq!(row.len(), 2);
                assert!(row.iter().all(|s| *s > 0.0 && *s <= 1.0), "{st:?}");
            }
            assert!(st.errors.is_empty(), "{st:?}");
        }
    }

    /// On the thread backend's manual clock: the wait timer counts the time
    /// inside collectives only, and the rate clock moves only by credited busy
    /// seconds, so that an Lbs on it measures the credited work per busy second.
    #[test]
    fn wait_timer_and_rate_clock() {
        use lblib::{ClockMode, ThreadComm, ThreadConfig};
        let cfg = ThreadConfig::with_slowdowns(&[1.0, 1.0], ClockMode::Manual);
        let out = ThreadComm::run_with(cfg, |comm| {
            let group = WaitTimer::new(comm.split(0, comm.rank()));
            let clock = RateClock::new(&comm);
            let t0 = group.wtime();
            // rank 1 works 3 s, rank 0 1 s: rank 0 waits 2 s in the reduction
            comm.advance(if comm.rank() == 1 { 3.0 } else { 1.0 });
            let mut b = [1.0];
            group.all_reduce(&mut b, ReduceOp::Sum);
            assert_eq!(b[0], 2.0);
            let (wall, waited) = (group.wtime() - t0, group.waited());
            let mut lbs = Lbs::with_config(
                &clock,
                LbsConfig {
                    first_section_ops: 0.0,
                    ..LbsConfig::default()
                },
            )
            .unwrap();
            lbs.section_start().unwrap();
            clock.credit(wall - waited, 6.0e6);
            clock.credit(f64::NAN, 1.0);
            clock.credit(1.0, 0.0);
            assert_eq!(clock.work(), 6.0e6);
            let rate = lbs.section_end(clock.work()).unwrap();
            (wall, waited, rate)
        });
        assert_eq!(out[0], (3.0, 2.0, 6.0e6));
        assert_eq!(out[1], (3.0, 0.0, 2.0e6));
    }

    /// Each rank's nonzeros under rows weighted by `w` (4000 in all), twice
    /// (the second as the layout).
    fn plan(w: &[f64]) -> Option<(Vec<usize>, Vec<usize>)> {
        let s: f64 = w.iter().sum();
        let nnz: Vec<usize> = w
            .iter()
            .map(|x| (4000.0 * x / s).round() as usize)
            .collect();
        Some((nnz.clone(), nnz))
    }

    /// Deterministic (manual clocks): ranks of speeds 1, 1, 1/4, 1/4 start with
    /// equal rows. Their projection phase also holds work every rank repeats
    /// whatever its rows (which made the former busy rate of a rank fall as it
    /// lost rows, and the split overshoot); the correction rates do not move with
    /// the rows, so the first re-partition lands on the speed ratio and the next
    /// checks leave it there.
    #[test]
    fn monitor_moves_rows_to_the_speed_ratio_once() {
        use lblib::{ClockMode, ThreadComm, ThreadConfig};
        let cfg = ThreadConfig::with_slowdowns(&[1.0, 1.0, 4.0, 4.0], ClockMode::Manual);
        let out = ThreadComm::run_with(cfg, |comm| {
            let clock = RateClock::new(&comm);
            let prm = RepartitionParams::default();
            let mut m = Monitor::new(
                &clock,
                prm,
                RateKind::Average,
                0.05,
                vec![1000; 4],
                Box::new(plan),
            )
            .unwrap();
            let stats = Stats::default();
            for it in 0..60 {
                if let Some(p) = m.poll(&stats) {
                    assert_eq!(plan(&p.weights).unwrap().1, p.layout);
                    let rows = (m.nnz.clone(), p.layout.clone());
                    m.record(p.layout, rows, 0.0, (0, 0), it);
                }
                // projection: 1 µs per nonzero of its rows plus 0.5 ms that every
                // rank repeats, then a fine-grain sum
                comm.advance(1e-6 * m.nnz[comm.rank()] as f64 + 5e-4);
                comm.barrier();
                // correction: 200 group products of 1000 nonzeros, 1 µs each
                let t0 = comm.wtime();
                comm.advance(200.0 * 1000.0 * 1e-6);
                clock.credit(comm.wtime() - t0, 200.0 * 1000.0);
            }
            (m.nnz.clone(), m.stats.clone())
        });
        for (nnz, st) in out {
            assert_eq!(nnz, vec![1600, 1600, 400, 400], "{st:?}");
            assert_eq!(st.count, 1, "{st:?}");
            for (r, want) in st.events[0].rates.iter().zip([1e6, 1e6, 2.5e5, 2.5e5]) {
                assert!((r / want - 1.0).abs() < 1e-12, "{st:?}");
            }
            assert!(st.errors.is_empty(), "{st:?}");
            assert!(st.checks >= 10, "{st:?}");
            // 1 − mean/max of the busy times 1, 1, 4, 4 ms before; 0 after
            let imb = &st.measured_imbalance;
            assert!(
                imb[..2].iter().all(|i| (i - 0.375).abs() < 1e-12),
                "{imb:?}"
            );
            assert!(imb[2..].iter().all(|&i| i < 1e-12), "{imb:?}");
        }
    }
}
