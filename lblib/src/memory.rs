//! Memory (anti-thrashing) balancing of a flexible phase (McCombs et al., §4 last
//! paragraph and §5, after its reference \[24\]).
//!
//! When the memory needed by this job and a competing job exceeds physical memory,
//! the system swaps and CPU cycles are wasted on both sides. The flexible phase
//! can *recede*: leave the section early (and optionally back off for a while), so
//! that the competing job gets the whole CPU and memory, finishes sooner and
//! releases its resources.
//!
//! Thrashing is detected from two rates measured over sampling intervals during a
//! section: major page faults per second above
//! [`MemoryParams::fault_rate_threshold`] *while* CPU utilisation of this process
//! is below [`MemoryParams::cpu_utilization_threshold`] (the process waits for the
//! disk instead of computing). Readings come through [`SystemReadings`], so tests
//! inject pressure with a fake; [`ProcReadings`] reads `getrusage(RUSAGE_SELF)`.

use crate::error::LbError;
use std::time::Instant;

/// One snapshot of process counters.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Reading {
    /// Cumulative major page faults (faults that needed I/O).
    pub major_faults: u64,
    /// Cumulative CPU seconds (user + system) of the process.
    pub cpu_seconds: f64,
    /// Wall-clock seconds since an arbitrary fixed origin.
    pub wall_seconds: f64,
}

/// A source of process counters for [`MemoryBalancer`].
pub trait SystemReadings {
    /// Reads the current counters.
    ///
    /// # Errors
    /// [`LbError::Readings`] if the system refuses.
    fn read(&mut self) -> Result<Reading, LbError>;
}

impl<R: SystemReadings + ?Sized> SystemReadings for Box<R> {
    fn read(&mut self) -> Result<Reading, LbError> {
        (**self).read()
    }
}

/// Real readings: `getrusage(RUSAGE_SELF)` (`ru_majflt`, `ru_utime + ru_stime`)
/// and a monotonic wall clock.
#[derive(Debug, Clone)]
pub struct ProcReadings {
    origin: Instant,
}

impl ProcReadings {
    /// Readings whose wall clock starts now.
    pub fn new() -> Self {
        Self {
            origin: Instant::now(),
        }
    }
}

impl Default for ProcReadings {
    fn default() -> Self {
        Self::new()
    }
}

impl SystemReadings for ProcReadings {
    fn read(&mut self) -> Result<Reading, LbError> {
        // SAFETY: `ru` is plain data and a valid out pointer.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
        if rc != 0 {
            let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            return Err(LbError::Readings {
                what: "getrusage",
                errno,
            });
        }
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
        Ok(Reading {
            major_faults: ru.ru_majflt as u64,
            cpu_seconds: tv(ru.ru_utime) + tv(ru.ru_stime),
            wall_seconds: self.origin.elapsed().as_secs_f64(),
        })
    }
}

/// Parameters of [`MemoryBalancer`].
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct MemoryParams {
    /// Major faults per second above which memory is considered overcommitted.
    /// Default: 20.
    pub fault_rate_threshold: f64,
    /// CPU utilisation (CPU seconds per wall second per expected thread) below which
    /// the process is considered stalled. Default: 0.5.
    pub cpu_utilization_threshold: f64,
    /// Minimum wall seconds between two samples; checks in between are free and
    /// return the current advice. Default: 0.25.
    pub sample_interval: f64,
    /// Number of threads the process is expected to keep busy (normalises the CPU
    /// utilisation). Default: 1.
    pub threads: f64,
    /// Consecutive thrashing samples needed before receding. Default: 1.
    pub consecutive: u32,
    /// Back-off recommended on the first recession, in seconds; doubles on each
    /// consecutive recession, reset by a section without thrashing. Default: 0.5.
    pub backoff_initial: f64,
    /// Cap of the back-off. Default: 8.
    pub backoff_max: f64,
}

impl Default for MemoryParams {
    fn default() -> Self {
        Self {
            fault_rate_threshold: 20.0,
            cpu_utilization_threshold: 0.5,
            sample_interval: 0.25,
            threads: 1.0,
            consecutive: 1,
            backoff_initial: 0.5,
            backoff_max: 8.0,
        }
    }
}

impl MemoryParams {
    /// Checks that thresholds are finite and non-negative, `threads > 0`,
    /// `consecutive >= 1` and `backoff_initial <= backoff_max`.
    ///
    /// # Errors
    /// [`LbError::InvalidConfig`] naming the field.
    pub fn validate(&self) -> Result<(), LbError> {
        let nonneg = |field, value: f64| {
            if value.is_finite() && value >= 0.0 {
                Ok(())
            } else {
                Err(LbError::InvalidConfig {
                    field,
                    value,
                    reason: "must be finite and >= 0",
                })
            }
        };
        nonneg("fault_rate_threshold", self.fault_rate_threshold)?;
        nonneg("cpu_utilization_threshold", self.cpu_utilization_threshold)?;
        nonneg("sample_interval", self.sample_interval)?;
        nonneg("backoff_initial", self.backoff_initial)?;
        nonneg("backoff_max", self.backoff_max)?;
        if !(self.threads.is_finite() && self.threads > 0.0) {
            return Err(LbError::InvalidConfig {
                field: "threads",
                value: self.threads,
                reason: "must be > 0",
            });
        }
        if self.consecutive == 0 {
            return Err(LbError::InvalidConfig {
                field: "consecutive",
                value: 0.0,
                reason: "must be >= 1",
            });
        }
        if self.backoff_initial > self.backoff_max {
            return Err(LbError::InvalidConfig {
                field: "backoff_initial",
                value: self.backoff_initial,
                reason: "must not exceed backoff_max",
            });
        }
        Ok(())
    }
}

