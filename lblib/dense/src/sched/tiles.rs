//! 2-D tile allocation for BLR factorizations (Beaumont, Eyraud-Dubois,
//! Verite, "2D Static Resource Allocation for Compressed Linear Algebra and
//! Communication Constraints").
//!
//! * §5.1 the synthetic BLR tile densities ([`blr_densities`]) and §3.5 the kernel
//!   weights C_GETRF = 1, C_TRSM = 3, C_GEMM = 6 ([`KernelCosts`], [`tile_weights`]);
//! * §4.1 BC ([`block_cyclic`]), §4.2 BCE with LPT ([`block_cyclic_extended`],
//!   Algorithm 1 [`lpt`]), §4.3 Random Subsets ([`random_subsets`], Algorithms 2–3,
//!   eqs. 1–6);
//! * §3.5 the metrics 𝔅(M) ([`load_bound`]), 𝔇(M) ([`simulate`], event driven,
//!   priorities = longest path to the end, with or without preemption) and §6.1 the
//!   dispersion ([`dispersion`]).
//!
//! Processors are 0-based; tiles are row-major `i * N + j`, 0-based (the paper
//! numbers both from 1). The paper's nodes are identical; here every processor
//! also has a relative speed (1 = nominal), so measured rates can drive the
//! allocations: a task of weight `w` takes `w / speed` on it, LPT picks the
//! processor that would finish earliest, and the "ideal" load is
//! `Σ W / Σ speed`. With equal speeds everything reduces to the paper.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use serde::{Deserialize, Serialize};

use super::{check_speeds, Rng, SchedError};

/// The kernel (paper's "algorithm") whose tiles are allocated (`004` §3.2, §3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// Right-looking tiled LU (GETRF, TRSM, GEMM), §3.3.
    Lu,
    /// Matrix product C = A·Aᵀ by N stages of tile GEMMs, §3.2.
    Mm,
}

/// Kind of a tile task (`004` §3.5 `typ(τ)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kernel {
    /// LU of a diagonal tile.
    Getrf,
    /// Triangular solve of a panel tile.
    Trsm,
    /// Update of a trailing tile.
    Gemm,
}

/// Execution time of each kernel on a full-rank tile (`004` §5.1). Default:
/// the paper's C_GETRF = 1, C_TRSM = 3, C_GEMM = 6.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct KernelCosts {
    /// C_GETRF.
    pub getrf: f64,
    /// C_TRSM.
    pub trsm: f64,
    /// C_GEMM.
    pub gemm: f64,
}

impl Default for KernelCosts {
    fn default() -> Self {
        Self {
            getrf: 1.0,
            trsm: 3.0,
            gemm: 6.0,
        }
    }
}

impl KernelCosts {
    /// Cost of `k` on a full-rank tile.
    pub fn of(&self, k: Kernel) -> f64 {
        match k {
            Kernel::Getrf => self.getrf,
            Kernel::Trsm => self.trsm,
            Kernel::Gemm => self.gemm,
        }
    }
}

/// Parameters of the synthetic BLR matrix of `004` §5.1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BlrParams {
    /// N, the number of tile rows and columns. Default 30.
    pub n: usize,
    /// δ, the decay of the density away from the diagonal. Default 8 (Figures 4, 5).
    pub delta: f64,
    /// Standard deviation of the noise γ. The paper writes γ ~ N(0, 1/20) and
    /// leaves open whether 1/20 is the variance or the standard deviation; we
    /// take it as the standard deviation. Default 0.05.
    pub noise_sd: f64,
    /// Whether θ ~ N(√N, √N/2) random off-diagonal tiles are full rank
    /// (the second parameter read as a standard deviation). Default true.
    pub random_full_rank: bool,
    /// Seed of the generator. Default 1.
    pub seed: u64,
}

impl Default for BlrParams {
    fn default() -> Self {
        Self {
            n: 30,
            delta: 8.0,
            noise_sd: 0.05,
            random_full_rank: true,
            seed: 1,
        }
    }
}

/// Synthetic BLR tile densities d_{i,j} ∈ [0, 1] (`004` §5.1), row-major N×N:
/// d = clamp(exp(−δ/2·((i−j)/(N−1))²) + γ, 0, 1), γ ~ N(0, noise_sd²); diagonal
/// tiles and θ random tiles have d = 1.
///
/// # Errors
/// [`SchedError::BadParam`] if `n == 0`, `delta` is negative or not finite, or
/// `noise_sd` is negative or not finite.
pub fn blr_densities(p: &BlrParams) -> Result<Vec<f64>, SchedError> {
    if p.n == 0 {
        return Err(SchedError::BadParam {
            what: "n",
            got: "0".into(),
            why: "the matrix needs at least one tile",
        });
    }
    if !(p.delta.is_finite() && p.delta >= 0.0) {
        return Err(SchedError::BadParam {
            what: "delta",
            got: p.delta.to_string(),
            why: "must be finite and >= 0",
        });
    }
    if !(p.noise_sd.is_finite() && p.noise_sd >= 0.0) {
        return Err(SchedError::BadParam {
            what: "noise_sd",
            got: p.noise_sd.to_string(),
            why: "must be finite and >= 0",
        });
    }
    let n = p.n;
    let mut rng = Rng::new(p.seed);
    let denom = if n > 1 { (n - 1) as f64 } else { 1.0 };
    let mut d = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            let x = (i as f64 - j as f64) / denom;
            let v = (-p.delta / 2.0 * x * x).exp();
            let g = rng.normal(0.0, p.noise_sd);
            d[i * n + j] = if i == j { 1.0 } else { (v + g).clamp(0.0, 1.0) };
        }
    }
    if p.random_full_rank && n > 1 {
        let sq = (n as f64).sqrt();
        let theta = rng.normal(sq, sq / 2.0).round().max(0.0) as usize;
        let theta = theta.min(n * n - n);
        let mut placed = 0;
        while placed < theta {
            let t = rng.below(n * n);
            if t / n != t % n && d[t] < 1.0 {
                d[t] = 1.0;
                placed += 1;
            } else if t / n != t % n {
                // Already full rank (noise may clamp to 1): count it, as the paper's
                // θ tiles are "assumed to be full rank".
                placed += 1;
            }
        }
    }
    Ok(d)
}

