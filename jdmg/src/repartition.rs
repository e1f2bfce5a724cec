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
//! Here a phase is a stretch of outer iterations. `ProjectionClock` wraps the
//! fine-grain communicator and measures each rank's *busy* time in the projection
//! phase (wall time minus the time inside fine-grain collectives and minus the
//! correction phases); an lblib [`Lbs`] on that clock turns it into rates (rows'
//! nonzeros per busy second, `RateKind::Average` over the stretch or LBLIB's
//! instantaneous rate over the last window). `Monitor`, polled at the top of
//! every outer iteration as a [`CheckpointSink`], compares the ranks every
//! [`RepartitionParams::check_every`] iterations; when the measured imbalance stays
//! above [`RepartitionParams::threshold`] for [`RepartitionParams::consecutive`]
//! checks it stops the solve with a snapshot of its state. The caller
//! ([`crate::solve_multigrain`]) computes a rate-weighted row partition, moves
//! every row-distributed array of the snapshot (`move_rows`, one all-to-all-v),
//! rebuilds the local rows and halo plans and resumes: the solver loop is the one
//! of [`crate::jd`], entered again from the moved state.

use std::cell::Cell;

use lblib::{Comm, Lbs, LbsConfig, Method, RateKind};
use matrices::partition::{GroupPartition, Redistribution, RowPartition};
use serde::{Deserialize, Serialize};

use crate::checkpoint::{Checkpoint, CheckpointRequest, CheckpointSink};
use crate::solution::{JdError, Stats};

/// Options of semi-static re-partitioning (part of
/// [`crate::MultigrainParams`]). Defaults: on, 10 % threshold, a check every 5
/// outer iterations, 2 checks in a row above the threshold, at most 4
/// re-partitions per solve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RepartitionParams {
    /// Re-partition the fine rows during the solve. Default true; it takes effect
    /// only when the rows are weighted by measured rates
    /// (`MultigrainParams::rate_weighted_rows`), so that a deterministic solve
    /// (`--balance none`) stays deterministic.
    pub enabled: bool,
    /// Measured imbalance of the projection phase, `1 − mean(tᵢ)/max(tᵢ)` over the
    /// ranks' busy times tᵢ, above which a re-partition is considered (the share
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

/// One re-partition.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RepartitionEvent {
    /// Outer iterations done when it happened.
    pub outer_iteration: usize,
    /// Measured imbalance of the projection phase before (the check that
    /// triggered it).
    pub imbalance_before: f64,
    /// Imbalance predicted for the new rows from the same rates.
    pub imbalance_predicted: f64,
    /// Imbalance measured at the next check (`None` when the solve ended first).
    pub imbalance_after: Option<f64>,
    /// Each rank's measured rate (nonzeros per busy second of the projection phase).
    pub rates: Vec<f64>,
    /// Fine rows of each rank before and after.
    pub rows_before: Vec<usize>,
    /// Fine rows of each rank after.
    pub rows_after: Vec<usize>,
    /// Seconds of this re-partition (layout, data movement, rebuild), this rank.
    pub seconds: f64,
    /// f64 values all ranks sent to other ranks.
    pub values_moved: u64,
}

/// Figures of semi-static re-partitioning in one solve (`--json`:
/// `multigrain.repartition`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RepartitionStats {
    /// Whether re-partitioning was active.
    pub active: bool,
    /// Checks of the measured imbalance done.
    pub checks: usize,
    /// Imbalance measured at every check.
    pub measured_imbalance: Vec<f64>,
    /// Re-partitions done.
    pub count: usize,
    /// Seconds spent in them on this rank (measure, move, rebuild).
    pub seconds: f64,
    /// f64 values this rank sent to others in them.
    pub values_sent: u64,
    /// Values sent by all ranks in them.
    pub values_sent_total: u64,
    /// One entry per re-partition.
    pub events: Vec<RepartitionEvent>,
    /// Rate measurements that failed (lblib errors); the check was skipped.
    pub errors: Vec<String>,
}

/// How a [`ProjectionClock`]'s owner wraps the fine-grain communicator.
enum Inner<'a, W> {
    Borrowed(&'a W),
    Owned(W),
}

/// The fine-grain communicator with a clock of projection-phase *busy* time:
/// [`Comm::wtime`] is the wrapped clock minus the time spent inside this
/// communicator's collectives and minus the paused spans (the correction phases,
/// [`ProjectionClock::pause`]). Everything else is forwarded unchanged, so the
/// solve takes the same steps as on the wrapped communicator.
pub(crate) struct ProjectionClock<'a, W> {
    inner: Inner<'a, W>,
    /// Seconds excluded so far (collectives and paused spans).
    excluded: Cell<f64>,
    /// Wrapped clock at [`ProjectionClock::pause`], while paused.
    paused_at: Cell<Option<f64>>,
}

