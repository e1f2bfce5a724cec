//! Distributed SpMV over `lbcomm::Comm` using halo plans from `matrices::partition`.
//!
//! [`DistCsrOperator`] holds one rank's rows of a square matrix `A` (global column
//! indices) under a [`RowPartition`] with one part per rank (part `p` on rank `p`). At
//! construction it builds the [`HaloPlan`] (receive side from its own rows, send side
//! from one exchange of requests), splits its rows into an owned-column block `A_oo`
//! and a ghost-column block `A_og` (only rows that touch ghosts), and sizes every
//! buffer. `apply_block` then:
//!
//! 1. packs the owned entries other ranks need (for all `k` vectors);
//! 2. runs **one** `all_to_all_v` carrying exactly those entries;
//! 3. computes `y = A_oo x_owned` — concurrently with step 2 when overlap is enabled;
//! 4. adds `A_og x_ghost` on the rows that have ghosts.
//!
//! **Overlap and threading.** With [`DistOptions::overlap`] the local product is
//! spawned into the operator's rayon pool while the *calling* thread performs the
//! exchange (`rayon::ThreadPool::in_place_scope`), so the communicator is only ever
//! used from the thread that called `apply_block`: this is compatible with MPI's
//! `Threading::Funneled` (DESIGN.md) and needs no `Sync` bound on the communicator.
//! The pool then does the local part with `threads` threads while the caller waits
//! in the collective, so a rank uses up to `threads + 1` OS threads. Without overlap
//! the steps run in order and the caller computes together with `threads - 1` pool
//! threads. Per apply, the only heap allocations are rayon's small boxed jobs (the
//! spawned local product, and one per helper thread when `threads > 1`); buffers are
//! sized at construction (a larger `k` than [`DistOptions::max_block`] grows them once).
//!
//! [`redistribute`] moves blocks of vectors between layouts (fine ↔ solve group,
//! `003_*` §6) with the index maps of [`Redistribution`].

use std::cell::RefCell;

use lbcomm::Comm;
use matrices::{CsrMatrix, HaloPlan, PartitionError, Redistribution, RowPartition};
use thiserror::Error;

use crate::operator::Operator;
use crate::spmv::{Engine, SpmvError};

/// Why a distributed operator could not be built.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum DistError {
    /// The partition does not have one part per rank.
    #[error("partition has {parts} parts but the communicator has {ranks} ranks")]
    PartsRanks { parts: usize, ranks: usize },
    /// The partition or the halo plan rejected the local rows.
    #[error(transparent)]
    Partition(#[from] PartitionError),
    /// The local SpMV engine could not be set up.
    #[error(transparent)]
    Spmv(#[from] SpmvError),
    /// A peer sent a halo request that is not a valid row index.
    #[error("rank {from} sent an invalid halo request value {value}")]
    BadRequest { from: usize, value: f64 },
}

/// Options of [`DistCsrOperator`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DistOptions {
    /// rayon threads for the local products of this rank (≥ 1).
    pub threads: usize,
    /// Compute the owned-column product while the halo exchange runs (see module docs).
    pub overlap: bool,
    /// Block size the buffers are sized for at construction; a larger `k` later grows
    /// them once.
    pub max_block: usize,
}

impl Default for DistOptions {
    fn default() -> Self {
        Self {
            threads: 1,
            overlap: false,
            max_block: 1,
        }
    }
}

struct Scratch {
    send: Vec<f64>,
    recv: Vec<f64>,
    ghost: Vec<f64>,
    send_counts: Vec<usize>,
    recv_counts: Vec<usize>,
}

/// Nominal seconds per stored nonzero and vector that [`DistCsrOperator::apply_block`]
/// charges to its communicator's clock ([`Comm::charge`]): a no-op on measuring clocks
/// (MPI, and threads on CPU time); on manual clocks (`lbcomm::ClockMode::Manual`)
/// the products alone set the time, times the rank's slowdown, so that load-balancing
/// tests do not depend on the machine's load. 1 ns is about one core's rate on a
/// 7-point stencil.
pub const CHARGE_PER_NONZERO: f64 = 1e-9;

