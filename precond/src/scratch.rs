//! One scratch buffer per thread for the interleaved block kernels: the block
//! SpMV ([`crate::spmv`]) and the blocked triangular sweeps of the ILU/IC and
//! block-Jacobi preconditioners interleave a group of up to 8 vectors into it.
//!
//! These kernels never run nested on one thread, so one buffer per thread serves
//! them all: an operator and its preconditioner hold one interleaved copy instead
//! of one each (32 MB less on a 10⁶-row problem with blocks of 4), and the two
//! halves of a block that two threads precondition at once each have their own
//! instead of one allocating afresh at every call. The buffer holds nothing
//! between calls (results never depend on it), grows to the largest request,
//! and lives as long as its thread, like the packing buffers of faer's GEMM;
//! [`release`] frees the calling thread's.

use std::cell::RefCell;

thread_local! {
    static BUF: RefCell<Vec<f64>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on the calling thread's buffer, grown to at least `len` entries
/// (contents unspecified; advised as huge pages when it grows). A nested call on
/// the same thread gets a temporary buffer instead.
pub(crate) fn with<R>(len: usize, f: impl FnOnce(&mut [f64]) -> R) -> R {
    BUF.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => {
            if buf.len() < len {
                // Dropped before the new one is touched.
                *buf = Vec::new();
                *buf = crate::pages::huge_page_vec(len);
            }
            f(&mut buf[..len])
        }
        Err(_) => f(&mut vec![0.0; len]),
    })
}

/// Frees the calling thread's scratch buffer (after a solve, say); the next block
/// apply on this thread allocates it again.
pub fn release() {
    BUF.with(|cell| {
        if let Ok(mut buf) = cell.try_borrow_mut() {
            *buf = Vec::new();
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_and_nests() {
        release();
        with(10, |a| {
            assert_eq!(a.len(), 10);
            a.fill(1.0);
            // A nested call does not alias the outer buffer.
            with(4, |b| {
                b.fill(2.0);
                assert_eq!(b.len(), 4);
            });
            assert!(a.iter().all(|v| *v == 1.0));
        });
        with(20, |a| assert_eq!(a.len(), 20));
        release();
    }
}
