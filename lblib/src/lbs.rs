//! The flexible-section balancer: the paper's LBLIB `LBS` structure (McCombs et al., §5).
//!
//! A *flexible phase* (§2) is a loop whose amount of work per process may vary
//! without hurting the result. Instead of a fixed number of steps, every process
//! runs it for the same time T, so all finish together whatever their speed.
//!
//! ```
//! use lblib::{Comm, Lbs, LbsConfig, Method, ThreadComm};
//! let t = ThreadComm::run(2, |comm| {
//!     let mut lbs = Lbs::with_config(&comm, LbsConfig { first_section_ops: 5.0, ..Default::default() }).unwrap();
//!     let mut t = 0.0;
//!     for _outer in 0..3 {
//!         if lbs.has_rate() {
//!             t = lbs.decide(20.0, Method::Fastest).unwrap(); // control phase
//!         }
//!         lbs.section_start().unwrap();
//!         let mut ops = 0.0;
//!         while lbs.should_continue(ops, 1.0).unwrap() {
//!             comm.advance(1e-3); // one step of the flexible phase
//!             ops += 1.0;
//!         }
//!         lbs.section_end(ops).unwrap();
//!     }
//!     t
//! });
//! assert!(t[0] > 0.0);
//! ```
//!
//! Differences from the C library: errors are typed ([`LbError`]) instead of an
//! error code checked with `lb_chkerr`; the "instantaneous" counterparts of the
//! rate-using functions take a [`RateKind`]; the first section may be driven by
//! [`LbsConfig::first_section_ops`]; memory balancing is an optional
//! [`MemoryBalancer`] consulted by [`Lbs::should_continue`].

use crate::error::LbError;
use crate::memory::{Advice, MemoryBalancer, SystemReadings};
use lbcomm::{Comm, ReduceOp};

/// Which rate a rate-using function works with (§5.1, last paragraph).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum RateKind {
    /// Operations over the whole flexible section (LBLIB's default).
    #[default]
    Average,
    /// Operations over the most recent complete window of
    /// [`LbsConfig::window`] seconds (LBLIB's "instantaneous" rates), better when
    /// external loads vary quickly. Falls back to the average while no window has
    /// completed.
    Instantaneous,
}

/// A user-defined way to compute T from `(ops, rates_ascending)` (`LB_USER_DEFINED`, §5).
pub type UserMethod = Box<dyn Fn(f64, &[f64]) -> f64>;

/// How [`Lbs::decide`] turns the gathered rates into the time T (§5, `lb_decide`).
pub enum Method {
    /// `LB_USE_FASTEST`: T is the predicted time for the fastest process to do `ops`.
    Fastest,
    /// `LB_USE_SLOWEST`: T is the predicted time for the slowest process to do `ops`.
    Slowest,
    /// `LB_USER_DEFINED`: `f(ops, rates_ascending)` returns T.
    User(UserMethod),
}

impl std::fmt::Debug for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Method::Fastest => f.write_str("Fastest"),
            Method::Slowest => f.write_str("Slowest"),
            Method::User(_) => f.write_str("User(..)"),
        }
    }
}

/// Parameters of an [`Lbs`].
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct LbsConfig {
    /// Operations the flexible section runs while no time limit has been decided
    /// (the first section of a run, §5.1: "the first time through the flexible
    /// section, the for-loop should execute a constant number of iterations in
    /// order to collect the first set of performance data"). In that state
    /// [`Lbs::should_continue`] returns `ops_completed + ops_needed <=
    /// first_section_ops`. Default: 10.
    pub first_section_ops: f64,
    /// Length in seconds (of the communicator's clock) of the window over which
    /// instantaneous rates are measured. Default: 0.05.
    pub window: f64,
    /// Shortest span, in seconds of the communicator's clock, an average rate is
    /// measured over: a section shorter than this adds its operations and time
    /// to the next ones until they reach it, and the previous rate stays in force
    /// meanwhile (a section shorter than a scheduler time slice on a shared core
    /// measures the slice, not the process's share). Default: 0 (every section).
    pub min_rate_seconds: f64,
}

impl Default for LbsConfig {
    fn default() -> Self {
        Self {
            first_section_ops: 10.0,
            window: 0.05,
            min_rate_seconds: 0.0,
        }
    }
}