impl<'a, W: Comm> ProjectionClock<'a, W> {
    pub(crate) fn new(world: &'a W) -> Self {
        Self {
            inner: Inner::Borrowed(world),
            excluded: Cell::new(0.0),
            paused_at: Cell::new(None),
        }
    }

    fn comm(&self) -> &W {
        match &self.inner {
            Inner::Borrowed(w) => w,
            Inner::Owned(w) => w,
        }
    }

    /// Stops the clock (start of a correction phase); nested calls are ignored.
    pub(crate) fn pause(&self) {
        if self.paused_at.get().is_none() {
            self.paused_at.set(Some(self.comm().wtime()));
        }
    }

    /// Restarts the clock (end of a correction phase).
    pub(crate) fn resume(&self) {
        if let Some(t) = self.paused_at.take() {
            let dt = (self.comm().wtime() - t).max(0.0);
            self.excluded.set(self.excluded.get() + dt);
        }
    }

    /// Runs a collective, excluding its duration from the clock.
    fn timed<T>(&self, f: impl FnOnce(&W) -> T) -> T {
        if self.paused_at.get().is_some() {
            return f(self.comm());
        }
        let t0 = self.comm().wtime();
        let out = f(self.comm());
        let dt = (self.comm().wtime() - t0).max(0.0);
        self.excluded.set(self.excluded.get() + dt);
        out
    }
}

impl<W: Comm> Comm for ProjectionClock<'_, W> {
    fn rank(&self) -> usize {
        self.comm().rank()
    }
    fn size(&self) -> usize {
        self.comm().size()
    }
    /// Busy seconds of the projection phase (see the type's documentation).
    fn wtime(&self) -> f64 {
        let now = self.comm().wtime();
        let paused = self.paused_at.get().map_or(0.0, |t| (now - t).max(0.0));
        now - self.excluded.get() - paused
    }
    lblib::forward_collectives!(timed);
    fn set_slowdown(&self, factor: f64) -> bool {
        self.comm().set_slowdown(factor)
    }
    /// A fresh clock on the split of the wrapped communicator.
    fn split(&self, color: usize, key: usize) -> Self {
        Self {
            inner: Inner::Owned(self.timed(|c| c.split(color, key))),
            excluded: Cell::new(0.0),
            paused_at: Cell::new(None),
        }
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

/// What [`Monitor`] hands over when it stops the solve.
pub(crate) struct Handover {
    /// This rank's state at the top of the outer iteration.
    pub snapshot: Checkpoint,
    /// The rates to weight the new rows with (one per fine rank).
    pub weights: Vec<f64>,
}

/// A re-partition decided by [`Monitor`], waiting for the snapshot.
#[derive(Default)]
struct Pending {
    rates: Vec<f64>,
    weights: Vec<f64>,
    before: f64,
    predicted: f64,
}

/// See [`Monitor::new`].
pub(crate) type Planner<'c> = Box<dyn Fn(&[f64]) -> Option<Vec<usize>> + 'c>;

/// Measures the projection phase on every rank and decides when to re-partition
/// (see the module documentation). Polled by the solver as a
/// [`CheckpointSink`]: at every loop top on every rank (collective).
pub(crate) struct Monitor<'c, W: Comm> {
    lbs: Lbs<'c, ProjectionClock<'c, W>>,
    prm: RepartitionParams,
    kind: RateKind,
    /// Nonzeros of each fine rank's rows (the work of one projection phase is
    /// proportional to them on every rank).
    nnz: Vec<usize>,
    me: usize,
    /// Projection phases timed in the open section and their operations.
    phases: usize,
    ops: f64,
    above: usize,
    handover: Option<Handover>,
    /// The decision of the last check that asked to stop.
    pending: Option<Pending>,
    /// The nonzeros of each rank under the partition weighted by given rates
    /// (with the layout's constraints), for the predicted imbalance.
    planner: Planner<'c>,
    /// Figures so far.
    pub stats: RepartitionStats,
}

impl<'c, W: Comm> Monitor<'c, W> {
    /// A monitor on `clock` for fine ranks holding `nnz` nonzeros; `kind` and
    /// `window`: the rates it compares (`MultigrainParams::rate_kind`,
    /// `rate_window`); `planner`: each rank's nonzeros under the partition the
    /// caller would build from given weights (`None`: none possible).
    ///
    /// # Errors
    /// `InvalidParams` for bad parameters or window.
    pub(crate) fn new(
        clock: &'c ProjectionClock<'c, W>,
        prm: RepartitionParams,
        kind: RateKind,
        window: f64,
        nnz: Vec<usize>,
        planner: Planner<'c>,
    ) -> Result<Self, JdError> {
        prm.validate()?;
        let cfg = LbsConfig {
            first_section_ops: 0.0,
            window,
            min_rate_seconds: 0.0,
        };
        let lbs = Lbs::with_config(clock, cfg).map_err(|e| JdError::invalid("rate_window", e))?;
        Ok(Self {
            me: clock.rank(),
            lbs,
            prm,
            kind,
            nnz,
            phases: 0,
            ops: 0.0,
            above: 0,
            handover: None,
            pending: None,
            planner,
            stats: RepartitionStats {
                active: true,
                ..RepartitionStats::default()
            },
        })
    }

