//! The only door to inter-process communication (DESIGN.md, "Backends").
//!
//! Every collective is called by all ranks of the communicator in the same order,
//! as in MPI. Buffers are caller-owned; no collective allocates on the caller's
//! behalf except [`Comm::split`].

use std::time::Instant;

/// Reduction operator of [`Comm::all_reduce`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ReduceOp {
    /// Sum (`MPI_SUM`).
    Sum,
    /// Maximum (`MPI_MAX`).
    Max,
    /// Minimum (`MPI_MIN`).
    Min,
}

impl ReduceOp {
    /// Applies the operator to two values.
    pub fn apply(self, a: f64, b: f64) -> f64 {
        match self {
            ReduceOp::Sum => a + b,
            ReduceOp::Max => a.max(b),
            ReduceOp::Min => a.min(b),
        }
    }
}

/// A group of processes that communicate collectively.
///
/// Backends: [`SelfComm`] (one process), [`crate::ThreadComm`] (N ranks as threads
/// of one process, with optional per-rank slowdown), `MpiComm` (rsmpi, feature
/// `mpi`). Wrappers: [`crate::Delayed`] (slow link), [`crate::Slowed`] (emulated
/// slower node); `lblib::Traced` (imbalance tracer) is one too.
pub trait Comm {
    /// This process's rank in `0..size()`.
    fn rank(&self) -> usize;
    /// Number of processes.
    fn size(&self) -> usize;
    /// Wall-clock seconds since an arbitrary fixed origin.
    fn wtime(&self) -> f64;
    /// Blocks until every rank has entered.
    fn barrier(&self);
    /// Element-wise reduction of `buf` over all ranks, result on every rank.
    fn all_reduce(&self, buf: &mut [f64], op: ReduceOp);
    /// Element-wise reduction of integer counters (`Sum`, `Max`, `Min`).
    fn all_reduce_u64(&self, buf: &mut [u64], op: ReduceOp);
    /// Gathers `send` (same length on every rank) into `recv`, rank-major:
    /// `recv[r * send.len()..][..send.len()]` is rank r's data.
    fn all_gather(&self, send: &[f64], recv: &mut [f64]);
    /// Like [`Comm::all_gather`] for integers.
    fn all_gather_u64(&self, send: &[u64], recv: &mut [u64]);
    /// Gathers variable-length pieces: rank r contributes `counts[r]` values,
    /// stored consecutively in rank order in `recv`.
    fn all_gather_v(&self, send: &[f64], counts: &[usize], recv: &mut [f64]);
    /// Copies `buf` of rank `root` into `buf` of every rank.
    fn broadcast(&self, buf: &mut [f64], root: usize);
    /// Like [`Comm::broadcast`] for integers.
    fn broadcast_u64(&self, buf: &mut [u64], root: usize);
    /// Personalized all-to-all with variable counts: `send` holds, consecutively in
    /// rank order, `send_counts[r]` values for rank r; `recv` receives
    /// `recv_counts[r]` values from rank r, consecutively in rank order.
    fn all_to_all_v(
        &self,
        send: &[f64],
        send_counts: &[usize],
        recv: &mut [f64],
        recv_counts: &[usize],
    );
    /// Changes this process's emulated slowdown factor from now on (the
    /// computation so far keeps the old one): a load that changes during a run
    /// (Boudet et al. §2.1, §4.5). Returns `false`, doing nothing, when the
    /// communicator emulates no slowdown (the default; [`crate::ThreadComm`]
    /// does, and [`crate::Delayed`] and `lblib::Traced` forward).
    fn set_slowdown(&self, _factor: f64) -> bool {
        false
    }
    /// Charges `seconds` of computation at nominal speed to this process's clock
    /// when the clock does not measure computation itself
    /// ([`crate::ClockMode::Manual`]; the slowdown applies): deterministic runs of
    /// load-balanced code, which charges each operation it counts. A no-op on
    /// measuring clocks (the default; [`crate::ThreadComm`] implements it, the
    /// wrappers forward).
    fn charge(&self, _seconds: f64) {}
    /// Whether [`Comm::wtime`] is the real wall clock, in which a process
    /// time-sliced with others sees the time it waited for its core: true by
    /// default; false for [`crate::ThreadComm`]'s virtual and manual clocks,
    /// whose seconds belong to an emulated machine. The wrappers forward.
    fn real_clock(&self) -> bool {
        true
    }
    /// Gathers variable-length pieces on `root` only (`MPI_Gatherv`): rank r
    /// contributes its `send` of `counts[r]` values, stored consecutively in
    /// rank order in `recv` of `root` (at least Σ counts long); the other
    /// ranks' `recv` is not touched (it may be empty). Every rank passes the
    /// same `counts`. The default runs [`Comm::all_to_all_v`] with zero counts
    /// off the root; the backends have their own.
    fn gather_v(&self, send: &[f64], counts: &[usize], recv: &mut [f64], root: usize) {
        let me = self.rank();
        let mut sc = vec![0; counts.len()];
        sc[root] = send.len();
        let rc: Vec<usize> = if me == root {
            counts.to_vec()
        } else {
            vec![0; counts.len()]
        };
        self.all_to_all_v(send, &sc, recv, &rc);
    }
    /// Scatters variable-length pieces from `root` (`MPI_Scatterv`): `send` of
    /// `root` holds, consecutively in rank order, `counts[r]` values for rank
    /// r; every rank receives its `counts[rank]` values into `recv`. The other
    /// ranks' `send` is not read (it may be empty). Every rank passes the same
    /// `counts`. The default runs [`Comm::all_to_all_v`]; the backends have
    /// their own.
    fn scatter_v(&self, send: &[f64], counts: &[usize], recv: &mut [f64], root: usize) {
        let me = self.rank();
        let sc: Vec<usize> = if me == root {
            counts.to_vec()
        } else {
            vec![0; counts.len()]
        };
        let mut rc = vec![0; counts.len()];
        rc[root] = counts[me];
        self.all_to_all_v(send, &sc, recv, &rc);
    }
    /// Splits into sub-communicators: ranks with equal `color` form one, ordered
    /// by `(key, rank)`. Collective over all ranks.
    fn split(&self, color: usize, key: usize) -> Self
    where
        Self: Sized;
}

