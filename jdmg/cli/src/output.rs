//! Exit codes, failures, and every byte `jdmg` writes: standard output that
//! never panics (closed pipe, full device, closed descriptor) and files that
//! are written atomically after their paths were checked up front.

use std::io::{ErrorKind, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// Bad input or option, or a resource request the machine cannot meet.
pub const EXIT_BAD_INPUT: u8 = 2;
/// Not converged: the partial results were printed.
pub const EXIT_NOT_CONVERGED: u8 = 3;
/// Standard output is a closed pipe (`jdmg … | head`): 128 + SIGPIPE, what a
/// shell reports for a process killed by the signal; nothing more is printed.
pub const EXIT_BROKEN_PIPE: u8 = 141;

/// A failure with its exit code and message (empty: print nothing).
#[derive(Debug)]
pub struct Fail(pub u8, pub String);

impl Fail {
    /// Exit 2 with `msg`.
    pub fn bad(msg: impl Into<String>) -> Self {
        Fail(EXIT_BAD_INPUT, msg.into())
    }
}

impl<E: std::fmt::Display> From<(u8, E)> for Fail {
    fn from((c, e): (u8, E)) -> Self {
        Fail(c, e.to_string())
    }
}

/// Makes every MPI rank agree on a check made rank by rank, before any
/// collective work: `Ok` on every rank when all passed. Otherwise the lowest
/// failing rank prints its message *now*, while every rank is still alive
/// (a message printed after `MPI_Finalize` could be lost when mpirun tears
/// the job down on the first non-zero exit), all ranks meet in a barrier so
/// none exits before it is written, and each returns its failure (its own
/// code, or exit 2 on ranks that passed) with nothing left to print.
#[cfg(feature = "mpi")]
pub fn agree<T>(world: &impl lblib::Comm, checked: Result<T, Fail>) -> Result<T, Fail> {
    let (rank, size) = (world.rank(), world.size());
    let mut first_bad = [if checked.is_ok() { size } else { rank } as f64];
    world.all_reduce(&mut first_bad, lblib::ReduceOp::Min);
    if first_bad[0] as usize == size {
        return checked;
    }
    let code = match &checked {
        Err(Fail(code, msg)) => {
            if rank == first_bad[0] as usize && !msg.is_empty() {
                note(&format!("jdmg: {msg}"));
            }
            *code
        }
        Ok(_) => EXIT_BAD_INPUT,
    };
    world.barrier();
    Err(Fail(code, String::new()))
}

/// Prints a failure's message now, while the MPI world still exists, and
/// returns it with nothing left to print: a message printed after
/// `MPI_Finalize` can be lost when mpirun tears the job down on another
/// rank's non-zero exit (finalizing waits for every rank, so a message
/// written before it is out of the process before any rank exits).
#[cfg(feature = "mpi")]
pub fn said_before_finalize(r: Result<(), Fail>) -> Result<(), Fail> {
    r.map_err(|Fail(code, msg)| {
        if !msg.is_empty() {
            note(&format!("jdmg: {msg}"));
        }
        Fail(code, String::new())
    })
}

/// Prints `jdmg: msg` on standard error, ignoring failures (a closed
/// standard error must not turn into a panic).
pub fn note(msg: &str) {
    let _ = writeln!(std::io::stderr(), "{msg}");
}

static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Runs before Rust's runtime start-up, which reopens a closed standard output
/// on `/dev/null` (output would then vanish and jdmg exit 0): records whether
/// descriptor 1 was closed when the process started.
#[cfg(target_os = "linux")]
extern "C" fn record_closed_stdout() {
    // SAFETY: fcntl(F_GETFD) only queries the descriptor.
    if unsafe { libc::fcntl(1, libc::F_GETFD) } == -1 {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
    }
}

#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static RECORD_CLOSED_STDOUT: extern "C" fn() = record_closed_stdout;

/// Refuses to start a command whose results go to standard output when that
/// was closed at start-up (`jdmg solve … >&-`).
///
/// # Errors
/// Exit 2 naming the problem.
pub fn require_stdout() -> Result<(), Fail> {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return Err(Fail::bad(
            "standard output is closed: nowhere to print the results (redirect it to a file or /dev/null)",
        ));
    }
    Ok(())
}

/// Maps a write error on standard output to a failure: a closed pipe ends
/// quietly with [`EXIT_BROKEN_PIPE`], anything else (full device, I/O error)
/// exits 2 with the reason.
pub fn stdout_error(e: std::io::Error) -> Fail {
    if e.kind() == ErrorKind::BrokenPipe {
        Fail(EXIT_BROKEN_PIPE, String::new())
    } else {
        Fail::bad(format!("cannot write to standard output: {e}"))
    }
}

/// Writes `text` to standard output and flushes it (never panics).
///
/// # Errors
/// As [`stdout_error`].
pub fn emit(text: &str) -> Result<(), Fail> {
    require_stdout()?;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(stdout_error)
}

/// Checks before any long work that `path` can be written (its directory
/// exists and is writable, it is not a directory), so a result is never lost
/// to a bad path found at the end.
///
/// # Errors
/// Exit 2 naming the option and the path.
pub fn check_output_path(option: &str, path: &Path) -> Result<(), Fail> {
    matrices::mm::check_writable(path)
        .map_err(|e| Fail::bad(format!("{option} {}: cannot write: {e}", path.display())))
}

/// Writes `bytes` to `path` atomically (a temporary file beside it, renamed at
/// the end).
///
/// # Errors
/// Exit 2 naming the path.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), Fail> {
    matrices::mm::write_file_atomic(path, |w| w.write_all(bytes))
        .map_err(|e| Fail::bad(format!("{}: {e}", path.display())))
}
