//! Where the real test matrices are, for the tests and benchmarks of every
//! crate: one place that resolves the directory and decides whether a test
//! without it skips or fails.
//!
//! The directory is `$JDMG_MATRICES`, else `shared/matrices` beside the
//! repository (`../shared/matrices` from its root). A clean clone has neither:
//! tests that need it then skip, each saying so on standard error, and a test
//! binary that skipped any ends with a count. With `JDMG_REQUIRE_MATRICES=1`
//! (set by CI) a missing directory fails those tests instead.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Once;

/// The environment variable naming the matrix directory.
pub const DIR_VAR: &str = "JDMG_MATRICES";
/// The environment variable that makes a missing directory fail (`1`).
pub const REQUIRE_VAR: &str = "JDMG_REQUIRE_MATRICES";

/// The matrix directory: `$JDMG_MATRICES`, else `../shared/matrices` from the
/// repository root. It may not exist.
#[must_use]
pub fn default_dir() -> PathBuf {
    std::env::var_os(DIR_VAR).map_or_else(
        || {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../shared/matrices"
            ))
        },
        PathBuf::from,
    )
}

/// Whether `JDMG_REQUIRE_MATRICES=1`.
#[must_use]
pub fn required() -> bool {
    std::env::var(REQUIRE_VAR).is_ok_and(|v| v == "1")
}

static SKIPPED: AtomicUsize = AtomicUsize::new(0);
static SUMMARY: Once = Once::new();

extern "C" fn print_summary() {
    let n = SKIPPED.load(Ordering::SeqCst);
    if n > 0 {
        let _ = writeln!(
            std::io::stderr(),
            "skipped: {n} test(s) of this binary need the real matrices, not found at {} \
             (set {DIR_VAR}=DIR to run them, {REQUIRE_VAR}=1 to fail without them)",
            default_dir().display()
        );
    }
}

/// The matrix directory for a test that needs it: `Some` when it exists. When
/// it does not, `None` (the test returns early: skipped) after a line on
/// standard error naming the test, past the test harness's capture so that a
/// plain `cargo test` shows it; the binary prints the count of skipped tests
/// when it exits.
///
/// # Panics
/// When the directory is missing and `JDMG_REQUIRE_MATRICES=1`.
#[must_use]
pub fn test_dir() -> Option<PathBuf> {
    let dir = default_dir();
    if dir.is_dir() {
        return Some(dir);
    }
    assert!(
        !required(),
        "the real matrices are required ({REQUIRE_VAR}=1) but {} is not a directory (set {DIR_VAR})",
        dir.display()
    );
    let name = std::thread::current()
        .name()
        .filter(|n| *n != "main")
        .map_or_else(|| "a test".to_owned(), str::to_owned);
    // Written to the process's standard error, not through `eprintln!` (which
    // the harness captures and hides for a passing test).
    let _ = writeln!(
        std::io::stderr(),
        "skipped: {name} (real matrices not found at {}; set {DIR_VAR})",
        dir.display()
    );
    SKIPPED.fetch_add(1, Ordering::SeqCst);
    SUMMARY.call_once(|| {
        // SAFETY: registers a plain function that only writes to stderr.
        unsafe {
            libc::atexit(print_summary);
        }
    });
    None
}
