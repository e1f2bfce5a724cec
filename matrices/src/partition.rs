//! Row partitioning and halo (ghost) plans for distributed SpMV and solve groups.
//!
//! * [`RowPartition`]: contiguous row blocks, one per part (process), built with equal
//!   row counts ([`RowPartition::equal_rows`]), balanced by nonzeros
//!   ([`RowPartition::balanced_by_nnz`]) or by nonzeros scaled by per-part speeds
//!   ([`RowPartition::weighted_by_nnz`], for heterogeneous processes as in
//!   McCombs et al. §2 and the rate-driven allocations of Boudet et al.).
//! * [`GroupPartition`]: the rows of the same matrix spread over a *subset* of the
//!   processes, with the map from group-local parts to global ranks (multigrain solve
//!   groups, McCombs et al. §6; the fine layout over all `P` ranks is [`GroupPartition::all`]).
//! * [`Redistribution`]: for every (source rank, destination rank) pair the global row
//!   range to move when a block of vectors changes from one layout to another (JDmg:
//!   `x_i, r_i` from the fine layout to group `g`'s layout and `ε_i` back).
//! * [`HaloPlan`]: for one part of a row partition, which remote vector entries it needs
//!   and from whom, what it must send to whom, and its local rows with columns
//!   renumbered into `[owned | ghosts]` order.
//!
//! Everything here is pure code (no communication); `precond::dist` drives the
//! exchanges over `lbcomm::Comm`.

use std::ops::Range;

use thiserror::Error;

use crate::csr::CsrMatrix;

/// Why a partition, group layout, redistribution or halo plan could not be built.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum PartitionError {
    /// A partition into zero parts was requested.
    #[error("a partition needs at least one part")]
    NoParts,
    /// `offsets` is empty, does not start at 0, or decreases.
    #[error("offsets must start at 0 and be non-decreasing (problem at position {position})")]
    BadOffsets { position: usize },
    /// A weight is negative, NaN or infinite, or all weights are zero.
    #[error(
        "part weights must be finite, non-negative and not all zero (weight {index} = {value})"
    )]
    BadWeight { index: usize, value: f64 },
    /// The number of weights differs from the number of parts.
    #[error("{weights} weights given for {parts} parts")]
    WeightCount { weights: usize, parts: usize },
    /// A part index is past the number of parts.
    #[error("part {part} does not exist (the partition has {nparts} parts)")]
    NoSuchPart { part: usize, nparts: usize },
    /// Two objects that must describe the same rows do not.
    #[error("row count mismatch: {what} has {got} rows, expected {expected}")]
    RowMismatch {
        what: &'static str,
        got: usize,
        expected: usize,
    },
    /// The matrix is not square where a square one is required.
    #[error("matrix must be square for a row partition of its vectors, got {nrows} x {ncols}")]
    NotSquare { nrows: usize, ncols: usize },
    /// A group's rank list has the wrong length, repeats a rank, or names a rank
    /// outside the communicator.
    #[error("invalid rank map: {reason}")]
    BadRankMap { reason: String },
    /// More groups than ranks, or zero groups.
    #[error("cannot split {nranks} ranks into {ngroups} non-empty groups")]
    BadGroupCount { nranks: usize, ngroups: usize },
    /// A halo request names an entry that the receiving part does not own.
    #[error(
        "part {part} was asked for global row {row}, which it does not own (it owns {lo}..{hi})"
    )]
    NotOwned {
        part: usize,
        row: usize,
        lo: usize,
        hi: usize,
    },
    /// A halo request list has the wrong number of ranks.
    #[error("halo requests given for {got} ranks, the partition has {expected}")]
    RequestCount { got: usize, expected: usize },
}

/// Contiguous rows per part: part `p` owns global rows `offsets[p]..offsets[p + 1]`.
///
/// Parts may be empty. Invariant: `offsets.len() == nparts + 1 >= 2`, `offsets[0] == 0`,
/// non-decreasing; `offsets[nparts]` is the number of rows.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RowPartition {
    offsets: Vec<usize>,
}

impl RowPartition {
    /// Wraps explicit offsets.
    ///
    /// # Errors
    /// [`PartitionError::NoParts`] if `offsets.len() < 2`; [`PartitionError::BadOffsets`] if
    /// `offsets[0] != 0` or the offsets decrease.
    pub fn from_offsets(offsets: Vec<usize>) -> Result<Self, PartitionError> {
        if offsets.len() < 2 {
            return Err(PartitionError::NoParts);
        }
        if offsets[0] != 0 {
            return Err(PartitionError::BadOffsets { position: 0 });
        }
        if let Some(p) = offsets.windows(2).position(|w| w[1] < w[0]) {
            return Err(PartitionError::BadOffsets { position: p + 1 });
        }
        Ok(Self { offsets })
    }

