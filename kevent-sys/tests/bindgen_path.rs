//! The bindgen path of `build.rs`, end to end: a build pointed at a patched kernel's headers
//! (`KEVENT_INCLUDE_DIR`) generates its bindings from them and takes the kernel's
//! `__NR_kevent_*` numbers for [`SyscallTable::from_header`] (spec section 6).
//!
//! Each test writes a fake "patched kernel" include directory (a copy of the bundled
//! `linux/ukevent.h`, plus an `asm/unistd_64.h` defining the kevent syscalls as 1000–1004, or
//! not at all) and a tiny probe crate that depends on `kevent-sys` by path and prints what it
//! sees, then runs it with a nested `cargo run`. Both live under cargo's `CARGO_TARGET_TMPDIR`
//! with fixed names, so the probe's dependencies are compiled once and reused.
//!
//! Needs libclang (Debian: `libclang-dev`); without it the tests print why they skipped, and
//! fail instead under `KEVENT_REQUIRE_ALL=1`.
//!
//! [`SyscallTable::from_header`]: kevent_sys::syscall::SyscallTable::from_header

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

/// The fake kernel's syscall numbers.
const FAKE_NR: [(&str, u64); 5] = [
    ("init", 1000),
    ("ctl", 1001),
    ("get_events", 1002),
    ("wait", 1003),
    ("commit", 1004),
];

fn base() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("bindgen_path")
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// A fake patched kernel's include directory `name`: `linux/ukevent.h`, and with
/// `syscalls` an `asm/unistd_64.h` that defines `__NR_kevent_*`.
fn fake_kernel_headers(name: &str, syscalls: bool) -> PathBuf {
    let dir = base().join(name);
    let _ = std::fs::remove_dir_all(&dir);
    let bundled = Path::new(env!("CARGO_MANIFEST_DIR")).join("include/linux/ukevent.h");
    // Written anew on every run: the new mtime makes build.rs (which watches this file) run
    // again, so its warning is printed by this very build.
    write(
        &dir.join("linux/ukevent.h"),
        &std::fs::read_to_string(bundled).unwrap(),
    );
    if syscalls {
        let mut text = String::from(
            "/* A fake patched kernel's syscall table: only the kevent calls. */\n\
             #ifndef _ASM_UNISTD_64_H\n#define _ASM_UNISTD_64_H\n",
        );
        for (name, nr) in FAKE_NR {
            text.push_str(&format!("#define __NR_kevent_{name} {nr}\n"));
        }
        text.push_str("#endif\n");
        write(&dir.join("asm/unistd_64.h"), &text);
        // On x86_64 the system's <asm/unistd.h> includes <asm/unistd_64.h>, which the
        // KEVENT_INCLUDE_DIR search finds here first, exactly as with a real kernel's
        // installed headers. Elsewhere, route <asm/unistd.h> to the fake table directly.
        if !cfg!(target_arch = "x86_64") {
            write(&dir.join("asm/unistd.h"), "#include <asm/unistd_64.h>\n");
        }
    }
    dir
}

