//! Spec sections 1 and 2, verified against a C compiler (ctest-style).
//!
//! `tests/layout.c` is compiled with the system C compiler (found through the `cc` crate, so
//! `CC` and `CFLAGS` are honoured) against the header the bindings came from: the bundled
//! `include/linux/ukevent.h`, or the patched kernel's header when the build used one. It prints
//! every struct size and alignment, field offset and size, and constant. Each value must equal
//! both the Rust side (the bindgen output in `kevent_sys`) and the spec's number (written below
//! for section 1, in `tests/support/` for section 2), so a change to one offset or constant fails here even if header and bindings changed
//! together. The set of names must match exactly, so the C program and this table cannot drift
//! apart silently.

use std::collections::BTreeMap;
use std::mem::{align_of, offset_of, size_of};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::{Check, constant_checks};
use kevent_sys::*;

mod common;

/// A section 1 check from a Rust size or offset.
fn check(name: impl Into<String>, rust: usize, spec: u64) -> Check {
    Check {
        name: name.into(),
        rust: rust as u64,
        spec,
    }
}

/// The size of the value a raw pointer points to, without reading it.
fn pointee_size<T>(_: *const T) -> usize {
    size_of::<T>()
}

/// The element size of a flexible array member.
fn element_size<T>(_: *const __IncompleteArrayField<T>) -> usize {
    size_of::<T>()
}

/// Spec section 1: sizes, alignments, and every field's offset and size.
fn layout_checks() -> Vec<Check> {
    let id = kevent_id::default();
    let ev = ukevent::default();
    let ring = kevent_ring::default();
    let ptr_size = size_of::<*mut libc::c_void>() as u64;
    // Offsets of the anonymous unions' members: the union's offset plus the member's.
    let id_union = offset_of!(kevent_id, __bindgen_anon_1);
    let ev_union = offset_of!(ukevent, __bindgen_anon_1);
    vec![
        check("sizeof(kevent_id)", size_of::<kevent_id>(), 8),
        check("alignof(kevent_id)", align_of::<kevent_id>(), 8),
        check(
            "offsetof(kevent_id.raw)",
            id_union + offset_of!(kevent_id__bindgen_ty_1, raw),
            0,
        ),
        check(
            "sizeof(kevent_id.raw)",
            pointee_size(&raw const id.__bindgen_anon_1.raw),
            8,
        ),
        check(
            "offsetof(kevent_id.raw_u64)",
            id_union + offset_of!(kevent_id__bindgen_ty_1, raw_u64),
            0,
        ),
        check(
            "sizeof(kevent_id.raw_u64)",
            pointee_size(&raw const id.__bindgen_anon_1.raw_u64),
            8,
        ),
        check("sizeof(ukevent)", size_of::<ukevent>(), 40),
        check("alignof(ukevent)", align_of::<ukevent>(), 8),
        check("offsetof(ukevent.id)", offset_of!(ukevent, id), 0),
        check("sizeof(ukevent.id)", pointee_size(&raw const ev.id), 8),
        check("offsetof(ukevent.type)", offset_of!(ukevent, type_), 8),
        check("sizeof(ukevent.type)", pointee_size(&raw const ev.type_), 4),
        check("offsetof(ukevent.event)", offset_of!(ukevent, event), 12),
        check(
            "sizeof(ukevent.event)",
            pointee_size(&raw const ev.event),
            4,
        ),
        check(
            "offsetof(ukevent.req_flags)",
            offset_of!(ukevent, req_flags),
            16,
        ),
        check(
            "sizeof(ukevent.req_flags)",
            pointee_size(&raw const ev.req_flags),
            4,
        ),
        check(
            "offsetof(ukevent.ret_flags)",
            offset_of!(ukevent, ret_flags),
            20,
        ),
        check(
            "sizeof(ukevent.ret_flags)",
            pointee_size(&raw const ev.ret_flags),
            4,
        ),
        check(
            "offsetof(ukevent.ret_data)",
            offset_of!(ukevent, ret_data),
            24,
        ),
        check(
            "sizeof(ukevent.ret_data)",
            pointee_size(&raw const ev.ret_data),
            8,
        ),
        check(
            "offsetof(ukevent.user)",
            ev_union + offset_of!(ukevent__bindgen_ty_1, user),
            32,
        ),
        check(
            "sizeof(ukevent.user)",
            pointee_size(&raw const ev.__bindgen_anon_1.user),
            8,
        ),
        check(
            "offsetof(ukevent.ptr)",
            ev_union + offset_of!(ukevent__bindgen_ty_1, ptr),
            32,
        ),
        check(
            "sizeof(ukevent.ptr)",
            pointee_size(&raw const ev.__bindgen_anon_1.ptr),
            ptr_size,
        ),
        check("sizeof(kevent_ring)", size_of::<kevent_ring>(), 8),
        check("alignof(kevent_ring)", align_of::<kevent_ring>(), 8),
        check(
            "offsetof(kevent_ring.ring_kidx)",
            offset_of!(kevent_ring, ring_kidx),
            0,
        ),
        check(
            "sizeof(kevent_ring.ring_kidx)",
            pointee_size(&raw const ring.ring_kidx),
            4,
        ),
        check(
            "offsetof(kevent_ring.ring_over)",
            offset_of!(kevent_ring, ring_over),
            4,
        ),
        check(
            "sizeof(kevent_ring.ring_over)",
            pointee_size(&raw const ring.ring_over),
            4,
        ),
        check(
            "offsetof(kevent_ring.event)",
            offset_of!(kevent_ring, event),
            8,
        ),
        check(
            "sizeof(kevent_ring.event[0])",
            element_size(&raw const ring.event),
            40,
        ),
    ]
}