/// Number of tasks of each kernel that modify tile (i, j) (0-based) for `op`:
/// `(getrf, trsm, gemm)`. LU: tile (i, j) receives min(i, j) GEMM updates, then
/// one GETRF (i = j) or TRSM (i ≠ j); MM: N GEMMs.
pub fn tile_task_counts(op: Op, n: usize, i: usize, j: usize) -> (usize, usize, usize) {
    match op {
        Op::Mm => (0, 0, n),
        Op::Lu => {
            let g = i.min(j);
            if i == j {
                (1, 0, g)
            } else {
                (0, 1, g)
            }
        }
    }
}

/// Cumulated execution times W_{i,j} = Σ_k d_{i,j}·C_typ(τ^k_{i,j}) (`004` §3.5),
/// row-major N×N, for densities `d` (length N²).
pub fn tile_weights(d: &[f64], n: usize, op: Op, costs: &KernelCosts) -> Vec<f64> {
    let mut w = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            let (a, b, c) = tile_task_counts(op, n, i, j);
            w[i * n + j] = d[i * n + j]
                * (a as f64 * costs.getrf + b as f64 * costs.trsm + c as f64 * costs.gemm);
        }
    }
    w
}

/// An allocation M of the N×N tiles to P processors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mapping {
    /// N.
    pub n: usize,
    /// P.
    pub p: usize,
    /// Owner of each tile, row-major.
    pub owner: Vec<usize>,
    /// The repeated pattern G (BC, BCE): `(r, c, G row-major)`.
    pub grid: Option<(usize, usize, Vec<usize>)>,
}

impl Mapping {
    /// Owner of tile (i, j).
    pub fn at(&self, i: usize, j: usize) -> usize {
        self.owner[i * self.n + j]
    }

    /// Largest number of distinct processors on any tile row or column (the
    /// quantity that `004` §3.4 bounds by n_P).
    pub fn max_distinct_per_line(&self) -> usize {
        let n = self.n;
        let mut best = 0;
        let mut seen = vec![usize::MAX; self.p];
        let mut stamp = 0;
        for line in 0..2 * n {
            stamp += 1;
            let mut cnt = 0;
            for t in 0..n {
                let o = if line < n {
                    self.at(line, t)
                } else {
                    self.at(t, line - n)
                };
                if seen[o] != stamp {
                    seen[o] = stamp;
                    cnt += 1;
                }
            }
            best = best.max(cnt);
        }
        best
    }

    /// Load W^M(p) of every processor: the sum of the weights of its tiles.
    pub fn loads(&self, w: &[f64]) -> Vec<f64> {
        let mut l = vec![0.0; self.p];
        for (t, &o) in self.owner.iter().enumerate() {
            l[o] += w[t];
        }
        l
    }
}

/// n_P = ⌈α·√P⌉, the limit on distinct processors per row and column (`004` §3.5).
pub fn n_p(p: usize, alpha: f64) -> usize {
    ((alpha * (p as f64).sqrt()) - 1e-9).ceil().max(1.0) as usize
}

fn check_alpha(alpha: f64) -> Result<(), SchedError> {
    if !(alpha.is_finite() && alpha >= 1.0) {
        return Err(SchedError::BadParam {
            what: "alpha",
            got: alpha.to_string(),
            why: "must be finite and >= 1 (004 §3.4)",
        });
    }
    Ok(())
}

fn check_n(n: usize, w: &[f64]) -> Result<(), SchedError> {
    if n == 0 || w.len() != n * n {
        return Err(SchedError::BadParam {
            what: "weights",
            got: format!("{} entries for N = {n}", w.len()),
            why: "need N >= 1 and N² weights",
        });
    }
    Ok(())
}

fn pattern_mapping(n: usize, p: usize, r: usize, c: usize, g: Vec<usize>) -> Mapping {
    let mut owner = vec![0; n * n];
    for i in 0..n {
        for j in 0..n {
            owner[i * n + j] = g[(i % r) * c + (j % c)];
        }
    }
    Mapping {
        n,
        p,
        owner,
        grid: Some((r, c, g)),
    }
}

/// 2-D block cyclic (BC, `004` §4.1): c is the largest integer with P ≥ c(c−1),
/// r = c − 1 (c = 1, r = 1 when P = 1), G_{i,j} = i·c + j, M_{i,j} = G_{i mod r, j mod c}.
/// Processors beyond r·c stay idle, as in the paper.
///
/// # Errors
/// [`SchedError::BadParam`] if `n` or `p` is 0.
pub fn block_cyclic(n: usize, p: usize) -> Result<Mapping, SchedError> {
    if n == 0 || p == 0 {
        return Err(SchedError::BadParam {
            what: "n, p",
            got: format!("{n}, {p}"),
            why: "both must be >= 1",
        });
    }
    let (r, c) = bc_grid(p);
    let g = (0..r * c).collect();
    Ok(pattern_mapping(n, p, r, c, g))
}

/// The BC grid shape (r, c) = (c − 1, c), c the largest with c(c − 1) ≤ P.
pub fn bc_grid(p: usize) -> (usize, usize) {
    if p < 2 {
        return (1, 1);
    }
    let mut c = 2;
    while (c + 1) * c <= p {
        c += 1;
    }
    (c - 1, c)
}

/// Aggregated grid loads W̄ of an r×c pattern (`004` §4.1): W̄_{a,b} is the
/// sum of W_{i,j} over i ≡ a (mod r), j ≡ b (mod c).
pub fn aggregated_grid(w: &[f64], n: usize, r: usize, c: usize) -> Vec<f64> {
    let mut g = vec![0.0; r * c];
    for i in 0..n {
        for j in 0..n {
            g[(i % r) * c + (j % c)] += w[i * n + j];
        }
    }
    g
}