impl LbsConfig {
    /// Checks the ranges: `first_section_ops >= 0`, `window > 0` and
    /// `min_rate_seconds >= 0`, all finite.
    ///
    /// # Errors
    /// [`LbError::InvalidConfig`] naming the field.
    pub fn validate(&self) -> Result<(), LbError> {
        if !(self.first_section_ops.is_finite() && self.first_section_ops >= 0.0) {
            return Err(LbError::InvalidConfig {
                field: "first_section_ops",
                value: self.first_section_ops,
                reason: "must be finite and >= 0",
            });
        }
        if !(self.window.is_finite() && self.window > 0.0) {
            return Err(LbError::InvalidConfig {
                field: "window",
                value: self.window,
                reason: "must be finite and > 0",
            });
        }
        if !(self.min_rate_seconds.is_finite() && self.min_rate_seconds >= 0.0) {
            return Err(LbError::InvalidConfig {
                field: "min_rate_seconds",
                value: self.min_rate_seconds,
                reason: "must be finite and >= 0",
            });
        }
        Ok(())
    }
}

/// Ascending rates of one kind and the ranks they belong to.
#[derive(Debug, Clone, Default)]
struct Ranking {
    rates: Vec<f64>,
    index: Vec<usize>,
}

/// One load-balanced flexible section on one communicator: LBLIB's `LBS`
/// (McCombs et al., §5).
///
/// Only [`Lbs::decide`] communicates. Several `Lbs` may be used at once, with
/// nested sections, for instance one on the communicator of solve-group leaders
/// and one per solve group (§7).
pub struct Lbs<'c, C: Comm + ?Sized> {
    comm: &'c C,
    cfg: LbsConfig,
    open: bool,
    t0: f64,
    win_t0: f64,
    win_ops0: f64,
    cur_inst: Option<f64>,
    /// Operations and seconds of short sections not yet turned into a rate
    /// ([`LbsConfig::min_rate_seconds`]).
    pending: (f64, f64),
    last_avg: Option<f64>,
    last_inst: Option<f64>,
    limit: Option<f64>,
    rankings: Option<[Ranking; 2]>,
    gather: Vec<f64>,
    memory: Option<MemoryBalancer<Box<dyn SystemReadings + Send>>>,
    receded: Option<f64>,
    sections: u64,
}

impl<C: Comm + ?Sized> std::fmt::Debug for Lbs<'_, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lbs")
            .field("rank", &self.comm.rank())
            .field("size", &self.comm.size())
            .field("open", &self.open)
            .field("limit", &self.limit)
            .field("last_avg", &self.last_avg)
            .finish()
    }
}

const STATUS_OK: f64 = 0.0;
const STATUS_NO_RATE: f64 = 1.0;
const STATUS_OPEN: f64 = 2.0;

impl<'c, C: Comm + ?Sized> Lbs<'c, C> {
    /// `lb_new_lbstruct`: a balancer on `comm` with [`LbsConfig::default`].
    pub fn new(comm: &'c C) -> Self {
        Self::build(comm, LbsConfig::default())
    }

    /// A balancer with explicit parameters.
    ///
    /// # Errors
    /// [`LbError::InvalidConfig`] if `cfg` does not validate.
    pub fn with_config(comm: &'c C, cfg: LbsConfig) -> Result<Self, LbError> {
        cfg.validate()?;
        Ok(Self::build(comm, cfg))
    }

    fn build(comm: &'c C, cfg: LbsConfig) -> Self {
        Self {
            comm,
            cfg,
            open: false,
            t0: 0.0,
            win_t0: 0.0,
            win_ops0: 0.0,
            cur_inst: None,
            pending: (0.0, 0.0),
            last_avg: None,
            last_inst: None,
            limit: None,
            rankings: None,
            gather: vec![0.0; 3 * comm.size()],
            memory: None,
            receded: None,
            sections: 0,
        }
    }

    /// Enables memory (anti-thrashing) balancing (§5, ref. \[24\]): the balancer
    /// is started by [`Lbs::section_start`] and consulted by
    /// [`Lbs::should_continue`], which returns `false` when it advises receding.
    pub fn enable_memory_balancing(
        &mut self,
        balancer: MemoryBalancer<Box<dyn SystemReadings + Send>>,
    ) {
        self.memory = Some(balancer);
    }

    /// The memory balancer, if enabled.
    pub fn memory_balancer(&self) -> Option<&MemoryBalancer<Box<dyn SystemReadings + Send>>> {
        self.memory.as_ref()
    }

