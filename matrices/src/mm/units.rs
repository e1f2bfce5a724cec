//! The memory limit's variable and the byte counts of messages: a leaf that
//! the memory checks and the errors both use.

/// Environment variable capping the memory jdmg may use, in bytes (optional
/// `K`, `M`, `G` suffix, powers of 1024). Lower than the machine's available
/// memory, it wins; useful under batch schedulers that do not expose cgroup
/// limits, and in tests.
pub const MEMORY_LIMIT_ENV: &str = "JDMG_MEMORY_LIMIT";

/// Formats a byte count with a binary unit (`1.5 GiB`).
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 6] = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} bytes")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}
