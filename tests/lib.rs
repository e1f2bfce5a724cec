//! Cross-crate integration tests live in `tests/tests/`, with the MPI scenarios
//! (`tests/tests/mpi_scenarios.rs`: mpirun on the binaries of an MPI build,
//! ignored unless asked for).

use std::path::PathBuf;

/// Directory of the shared real matrices, for a `#[testenv::matrix_test]`: see
/// [`matrices::shared::test_dir`].
pub fn shared_matrices_dir() -> PathBuf {
    matrices::shared::test_dir()
}