    /// `n` rows in `parts` blocks whose sizes differ by at most one (the first
    /// `n % parts` parts get one extra row).
    ///
    /// # Errors
    /// [`PartitionError::NoParts`] if `parts == 0`.
    pub fn equal_rows(n: usize, parts: usize) -> Result<Self, PartitionError> {
        if parts == 0 {
            return Err(PartitionError::NoParts);
        }
        let (q, r) = (n / parts, n % parts);
        let mut offsets = Vec::with_capacity(parts + 1);
        offsets.push(0);
        for p in 0..parts {
            offsets.push(offsets[p] + q + usize::from(p < r));
        }
        Ok(Self { offsets })
    }

    /// Contiguous row blocks with (nearly) equal numbers of stored entries: the
    /// boundary `p` is the row boundary closest to `p * nnz / parts` (DESIGN.md, issue 2
    /// item 5). Uses the rows of `a` (works for rectangular local blocks too).
    ///
    /// # Errors
    /// [`PartitionError::NoParts`] if `parts == 0`.
    pub fn balanced_by_nnz(a: &CsrMatrix, parts: usize) -> Result<Self, PartitionError> {
        if parts == 0 {
            return Err(PartitionError::NoParts);
        }
        Self::weighted_by_nnz(a, &vec![1.0; parts])
    }

    /// Contiguous row blocks whose nonzero counts are proportional to `weights`
    /// (e.g. measured process speeds from `lblib`): part `p` gets about
    /// `nnz * weights[p] / Σ weights` entries. Zero weights give empty parts. A matrix
    /// without stored entries is split by rows in the same proportions.
    ///
    /// # Errors
    /// [`PartitionError::NoParts`] if `weights` is empty; [`PartitionError::BadWeight`] for a
    /// negative or non-finite weight, or if all are zero.
    pub fn weighted_by_nnz(a: &CsrMatrix, weights: &[f64]) -> Result<Self, PartitionError> {
        if weights.is_empty() {
            return Err(PartitionError::NoParts);
        }
        if let Some((i, &w)) = weights
            .iter()
            .enumerate()
            .find(|(_, w)| !w.is_finite() || **w < 0.0)
        {
            return Err(PartitionError::BadWeight { index: i, value: w });
        }
        let total: f64 = weights.iter().sum();
        if total <= 0.0 {
            return Err(PartitionError::BadWeight {
                index: 0,
                value: 0.0,
            });
        }
        let mut offsets = Vec::with_capacity(weights.len() + 1);
        offsets.push(0);
        push_weighted_bounds(a.indptr(), 0, a.nrows(), weights, &mut offsets);
        Ok(Self { offsets })
    }

    /// Hierarchical refinement (McCombs et al. §6, "Multigrain algorithm for MPP's"): every
    /// part `m` of `coarse` is split into `k = weights.len() / coarse.nparts()` contiguous
    /// sub-parts whose nonzero counts are proportional to `weights[m * k..(m + 1) * k]`;
    /// sub-part `j` of coarse part `m` is part `m * k + j` of the result. Each coarse
    /// part is thus tiled exactly by its `k` sub-parts. A coarse part without stored
    /// entries is split by rows in the same proportions.
    ///
    /// # Errors
    /// [`PartitionError::RowMismatch`] if `coarse` does not cover the rows of `a`;
    /// [`PartitionError::WeightCount`] if `weights` is empty or not a multiple of the
    /// number of coarse parts; [`PartitionError::BadWeight`] for a negative or non-finite
    /// weight, or if the weights of one coarse part are all zero.
    pub fn refine_weighted_by_nnz(
        a: &CsrMatrix,
        coarse: &RowPartition,
        weights: &[f64],
    ) -> Result<Self, PartitionError> {
        if coarse.nrows() != a.nrows() {
            return Err(PartitionError::RowMismatch {
                what: "coarse partition",
                got: coarse.nrows(),
                expected: a.nrows(),
            });
        }
        let nc = coarse.nparts();
        if weights.is_empty() || !weights.len().is_multiple_of(nc) {
            return Err(PartitionError::WeightCount {
                weights: weights.len(),
                parts: nc,
            });
        }
        if let Some((i, &w)) = weights
            .iter()
            .enumerate()
            .find(|(_, w)| !w.is_finite() || **w < 0.0)
        {
            return Err(PartitionError::BadWeight { index: i, value: w });
        }
        let k = weights.len() / nc;
        let mut offsets = Vec::with_capacity(weights.len() + 1);
        offsets.push(0);
        for m in 0..nc {
            let w = &weights[m * k..(m + 1) * k];
            if w.iter().sum::<f64>() <= 0.0 {
                return Err(PartitionError::BadWeight {
                    index: m * k,
                    value: 0.0,
                });
            }
            let r = coarse.range(m);
            push_weighted_bounds(a.indptr(), r.start, r.end, w, &mut offsets);
        }
        Ok(Self { offsets })
    }

