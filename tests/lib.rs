//! Cross-crate integration tests live in `tests/tests/`; MPI scenario binaries in
//! `tests/src/bin/` (built with `--features mpi`, run by `.ci/run` under mpirun).

use std::path::PathBuf;

/// Directory of the shared real matrices: `$JDMG_MATRICES` or `../shared/matrices`
/// relative to the workspace root.
pub fn shared_matrices_dir() -> PathBuf {
    if let Ok(p) = std::env::var("JDMG_MATRICES") {
        return PathBuf::from(p);
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/matrices")
}
