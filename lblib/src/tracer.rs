//! Imbalance tracer: the paper's measurement of wasted time (McCombs et al., §4 and §7.1).
//!
//! [`Traced`] wraps any [`Comm`] and time-stamps the entry and exit of every
//! synchronous call. Because the calls are synchronous, the imbalance of a call on a
//! process is its duration minus the minimum duration of the same call over all
//! processes; summing over calls and processes gives the wasted CPU time, and
//! dividing by the sum of wall-clock times over processes gives the percentage of
//! time wasted to load imbalance (§4, Table 1 "%Imbal").
//!
//! Calls are matched by their order: the k-th traced call on every rank is the same
//! collective. Tracing can be paused (the paper does not time-stamp calls internal
//! to solve groups, §7.1): pause it on *all* ranks of the traced communicator
//! alike, or [`Traced::report`] returns [`LbError::CallCountMismatch`].
//!
//! Memory: one 24-byte record per traced call, in a vector preallocated by
//! [`Traced::with_capacity`] (default 4096 records) that grows by doubling beyond
//! it; [`Traced::reset`] empties it without releasing memory.

use crate::error::LbError;
use lbcomm::{Comm, ReduceOp};
use std::cell::{Cell, RefCell};

const CALL_NAMES: [&str; 12] = [
    "barrier",
    "all_reduce",
    "all_reduce_u64",
    "all_gather",
    "all_gather_u64",
    "all_gather_v",
    "broadcast",
    "broadcast_u64",
    "all_to_all_v",
    "split",
    "gather_v",
    "scatter_v",
];
const BARRIER: u32 = 0;
const ALL_REDUCE: u32 = 1;
const ALL_REDUCE_U64: u32 = 2;
const ALL_GATHER: u32 = 3;
const ALL_GATHER_U64: u32 = 4;
const ALL_GATHER_V: u32 = 5;
const BROADCAST: u32 = 6;
const BROADCAST_U64: u32 = 7;
const ALL_TO_ALL_V: u32 = 8;
const SPLIT: u32 = 9;
const GATHER_V: u32 = 10;
const SCATTER_V: u32 = 11;

#[derive(Debug, Clone, Copy)]
struct Record {
    label: u32,
    enter: f64,
    exit: f64,
}

/// Imbalance of the calls sharing one label.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LabelImbalance {
    /// The label (the call name when no label was set).
    pub label: String,
    /// Number of calls with this label (per rank).
    pub calls: u64,
    /// Σ over these calls and all ranks of (duration − min duration over ranks).
    pub imbalance_seconds: f64,
    /// Σ over these calls and all ranks of the call durations.
    pub time_in_calls_seconds: f64,
    /// `imbalance_seconds` over the total wall-clock time of all ranks, in percent
    /// (the labels' percentages add up to the total).
    pub imbalance_percent: f64,
}

/// Imbalance seen by one rank.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RankImbalance {
    /// Rank in the traced communicator.
    pub rank: usize,
    /// Wall-clock time of the rank since tracing started (its clock).
    pub wall_seconds: f64,
    /// Σ over calls of (duration − min duration over ranks) on this rank.
    pub imbalance_seconds: f64,
    /// Σ over calls of their duration on this rank.
    pub time_in_calls_seconds: f64,
}

/// The paper's %imbalance (§4), in total, per label and per rank. Identical on
/// every rank.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ImbalanceReport {
    /// Number of ranks.
    pub ranks: usize,
    /// Traced calls per rank.
    pub calls: u64,
    /// Σ of wall-clock times over ranks.
    pub wall_seconds_total: f64,
    /// Σ of imbalances over calls and ranks.
    pub imbalance_seconds_total: f64,
    /// `100 × imbalance_seconds_total / wall_seconds_total`.
    pub imbalance_percent: f64,
    /// Per label, in order of first use.
    pub per_label: Vec<LabelImbalance>,
    /// Per rank.
    pub per_rank: Vec<RankImbalance>,
}

