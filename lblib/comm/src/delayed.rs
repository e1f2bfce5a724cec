//! A slow link: every collective of the wrapped communicator first waits a fixed
//! latency, as a message over a wide-area link between clusters would
//! (McCombs et al. §7, Tables 2–3: multigrain keeps the inner solves inside a
//! cluster, so only the fine-grain collectives and the fine↔group all-to-alls
//! pay it). Wrap the communicator whose collectives cross the link (e.g. the
//! fine-grain one) and leave the intra-cluster ones bare.
//!
//! The wait is real time (`std::thread::sleep`), for MPI and real-clock thread
//! runs; [`crate::ThreadConfig::latency`] is the virtual-clock counterpart on
//! the thread backend.

use std::time::Duration;

use crate::comm::Comm;

/// `inner` behind a link of `latency` seconds per collective.
#[derive(Debug, Clone)]
pub struct Delayed<C> {
    inner: C,
    latency: Duration,
    calls: std::cell::Cell<u64>,
}

impl<C: Comm> Delayed<C> {
    /// Wraps `inner`; `latency_seconds` is clamped to ≥ 0 (NaN counts as 0)
    /// and to the longest `Duration` (1e308 s used to panic).
    pub fn new(inner: C, latency_seconds: f64) -> Self {
        let s = if latency_seconds.is_finite() {
            latency_seconds.max(0.0)
        } else {
            0.0
        };
        Self {
            inner,
            latency: Duration::try_from_secs_f64(s).unwrap_or(Duration::MAX),
            calls: std::cell::Cell::new(0),
        }
    }

    /// The latency per collective, seconds.
    pub fn latency(&self) -> f64 {
        self.latency.as_secs_f64()
    }

    /// Collectives delayed so far.
    pub fn delayed_calls(&self) -> u64 {
        self.calls.get()
    }

    /// The wrapped communicator.
    pub fn inner(&self) -> &C {
        &self.inner
    }

    fn wait(&self) {
        if !self.latency.is_zero() {
            self.calls.set(self.calls.get() + 1);
            std::thread::sleep(self.latency);
        }
    }

    /// A collective of the wrapped communicator after the link's latency.
    fn through<T>(&self, f: impl FnOnce(&C) -> T) -> T {
        self.wait();
        f(&self.inner)
    }
}

impl<C: Comm> Comm for Delayed<C> {
    fn rank(&self) -> usize {
        self.inner.rank()
    }
    fn size(&self) -> usize {
        self.inner.size()
    }
    fn wtime(&self) -> f64 {
        self.inner.wtime()
    }
    crate::forward_collectives!(through);
    fn set_slowdown(&self, factor: f64) -> bool {
        self.inner.set_slowdown(factor)
    }
    fn charge(&self, seconds: f64) {
        self.inner.charge(seconds)
    }
    fn real_clock(&self) -> bool {
        self.inner.real_clock()
    }
    /// Sub-communicators stay behind the link.
    fn split(&self, color: usize, key: usize) -> Self {
        self.wait();
        Self {
            inner: self.inner.split(color, key),
            latency: self.latency,
            calls: std::cell::Cell::new(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ReduceOp, SelfComm, ThreadComm};

    #[test]
    fn results_unchanged_and_every_collective_waits() {
        let out = ThreadComm::run(3, |c| {
            let d = Delayed::new(c, 0.002);
            let t0 = std::time::Instant::now();
            let mut x = [d.rank() as f64 + 1.0];
            d.all_reduce(&mut x, ReduceOp::Sum);
            let mut g = [0.0; 3];
            d.all_gather(&[d.rank() as f64], &mut g);
            (x[0], g, d.delayed_calls(), t0.elapsed().as_secs_f64())
        });
        for (sum, g, calls, secs) in out {
            assert_eq!(sum, 6.0);
            assert_eq!(g, [0.0, 1.0, 2.0]);
            assert_eq!(calls, 2);
            assert!(secs >= 0.004, "two collectives waited {secs} s");
        }
        let z = Delayed::new(SelfComm::new(), f64::NAN);
        assert_eq!(z.latency(), 0.0);
        z.barrier();
        assert_eq!(z.delayed_calls(), 0);
    }

    /// `--link-latency 1e308` panicked (Duration overflow): saturates instead.
    #[test]
    fn huge_latency_saturates() {
        let d = Delayed::new(SelfComm::new(), 1e308);
        assert_eq!(d.latency(), Duration::MAX.as_secs_f64());
    }
}