/// Largest Processing Time greedy (`004` Algorithm 1), generalised to speeds:
/// items in decreasing weight order go to the processor that finishes them
/// earliest, `argmin (L[p] + w) / s[p]` (with equal speeds: the least loaded;
/// ties to the lowest index). Returns the owner of each item and the loads L.
pub fn lpt(items: &[f64], speeds: &[f64]) -> (Vec<usize>, Vec<f64>) {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by(|&a, &b| items[b].total_cmp(&items[a]).then(a.cmp(&b)));
    let mut load = vec![0.0; speeds.len()];
    let mut owner = vec![0; items.len()];
    for t in order {
        let w = items[t];
        let mut best = 0;
        let mut best_t = f64::INFINITY;
        for (p, &s) in speeds.iter().enumerate() {
            let f = (load[p] + w) / s;
            if f < best_t {
                best_t = f;
                best = p;
            }
        }
        owner[t] = best;
        load[best] += w;
    }
    (owner, load)
}

/// How BCE chooses its r×c pattern (`004` §4.2 step 1, which the paper leaves open).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum BceGrid {
    /// Every r, c ≤ n_P with r·c ≥ P; keep the one with the smallest 𝔅(M)
    /// (ties: fewer grid positions, then smaller r). Default.
    #[default]
    Best,
    /// BC's shape at the limit: (n_P − 1) × n_P, or n_P × n_P when that is too small for P.
    Largest,
    /// A given r × c.
    Fixed(usize, usize),
}

/// Extended 2-D block cyclic (BCE, `004` §4.2): an r×c pattern with r, c ≤ n_P =
/// ⌈α√P⌉ whose positions (the α²P "virtual processors") are packed onto the P
/// processors by LPT (Algorithm 1).
///
/// # Errors
/// [`SchedError::BadParam`] for α < 1, a weight matrix that is not N², a fixed grid
/// with fewer than P positions or over n_P per line; [`SchedError::BadSpeed`].
pub fn block_cyclic_extended(
    w: &[f64],
    n: usize,
    speeds: &[f64],
    alpha: f64,
    grid: BceGrid,
) -> Result<Mapping, SchedError> {
    check_n(n, w)?;
    check_speeds(speeds)?;
    check_alpha(alpha)?;
    let p = speeds.len();
    let np = n_p(p, alpha);
    let candidates: Vec<(usize, usize)> = match grid {
        BceGrid::Fixed(r, c) => {
            if r == 0 || c == 0 || r * c < p || r > np || c > np {
                return Err(SchedError::BadParam {
                    what: "bce grid",
                    got: format!("{r}x{c}"),
                    why: "need r, c <= n_P = ceil(alpha sqrt P) and r*c >= P",
                });
            }
            vec![(r, c)]
        }
        BceGrid::Largest => {
            let c = np;
            let r = if c > 1 && (c - 1) * c >= p { c - 1 } else { c };
            if r * c < p {
                vec![(c, c)]
            } else {
                vec![(r, c)]
            }
        }
        BceGrid::Best => {
            let mut v = Vec::new();
            for r in 1..=np {
                for c in 1..=np {
                    if r * c >= p {
                        v.push((r, c));
                    }
                }
            }
            v
        }
    };
    let mut best: Option<(f64, usize, Mapping)> = None;
    for (r, c) in candidates {
        let wbar = aggregated_grid(w, n, r, c);
        let (g, load) = lpt(&wbar, speeds);
        let b = load
            .iter()
            .zip(speeds)
            .map(|(l, s)| l / s)
            .fold(0.0, f64::max);
        let better = match &best {
            None => true,
            Some((bb, pos, m)) => {
                let (br, _, _) = m.grid.as_ref().expect("pattern");
                b < bb * (1.0 - 1e-12) || (b <= bb * (1.0 + 1e-12) && (r * c, r) < (*pos, *br))
            }
        };
        if better {
            best = Some((b, r * c, pattern_mapping(n, p, r, c, g)));
        }
    }
    best.map(|(_, _, m)| m).ok_or(SchedError::BadParam {
        what: "alpha",
        got: alpha.to_string(),
        why: "no r x c grid with r, c <= n_P holds P positions",
    })
}

/// Parameters of Random Subsets (`004` §4.3, the values of §5 by default).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RsParams {
    /// β, the mean number of occurrences of each processor in a family (eq. 5:
    /// Q = ⌈βP/n_P⌉). Default 10.
    pub beta: f64,
    /// K, the minimum intersection of a row and a column subset. Default 1.
    pub k: usize,
    /// Number of independent families (𝓡, 𝓒); the one with the smallest 𝔅 is
    /// kept. Default 10.
    pub families: usize,
    /// η, the smallest accepted probability that a sampled column subset is
    /// compatible (eq. 4). When eq. 5's Q would make it smaller, Q is lowered to
    /// eq. 4's bound (the paper leaves this case open). Default 1e-3.
    pub eta: f64,
    /// Samples allowed for one column subset before giving up. Default 1,000,000.
    pub max_tries: usize,
    /// Seed. Default 1.
    pub seed: u64,
}

impl Default for RsParams {
    fn default() -> Self {
        Self {
            beta: 10.0,
            k: 1,
            families: 10,
            eta: 1e-3,
            max_tries: 1_000_000,
            seed: 1,
        }
    }
}

fn ln_choose(n: usize, k: usize) -> f64 {
    if k > n {
        return f64::NEG_INFINITY;
    }
    let k = k.min(n - k);
    (0..k).map(|t| ((n - t) as f64 / (t + 1) as f64).ln()).sum()
}

/// P(|R ∩ C| ≥ K) for two independent uniformly drawn n_P-subsets of P
/// processors (`004` eqs. 2–3: the hypergeometric law).
pub fn prob_intersection_at_least(p: usize, np: usize, k: usize) -> f64 {
    let total = ln_choose(p, np);
    let below: f64 = (0..k.min(np + 1))
        .map(|j| {
            let l = ln_choose(np, j) + ln_choose(p - np, np - j) - total;
            if l.is_finite() {
                l.exp()
            } else {
                0.0
            }
        })
        .sum();
    (1.0 - below).clamp(0.0, 1.0)
}

