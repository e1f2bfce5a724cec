//! `Slowed`: emulates a slower processor on any communicator by sleeping
//! (`seeds/003`, §4 and §7: external load makes nodes 2 or 3 times slower).
//!
//! Used to reproduce heterogeneous speeds under `mpirun` on a homogeneous machine:
//! with factor `f > 1`, every compute segment (the CPU time of the calling thread
//! between two clock readings or collectives) is followed by a sleep of `f − 1`
//! times its length, taken when the process next reads the clock or enters a
//! collective. Factors ≤ 1 do nothing.

use crate::comm::{Comm, ReduceOp};
use crate::cputime::ThreadCpuClock;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A communicator whose process computes `factor` times slower (by sleeping).
#[derive(Debug)]
pub struct Slowed<C: Comm> {
    inner: C,
    factor: f64,
    cpu: ThreadCpuClock,
    last_cpu: Arc<Mutex<f64>>,
}

impl<C: Comm> Slowed<C> {
    /// Wraps `inner`; the CPU clock of the calling thread is the one measured.
    /// Non-finite factors act as 1.
    pub fn new(inner: C, factor: f64) -> Self {
        let cpu = ThreadCpuClock::current();
        let last = cpu.seconds();
        let factor = if factor.is_finite() { factor } else { 1.0 };
        Self {
            inner,
            factor,
            cpu,
            last_cpu: Arc::new(Mutex::new(last)),
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

    /// Sleeps for the pending share of the last compute segment.
    fn settle(&self) {
        if self.factor <= 1.0 {
            return;
        }
        let now = self.cpu.seconds();
        let d = {
            let mut last = self.last_cpu.lock().unwrap_or_else(|e| e.into_inner());
            let d = (now - *last).max(0.0);
            *last = now;
            d
        };
        let s = d * (self.factor - 1.0);
        if s > 0.0 {
            std::thread::sleep(Duration::from_secs_f64(s));
        }
    }

    fn collective<T>(&self, f: impl FnOnce(&C) -> T) -> T {
        self.settle();
        let out = f(&self.inner);
        if self.factor > 1.0 {
            *self.last_cpu.lock().unwrap_or_else(|e| e.into_inner()) = self.cpu.seconds();
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
        self.settle();
        self.inner.wtime()
    }
    fn barrier(&self) {
        self.collective(|c| c.barrier())
    }
    fn all_reduce(&self, buf: &mut [f64], op: ReduceOp) {
        self.collective(|c| c.all_reduce(buf, op))
    }
    fn all_reduce_u64(&self, buf: &mut [u64], op: ReduceOp) {
        self.collective(|c| c.all_reduce_u64(buf, op))
    }
    fn all_gather(&self, send: &[f64], recv: &mut [f64]) {
        self.collective(|c| c.all_gather(send, recv))
    }
    fn all_gather_u64(&self, send: &[u64], recv: &mut [u64]) {
        self.collective(|c| c.all_gather_u64(send, recv))
    }
    fn all_gather_v(&self, send: &[f64], counts: &[usize], recv: &mut [f64]) {
        self.collective(|c| c.all_gather_v(send, counts, recv))
    }
    fn broadcast(&self, buf: &mut [f64], root: usize) {
        self.collective(|c| c.broadcast(buf, root))
    }
    fn broadcast_u64(&self, buf: &mut [u64], root: usize) {
        self.collective(|c| c.broadcast_u64(buf, root))
    }
    fn all_to_all_v(
        &self,
        send: &[f64],
        send_counts: &[usize],
        recv: &mut [f64],
        recv_counts: &[usize],
    ) {
        self.collective(|c| c.all_to_all_v(send, send_counts, recv, recv_counts))
    }
    /// The sub-communicator shares this process's slowdown and pending CPU time.
    fn split(&self, color: usize, key: usize) -> Self {
        let sub = self.collective(|c| c.split(color, key));
        Slowed {
            inner: sub,
            factor: self.factor,
            cpu: self.cpu,
            last_cpu: self.last_cpu.clone(),
        }
    }
}