/// Writes the probe crate `name` (a binary printing `key=value` lines) and runs it with
/// `KEVENT_INCLUDE_DIR=include`. Returns cargo's stderr and the parsed output.
fn run_probe(name: &str, include: &Path, syscalls: bool) -> (String, BTreeMap<String, String>) {
    let dir = base().join(name);
    let kevent_sys = Path::new(env!("CARGO_MANIFEST_DIR"));
    write(
        &dir.join("Cargo.toml"),
        &format!(
            "[package]\nname = \"{name}\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\
             publish = false\n\n[dependencies]\nkevent-sys = {{ path = {:?} }}\n\n\
             # Not part of any enclosing workspace.\n[workspace]\n",
            kevent_sys.display().to_string()
        ),
    );
    let mut main = String::from(
        "fn main() {\n\
         \x20   println!(\"source={}\", kevent_sys::BINDINGS_SOURCE);\n\
         \x20   println!(\"from_header={:?}\", kevent_sys::syscall::SyscallTable::from_header());\n\
         \x20   println!(\"sizeof(ukevent)={}\", size_of::<kevent_sys::ukevent>());\n\
         \x20   println!(\"sizeof(kevent_ring)={}\", size_of::<kevent_sys::kevent_ring>());\n",
    );
    for c in common::constant_checks() {
        main.push_str(&format!(
            "    println!(\"{0}={{}}\", kevent_sys::{0} as u64);\n",
            c.name
        ));
    }
    if syscalls {
        for (n, _) in FAKE_NR {
            main.push_str(&format!(
                "    println!(\"__NR_kevent_{n}={{}}\", kevent_sys::__NR_kevent_{n} as u64);\n"
            ));
        }
    }
    main.push_str("}\n");
    write(&dir.join("src/main.rs"), &main);
    // The workspace's lock file pins the same dependency versions, so the nested build
    // resolves offline from what the outer build already downloaded.
    let lock = kevent_sys.join("../Cargo.lock");
    if lock.is_file() {
        std::fs::copy(&lock, dir.join("Cargo.lock")).unwrap();
    }

    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
    let mut cmd = Command::new(cargo);
    cmd.args(["run", "--offline", "--manifest-path"])
        .arg(dir.join("Cargo.toml"))
        .current_dir(&dir);
    // Drop what the outer cargo set for this test process (its package, target dir,
    // jobserver), keep the user's configuration (CARGO_HOME, registries, proxies).
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        let outer = [
            "CARGO_PKG_",
            "CARGO_MANIFEST_",
            "CARGO_CRATE_",
            "CARGO_BIN_",
            "CARGO_PRIMARY_PACKAGE",
            "CARGO_TARGET_DIR",
            "CARGO_BUILD_TARGET_DIR",
            "CARGO_MAKEFLAGS",
            "CARGO_RUSTC_CURRENT_DIR",
            "KEVENT_",
            "__CARGO",
        ];
        if outer.iter().any(|p| k.starts_with(p)) {
            cmd.env_remove(&*k);
        }
    }
    cmd.env("CARGO_TARGET_DIR", base().join("target"))
        .env("CARGO_TERM_COLOR", "never")
        .env("KEVENT_INCLUDE_DIR", include);
    let out = cmd.output().unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "the nested build failed: {cmd:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let values = stdout
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    (stderr, values)
}

/// Every constant the probe printed equals this (bundled) build's value and the spec's.
fn assert_constants(values: &BTreeMap<String, String>) {
    assert_eq!(values["sizeof(ukevent)"], "40");
    assert_eq!(values["sizeof(kevent_ring)"], "8");
    for c in common::constant_checks() {
        let v: u64 = values[&c.name].parse().unwrap();
        assert_eq!((v, v), (c.rust, c.spec), "{}: probe, bundled, spec", c.name);
    }
}

fn require_libclang(test: &str) -> bool {
    match common::libclang() {
        Ok(_) => true,
        Err(e) => {
            common::skip(test, &format!("bindgen cannot load libclang: {e}"));
            false
        }
    }
}

#[test]
fn s6_bindgen_path_takes_patched_header_and_its_syscall_numbers() {
    if !require_libclang("s6_bindgen_path_takes_patched_header_and_its_syscall_numbers") {
        return;
    }
    let include = fake_kernel_headers("include-numbers", true);
    let (stderr, values) = run_probe("kevent_probe_numbers", &include, true);

    let header = format!("{}/linux/ukevent.h", include.display());
    assert!(
        stderr.contains(&format!(
            "kevent-sys: using the patched kernel header {header} and its __NR_kevent_* \
             syscall numbers"
        )),
        "the build did not announce the patched header:\n{stderr}"
    );
    assert_eq!(values["source"], format!("patched {header}"));
    assert_eq!(
        values["from_header"],
        "Some(SyscallTable { init: 1000, ctl: 1001, get_events: 1002, wait: 1003, commit: 1004, \
         aio_sendfile: None })"
    );
    for (n, nr) in FAKE_NR {
        assert_eq!(values[&format!("__NR_kevent_{n}")], nr.to_string());
    }
    assert_constants(&values);
}

#[test]
fn s6_bindgen_path_header_without_numbers_has_no_table() {
    if !require_libclang("s6_bindgen_path_header_without_numbers_has_no_table") {
        return;
    }
    let include = fake_kernel_headers("include-header-only", false);
    let (stderr, values) = run_probe("kevent_probe_header_only", &include, false);

    let header = format!("{}/linux/ukevent.h", include.display());
    assert!(
        stderr.contains(&format!(
            "kevent-sys: using the patched kernel header {header}\n"
        )),
        "the build did not announce the patched header (without numbers):\n{stderr}"
    );
    assert_eq!(values["source"], format!("patched {header}"));
    assert_eq!(values["from_header"], "None");
    assert_constants(&values);
}