impl ImbalanceReport {
    /// The entry of `label`, if any call carried it.
    pub fn label(&self, label: &str) -> Option<&LabelImbalance> {
        self.per_label.iter().find(|l| l.label == label)
    }

    /// Largest wall-clock time over ranks.
    pub fn wall_seconds_max(&self) -> f64 {
        self.per_rank
            .iter()
            .map(|r| r.wall_seconds)
            .fold(0.0, f64::max)
    }
}

/// A [`Comm`] that records the entry and exit time (on the wrapped communicator's
/// [`Comm::wtime`]) of every collective call, for the imbalance metric of §4.
#[derive(Debug)]
pub struct Traced<C: Comm> {
    inner: C,
    records: RefCell<Vec<Record>>,
    labels: RefCell<Vec<String>>,
    current: Cell<Option<u32>>,
    paused: Cell<u32>,
    start: Cell<f64>,
}

/// Restores the previous label of a [`Traced`] when dropped (see [`Traced::label_scope`]).
#[derive(Debug)]
pub struct LabelGuard<'a, C: Comm> {
    traced: &'a Traced<C>,
    previous: Option<u32>,
}

impl<C: Comm> Drop for LabelGuard<'_, C> {
    fn drop(&mut self) {
        self.traced.current.set(self.previous);
    }
}

/// Resumes tracing of a [`Traced`] when dropped (see [`Traced::pause_scope`]).
#[derive(Debug)]
pub struct PauseGuard<'a, C: Comm> {
    traced: &'a Traced<C>,
}

impl<C: Comm> Drop for PauseGuard<'_, C> {
    fn drop(&mut self) {
        self.traced.resume();
    }
}

impl<C: Comm> Traced<C> {
    /// Wraps `inner`; the wall-clock origin of the report is now.
    pub fn new(inner: C) -> Self {
        Self::with_capacity(inner, 4096)
    }

    /// Wraps `inner` with room for `calls` records before any reallocation.
    pub fn with_capacity(inner: C, calls: usize) -> Self {
        let start = inner.wtime();
        Self {
            inner,
            records: RefCell::new(Vec::with_capacity(calls)),
            labels: RefCell::new(CALL_NAMES.iter().map(|s| s.to_string()).collect()),
            current: Cell::new(None),
            paused: Cell::new(0),
            start: Cell::new(start),
        }
    }

    /// The wrapped communicator (calls on it are not traced).
    pub fn inner(&self) -> &C {
        &self.inner
    }

    /// Unwraps.
    pub fn into_inner(self) -> C {
        self.inner
    }

    /// Number of calls traced so far on this rank.
    pub fn calls(&self) -> usize {
        self.records.borrow().len()
    }

    /// Forgets all records and restarts the wall-clock origin (not collective).
    pub fn reset(&self) {
        self.records.borrow_mut().clear();
        self.start.set(self.inner.wtime());
    }

    fn intern(&self, label: &str) -> u32 {
        let mut labels = self.labels.borrow_mut();
        if let Some(i) = labels.iter().position(|l| l == label) {
            return i as u32;
        }
        labels.push(label.to_string());
        (labels.len() - 1) as u32
    }

    /// Labels the following calls with `label` (instead of their call names).
    pub fn set_label(&self, label: &str) {
        let id = self.intern(label);
        self.current.set(Some(id));
    }

    /// Back to labelling calls by their names.
    pub fn clear_label(&self) {
        self.current.set(None);
    }

