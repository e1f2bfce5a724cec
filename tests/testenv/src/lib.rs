//! `#[testenv::matrix_test]` and `#[testenv::mpi_test]`: `#[test]` for tests
//! that need what a fresh clone does not have. When it is missing they are
//! `#[ignore]`d with the reason, so that `cargo test` counts and lists them as
//! ignored (`test … ignored, <reason>`) instead of passing them.
//!
//! * `matrix_test`: the test reads the real matrices
//!   (`matrices::shared::test_dir`). Whether they exist is decided when the
//!   tests are built (`build.rs`); setting or changing `JDMG_MATRICES` rebuilds
//!   the tests. Without them the build warns once and the tests are ignored.
//! * `mpi_test`: the test launches mpirun on the binaries of an MPI build,
//!   which a `cargo test` never makes. Always ignored; run them with
//!   `cargo test -p jdmg-tests --test mpi_scenarios -- --ignored` after that
//!   build.
//!
//! An ignored test still runs with `-- --ignored` (or `--include-ignored`),
//! and then fails, saying what is missing, if it is.

use proc_macro::{Literal, TokenStream};

/// Whether `build.rs` did not find the matrices (`1`), and where it looked.
const MATRICES_IGNORED: &str = env!("TESTENV_MATRICES_IGNORED");
const MATRICES_DIR: &str = env!("TESTENV_MATRICES_DIR");

const MPI_IGNORE: &str = "needs mpirun and an MPI build (docs/src/running.md, \"MPI\"): \
                          run with -- --ignored after that build";

/// `#[test]` for a test that reads the real matrices: ignored, with the
/// reason, when they were not found when the tests were built.
#[proc_macro_attribute]
pub fn matrix_test(args: TokenStream, item: TokenStream) -> TokenStream {
    let reason = if MATRICES_IGNORED == "1" {
        format!("needs the SuiteSparse matrices, not at {MATRICES_DIR}: set JDMG_MATRICES")
    } else {
        String::new()
    };
    test(args, item, &reason)
}

/// `#[test]` for a test that runs mpirun on an MPI build: always ignored, with
/// the reason; `-- --ignored` runs it.
#[proc_macro_attribute]
pub fn mpi_test(args: TokenStream, item: TokenStream) -> TokenStream {
    test(args, item, MPI_IGNORE)
}

/// `item` behind `#[test]`, and `#[ignore = reason]` unless `reason` is empty.
fn test(args: TokenStream, item: TokenStream, reason: &str) -> TokenStream {
    let head = if !args.is_empty() {
        "::core::compile_error!(\"takes no arguments\");".to_owned()
    } else if reason.is_empty() {
        "#[::core::prelude::v1::test]".to_owned()
    } else {
        format!(
            "#[::core::prelude::v1::test] #[ignore = {}]",
            Literal::string(reason)
        )
    };
    let mut out: TokenStream = head.parse().expect("valid attribute tokens");
    out.extend(item);
    out
}
