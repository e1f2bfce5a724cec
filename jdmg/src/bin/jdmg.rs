//! The `jdmg` command line.
fn main() {
    println!("jdmg {}", env!("CARGO_PKG_VERSION"));
}