/// Implements the eleven data collectives of [`Comm`] (barrier, all-reduces,
/// all-gathers, broadcasts, all-to-all, rooted gather and scatter) for a wrapper by running each one as
/// `self.$via(|c| …)`, where `$via(&self, f: impl FnOnce(&Inner) -> T) -> T`
/// does the wrapper's work around the wrapped communicator's call (sleep,
/// delay, timing). Used inside `impl Comm for Wrapper`; `rank`, `size`,
/// `wtime`, `set_slowdown` and `split` stay hand-written.
#[macro_export]
macro_rules! forward_collectives {
    ($via:ident) => {
        fn barrier(&self) {
            self.$via(|c| $crate::Comm::barrier(c))
        }
        fn all_reduce(&self, buf: &mut [f64], op: $crate::ReduceOp) {
            self.$via(|c| $crate::Comm::all_reduce(c, buf, op))
        }
        fn all_reduce_u64(&self, buf: &mut [u64], op: $crate::ReduceOp) {
            self.$via(|c| $crate::Comm::all_reduce_u64(c, buf, op))
        }
        fn all_gather(&self, send: &[f64], recv: &mut [f64]) {
            self.$via(|c| $crate::Comm::all_gather(c, send, recv))
        }
        fn all_gather_u64(&self, send: &[u64], recv: &mut [u64]) {
            self.$via(|c| $crate::Comm::all_gather_u64(c, send, recv))
        }
        fn all_gather_v(&self, send: &[f64], counts: &[usize], recv: &mut [f64]) {
            self.$via(|c| $crate::Comm::all_gather_v(c, send, counts, recv))
        }
        fn broadcast(&self, buf: &mut [f64], root: usize) {
            self.$via(|c| $crate::Comm::broadcast(c, buf, root))
        }
        fn broadcast_u64(&self, buf: &mut [u64], root: usize) {
            self.$via(|c| $crate::Comm::broadcast_u64(c, buf, root))
        }
        fn all_to_all_v(
            &self,
            send: &[f64],
            send_counts: &[usize],
            recv: &mut [f64],
            recv_counts: &[usize],
        ) {
            self.$via(|c| $crate::Comm::all_to_all_v(c, send, send_counts, recv, recv_counts))
        }
        fn gather_v(&self, send: &[f64], counts: &[usize], recv: &mut [f64], root: usize) {
            self.$via(|c| $crate::Comm::gather_v(c, send, counts, recv, root))
        }
        fn scatter_v(&self, send: &[f64], counts: &[usize], recv: &mut [f64], root: usize) {
            self.$via(|c| $crate::Comm::scatter_v(c, send, counts, recv, root))
        }
    };
}