    /// The offsets array (`nparts() + 1` entries).
    pub fn offsets(&self) -> &[usize] {
        &self.offsets
    }
    /// Number of parts.
    pub fn nparts(&self) -> usize {
        self.offsets.len() - 1
    }
    /// Total number of rows.
    pub fn nrows(&self) -> usize {
        self.offsets[self.offsets.len() - 1]
    }
    /// The part owning global row `row`, or `None` if `row >= nrows()`.
    pub fn owner(&self, row: usize) -> Option<usize> {
        if row >= self.nrows() {
            return None;
        }
        // Last p with offsets[p] <= row: skips empty parts.
        Some(self.offsets.partition_point(|&o| o <= row) - 1)
    }
    /// Global rows owned by part `p`.
    ///
    /// # Panics
    /// If `p >= nparts()` (a programming error).
    pub fn range(&self, p: usize) -> Range<usize> {
        assert!(
            p < self.nparts(),
            "RowPartition::range: part {p} of {}",
            self.nparts()
        );
        self.offsets[p]..self.offsets[p + 1]
    }
    /// Number of rows of part `p`.
    ///
    /// # Panics
    /// If `p >= nparts()` (a programming error).
    pub fn len(&self, p: usize) -> usize {
        self.range(p).len()
    }
    /// True when the partition has no rows at all.
    pub fn is_empty(&self) -> bool {
        self.nrows() == 0
    }
    /// Number of stored entries of `a` in each part (load-balance diagnostics).
    ///
    /// # Errors
    /// [`PartitionError::RowMismatch`] if `a.nrows() != nrows()`.
    pub fn nnz_per_part(&self, a: &CsrMatrix) -> Result<Vec<usize>, PartitionError> {
        if a.nrows() != self.nrows() {
            return Err(PartitionError::RowMismatch {
                what: "matrix",
                got: a.nrows(),
                expected: self.nrows(),
            });
        }
        let ip = a.indptr();
        Ok(self
            .offsets
            .windows(2)
            .map(|w| ip[w[1]] - ip[w[0]])
            .collect())
    }
}

/// Pushes onto `offsets` the `weights.len()` end boundaries of contiguous blocks of the
/// rows `lo..hi` (`indptr` is the full row pointer) whose nonzero counts are
/// proportional to `weights` (validated by the caller: finite, non-negative, positive
/// sum); each boundary is the row boundary closest to its target. Rows without stored
/// entries are split by row count instead. `offsets` must end at or before `lo`.
fn push_weighted_bounds(
    indptr: &[usize],
    lo: usize,
    hi: usize,
    weights: &[f64],
    offsets: &mut Vec<usize>,
) {
    let total: f64 = weights.iter().sum();
    let rows_only = indptr[hi] == indptr[lo];
    let val = |r: usize| {
        if rows_only {
            r as f64
        } else {
            indptr[r] as f64
        }
    };
    let (v0, v1) = (val(lo), val(hi));
    let mut cum = 0.0;
    for (p, &w) in weights.iter().enumerate() {
        cum += w;
        let prev = offsets.last().copied().unwrap_or(lo).max(lo);
        let b = if p + 1 == weights.len() {
            hi
        } else {
            let target = v0 + (v1 - v0) * (cum / total);
            // First row boundary r in lo..=hi with val(r) >= target (binary search),
            // then the closer of r - 1 and r.
            let (mut l, mut h) = (lo, hi + 1);
            while l < h {
                let mid = l + (h - l) / 2;
                if val(mid) < target {
                    l = mid + 1;
                } else {
                    h = mid;
                }
            }
            let mut r = l.min(hi);
            if r > lo && target - val(r - 1) <= val(r) - target {
                r -= 1;
            }
            r.max(prev)
        };
        offsets.push(b);
    }
}

/// Splits ranks `0..nranks` into `ngroups` contiguous groups whose sizes differ by at
/// most one (JDmg's "P/k equal groups", McCombs et al. §6).
///
/// # Errors
/// [`PartitionError::BadGroupCount`] if `ngroups == 0` or `ngroups > nranks`.
pub fn split_ranks(nranks: usize, ngroups: usize) -> Result<Vec<Vec<usize>>, PartitionError> {
    if ngroups == 0 || ngroups > nranks {
        return Err(PartitionError::BadGroupCount { nranks, ngroups });
    }
    let rp = RowPartition::equal_rows(nranks, ngroups)?;
    Ok((0..ngroups).map(|g| rp.range(g).collect()).collect())
}

/// The rows of one matrix spread over a subset of the ranks of a communicator: part
/// `q` of [`GroupPartition::rows`] lives on global rank `ranks()[q]`.
///
/// Used for multigrain solve groups (McCombs et al. §6): each group has its own row
/// partition of A. The fine layout over all ranks is [`GroupPartition::all`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupPartition {
    rows: RowPartition,
    ranks: Vec<usize>,
    nranks: usize,
}

