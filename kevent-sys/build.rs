//! Chooses the ABI bindings.
//!
//! * If a patched kernel's header is found (`$KEVENT_INCLUDE_DIR/linux/ukevent.h`, then the
//!   system include directories), bindgen runs on it, together with `<asm/unistd.h>`, so that
//!   the kernel's `__NR_kevent_*` numbers are picked up when it defines them.
//! * Otherwise the checked-in `src/bindings.rs` (generated from the bundled
//!   `include/linux/ukevent.h`) is used, and libclang is never needed.
//!
//! Emits `cfg(kevent_patched_header)` when bindgen ran, and `cfg(kevent_header_syscalls)` when
//! the header set defined all five `__NR_kevent_*` numbers.
//!
//! Always exports the bundled header's directory as the `links = "kevent"` metadata `include`,
//! so that a dependent's build script finds it as `DEP_KEVENT_INCLUDE` (the C library's
//! `build.rs` generates `kevent.h` from it), also when the crates are built from their
//! published packages rather than this repository.

#[path = "bindgen_config.rs"]
mod bindgen_config;

use std::env;
use std::path::{Path, PathBuf};

/// System include directories searched for a patched kernel's `linux/ukevent.h`, after
/// `$KEVENT_INCLUDE_DIR`.
const SYSTEM_INCLUDE_DIRS: &[&str] = &[
    "/usr/local/include",
    "/usr/include/x86_64-linux-gnu",
    "/usr/include/i386-linux-gnu",
    "/usr/include/aarch64-linux-gnu",
    "/usr/include",
];

fn find_patched_header() -> Option<PathBuf> {
    if let Some(dir) = env::var_os("KEVENT_INCLUDE_DIR") {
        let dir = PathBuf::from(dir);
        // Watched even while it holds no header yet (a kernel's headers installed into it
        // later must be noticed; the variable's value alone does not change).
        println!("cargo:rerun-if-changed={}", dir.join("linux").display());
        if dir.join("linux/ukevent.h").is_file() {
            return Some(dir);
        }
        println!(
            "cargo:warning=KEVENT_INCLUDE_DIR={} has no linux/ukevent.h; ignoring it",
            dir.display()
        );
    }
    SYSTEM_INCLUDE_DIRS
        .iter()
        .map(Path::new)
        .find(|d| d.join("linux/ukevent.h").is_file())
        .map(Path::to_path_buf)
}

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    println!("cargo:include={}", manifest.join("include").display());
    println!("cargo:rerun-if-env-changed=KEVENT_INCLUDE_DIR");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=bindgen_config.rs");
    println!("cargo:rerun-if-changed=src/bindings.rs");
    println!("cargo:rustc-check-cfg=cfg(kevent_patched_header)");
    println!("cargo:rustc-check-cfg=cfg(kevent_header_syscalls)");
    // Watch the header where it exists, else its directory (so that installing a patched
    // kernel's headers later is noticed). A watched path that does not exist would make
    // cargo rerun this script, and rebuild everything above it, on every build.
    for d in SYSTEM_INCLUDE_DIRS {
        let header = Path::new(d).join("linux/ukevent.h");
        let dir = Path::new(d).join("linux");
        if header.exists() {
            println!("cargo:rerun-if-changed={}", header.display());
        } else if dir.is_dir() {
            println!("cargo:rerun-if-changed={}", dir.display());
        }
    }

    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let Some(dir) = find_patched_header() else {
        // The bundled header: nothing to generate, src/lib.rs includes src/bindings.rs.
        println!("cargo:rustc-env=KEVENT_BINDINGS_SOURCE=bundled include/linux/ukevent.h");
        return;
    };
    for f in ["linux/ukevent.h", "asm/unistd_64.h", "asm/unistd.h"] {
        let path = dir.join(f);
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    let text = match bindgen_config::generate(&dir, true) {
        Ok(text) => text,
        Err(e) => panic!(
            "found a patched kernel header at {}/linux/ukevent.h but bindgen failed on it: {e} \
             (install libclang-dev, or unset KEVENT_INCLUDE_DIR to use the bundled bindings)",
            dir.display()
        ),
    };
    let has_all_syscalls = ["init", "ctl", "get_events", "wait", "commit"]
        .iter()
        .all(|n| text.contains(&format!("const __NR_kevent_{n}:")));
    std::fs::write(out.join("bindings.rs"), &text).expect("write OUT_DIR/bindings.rs");
    println!("cargo:rustc-cfg=kevent_patched_header");
    if has_all_syscalls {
        println!("cargo:rustc-cfg=kevent_header_syscalls");
    }
    println!(
        "cargo:rustc-env=KEVENT_BINDINGS_SOURCE=patched {}/linux/ukevent.h",
        dir.display()
    );
    println!(
        "cargo:warning=kevent-sys: using the patched kernel header {}/linux/ukevent.h{}",
        dir.display(),
        if has_all_syscalls {
            " and its __NR_kevent_* syscall numbers"
        } else {
            ""
        }
    );
}
