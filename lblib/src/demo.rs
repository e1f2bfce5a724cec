//! A second flexible-phase application, not an eigensolver: synchronous parallel
//! simulated annealing (McCombs et al., §2: "processors independently perturb an
//! initial set of configurations ... then synchronize to decide upon new
//! configurations").
//!
//! Objective: the Rastrigin function `E(x) = 10 d + Σ (x_i² − 10 cos 2π x_i)` on
//! `[-5.12, 5.12]^d` (global minimum 0 at the origin, many local minima).
//!
//! * **Flexible phase**: every rank runs Metropolis sweeps from the current global
//!   best at the phase's temperature. One *operation* is
//!   [`AnnealParams::sweeps_per_op`] sweeps over all coordinates.
//! * **Control phase**: all-gather of the ranks' best energies, broadcast of the
//!   best configuration from its owner, cooling.
//!
//! Unbalanced, every rank performs [`AnnealParams::ops_per_phase`] operations per
//! phase, so fast ranks wait for slow ones: with speeds 1, 1, 2, 4 (slowdowns 4, 4,
//! 2, 1) the expected imbalance is Σ(max − t_i)/Σ max = (3+3+2+0)/16 = 50%.
//! Balanced, the first phase runs [`AnnealParams::first_section_ops`] operations
//! to measure rates, then every phase lasts the time T in which the fastest rank
//! completes `ops_per_phase` operations ([`Lbs::decide`] with
//! [`Method::Fastest`]), and every rank runs [`Lbs::should_continue`] until T.
//! The imbalance comes from the [`Traced`] communicator (§4 metric).

use crate::error::LbError;
use crate::lbs::{Lbs, LbsConfig, Method};
use crate::tracer::{ImbalanceReport, Traced};
use lbcomm::{Comm, ReduceOp};

/// Parameters of [`run_anneal`].
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct AnnealParams {
    /// Number of flexible phases (each followed by a control phase). Default: 20.
    pub phases: usize,
    /// Operations per phase: done by every rank when unbalanced; by the fastest
    /// rank (defining T) when balanced. Default: 200.
    pub ops_per_phase: f64,
    /// Operations of the first (rate-measuring) phase when balanced. Default: 20.
    pub first_section_ops: f64,
    /// Load balance the flexible phase. Default: true.
    pub balance: bool,
    /// Dimension of the Rastrigin function. Default: 64.
    pub dim: usize,
    /// Sweeps over all coordinates per operation. Default: 4.
    pub sweeps_per_op: usize,
    /// Initial temperature. Default: 10.
    pub t_start: f64,
    /// Temperature factor applied after every phase. Default: 0.8.
    pub cooling: f64,
    /// Seed of the random streams (each rank derives its own). Default: 12345.
    pub seed: u64,
    /// Seconds at nominal speed each operation charges to the clock
    /// ([`Comm::charge`]): with [`crate::ClockMode::Manual`] the run is then
    /// deterministic (times from counted operations, not measured). Default: 0
    /// (measured clocks charge nothing).
    pub op_seconds: f64,
}

impl Default for AnnealParams {
    fn default() -> Self {
        Self {
            phases: 20,
            ops_per_phase: 200.0,
            first_section_ops: 20.0,
            balance: true,
            dim: 64,
            sweeps_per_op: 4,
            t_start: 10.0,
            cooling: 0.8,
            seed: 12345,
            op_seconds: 0.0,
        }
    }
}

impl AnnealParams {
    /// Checks ranges: `phases ≥ 1`, `dim ≥ 1`, `sweeps_per_op ≥ 1`, positive finite
    /// `ops_per_phase`, `first_section_ops ≥ 1`, `t_start > 0`, `0 < cooling ≤ 1`,
    /// finite `op_seconds ≥ 0`.
    ///
    /// # Errors
    /// [`LbError::InvalidConfig`] naming the field.
    pub fn validate(&self) -> Result<(), LbError> {
        let bad = |field, value: f64, reason| {
            Err(LbError::InvalidConfig {
                field,
                value,
                reason,
            })
        };
        if self.phases == 0 {
            return bad("phases", 0.0, "must be >= 1");
        }
        if self.dim == 0 {
            return bad("dim", 0.0, "must be >= 1");
        }
        if self.sweeps_per_op == 0 {
            return bad("sweeps_per_op", 0.0, "must be >= 1");
        }
        if !(self.ops_per_phase.is_finite() && self.ops_per_phase >= 1.0) {
            return bad(
                "ops_per_phase",
                self.ops_per_phase,
                "must be finite and >= 1",
            );
        }
        if !(self.first_section_ops.is_finite() && self.first_section_ops >= 1.0) {
            return bad(
                "first_section_ops",
                self.first_section_ops,
                "must be finite and >= 1",
            );
        }
        if !(self.t_start.is_finite() && self.t_start > 0.0) {
            return bad("t_start", self.t_start, "must be finite and > 0");
        }
        if !(self.cooling > 0.0 && self.cooling <= 1.0) {
            return bad("cooling", self.cooling, "must be in (0, 1]");
        }
        if !(self.op_seconds.is_finite() && self.op_seconds >= 0.0) {
            return bad("op_seconds", self.op_seconds, "must be finite and >= 0");
        }
        Ok(())
    }
}

