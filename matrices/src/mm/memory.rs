//! Memory the reader needs for a declared size, and memory the machine has.
//!
//! A MatrixMarket size line is a promise of the file's author: `1000000000
//! 1000000000 5` is five entries, but the CSR row pointers alone take 8 GB.
//! The reader compares the bytes a header needs with [`available_memory`]
//! before allocating anything proportional to it, and refuses with
//! [`MmErrorKind::InsufficientMemory`](super::MmErrorKind::InsufficientMemory)
//! and both figures.

use super::header::{MmFormat, MmHeader, MmSymmetry};
pub use super::units::{human_bytes, MEMORY_LIMIT_ENV};

/// Bytes of memory available to this process: the smaller of `MemAvailable`
/// from `/proc/meminfo` (free memory plus reclaimable caches; `sysinfo(2)`'s
/// free + buffer RAM when `/proc` is missing) and [`MEMORY_LIMIT_ENV`] when
/// set. `None` when neither the machine nor the environment gives a figure
/// (callers then do not refuse).
pub fn available_memory() -> Option<u64> {
    let machine = meminfo_available().or_else(sysinfo_available);
    let limit = std::env::var(MEMORY_LIMIT_ENV)
        .ok()
        .and_then(|s| parse_bytes(&s));
    match (machine, limit) {
        (Some(m), Some(l)) => Some(m.min(l)),
        (m, l) => m.or(l),
    }
}

/// Parses `12345`, `512K`, `64M`, `2G` (powers of 1024) into bytes.
pub fn parse_bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mul) = match s.char_indices().last()? {
        (i, 'k' | 'K') => (&s[..i], 1u64 << 10),
        (i, 'm' | 'M') => (&s[..i], 1 << 20),
        (i, 'g' | 'G') => (&s[..i], 1 << 30),
        (i, 't' | 'T') => (&s[..i], 1 << 40),
        _ => (s, 1),
    };
    num.trim().parse::<u64>().ok()?.checked_mul(mul)
}

fn meminfo_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_ascii_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

#[cfg(unix)]
fn sysinfo_available() -> Option<u64> {
    // SAFETY: sysinfo only writes into the zeroed struct we pass.
    let mut si: libc::sysinfo = unsafe { std::mem::zeroed() };
    if unsafe { libc::sysinfo(&mut si) } != 0 {
        return None;
    }
    let unit = u64::from(si.mem_unit.max(1));
    (si.freeram as u64)
        .saturating_add(si.bufferram as u64)
        .checked_mul(unit)
}

#[cfg(not(unix))]
fn sysinfo_available() -> Option<u64> {
    None
}

/// Peak bytes [`read_matrix_market`](super::read_matrix_market) allocates for
/// a file with header `h` (saturating): for coordinate files the parsed
/// triplets (16 bytes each), the expanded CSR arrays (12 bytes per stored
/// entry, twice the entries for symmetric storage) and three `usize` arrays of
/// `nrows` (row counts, pointers, lengths); for array files the dense values
/// and their CSR copy.
pub fn read_bytes_needed(h: &MmHeader) -> u64 {
    let (m, n, e) = (h.nrows as u64, h.ncols as u64, h.entries as u64);
    let rows = m.saturating_add(1).saturating_mul(24);
    match h.format {
        MmFormat::Coordinate => {
            let expanded = if h.symmetry == MmSymmetry::General {
                e
            } else {
                e.saturating_mul(2)
            };
            e.saturating_mul(16)
                .saturating_add(expanded.saturating_mul(12))
                .saturating_add(rows)
        }
        MmFormat::Array => m
            .saturating_mul(n)
            .saturating_mul(8 + 12)
            .saturating_add(rows),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mm::{MmField, MmHeader};

    #[test]
    fn byte_suffixes() {
        assert_eq!(parse_bytes("123"), Some(123));
        assert_eq!(parse_bytes("2K"), Some(2048));
        assert_eq!(parse_bytes("3g"), Some(3 << 30));
        assert_eq!(parse_bytes("x"), None);
        assert_eq!(parse_bytes("99999999999999T"), None);
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(12), "12 bytes");
    }

    #[test]
    fn declared_size_drives_the_estimate() {
        let h = MmHeader {
            format: MmFormat::Coordinate,
            field: MmField::Real,
            symmetry: MmSymmetry::Symmetric,
            nrows: 1_000_000_000,
            ncols: 1_000_000_000,
            entries: 5,
            size_line: 2,
        };
        // three usize arrays of n + 1 dominate: 24 GB for five entries
        assert_eq!(read_bytes_needed(&h), 24 * 1_000_000_001 + 5 * 16 + 10 * 12);
        assert!(available_memory().is_some());
    }
}
