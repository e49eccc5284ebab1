//! Hands the target triple to `c::compiler`, which drives the cc crate outside a build
//! script (where cargo's `TARGET` is not set).
fn main() {
    let target = std::env::var("TARGET").expect("cargo sets TARGET");
    println!("cargo:rustc-env=KEVENT_C_TARGET={target}");
    println!("cargo:rerun-if-changed=build.rs");
}
