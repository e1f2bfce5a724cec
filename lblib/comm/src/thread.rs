//! `ThreadComm`: N ranks as threads of one process (DESIGN.md, "Backends").
//!
//! Used to test multigrain and load-balancing logic with `cargo test`, without MPI.
//! Every rank has a *slowdown factor* so that heterogeneous processor speeds
//! (McCombs et al., §4 and §7: nodes running 2 or 3 jobs, clusters of different power)
//! can be reproduced deterministically, even with more ranks than cores.
//!
//! # Clocks
//!
//! [`ClockMode::Virtual`] (the default) gives every rank its own clock. Reading the
//! clock ([`Comm::wtime`]) advances it by the CPU time the rank's thread consumed
//! since the last reading, multiplied by the rank's slowdown. Every collective sets
//! the clocks of all participants to the maximum of their entry clocks (plus
//! [`ThreadConfig::latency`]): the time a rank waits inside a collective is exactly
//! the load imbalance, free of scheduler noise even with 4 ranks on 2 cores.
//!
//! [`ClockMode::Manual`] is the same, except that the clock only moves through
//! [`ThreadComm::advance`] and collectives: fully deterministic, for unit tests.
//!
//! [`ClockMode::Real`] uses the real wall clock shared by all ranks; a rank with
//! slowdown `f > 1` sleeps `(f - 1)` times the CPU time of each compute segment
//! when it next reads the clock (once the debt reaches 1 ms) or enters a collective
//! (always).
//!
//! # Collectives
//!
//! Each rank owns a reusable slot (vectors that only grow); a collective writes the
//! rank's contribution into its slot, waits at a barrier, reads the slots it needs
//! straight into the caller's buffer and waits at a second barrier. After warm-up a
//! collective does not allocate. Reductions fold in rank order, so every rank gets
//! bit-identical results.
//!
//! # Panics
//!
//! A panic in one rank is propagated: ranks blocked in a collective notice it
//! within ~50 ms and unwind too, and [`ThreadComm::run`] re-raises the original
//! panic payload once all threads have stopped. Likewise, a rank whose closure
//! returns while other ranks of one of its communicators wait for it in a
//! collective (mismatched collective calls) makes them panic instead of hanging.

use crate::comm::{Comm, ReduceOp};
use crate::cputime::ThreadCpuClock;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How ranks of a [`ThreadComm`] measure time (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum ClockMode {
    /// Per-rank virtual clock: thread CPU time × slowdown, synchronized to the
    /// maximum at every collective. Default.
    #[default]
    Virtual,
    /// Per-rank virtual clock moved only by [`ThreadComm::advance`] (× slowdown)
    /// and by collectives. Deterministic.
    Manual,
    /// Shared real wall clock; slowdown emulated by sleeping `(f-1)×` the CPU time
    /// of each compute segment. Slowdowns below 1 act as 1.
    Real,
}

/// Configuration of [`ThreadComm::run_with`].
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct ThreadConfig {
    /// One slowdown factor per rank (the number of ranks is its length). A rank
    /// with factor 2 runs at half the nominal speed. Default: `[1.0]`.
    pub slowdowns: Vec<f64>,
    /// How time is measured. Default: [`ClockMode::Virtual`].
    pub clock: ClockMode,
    /// Virtual seconds added to every collective in the virtual clock modes.
    /// Default: 0 (imbalance figures are then exact).
    pub latency: f64,
    /// Stack size of each rank thread in bytes. Default: 16 MiB.
    pub stack_size: usize,
}

impl Default for ThreadConfig {
    fn default() -> Self {
        Self {
            slowdowns: vec![1.0],
            clock: ClockMode::Virtual,
            latency: 0.0,
            stack_size: 16 << 20,
        }
    }
}

impl ThreadConfig {
    /// `nranks` ranks of equal speed, other fields at their defaults.
    pub fn uniform(nranks: usize) -> Self {
        Self {
            slowdowns: vec![1.0; nranks],
            ..Self::default()
        }
    }

    /// Ranks with the given slowdown factors and clock mode.
    pub fn with_slowdowns(slowdowns: &[f64], clock: ClockMode) -> Self {
        Self {
            slowdowns: slowdowns.to_vec(),
            clock,
            ..Self::default()
        }
    }
}

/// A rank thread of [`ThreadComm::try_run_with`] that could not be spawned.
#[derive(Debug)]
pub struct SpawnError {
    /// The first rank that could not be spawned.
    pub rank: usize,
    /// Ranks asked for.
    pub ranks: usize,
    /// The operating system's reason.
    pub source: std::io::Error,
}

impl std::fmt::Display for SpawnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cannot spawn rank thread {} of {}: {}",
            self.rank, self.ranks, self.source
        )
    }
}

