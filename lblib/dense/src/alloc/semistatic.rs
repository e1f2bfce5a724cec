//! The semi-static strategy of Boudet et al. §2.1 ("slice the total work into
//! phases") and §4.5 ("Variations in the machine loads and speeds").
//!
//! Rule implemented by [`reallocate_remaining`]: the allocation is static
//! within a phase and recomputed between phases from the cycle-times measured
//! during the last phase. Blocks already factored keep their owner. The
//! remaining blocks `first..n` are laid out again with the heterogeneous
//! cyclic(B) layout of the *new* cycle-times (the reversed DP for `B` chunks,
//! slices aligned on the last block, see
//! [`cyclic_slice_layout`](super::cyclic_slice_layout)); only the cycle-times
//! and `B` are needed, not the problem size, as the paper notes. Every block
//! whose owner changes is reported as a [`BlockMove`] (the inter-phase
//! redistribution). For independent chunks (matrix product, §2.1) the
//! per-phase rule is simply [`optimal_chunks`](super::optimal_chunks) with
//! the new times.

use serde::{Deserialize, Serialize};

use super::dp::layout_from_owners;
use super::{incremental_dp, AllocError};

/// One column block changing owner between phases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockMove {
    /// Column block index.
    pub block: usize,
    /// Previous owner.
    pub from: usize,
    /// New owner.
    pub to: usize,
}

/// Result of a semi-static re-allocation (`000` §4.5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reallocation {
    /// New owner of every block (blocks before `first` unchanged).
    pub owners: Vec<usize>,
    /// Blocks whose owner changed, in increasing block order.
    pub moves: Vec<BlockMove>,
    /// Predicted average time per block (`cost` of the DP, `000` §2.2) of
    /// the new layout's slices, for the new cycle-times.
    pub slice_cost: f64,
}

/// Re-allocates the remaining column blocks `first..owners.len()` from the
/// new cycle-times `new_times`, with slices of `b` blocks (module docs give
/// the rule). `owners` is the current layout; processors keep their indices.
///
/// # Errors
/// [`AllocError::Empty`] / [`AllocError::BadTime`] for bad `new_times`;
/// [`AllocError::TooSmall`] if `b == 0`; [`AllocError::BlockOutOfRange`] if
/// `first > owners.len()`; [`AllocError::BadOwner`] if a current owner is
/// not an index into `new_times`.
pub fn reallocate_remaining(
    new_times: &[f64],
    b: usize,
    owners: &[usize],
    first: usize,
) -> Result<Reallocation, AllocError> {
    let dp = incremental_dp(new_times, b)?;
    let n = owners.len();
    if first > n {
        return Err(AllocError::BlockOutOfRange { index: first, n });
    }
    let p = new_times.len();
    if let Some((block, &owner)) = owners.iter().enumerate().find(|(_, &o)| o >= p) {
        return Err(AllocError::BadOwner { block, owner, p });
    }
    let mut new_owners = owners.to_vec();
    let mut moves = Vec::new();
    let remaining = n - first;
    if remaining > 0 {
        let tail = layout_from_owners(&dp.owners, remaining);
        for (off, &to) in tail.iter().enumerate() {
            let block = first + off;
            let from = owners[block];
            if from != to {
                moves.push(BlockMove { block, from, to });
            }
            new_owners[block] = to;
        }
    }
    let slice_cost = dp.costs[dp.costs.len() - 1];
    Ok(Reallocation {
        owners: new_owners,
        moves,
        slice_cost,
    })
}