/// The number of subsets Q per family: eq. 5 (Q ≥ βP/n_P), lowered to eq. 4's
/// bound ⌊ln η / ln P(|R∩C| ≥ K)⌋ when that is smaller (never below 1).
pub fn subsets_count(p: usize, np: usize, params: &RsParams) -> usize {
    let q5 = ((params.beta * p as f64) / np as f64).ceil().max(1.0) as usize;
    let pr = prob_intersection_at_least(p, np, params.k);
    if pr >= 1.0 {
        return q5;
    }
    if pr <= 0.0 {
        return 1;
    }
    let q4 = (params.eta.ln() / pr.ln()).floor().max(1.0) as usize;
    q5.min(q4)
}

/// Bit set over processors.
#[derive(Debug, Clone, PartialEq)]
struct Bits(Vec<u64>);

impl Bits {
    fn new(p: usize) -> Self {
        Bits(vec![0; p.div_ceil(64)])
    }
    fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
    fn has(&self, i: usize) -> bool {
        self.0[i / 64] >> (i % 64) & 1 == 1
    }
    fn and_count(&self, o: &Bits) -> usize {
        self.0
            .iter()
            .zip(&o.0)
            .map(|(a, b)| (a & b).count_ones() as usize)
            .sum()
    }
    fn or_assign(&mut self, o: &Bits) {
        for (a, b) in self.0.iter_mut().zip(&o.0) {
            *a |= b;
        }
    }
}

/// Row and column subset families (`004` Algorithm 3).
#[derive(Debug, Clone, PartialEq)]
pub struct SubsetFamilies {
    /// Row subsets 𝓡.
    pub rows: Vec<Vec<usize>>,
    /// Column subsets 𝓒, each meeting every row subset in ≥ K processors.
    pub cols: Vec<Vec<usize>>,
}

/// Subsets generation (`004` Algorithm 3): Q random n_P-subsets for the rows,
/// then column subsets sampled until each meets every row subset in ≥ K processors.
///
/// # Errors
/// [`SchedError::SubsetsNotFound`] after `max_tries` failed samples for one column.
pub fn subsets_generation(
    p: usize,
    np: usize,
    q: usize,
    k: usize,
    max_tries: usize,
    rng: &mut Rng,
) -> Result<SubsetFamilies, SchedError> {
    let np = np.min(p);
    let rows: Vec<Vec<usize>> = (0..q).map(|_| rng.subset(p, np)).collect();
    let row_bits: Vec<Bits> = rows
        .iter()
        .map(|r| {
            let mut b = Bits::new(p);
            r.iter().for_each(|&x| b.set(x));
            b
        })
        .collect();
    let mut cols = Vec::with_capacity(q);
    while cols.len() < q {
        let mut tries = 0;
        loop {
            tries += 1;
            let c = rng.subset(p, np);
            let mut cb = Bits::new(p);
            c.iter().for_each(|&x| cb.set(x));
            if row_bits.iter().all(|r| r.and_count(&cb) >= k) {
                cols.push(c);
                break;
            }
            if tries >= max_tries {
                return Err(SchedError::SubsetsNotFound {
                    p,
                    n_p: np,
                    q,
                    k,
                    tries,
                    accept: prob_intersection_at_least(p, np, k).powi(q as i32),
                });
            }
        }
    }
    Ok(SubsetFamilies { rows, cols })
}

/// Random-subsets-direct greedy (`004` Algorithm 2) for one family: tiles in
/// decreasing weight order go to the earliest-finishing processor allowed by a
/// still-usable row subset and a still-usable column subset. Because every row
/// subset meets every column subset, a processor is always available (no dead
/// end). Lines 22–25 (immediate allocation of tiles left with a single usable
/// processor) are not needed for feasibility and are not done: such a tile gets
/// that processor anyway when its turn comes.
pub fn random_subsets_direct(w: &[f64], n: usize, speeds: &[f64], fam: &SubsetFamilies) -> Mapping {
    let p = speeds.len();
    let to_bits = |s: &Vec<usize>| {
        let mut b = Bits::new(p);
        s.iter().for_each(|&x| b.set(x));
        b
    };
    let rb: Vec<Bits> = fam.rows.iter().map(to_bits).collect();
    let cb: Vec<Bits> = fam.cols.iter().map(to_bits).collect();
    let union = |sets: &[Bits], usable: &[bool]| {
        let mut u = Bits::new(p);
        for (s, &ok) in sets.iter().zip(usable) {
            if ok {
                u.or_assign(s);
            }
        }
        u
    };
    let mut row_ok = vec![vec![true; rb.len()]; n];
    let mut col_ok = vec![vec![true; cb.len()]; n];
    let all_r = union(&rb, &row_ok[0]);
    let all_c = union(&cb, &col_ok[0]);
    let mut row_u = vec![all_r; n];
    let mut col_u = vec![all_c; n];
    let mut order: Vec<usize> = (0..n * n).collect();
    order.sort_by(|&a, &b| w[b].total_cmp(&w[a]).then(a.cmp(&b)));
    let mut load = vec![0.0; p];
    let mut owner = vec![0; n * n];
    for t in order {
        let (i, j) = (t / n, t % n);
        let mut best = usize::MAX;
        let mut best_t = f64::INFINITY;
        for q in 0..p {
            if row_u[i].has(q) && col_u[j].has(q) {
                let f = (load[q] + w[t]) / speeds[q];
                if f < best_t {
                    best_t = f;
                    best = q;
                }
            }
        }
        debug_assert!(best != usize::MAX, "compatible families never dead-end");
        owner[t] = best;
        load[best] += w[t];
        let mut changed = false;
        for (s, ok) in rb.iter().zip(row_ok[i].iter_mut()) {
            if *ok && !s.has(best) {
                *ok = false;
                changed = true;
            }
        }
        if changed {
            row_u[i] = union(&rb, &row_ok[i]);
        }
        changed = false;
        for (s, ok) in cb.iter().zip(col_ok[j].iter_mut()) {
            if *ok && !s.has(best) {
                *ok = false;
                changed = true;
            }
        }
        if changed {
            col_u[j] = union(&cb, &col_ok[j]);
        }
    }
    Mapping {
        n,
        p,
        owner,
        grid: None,
    }
}

