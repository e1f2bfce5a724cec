//! Column-block layouts of a dense `n × n` matrix over `p` processes (Boudet et al.
//! §2.2–§2.3, §4.4): homogeneous cyclic(B), heterogeneous cyclic(B) from
//! cycle-times, and the optimized distribution.
//!
//! The matrix is cut into `nb = ceil(n / block)` column blocks of `block` columns
//! (the last one may be narrower). A layout gives every block a *home* process
//! (which stores it) and every step `k` of LU/QR a *factor* process (which factors
//! panel `k`). They differ only for the optimized distribution of `000` §4.4, where
//! the fastest process factors every panel and performs the update just before it.

use serde::{Deserialize, Serialize};

use super::alloc::{
    cyclic_slice_layout, optimized_lu_schedule, predicted_times, pure_cyclic_layout, simulate_lu,
    two_level_allocation, AllocError, TwoLevelParams,
};

/// Which column-block layout to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LayoutKind {
    /// ScaLAPACK's homogeneous CYCLIC: block `j` on process `j mod p` (`000` §2.2,
    /// the baseline of Tables 4–5).
    #[default]
    Cyclic,
    /// Heterogeneous cyclic(B) of `000` §2.2: slices of `B` blocks laid out by
    /// the incremental dynamic programming, reversed
    /// ([`cyclic_slice_layout`]).
    Hetero,
    /// The optimized distribution of `000` §4.4: the fastest process factors every
    /// panel (and updates it just before); the other blocks are laid out by the
    /// reversed DP started from `(2, 0, …, 0)` ([`optimized_lu_schedule`]).
    Optimized,
    /// The two-level clusters-of-clusters allocation of `001` §4.5: panels of
    /// `B` blocks go to groups of processes ("clusters", e.g. hosts) by the DP on
    /// the clusters' panel times, blocks inside a cluster by its continued DP
    /// ([`two_level_allocation`]). Built with [`ColumnLayout::build_clusters`].
    Clusters,
}

impl LayoutKind {
    /// The name used by the CLI and in JSON (`cyclic`, `hetero`, `optimized`).
    pub fn name(self) -> &'static str {
        match self {
            LayoutKind::Cyclic => "cyclic",
            LayoutKind::Hetero => "hetero",
            LayoutKind::Optimized => "optimized",
            LayoutKind::Clusters => "clusters",
        }
    }
}

/// A column-block layout: home and factor process of every block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ColumnLayout {
    /// Matrix order `n`.
    pub n: usize,
    /// Width of a column block (the last block may be narrower).
    pub block: usize,
    /// Number of processes.
    pub p: usize,
    /// How the layout was built.
    pub kind: LayoutKind,
    /// Slice size `B` of `000` §2.2 (blocks per slice) for [`LayoutKind::Hetero`];
    /// `p` for cyclic; `nb` for optimized.
    pub slice: usize,
    /// `home[j]`: process that stores column block `j`.
    pub home: Vec<usize>,
    /// `factor[k]`: process that factors panel `k` (equals `home[k]` except for
    /// the optimized distribution).
    pub factor: Vec<usize>,
}

/// Number of column blocks of width `block` covering `n` columns.
pub fn n_blocks(n: usize, block: usize) -> usize {
    n.div_ceil(block.max(1))
}

impl ColumnLayout {
    /// Number of column blocks.
    pub fn n_blocks(&self) -> usize {
        self.home.len()
    }

    /// Global columns `start..end` of block `j`.
    pub fn block_cols(&self, j: usize) -> (usize, usize) {
        let s = j * self.block;
        (s, (s + self.block).min(self.n))
    }

    /// Number of matrix columns stored on every process.
    pub fn columns_per_rank(&self) -> Vec<usize> {
        let mut c = vec![0; self.p];
        for (j, &h) in self.home.iter().enumerate() {
            let (s, e) = self.block_cols(j);
            c[h] += e - s;
        }
        c
    }

    /// The blocks stored on process `r`, ascending.
    pub fn blocks_of(&self, r: usize) -> Vec<usize> {
        (0..self.n_blocks())
            .filter(|&j| self.home[j] == r)
            .collect()
    }

    /// Builds a layout from cycle-times (one per process; ignored, apart from
    /// their count, for [`LayoutKind::Cyclic`]). `slice = None` picks, for
    /// [`LayoutKind::Hetero`], the `B <= 4p` with the smallest `t_theoretical(B)`
    /// of `000` §3 (the first one within 1 % of the best).
    ///
    /// # Errors
    /// [`AllocError`] for bad cycle-times, `n == 0`, `block == 0` or `slice == Some(0)`;
    /// the optimized distribution needs at least 2 blocks.
    pub fn build(
        kind: LayoutKind,
        times: &[f64],
        n: usize,
        block: usize,
        slice: Option<usize>,
    ) -> Result<Self, AllocError> {
        super::alloc_check(n, block)?;
        let p = times.len();
        let nb = n_blocks(n, block);
        let (home, factor, slice) = match kind {
            LayoutKind::Cyclic => {
                let h = pure_cyclic_layout(p, nb)?;
                (h.clone(), h, p)
            }
            LayoutKind::Hetero => {
                let b = match slice {
                    Some(b) => b,
                    None => best_slice(times, nb)?,
                };
                let h = cyclic_slice_layout(times, b, nb)?;
                (h.clone(), h, b)
            }
            LayoutKind::Optimized => {
                let s = optimized_lu_schedule(times, nb)?;
                let f = vec![s.fastest; nb];
                (s.column_owner, f, nb)
            }
            LayoutKind::Clusters => {
                let all: Vec<usize> = (0..p).collect();
                return Self::build_clusters(&[all], times, n, block, slice);
            }
        };
        Ok(Self {
            n,
            block,
            p,
            kind,
            slice,
            home,
            factor,
        })
    }

