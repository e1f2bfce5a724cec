//! Looks for the real matrices when the tests are built and tells the
//! `matrix_test` attribute whether to ignore the tests that read them.
//!
//! The directory is `$JDMG_MATRICES` (absolute, or relative to the repository
//! root), else `../shared/matrices` beside the repository, as in
//! `matrices::shared::default_dir`. Found (or `JDMG_REQUIRE_MATRICES=1`): the
//! tests run. Missing: they are ignored with the reason.
//!
//! (No `cargo::warning`: this script runs twice in a workspace test run, for
//! the proc macro and for the summary test of this package, and each would
//! print it. The summary says it once.)
//!
//! This lives in a proc-macro crate of its own, a dev-dependency only, because
//! whatever this script decides is rebuilt with everything that depends on it:
//! here only the test targets, where a build script of `matrices` would rebuild
//! every library of the workspace.

use std::path::{Component, Path, PathBuf};

/// `..` and `.` removed by hand, for a path that may not exist.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=JDMG_MATRICES");
    println!("cargo::rerun-if-env-changed=JDMG_REQUIRE_MATRICES");
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&manifest).join("../..");
    let dir = lexical(&std::env::var_os("JDMG_MATRICES").map_or_else(
        || root.join("../shared/matrices"),
        |d| root.join(d), // an absolute $JDMG_MATRICES replaces root
    ));
    let required = std::env::var("JDMG_REQUIRE_MATRICES").is_ok_and(|v| v == "1");
    let found = dir.is_dir();
    if found {
        // Also notices the directory going away. (A missing path cannot be
        // watched: cargo would rerun this script, and rebuild every test
        // target, on every build.)
        println!("cargo::rerun-if-changed={}", dir.display());
    }
    // Required: the tests run, and fail naming the directory.
    let ignored = !found && !required;
    println!("cargo::rustc-env=TESTENV_MATRICES_DIR={}", dir.display());
    println!(
        "cargo::rustc-env=TESTENV_MATRICES_IGNORED={}",
        u8::from(ignored)
    );
}
