//! Per-thread CPU clocks, used by the virtual and real-time slowdown emulation of
//! [`crate::ThreadComm`] and [`crate::Slowed`].

/// A handle on the CPU-time clock of one thread, readable from any thread.
///
/// Wraps `pthread_getcpuclockid` of the thread that created it, so a rank's clock
/// keeps measuring the rank's own thread even if its communicator is later used
/// from a helper thread. CPU time spent by *other* threads (for instance rayon
/// workers started by the rank) is not included.
#[derive(Debug, Clone, Copy)]
pub struct ThreadCpuClock {
    id: libc::clockid_t,
}

extern "C" {
    fn pthread_getcpuclockid(
        thread: libc::pthread_t,
        clock_id: *mut libc::clockid_t,
    ) -> libc::c_int;
}

impl ThreadCpuClock {
    /// The CPU clock of the calling thread. Falls back to `CLOCK_THREAD_CPUTIME_ID`
    /// (the clock of whichever thread reads it) if the thread's clock id cannot be
    /// obtained.
    pub fn current() -> Self {
        let mut id: libc::clockid_t = libc::CLOCK_THREAD_CPUTIME_ID;
        // SAFETY: pthread_self() is always valid for the calling thread and `id` is a
        // valid out pointer.
        let rc = unsafe { pthread_getcpuclockid(libc::pthread_self(), &mut id) };
        if rc != 0 {
            id = libc::CLOCK_THREAD_CPUTIME_ID;
        }
        Self { id }
    }

    /// CPU seconds consumed so far by the thread (0.0 if the clock cannot be read,
    /// e.g. after the thread exited).
    pub fn seconds(&self) -> f64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid out pointer.
        let rc = unsafe { libc::clock_gettime(self.id, &mut ts) };
        if rc != 0 {
            return 0.0;
        }
        ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_clock_advances_with_work() {
        let c = ThreadCpuClock::current();
        let a = c.seconds();
        let mut x = 0.0f64;
        for i in 0..2_000_000 {
            x += (i as f64).sqrt();
        }
        std::hint::black_box(x);
        let b = c.seconds();
        assert!(b > a, "cpu clock did not advance: {a} -> {b}");
    }
}