/// The include directory holding the header the bindings were generated from.
fn header_include_dir() -> PathBuf {
    match BINDINGS_SOURCE
        .strip_prefix("patched ")
        .and_then(|s| s.strip_suffix("/linux/ukevent.h"))
    {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("include"),
    }
}

/// The target triple handed to `cc` (integration tests do not get cargo's `TARGET`).
fn target_triple() -> String {
    let arch = match std::env::consts::ARCH {
        "x86" => "i686",
        a => a,
    };
    let env = if cfg!(target_env = "musl") {
        "musl"
    } else {
        "gnu"
    };
    format!("{arch}-unknown-linux-{env}")
}

/// Compiles and runs `layout.c` once per test process; the values it printed, by name.
fn c_values() -> &'static BTreeMap<String, u64> {
    static VALUES: OnceLock<BTreeMap<String, u64>> = OnceLock::new();
    VALUES.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/layout.c");
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("layout");
        std::fs::create_dir_all(&dir).expect("create the layout test's directory");
        let exe = dir.join(format!("layout-{}", std::process::id()));
        let triple = target_triple();
        let compiler = cc::Build::new()
            .cargo_metadata(false)
            .target(&triple)
            .host(&triple)
            .opt_level(0)
            .debug(false)
            .warnings(true)
            .extra_warnings(true)
            .warnings_into_errors(true)
            .get_compiler();
        let mut cmd = compiler.to_command();
        cmd.arg("-std=gnu11")
            .arg("-I")
            .arg(header_include_dir())
            .arg(&src)
            .arg("-o")
            .arg(&exe);
        let out = cmd
            .output()
            .unwrap_or_else(|e| panic!("run the C compiler {cmd:?}: {e}"));
        assert!(
            out.status.success(),
            "the C compiler failed on tests/layout.c: {cmd:?}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let run = Command::new(&exe).output().expect("run the layout program");
        let _ = std::fs::remove_file(&exe);
        assert!(
            run.status.success(),
            "the layout program failed: {}",
            run.status
        );
        String::from_utf8(run.stdout)
            .expect("layout program output is ASCII")
            .lines()
            .map(|line| {
                let (name, value) = line.rsplit_once(' ').expect("`name value` line");
                (name.to_owned(), value.parse().expect("decimal value"))
            })
            .collect()
    })
}

/// Compares each check with C and with the spec; lists every mismatch at once.
fn compare(checks: &[Check]) {
    let c = c_values();
    let mut bad = Vec::new();
    for ch in checks {
        match c.get(&ch.name) {
            None => bad.push(format!("{}: not printed by layout.c", ch.name)),
            Some(&cv) if cv != ch.rust || cv != ch.spec => bad.push(format!(
                "{}: C {cv:#x}, Rust {:#x}, spec {:#x}",
                ch.name, ch.rust, ch.spec
            )),
            Some(_) => {}
        }
    }
    assert!(bad.is_empty(), "ABI mismatch:\n  {}", bad.join("\n  "));
}

#[test]
fn s1_struct_layout_matches_c_compiler_and_spec() {
    compare(&layout_checks());
}

#[test]
fn s2_constants_match_c_compiler_and_spec() {
    compare(&constant_checks());
}

#[test]
fn s1_s2_c_program_and_rust_table_cover_the_same_names() {
    let rust: Vec<String> = layout_checks()
        .into_iter()
        .chain(constant_checks())
        .map(|c| c.name)
        .collect();
    let extra: Vec<&String> = c_values().keys().filter(|k| !rust.contains(k)).collect();
    assert!(
        extra.is_empty(),
        "layout.c prints values this test does not check: {extra:?}"
    );
    assert_eq!(c_values().len(), rust.len(), "duplicate names in layout.c");
}