impl GroupPartition {
    /// Pairs a row partition with the global ranks holding its parts, in a communicator
    /// of `nranks` ranks.
    ///
    /// # Errors
    /// [`PartitionError::BadRankMap`] if `ranks.len() != rows.nparts()`, a rank repeats or
    /// is `>= nranks`.
    pub fn new(
        rows: RowPartition,
        ranks: Vec<usize>,
        nranks: usize,
    ) -> Result<Self, PartitionError> {
        if ranks.len() != rows.nparts() {
            return Err(PartitionError::BadRankMap {
                reason: format!("{} ranks for {} parts", ranks.len(), rows.nparts()),
            });
        }
        let mut seen = vec![false; nranks];
        for &r in &ranks {
            if r >= nranks {
                return Err(PartitionError::BadRankMap {
                    reason: format!("rank {r} outside communicator of size {nranks}"),
                });
            }
            if std::mem::replace(&mut seen[r], true) {
                return Err(PartitionError::BadRankMap {
                    reason: format!("rank {r} appears twice"),
                });
            }
        }
        Ok(Self {
            rows,
            ranks,
            nranks,
        })
    }

    /// The fine layout: part `p` on rank `p`, over all `rows.nparts()` ranks.
    pub fn all(rows: RowPartition) -> Self {
        let n = rows.nparts();
        Self {
            rows,
            ranks: (0..n).collect(),
            nranks: n,
        }
    }

    /// The rows of `a` balanced by nonzeros over the ranks `ranks` of a communicator of
    /// `nranks` ranks.
    ///
    /// # Errors
    /// [`PartitionError::NoParts`] if `ranks` is empty, plus those of [`GroupPartition::new`].
    pub fn balanced_by_nnz(
        a: &CsrMatrix,
        ranks: Vec<usize>,
        nranks: usize,
    ) -> Result<Self, PartitionError> {
        let rows = RowPartition::balanced_by_nnz(a, ranks.len())?;
        Self::new(rows, ranks, nranks)
    }

    /// The row partition over the group's parts.
    pub fn rows(&self) -> &RowPartition {
        &self.rows
    }
    /// Global rank of each part.
    pub fn ranks(&self) -> &[usize] {
        &self.ranks
    }
    /// Size of the communicator the ranks refer to.
    pub fn nranks(&self) -> usize {
        self.nranks
    }
    /// Global rank holding part `q`.
    ///
    /// # Panics
    /// If `q >= rows().nparts()` (a programming error).
    pub fn rank_of_part(&self, q: usize) -> usize {
        self.ranks[q]
    }
    /// The part held by global rank `rank`, or `None` if the rank is not in the group.
    pub fn part_of_rank(&self, rank: usize) -> Option<usize> {
        self.ranks.iter().position(|&r| r == rank)
    }
    /// Global rows held by `rank` (empty if it is not in the group).
    pub fn rows_of_rank(&self, rank: usize) -> Range<usize> {
        match self.part_of_rank(rank) {
            Some(q) => self.rows.range(q),
            None => 0..0,
        }
    }
}

/// One piece of a [`Redistribution`]: global rows `rows` move from rank `src` to rank `dst`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transfer {
    /// Sending rank.
    pub src: usize,
    /// Receiving rank.
    pub dst: usize,
    /// Global rows moved (contiguous, non-empty).
    pub rows: Range<usize>,
    /// Offset of the first row in the sender's local vector.
    pub src_offset: usize,
    /// Offset of the first row in the receiver's local vector.
    pub dst_offset: usize,
}

/// Index maps that move a distributed block of vectors from one [`GroupPartition`] to
/// another (e.g. the fine layout over all `P` ranks to a solve group's layout).
///
/// Transfers are sorted by `(src, dst)`; each (src, dst) pair appears at most once
/// because both layouts are contiguous. A rank's send buffer for `k` vectors holds, for
/// each destination in rank order, the `k` pieces one after the other (vector-major),
/// which is what [`Redistribution::pack`] writes and [`Redistribution::unpack`] reads;
/// counts for `Comm::all_to_all_v` are [`Redistribution::send_counts`] times `k`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redistribution {
    nranks: usize,
    transfers: Vec<Transfer>,
    from_len: Vec<usize>,
    to_len: Vec<usize>,
}

