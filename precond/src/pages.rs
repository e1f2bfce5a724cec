//! Transparent huge pages for the large arrays that SpMV streams: advice for a
//! matrix's arrays and zeroed vectors advised before first touch (Linux; no-ops
//! elsewhere).

use matrices::CsrMatrix;

/// Linux `madvise` advice values (stable kernel ABI).
#[cfg(target_os = "linux")]
mod madv {
    pub const HUGEPAGE: i32 = 14;
    extern "C" {
        pub fn madvise(addr: *mut core::ffi::c_void, len: usize, advice: i32) -> i32;
    }
}

/// Elsewhere the advice is ignored ([`advise_range`] returns 0).
#[cfg(not(target_os = "linux"))]
mod madv {
    pub const HUGEPAGE: i32 = 0;
}

const HUGE_PAGE: usize = 1 << 21;

/// Applies `madvise(advice)` to the 2 MiB-aligned interior of the `len` bytes at
/// `start` (which must lie inside one live allocation); returns the number of bytes
/// advised (0 when the range holds no aligned huge page or the call failed).
fn advise_range(start: usize, len: usize, advice: i32) -> usize {
    let end = start + len;
    let lo = start.div_ceil(HUGE_PAGE) * HUGE_PAGE;
    let hi = end / HUGE_PAGE * HUGE_PAGE;
    if hi <= lo {
        return 0;
    }
    #[cfg(target_os = "linux")]
    {
        // SAFETY: [lo, hi) lies inside the live allocation given by the caller. Both advice
        // values only change how the kernel backs the pages (transparent huge pages);
        // contents are preserved and no Rust-visible memory is written or freed.
        let rc = unsafe { madv::madvise(lo as *mut core::ffi::c_void, hi - lo, advice) };
        if rc == 0 {
            hi - lo
        } else {
            0
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = advice;
        0
    }
}

/// Address and byte length of a slice.
fn span<T>(v: &[T]) -> (usize, usize) {
    (v.as_ptr() as usize, std::mem::size_of_val(v))
}

/// Asks Linux to back the arrays of `a` with transparent huge pages
/// (`MADV_HUGEPAGE`: `khugepaged` collapses them in the background, the caller
/// does not wait). Returns the bytes advised; 0 on other systems, for small
/// matrices, or when the kernel refuses (never an error: it is only a hint).
///
/// SpMV streams the matrix once per product, and with 4 KiB pages TLB misses
/// add up. The synchronous `MADV_COLLAPSE` was used before: it copies the arrays
/// into huge pages at once, which cost system time (a whole `jdmg solve` of
/// stencil27:48 with nev = 1: 0.058 against 0.048 s, medians of 7) and gave no
/// measurable SpMV gain (ms per product on lap3d:64 and stencil27:48 equal within
/// the noise, 5 runs each).
pub fn advise_huge_pages(a: &CsrMatrix) -> usize {
    [span(a.data()), span(a.indices()), span(a.indptr())]
        .into_iter()
        .map(|(start, len)| advise_range(start, len, madv::HUGEPAGE))
        .sum()
}

/// A zeroed `Vec<f64>` of length `len` whose pages are advised as transparent huge
/// pages *before* first touch (Linux; a plain zeroed vector elsewhere). Use it for
/// large block vectors that SpMV reads and writes.
pub fn huge_page_vec(len: usize) -> Vec<f64> {
    let mut v = huge_page_capacity(len);
    v.resize(len, 0.0);
    v
}

/// An empty vector with room for `len` elements whose pages are advised as
/// transparent huge pages before first touch (Linux; a plain `with_capacity`
/// elsewhere): filling it then faults in 2 MiB pages, one fault where 4 KiB pages
/// take 512. For large arrays written once and then streamed (the ILU factors).
pub(crate) fn huge_page_capacity<T>(len: usize) -> Vec<T> {
    let v: Vec<T> = Vec::with_capacity(len);
    // The capacity is allocated, not yet written; advising it neither reads nor
    // writes it.
    advise_range(
        v.as_ptr() as usize,
        len.saturating_mul(std::mem::size_of::<T>()),
        madv::HUGEPAGE,
    );
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_page_capacity_is_an_empty_vector_with_room() {
        let n = 3 << 20;
        let mut v: Vec<u32> = huge_page_capacity(n);
        assert!(v.is_empty() && v.capacity() >= n);
        v.extend((0..n as u32).map(|i| i ^ 0x5a5a));
        assert_eq!(v[12345], 12345 ^ 0x5a5a);
        assert_eq!(v.capacity(), n, "no reallocation while filling");
        assert!(huge_page_capacity::<f64>(0).is_empty());
    }
}
