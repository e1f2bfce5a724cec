//! Processor speeds measured by lblib: every rank of a [`ThreadComm`] times a
//! fixed number of faer GEMM tile updates inside an [`Lbs`] section (the
//! McCombs et al. `lb_section_start/end` pair), and the rates are all-gathered.
//!
//! The planners of `002` ([`super::malleable`]) and `004` ([`super::tiles`]) take
//! these rates (Mflop/s; for `004`, relative speeds = rate / max rate) as well as
//! given ones.

use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, Par};
use serde::{Deserialize, Serialize};

use super::{Rng, SchedError};
use lbcomm::{ClockMode, Comm, ThreadComm, ThreadConfig};
use lblib::Lbs;

/// Parameters of [`measure_gemm_rates`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MeasureParams {
    /// One slowdown factor per rank (the number of ranks is its length); a factor
    /// f > 1 emulates a processor f times slower (the ThreadComm clock). Default `[1, 1]`.
    pub slowdowns: Vec<f64>,
    /// Tile order b of the GEMM updates C −= A·B. Default 128.
    pub tile: usize,
    /// Updates per rank in the timed section. Default 8.
    pub updates: usize,
    /// GEMMs per update on each rank (empty: 1 everywhere): the slowdown
    /// emulation of [`super::taskgraph`], so that measured speeds include it.
    /// Default empty.
    pub repeats: Vec<usize>,
    /// Clock: [`ClockMode::Virtual`] (thread CPU time × slowdown, robust on a
    /// shared machine), [`ClockMode::Real`] (wall clock, slowdown by sleeping)
    /// or [`ClockMode::Manual`] (each update's flops charged at
    /// [`crate::rates::CHARGE_PER_FLOP`], times the slowdown: deterministic).
    /// Default virtual.
    pub clock: ClockMode,
}

impl Default for MeasureParams {
    fn default() -> Self {
        Self {
            slowdowns: vec![1.0, 1.0],
            tile: 128,
            updates: 8,
            repeats: Vec::new(),
            clock: ClockMode::Virtual,
        }
    }
}

/// Measures the GEMM rate of every rank (Mflop/s, rank order): one warm-up update,
/// then `updates` b×b×b updates (2b³ flop each, each computed `repeats[rank]` times) timed by [`Lbs::section_start`] /
/// [`Lbs::section_end`], then an all-gather of the rates.
///
/// # Errors
/// [`SchedError::BadParam`] for no rank, a bad slowdown, `tile == 0` or
/// `updates == 0`, or if a rank's clock did not move.
pub fn measure_gemm_rates(p: &MeasureParams) -> Result<Vec<f64>, SchedError> {
    if p.slowdowns.is_empty()
        || p.tile == 0
        || p.updates == 0
        || (!p.repeats.is_empty() && p.repeats.len() != p.slowdowns.len())
        || p.repeats.contains(&0)
    {
        return Err(SchedError::BadParam {
            what: "measure",
            got: format!(
                "{} ranks, tile {}, {} updates",
                p.slowdowns.len(),
                p.tile,
                p.updates
            ),
            why: "need >= 1 rank, tile >= 1, updates >= 1, one repeat count >= 1 per rank",
        });
    }
    for (index, &value) in p.slowdowns.iter().enumerate() {
        if !(value.is_finite() && value > 0.0) {
            return Err(SchedError::BadSpeed { index, value });
        }
    }
    let cfg = ThreadConfig::with_slowdowns(&p.slowdowns, p.clock);
    let b = p.tile;
    let res = ThreadComm::run_with(cfg, |comm| {
        let mut rng = Rng::new(comm.rank() as u64 + 7);
        let a = Mat::<f64>::from_fn(b, b, |_, _| rng.uniform() - 0.5);
        let bm = Mat::<f64>::from_fn(b, b, |_, _| rng.uniform() - 0.5);
        let mut c = Mat::<f64>::zeros(b, b);
        // one tile update C −= A·B (the first one warms the caches), its flops
        // charged to a manual clock
        let flops = 2.0 * (b as f64).powi(3);
        let update = |c: &mut Mat<f64>| {
            matmul(
                c.as_mut(),
                Accum::Add,
                a.as_ref(),
                bm.as_ref(),
                -1.0,
                Par::Seq,
            );
            comm.charge(crate::rates::CHARGE_PER_FLOP * flops);
        };
        update(&mut c);
        let reps = p.repeats.get(comm.rank()).copied().unwrap_or(1);
        let mut lbs = Lbs::new(&comm);
        let rate = lbs.section_start().and_then(|_| {
            for _ in 0..p.updates * reps {
                update(&mut c);
            }
            std::hint::black_box(&c);
            lbs.section_end(p.updates as f64 * flops)
        });
        let local = rate.unwrap_or(f64::NAN);
        let mut all = vec![0.0; comm.size()];
        comm.all_gather(&[local], &mut all);
        all
    });
    let rates: Vec<f64> = res[0].iter().map(|r| r / 1e6).collect();
    if let Some((index, &value)) = rates
        .iter()
        .enumerate()
        .find(|(_, r)| !(r.is_finite() && **r > 0.0))
    {
        return Err(SchedError::BadSpeed { index, value });
    }
    Ok(rates)
}

/// Relative speeds (rate / fastest rate) of measured rates, for `004`.
pub fn relative_speeds(rates: &[f64]) -> Vec<f64> {
    let m = rates.iter().copied().fold(0.0, f64::max);
    rates.iter().map(|r| r / m).collect()
}
