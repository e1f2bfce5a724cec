//! Cross-crate integration tests live in `tests/tests/`, with the MPI scenarios
//! (`tests/tests/mpi_scenarios.rs`: mpirun on the binaries of an MPI build,
//! skipped without one).

use std::path::PathBuf;

/// Directory of the shared real matrices for a test, `None` (skip, with a line
/// on stderr) when it is missing: see [`matrices::shared::test_dir`].
pub fn shared_matrices_dir() -> Option<PathBuf> {
    matrices::shared::test_dir()
}