    /// If the current (or last) section was cut short by memory balancing, the
    /// back-off in seconds the memory balancer recommends before resuming.
    pub fn receded(&self) -> Option<f64> {
        self.receded
    }

    /// The communicator.
    pub fn comm(&self) -> &'c C {
        self.comm
    }

    /// The parameters.
    pub fn config(&self) -> &LbsConfig {
        &self.cfg
    }

    /// `true` between [`Lbs::section_start`] and [`Lbs::section_end`].
    pub fn in_section(&self) -> bool {
        self.open
    }

    /// `true` once a section has ended, i.e. [`Lbs::decide`] can succeed here.
    pub fn has_rate(&self) -> bool {
        self.last_avg.is_some()
    }

    /// Number of sections ended so far.
    pub fn sections(&self) -> u64 {
        self.sections
    }

    /// The time limit T of the last [`Lbs::decide`], if any.
    pub fn time_limit(&self) -> Option<f64> {
        self.limit
    }

    /// Forgets the time limit: the next sections run
    /// [`LbsConfig::first_section_ops`] operations again (to re-measure rates).
    pub fn clear_time_limit(&mut self) {
        self.limit = None;
    }

    /// This process's rate of the last ended section, of the given kind.
    pub fn last_rate(&self, kind: RateKind) -> Option<f64> {
        match kind {
            RateKind::Average => self.last_avg,
            RateKind::Instantaneous => self.last_inst,
        }
    }

    /// `lb_section_start`: starts timing the flexible section (and memory tracking
    /// if enabled).
    ///
    /// # Errors
    /// [`LbError::NestedSection`] if this `Lbs` already has an open section;
    /// [`LbError::Readings`] if memory balancing cannot read system counters.
    pub fn section_start(&mut self) -> Result<(), LbError> {
        if self.open {
            return Err(LbError::NestedSection {
                started_at: self.t0,
            });
        }
        if let Some(m) = self.memory.as_mut() {
            m.section_start()?;
        }
        let now = self.comm.wtime();
        self.open = true;
        self.t0 = now;
        self.win_t0 = now;
        self.win_ops0 = 0.0;
        self.cur_inst = None;
        self.receded = None;
        Ok(())
    }

    /// `lb_continue` with average rates: see [`Lbs::should_continue_with`].
    ///
    /// # Errors
    /// As [`Lbs::should_continue_with`].
    pub fn should_continue(
        &mut self,
        ops_completed: f64,
        ops_needed: f64,
    ) -> Result<bool, LbError> {
        self.should_continue_with(ops_completed, ops_needed, RateKind::Average)
    }

    /// `lb_continue`: `true` if `ops_needed` more operations are predicted to fit
    /// in the time limit T, given `ops_completed` so far in this section (§5).
    ///
    /// The prediction uses this section's rate of the given kind (the previous
    /// section's while nothing was done yet). Before any `decide`, returns
    /// `ops_completed + ops_needed <= first_section_ops` (the fixed first section).
    /// Returns `false` when memory balancing advises receding ([`Lbs::receded`]).
    ///
    /// # Errors
    /// [`LbError::ContinueOutsideSection`]; [`LbError::InvalidOps`] for negative or
    /// non-finite counts; [`LbError::Readings`] from memory balancing.
    pub fn should_continue_with(
        &mut self,
        ops_completed: f64,
        ops_needed: f64,
        kind: RateKind,
    ) -> Result<bool, LbError> {
        if !self.open {
            return Err(LbError::ContinueOutsideSection);
        }
        check_ops(ops_completed, "ops_completed")?;
        check_ops(ops_needed, "ops_needed")?;
        if let Some(m) = self.memory.as_mut() {
            if let Advice::Recede {
                backoff_seconds, ..
            } = m.check()?
            {
                self.receded = Some(backoff_seconds);
                return Ok(false);
            }
        }
        let now = self.comm.wtime();
        self.update_window(now, ops_completed);
        let Some(limit) = self.limit else {
            return Ok(ops_completed + ops_needed <= self.cfg.first_section_ops);
        };
        let elapsed = now - self.t0;
        let avg = if ops_completed > 0.0 && elapsed > 0.0 {
            Some(ops_completed / elapsed)
        } else {
            self.last_avg
        };
        let rate = match kind {
            RateKind::Average => avg,
            RateKind::Instantaneous => self.cur_inst.or(avg).or(self.last_inst),
        };
        match rate {
            Some(r) if r > 0.0 => Ok(elapsed + ops_needed / r <= limit),
            _ => Ok(elapsed < limit),
        }
    }

    fn update_window(&mut self, now: f64, ops: f64) {
        let dt = now - self.win_t0;
        if dt >= self.cfg.window && ops > self.win_ops0 {
            self.cur_inst = Some((ops - self.win_ops0) / dt);
            self.win_t0 = now;
            self.win_ops0 = ops;
        }
    }

    /// `lb_section_end`: stops timing and returns this process's average rate
    /// (operations per second) over the section, or over it and the short
    /// sections before it once they reach [`LbsConfig::min_rate_seconds`] (until
    /// then the previous rate stays in force and is returned). The instantaneous
    /// rate of the section (last complete window, else its average) is stored too.
    ///
    /// # Errors
    /// [`LbError::EndOutsideSection`]; [`LbError::InvalidOps`]; [`LbError::NoElapsedTime`]
    /// if operations were reported but the clock did not move (the section is
    /// closed anyway).
    pub fn section_end(&mut self, ops_completed: f64) -> Result<f64, LbError> {
        if !self.open {
            return Err(LbError::EndOutsideSection);
        }
        check_ops(ops_completed, "ops_completed")?;
        let now = self.comm.wtime();
        self.open = false;
        if let Some(m) = self.memory.as_mut() {
            m.section_end();
        }
        let elapsed = now - self.t0;
        if elapsed <= 0.0 {
            return Err(LbError::NoElapsedTime { ops: ops_completed });
        }
        self.update_window(now, ops_completed);
        let section_rate = ops_completed / elapsed;
        self.pending.0 += ops_completed;
        self.pending.1 += elapsed;
        let rate = match self.last_avg {
            Some(r) if self.pending.1 < self.cfg.min_rate_seconds => r,
            _ => {
                let r = self.pending.0 / self.pending.1;
                self.pending = (0.0, 0.0);
                self.last_avg = Some(r);
                r
            }
        };
        self.last_inst = Some(self.cur_inst.unwrap_or(section_rate));
        self.sections += 1;
        Ok(rate)
    }

    /// `lb_decide` with average rates: see [`Lbs::decide_with`].
    ///
    /// # Errors
    /// As [`Lbs::decide_with`].
    pub fn decide(&mut self, ops: f64, method: Method) -> Result<f64, LbError> {
        self.decide_with(ops, method, RateKind::Average)
    }

    /// `lb_decide`: the only collective call. Gathers every process's latest rates
    /// (both kinds), sorts them, and returns (and stores) the time limit T in which
    /// each process should ideally complete `ops` operations, per `method` using
    /// rates of `kind` (§5).
    ///
    /// # Errors
    /// Every rank returns the same error: [`LbError::DecideBeforeSection`] if some
    /// rank has no rate yet; [`LbError::DecideInsideSection`] if some rank is in an
    /// open section; [`LbError::InvalidOps`] if `ops` is not positive and finite;
    /// [`LbError::NonPositiveRate`] if the selected rate is not positive;
    /// [`LbError::InvalidTime`] if a user method returns a negative or non-finite T.
    pub fn decide_with(
        &mut self,
        ops: f64,
        method: Method,
        kind: RateKind,
    ) -> Result<f64, LbError> {
        let n = self.comm.size();
        let status = if self.open {
            STATUS_OPEN
        } else if self.last_avg.is_none() {
            STATUS_NO_RATE
        } else {
            STATUS_OK
        };
        let mine = [
            self.last_avg.unwrap_or(f64::NAN),
            self.last_inst.unwrap_or(f64::NAN),
            status,
        ];
        self.gather.resize(3 * n, 0.0);
        self.comm.all_gather(&mine, &mut self.gather);
        let open: Vec<usize> = (0..n)
            .filter(|&r| self.gather[3 * r + 2] == STATUS_OPEN)
            .collect();
        if !open.is_empty() {
            return Err(LbError::DecideInsideSection { ranks: open });
        }
        let none: Vec<usize> = (0..n)
            .filter(|&r| self.gather[3 * r + 2] == STATUS_NO_RATE)
            .collect();
        if !none.is_empty() {
            return Err(LbError::DecideBeforeSection { ranks: none });
        }
        if !(ops.is_finite() && ops > 0.0) {
            return Err(LbError::InvalidOps {
                ops,
                what: "decide ops",
            });
        }
        let mut rankings = self.rankings.take().unwrap_or_default();
        for (k, ranking) in rankings.iter_mut().enumerate() {
            ranking.index.clear();
            ranking.index.extend(0..n);
            let g = &self.gather;
            ranking
                .index
                .sort_by(|&a, &b| g[3 * a + k].total_cmp(&g[3 * b + k]).then(a.cmp(&b)));
            ranking.rates.clear();
            ranking
                .rates
                .extend(ranking.index.iter().map(|&r| g[3 * r + k]));
        }
        let ranking = &rankings[kind as usize];
        let result = match &method {
            Method::Fastest => {
                let (rate, rank) = (ranking.rates[n - 1], ranking.index[n - 1]);
                if rate > 0.0 {
                    Ok(ops / rate)
                } else {
                    Err(LbError::NonPositiveRate { rate, rank })
                }
            }
            Method::Slowest => {
                let (rate, rank) = (ranking.rates[0], ranking.index[0]);
                if rate > 0.0 {
                    Ok(ops / rate)
                } else {
                    Err(LbError::NonPositiveRate { rate, rank })
                }
            }
            Method::User(f) => {
                let t = f(ops, &ranking.rates);
                if t.is_finite() && t >= 0.0 {
                    Ok(t)
                } else {
                    Err(LbError::InvalidTime { time: t })
                }
            }
        };
        self.rankings = Some(rankings);
        let t = result?;
        self.limit = Some(t);
        Ok(t)
    }

    /// `lb_get_rates`: the average rates gathered by the last [`Lbs::decide`], ascending.
    ///
    /// # Errors
    /// [`LbError::RatesBeforeDecide`].
    pub fn rates(&self) -> Result<&[f64], LbError> {
        self.rates_with(RateKind::Average)
    }

    /// `lb_get_index`: the ranks owning the rates of [`Lbs::rates`] (slowest first).
    ///
    /// # Errors
    /// [`LbError::RatesBeforeDecide`].
    pub fn index(&self) -> Result<&[usize], LbError> {
        self.index_with(RateKind::Average)
    }

    /// Rates of the given kind gathered by the last decide, ascending.
    ///
    /// # Errors
    /// [`LbError::RatesBeforeDecide`].
    pub fn rates_with(&self, kind: RateKind) -> Result<&[f64], LbError> {
        self.rankings
            .as_ref()
            .map(|r| r[kind as usize].rates.as_slice())
            .ok_or(LbError::RatesBeforeDecide)
    }

    /// Ranks owning the rates of [`Lbs::rates_with`] for the same kind.
    ///
    /// # Errors
    /// [`LbError::RatesBeforeDecide`].
    pub fn index_with(&self, kind: RateKind) -> Result<&[usize], LbError> {
        self.rankings
            .as_ref()
            .map(|r| r[kind as usize].index.as_slice())
            .ok_or(LbError::RatesBeforeDecide)
    }
}