/// The one-process communicator: every collective is a copy.
#[derive(Debug, Clone)]
pub struct SelfComm {
    origin: Instant,
}

impl SelfComm {
    /// A one-process communicator whose clock starts now.
    pub fn new() -> Self {
        Self {
            origin: Instant::now(),
        }
    }
}

impl Default for SelfComm {
    fn default() -> Self {
        Self::new()
    }
}

impl Comm for SelfComm {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn wtime(&self) -> f64 {
        self.origin.elapsed().as_secs_f64()
    }
    fn barrier(&self) {}
    fn all_reduce(&self, _buf: &mut [f64], _op: ReduceOp) {}
    fn all_reduce_u64(&self, _buf: &mut [u64], _op: ReduceOp) {}
    fn all_gather(&self, send: &[f64], recv: &mut [f64]) {
        recv[..send.len()].copy_from_slice(send);
    }
    fn all_gather_u64(&self, send: &[u64], recv: &mut [u64]) {
        recv[..send.len()].copy_from_slice(send);
    }
    fn all_gather_v(&self, send: &[f64], counts: &[usize], recv: &mut [f64]) {
        assert_eq!(
            counts,
            &[send.len()],
            "all_gather_v: counts must be [send.len()]"
        );
        recv[..send.len()].copy_from_slice(send);
    }
    fn broadcast(&self, _buf: &mut [f64], root: usize) {
        assert_eq!(root, 0, "broadcast: root out of range");
    }
    fn broadcast_u64(&self, _buf: &mut [u64], root: usize) {
        assert_eq!(root, 0, "broadcast: root out of range");
    }
    fn all_to_all_v(
        &self,
        send: &[f64],
        send_counts: &[usize],
        recv: &mut [f64],
        recv_counts: &[usize],
    ) {
        assert_eq!(
            send_counts, recv_counts,
            "all_to_all_v: counts differ on one rank"
        );
        let n = send_counts[0];
        recv[..n].copy_from_slice(&send[..n]);
    }
    fn gather_v(&self, send: &[f64], counts: &[usize], recv: &mut [f64], root: usize) {
        assert_eq!(root, 0, "gather_v: root out of range");
        assert_eq!(
            counts,
            &[send.len()],
            "gather_v: counts must be [send.len()]"
        );
        recv[..send.len()].copy_from_slice(send);
    }
    fn scatter_v(&self, send: &[f64], counts: &[usize], recv: &mut [f64], root: usize) {
        assert_eq!(root, 0, "scatter_v: root out of range");
        assert_eq!(counts.len(), 1, "scatter_v: counts must have one entry");
        let n = counts[0];
        recv[..n].copy_from_slice(&send[..n]);
    }
    fn split(&self, _color: usize, _key: usize) -> Self {
        self.clone()
    }
}