impl std::error::Error for SpawnError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Marker payload of the panic raised in ranks that were blocked in a collective
/// when another rank panicked.
#[derive(Debug, Clone, Copy)]
pub struct PeerPanicked;

struct RunShared {
    poisoned: AtomicBool,
    /// Per world rank: its closure has returned.
    exited: Vec<AtomicBool>,
    origin: Instant,
    mode: ClockMode,
    latency: f64,
}

#[derive(Default)]
struct Slot {
    f: Vec<f64>,
    u: Vec<u64>,
    counts: Vec<usize>,
    clock: f64,
}

struct Barrier {
    state: Mutex<(usize, u64)>,
    /// Copy of the generation, readable without the lock (spin phase).
    generation: AtomicU64,
    cv: Condvar,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Rounds of `yield_now` a waiting rank spends before sleeping on the condvar.
const SPIN_ROUNDS: usize = 64;

impl Barrier {
    fn new() -> Self {
        Self {
            state: Mutex::new((0, 0)),
            generation: AtomicU64::new(0),
            cv: Condvar::new(),
        }
    }

    fn wait(&self, n: usize, run: &RunShared, members: &[usize]) {
        let gen = {
            let mut g = lock(&self.state);
            let gen = g.1;
            g.0 += 1;
            if g.0 == n {
                g.0 = 0;
                g.1 = g.1.wrapping_add(1);
                self.generation.store(g.1, Ordering::Release);
                self.cv.notify_all();
                return;
            }
            gen
        };
        for _ in 0..SPIN_ROUNDS {
            if self.generation.load(Ordering::Acquire) != gen {
                return;
            }
            std::thread::yield_now();
        }
        let mut g = lock(&self.state);
        loop {
            if g.1 != gen {
                return;
            }
            let (ng, _) = self
                .cv
                .wait_timeout(g, Duration::from_millis(50))
                .unwrap_or_else(|e| e.into_inner());
            g = ng;
            if g.1 != gen {
                return;
            }
            if run.poisoned.load(Ordering::Acquire) {
                drop(g);
                std::panic::panic_any(PeerPanicked);
            }
            if let Some(&w) = members
                .iter()
                .find(|&&w| run.exited[w].load(Ordering::Acquire))
            {
                drop(g);
                panic!(
                    "ThreadComm: rank {w} (world) returned while other ranks wait for it in a \
                     collective (mismatched collective calls)"
                );
            }
        }
    }
}

struct Group {
    size: usize,
    /// World rank of each rank of the group.
    members: Vec<usize>,
    run: Arc<RunShared>,
    barrier: Barrier,
    slots: Vec<Mutex<Slot>>,
    board: Mutex<Vec<Option<Arc<Group>>>>,
}

impl Group {
    fn new(members: Vec<usize>, run: Arc<RunShared>) -> Self {
        let size = members.len();
        Self {
            size,
            members,
            run,
            barrier: Barrier::new(),
            slots: (0..size).map(|_| Mutex::new(Slot::default())).collect(),
            board: Mutex::new(vec![None; size]),
        }
    }

    fn wait(&self) {
        self.barrier.wait(self.size, &self.run, &self.members);
    }
}

struct ClockState {
    virt: f64,
    last_cpu: f64,
    /// Real mode: seconds still to sleep (negative: credit from oversleeping).
    debt: f64,
}

struct RankClock {
    /// `f64` bits of the slowdown factor (changed by [`Comm::set_slowdown`]).
    slowdown: AtomicU64,
    cpu: ThreadCpuClock,
    state: Mutex<ClockState>,
}

impl RankClock {
    fn factor(&self) -> f64 {
        f64::from_bits(self.slowdown.load(Ordering::Relaxed))
    }
}

/// One rank of a group of threads that communicate collectively (see the module
/// documentation). Obtained from [`ThreadComm::run`] / [`ThreadComm::run_with`] or
/// by [`Comm::split`]. `Send + Sync`; its clock always measures the CPU time of the
/// thread the rank was started on.
pub struct ThreadComm {
    rank: usize,
    group: Arc<Group>,
    clock: Arc<RankClock>,
}

impl std::fmt::Debug for ThreadComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadComm")
            .field("rank", &self.rank)
            .field("size", &self.group.size)
            .field("slowdown", &self.clock.factor())
            .field("clock", &self.group.run.mode)
            .finish()
    }
}