fn check_ops(ops: f64, what: &'static str) -> Result<(), LbError> {
    if ops.is_finite() && ops >= 0.0 {
        Ok(())
    } else {
        Err(LbError::InvalidOps { ops, what })
    }
}

/// Group-leader helper for multigrain balancing (McCombs et al., §7): the leader's
/// `decision` (e.g. from [`Lbs::should_continue`]) is broadcast from rank `leader`
/// of `group`, so that all members of a solve group step together. Collective
/// over `group`; the `decision` of non-leaders is ignored.
pub fn group_continue<G: Comm + ?Sized>(group: &G, leader: usize, decision: bool) -> bool {
    let mut b = [u64::from(decision)];
    group.broadcast_u64(&mut b, leader);
    b[0] != 0
}

/// Sum of `x` over `comm` (helper used by examples and tests).
pub fn global_sum<G: Comm + ?Sized>(comm: &G, x: f64) -> f64 {
    let mut b = [x];
    comm.all_reduce(&mut b, ReduceOp::Sum);
    b[0]
}

/// Load balancing of solve groups (McCombs et al., §7): "Processor 0 of each solve
/// group is responsible for coordinating the load balancing."
///
/// Every member of a group holds a `GroupLbs`; the group leader (group rank 0) also
/// holds an [`Lbs`] on the communicator of all leaders. `section_start` and
/// `section_end` are local; [`GroupLbs::should_continue`], [`GroupLbs::section_end`]
/// and [`GroupLbs::decide`] are collective over the group: the leader's answer
/// (continue or not, its rate, T and the groups' ranking) is broadcast, so all
/// members step together. `decide` is also collective over the leaders.
pub struct GroupLbs<'c, G: Comm + ?Sized, L: Comm + ?Sized> {
    group: &'c G,
    lbs: Option<Lbs<'c, L>>,
    open: bool,
    limit: Option<f64>,
    rates: Vec<f64>,
    index: Vec<usize>,
    buf: Vec<f64>,
    decided: bool,
}

