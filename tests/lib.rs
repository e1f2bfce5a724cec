//! Cross-crate integration tests live in `tests/tests/`; MPI scenario binaries in
//! `tests/src/bin/` (built with `--features mpi`, run by `.ci/run` under mpirun).

use std::path::PathBuf;

/// Directory of the shared real matrices for a test, `None` (skip, with a line
/// on stderr) when it is missing: see [`matrices::shared::test_dir`].
pub fn shared_matrices_dir() -> Option<PathBuf> {
    matrices::shared::test_dir()
}