    /// The handover of the last stop, if the monitor stopped the solve.
    pub(crate) fn take_handover(&mut self) -> Option<Handover> {
        self.handover.take()
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
        let ops = self.ops.max(f64::MIN_POSITIVE);
        if let Err(e) = self.lbs.section_end(ops) {
            self.stats.errors.push(format!("section_end: {e}"));
        }
        // every rank calls decide, even after a local failure (it reports it)
        let res = self
            .lbs
            .decide_with(1.0, Method::Fastest, self.kind)
            .and_then(|_| {
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

    /// One check (collective): `true` when the solve should stop to re-partition.
    fn check(&mut self) -> bool {
        let Some(rates) = self.measure() else {
            return false;
        };
        let t = times(&self.nnz, &rates);
        let imb = imbalance(&t);
        self.stats.checks += 1;
        self.stats.measured_imbalance.push(imb);
        if let Some(ev) = self.stats.events.last_mut() {
            ev.imbalance_after.get_or_insert(imb);
        }
        if imb <= self.prm.threshold {
            self.above = 0;
            return false;
        }
        self.above += 1;
        if self.above < self.prm.consecutive || self.stats.count >= self.prm.max_repartitions {
            return false;
        }
        // weights: the rates, floored so that no rank is starved of rows
        let top = rates.iter().copied().fold(0.0, f64::max);
        let weights: Vec<f64> = rates
            .iter()
            .map(|&r| r.max(self.prm.min_weight * top))
            .collect();
        // predicted busy times of the new rows at the same rates
        let Some(nnz) = (self.planner)(&weights) else {
            return false;
        };
        let predicted = times(&nnz, &rates);
        let tmax = t.iter().copied().fold(0.0, f64::max);
        let pmax = predicted.iter().copied().fold(0.0, f64::max);
        if tmax <= 0.0 || 1.0 - pmax / tmax < 0.5 * self.prm.threshold {
            return false;
        }
        self.pending = Some(Pending {
            predicted: imbalance(&predicted),
            before: imb,
            rates,
            weights,
        });
        true
    }
}

impl<W: Comm> CheckpointSink for Monitor<'_, W> {
    fn poll(&mut self, _stats: &Stats) -> CheckpointRequest {
        if !self.lbs.in_section() {
            // first loop top of a (resumed) solve: start timing
            self.phases = 0;
            self.ops = 0.0;
            if let Err(e) = self.lbs.section_start() {
                self.stats.errors.push(format!("section_start: {e}"));
            }
            return CheckpointRequest::Continue;
        }
        self.phases += 1;
        self.ops += self.nnz[self.me] as f64;
        // the instantaneous rate's window moves at phase ends
        let _ = self.lbs.should_continue_with(self.ops, 0.0, self.kind);
        if self.phases < self.prm.check_every {
            return CheckpointRequest::Continue;
        }
        let stop = self.check();
        if stop {
            CheckpointRequest::SaveAndStop
        } else {
            self.phases = 0;
            self.ops = 0.0;
            if let Err(e) = self.lbs.section_start() {
                self.stats.errors.push(format!("section_start: {e}"));
            }
            CheckpointRequest::Continue
        }
    }

    fn save(&mut self, checkpoint: &Checkpoint, last: bool) {
        if let (true, Some(p)) = (last, &self.pending) {
            self.handover = Some(Handover {
                snapshot: checkpoint.clone(),
                weights: p.weights.clone(),
            });
        }
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

    /// The busy clock of the thread backend's manual clock: time inside
    /// collectives and paused spans is excluded.
    #[test]
    fn projection_clock_excludes_waits_and_pauses() {
        use lblib::{ClockMode, ThreadComm, ThreadConfig};
        let cfg = ThreadConfig::with_slowdowns(&[1.0, 1.0], ClockMode::Manual);
        let busy = ThreadComm::run_with(cfg, |comm| {
            let clock = ProjectionClock::new(&comm);
            let t0 = clock.wtime();
            // rank 1 works 3 s, rank 0 1 s: rank 0 waits 2 s in the reduction
            comm.advance(if comm.rank() == 1 { 3.0 } else { 1.0 });
            let mut b = [1.0];
            clock.all_reduce(&mut b, ReduceOp::Sum);
            assert_eq!(b[0], 2.0);
            clock.pause();
            comm.advance(5.0);
            clock.resume();
            comm.advance(0.5);
            clock.wtime() - t0
        });
        assert!((busy[0] - 1.5).abs() < 1e-12, "{busy:?}");
        assert!((busy[1] - 3.5).abs() < 1e-12, "{busy:?}");
    }
}