impl<G: Comm + ?Sized, L: Comm + ?Sized> std::fmt::Debug for GroupLbs<'_, G, L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupLbs")
            .field("group_rank", &self.group.rank())
            .field("leader", &self.lbs.is_some())
            .field("open", &self.open)
            .field("limit", &self.limit)
            .finish()
    }
}

const G_ERR: f64 = -1.0;

impl<'c, G: Comm + ?Sized, L: Comm + ?Sized> GroupLbs<'c, G, L> {
    /// A group balancer. `leaders` must be `Some` exactly on group rank 0.
    ///
    /// # Errors
    /// [`LbError::LeaderMismatch`]; [`LbError::InvalidConfig`] from `cfg`.
    pub fn new(group: &'c G, leaders: Option<&'c L>, cfg: LbsConfig) -> Result<Self, LbError> {
        let leader = group.rank() == 0;
        if leader != leaders.is_some() {
            return Err(LbError::LeaderMismatch {
                group_rank: group.rank(),
                has_leaders: leaders.is_some(),
            });
        }
        let lbs = match leaders {
            Some(l) => Some(Lbs::with_config(l, cfg)?),
            None => {
                cfg.validate()?;
                None
            }
        };
        Ok(Self {
            group,
            lbs,
            open: false,
            limit: None,
            rates: Vec::new(),
            index: Vec::new(),
            buf: Vec::new(),
            decided: false,
        })
    }