impl ThreadComm {
    /// Runs `f` on `nranks` threads, each with its rank's communicator, with equal
    /// speeds and the virtual clock. Returns the results in rank order.
    ///
    /// # Panics
    /// Re-raises the first panic of any rank (the other ranks are unblocked).
    pub fn run<R, F>(nranks: usize, f: F) -> Vec<R>
    where
        R: Send,
        F: Fn(ThreadComm) -> R + Sync,
    {
        Self::run_with(ThreadConfig::uniform(nranks), f)
    }

    /// Runs `f` on `config.slowdowns.len()` threads with the given slowdowns and
    /// clock mode. Returns the results in rank order.
    ///
    /// # Panics
    /// If a slowdown is not finite and positive, if `latency` is negative or not
    /// finite, when a rank thread cannot be spawned (after the ranks already
    /// running have unwound, instead of waiting for it forever; see
    /// [`ThreadComm::try_run_with`]), and re-raises the first panic of any rank.
    pub fn run_with<R, F>(config: ThreadConfig, f: F) -> Vec<R>
    where
        R: Send,
        F: Fn(ThreadComm) -> R + Sync,
    {
        match Self::try_run_with(config, f) {
            Ok(r) => r,
            Err(e) => panic!("ThreadComm: {e}"),
        }
    }

