//! Two-level allocation for collections of clusters (Mehaut and Robert §4.5,
//! "Load Balancing on Collections of Clusters"; the brief's "§7").
//!
//! The matrix is cut into panels of `B` column blocks. Each cluster's
//! "cycle-time" is the time its optimal allocation (the DP of `000` §2.2)
//! needs to update one panel; panels are distributed over clusters with the
//! same DP as if clusters were processors of those cycle-times, and inside
//! each cluster the DP is *continued* from one of its panels to the next.

use serde::{Deserialize, Serialize};

use super::dp::fastest;
use super::{at_least, incremental_dp, makespan, optimized_dp, strictly_less, AllocError};

/// How cluster cycle-times are evaluated when panels are distributed
/// (`001` §4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum ClusterTimeRule {
    /// The paper's static strategy: a cluster's cycle-time is the time of
    /// its first panel (`max_i c_i t_i` of its DP for `B` chunks), and
    /// panels are distributed with the 1D DP on those times.
    #[default]
    FirstPanel,
    /// The refinement the paper suggests ("take the cycle-times of the
    /// clusters into account on the fly"): giving a cluster its `n`-th panel
    /// costs the actual cumulative time of its continued DP for `n B`
    /// chunks, and each panel goes to the cluster minimizing the resulting
    /// maximum over clusters.
    OnTheFly,
}

/// Parameters of [`two_level_allocation`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TwoLevelParams {
    /// Panel size `B` in column blocks. Default 5 (the paper's example; in
    /// practice choose `B >= tau_c / (r tau_a)` so that updating a panel
    /// hides its inter-cluster communication, `001` §4.5).
    pub panel_size: usize,
    /// Cluster cycle-time rule. Default [`ClusterTimeRule::FirstPanel`].
    pub rule: ClusterTimeRule,
}

impl Default for TwoLevelParams {
    fn default() -> Self {
        Self {
            panel_size: 5,
            rule: ClusterTimeRule::FirstPanel,
        }
    }
}

/// Result of [`two_level_allocation`]; all sequences read left to right
/// (block 0 first), the paper numbers from the right.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TwoLevelAllocation {
    /// "Cycle-time" of each cluster: time to update one panel with its
    /// optimal allocation (6 and 9 in the paper's example).
    pub cluster_times: Vec<f64>,
    /// Cluster owning each panel (`BAABA` in the example).
    pub panel_cluster: Vec<usize>,
    /// `(cluster, processor within the cluster)` owning each column block.
    pub block_owner: Vec<(usize, usize)>,
    /// Time each panel takes on its cluster with the continued DP (the
    /// paper's remark: cluster B's second panel takes 10, not 9).
    pub panel_times: Vec<f64>,
}