/// What [`run_anneal`] measured (identical on every rank except `ops_per_rank`,
/// which is gathered so also identical).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AnnealOutcome {
    /// Number of ranks.
    pub ranks: usize,
    /// Whether the flexible phase was balanced.
    pub balanced: bool,
    /// Lowest energy found.
    pub best_energy: f64,
    /// §4 imbalance percentage of the whole run (from [`Traced::report`]).
    pub imbalance_percent: f64,
    /// Longest wall-clock time over ranks, on the communicator's clock.
    pub wall_seconds: f64,
    /// Operations done by each rank over the run.
    pub ops_per_rank: Vec<f64>,
    /// The time limits T decided (balanced runs).
    pub time_limits: Vec<f64>,
    /// The full imbalance report.
    pub report: ImbalanceReport,
}

/// SplitMix64 stream.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

const BOUND: f64 = 5.12;

fn term(x: f64) -> f64 {
    x * x - 10.0 * (std::f64::consts::TAU * x).cos() + 10.0
}

/// The Rastrigin energy of `x`.
pub fn rastrigin(x: &[f64]) -> f64 {
    x.iter().map(|&v| term(v)).sum()
}

/// Annealing state of one rank; all buffers sized once.
struct Walker {
    x: Vec<f64>,
    energy: f64,
    best: Vec<f64>,
    best_energy: f64,
    rng: Rng,
}

impl Walker {
    /// One operation: `sweeps` Metropolis sweeps at `temp` with step `step`.
    fn op(&mut self, sweeps: usize, temp: f64, step: f64) {
        for _ in 0..sweeps {
            for i in 0..self.x.len() {
                let old = self.x[i];
                let new = (old + step * (2.0 * self.rng.unit() - 1.0)).clamp(-BOUND, BOUND);
                let de = term(new) - term(old);
                if de <= 0.0 || self.rng.unit() < (-de / temp).exp() {
                    self.x[i] = new;
                    self.energy += de;
                }
            }
            if self.energy < self.best_energy {
                self.best_energy = self.energy;
                self.best.copy_from_slice(&self.x);
            }
        }
    }
}

/// Runs synchronous parallel simulated annealing on `comm` (collective), traced
/// and optionally balanced with [`Lbs`]; returns the run's figures.
///
/// # Errors
/// [`LbError::InvalidConfig`] for bad parameters; errors of [`Lbs`] and
/// [`Traced::report`] (none expected on a consistent SPMD run).
pub fn run_anneal<C: Comm>(comm: C, params: &AnnealParams) -> Result<AnnealOutcome, LbError> {
    params.validate()?;
    let traced = Traced::new(comm);
    let n = traced.size();
    let me = traced.rank();
    let d = params.dim;
    let mut rng = Rng(params.seed ^ 0xA5A5_5A5A_1234_5678);
    // Common random start (same seed on all ranks).
    let x0: Vec<f64> = (0..d).map(|_| BOUND * (2.0 * rng.unit() - 1.0)).collect();
    let e0 = rastrigin(&x0);
    let mut w = Walker {
        x: x0.clone(),
        energy: e0,
        best: x0,
        best_energy: e0,
        rng: Rng(params
            .seed
            .wrapping_mul(0x2545_F491_4F6C_DD1D)
            .wrapping_add(me as u64 + 1)),
    };
    let cfg = LbsConfig {
        first_section_ops: params.first_section_ops,
        ..LbsConfig::default()
    };
    let mut lbs = Lbs::with_config(&traced, cfg)?;
    let mut temp = params.t_start;
    let mut energies = vec![0.0; n];
    let mut total_ops = 0.0;
    let mut time_limits = Vec::new();
    for _phase in 0..params.phases {
        // Control phase: decide T (balanced, once rates exist).
        if params.balance && lbs.has_rate() {
            let _g = traced.label_scope("decide");
            time_limits.push(lbs.decide(params.ops_per_phase, Method::Fastest)?);
        }
        // Flexible phase.
        let step = (0.5 * temp.sqrt()).clamp(0.05, 2.0);
        let mut ops = 0.0;
        if params.balance {
            lbs.section_start()?;
            while lbs.should_continue(ops, 1.0)? {
                w.op(params.sweeps_per_op, temp, step);
                traced.charge(params.op_seconds);
                ops += 1.0;
            }
            lbs.section_end(ops)?;
        } else {
            while ops < params.ops_per_phase {
                w.op(params.sweeps_per_op, temp, step);
                traced.charge(params.op_seconds);
                ops += 1.0;
            }
        }
        total_ops += ops;
        // Control phase: adopt the global best configuration.
        {
            let _g = traced.label_scope("control");
            traced.all_gather(&[w.best_energy], &mut energies);
            let owner = (0..n).fold(0, |b, r| if energies[r] < energies[b] { r } else { b });
            if me == owner {
                w.x.copy_from_slice(&w.best);
            }
            traced.broadcast(&mut w.x, owner);
            w.energy = rastrigin(&w.x);
            w.best.copy_from_slice(&w.x);
            w.best_energy = w.energy;
        }
        temp *= params.cooling;
    }
    let mut best = [w.best_energy];
    traced.inner().all_reduce(&mut best, ReduceOp::Min);
    let mut ops_per_rank = vec![0.0; n];
    traced.inner().all_gather(&[total_ops], &mut ops_per_rank);
    let report = traced.report()?;
    Ok(AnnealOutcome {
        ranks: n,
        balanced: params.balance,
        best_energy: best[0],
        imbalance_percent: report.imbalance_percent,
        wall_seconds: report.wall_seconds_max(),
        ops_per_rank,
        time_limits,
        report,
    })
}
