//! Where the real test matrices are, for the tests and benchmarks of every
//! crate: one place that resolves the directory.
//!
//! The directory is `$JDMG_MATRICES` (absolute, or relative to the repository
//! root), else `shared/matrices` beside the repository (`../shared/matrices`
//! from its root). A clean clone has neither: the tests that read it are
//! marked `#[testenv::matrix_test]`, which ignores them (`cargo test` reports
//! them as ignored, with the reason) when the directory was missing when they
//! were built. With `JDMG_REQUIRE_MATRICES=1` (set by CI) they are not
//! ignored, and fail instead.

use std::path::{Path, PathBuf};

/// The environment variable naming the matrix directory.
pub const DIR_VAR: &str = "JDMG_MATRICES";
/// The environment variable that makes a missing directory fail (`1`).
pub const REQUIRE_VAR: &str = "JDMG_REQUIRE_MATRICES";

/// The matrix directory: `$JDMG_MATRICES` (a relative path is taken from the
/// repository root), else `../shared/matrices` from the repository root. It
/// may not exist.
#[must_use]
pub fn default_dir() -> PathBuf {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    std::env::var_os(DIR_VAR).map_or_else(
        || root.join("../shared/matrices"),
        // an absolute $JDMG_MATRICES replaces root
        |d| root.join(d),
    )
}

/// Whether `JDMG_REQUIRE_MATRICES=1`.
#[must_use]
pub fn required() -> bool {
    std::env::var(REQUIRE_VAR).is_ok_and(|v| v == "1")
}

/// The matrix directory for a test that reads it (one marked
/// `#[testenv::matrix_test]`, which is ignored when the directory was missing
/// at build time).
///
/// # Panics
/// When the directory is missing: the test runs anyway (`-- --ignored`,
/// `JDMG_REQUIRE_MATRICES=1`, or the directory went away after the build).
#[must_use]
pub fn test_dir() -> PathBuf {
    let dir = default_dir();
    assert!(
        dir.is_dir(),
        "the real matrices are not at {} ({}set {DIR_VAR} to their directory; \
         README, \"Tests\")",
        dir.display(),
        if required() {
            format!("{REQUIRE_VAR}=1 requires them: ")
        } else {
            String::new()
        }
    );
    dir
}
