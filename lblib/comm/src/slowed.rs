//! `Slowed`: emulates a slower processor on any communicator by sleeping
//! (McCombs et al., §4 and §7: external load makes nodes 2 or 3 times slower).
//!
//! Used to reproduce heterogeneous speeds under `mpirun` on a homogeneous machine:
//! with factor `f > 1`, every compute segment (the CPU time of the calling thread
//! between two clock readings or collectives) is followed by a sleep of `f − 1`
//! times its length, taken when the process next reads the clock or enters a
//! collective (debts below [`SLEEP_QUANTUM`] are carried to the next reading,
//! and are always paid before a collective). Factors ≤ 1 do nothing.
//!
//! The length of a compute segment is its thread CPU time ([`SlowdownBasis::CpuTime`],
//! exact on a dedicated core) or its wall-clock time ([`SlowdownBasis::WallTime`],
//! better when processes share cores, e.g. `mpirun --oversubscribe`, because the
//! time a process waits for a core is then stretched too).

use crate::comm::Comm;
use crate::cputime::ThreadCpuClock;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What "the length of a compute segment" means for [`Slowed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum SlowdownBasis {
    /// CPU time of the calling thread (default).
    #[default]
    CpuTime,
    /// Wall-clock time.
    WallTime,
}

/// A communicator whose process computes `factor` times slower (by sleeping).
#[derive(Debug)]
pub struct Slowed<C: Comm> {
    inner: C,
    factor: f64,
    basis: SlowdownBasis,
    cpu: ThreadCpuClock,
    origin: Instant,
    state: Arc<Mutex<SlowState>>,
}

/// Shortest sleep taken between collectives; smaller debts are carried over, so
/// that short compute segments do not each pay the timer's wake-up latency.
pub const SLEEP_QUANTUM: f64 = 1e-3;

#[derive(Debug)]
struct SlowState {
    /// Segment clock at the end of the last accounted segment.
    mark: f64,
    /// Seconds still to sleep (negative: credit from oversleeping).
    debt: f64,
}

impl<C: Comm> Slowed<C> {
    /// Wraps `inner`; the CPU clock of the calling thread is the one measured.
    /// Non-finite factors act as 1.
    pub fn new(inner: C, factor: f64) -> Self {
        Self::with_basis(inner, factor, SlowdownBasis::CpuTime)
    }

    /// Like [`Slowed::new`] with an explicit [`SlowdownBasis`].
    pub fn with_basis(inner: C, factor: f64, basis: SlowdownBasis) -> Self {
        let cpu = ThreadCpuClock::current();
        let factor = if factor.is_finite() { factor } else { 1.0 };
        let mut s = Self {
            inner,
            factor,
            basis,
            cpu,
            origin: Instant::now(),
            state: Arc::new(Mutex::new(SlowState {
                mark: 0.0,
                debt: 0.0,
            })),
        };
        let mark = s.segment_clock();
        s.state = Arc::new(Mutex::new(SlowState { mark, debt: 0.0 }));
        s
    }

    /// The clock that measures compute segments.
    fn segment_clock(&self) -> f64 {
        match self.basis {
            SlowdownBasis::CpuTime => self.cpu.seconds(),
            SlowdownBasis::WallTime => self.origin.elapsed().as_secs_f64(),
        }
    }

    /// The slowdown factor.
    pub fn factor(&self) -> f64 {
        self.factor
    }

    /// The wrapped communicator.
    pub fn inner(&self) -> &C {
        &self.inner
    }

    /// Adds the pending share of the last compute segment to the sleep debt and
    /// sleeps it off when it reaches [`SLEEP_QUANTUM`] (or always if `flush`).
    /// Oversleeping is credited against later debt.
    fn settle(&self, flush: bool) {
        if self.factor <= 1.0 {
            return;
        }
        let now = self.segment_clock();
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.debt += (now - st.mark).max(0.0) * (self.factor - 1.0);
        st.mark = now;
        if st.debt > 0.0 && (flush || st.debt >= SLEEP_QUANTUM) {
            let t = Instant::now();
            std::thread::sleep(Duration::from_secs_f64(st.debt));
            st.debt -= t.elapsed().as_secs_f64();
            if self.basis == SlowdownBasis::WallTime {
                st.mark = self.segment_clock();
            }
        }
    }

    fn collective<T>(&self, f: impl FnOnce(&C) -> T) -> T {
        self.settle(true);
        let out = f(&self.inner);
        if self.factor > 1.0 {
            let now = self.segment_clock();
            self.state.lock().unwrap_or_else(|e| e.into_inner()).mark = now;
        }
        out
    }
}

impl<C: Comm> Comm for Slowed<C> {
    fn rank(&self) -> usize {
        self.inner.rank()
    }
    fn size(&self) -> usize {
        self.inner.size()
    }
    /// Takes the pending sleep, then reads the wrapped clock.
    fn wtime(&self) -> f64 {
        self.settle(false);
        self.inner.wtime()
    }
    crate::forward_collectives!(collective);
    fn charge(&self, seconds: f64) {
        self.inner.charge(seconds)
    }
    fn real_clock(&self) -> bool {
        self.inner.real_clock()
    }
    /// The sub-communicator shares this process's slowdown and pending CPU time.
    fn split(&self, color: usize, key: usize) -> Self {
        let sub = self.collective(|c| c.split(color, key));
        Slowed {
            inner: sub,
            factor: self.factor,
            basis: self.basis,
            cpu: self.cpu,
            origin: self.origin,
            state: self.state.clone(),
        }
    }
}