impl Redistribution {
    /// The transfers moving rows from layout `from` to layout `to`.
    ///
    /// # Errors
    /// [`PartitionError::RowMismatch`] if the layouts cover different numbers of rows or
    /// refer to communicators of different sizes.
    pub fn between(from: &GroupPartition, to: &GroupPartition) -> Result<Self, PartitionError> {
        if from.rows.nrows() != to.rows.nrows() {
            return Err(PartitionError::RowMismatch {
                what: "destination layout",
                got: to.rows.nrows(),
                expected: from.rows.nrows(),
            });
        }
        if from.nranks != to.nranks {
            return Err(PartitionError::RowMismatch {
                what: "destination communicator (ranks)",
                got: to.nranks,
                expected: from.nranks,
            });
        }
        let mut transfers = Vec::new();
        let (fo, to_off) = (from.rows.offsets(), to.rows.offsets());
        // Merge the two sorted boundary lists.
        let (mut p, mut q) = (0usize, 0usize);
        let n = from.rows.nrows();
        let mut lo = 0usize;
        while lo < n {
            while fo[p + 1] <= lo {
                p += 1;
            }
            while to_off[q + 1] <= lo {
                q += 1;
            }
            let hi = fo[p + 1].min(to_off[q + 1]);
            transfers.push(Transfer {
                src: from.ranks[p],
                dst: to.ranks[q],
                rows: lo..hi,
                src_offset: lo - fo[p],
                dst_offset: lo - to_off[q],
            });
            lo = hi;
        }
        transfers.sort_by_key(|t| (t.src, t.dst));
        let mut from_len = vec![0; from.nranks];
        let mut to_len = vec![0; to.nranks];
        for (q, &r) in from.ranks.iter().enumerate() {
            from_len[r] = from.rows.len(q);
        }
        for (q, &r) in to.ranks.iter().enumerate() {
            to_len[r] = to.rows.len(q);
        }
        Ok(Self {
            nranks: from.nranks,
            transfers,
            from_len,
            to_len,
        })
    }

    /// All transfers, sorted by `(src, dst)`.
    pub fn transfers(&self) -> &[Transfer] {
        &self.transfers
    }
    /// Transfers sent by `rank`, sorted by destination.
    pub fn sends(&self, rank: usize) -> impl Iterator<Item = &Transfer> {
        self.transfers.iter().filter(move |t| t.src == rank)
    }
    /// Transfers received by `rank`, sorted by source.
    pub fn recvs(&self, rank: usize) -> impl Iterator<Item = &Transfer> {
        self.transfers.iter().filter(move |t| t.dst == rank)
    }
    /// Local vector length of `rank` in the source layout (0 if not in it).
    pub fn from_len(&self, rank: usize) -> usize {
        self.from_len[rank]
    }
    /// Local vector length of `rank` in the destination layout (0 if not in it).
    pub fn to_len(&self, rank: usize) -> usize {
        self.to_len[rank]
    }
    /// Number of rows `rank` sends to each rank (length `nranks`, per vector).
    pub fn send_counts(&self, rank: usize) -> Vec<usize> {
        let mut c = vec![0; self.nranks];
        for t in self.sends(rank) {
            c[t.dst] += t.rows.len();
        }
        c
    }
    /// Number of rows `rank` receives from each rank (length `nranks`, per vector).
    pub fn recv_counts(&self, rank: usize) -> Vec<usize> {
        let mut c = vec![0; self.nranks];
        for t in self.recvs(rank) {
            c[t.src] += t.rows.len();
        }
        c
    }
    /// Packs `k` column-major local vectors `x` (length `from_len(rank) * k`) of `rank`
    /// into `send` (length `Σ send_counts(rank) * k`), destination-major, vector-major
    /// inside a destination.
    ///
    /// # Panics
    /// If the buffer lengths do not match (a programming error).
    pub fn pack(&self, rank: usize, x: &[f64], k: usize, send: &mut [f64]) {
        let n = self.from_len[rank];
        assert_eq!(x.len(), n * k, "Redistribution::pack: x length");
        let mut w = 0;
        for t in self.sends(rank) {
            let m = t.rows.len();
            for j in 0..k {
                let s = j * n + t.src_offset;
                send[w..w + m].copy_from_slice(&x[s..s + m]);
                w += m;
            }
        }
        assert_eq!(w, send.len(), "Redistribution::pack: send length");
    }
    /// Unpacks `recv` (as received from `all_to_all_v`, source-major) into `k`
    /// column-major local vectors `y` of `rank` in the destination layout.
    ///
    /// # Panics
    /// If the buffer lengths do not match (a programming error).
    pub fn unpack(&self, rank: usize, recv: &[f64], k: usize, y: &mut [f64]) {
        let n = self.to_len[rank];
        assert_eq!(y.len(), n * k, "Redistribution::unpack: y length");
        let mut r = 0;
        for t in self.recvs(rank) {
            let m = t.rows.len();
            for j in 0..k {
                let d = j * n + t.dst_offset;
                y[d..d + m].copy_from_slice(&recv[r..r + m]);
                r += m;
            }
        }
        assert_eq!(r, recv.len(), "Redistribution::unpack: recv length");
    }
}