/// Random Subsets (RS, `004` §4.3, §5): `families` families of Q = eq. 5 (capped
/// by eq. 4) subsets of n_P = ⌈α√P⌉ processors with K = `params.k`; Algorithm 2
/// on each; the mapping with the smallest 𝔅(M) is kept.
///
/// # Errors
/// [`SchedError::BadParam`] for α < 1, bad weights, `families == 0`, `k == 0`, β ≤ 0,
/// η ∉ (0, 1); [`SchedError::BadSpeed`]; [`SchedError::SubsetsNotFound`].
pub fn random_subsets(
    w: &[f64],
    n: usize,
    speeds: &[f64],
    alpha: f64,
    params: &RsParams,
) -> Result<Mapping, SchedError> {
    check_n(n, w)?;
    check_speeds(speeds)?;
    check_alpha(alpha)?;
    if params.families == 0 || params.k == 0 || !(params.beta.is_finite() && params.beta > 0.0) {
        return Err(SchedError::BadParam {
            what: "rs families/k/beta",
            got: format!("{}/{}/{}", params.families, params.k, params.beta),
            why: "families >= 1, K >= 1 and beta > 0 are needed",
        });
    }
    if !(params.eta > 0.0 && params.eta < 1.0) {
        return Err(SchedError::BadParam {
            what: "eta",
            got: params.eta.to_string(),
            why: "must lie in (0, 1)",
        });
    }
    let p = speeds.len();
    let np = n_p(p, alpha).min(p);
    let q = subsets_count(p, np, params);
    let mut rng = Rng::new(params.seed);
    let mut best: Option<(f64, Mapping)> = None;
    for _ in 0..params.families {
        let fam = subsets_generation(p, np, q, params.k, params.max_tries, &mut rng)?;
        let m = random_subsets_direct(w, n, speeds, &fam);
        let b = load_bound(&m, w, speeds);
        if best.as_ref().is_none_or(|(bb, _)| b < *bb) {
            best = Some((b, m));
        }
    }
    Ok(best.expect("families >= 1").1)
}

/// 𝔅(M) (`004` §3.5): the largest processor load, in time (load / speed).
pub fn load_bound(m: &Mapping, w: &[f64], speeds: &[f64]) -> f64 {
    m.loads(w)
        .iter()
        .zip(speeds)
        .map(|(l, s)| l / s)
        .fold(0.0, f64::max)
}

/// The perfectly balanced load Σ W / Σ speed, the normalisation of `004` Figures 4–5.
pub fn ideal_load(w: &[f64], speeds: &[f64]) -> f64 {
    w.iter().sum::<f64>() / speeds.iter().sum::<f64>()
}

/// Dispersion (`004` §6.1): standard deviation over mean of a set of loads
/// (population standard deviation; 0 for a perfect balance or an empty set).
pub fn dispersion(loads: &[f64]) -> f64 {
    if loads.is_empty() {
        return 0.0;
    }
    let m = loads.iter().sum::<f64>() / loads.len() as f64;
    if m == 0.0 {
        return 0.0;
    }
    let v = loads.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / loads.len() as f64;
    v.sqrt() / m
}

/// One task of a tile DAG: kernel `kind` at stage `k` writes tile (`i`, `j`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TileTask {
    /// Kernel.
    pub kind: Kernel,
    /// Stage (0-based).
    pub k: usize,
    /// Tile row.
    pub i: usize,
    /// Tile column.
    pub j: usize,
}

/// Task graph of a tiled kernel (`004` §3.2, §3.3 and Figure 1), tasks in a
/// topological order (by stage), successors in CSR form.
#[derive(Debug, Clone, PartialEq)]
pub struct TileDag {
    /// N.
    pub n: usize,
    /// The tasks.
    pub tasks: Vec<TileTask>,
    /// Predecessors of each task (the tiles it reads that were last written by
    /// another task, and the previous writer of its own tile).
    pub preds: Vec<Vec<u32>>,
    /// Successors of each task.
    pub succs: Vec<Vec<u32>>,
}

impl TileDag {
    /// The right-looking tiled LU of `004` §3.3: at stage k, GETRF(k,k); TRSM on
    /// (k, j) and (i, k), i, j > k; GEMM on (i, j), i, j > k, reading (i, k) and
    /// (k, j). Dependencies are the data dependencies of Figure 1.
    pub fn lu(n: usize) -> Self {
        let mut b = DagBuilder::new(n);
        for k in 0..n {
            b.push(Kernel::Getrf, k, k, k, &[]);
            for j in k + 1..n {
                b.push(Kernel::Trsm, k, k, j, &[(k, k)]);
            }
            for i in k + 1..n {
                b.push(Kernel::Trsm, k, i, k, &[(k, k)]);
            }
            for i in k + 1..n {
                for j in k + 1..n {
                    b.push(Kernel::Gemm, k, i, j, &[(i, k), (k, j)]);
                }
            }
        }
        b.finish()
    }

    /// The matrix product of `004` §3.2: N stages of C_{i,j} += A_{i,k}·A_{k,j};
    /// the GEMMs of one tile of C form a chain, the others are independent.
    pub fn mm(n: usize) -> Self {
        let mut b = DagBuilder::new(n);
        for k in 0..n {
            for i in 0..n {
                for j in 0..n {
                    b.push(Kernel::Gemm, k, i, j, &[]);
                }
            }
        }
        b.finish()
    }

    /// The DAG of `op`.
    pub fn of(op: Op, n: usize) -> Self {
        match op {
            Op::Lu => Self::lu(n),
            Op::Mm => Self::mm(n),
        }
    }