/// One rank's part of a distributed square sparse matrix as an [`Operator`] on the
/// rank's owned rows (local vector length `partition.len(rank)`).
pub struct DistCsrOperator<'a, C: Comm + ?Sized> {
    comm: &'a C,
    plan: HaloPlan,
    a_oo: CsrMatrix,
    a_og: CsrMatrix,
    ghost_rows: Vec<usize>,
    engine: Engine,
    overlap: bool,
    send_counts1: Vec<usize>,
    recv_counts1: Vec<usize>,
    scratch: RefCell<Scratch>,
}

impl<'a, C: Comm + ?Sized> DistCsrOperator<'a, C> {
    /// Builds the operator from this rank's rows `local_rows` (`partition.len(rank)` rows,
    /// `partition.nrows()` columns, global column indices). Collective: every rank of
    /// `comm` must call it (one `all_gather_u64` and one `all_to_all_v` to exchange the
    /// halo requests; indices travel as `f64`, exact below 2^53).
    ///
    /// # Errors
    /// [`DistError::PartsRanks`] if `partition.nparts() != comm.size()`;
    /// [`DistError::Partition`] if the rows do not fit the partition;
    /// [`DistError::Spmv`] for zero threads, a failed pool or inconsistent CSR arrays;
    /// [`DistError::BadRequest`] if a peer's request is not an owned row.
    pub fn new(
        local_rows: &CsrMatrix,
        partition: &RowPartition,
        comm: &'a C,
        opts: DistOptions,
    ) -> Result<Self, DistError> {
        let np = comm.size();
        let me = comm.rank();
        if partition.nparts() != np {
            return Err(DistError::PartsRanks {
                parts: partition.nparts(),
                ranks: np,
            });
        }
        if opts.threads == 0 {
            return Err(SpmvError::ZeroThreads.into());
        }
        crate::spmv::validate(local_rows)?;
        let mut plan = HaloPlan::new(local_rows, partition, me)?;

        // Exchange requests: counts[r * np + p] = entries rank r needs from rank p.
        let my_counts: Vec<u64> = plan.recv_counts().iter().map(|&c| c as u64).collect();
        let mut counts = vec![0u64; np * np];
        comm.all_gather_u64(&my_counts, &mut counts);
        let req_send: Vec<f64> = plan.ghosts().iter().map(|&g| g as f64).collect();
        let recv_counts1 = plan.recv_counts();
        let send_counts1: Vec<usize> = (0..np).map(|r| counts[r * np + me] as usize).collect();
        let mut req_recv = vec![0.0; send_counts1.iter().sum()];
        comm.all_to_all_v(&req_send, &recv_counts1, &mut req_recv, &send_counts1);
        let mut requests = Vec::with_capacity(np);
        let mut off = 0;
        for (r, &c) in send_counts1.iter().enumerate() {
            let mut list = Vec::with_capacity(c);
            for &v in &req_recv[off..off + c] {
                if !(v >= 0.0 && v.fract() == 0.0 && v < partition.nrows() as f64) {
                    return Err(DistError::BadRequest { from: r, value: v });
                }
                list.push(v as usize);
            }
            requests.push(list);
            off += c;
        }
        plan.set_sends(&requests)?;

        // Split the renumbered rows into owned columns and ghost columns.
        let nown = plan.nowned();
        let ng = plan.nghost();
        // The plan keeps only the lists; the rows live on in the two blocks below.
        let loc = plan.take_local();
        let (ip, ix, dv) = (loc.indptr(), loc.indices(), loc.data());
        let (mut oo_p, mut oo_i, mut oo_d) = (vec![0usize], Vec::new(), Vec::new());
        let (mut og_p, mut og_i, mut og_d) = (vec![0usize], Vec::new(), Vec::new());
        let mut ghost_rows = Vec::new();
        for r in 0..nown {
            let cols = &ix[ip[r]..ip[r + 1]];
            // Renumbered rows are sorted: owned columns first, then ghosts.
            let split = cols.partition_point(|&c| (c as usize) < nown);
            oo_i.extend_from_slice(&cols[..split]);
            oo_d.extend_from_slice(&dv[ip[r]..ip[r] + split]);
            oo_p.push(oo_i.len());
            if split < cols.len() {
                og_i.extend(cols[split..].iter().map(|&c| c - nown as u32));
                og_d.extend_from_slice(&dv[ip[r] + split..ip[r + 1]]);
                og_p.push(og_i.len());
                ghost_rows.push(r);
            }
        }
        let a_oo = CsrMatrix::from_parts_unchecked(nown, nown, oo_p, oo_i, oo_d);
        let a_og = CsrMatrix::from_parts_unchecked(ghost_rows.len(), ng, og_p, og_i, og_d);
        // Overlap needs a pool even for one thread: the caller thread communicates.
        let engine = Engine::build(&a_oo, opts.threads, opts.overlap)?;
        let kb = opts.max_block.max(1);
        let scratch = RefCell::new(Scratch {
            send: vec![0.0; plan.send_indices().len() * kb],
            recv: vec![0.0; ng * kb],
            ghost: vec![0.0; ng * kb],
            send_counts: vec![0; np],
            recv_counts: vec![0; np],
        });
        Ok(Self {
            comm,
            plan,
            a_oo,
            a_og,
            ghost_rows,
            engine,
            overlap: opts.overlap,
            send_counts1,
            recv_counts1,
            scratch,
        })
    }