/// What the flexible phase should do now.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Advice {
    /// Keep going.
    Continue,
    /// Thrashing: leave the flexible section now and, ideally, wait
    /// `backoff_seconds` before the next one.
    Recede {
        /// Major faults per second of the sample that triggered the recession.
        fault_rate: f64,
        /// CPU utilisation of that sample.
        cpu_utilization: f64,
        /// Recommended back-off.
        backoff_seconds: f64,
    },
}

impl Advice {
    /// `true` for [`Advice::Recede`].
    pub fn recede(&self) -> bool {
        matches!(self, Advice::Recede { .. })
    }
}

/// Counters of a [`MemoryBalancer`].
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct MemoryStats {
    /// Samples taken.
    pub samples: u64,
    /// Samples classified as thrashing.
    pub thrashing_samples: u64,
    /// Sections cut short.
    pub recessions: u64,
}

/// Anti-thrashing monitor of a flexible section (module documentation).
#[derive(Debug, Clone)]
pub struct MemoryBalancer<R: SystemReadings> {
    params: MemoryParams,
    readings: R,
    last: Option<Reading>,
    streak: u32,
    receding: Option<Advice>,
    consecutive_recessions: u32,
    stats: MemoryStats,
}

impl<R: SystemReadings> MemoryBalancer<R> {
    /// A monitor reading counters from `readings`.
    ///
    /// # Errors
    /// [`LbError::InvalidConfig`] if `params` does not validate.
    pub fn new(params: MemoryParams, readings: R) -> Result<Self, LbError> {
        params.validate()?;
        Ok(Self {
            params,
            readings,
            last: None,
            streak: 0,
            receding: None,
            consecutive_recessions: 0,
            stats: MemoryStats::default(),
        })
    }

    /// The parameters.
    pub fn params(&self) -> &MemoryParams {
        &self.params
    }

    /// Counters so far.
    pub fn stats(&self) -> MemoryStats {
        self.stats
    }

    /// Starts tracking page faults and CPU idling (called by `lb_section_start`).
    ///
    /// # Errors
    /// [`LbError::Readings`].
    pub fn section_start(&mut self) -> Result<(), LbError> {
        self.last = Some(self.readings.read()?);
        self.streak = 0;
        self.receding = None;
        Ok(())
    }

    /// Ends the section; a section without recession resets the back-off.
    pub fn section_end(&mut self) {
        if self.receding.is_none() {
            self.consecutive_recessions = 0;
        }
        self.last = None;
    }

    /// Samples the counters if [`MemoryParams::sample_interval`] has passed and
    /// returns the advice. Once it advised receding, it keeps doing so until the
    /// next [`MemoryBalancer::section_start`]. Outside a section it starts one.
    ///
    /// # Errors
    /// [`LbError::Readings`].
    pub fn check(&mut self) -> Result<Advice, LbError> {
        if let Some(a) = self.receding {
            return Ok(a);
        }
        let Some(last) = self.last else {
            self.section_start()?;
            return Ok(Advice::Continue);
        };
        let now = self.readings.read()?;
        let dt = now.wall_seconds - last.wall_seconds;
        if dt < self.params.sample_interval || dt <= 0.0 {
            return Ok(Advice::Continue);
        }
        self.last = Some(now);
        self.stats.samples += 1;
        let fault_rate = now.major_faults.saturating_sub(last.major_faults) as f64 / dt;
        let cpu_utilization =
            (now.cpu_seconds - last.cpu_seconds).max(0.0) / dt / self.params.threads;
        let thrashing = fault_rate > self.params.fault_rate_threshold
            && cpu_utilization < self.params.cpu_utilization_threshold;
        if !thrashing {
            self.streak = 0;
            return Ok(Advice::Continue);
        }
        self.stats.thrashing_samples += 1;
        self.streak += 1;
        if self.streak < self.params.consecutive {
            return Ok(Advice::Continue);
        }
        let backoff = (self.params.backoff_initial
            * 2f64.powi(self.consecutive_recessions.min(60) as i32))
        .min(self.params.backoff_max);
        self.consecutive_recessions += 1;
        self.stats.recessions += 1;
        let advice = Advice::Recede {
            fault_rate,
            cpu_utilization,
            backoff_seconds: backoff,
        };
        self.receding = Some(advice);
        Ok(advice)
    }
}

/// Fake readings for tests and simulations: a script of readings returned in
/// order (the last one repeats).
#[derive(Debug, Clone)]
pub struct ScriptedReadings {
    script: Vec<Reading>,
    next: usize,
}

impl ScriptedReadings {
    /// Readings that replay `script` (must not be empty to be useful: an empty
    /// script reads all-zero counters).
    pub fn new(script: Vec<Reading>) -> Self {
        Self { script, next: 0 }
    }
}

impl SystemReadings for ScriptedReadings {
    fn read(&mut self) -> Result<Reading, LbError> {
        let r = self
            .script
            .get(self.next)
            .or(self.script.last())
            .copied()
            .unwrap_or_default();
        self.next += 1;
        Ok(r)
    }
}
