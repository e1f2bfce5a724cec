//! `MpiComm`: the [`Comm`] trait over rsmpi (feature `mpi`; DESIGN.md, "Backends").
//!
//! MPI is initialized with `Threading::Funneled`: rayon threads may compute inside
//! a rank, but only the main thread calls MPI. Keep the returned
//! [`mpi::environment::Universe`] alive until the end of `main`; dropping it
//! finalizes MPI.
//!
//! In-place reductions and variable-count collectives reuse scratch vectors held
//! by the communicator (amortized, no allocation per call after warm-up).

use crate::comm::{Comm, ReduceOp};
use mpi::collective::SystemOperation;
use mpi::datatype::{Partition, PartitionMut};
use mpi::environment::Universe;
use mpi::topology::{Color, SimpleCommunicator};
use mpi::traits::*;
use mpi::Threading;
use std::cell::RefCell;

/// Failure to start MPI.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MpiInitError {
    /// `MPI_Init` was already called in this process.
    #[error("MPI is already initialized")]
    AlreadyInitialized,
}

/// Initializes MPI with `Threading::Funneled` and returns the universe guard
/// (finalizes MPI when dropped), the world communicator and the threading level
/// the library provides.
///
/// # Errors
/// [`MpiInitError::AlreadyInitialized`].
pub fn init() -> Result<(Universe, MpiComm, Threading), MpiInitError> {
    let (universe, threading) = mpi::initialize_with_threading(Threading::Funneled)
        .ok_or(MpiInitError::AlreadyInitialized)?;
    let world = MpiComm::new(universe.world());
    Ok((universe, world, threading))
}

/// A [`Comm`] over an MPI communicator.
pub struct MpiComm {
    comm: SimpleCommunicator,
    scratch_f: RefCell<Vec<f64>>,
    scratch_u: RefCell<Vec<u64>>,
    ints: RefCell<Vec<i32>>,
    ints_recv: RefCell<Vec<i32>>,
}

impl std::fmt::Debug for MpiComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiComm")
            .field("rank", &self.rank())
            .field("size", &self.size())
            .finish()
    }
}

fn sysop(op: ReduceOp) -> SystemOperation {
    match op {
        ReduceOp::Sum => SystemOperation::sum(),
        ReduceOp::Max => SystemOperation::max(),
        ReduceOp::Min => SystemOperation::min(),
    }
}

fn to_i32(x: usize, what: &str) -> i32 {
    i32::try_from(x).unwrap_or_else(|_| panic!("MpiComm: {what} = {x} does not fit an MPI int"))
}

impl MpiComm {
    /// Wraps an rsmpi communicator.
    pub fn new(comm: SimpleCommunicator) -> Self {
        Self {
            comm,
            scratch_f: RefCell::new(Vec::new()),
            scratch_u: RefCell::new(Vec::new()),
            ints: RefCell::new(Vec::new()),
            ints_recv: RefCell::new(Vec::new()),
        }
    }

    /// The rsmpi communicator, for calls outside the [`Comm`] trait.
    pub fn raw(&self) -> &SimpleCommunicator {
        &self.comm
    }
}

/// Fills `v` with `counts` then their displacements (2n entries).
fn fill_counts(v: &mut Vec<i32>, counts: &[usize]) {
    v.clear();
    v.extend(counts.iter().map(|&c| to_i32(c, "count")));
    let mut off = 0usize;
    for &c in counts {
        v.push(to_i32(off, "displacement"));
        off += c;
    }
}