    /// The halo plan (ghost and send lists). Its local matrix was moved into the
    /// operator's owned-column and ghost-column blocks, so `plan().local()` is empty.
    pub fn plan(&self) -> &HaloPlan {
        &self.plan
    }

    /// The communicator.
    pub fn comm(&self) -> &'a C {
        self.comm
    }

    /// Number of ghost entries received per vector and apply.
    pub fn nghost(&self) -> usize {
        self.plan.nghost()
    }

    /// Number of entries sent per vector and apply.
    pub fn nsend(&self) -> usize {
        self.plan.send_indices().len()
    }

    /// Rows of this rank that need no ghost entries (computed during the exchange when
    /// overlapping).
    pub fn ninterior(&self) -> usize {
        self.plan.nowned() - self.ghost_rows.len()
    }
}

impl<C: Comm + ?Sized> Operator for DistCsrOperator<'_, C> {
    fn nrows(&self) -> usize {
        self.plan.nowned()
    }
    /// This rank's entries and rows, and the ghost entries received.
    fn work_per_vector(&self) -> f64 {
        let nnz = self.a_oo.nnz() + self.a_og.nnz();
        1.5 * nnz as f64 + 2.0 * self.plan.nowned() as f64 + self.plan.nghost() as f64
    }

    /// `y = A x` on this rank's rows for `k` column-major vectors. Collective: every
    /// rank calls it with the same `k`.
    ///
    /// # Panics
    /// If `x.len()` or `y.len()` is not `nrows() * k` (a programming error).
    fn apply_block(&self, x: &[f64], y: &mut [f64], k: usize) {
        let n = self.plan.nowned();
        assert_eq!(x.len(), n * k, "DistCsrOperator: x length");
        assert_eq!(y.len(), n * k, "DistCsrOperator: y length");
        let np = self.comm.size();
        let ng = self.plan.nghost();
        let nnz = self.a_oo.nnz() + self.a_og.nnz();
        self.comm.charge(CHARGE_PER_NONZERO * (nnz * k) as f64);
        let mut guard = self.scratch.borrow_mut();
        let s = &mut *guard;
        let ns = self.plan.send_indices().len();
        if s.send.len() < ns * k {
            s.send.resize(ns * k, 0.0);
        }
        if s.recv.len() < ng * k {
            s.recv.resize(ng * k, 0.0);
            s.ghost.resize(ng * k, 0.0);
        }
        // 1. Pack: for each destination r, k consecutive pieces of its send list.
        let sp = self.plan.send_ptr();
        let sidx = self.plan.send_indices();
        let mut w = 0;
        for r in 0..np {
            let list = &sidx[sp[r]..sp[r + 1]];
            for j in 0..k {
                let xj = &x[j * n..(j + 1) * n];
                for (d, &i) in s.send[w..w + list.len()].iter_mut().zip(list) {
                    *d = xj[i];
                }
                w += list.len();
            }
            s.send_counts[r] = self.send_counts1[r] * k;
            s.recv_counts[r] = self.recv_counts1[r] * k;
        }
        let Scratch {
            send,
            recv,
            ghost,
            send_counts,
            recv_counts,
        } = s;
        let send = &send[..ns * k];
        let recv = &mut recv[..ng * k];

        // 2 + 3. Exchange and owned-column product.
        match (self.overlap, self.engine.pool()) {
            (true, Some(pool)) => {
                let (engine, a_oo) = (&self.engine, &self.a_oo);
                let yy = &mut *y;
                pool.in_place_scope(|sc| {
                    sc.spawn(move |_| engine.apply_here(a_oo, x, yy, k));
                    // The calling thread communicates (MPI Funneled-safe).
                    self.comm.all_to_all_v(send, send_counts, recv, recv_counts);
                });
            }
            _ => {
                self.comm.all_to_all_v(send, send_counts, recv, recv_counts);
                self.engine.apply(&self.a_oo, x, y, k);
            }
        }
        if ng == 0 {
            return;
        }
        // Unpack: from rank r, k pieces of recv_counts1[r]; ghosts of r start at recv_ptr[r].
        let rp = self.plan.recv_ptr();
        let ghost = &mut ghost[..ng * k];
        let mut rd = 0;
        for (&c, &start) in self.recv_counts1.iter().zip(rp) {
            for j in 0..k {
                let d = j * ng + start;
                ghost[d..d + c].copy_from_slice(&recv[rd..rd + c]);
                rd += c;
            }
        }
        // 4. y[ghost rows] += A_og x_ghost.
        let (gp, gi, gd) = (self.a_og.indptr(), self.a_og.indices(), self.a_og.data());
        for j in 0..k {
            let xg = &ghost[j * ng..(j + 1) * ng];
            let yj = &mut y[j * n..(j + 1) * n];
            for (t, &row) in self.ghost_rows.iter().enumerate() {
                let mut acc = 0.0;
                for p in gp[t]..gp[t + 1] {
                    acc += gd[p] * xg[gi[p] as usize];
                }
                yj[row] += acc;
            }
        }
    }
}