    /// [`ThreadComm::run_with`], but a rank thread that cannot be spawned (a
    /// thread or address-space limit) is an error, returned once the ranks
    /// already running have unwound.
    ///
    /// # Errors
    /// [`SpawnError`] naming the first rank that could not be spawned.
    ///
    /// # Panics
    /// As [`ThreadComm::run_with`], spawn failures aside.
    pub fn try_run_with<R, F>(config: ThreadConfig, f: F) -> Result<Vec<R>, SpawnError>
    where
        R: Send,
        F: Fn(ThreadComm) -> R + Sync,
    {
        for (r, &s) in config.slowdowns.iter().enumerate() {
            assert!(
                s.is_finite() && s > 0.0,
                "ThreadComm: slowdown of rank {r} is {s}, must be finite and > 0"
            );
        }
        assert!(
            config.latency.is_finite() && config.latency >= 0.0,
            "ThreadComm: latency {} must be finite and >= 0",
            config.latency
        );
        let n = config.slowdowns.len();
        if n == 0 {
            return Ok(Vec::new());
        }
        let run = Arc::new(RunShared {
            poisoned: AtomicBool::new(false),
            exited: (0..n).map(|_| AtomicBool::new(false)).collect(),
            origin: Instant::now(),
            mode: config.clock,
            latency: config.latency,
        });
        let group = Arc::new(Group::new((0..n).collect(), run.clone()));
        let f = &f;
        let shared = &run;
        let mut spawn_error: Option<SpawnError> = None;
        let outcomes: Vec<std::thread::Result<R>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..n)
                .filter_map(|rank| {
                    let group = group.clone();
                    let run = run.clone();
                    let slowdown = config.slowdowns[rank];
                    let spawned = std::thread::Builder::new()
                        .name(format!("rank-{rank}"))
                        .stack_size(config.stack_size.max(64 << 10))
                        .spawn_scoped(s, move || {
                            let comm = ThreadComm::new_rank(rank, group, slowdown);
                            let out = catch_unwind(AssertUnwindSafe(|| f(comm)));
                            if out.is_err() {
                                run.poisoned.store(true, Ordering::Release);
                            }
                            run.exited[rank].store(true, Ordering::Release);
                            out
                        });
                    match spawned {
                        Ok(h) => Some(h),
                        Err(e) => {
                            // The ranks already running would wait for this one
                            // forever: poison the run so they unwind.
                            shared.poisoned.store(true, Ordering::Release);
                            shared.exited[rank].store(true, Ordering::Release);
                            spawn_error.get_or_insert(SpawnError {
                                rank,
                                ranks: n,
                                source: e,
                            });
                            None
                        }
                    }
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().and_then(|r| r))
                .collect()
        });
        if let Some(e) = spawn_error {
            return Err(e);
        }
        let mut results = Vec::with_capacity(n);
        let mut first_peer: Option<Box<dyn std::any::Any + Send>> = None;
        let mut first_real: Option<Box<dyn std::any::Any + Send>> = None;
        for o in outcomes {
            match o {
                Ok(r) => results.push(r),
                Err(p) => {
                    if p.is::<PeerPanicked>() {
                        first_peer.get_or_insert(p);
                    } else {
                        first_real.get_or_insert(p);
                    }
                }
            }
        }
        if let Some(p) = first_real.or(first_peer) {
            resume_unwind(p);
        }
        Ok(results)
    }

    fn new_rank(rank: usize, group: Arc<Group>, slowdown: f64) -> Self {
        let cpu = ThreadCpuClock::current();
        let last_cpu = cpu.seconds();
        Self {
            rank,
            group,
            clock: Arc::new(RankClock {
                slowdown: AtomicU64::new(slowdown.to_bits()),
                cpu,
                state: Mutex::new(ClockState {
                    virt: 0.0,
                    last_cpu,
                    debt: 0.0,
                }),
            }),
        }
    }

    /// This rank's slowdown factor.
    pub fn slowdown(&self) -> f64 {
        self.clock.factor()
    }

    /// The clock mode of the run.
    pub fn clock_mode(&self) -> ClockMode {
        self.group.run.mode
    }

    /// Charges `seconds` of computation at nominal speed: the rank's clock moves by
    /// `seconds × slowdown` (virtual modes), or the thread sleeps that long
    /// ([`ClockMode::Real`]). Negative or non-finite values are ignored.
    pub fn advance(&self, seconds: f64) {
        if !(seconds.is_finite() && seconds > 0.0) {
            return;
        }
        let d = seconds * self.clock.factor();
        match self.group.run.mode {
            ClockMode::Virtual | ClockMode::Manual => lock(&self.clock.state).virt += d,
            ClockMode::Real => std::thread::sleep(Duration::from_secs_f64(d)),
        }
    }

    /// Accounts for computation since the last reading and returns the rank's time.
    /// In real mode, sleep debts below [`crate::slowed::SLEEP_QUANTUM`] are carried
    /// over unless `flush` (entry of a collective).
    fn now_flush(&self, flush: bool) -> f64 {
        let c = &self.clock;
        match self.group.run.mode {
            ClockMode::Manual => lock(&c.state).virt,
            ClockMode::Virtual => {
                let cpu = c.cpu.seconds();
                let mut st = lock(&c.state);
                st.virt += (cpu - st.last_cpu).max(0.0) * c.factor();
                st.last_cpu = cpu;
                st.virt
            }
            ClockMode::Real => {
                if c.factor() > 1.0 {
                    let cpu = c.cpu.seconds();
                    let mut st = lock(&c.state);
                    st.debt += (cpu - st.last_cpu).max(0.0) * (c.factor() - 1.0);
                    st.last_cpu = cpu;
                    if st.debt > 0.0 && (flush || st.debt >= crate::slowed::SLEEP_QUANTUM) {
                        let t = Instant::now();
                        std::thread::sleep(Duration::from_secs_f64(st.debt));
                        st.debt -= t.elapsed().as_secs_f64();
                    }
                }
                self.group.run.origin.elapsed().as_secs_f64()
            }
        }
    }

    fn now(&self) -> f64 {
        self.now_flush(false)
    }

    /// Leaves a collective whose participants entered at times up to `tmax`.
    fn exit(&self, tmax: f64) {
        let c = &self.clock;
        match self.group.run.mode {
            ClockMode::Manual => lock(&c.state).virt = tmax + self.group.run.latency,
            ClockMode::Virtual => {
                let cpu = c.cpu.seconds();
                let mut st = lock(&c.state);
                st.virt = tmax + self.group.run.latency;
                st.last_cpu = cpu;
            }
            ClockMode::Real => {
                if c.factor() > 1.0 {
                    let cpu = c.cpu.seconds();
                    lock(&c.state).last_cpu = cpu;
                }
            }
        }
    }

    /// Generic two-barrier collective: `write` fills this rank's slot, `read` sees
    /// every slot.
    fn collective<T: ?Sized>(
        &self,
        data: &mut T,
        write: impl FnOnce(&mut Slot, &T),
        read: impl FnOnce(&[Mutex<Slot>], &mut T),
    ) {
        let t = self.now_flush(true);
        {
            let mut s = lock(&self.group.slots[self.rank]);
            s.clock = t;
            write(&mut s, data);
        }
        self.group.wait();
        let tmax = self
            .group
            .slots
            .iter()
            .map(|s| lock(s).clock)
            .fold(t, f64::max);
        read(&self.group.slots, data);
        self.group.wait();
        self.exit(tmax);
    }
}

