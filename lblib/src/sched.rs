//! The share of a core a thread gets while it wants to run, from the Linux
//! scheduler's statistics.
//!
//! On a core shared by time slices (two ranks on one CPU, or a rank beside busy
//! loops), a span of work shorter than a time slice runs at full speed or not at
//! all: its wall time does not show the share. The scheduler knows it:
//! `/proc/self/task/<tid>/schedstat` gives the thread's time on a CPU and its time
//! runnable but waiting on a run queue, so that over a stretch of time
//! `share = on_cpu / (on_cpu + waiting)` (1 on a core of its own, about 1/3 beside
//! two busy loops of the same priority). A thread that sleeps (a blocking wait)
//! counts in neither, so the share is that of the time it wanted the core.
//!
//! Used by jdmg's semi-static re-partitioning (Boudet et al. §4.5, applied as in
//! McCombs et al. §4) to turn busy seconds measured in short spans into the
//! seconds the same work takes at the thread's share of its core. Elsewhere than
//! Linux every reading is `None`.

/// The calling thread's kernel id (`gettid`).
pub fn thread_id() -> i32 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid has no arguments and cannot fail.
        unsafe { libc::gettid() }
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

/// CPU seconds the calling thread has run (`CLOCK_THREAD_CPUTIME_ID`), `None`
/// where the clock is missing.
pub fn thread_cpu_seconds() -> Option<f64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out pointer.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (rc == 0).then_some(ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9)
}

/// One reading of a thread's scheduler statistics, in seconds since it started.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SchedSample {
    /// Time on a CPU.
    pub on_cpu: f64,
    /// Time runnable but waiting for a CPU (the kernel's `run_delay`).
    pub waiting: f64,
}

impl SchedSample {
    /// The statistics of thread `tid` of this process; `None` when they cannot
    /// be read (not Linux, a kernel without `CONFIG_SCHED_INFO`, a thread that
    /// has exited).
    pub fn of_thread(tid: i32) -> Option<Self> {
        let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
        Self::parse(&text)
    }

    /// Parses the text of a `schedstat` file: nanoseconds on a CPU, nanoseconds
    /// waiting, time slices.
    pub fn parse(text: &str) -> Option<Self> {
        let mut it = text.split_whitespace().map(|w| w.parse::<u64>().ok());
        let on_cpu = it.next()??;
        let waiting = it.next()??;
        Some(Self {
            on_cpu: on_cpu as f64 * 1e-9,
            waiting: waiting as f64 * 1e-9,
        })
    }

    /// The share of a core the thread got between `earlier` and `self` while it
    /// wanted to run: `Δon_cpu / (Δon_cpu + Δwaiting)`, in (0, 1]; `None` when it
    /// neither ran nor waited in between.
    pub fn share_since(&self, earlier: &SchedSample) -> Option<f64> {
        let run = (self.on_cpu - earlier.on_cpu).max(0.0);
        let wait = (self.waiting - earlier.waiting).max(0.0);
        (run > 0.0).then(|| run / (run + wait))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_schedstat_and_computes_the_share() {
        let a = SchedSample::parse("1000000000 500000000 12\n").unwrap();
        assert_eq!(a.on_cpu, 1.0);
        assert_eq!(a.waiting, 0.5);
        let b = SchedSample::parse("2000000000 2500000000 40").unwrap();
        // 1 s on the CPU, 2 s waiting: a third of the core
        assert!((b.share_since(&a).unwrap() - 1.0 / 3.0).abs() < 1e-15);
        assert_eq!(a.share_since(&a), None);
        assert_eq!(SchedSample::parse("x 1 2"), None);
        assert_eq!(SchedSample::parse("17"), None);
    }

    /// Keeps the calling thread busy for `seconds` of its own CPU time.
    #[cfg(target_os = "linux")]
    fn spin(seconds: f64) {
        let c0 = thread_cpu_seconds().unwrap();
        let mut x = 0u64;
        while thread_cpu_seconds().unwrap() - c0 < seconds {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn reads_the_calling_thread() {
        let tid = thread_id();
        let a = SchedSample::of_thread(tid).unwrap();
        // some work, so that the thread's CPU time moves
        spin(0.01);
        let b = SchedSample::of_thread(tid).unwrap();
        assert!(b.on_cpu - a.on_cpu >= 0.009, "{a:?} {b:?}");
        let s = b.share_since(&a).unwrap();
        assert!(s > 0.0 && s <= 1.0, "{s}");
    }

    /// Two threads busy on one CPU each get at most about half of it while
    /// both want it (other load on that CPU only lowers the shares).
    #[cfg(target_os = "linux")]
    #[test]
    fn two_threads_on_one_cpu_share_it() {
        // SAFETY: plain data, valid pointers; pins the calling thread only.
        let cpu = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
            (0..libc::CPU_SETSIZE as usize).find(|&c| libc::CPU_ISSET(c, &set))
        };
        let Some(cpu) = cpu else { return };
        let barrier = std::sync::Barrier::new(2);
        let shares: Vec<f64> = std::thread::scope(|s| {
            let busy = || {
                // SAFETY: as above.
                unsafe {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(cpu, &mut set);
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
                }
                barrier.wait();
                let tid = thread_id();
                let a = SchedSample::of_thread(tid).unwrap();
                spin(0.2);
                // both stay runnable until both have had their 0.2 s
                barrier.wait();
                let b = SchedSample::of_thread(tid).unwrap();
                b.share_since(&a).unwrap()
            };
            let h = [s.spawn(busy), s.spawn(busy)];
            h.map(|h| h.join().unwrap()).to_vec()
        });
        for s in &shares {
            assert!(*s <= 0.8, "{shares:?}");
        }
    }
}