/// The communication plan of one part of a row partition for distributed SpMV.
///
/// The part's input vector is laid out as `[owned (len(part)) | ghosts (nghost())]`;
/// ghosts are sorted by global index, hence grouped by owning rank in rank order, so
/// the values received from `Comm::all_to_all_v` land in ghost order directly.
/// [`HaloPlan::local`] holds the part's rows with columns renumbered into that layout.
///
/// Built in two steps so that no global matrix is needed: [`HaloPlan::new`] computes
/// the receive side from the part's own rows; the send side comes from the other
/// parts' requests ([`HaloPlan::requests_to`]) through [`HaloPlan::set_sends`] (after an
/// exchange, see `precond::dist`), or all at once from the global matrix with
/// [`HaloPlan::build_all`].
#[derive(Debug, Clone, PartialEq)]
pub struct HaloPlan {
    part: usize,
    owned: Range<usize>,
    ghosts: Vec<usize>,
    recv_ptr: Vec<usize>,
    send_idx: Vec<usize>,
    send_ptr: Vec<usize>,
    local: CsrMatrix,
}

impl HaloPlan {
    /// The receive side of part `part`: `local_rows` are its rows (`partition.len(part)`
    /// rows, global column indices, `partition.nrows()` columns).
    ///
    /// The send side is empty until [`HaloPlan::set_sends`].
    ///
    /// # Errors
    /// [`PartitionError::NoSuchPart`], or [`PartitionError::RowMismatch`] if the row or
    /// column count of `local_rows` does not fit the partition.
    pub fn new(
        local_rows: &CsrMatrix,
        partition: &RowPartition,
        part: usize,
    ) -> Result<Self, PartitionError> {
        let nparts = partition.nparts();
        if part >= nparts {
            return Err(PartitionError::NoSuchPart { part, nparts });
        }
        let owned = partition.range(part);
        if local_rows.nrows() != owned.len() {
            return Err(PartitionError::RowMismatch {
                what: "local rows",
                got: local_rows.nrows(),
                expected: owned.len(),
            });
        }
        if local_rows.ncols() != partition.nrows() {
            return Err(PartitionError::RowMismatch {
                what: "columns of local rows",
                got: local_rows.ncols(),
                expected: partition.nrows(),
            });
        }
        let n = partition.nrows();
        // Mark needed remote columns (a bitmap over global columns keeps this O(nnz + n)).
        let mut needed = vec![false; n];
        for &c in local_rows.indices() {
            let c = c as usize;
            if !owned.contains(&c) {
                needed[c] = true;
            }
        }
        let ghosts: Vec<usize> = (0..n).filter(|&c| needed[c]).collect();
        drop(needed);
        let mut recv_ptr = vec![0usize; nparts + 1];
        for &g in &ghosts {
            // Columns are < n, so owner() is Some.
            let p = partition.owner(g).unwrap_or(part);
            recv_ptr[p + 1] += 1;
        }
        for p in 0..nparts {
            recv_ptr[p + 1] += recv_ptr[p];
        }
        let nloc = owned.len();
        // In global order a row reads [ghosts below `owned`] [owned] [ghosts above]; the
        // renumbered order is [owned] [ghosts below] [ghosts above], each segment still
        // increasing, so every row is a rotation of its global order.
        let ip = local_rows.indptr();
        let (gi, gv) = (local_rows.indices(), local_rows.data());
        let mut indices = Vec::with_capacity(gi.len());
        let mut data = Vec::with_capacity(gi.len());
        let renumber = |c: usize| -> u32 {
            if owned.contains(&c) {
                (c - owned.start) as u32
            } else {
                (nloc + ghosts.partition_point(|&g| g < c)) as u32
            }
        };
        for r in 0..nloc {
            let (lo, hi) = (ip[r], ip[r + 1]);
            let cols = &gi[lo..hi];
            let a = cols.partition_point(|&c| (c as usize) < owned.start);
            let b = cols.partition_point(|&c| (c as usize) < owned.end);
            for seg in [a..b, 0..a, b..cols.len()] {
                for p in seg {
                    indices.push(renumber(cols[p] as usize));
                    data.push(gv[lo + p]);
                }
            }
        }
        let local =
            CsrMatrix::from_parts_unchecked(nloc, nloc + ghosts.len(), ip.to_vec(), indices, data);
        Ok(Self {
            part,
            owned,
            ghosts,
            recv_ptr,
            send_idx: Vec::new(),
            send_ptr: vec![0; nparts + 1],
            local,
        })
    }