    /// Weight of each task: d_{i,j}·C_typ (`004` §3.5 W^k_{i,j}).
    pub fn task_weights(&self, d: &[f64], costs: &KernelCosts) -> Vec<f64> {
        self.tasks
            .iter()
            .map(|t| d[t.i * self.n + t.j] * costs.of(t.kind))
            .collect()
    }

    /// Priorities of `004` §3.5: the longest path from each task to the end,
    /// every edge weighted by the time of its origin task (the task's own time
    /// included).
    pub fn bottom_levels(&self, time: &[f64]) -> Vec<f64> {
        let mut bl = vec![0.0; self.tasks.len()];
        for t in (0..self.tasks.len()).rev() {
            let m = self.succs[t]
                .iter()
                .map(|&s| bl[s as usize])
                .fold(0.0, f64::max);
            bl[t] = time[t] + m;
        }
        bl
    }
}

struct DagBuilder {
    n: usize,
    last: Vec<Option<u32>>,
    tasks: Vec<TileTask>,
    preds: Vec<Vec<u32>>,
}

impl DagBuilder {
    fn new(n: usize) -> Self {
        Self {
            n,
            last: vec![None; n * n],
            tasks: Vec::new(),
            preds: Vec::new(),
        }
    }
    fn push(&mut self, kind: Kernel, k: usize, i: usize, j: usize, reads: &[(usize, usize)]) {
        let id = self.tasks.len() as u32;
        let mut p: Vec<u32> = reads
            .iter()
            .filter_map(|&(a, b)| self.last[a * self.n + b])
            .collect();
        if let Some(l) = self.last[i * self.n + j] {
            p.push(l);
        }
        p.sort_unstable();
        p.dedup();
        self.last[i * self.n + j] = Some(id);
        self.tasks.push(TileTask { kind, k, i, j });
        self.preds.push(p);
    }
    fn finish(self) -> TileDag {
        let mut succs = vec![Vec::new(); self.tasks.len()];
        for (t, ps) in self.preds.iter().enumerate() {
            for &p in ps {
                succs[p as usize].push(t as u32);
            }
        }
        TileDag {
            n: self.n,
            tasks: self.tasks,
            preds: self.preds,
            succs,
        }
    }
}

/// One busy interval of a processor in a simulated schedule.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Segment {
    /// Processor.
    pub proc: usize,
    /// Task index in the DAG.
    pub task: usize,
    /// Start time.
    pub start: f64,
    /// End time.
    pub end: f64,
}

/// Result of [`simulate`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimResult {
    /// 𝔇(M), the makespan.
    pub makespan: f64,
    /// Busy time of each processor.
    pub busy: Vec<f64>,
    /// Every busy interval (a preempted task has several).
    pub segments: Vec<Segment>,
}

#[derive(PartialEq)]
struct Ready(f64, u32);
impl Eq for Ready {}
impl PartialOrd for Ready {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Ready {
    fn cmp(&self, o: &Self) -> Ordering {
        // Highest priority first; ties to the lowest task index (earliest stage).
        self.0.total_cmp(&o.0).then(o.1.cmp(&self.1))
    }
}

/// 𝔇(M) (`004` §3.5): event-driven simulation without communication costs. Each
/// processor owns the tasks that write its tiles and runs the ready one of
/// highest priority ([`TileDag::bottom_levels`] of `prio_time`). With `preempt`,
/// a task that becomes ready with a higher priority interrupts the running one
/// (the paper's choice); without, tasks run to completion (what the real
/// executor of [`super::taskgraph`] does). `duration(task, proc)` is the time of
/// a task on its owner.
pub fn simulate(
    dag: &TileDag,
    owner_of: impl Fn(usize) -> usize,
    nprocs: usize,
    prio_time: &[f64],
    duration: impl Fn(usize, usize) -> f64,
    preempt: bool,
) -> SimResult {
    run_schedule(dag, owner_of, nprocs, prio_time, duration, preempt, None).0
}

/// The network of ℭ(M) (`004` §3.5, the makespan with communications): a tile
/// read by a task on another processor is sent once to that processor, each
/// processor sends one tile at a time (its link serializes its sends, in the
/// order the tiles are produced, the most urgent receiver first), and a tile of
/// density d takes `latency + d · full_tile` to arrive. Times are in the units of
/// [`KernelCosts`] (C_GETRF = 1 by default) on a processor of speed 1.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Links {
    /// Seconds from the end of a send to the arrival.
    pub latency: f64,
    /// Time the link is busy sending a full-rank tile.
    pub full_tile: f64,
}

/// What a run of [`simulate_with_links`] sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Traffic {
    /// Tiles sent.
    pub messages: usize,
    /// Their volume in full-rank tiles (Σ d).
    pub volume: f64,
    /// The busiest link's sending time.
    pub max_link_busy: f64,
}

/// ℭ(M) (`004` §3.5): the simulation of [`simulate`] where a task also waits
/// for the tiles it reads from other processors, sent over [`Links`]. LU reads
/// the tiles its predecessors wrote; the matrix product C = A·Aᵀ of §3.2 reads
/// A_{i,k} and A_{k,j} (held by the owners of those tiles from the start), sent
/// at time 0 in the order of the stages that read them. `density[i·N + j]` is
/// the tile's d (its volume relative to a full-rank tile).
#[allow(clippy::too_many_arguments)]
pub fn simulate_with_links(
    dag: &TileDag,
    op: Op,
    owner_of: impl Fn(usize) -> usize,
    nprocs: usize,
    prio_time: &[f64],
    duration: impl Fn(usize, usize) -> f64,
    density: &[f64],
    links: &Links,
) -> (SimResult, Traffic) {
    let (sim, traffic) = run_schedule(
        dag,
        owner_of,
        nprocs,
        prio_time,
        duration,
        true,
        Some(Network {
            op,
            density,
            links: *links,
        }),
    );
    (sim, traffic.unwrap_or_default())
}

impl Default for Traffic {
    fn default() -> Self {
        Traffic {
            messages: 0,
            volume: 0.0,
            max_link_busy: 0.0,
        }
    }
}

/// The communication side of [`run_schedule`].
struct Network<'a> {
    op: Op,
    density: &'a [f64],
    links: Links,
}

