//! Generates the C library's header and pkg-config file (work in progress).
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
}