    /// Labels calls with `label` until the guard is dropped, then restores the
    /// previous label.
    pub fn label_scope(&self, label: &str) -> LabelGuard<'_, C> {
        let previous = self.current.get();
        self.set_label(label);
        LabelGuard {
            traced: self,
            previous,
        }
    }

    /// Stops tracing (nestable; see the module documentation for the rule).
    pub fn pause(&self) {
        self.paused.set(self.paused.get() + 1);
    }

    /// Undoes one [`Traced::pause`].
    pub fn resume(&self) {
        self.paused.set(self.paused.get().saturating_sub(1));
    }

    /// `true` while paused.
    pub fn is_paused(&self) -> bool {
        self.paused.get() > 0
    }

    /// Pauses tracing until the guard is dropped.
    pub fn pause_scope(&self) -> PauseGuard<'_, C> {
        self.pause();
        PauseGuard { traced: self }
    }

    fn trace<T>(&self, call: u32, f: impl FnOnce(&C) -> T) -> T {
        if self.paused.get() > 0 {
            return f(&self.inner);
        }
        let enter = self.inner.wtime();
        let out = f(&self.inner);
        let exit = self.inner.wtime();
        let label = self.current.get().unwrap_or(call);
        self.records
            .borrow_mut()
            .push(Record { label, enter, exit });
        out
    }

    /// Computes the imbalance report (§4). Collective over the wrapped
    /// communicator (these exchanges are not traced); identical result on every
    /// rank. Wall-clock time of a rank runs from creation (or [`Traced::reset`]) to
    /// this call.
    ///
    /// # Errors
    /// [`LbError::CallCountMismatch`] if ranks traced different numbers of calls,
    /// [`LbError::LabelMismatch`] if they labelled them differently.
    pub fn report(&self) -> Result<ImbalanceReport, LbError> {
        let wall_mine = self.inner.wtime() - self.start.get();
        let n = self.inner.size();
        let records = self.records.borrow();
        let labels = self.labels.borrow();
        let m = records.len();
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for r in records.iter() {
            for &b in labels[r.label as usize].as_bytes().iter().chain(b"\0") {
                hash ^= u64::from(b);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
        }
        let mut meta = vec![0u64; 2 * n];
        self.inner.all_gather_u64(&[m as u64, hash], &mut meta);
        let counts: Vec<u64> = (0..n).map(|r| meta[2 * r]).collect();
        if counts.iter().any(|&c| c != m as u64) {
            return Err(LbError::CallCountMismatch { counts });
        }
        let hashes: Vec<u64> = (0..n).map(|r| meta[2 * r + 1]).collect();
        if hashes.iter().any(|&h| h != hash) {
            return Err(LbError::LabelMismatch { hashes });
        }
        let mut send: Vec<f64> = Vec::with_capacity(m + 1);
        send.push(wall_mine);
        send.extend(records.iter().map(|r| (r.exit - r.enter).max(0.0)));
        let mut all = vec![0.0; (m + 1) * n];
        self.inner.all_gather(&send, &mut all);
        let dur = |rank: usize, k: usize| all[rank * (m + 1) + 1 + k];

        let mut per_rank: Vec<RankImbalance> = (0..n)
            .map(|rank| RankImbalance {
                rank,
                wall_seconds: all[rank * (m + 1)],
                imbalance_seconds: 0.0,
                time_in_calls_seconds: 0.0,
            })
            .collect();
        // label id -> position in per_label
        let mut slot_of: Vec<Option<usize>> = vec![None; labels.len()];
        let mut per_label: Vec<LabelImbalance> = Vec::new();
        for (k, rec) in records.iter().enumerate() {
            let dmin = (0..n).map(|r| dur(r, k)).fold(f64::INFINITY, f64::min);
            let li = *slot_of[rec.label as usize].get_or_insert_with(|| {
                per_label.push(LabelImbalance {
                    label: labels[rec.label as usize].clone(),
                    calls: 0,
                    imbalance_seconds: 0.0,
                    time_in_calls_seconds: 0.0,
                    imbalance_percent: 0.0,
                });
                per_label.len() - 1
            });
            let entry = &mut per_label[li];
            entry.calls += 1;
            for (r, pr) in per_rank.iter_mut().enumerate() {
                let d = dur(r, k);
                pr.imbalance_seconds += d - dmin;
                pr.time_in_calls_seconds += d;
                entry.imbalance_seconds += d - dmin;
                entry.time_in_calls_seconds += d;
            }
        }
        let wall_total: f64 = per_rank.iter().map(|r| r.wall_seconds).sum();
        let imb_total: f64 = per_rank.iter().map(|r| r.imbalance_seconds).sum();
        let pct = |x: f64| {
            if wall_total > 0.0 {
                100.0 * x / wall_total
            } else {
                0.0
            }
        };
        for l in per_label.iter_mut() {
            l.imbalance_percent = pct(l.imbalance_seconds);
        }
        Ok(ImbalanceReport {
            ranks: n,
            calls: m as u64,
            wall_seconds_total: wall_total,
            imbalance_seconds_total: imb_total,
            imbalance_percent: pct(imb_total),
            per_label,
            per_rank,
        })
    }
}

