//! Resource requests checked before anything is allocated or spawned: memory
//! of a generated matrix and of a solve against what the machine has, thread
//! and rank counts, solve-group specs.

use jdmg::{JdParams, PrecondChoice};
use matrices::generate::GenSpec;
use matrices::mm::memory::{available_memory, human_bytes, MEMORY_LIMIT_ENV};

use crate::output::Fail;

/// Largest `--threads` accepted.
pub const MAX_THREADS: usize = 1024;

/// Largest `--ranks` accepted: thread ranks emulate processes, and their
/// collectives cost grows with the square of their count (256 ranks of lap3d:12
/// take 11 s on 2 cores, 1024 ranks over 2 minutes).
pub const MAX_RANKS: usize = 256;
/// Largest --slowdown factor: a million times slower (1e308 overflowed the
/// virtual clocks to infinity and the ranks' decisions diverged).
pub const MAX_SLOWDOWN: f64 = 1e6;

/// Stored entries per row of a generated matrix (upper bound).
fn nnz_per_row(spec: &GenSpec) -> u64 {
    match spec {
        GenSpec::Lap2d { .. } | GenSpec::Aniso2d { .. } => 5,
        GenSpec::Lap3d { .. } | GenSpec::Aniso3d { .. } => 7,
        GenSpec::Stencil27 { .. } => 27,
        GenSpec::Spectrum { .. } => 1,
        GenSpec::Fem { dim, .. } => 3u64.pow(*dim as u32),
    }
}

/// Bytes of the CSR matrix of `spec` (12 per entry, 8 per row pointer).
pub fn generated_bytes(spec: &GenSpec) -> u64 {
    let n = spec.nrows() as u64;
    n.saturating_mul(nnz_per_row(spec))
        .saturating_mul(12)
        .saturating_add(n.saturating_add(1).saturating_mul(8))
}

/// `(n, k, nev, max_basis)` of a solve as u64, with the defaults of
/// `JdParams` (block min(nev, 8), basis [`jdmg::params::default_max_basis`]),
/// unvalidated.
fn shape(n: usize, p: &JdParams) -> (u64, u64, u64, u64) {
    use jdmg::params::default_max_basis;
    let n64 = n as u64;
    let k = p.block_size().min(n) as u64;
    let nev = p.problem.nev as u64;
    let m = if p.basis.max_basis == 0 {
        default_max_basis(k as usize, p.problem.nev, n) as u64
    } else {
        p.basis.max_basis as u64
    }
    .min(n64);
    (n64, k, nev, m)
}

/// Bytes that checkpoints add to a solve of an `n`-row share (`--checkpoint`,
/// `--resume`): the state copied (V, AV, the locked vectors, the new block),
/// then encoded into a buffer of the same size.
pub fn checkpoint_bytes(n: usize, p: &JdParams) -> u64 {
    let (n64, k, nev, m) = shape(n, p);
    let columns = m.saturating_mul(2).saturating_add(nev).saturating_add(k);
    n64.saturating_mul(columns).saturating_mul(2 * 8)
}

/// Bytes a solve of an `n`-row matrix with `nnz` entries allocates beyond the
/// matrix itself, for the sizes of `p` (resolved as the solver does): the
/// basis V and AV (restarts transform them in place), the locked vectors
/// and their products, the k-column blocks of the correction phase (about ten:
/// Ritz vectors, residuals, BiCGSTAB or QMRs vectors), the projected dense
/// matrices (four of max_basis²), and the preconditioner (ILU: two factor
/// copies, 24 bytes per entry; SPAI/FSAI one sparse matrix, 12 bytes per entry;
/// Jacobi one vector). `ranks > 1` adds the ranks' local copies of the matrix.
pub fn solve_bytes(n: usize, nnz: usize, p: &JdParams, ranks: usize) -> u64 {
    let (n64, k, nev, m) = shape(n, p);
    let columns = m
        .saturating_mul(2)
        .saturating_add(nev.saturating_mul(2))
        .saturating_add(k.saturating_mul(10));
    let vectors = n64.saturating_mul(columns).saturating_mul(8);
    let dense = m.saturating_mul(m).saturating_mul(4 * 8);
    let nnz = nnz as u64;
    let precond = match p.preconditioner.kind {
        PrecondChoice::None => 0,
        PrecondChoice::Jacobi => n64.saturating_mul(8),
        PrecondChoice::Ilu0 | PrecondChoice::Ilut | PrecondChoice::Auto => {
            let fill = if p.preconditioner.kind == PrecondChoice::Ilut {
                (p.preconditioner.ilut_fill as u64)
                    .saturating_mul(n64)
                    .max(nnz)
            } else {
                nnz
            };
            fill.saturating_mul(24)
        }
        PrecondChoice::Spai | PrecondChoice::Fsai => nnz.saturating_mul(12),
    };
    let copies = if ranks > 1 {
        nnz.saturating_mul(12)
            .saturating_add(n64.saturating_mul(16))
    } else {
        0
    };
    vectors
        .saturating_add(dense)
        .saturating_add(precond)
        .saturating_add(copies)
}