/// The ranks' `f` slots, in rank order, into `recv` (`counts[r]` values from rank
/// r, checked; `what` names the collective in the panic).
fn concat_slots(slots: &[Mutex<Slot>], counts: &[usize], recv: &mut [f64], what: &str) {
    let mut off = 0;
    for (r, slot) in slots.iter().enumerate() {
        let s = lock(slot);
        assert_eq!(
            s.f.len(),
            counts[r],
            "{what}: rank {r} sent {} values, counts say {}",
            s.f.len(),
            counts[r]
        );
        recv[off..off + counts[r]].copy_from_slice(&s.f);
        off += counts[r];
    }
}

fn fill_f(dst: &mut Vec<f64>, src: &[f64]) {
    dst.clear();
    dst.extend_from_slice(src);
}

fn fill_u(dst: &mut Vec<u64>, src: &[u64]) {
    dst.clear();
    dst.extend_from_slice(src);
}

fn reduce_u64(op: ReduceOp, a: u64, b: u64) -> u64 {
    match op {
        ReduceOp::Sum => a.wrapping_add(b),
        ReduceOp::Max => a.max(b),
        ReduceOp::Min => a.min(b),
    }
}

impl Comm for ThreadComm {
    /// Accounts the computation so far at the old factor, then sets the new one
    /// (shared with the sub-communicators of this rank). Non-finite or
    /// non-positive factors are ignored (returns `false`).
    fn real_clock(&self) -> bool {
        self.group.run.mode == ClockMode::Real
    }
    fn set_slowdown(&self, factor: f64) -> bool {
        if !(factor.is_finite() && factor > 0.0) {
            return false;
        }
        self.now();
        self.clock
            .slowdown
            .store(factor.to_bits(), Ordering::Relaxed);
        true
    }