    /// `true` on the group leader.
    pub fn is_leader(&self) -> bool {
        self.lbs.is_some()
    }

    /// The leader's balancer (on the leaders' communicator), on the leader only.
    pub fn leader_lbs(&mut self) -> Option<&mut Lbs<'c, L>> {
        self.lbs.as_mut()
    }

    /// The time limit T of the last decide, on every member.
    pub fn time_limit(&self) -> Option<f64> {
        self.limit
    }

    /// Starts the flexible section (local).
    ///
    /// # Errors
    /// [`LbError::NestedSection`] if already open; errors of [`Lbs::section_start`]
    /// on the leader.
    pub fn section_start(&mut self) -> Result<(), LbError> {
        if self.open {
            return Err(LbError::NestedSection {
                started_at: f64::NAN,
            });
        }
        if let Some(l) = self.lbs.as_mut() {
            l.section_start()?;
        }
        self.open = true;
        Ok(())
    }

    /// The leader's [`Lbs::should_continue`], broadcast to the group (collective
    /// over the group). `ops_completed` and `ops_needed` matter on the leader only.
    ///
    /// # Errors
    /// [`LbError::ContinueOutsideSection`] (on every member, no communication);
    /// the leader's error on the leader and [`LbError::GroupLeaderFailed`] on members.
    pub fn should_continue(
        &mut self,
        ops_completed: f64,
        ops_needed: f64,
    ) -> Result<bool, LbError> {
        self.should_continue_with(ops_completed, ops_needed, RateKind::Average)
    }

    /// [`GroupLbs::should_continue`] predicting with the leader's rate of `kind`
    /// ([`Lbs::should_continue_with`]).
    ///
    /// # Errors
    /// As [`GroupLbs::should_continue`].
    pub fn should_continue_with(
        &mut self,
        ops_completed: f64,
        ops_needed: f64,
        kind: RateKind,
    ) -> Result<bool, LbError> {
        if !self.open {
            return Err(LbError::ContinueOutsideSection);
        }
        let (code, err) = match self
            .lbs
            .as_mut()
            .map(|l| l.should_continue_with(ops_completed, ops_needed, kind))
        {
            Some(Ok(c)) => (u64::from(c), None),
            Some(Err(e)) => (2, Some(e)),
            None => (0, None),
        };
        let mut b = [code];
        self.group.broadcast_u64(&mut b, 0);
        match (b[0], err) {
            (_, Some(e)) => Err(e),
            (2, None) => Err(LbError::GroupLeaderFailed {
                call: "should_continue",
            }),
            (c, None) => Ok(c == 1),
        }
    }

    /// Ends the section; returns the group's rate as measured by the leader
    /// (collective over the group).
    ///
    /// # Errors
    /// [`LbError::EndOutsideSection`] (no communication); the leader's error on the
    /// leader and [`LbError::GroupLeaderFailed`] on members.
    pub fn section_end(&mut self, ops_completed: f64) -> Result<f64, LbError> {
        if !self.open {
            return Err(LbError::EndOutsideSection);
        }
        self.open = false;
        let (rate, err) = match self.lbs.as_mut().map(|l| l.section_end(ops_completed)) {
            Some(Ok(r)) => (r, None),
            Some(Err(e)) => (G_ERR, Some(e)),
            None => (0.0, None),
        };
        let mut b = [rate];
        self.group.broadcast(&mut b, 0);
        match err {
            Some(e) => Err(e),
            None if b[0] == G_ERR => Err(LbError::GroupLeaderFailed {
                call: "section_end",
            }),
            None => Ok(b[0]),
        }
    }

    /// The leaders' [`Lbs::decide`] (collective over the leaders), then T and the
    /// groups' ranking are broadcast in every group (collective over the group).
    ///
    /// # Errors
    /// The leader's error on the leader and [`LbError::GroupLeaderFailed`] on members.
    pub fn decide(&mut self, ops: f64, method: Method) -> Result<f64, LbError> {
        self.decide_with(ops, method, RateKind::Average)
    }

    /// [`GroupLbs::decide`] with the leaders' rates of `kind` ([`Lbs::decide_with`]):
    /// T, the rates and the ranking all come from that kind.
    ///
    /// # Errors
    /// As [`GroupLbs::decide`].
    pub fn decide_with(
        &mut self,
        ops: f64,
        method: Method,
        kind: RateKind,
    ) -> Result<f64, LbError> {
        let mut err = None;
        let mut head = [G_ERR, 0.0];
        if let Some(l) = self.lbs.as_mut() {
            match l.decide_with(ops, method, kind) {
                Ok(t) => {
                    let rates = l.rates_with(kind).unwrap_or(&[]);
                    let index = l.index_with(kind).unwrap_or(&[]);
                    head = [t, rates.len() as f64];
                    self.rates.clear();
                    self.rates.extend_from_slice(rates);
                    self.index.clear();
                    self.index.extend_from_slice(index);
                }
                Err(e) => err = Some(e),
            }
        }
        self.group.broadcast(&mut head, 0);
        if head[0] == G_ERR {
            return Err(err.unwrap_or(LbError::GroupLeaderFailed { call: "decide" }));
        }
        let k = head[1] as usize;
        self.buf.clear();
        if self.lbs.is_some() {
            self.buf.extend_from_slice(&self.rates);
            self.buf.extend(self.index.iter().map(|&i| i as f64));
        } else {
            self.buf.resize(2 * k, 0.0);
        }
        self.group.broadcast(&mut self.buf, 0);
        self.rates.clear();
        self.rates.extend_from_slice(&self.buf[..k]);
        self.index.clear();
        self.index.extend(self.buf[k..].iter().map(|&i| i as usize));
        self.limit = Some(head[0]);
        self.decided = true;
        Ok(head[0])
    }

    /// The groups' rates (as measured by their leaders), ascending, on every member.
    ///
    /// # Errors
    /// [`LbError::RatesBeforeDecide`].
    pub fn rates(&self) -> Result<&[f64], LbError> {
        if self.decided {
            Ok(&self.rates)
        } else {
            Err(LbError::RatesBeforeDecide)
        }
    }

    /// Leaders'-communicator ranks (= group numbers, if leaders are ordered by
    /// group) owning the rates of [`GroupLbs::rates`], on every member.
    ///
    /// # Errors
    /// [`LbError::RatesBeforeDecide`].
    pub fn index(&self) -> Result<&[usize], LbError> {
        if self.decided {
            Ok(&self.index)
        } else {
            Err(LbError::RatesBeforeDecide)
        }
    }
}