/// A tile arriving at a processor: the output of a task, or an input tile of
/// the matrix product.
#[derive(Clone, Copy)]
enum Delivery {
    Output(u32),
    Input(usize),
}

/// Each processor's outgoing link: when it is free, and its traffic.
struct LinkState {
    free: Vec<f64>,
    busy: Vec<f64>,
    messages: usize,
    volume: f64,
    links: Links,
}

impl LinkState {
    /// Sends a tile of density `d` from `from` at time `now`; its arrival time.
    fn send(&mut self, from: usize, now: f64, d: f64) -> f64 {
        let start = self.free[from].max(now);
        let t = d * self.links.full_tile;
        self.free[from] = start + t;
        self.busy[from] += t;
        self.messages += 1;
        self.volume += d;
        start + t + self.links.latency
    }
}

/// The event-driven schedule of [`simulate`] and [`simulate_with_links`].
fn run_schedule(
    dag: &TileDag,
    owner_of: impl Fn(usize) -> usize,
    nprocs: usize,
    prio_time: &[f64],
    duration: impl Fn(usize, usize) -> f64,
    preempt: bool,
    net: Option<Network<'_>>,
) -> (SimResult, Option<Traffic>) {
    let nt = dag.tasks.len();
    let n = dag.n;
    let prio = dag.bottom_levels(prio_time);
    let proc_of: Vec<usize> = dag.tasks.iter().map(|t| owner_of(t.i * n + t.j)).collect();
    let mut remaining: Vec<f64> = (0..nt).map(|t| duration(t, proc_of[t])).collect();
    // A task is ready when its predecessors are done (their tiles here) and its
    // remote input tiles have arrived.
    let mut waiting: Vec<usize> = dag.preds.iter().map(|p| p.len()).collect();
    // arrivals as (−time, index into `deliveries`): the earliest first
    let mut arrivals: BinaryHeap<Ready> = BinaryHeap::new();
    let mut deliveries: Vec<(usize, Delivery)> = Vec::new();
    let mut link = net.as_ref().map(|net| LinkState {
        free: vec![0.0; nprocs],
        busy: vec![0.0; nprocs],
        messages: 0,
        volume: 0.0,
        links: net.links,
    });
    // Matrix product: who waits for which input tile where.
    let mut input_waiters: std::collections::HashMap<(usize, usize), Vec<u32>> =
        std::collections::HashMap::new();
    if let (Some(net), Some(link)) = (&net, link.as_mut()) {
        if net.op == Op::Mm {
            let mut first_need: Vec<(usize, usize, usize)> = Vec::new();
            for (t, task) in dag.tasks.iter().enumerate() {
                for tile in [task.i * n + task.k, task.k * n + task.j] {
                    let dest = proc_of[t];
                    if owner_of(tile) == dest {
                        continue;
                    }
                    let w = input_waiters.entry((tile, dest)).or_default();
                    if w.is_empty() {
                        first_need.push((task.k, tile, dest));
                    }
                    if w.last() != Some(&(t as u32)) {
                        w.push(t as u32);
                        waiting[t] += 1;
                    }
                }
            }
            first_need.sort_unstable();
            for (_, tile, dest) in first_need {
                let at = link.send(owner_of(tile), 0.0, net.density[tile]);
                arrivals.push(Ready(-at, deliveries.len() as u32));
                deliveries.push((dest, Delivery::Input(tile)));
            }
        }
    }
    let mut queues: Vec<BinaryHeap<Ready>> = (0..nprocs).map(|_| BinaryHeap::new()).collect();
    for t in 0..nt {
        if waiting[t] == 0 {
            queues[proc_of[t]].push(Ready(prio[t], t as u32));
        }
    }
    let mut running: Vec<Option<(u32, f64)>> = vec![None; nprocs];
    let mut busy = vec![0.0; nprocs];
    let mut segments = Vec::new();
    let mut now = 0.0;
    let mut done = 0;
    let ready = |s: usize, waiting: &mut [usize], queues: &mut [BinaryHeap<Ready>]| {
        waiting[s] -= 1;
        if waiting[s] == 0 {
            queues[proc_of[s]].push(Ready(prio[s], s as u32));
        }
    };
    while done < nt {
        // Tiles that have arrived.
        while arrivals.peek().is_some_and(|a| -a.0 <= now * (1.0 + 1e-12)) {
            let Some(Ready(_, id)) = arrivals.pop() else {
                break;
            };
            let (dest, what) = deliveries[id as usize];
            match what {
                Delivery::Output(t) => {
                    for &s in &dag.succs[t as usize] {
                        if proc_of[s as usize] == dest {
                            ready(s as usize, &mut waiting, &mut queues);
                        }
                    }
                }
                Delivery::Input(tile) => {
                    for s in input_waiters.remove(&(tile, dest)).unwrap_or_default() {
                        ready(s as usize, &mut waiting, &mut queues);
                    }
                }
            }
        }
        // Choose what runs on each processor.
        for q in 0..nprocs {
            let top = queues[q].peek().map(|r| r.1);
            match running[q] {
                None => {
                    if let Some(t) = top {
                        queues[q].pop();
                        running[q] = Some((t, now));
                    }
                }
                Some((cur, start)) if preempt => {
                    if let Some(t) = top {
                        if prio[t as usize] > prio[cur as usize] {
                            // Preempt: close the segment, requeue the current task.
                            if now > start {
                                segments.push(Segment {
                                    proc: q,
                                    task: cur as usize,
                                    start,
                                    end: now,
                                });
                            }
                            queues[q].pop();
                            queues[q].push(Ready(prio[cur as usize], cur));
                            running[q] = Some((t, now));
                        }
                    }
                }
                Some(_) => {}
            }
        }
        // Next completion or arrival.
        let mut dt = f64::INFINITY;
        for r in running.iter().flatten() {
            dt = dt.min(remaining[r.0 as usize]);
        }
        if let Some(a) = arrivals.peek() {
            dt = dt.min((-a.0 - now).max(0.0));
        }
        assert!(
            dt.is_finite(),
            "tile DAG simulation: no task can run (cycle?)"
        );
        now += dt;
        for q in 0..nprocs {
            if let Some((t, start)) = running[q] {
                let t = t as usize;
                remaining[t] -= dt;
                busy[q] += dt;
                if remaining[t] <= 1e-12 * (1.0 + now) {
                    segments.push(Segment {
                        proc: q,
                        task: t,
                        start,
                        end: now,
                    });
                    running[q] = None;
                    done += 1;
                    let mut remote: Vec<(f64, usize)> = Vec::new();
                    for &s in &dag.succs[t] {
                        let s = s as usize;
                        if link.is_none() || proc_of[s] == q {
                            ready(s, &mut waiting, &mut queues);
                        } else {
                            remote.push((prio[s], proc_of[s]));
                        }
                    }
                    if let (Some(link), Some(net)) = (link.as_mut(), &net) {
                        // one send per receiving processor, the most urgent first
                        remote.sort_by(|a, b| b.0.total_cmp(&a.0));
                        let mut sent: Vec<usize> = Vec::new();
                        let task = &dag.tasks[t];
                        for (_, dest) in remote {
                            if !sent.contains(&dest) {
                                sent.push(dest);
                                let at = link.send(q, now, net.density[task.i * n + task.j]);
                                arrivals.push(Ready(-at, deliveries.len() as u32));
                                deliveries.push((dest, Delivery::Output(t as u32)));
                            }
                        }
                    }
                }
            }
        }
    }
    let traffic = link.map(|l| Traffic {
        messages: l.messages,
        volume: l.volume,
        max_link_busy: l.busy.iter().copied().fold(0.0, f64::max),
    });
    (
        SimResult {
            makespan: now,
            busy,
            segments,
        },
        traffic,
    )
}