    /// [`ThreadComm::advance`] under [`ClockMode::Manual`]; the other modes
    /// measure the computation themselves.
    fn charge(&self, seconds: f64) {
        if self.group.run.mode == ClockMode::Manual {
            self.advance(seconds);
        }
    }

    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.group.size
    }

    /// The rank's clock (see [`ClockMode`]).
    fn wtime(&self) -> f64 {
        self.now()
    }

    fn barrier(&self) {
        self.collective(&mut (), |_, _| {}, |_, _| {});
    }

    fn all_reduce(&self, buf: &mut [f64], op: ReduceOp) {
        self.collective(
            buf,
            |s, buf| fill_f(&mut s.f, buf),
            |slots, buf| {
                for (r, slot) in slots.iter().enumerate() {
                    let s = lock(slot);
                    assert_eq!(
                        s.f.len(),
                        buf.len(),
                        "all_reduce: rank {r} passed a buffer of another length"
                    );
                    if r == 0 {
                        buf.copy_from_slice(&s.f);
                    } else {
                        for (b, &x) in buf.iter_mut().zip(&s.f) {
                            *b = op.apply(*b, x);
                        }
                    }
                }
            },
        );
    }

    fn all_reduce_u64(&self, buf: &mut [u64], op: ReduceOp) {
        self.collective(
            buf,
            |s, buf| fill_u(&mut s.u, buf),
            |slots, buf| {
                for (r, slot) in slots.iter().enumerate() {
                    let s = lock(slot);
                    assert_eq!(
                        s.u.len(),
                        buf.len(),
                        "all_reduce_u64: rank {r} passed a buffer of another length"
                    );
                    if r == 0 {
                        buf.copy_from_slice(&s.u);
                    } else {
                        for (b, &x) in buf.iter_mut().zip(&s.u) {
                            *b = reduce_u64(op, *b, x);
                        }
                    }
                }
            },
        );
    }

    fn all_gather(&self, send: &[f64], recv: &mut [f64]) {
        let m = send.len();
        assert!(
            recv.len() >= m * self.size(),
            "all_gather: recv holds {} < {}",
            recv.len(),
            m * self.size()
        );
        self.collective(
            recv,
            |s, _| fill_f(&mut s.f, send),
            |slots, recv| {
                for (r, slot) in slots.iter().enumerate() {
                    let s = lock(slot);
                    assert_eq!(s.f.len(), m, "all_gather: rank {r} sent another length");
                    recv[r * m..(r + 1) * m].copy_from_slice(&s.f);
                }
            },
        );
    }

    fn all_gather_u64(&self, send: &[u64], recv: &mut [u64]) {
        let m = send.len();
        assert!(
            recv.len() >= m * self.size(),
            "all_gather_u64: recv holds {} < {}",
            recv.len(),
            m * self.size()
        );
        self.collective(
            recv,
            |s, _| fill_u(&mut s.u, send),
            |slots, recv| {
                for (r, slot) in slots.iter().enumerate() {
                    let s = lock(slot);
                    assert_eq!(s.u.len(), m, "all_gather_u64: rank {r} sent another length");
                    recv[r * m..(r + 1) * m].copy_from_slice(&s.u);
                }
            },
        );
    }

    fn all_gather_v(&self, send: &[f64], counts: &[usize], recv: &mut [f64]) {
        assert_eq!(
            counts.len(),
            self.size(),
            "all_gather_v: counts.len() != size"
        );
        assert_eq!(
            counts[self.rank],
            send.len(),
            "all_gather_v: counts[rank] != send.len()"
        );
        let total: usize = counts.iter().sum();
        assert!(
            recv.len() >= total,
            "all_gather_v: recv holds {} < {total}",
            recv.len()
        );
        self.collective(
            recv,
            |s, _| fill_f(&mut s.f, send),
            |slots, recv| {
                concat_slots(slots, counts, recv, "all_gather_v");
            },
        );
    }

    fn broadcast(&self, buf: &mut [f64], root: usize) {
        assert!(root < self.size(), "broadcast: root {root} out of range");
        let me = self.rank;
        self.collective(
            buf,
            |s, buf| {
                if me == root {
                    fill_f(&mut s.f, buf)
                }
            },
            |slots, buf| {
                if me != root {
                    let s = lock(&slots[root]);
                    assert_eq!(
                        s.f.len(),
                        buf.len(),
                        "broadcast: root buffer has another length"
                    );
                    buf.copy_from_slice(&s.f);
                }
            },
        );
    }

    fn broadcast_u64(&self, buf: &mut [u64], root: usize) {
        assert!(
            root < self.size(),
            "broadcast_u64: root {root} out of range"
        );
        let me = self.rank;
        self.collective(
            buf,
            |s, buf| {
                if me == root {
                    fill_u(&mut s.u, buf)
                }
            },
            |slots, buf| {
                if me != root {
                    let s = lock(&slots[root]);
                    assert_eq!(
                        s.u.len(),
                        buf.len(),
                        "broadcast_u64: root buffer has another length"
                    );
                    buf.copy_from_slice(&s.u);
                }
            },
        );
    }

    fn all_to_all_v(
        &self,
        send: &[f64],
        send_counts: &[usize],
        recv: &mut [f64],
        recv_counts: &[usize],
    ) {
        let n = self.size();
        assert_eq!(
            send_counts.len(),
            n,
            "all_to_all_v: send_counts.len() != size"
        );
        assert_eq!(
            recv_counts.len(),
            n,
            "all_to_all_v: recv_counts.len() != size"
        );
        assert!(
            send.len() >= send_counts.iter().sum::<usize>(),
            "all_to_all_v: send too short"
        );
        assert!(
            recv.len() >= recv_counts.iter().sum::<usize>(),
            "all_to_all_v: recv too short"
        );
        let me = self.rank;
        self.collective(
            recv,
            |s, _| {
                fill_f(&mut s.f, send);
                s.counts.clear();
                s.counts.extend_from_slice(send_counts);
            },
            |slots, recv| {
                let mut roff = 0;
                for (r, slot) in slots.iter().enumerate() {
                    let s = lock(slot);
                    let off: usize = s.counts[..me].iter().sum();
                    let len = s.counts[me];
                    assert_eq!(
                        len, recv_counts[r],
                        "all_to_all_v: rank {r} sends {len} values to rank {me}, which expects {}",
                        recv_counts[r]
                    );
                    recv[roff..roff + len].copy_from_slice(&s.f[off..off + len]);
                    roff += len;
                }
            },
        );
    }

    fn gather_v(&self, send: &[f64], counts: &[usize], recv: &mut [f64], root: usize) {
        let n = self.size();
        assert!(root < n, "gather_v: root {root} out of range");
        assert_eq!(counts.len(), n, "gather_v: counts.len() != size");
        assert_eq!(
            counts[self.rank],
            send.len(),
            "gather_v: counts[rank] != send.len()"
        );
        let me = self.rank;
        if me == root {
            let total: usize = counts.iter().sum();
            assert!(
                recv.len() >= total,
                "gather_v: recv holds {} < {total}",
                recv.len()
            );
        }
        self.collective(
            recv,
            |s, _| fill_f(&mut s.f, send),
            |slots, recv| {
                if me != root {
                    return;
                }
                concat_slots(slots, counts, recv, "gather_v");
            },
        );
    }

    fn scatter_v(&self, send: &[f64], counts: &[usize], recv: &mut [f64], root: usize) {
        let n = self.size();
        assert!(root < n, "scatter_v: root {root} out of range");
        assert_eq!(counts.len(), n, "scatter_v: counts.len() != size");
        let me = self.rank;
        let total: usize = counts.iter().sum();
        if me == root {
            assert!(send.len() >= total, "scatter_v: send too short");
        }
        let mine = counts[me];
        assert!(recv.len() >= mine, "scatter_v: recv too short");
        self.collective(
            recv,
            |s, _| {
                if me == root {
                    fill_f(&mut s.f, &send[..total]);
                }
            },
            |slots, recv| {
                let s = lock(&slots[root]);
                assert_eq!(s.f.len(), total, "scatter_v: root sent another total");
                let off: usize = counts[..me].iter().sum();
                recv[..mine].copy_from_slice(&s.f[off..off + mine]);
            },
        );
    }

    fn split(&self, color: usize, key: usize) -> Self {
        let n = self.size();
        let t = self.now_flush(true);
        {
            let mut s = lock(&self.group.slots[self.rank]);
            s.clock = t;
            s.u.clear();
            s.u.extend_from_slice(&[color as u64, key as u64]);
        }
        self.group.wait();
        let mut tmax = t;
        let mut members: Vec<(u64, usize)> = Vec::new();
        for (r, slot) in self.group.slots.iter().enumerate() {
            let s = lock(slot);
            tmax = tmax.max(s.clock);
            if s.u[0] == color as u64 {
                members.push((s.u[1], r));
            }
        }
        members.sort_unstable();
        let leader = members.iter().map(|m| m.1).min().unwrap_or(self.rank);
        let new_rank = members.iter().position(|m| m.1 == self.rank).unwrap_or(0);
        if self.rank == leader {
            let world: Vec<usize> = members.iter().map(|m| self.group.members[m.1]).collect();
            let g = Arc::new(Group::new(world, self.group.run.clone()));
            lock(&self.group.board)[leader] = Some(g);
        }
        self.group.wait();
        let g = lock(&self.group.board)[leader]
            .clone()
            .expect("split: sub-communicator was not published");
        self.group.wait();
        if self.rank == leader {
            lock(&self.group.board)[leader] = None;
        }
        debug_assert!(new_rank < n);
        self.exit(tmax);
        ThreadComm {
            rank: new_rank,
            group: g,
            clock: self.clock.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_comm_is_send_sync() {
        fn check<T: Send + Sync>() {}
        check::<ThreadComm>();
    }

    /// A rank thread that cannot be spawned (here a stack of 2^60 bytes, which
    /// no address space holds) is an error naming the rank, not a panic.
    #[test]
    fn a_spawn_failure_is_an_error() {
        let cfg = ThreadConfig {
            stack_size: 1 << 60,
            ..ThreadConfig::uniform(3)
        };
        let err = ThreadComm::try_run_with(cfg, |c| c.rank()).expect_err("no 2^60-byte stack");
        assert_eq!((err.rank, err.ranks), (0, 3));
        assert!(err
            .to_string()
            .starts_with("cannot spawn rank thread 0 of 3: "));
        let ok = ThreadComm::try_run_with(ThreadConfig::uniform(3), |c| c.rank()).unwrap();
        assert_eq!(ok, vec![0, 1, 2]);
    }
}