/// Refuses a request of `needed` bytes when more than the available memory.
///
/// # Errors
/// Exit 2 with both figures and `what` needs them.
pub fn check_memory(what: &str, needed: u64) -> Result<(), Fail> {
    match available_memory() {
        Some(avail) if needed > avail => Err(Fail::bad(format!(
            "{what} needs about {}, more than the {} of memory available (set {MEMORY_LIMIT_ENV} to change the limit)",
            human_bytes(needed),
            human_bytes(avail)
        ))),
        _ => Ok(()),
    }
}

/// Checks a thread or rank count: 1 ≤ `v` ≤ `max` ([`MAX_THREADS`],
/// [`MAX_RANKS`]).
///
/// # Errors
/// Exit 2 naming the option.
pub fn check_count(option: &str, v: usize, max: usize) -> Result<(), Fail> {
    if v == 0 || v > max {
        return Err(Fail::bad(format!(
            "{option} {v}: must be between 1 and {max}"
        )));
    }
    Ok(())
}

/// Checks the numbers of a `--groups` spec against `p` processes before the
/// library parses it: a group count 1..=p, or rank lists `a` / `a-b` with
/// a ≤ b < p (`equal` and `host` pass through).
///
/// # Errors
/// Exit 2 naming the offending item.
pub fn check_groups(spec: &str, p: usize) -> Result<(), Fail> {
    let spec = spec.trim();
    if spec == "equal" || spec == "host" {
        return Ok(());
    }
    let num = |s: &str| -> Result<usize, Fail> {
        s.trim().parse::<usize>().map_err(|_| {
            Fail::bad(format!(
                "--groups {spec}: {s:?} is not a rank number (use equal, a group count, rank lists like 0-3,4-5, or host)"
            ))
        })
    };
    if !spec.contains([',', '-']) {
        let g = num(spec)?;
        if g == 0 || g > p {
            return Err(Fail::bad(format!(
                "--groups {g}: the group count must be between 1 and the {p} processes"
            )));
        }
        return Ok(());
    }
    for item in spec.split(',') {
        let (a, b) = match item.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => {
                let a = num(item)?;
                (a, a)
            }
        };
        if a > b || b >= p {
            return Err(Fail::bad(format!(
                "--groups {spec}: {item:?} is not a rank range inside 0-{}",
                p - 1
            )));
        }
    }
    Ok(())
}

/// The thread backend's configuration for `ranks` ranks with the `--slowdown`
/// factors (virtual clocks when any are given, real clocks otherwise).
///
/// # Errors
/// Exit 2 unless there is one factor in (0, [`MAX_SLOWDOWN`]] per rank.
pub fn thread_config(slowdown: &[f64], ranks: usize) -> Result<lblib::ThreadConfig, Fail> {
    let slow = if slowdown.is_empty() {
        vec![1.0; ranks]
    } else {
        slowdown.to_vec()
    };
    if slow.len() != ranks || slow.iter().any(|f| !(*f > 0.0 && *f <= MAX_SLOWDOWN)) {
        return Err(Fail::bad(format!(
            "--slowdown needs {ranks} factors in (0, {MAX_SLOWDOWN:e}]"
        )));
    }
    let clock = if slowdown.is_empty() {
        lblib::ClockMode::Real
    } else {
        lblib::ClockMode::Virtual
    };
    let cfg = lblib::ThreadConfig::with_slowdowns(&slow, clock);
    prepare_thread_ranks(ranks, cfg.stack_size as u64)?;
    Ok(cfg)
}

/// Runs `f` on the thread ranks of `cfg`; a rank thread the system refuses
/// (a thread or address-space limit) is exit 2 with the reason.
///
/// # Errors
/// Exit 2 naming `--ranks` when a rank thread cannot be spawned.
pub fn run_ranks<R, F>(cfg: lblib::ThreadConfig, f: F) -> Result<Vec<R>, Fail>
where
    R: Send,
    F: Fn(lblib::ThreadComm) -> R + Sync,
{
    let ranks = cfg.slowdowns.len();
    lblib::ThreadComm::try_run_with(cfg, f)
        .map_err(|e| Fail::bad(format!("--ranks {ranks}: {e} (use fewer ranks)")))
}

/// Address space a malloc arena of glibc reserves (`HEAP_MAX_SIZE` on 64-bit).
const ARENA_BYTES: u64 = 64 << 20;

