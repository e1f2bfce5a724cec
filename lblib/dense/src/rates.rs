//! Cycle-times measured by lblib, not given by the user: every process runs an
//! [`Lbs`] flexible section (McCombs et al. §5) of GEMM block updates, the unit task
//! of the LU/QR update phase, and the gathered rates become the cycle-times
//! `t_i = 1 / rate_i` of Boudet et al. §2.

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef};
use serde::{Deserialize, Serialize};

use super::DenseError;
use lbcomm::Comm;
use lblib::{Lbs, LbsConfig, Method};

/// Nominal seconds per flop that the distributed factorizations charge to their
/// communicator's clock after each panel factorization and each update
/// ([`lbcomm::Comm::charge`], see [`crate::factor`]): a no-op on measuring clocks; on manual clocks
/// (`lbcomm::ClockMode::Manual`) the flops alone set the time, times the rank's
/// slowdown, so that tests of layouts and re-planning do not depend on the
/// machine's load. 0.1 ns: 10 Gflop/s.
pub const CHARGE_PER_FLOP: f64 = 1e-10;

/// Parameters of the rate measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RateParams {
    /// Rows `m` of one update `C (m×B) -= A (m×B) · U (B×B)`. Default: 256.
    pub rows: usize,
    /// Updates of the first (fixed-length) section, after 2 untimed warm-up
    /// updates. Default: 16.
    pub first_ops: f64,
    /// Updates the fastest process is given for every later (flexible) section,
    /// which then runs for the time this takes it. Default: 16.
    pub ops: f64,
    /// Both counts are raised so that a section lasts at least about this many
    /// seconds (sized from the warm-up updates), so that emulated slowdowns
    /// (which sleep in quanta of 1 ms) and timer resolution do not bias the
    /// rates. Default: 0.03.
    pub min_seconds: f64,
}

impl Default for RateParams {
    fn default() -> Self {
        Self {
            rows: 256,
            first_ops: 16.0,
            ops: 16.0,
            min_seconds: 0.03,
        }
    }
}

/// One set of gathered rates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateSample {
    /// Updates per second, per rank (rank order).
    pub rates: Vec<f64>,
    /// Cycle-times `1 / rate`, per rank, in seconds per update.
    pub times: Vec<f64>,
    /// The same rates in GFLOP/s (`2 m B²` flops per update).
    pub gflops: Vec<f64>,
}

/// Scratch and state of repeated rate measurements on one communicator.
pub struct RateMeter<'c, C: Comm + ?Sized> {
    lbs: Lbs<'c, C>,
    params: RateParams,
    block: usize,
    a: Vec<f64>,
    u: Vec<f64>,
    c: Vec<f64>,
    par: faer::Par,
}

impl<'c, C: Comm + ?Sized> RateMeter<'c, C> {
    /// A meter for updates of width `block`.
    ///
    /// # Errors
    /// [`DenseError::BadParam`] for `rows == 0`, `block == 0` or non-positive
    /// op counts; [`DenseError::Lbs`] from [`LbsConfig::validate`].
    pub fn new(
        comm: &'c C,
        params: &RateParams,
        block: usize,
        par: faer::Par,
    ) -> Result<Self, DenseError> {
        if params.rows == 0 || block == 0 {
            return Err(DenseError::BadParam {
                what: "rate rows x block",
                value: format!("{} x {}", params.rows, block),
                reason: "must be at least 1 x 1",
            });
        }
        if !(params.min_seconds.is_finite() && params.min_seconds >= 0.0) {
            return Err(DenseError::BadParam {
                what: "min_seconds",
                value: params.min_seconds.to_string(),
                reason: "must be finite and >= 0",
            });
        }
        for (what, v) in [("first_ops", params.first_ops), ("ops", params.ops)] {
            if !(v.is_finite() && v >= 1.0) {
                return Err(DenseError::BadParam {
                    what,
                    value: v.to_string(),
                    reason: "must be finite and >= 1",
                });
            }
        }
        let m = params.rows;
        let fill = |len: usize, s: u64| {
            (0..len)
                .map(|i| super::random_entry(s, i, 0) * 0.01)
                .collect::<Vec<_>>()
        };
        let mut meter = Self {
            lbs: Lbs::new(comm),
            params: params.clone(),
            block,
            a: fill(m * block, 1),
            u: fill(block * block, 2),
            c: fill(m * block, 3),
            par,
        };
        // Warm-up (first touch of the buffers, faer's dispatch), then size the
        // sections from two timed updates.
        meter.update();
        let t = std::time::Instant::now();
        meter.update();
        meter.update();
        let per = (t.elapsed().as_secs_f64() / 2.0).max(1e-9);
        let floor = (params.min_seconds / per).ceil();
        meter.params.first_ops = params.first_ops.max(floor);
        meter.params.ops = params.ops.max(floor);
        meter.lbs = Lbs::with_config(
            comm,
            LbsConfig {
                first_section_ops: meter.params.first_ops,
                ..LbsConfig::default()
            },
        )?;
        Ok(meter)
    }

    fn update(&mut self) {
        let (m, b) = (self.params.rows, self.block);
        let dst = MatMut::from_column_major_slice_mut(&mut self.c, m, b);
        let lhs = MatRef::from_column_major_slice(&self.a, m, b);
        let rhs = MatRef::from_column_major_slice(&self.u, b, b);
        matmul(dst, Accum::Add, lhs, rhs, -1.0, self.par);
        let flops = 2.0 * m as f64 * (b * b) as f64;
        self.lbs.comm().charge(CHARGE_PER_FLOP * flops);
    }

    /// Runs one flexible section of updates on every rank and gathers the rates
    /// (collective). The first call runs `first_ops` updates everywhere; later
    /// calls run for the time `lb_decide(ops, Fastest)` gives (`003` §5).
    ///
    /// # Errors
    /// [`DenseError::Lbs`] if the section or `decide` fails (e.g. a clock that
    /// did not move).
    pub fn measure(&mut self) -> Result<RateSample, DenseError> {
        self.lbs.section_start()?;
        let mut ops = 0.0;
        while self.lbs.should_continue(ops, 1.0)? {
            self.update();
            ops += 1.0;
        }
        // At least one update, so that the rate is defined even if T was tiny.
        if ops == 0.0 {
            self.update();
            ops = 1.0;
        }
        self.lbs.section_end(ops)?;
        self.lbs.decide(self.params.ops, Method::Fastest)?;
        let sorted = self.lbs.rates()?;
        let index = self.lbs.index()?;
        let mut rates = vec![0.0; sorted.len()];
        for (&r, &i) in sorted.iter().zip(index) {
            rates[i] = r;
        }
        let flops = 2.0 * self.params.rows as f64 * (self.block * self.block) as f64;
        Ok(RateSample {
            times: rates.iter().map(|r| 1.0 / r).collect(),
            gflops: rates.iter().map(|r| r * flops * 1e-9).collect(),
            rates,
        })
    }
}

/// Measures the cycle-times of every rank once (collective): one [`RateMeter`]
/// section of `params.first_ops` updates of width `block`.
///
/// # Errors
/// As [`RateMeter::new`] and [`RateMeter::measure`].
pub fn measure_cycle_times<C: Comm + ?Sized>(
    comm: &C,
    params: &RateParams,
    block: usize,
    par: faer::Par,
) -> Result<RateSample, DenseError> {
    RateMeter::new(comm, params, block, par)?.measure()
}