/// Two-level static allocation of `n_panels` panels over clusters of
/// processors (`001` §4.5, static strategy). `clusters[x]` holds the
/// cycle-times of cluster `x`'s processors.
///
/// Example of the paper: clusters `A = (2,3,4)`, `B = (3,5,8)`, `B = 5`:
/// cycle-times 6 and 9, panels `BAABA`, blocks
/// `B8B5B3B3B5|A3A2A4A2A3|A2A3A2A4A3|B3B8B3B5B3|A2A4A2A3A2` (up to ties
/// inside cluster A, where the paper broke ties differently).
///
/// # Errors
/// [`AllocError::Empty`] if there is no cluster or a cluster is empty;
/// [`AllocError::BadTime`] for a bad cycle-time; [`AllocError::TooSmall`] if
/// `n_panels` or `params.panel_size` is 0.
pub fn two_level_allocation(
    clusters: &[Vec<f64>],
    n_panels: usize,
    params: &TwoLevelParams,
) -> Result<TwoLevelAllocation, AllocError> {
    if clusters.is_empty() {
        return Err(AllocError::Empty { what: "clusters" });
    }
    let b = params.panel_size;
    at_least("panel size B", b, 1)?;
    at_least("number of panels", n_panels, 1)?;
    let n_blocks = n_panels.checked_mul(b).ok_or(AllocError::TooLarge {
        what: "number of column blocks (panels x panel size)",
        count: n_panels as u128 * b as u128,
        limit: usize::MAX as u128,
    })?;
    let mut cluster_times = Vec::with_capacity(clusters.len());
    for cl in clusters {
        let dp = incremental_dp(cl, b)?;
        cluster_times.push(dp.exec_times[b - 1]);
    }
    // Cluster of each panel, numbered from the right.
    let from_right: Vec<usize> = match params.rule {
        ClusterTimeRule::FirstPanel => incremental_dp(&cluster_times, n_panels)?.owners,
        ClusterTimeRule::OnTheFly => {
            let dps = clusters
                .iter()
                .map(|cl| incremental_dp(cl, n_blocks))
                .collect::<Result<Vec<_>, _>>()?;
            let cum = |x: usize, n: usize| {
                if n == 0 {
                    0.0
                } else {
                    dps[x].exec_times[n * b - 1]
                }
            };
            let mut n_of = vec![0usize; clusters.len()];
            let mut seq = Vec::with_capacity(n_panels);
            for _ in 0..n_panels {
                let mut best: Option<(usize, f64)> = None;
                for x in 0..clusters.len() {
                    let exec = (0..clusters.len())
                        .map(|y| cum(y, n_of[y] + usize::from(y == x)))
                        .fold(0.0, f64::max);
                    if best.is_none_or(|(_, e)| strictly_less(exec, e)) {
                        best = Some((x, exec));
                    }
                }
                let Some((x, _)) = best else { break };
                n_of[x] += 1;
                seq.push(x);
            }
            seq
        }
    };
    // Continued DP inside each cluster.
    let mut panels_of = vec![0usize; clusters.len()];
    for &x in &from_right {
        panels_of[x] += 1;
    }
    let inner = clusters
        .iter()
        .zip(&panels_of)
        .map(|(cl, &n)| {
            if n == 0 {
                Ok(None)
            } else {
                incremental_dp(cl, n * b).map(Some)
            }
        })
        .collect::<Result<Vec<_>, AllocError>>()?;
    let mut seen = vec![0usize; clusters.len()];
    let mut blocks_rl = Vec::with_capacity(n_blocks);
    let mut times_rl = Vec::with_capacity(n_panels);
    for &x in &from_right {
        let Some(dp) = &inner[x] else { continue };
        let m = seen[x];
        seen[x] += 1;
        let chunk = &dp.owners[m * b..(m + 1) * b];
        let mut counts = vec![0usize; clusters[x].len()];
        for &o in chunk {
            counts[o] += 1;
            blocks_rl.push((x, o));
        }
        times_rl.push(makespan(&counts, &clusters[x]));
    }
    let mut panel_cluster = from_right;
    panel_cluster.reverse();
    blocks_rl.reverse();
    times_rl.reverse();
    Ok(TwoLevelAllocation {
        cluster_times,
        panel_cluster,
        block_owner: blocks_rl,
        panel_times: times_rl,
    })
}

/// The "dynamic strategy" of `001` §4.5 at the cluster level: the factor
/// task and the update before it always run on the fastest cluster, so the
/// first two panels go to it and the rest is the DP started from those two
/// ([`optimized_dp`], as in `000` §4.4), read in reverse. Returns the cluster
/// of each of `n_panels` panels, left to right, the two fixed panels first.
/// Clusters of relative cycle-times `(3, 5, 8)`, 10 panels: `33|85335385`,
/// i.e. `[0, 0, 2, 1, 0, 0, 1, 0, 2, 1]`.
///
/// # Errors
/// [`AllocError::Empty`] / [`AllocError::BadTime`] for bad cycle-times;
/// [`AllocError::TooSmall`] if `n_panels < 2`.
pub fn cluster_dynamic_allocation(
    cluster_times: &[f64],
    n_panels: usize,
) -> Result<Vec<usize>, AllocError> {
    let dp = optimized_dp(cluster_times, n_panels)?;
    let f = fastest(cluster_times);
    let mut out = vec![f, f];
    out.extend(dp.slice_layout());
    Ok(out)
}