/// ℭ(M) of an allocation: [`simulate_with_links`] on processors of the given
/// speeds, the paper's priorities and tile weights (`004` §3.5).
pub fn makespan_with_links(
    m: &Mapping,
    op: Op,
    d: &[f64],
    speeds: &[f64],
    costs: &KernelCosts,
    links: &Links,
) -> (SimResult, Traffic) {
    let dag = TileDag::of(op, m.n);
    let tw = dag.task_weights(d, costs);
    simulate_with_links(
        &dag,
        op,
        |t| m.owner[t],
        speeds.len(),
        &tw,
        |t, q| tw[t] / speeds[q],
        d,
        links,
    )
}

/// Which allocation (`004` §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AllocKind {
    /// 2-D block cyclic, §4.1.
    Bc,
    /// Extended block cyclic, §4.2.
    Bce,
    /// Random Subsets, §4.3.
    Rs,
}

/// Everything `jdmg plan tiles` reports for one allocation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TileMetrics {
    /// Allocation.
    pub alg: AllocKind,
    /// Kernel.
    pub op: Op,
    /// N.
    pub n: usize,
    /// P.
    pub p: usize,
    /// α.
    pub alpha: f64,
    /// n_P = ⌈α√P⌉.
    pub n_p: usize,
    /// Largest number of distinct processors on a row or column.
    pub max_procs_per_line: usize,
    /// Pattern shape (BC, BCE).
    pub grid: Option<(usize, usize)>,
    /// Σ W / Σ speed.
    pub ideal: f64,
    /// 𝔅(M).
    pub max_load: f64,
    /// 𝔅(M) / ideal (`004` Figures 4–5, dots).
    pub max_load_ratio: f64,
    /// 𝔇(M) (preemptive simulation).
    pub makespan: f64,
    /// 𝔇(M) / ideal (`004` Figures 4–5, triangles).
    pub makespan_ratio: f64,
    /// Dispersion of the real processors' loads (`004` §6.1, red points).
    pub dispersion: f64,
    /// Dispersion of the pattern positions' loads (virtual processors, blue points).
    pub virtual_dispersion: Option<f64>,
}

/// Builds the allocation `alg` for weights `w` and evaluates it (`004` §3.5).
///
/// # Errors
/// Those of the allocation functions.
#[allow(clippy::too_many_arguments)]
pub fn evaluate(
    alg: AllocKind,
    op: Op,
    d: &[f64],
    n: usize,
    speeds: &[f64],
    alpha: f64,
    costs: &KernelCosts,
    rs: &RsParams,
    bce_grid: BceGrid,
) -> Result<(Mapping, TileMetrics), SchedError> {
    check_speeds(speeds)?;
    check_alpha(alpha)?;
    let p = speeds.len();
    let w = tile_weights(d, n, op, costs);
    let m = match alg {
        AllocKind::Bc => block_cyclic(n, p)?,
        AllocKind::Bce => block_cyclic_extended(&w, n, speeds, alpha, bce_grid)?,
        AllocKind::Rs => random_subsets(&w, n, speeds, alpha, rs)?,
    };
    let ideal = ideal_load(&w, speeds);
    let max_load = load_bound(&m, &w, speeds);
    let dag = TileDag::of(op, n);
    let tw = dag.task_weights(d, costs);
    let sim = simulate(&dag, |t| m.owner[t], p, &tw, |t, q| tw[t] / speeds[q], true);
    let loads: Vec<f64> = m.loads(&w).iter().zip(speeds).map(|(l, s)| l / s).collect();
    let virtual_dispersion = m
        .grid
        .as_ref()
        .map(|(r, c, _)| dispersion(&aggregated_grid(&w, n, *r, *c)));
    let metrics = TileMetrics {
        alg,
        op,
        n,
        p,
        alpha,
        n_p: n_p(p, alpha),
        max_procs_per_line: m.max_distinct_per_line(),
        grid: m.grid.as_ref().map(|(r, c, _)| (*r, *c)),
        ideal,
        max_load,
        max_load_ratio: max_load / ideal,
        makespan: sim.makespan,
        makespan_ratio: sim.makespan / ideal,
        dispersion: dispersion(&loads),
        virtual_dispersion,
    };
    Ok((m, metrics))
}