impl<C: Comm> Comm for Traced<C> {
    fn rank(&self) -> usize {
        self.inner.rank()
    }
    fn size(&self) -> usize {
        self.inner.size()
    }
    /// The wrapped communicator's clock (not traced).
    fn wtime(&self) -> f64 {
        self.inner.wtime()
    }
    fn barrier(&self) {
        self.trace(BARRIER, |c| c.barrier())
    }
    fn all_reduce(&self, buf: &mut [f64], op: ReduceOp) {
        self.trace(ALL_REDUCE, |c| c.all_reduce(buf, op))
    }
    fn all_reduce_u64(&self, buf: &mut [u64], op: ReduceOp) {
        self.trace(ALL_REDUCE_U64, |c| c.all_reduce_u64(buf, op))
    }
    fn all_gather(&self, send: &[f64], recv: &mut [f64]) {
        self.trace(ALL_GATHER, |c| c.all_gather(send, recv))
    }
    fn all_gather_u64(&self, send: &[u64], recv: &mut [u64]) {
        self.trace(ALL_GATHER_U64, |c| c.all_gather_u64(send, recv))
    }
    fn all_gather_v(&self, send: &[f64], counts: &[usize], recv: &mut [f64]) {
        self.trace(ALL_GATHER_V, |c| c.all_gather_v(send, counts, recv))
    }
    fn broadcast(&self, buf: &mut [f64], root: usize) {
        self.trace(BROADCAST, |c| c.broadcast(buf, root))
    }
    fn broadcast_u64(&self, buf: &mut [u64], root: usize) {
        self.trace(BROADCAST_U64, |c| c.broadcast_u64(buf, root))
    }
    fn all_to_all_v(
        &self,
        send: &[f64],
        send_counts: &[usize],
        recv: &mut [f64],
        recv_counts: &[usize],
    ) {
        self.trace(ALL_TO_ALL_V, |c| {
            c.all_to_all_v(send, send_counts, recv, recv_counts)
        })
    }
    fn gather_v(&self, send: &[f64], counts: &[usize], recv: &mut [f64], root: usize) {
        self.trace(GATHER_V, |c| c.gather_v(send, counts, recv, root))
    }
    fn scatter_v(&self, send: &[f64], counts: &[usize], recv: &mut [f64], root: usize) {
        self.trace(SCATTER_V, |c| c.scatter_v(send, counts, recv, root))
    }
    /// Splits the wrapped communicator (the split itself is traced here) and traces
    /// the sub-communicator separately, from a fresh origin.
    fn set_slowdown(&self, factor: f64) -> bool {
        self.inner().set_slowdown(factor)
    }
    fn charge(&self, seconds: f64) {
        self.inner().charge(seconds)
    }
    fn real_clock(&self) -> bool {
        self.inner().real_clock()
    }
    fn split(&self, color: usize, key: usize) -> Self {
        let sub = self.trace(SPLIT, |c| c.split(color, key));
        Traced::new(sub)
    }
}