/// The L3 cache of this machine (sysfs), 32 MiB when unknown.
fn l3_bytes() -> u64 {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cache/index3/size")
        .unwrap_or_default();
    let t = text.trim();
    let (num, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
    let mult = match unit {
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        _ => 1,
    };
    num.parse::<u64>()
        .ok()
        .map(|v| v.saturating_mul(mult))
        .filter(|&b| b >= 1 << 20)
        .unwrap_or(32 << 20)
}

/// Address space one thread rank reserves whatever the problem: its stack and
/// the packing workspace of the dense products (faer's x86 kernels keep twice
/// the L3 cache per thread, taken at the thread's first large product).
pub fn rank_reservation(stack: u64) -> u64 {
    stack.saturating_add(l3_bytes().saturating_mul(2))
}

/// What the address-space limit (`ulimit -v`, RLIMIT_AS) leaves beyond what
/// this process maps already; `None` without a limit.
fn address_space_left() -> Option<u64> {
    #[cfg(unix)]
    {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit(2) writes the struct we own.
        if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut lim) } != 0
            || lim.rlim_cur == libc::RLIM_INFINITY
        {
            return None;
        }
        let mapped = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                let kb = s.lines().find_map(|l| l.strip_prefix("VmSize:"))?;
                kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok()
            })
            .map_or(0, |kb| kb.saturating_mul(1024));
        Some(lim.rlim_cur.saturating_sub(mapped))
    }
    #[cfg(not(unix))]
    None
}

/// glibc's threshold above which an allocation is its own mapping, returned to
/// the system when freed: 128 KiB, its initial value (see [`return_freed_memory`]).
const MMAP_THRESHOLD: i32 = 128 * 1024;

/// Fixes glibc's mmap threshold at [`MMAP_THRESHOLD`], before any allocation
/// of the solve. glibc raises the threshold to the size of each large block
/// freed (up to 32 MiB), after which blocks of that size come from the heap,
/// and a freed one stays resident when it is not at the heap's top. The
/// solve's transient n-sized arrays (the symmetry check's cursors, the
/// preconditioner's work indices) then added to the peak: lap3d:100 at the
/// defaults peaked at 0.766–0.774 GB, and at 0.750 GB with the threshold
/// fixed (`/usr/bin/time -v`); lap3d:40, lap3d:64 and stencil27:48 took
/// the same time (5 interleaved pairs, 1.00–1.02×).
pub fn return_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt(3) only changes a parameter of the allocator.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
    }
}

/// Before `ranks` thread ranks with `stack`-byte stacks start: their malloc
/// arenas are shared (at most one per core, at least two, instead of glibc's
/// eight per core of 64 MiB each), and their fixed reservations
/// ([`rank_reservation`], plus the arenas) are checked against the
/// address-space limit, so that a limit too small is exit 2 with the figures,
/// not an abort inside a rank.
///
/// # Errors
/// Exit 2 naming `--ranks` when the ranks do not fit the limit.
fn prepare_thread_ranks(ranks: usize, stack: u64) -> Result<(), Fail> {
    let cores = std::thread::available_parallelism().map_or(2, |c| c.get());
    let arenas = cores.clamp(2, ranks.max(2));
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt(3) only changes a limit of the allocator.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, i32::try_from(arenas).unwrap_or(2));
    }
    let needed = rank_reservation(stack)
        .saturating_mul(ranks as u64)
        .saturating_add(ARENA_BYTES.saturating_mul(arenas as u64));
    match address_space_left() {
        Some(left) if needed > left => Err(Fail::bad(format!(
            "--ranks {ranks}: the rank threads reserve about {} of address space ({} of stack and \
             dense-kernel workspace each, and {arenas} malloc arenas of {}), more than the {} \
             the address-space limit (ulimit -v) leaves: use fewer ranks or raise the limit",
            human_bytes(needed),
            human_bytes(rank_reservation(stack)),
            human_bytes(ARENA_BYTES),
            human_bytes(left)
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jdmg::BasisSettings;

    #[test]
    fn group_specs() {
        assert!(check_groups("equal", 4).is_ok());
        assert!(check_groups("0-1,2-3", 4).is_ok());
        assert!(check_groups("2", 4).is_ok());
        assert!(check_groups("0-18446744073709551615", 4).is_err());
        assert!(check_groups("0-99999999999999999999999", 4).is_err());
        assert!(check_groups("5", 4).is_err());
        assert!(check_groups("3-1", 4).is_err());
    }

    #[test]
    fn basis_memory_grows_with_max_basis() {
        let p = JdParams {
            basis: BasisSettings {
                max_basis: 100_000,
                ..Default::default()
            },
            ..Default::default()
        };
        // lap3d:40: n = 64,000 caps the basis at n; V, AV and W alone: 3 n² · 8
        let b = solve_bytes(64_000, 448_000, &p, 1);
        assert!(b >= 3 * 64_000u64 * 64_000 * 8, "{b}");
        let small = solve_bytes(64_000, 448_000, &JdParams::default(), 1);
        assert!(small < 1 << 30, "{small}");
    }
}
