//! Transparent huge pages for the large arrays that SpMV streams: advice for a
//! matrix's arrays and zeroed vectors advised before first touch (Linux; no-ops
//! elsewhere).

use matrices::CsrMatrix;

/// Linux `madvise` advice values.
#[cfg(target_os = "linux")]
mod madv {
    pub const HUGEPAGE: i32 = libc::MADV_HUGEPAGE;
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
        let rc = unsafe { libc::madvise(lo as *mut libc::c_void, hi - lo, advice) };
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

/// Returns the whole pages inside `v` to the system (`MADV_DONTNEED`; Linux,
/// nothing elsewhere) and the bytes released: those entries read as `0.0`
/// afterwards and take memory again only when written. For the free tail of an
/// array held for a whole solve.
pub fn release(v: &mut [f64]) -> usize {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(0);
        let (start, len) = span(v);
        if page == 0 || len == 0 {
            return 0;
        }
        let lo = start.div_ceil(page) * page;
        let hi = (start + len) / page * page;
        if hi <= lo {
            return 0;
        }
        // SAFETY: [lo, hi) lies inside `v`, which the caller lends mutably: no
        // other reference sees it. Vec memory is private and anonymous, so the
        // pages read as zeros afterwards, a valid `f64` (0.0) for every entry.
        let rc = unsafe { libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_DONTNEED) };
        if rc == 0 {
            hi - lo
        } else {
            0
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = v;
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
    fn released_pages_read_as_zeros_and_the_rest_is_kept() {
        let mut v: Vec<f64> = (0..1 << 18).map(|i| i as f64 + 1.0).collect();
        let (a, b) = (1000, 200_000);
        let bytes = release(&mut v[a..b]);
        let zeros = v.iter().filter(|x| **x == 0.0).count();
        // Whole pages only, inside the range; everything else untouched.
        assert_eq!(zeros * 8, bytes);
        assert!(v[..a].iter().chain(&v[b..]).all(|x| *x != 0.0));
        if cfg!(target_os = "linux") {
            assert!(bytes >= (b - a) * 8 - 2 * 65536);
        }
        // Written again, the entries hold their values.
        v[a..b].fill(2.0);
        assert!(v[a..b].iter().all(|x| *x == 2.0));
    }

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
