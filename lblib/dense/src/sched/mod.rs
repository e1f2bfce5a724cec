//! Scheduling dense linear algebra from processor speeds (Barbosa et al.; Beaumont et al.).
//!
//! | paper | item |
//! |---|---|
//! | `004` §5.1 synthetic BLR densities, §3.5 kernel weights | [`tiles::BlrParams`], [`tiles::blr_densities`], [`tiles::tile_weights`] |
//! | `004` §4.1 2-D block cyclic (BC) | [`tiles::block_cyclic`] |
//! | `004` §4.2 Extended block cyclic (BCE, Algorithm 1 LPT) | [`tiles::block_cyclic_extended`], [`tiles::lpt`] |
//! | `004` §4.3 Random Subsets (Algorithms 2–3, eqs. 1–6) | [`tiles::random_subsets`], [`tiles::subsets_generation`], [`tiles::prob_intersection_at_least`] |
//! | `004` §3.5 metrics 𝔅(M), 𝔇(M); §6.1 dispersion | [`tiles::load_bound`], [`tiles::simulate`], [`tiles::dispersion`], [`tiles::evaluate`] |
//! | `004` §3.3 Figure 1 tiled LU task graph | [`tiles::TileDag`] |
//! | `002` §2.2.1 cost model, Algorithms 1–3, eq. 3 | [`malleable`] |
//! | real tiled LU on threads, compared with 𝔇(M) | [`taskgraph`] |
//! | per-thread GEMM rates with [`lblib::Lbs`] | [`measure`] |

pub mod malleable;
pub mod measure;
pub mod taskgraph;
pub mod tiles;

/// Errors of the schedulers: every bad input is reported with what is known.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SchedError {
    /// A parameter is out of its meaningful range.
    #[error("{what} = {got} is invalid: {why}")]
    BadParam {
        /// Parameter name.
        what: &'static str,
        /// Value received, printed.
        got: String,
        /// What is expected.
        why: &'static str,
    },
    /// A processor speed is not a positive finite number.
    #[error("speed[{index}] = {value} is not a positive finite number")]
    BadSpeed {
        /// Position of the speed.
        index: usize,
        /// The value.
        value: f64,
    },
    /// Random Subsets (`004` Algorithm 3) found no compatible column subset.
    #[error(
        "random subsets: no compatible column subset after {tries} samples \
         (P = {p}, n_P = {n_p}, Q = {q}, K = {k}; P(|R∩C| >= K)^Q = {accept:.3e}, eq. 1)"
    )]
    SubsetsNotFound {
        /// Processors.
        p: usize,
        /// Subset size.
        n_p: usize,
        /// Subsets per family.
        q: usize,
        /// Minimum intersection.
        k: usize,
        /// Samples drawn for one column subset.
        tries: usize,
        /// Acceptance probability of eq. 1.
        accept: f64,
    },
}

/// Checks that every speed is positive and finite.
///
/// # Errors
/// [`SchedError::BadSpeed`] for the first bad one, [`SchedError::BadParam`] if empty.
pub fn check_speeds(speeds: &[f64]) -> Result<(), SchedError> {
    if speeds.is_empty() {
        return Err(SchedError::BadParam {
            what: "processors",
            got: "0".into(),
            why: "at least one processor is needed",
        });
    }
    for (index, &value) in speeds.iter().enumerate() {
        if !(value.is_finite() && value > 0.0) {
            return Err(SchedError::BadSpeed { index, value });
        }
    }
    Ok(())
}

/// A small deterministic generator (SplitMix64) so that every experiment is
/// reproducible from its seed without an extra dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// Generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform integer in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }

    /// Normal deviate N(mean, sd²) (Box–Muller).
    pub fn normal(&mut self, mean: f64, sd: f64) -> f64 {
        let u1 = 1.0 - self.uniform();
        let u2 = self.uniform();
        mean + sd * (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    /// `k` distinct values of `0..n`, sampled without replacement (partial Fisher–Yates).
    pub fn subset(&mut self, n: usize, k: usize) -> Vec<usize> {
        let mut v: Vec<usize> = (0..n).collect();
        let k = k.min(n);
        for i in 0..k {
            let j = i + self.below(n - i);
            v.swap(i, j);
        }
        v.truncate(k);
        v
    }
}