    /// Sets the send side from the requests of every part: `requests[r]` are the global
    /// rows part `r` needs from this part (i.e. part `r`'s `requests_to(self.part())`).
    ///
    /// # Errors
    /// [`PartitionError::RequestCount`] if `requests.len()` is not the number of parts;
    /// [`PartitionError::NotOwned`] if a requested row is not owned by this part.
    pub fn set_sends<R: AsRef<[usize]>>(&mut self, requests: &[R]) -> Result<(), PartitionError> {
        let nparts = self.recv_ptr.len() - 1;
        if requests.len() != nparts {
            return Err(PartitionError::RequestCount {
                got: requests.len(),
                expected: nparts,
            });
        }
        let mut send_idx = Vec::new();
        let mut send_ptr = Vec::with_capacity(nparts + 1);
        send_ptr.push(0);
        for req in requests {
            for &g in req.as_ref() {
                if !self.owned.contains(&g) {
                    return Err(PartitionError::NotOwned {
                        part: self.part,
                        row: g,
                        lo: self.owned.start,
                        hi: self.owned.end,
                    });
                }
                send_idx.push(g - self.owned.start);
            }
            send_ptr.push(send_idx.len());
        }
        self.send_idx = send_idx;
        self.send_ptr = send_ptr;
        Ok(())
    }

    /// Plans of every part from the global matrix `a` (pure code, for serial set-ups
    /// and tests): each part's rows are `a.row_slice(range)`.
    ///
    /// # Errors
    /// [`PartitionError::NotSquare`] if `a` is not square; [`PartitionError::RowMismatch`]
    /// if `a.nrows() != partition.nrows()`.
    pub fn build_all(a: &CsrMatrix, partition: &RowPartition) -> Result<Vec<Self>, PartitionError> {
        if a.nrows() != a.ncols() {
            return Err(PartitionError::NotSquare {
                nrows: a.nrows(),
                ncols: a.ncols(),
            });
        }
        if a.nrows() != partition.nrows() {
            return Err(PartitionError::RowMismatch {
                what: "matrix",
                got: a.nrows(),
                expected: partition.nrows(),
            });
        }
        let np = partition.nparts();
        let mut plans = (0..np)
            .map(|p| {
                let r = partition.range(p);
                Self::new(&a.row_slice(r.start, r.end), partition, p)
            })
            .collect::<Result<Vec<_>, _>>()?;
        for p in 0..np {
            let reqs: Vec<Vec<usize>> = (0..np).map(|r| plans[r].requests_to(p).to_vec()).collect();
            plans[p].set_sends(&reqs)?;
        }
        Ok(plans)
    }