impl Comm for MpiComm {
    fn rank(&self) -> usize {
        self.comm.rank() as usize
    }
    fn size(&self) -> usize {
        self.comm.size() as usize
    }
    /// `MPI_Wtime`.
    fn wtime(&self) -> f64 {
        mpi::time()
    }
    fn barrier(&self) {
        self.comm.barrier();
    }
    fn all_reduce(&self, buf: &mut [f64], op: ReduceOp) {
        let mut s = self.scratch_f.borrow_mut();
        s.clear();
        s.extend_from_slice(buf);
        self.comm.all_reduce_into(&s[..], buf, sysop(op));
    }
    fn all_reduce_u64(&self, buf: &mut [u64], op: ReduceOp) {
        let mut s = self.scratch_u.borrow_mut();
        s.clear();
        s.extend_from_slice(buf);
        self.comm.all_reduce_into(&s[..], buf, sysop(op));
    }
    fn all_gather(&self, send: &[f64], recv: &mut [f64]) {
        let n = send.len() * self.size();
        self.comm.all_gather_into(send, &mut recv[..n]);
    }
    fn all_gather_u64(&self, send: &[u64], recv: &mut [u64]) {
        let n = send.len() * self.size();
        self.comm.all_gather_into(send, &mut recv[..n]);
    }
    fn all_gather_v(&self, send: &[f64], counts: &[usize], recv: &mut [f64]) {
        assert_eq!(
            counts.len(),
            self.size(),
            "all_gather_v: counts.len() != size"
        );
        assert_eq!(
            counts[self.rank()],
            send.len(),
            "all_gather_v: counts[rank] != send.len()"
        );
        let total: usize = counts.iter().sum();
        let mut cd = self.ints.borrow_mut();
        fill_counts(&mut cd, counts);
        let p = counts.len();
        let mut part = PartitionMut::new(&mut recv[..total], &cd[..p], &cd[p..]);
        self.comm.all_gather_varcount_into(send, &mut part);
    }
    fn broadcast(&self, buf: &mut [f64], root: usize) {
        self.comm
            .process_at_rank(to_i32(root, "root"))
            .broadcast_into(buf);
    }
    fn broadcast_u64(&self, buf: &mut [u64], root: usize) {
        self.comm
            .process_at_rank(to_i32(root, "root"))
            .broadcast_into(buf);
    }
    fn all_to_all_v(
        &self,
        send: &[f64],
        send_counts: &[usize],
        recv: &mut [f64],
        recv_counts: &[usize],
    ) {
        let p = self.size();
        assert_eq!(
            send_counts.len(),
            p,
            "all_to_all_v: send_counts.len() != size"
        );
        assert_eq!(
            recv_counts.len(),
            p,
            "all_to_all_v: recv_counts.len() != size"
        );
        let mut s = self.ints.borrow_mut();
        let mut r = self.ints_recv.borrow_mut();
        fill_counts(&mut s, send_counts);
        fill_counts(&mut r, recv_counts);
        let stot: usize = send_counts.iter().sum();
        let rtot: usize = recv_counts.iter().sum();
        let spart = Partition::new(&send[..stot], &s[..p], &s[p..]);
        let mut rpart = PartitionMut::new(&mut recv[..rtot], &r[..p], &r[p..]);
        self.comm.all_to_all_varcount_into(&spart, &mut rpart);
    }
    /// `MPI_Gatherv`.
    fn gather_v(&self, send: &[f64], counts: &[usize], recv: &mut [f64], root: usize) {
        let p = self.size();
        assert_eq!(counts.len(), p, "gather_v: counts.len() != size");
        assert_eq!(
            counts[self.rank()],
            send.len(),
            "gather_v: counts[rank] != send.len()"
        );
        let proc = self.comm.process_at_rank(to_i32(root, "root"));
        if self.rank() == root {
            let total: usize = counts.iter().sum();
            let mut cd = self.ints.borrow_mut();
            fill_counts(&mut cd, counts);
            let mut part = PartitionMut::new(&mut recv[..total], &cd[..p], &cd[p..]);
            proc.gather_varcount_into_root(send, &mut part);
        } else {
            proc.gather_varcount_into(send);
        }
    }
    /// `MPI_Scatterv`.
    fn scatter_v(&self, send: &[f64], counts: &[usize], recv: &mut [f64], root: usize) {
        let p = self.size();
        assert_eq!(counts.len(), p, "scatter_v: counts.len() != size");
        let mine = counts[self.rank()];
        let proc = self.comm.process_at_rank(to_i32(root, "root"));
        if self.rank() == root {
            let total: usize = counts.iter().sum();
            let mut cd = self.ints.borrow_mut();
            fill_counts(&mut cd, counts);
            let part = Partition::new(&send[..total], &cd[..p], &cd[p..]);
            proc.scatter_varcount_into_root(&part, &mut recv[..mine]);
        } else {
            proc.scatter_varcount_into(&mut recv[..mine]);
        }
    }
    fn split(&self, color: usize, key: usize) -> Self {
        let sub = self
            .comm
            .split_by_color_with_key(
                Color::with_value(to_i32(color, "color")),
                to_i32(key, "key"),
            )
            .expect("MpiComm::split: MPI returned no communicator for a defined color");
        MpiComm::new(sub)
    }
}