/// Reusable buffers of [`redistribute`].
#[derive(Debug, Default, Clone)]
pub struct RedistScratch {
    send: Vec<f64>,
    recv: Vec<f64>,
    send_counts: Vec<usize>,
    recv_counts: Vec<usize>,
}

/// Moves `k` column-major vectors `x` (this rank's rows in the source layout of `plan`,
/// length `plan.from_len(rank) * k`) into `y` (its rows in the destination layout,
/// length `plan.to_len(rank) * k`) with one `all_to_all_v`. Collective over `comm`,
/// whose ranks are the ones `plan` refers to. `scratch` grows on first use only.
///
/// # Panics
/// If the slice lengths do not match the plan, or `comm.size()` differs from the plan's
/// communicator size (programming errors).
pub fn redistribute<C: Comm + ?Sized>(
    comm: &C,
    plan: &Redistribution,
    x: &[f64],
    y: &mut [f64],
    k: usize,
    scratch: &mut RedistScratch,
) {
    let me = comm.rank();
    let np = comm.size();
    scratch.send_counts.clear();
    scratch.send_counts.resize(np, 0);
    scratch.recv_counts.clear();
    scratch.recv_counts.resize(np, 0);
    for t in plan.sends(me) {
        scratch.send_counts[t.dst] += t.rows.len() * k;
    }
    for t in plan.recvs(me) {
        scratch.recv_counts[t.src] += t.rows.len() * k;
    }
    let (ns, nr) = (
        scratch.send_counts.iter().sum::<usize>(),
        scratch.recv_counts.iter().sum(),
    );
    scratch.send.resize(ns, 0.0);
    scratch.recv.resize(nr, 0.0);
    plan.pack(me, x, k, &mut scratch.send);
    comm.all_to_all_v(
        &scratch.send,
        &scratch.send_counts,
        &mut scratch.recv,
        &scratch.recv_counts,
    );
    plan.unpack(me, &scratch.recv, k, y);
}