    /// This plan's part.
    pub fn part(&self) -> usize {
        self.part
    }
    /// Number of parts of the partition.
    pub fn nparts(&self) -> usize {
        self.recv_ptr.len() - 1
    }
    /// Global rows owned by this part.
    pub fn owned(&self) -> Range<usize> {
        self.owned.clone()
    }
    /// Number of owned rows.
    pub fn nowned(&self) -> usize {
        self.owned.len()
    }
    /// Number of ghost entries.
    pub fn nghost(&self) -> usize {
        self.ghosts.len()
    }
    /// Global indices of the ghosts, sorted; ghost `g` is local column `nowned() + g`.
    pub fn ghosts(&self) -> &[usize] {
        &self.ghosts
    }
    /// Global rows this part needs from part `r` (sorted), i.e. its receive list from `r`.
    pub fn requests_to(&self, r: usize) -> &[usize] {
        &self.ghosts[self.recv_ptr[r]..self.recv_ptr[r + 1]]
    }
    /// Number of entries received from each part (length `nparts()`).
    pub fn recv_counts(&self) -> Vec<usize> {
        self.recv_ptr.windows(2).map(|w| w[1] - w[0]).collect()
    }
    /// Offsets of each part's ghosts in ghost order (length `nparts() + 1`).
    pub fn recv_ptr(&self) -> &[usize] {
        &self.recv_ptr
    }
    /// Local (owned-relative) indices sent to part `r`.
    pub fn sends_to(&self, r: usize) -> &[usize] {
        &self.send_idx[self.send_ptr[r]..self.send_ptr[r + 1]]
    }
    /// Number of entries sent to each part (length `nparts()`).
    pub fn send_counts(&self) -> Vec<usize> {
        self.send_ptr.windows(2).map(|w| w[1] - w[0]).collect()
    }
    /// Offsets of each part's send list in [`HaloPlan::send_indices`] (length `nparts() + 1`).
    pub fn send_ptr(&self) -> &[usize] {
        &self.send_ptr
    }
    /// All send indices (local, owned-relative), destination-major.
    pub fn send_indices(&self) -> &[usize] {
        &self.send_idx
    }
    /// The part's rows, columns renumbered: `0..nowned()` owned, then the ghosts.
    pub fn local(&self) -> &CsrMatrix {
        &self.local
    }
    /// Consumes the plan, returning the renumbered local matrix.
    pub fn into_local(self) -> CsrMatrix {
        self.local
    }
    /// Moves the renumbered local matrix out, leaving an empty `0 × 0` matrix in the
    /// plan (for operators that re-split it and keep only the communication lists).
    pub fn take_local(&mut self) -> CsrMatrix {
        std::mem::take(&mut self.local)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_rows_spreads_remainder() {
        let p = RowPartition::equal_rows(10, 3).unwrap();
        assert_eq!(p.offsets(), &[0, 4, 7, 10]);
        assert_eq!(p.owner(3), Some(0));
        assert_eq!(p.owner(4), Some(1));
        assert_eq!(p.owner(9), Some(2));
        assert_eq!(p.owner(10), None);
        assert_eq!(RowPartition::equal_rows(5, 0), Err(PartitionError::NoParts));
    }

    #[test]
    fn owner_skips_empty_parts() {
        let p = RowPartition::from_offsets(vec![0, 0, 3, 3, 5]).unwrap();
        assert_eq!(p.owner(0), Some(1));
        assert_eq!(p.owner(3), Some(3));
        assert_eq!(p.len(2), 0);
        assert_eq!(
            RowPartition::from_offsets(vec![0, 3, 2]),
            Err(PartitionError::BadOffsets { position: 2 })
        );
    }

    #[test]
    fn refine_tiles_each_coarse_part_in_proportion() {
        // identity: one nonzero per row, so nnz shares are row shares.
        let a = CsrMatrix::identity(100);
        let coarse = RowPartition::from_offsets(vec![0, 40, 100]).unwrap();
        let fine =
            RowPartition::refine_weighted_by_nnz(&a, &coarse, &[1.0, 3.0, 1.0, 1.0]).unwrap();
        // coarse part 0 (40 rows) split 1:3, coarse part 1 (60 rows) split 1:1
        assert_eq!(fine.offsets(), &[0, 10, 40, 70, 100]);
        // a zero weight gives an empty sub-part; the coarse boundary stays
        let fine =
            RowPartition::refine_weighted_by_nnz(&a, &coarse, &[0.0, 1.0, 2.0, 1.0]).unwrap();
        assert_eq!(fine.offsets(), &[0, 0, 40, 80, 100]);
        // rows without entries: split by rows
        let empty = CsrMatrix::from_triplets(10, 10, &[]).unwrap();
        let c = RowPartition::from_offsets(vec![0, 5, 10]).unwrap();
        let f = RowPartition::refine_weighted_by_nnz(&empty, &c, &[4.0, 1.0, 1.0, 4.0]).unwrap();
        assert_eq!(f.offsets(), &[0, 4, 5, 6, 10]);
        // equal weights reproduce balanced_by_nnz inside each part of a non-uniform matrix
        let t: Vec<(usize, usize, f64)> = (0..30)
            .flat_map(|i| (0..=(i % 4)).map(move |j| (i, (i + j) % 30, 1.0)))
            .collect();
        let b = CsrMatrix::from_triplets(30, 30, &t).unwrap();
        let c = RowPartition::balanced_by_nnz(&b, 2).unwrap();
        let f = RowPartition::refine_weighted_by_nnz(&b, &c, &[1.0; 6]).unwrap();
        for m in 0..2 {
            let r = c.range(m);
            assert_eq!(f.offsets()[3 * m], r.start);
            assert_eq!(f.offsets()[3 * m + 3], r.end);
            let sub = b.row_slice(r.start, r.end);
            let want = RowPartition::balanced_by_nnz(&sub, 3).unwrap();
            let got: Vec<usize> = f.offsets()[3 * m..=3 * m + 3]
                .iter()
                .map(|&o| o - r.start)
                .collect();
            assert_eq!(got, want.offsets());
        }
    }

    #[test]
    fn refine_errors() {
        let a = CsrMatrix::identity(10);
        let c = RowPartition::equal_rows(10, 2).unwrap();
        assert_eq!(
            RowPartition::refine_weighted_by_nnz(&a, &c, &[1.0, 1.0, 1.0]),
            Err(PartitionError::WeightCount {
                weights: 3,
                parts: 2
            })
        );
        assert_eq!(
            RowPartition::refine_weighted_by_nnz(&a, &c, &[]),
            Err(PartitionError::WeightCount {
                weights: 0,
                parts: 2
            })
        );
        assert_eq!(
            RowPartition::refine_weighted_by_nnz(&a, &c, &[1.0, 1.0, 0.0, 0.0]),
            Err(PartitionError::BadWeight {
                index: 2,
                value: 0.0
            })
        );
        assert!(matches!(
            RowPartition::refine_weighted_by_nnz(&a, &c, &[1.0, f64::INFINITY]),
            Err(PartitionError::BadWeight { index: 1, .. })
        ));
        let c9 = RowPartition::equal_rows(9, 1).unwrap();
        assert!(matches!(
            RowPartition::refine_weighted_by_nnz(&a, &c9, &[1.0]),
            Err(PartitionError::RowMismatch { .. })
        ));
    }
}
