//! The closing summary of a `cargo test --workspace` run: which tests it
//! ignored and why, in one place, after the test binaries that reported them
//! one by one. Not a test (`harness = false`): it prints and exits 0.
//!
//! cargo runs the test binaries of a workspace sorted by package, and
//! `testenv` sorts last, so this comes after all of them (only the doc-tests
//! follow). Nothing is printed when the ignored tests were asked for
//! (`--ignored`, `--include-ignored`) or for a listing (`--list`, `--format`),
//! which tools parse.

fn main() {
    let quiet = ["--list", "--format", "--ignored", "--include-ignored"];
    if std::env::args().any(|a| quiet.iter().any(|q| a.starts_with(q))) {
        return;
    }
    println!();
    println!("Ignored by this run (each counted as \"ignored\" above, not as passed):");
    if env!("TESTENV_MATRICES_IGNORED") == "1" {
        println!(
            "  the tests that read the real matrices (#[testenv::matrix_test] in matrices, \
             precond, jdmg, jdmg-tests): the SuiteSparse matrices are not at {}. Set \
             JDMG_MATRICES to their directory; which ones and where to get them: README, \
             \"Tests\".",
            env!("TESTENV_MATRICES_DIR")
        );
    }
    println!(
        "  the MPI scenarios (#[testenv::mpi_test] in jdmg-tests, mpi_scenarios): they need \
         mpirun and an MPI build, which cargo test never makes; docs/src/running.md, \"MPI\"."
    );
    println!();
}
