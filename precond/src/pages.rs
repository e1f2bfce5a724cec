//! Transparent huge pages for the large arrays that SpMV streams: advice for a
//! matrix's arrays and zeroed vectors advised before first touch (Linux; no-ops
//! elsewhere).

use matrices::CsrMatrix;

/// Linux `madvise` advice values (stable kernel ABI).
#[cfg(target_os = "linux")]
mod madv {
    pub const HUGEPAGE: i32 = 14;
    pub const COLLAPSE: i32 = 25;
    extern "C" {
        pub fn madvise(addr: *mut core::ffi::c_void, len: usize, advice: i32) -> i32;
    }
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

/// Asks Linux to back the arrays of `a` with transparent huge pages, now
/// (`MADV_COLLAPSE`, Linux ≥ 6.1; falls back to `MADV_HUGEPAGE`, which lets
/// `khugepaged` do it later). Returns the bytes advised; 0 on other systems, for small
/// matrices, or when the kernel refuses (never an error: it is only a hint).
///
/// SpMV streams the matrix once per product; with 4 KiB pages the hardware
/// prefetchers restart at every page boundary and TLB misses add up. On the 64³
/// 27-point stencil this took a serial SpMV from about 11.8 to 10.6 ms (best of 21) on
/// a loaded machine; numpy allocates its large arrays with huge-page advice, so
/// `scipy.sparse` gets the same benefit. Costs about 50 ms per 80 MB, once.
pub fn advise_huge_pages(a: &CsrMatrix) -> usize {
    let mut done = 0;
    for (start, len) in [span(a.data()), span(a.indices()), span(a.indptr())] {
        #[cfg(target_os = "linux")]
        {
            let d = advise_range(start, len, madv::COLLAPSE);
            done += if d > 0 {
                d
            } else {
                advise_range(start, len, madv::HUGEPAGE)
            };
        }
        #[cfg(not(target_os = "linux"))]
        {
            done += advise_range(start, len, 0);
        }
    }
    done
}

/// A zeroed `Vec<f64>` of length `len` whose pages are advised as transparent huge
/// pages *before* first touch (Linux; a plain zeroed vector elsewhere). Use it for
/// large block vectors that SpMV reads and writes.
pub fn huge_page_vec(len: usize) -> Vec<f64> {
    let mut v: Vec<f64> = Vec::with_capacity(len);
    // The capacity is allocated (not yet initialized) memory; advising it neither
    // reads nor writes it.
    #[cfg(target_os = "linux")]
    advise_range(
        v.as_ptr() as usize,
        len * std::mem::size_of::<f64>(),
        madv::HUGEPAGE,
    );
    v.resize(len, 0.0);
    v
}