    /// The two-level layout of `001` §4.5 over the clusters `groups` (lists of
    /// ranks, together a partition of `0..times.len()`), with panels of
    /// `panel` blocks (default: `4 x` the largest cluster). Blocks are read from
    /// the right end of the allocation, as the slices of `000` §2.2.
    ///
    /// # Errors
    /// [`AllocError::BadOwner`] if the groups are not a partition of the ranks;
    /// errors of [`two_level_allocation`].
    pub fn build_clusters(
        groups: &[Vec<usize>],
        times: &[f64],
        n: usize,
        block: usize,
        panel: Option<usize>,
    ) -> Result<Self, AllocError> {
        super::alloc_check(n, block)?;
        let p = times.len();
        let mut seen = vec![false; p];
        for (g, ranks) in groups.iter().enumerate() {
            for &r in ranks {
                if r >= p || seen[r] {
                    return Err(AllocError::BadOwner {
                        block: g,
                        owner: r,
                        p,
                    });
                }
                seen[r] = true;
            }
        }
        if let Some(r) = seen.iter().position(|s| !s) {
            return Err(AllocError::BadOwner {
                block: groups.len(),
                owner: r,
                p,
            });
        }
        let nb = n_blocks(n, block);
        let b = panel.unwrap_or(4 * groups.iter().map(Vec::len).max().unwrap_or(1));
        let cl_times: Vec<Vec<f64>> = groups
            .iter()
            .map(|g| g.iter().map(|&r| times[r]).collect())
            .collect();
        let two = two_level_allocation(
            &cl_times,
            nb.div_ceil(b.max(1)),
            &TwoLevelParams {
                panel_size: b,
                ..TwoLevelParams::default()
            },
        )?;
        let skip = two.block_owner.len() - nb;
        let home: Vec<usize> = two.block_owner[skip..]
            .iter()
            .map(|&(c, i)| groups[c][i])
            .collect();
        Ok(Self {
            n,
            block,
            p,
            kind: LayoutKind::Clusters,
            slice: b,
            factor: home.clone(),
            home,
        })
    }

    /// Predicted LU/QR time of this layout in the unit-task model of `000` §2.2 /
    /// §4.3 ([`simulate_lu`]; for the optimized distribution, its own schedule).
    ///
    /// # Errors
    /// As [`simulate_lu`].
    pub fn predicted_time(&self, times: &[f64]) -> Result<f64, AllocError> {
        match self.kind {
            LayoutKind::Optimized if self.n_blocks() >= 2 => {
                Ok(optimized_lu_schedule(times, self.n_blocks())?.predicted_time())
            }
            _ => simulate_lu(times, &self.home),
        }
    }
}

impl ColumnLayout {
    /// The LU model of `000` §2.2 / §4.3 with tasks weighted by their size:
    /// at step `k` the panel factorization costs `t_f (m_k / n) / 2` and the
    /// update of one block `t_i (m_k / n)`, `m_k = n - c0_k` the rows left
    /// (LU flops: `m w²` to factor, `2 m w²` to update a block). Steps are
    /// synchronous, as in [`simulate_lu`]. In units of the cycle-times.
    ///
    /// # Errors
    /// [`AllocError::LengthMismatch`] if `times` has not `p` entries.
    pub fn predicted_time_weighted(&self, times: &[f64]) -> Result<f64, AllocError> {
        self.predicted_time_weighted_from(times, 0)
    }

    /// [`ColumnLayout::predicted_time_weighted`] of the steps `first..` only (the
    /// blocks before `first` factored): what a semi-static re-planning compares
    /// (`000` §4.5).
    ///
    /// # Errors
    /// As [`ColumnLayout::predicted_time_weighted`].
    pub fn predicted_time_weighted_from(
        &self,
        times: &[f64],
        first: usize,
    ) -> Result<f64, AllocError> {
        if times.len() != self.p {
            return Err(AllocError::LengthMismatch {
                what: "cycle-times",
                got: times.len(),
                expected: self.p,
            });
        }
        let nb = self.n_blocks();
        let mut counts = vec![0usize; self.p];
        for &h in self.home.iter().skip(first) {
            counts[h] += 1;
        }
        let mut total = 0.0;
        for k in first..nb {
            counts[self.home[k]] -= 1;
            let m = (self.n - self.block_cols(k).0) as f64 / self.n as f64;
            let update = counts
                .iter()
                .zip(times)
                .map(|(&c, &t)| c as f64 * t)
                .fold(0.0, f64::max);
            total += m * (0.5 * times[self.factor[k]] + update);
        }
        Ok(total)
    }
}

/// The slice size `B <= min(4p, nb)` minimizing `t_theoretical(B)` of `000` §3
/// (the smallest `B` within 1 % of the minimum).
///
/// # Errors
/// As [`predicted_times`].
pub fn best_slice(times: &[f64], nb: usize) -> Result<usize, AllocError> {
    let max_b = (4 * times.len()).min(nb).max(1);
    let pt = predicted_times(times, max_b)?;
    let best = pt.per_b.iter().copied().fold(f64::INFINITY, f64::min);
    Ok(pt
        .per_b
        .iter()
        .position(|&c| c <= best * 1.01)
        .map_or(1, |i| i + 1))
}
