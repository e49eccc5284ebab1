//! Spec section 6, backend detection, through the public API (`Backend`, `Detector`):
//! native only when the kernel advertises kevent *and* the probe succeeds; `KEVENT_BACKEND`
//! = `auto`/`native`/`fallback` (anything else an error); the choice made once per process
//! and readable. That no unadvertised syscall number is ever called is proved under a
//! seccomp filter by `s6_detect_seccomp.rs`.
//!
//! The process's choice is made once, so each `KEVENT_BACKEND` value is tried in a child.

use std::path::Path;
use std::time::Duration;

use kevent_sys::detect::{Detector, Selection, Unavailable};
use kevent_test_support::*;

/// Whether this kernel advertises kevent.
fn kevent_kernel() -> bool {
    Path::new(kevent_sys::detect::SYSFS_ROOT).exists()
}

/// Runs `body` in a child process with `KEVENT_BACKEND=value`.
fn with_backend_env(name: &str, value: &str, body: fn()) {
    let name = &test_path(module_path!(), name);
    if std::env::var(ROLE_ENV).as_deref() == Ok(name.as_str()) {
        body();
        println!("\nCHILD-OK");
        return;
    }
    let out = run_child(
        name,
        "fallback",
        &[("KEVENT_BACKEND", value)],
        Duration::from_secs(60),
    );
    assert!(out.ok, "KEVENT_BACKEND={value}: {}", out.describe());
}

/// A fake advertisement directory.
fn advertise(tag: &str, abi: Option<&str>, syscalls: Option<&str>) -> std::path::PathBuf {
    let d = temp_dir(tag);
    if let Some(a) = abi {
        std::fs::write(d.join("abi"), a).unwrap();
    }
    if let Some(s) = syscalls {
        std::fs::write(d.join("syscalls"), s).unwrap();
    }
    d
}

#[test]
fn s6_choice_is_made_once_and_can_be_read_back() {
    let a = Backend::current();
    let b = Backend::current();
    match (a, b) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a, b);
            let expect_native =
                kevent_kernel() && std::env::var("KEVENT_BACKEND").as_deref() != Ok("fallback");
            // On a kevent kernel whose probe fails, auto falls back: only check fallback.
            if !expect_native {
                assert_eq!(a, Backend::Fallback);
            }
            assert_eq!(a.as_str(), a.to_string());
        }
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
        (a, b) => panic!("current() changed its answer: {a:?} then {b:?}"),
    }
}

#[test]
fn s6_kevent_backend_fallback_selects_the_fallback() {
    with_backend_env(
        "s6_kevent_backend_fallback_selects_the_fallback",
        "fallback",
        || {
            assert_eq!(Backend::current().unwrap(), Backend::fallback());
            let e = Backend::native().expect_err("native disabled");
            assert!(matches!(e.reason(), Unavailable::Disabled), "{e}");
            let q = Queue::new(Backend::current().unwrap());
            assert_usable(&q);
        },
    );
}

#[test]
fn s6_kevent_backend_auto_and_empty_are_the_default() {
    for (name, v) in [
        ("s6_kevent_backend_auto_and_empty_are_the_default", "auto"),
        ("s6_kevent_backend_auto_and_empty_are_the_default", ""),
    ] {
        with_backend_env(name, v, || {
            let b = Backend::current().expect("auto never fails");
            if !kevent_kernel() {
                assert_eq!(b, Backend::fallback());
                assert!(Backend::native().is_err());
            }
            assert_usable(&Queue::new(b));
        });
    }
}

#[test]
fn s6_kevent_backend_native_without_a_kevent_kernel_is_a_clear_error() {
    if kevent_kernel() {
        eprintln!("this kernel advertises kevent: native must be selected instead");
    }
    with_backend_env(
        "s6_kevent_backend_native_without_a_kevent_kernel_is_a_clear_error",
        "native",
        || match Backend::current() {
            Ok(b) => {
                assert!(
                    kevent_kernel(),
                    "native selected on a kernel that does not advertise kevent"
                );
                assert!(b.is_native(), "{b:?}");
            }
            Err(e) => {
                assert!(
                    !kevent_kernel() || !matches!(e.reason(), Unavailable::NotAdvertised { .. })
                );
                let s = e.to_string();
                assert!(s.contains("kevent"), "unclear error: {s}");
                assert!(Backend::native().is_err());
            }
        },
    );
}

#[test]
fn s6_kevent_backend_invalid_value_is_an_error() {
    with_backend_env(
        "s6_kevent_backend_invalid_value_is_an_error",
        "Native",
        || {
            let e = Backend::current().expect_err("an invalid KEVENT_BACKEND");
            assert!(
                matches!(e.reason(), Unavailable::InvalidSelection { value } if value == "Native"),
                "{e}"
            );
            // The fallback stays usable explicitly.
            assert_usable(&Queue::new(Backend::fallback()));
        },
    );
}

#[test]
fn s6_native_only_when_the_kernel_advertises_kevent() {
    // No directory: not advertised; auto falls back, native is an error.
    let none = Detector::new().sysfs_root("/nonexistent/kevent");
    let d = none.clone().selection(Selection::Auto).run().unwrap();
    assert!(!d.is_native());
    assert!(d.syscalls.is_none());
    assert!(matches!(
        d.unavailable,
        Some(Unavailable::NotAdvertised { .. })
    ));
    // `native` on a kernel that does not advertise itself tries only the numbers the build
    // found in a patched kernel's headers (the VM lane's bindgen build has them): it works
    // exactly when those numbers reach a kevent kernel, as they do in the lane's guest.
    let native = none.selection(Selection::Native).run();
    match kevent_sys::syscall::SyscallTable::from_header() {
        None => assert!(native.is_err(), "{native:?}"),
        Some(t) => {
            // The running kernel's own advertisement, if it makes one.
            let advertised = Detector::new()
                .selection(Selection::Auto)
                .run()
                .ok()
                .and_then(|d| d.syscalls);
            // The five numbers decide; the header table never has the sixth (P37), the
            // advertisement of a kernel with native AIO has it.
            let five = |t: kevent_sys::syscall::SyscallTable| {
                (t.init, t.ctl, t.get_events, t.wait, t.commit)
            };
            let reaches = advertised.is_some_and(|a| five(a) == five(t));
            assert_eq!(native.is_ok(), reaches, "header numbers {t:?}: {native:?}");
        }
    }
    // An advertisement that is not ABI 1, or malformed, is never probed.
    for (tag, abi, sys) in [
        ("abi2", Some("2\n"), Some("1000 1001 1002 1003 1004\n")),
        (
            "abi-junk",
            Some("one\n"),
            Some("1000 1001 1002 1003 1004\n"),
        ),
        ("no-abi", None, Some("1000 1001 1002 1003 1004\n")),
        ("no-sys", Some("1\n"), None),
        ("four", Some("1\n"), Some("1000 1001 1002 1003\n")),
        ("junk", Some("1\n"), Some("a b c d e\n")),
    ] {
        let root = advertise(tag, abi, sys);
        let d = Detector::new()
            .sysfs_root(&root)
            .selection(Selection::Auto)
            .run()
            .unwrap();
        assert!(!d.is_native(), "{tag}");
        assert!(
            !matches!(
                d.unavailable,
                Some(
                    Unavailable::ProbeNoSys { .. }
                        | Unavailable::ProbeFailed { .. }
                        | Unavailable::ProbeDenied { .. }
                )
            ),
            "{tag}: probed a bad advertisement: {:?}",
            d.unavailable
        );
        let _ = std::fs::remove_dir_all(root);
    }
}

#[test]
fn s6_probe_enosys_means_not_available() {
    require!(
        cfg!(target_arch = "x86_64"),
        "syscall numbers 1000-1004 are known unassigned only on x86_64"
    );
    // A well-formed advertisement of numbers no kernel implements: the probe answers ENOSYS.
    let root = advertise("enosys", Some("1\n"), Some("1000 1001 1002 1003 1004\n"));
    let d = Detector::new()
        .sysfs_root(&root)
        .selection(Selection::Auto)
        .run()
        .unwrap();
    assert!(!d.is_native());
    assert!(
        matches!(d.unavailable, Some(Unavailable::ProbeNoSys { nr: 1000 })),
        "{:?}",
        d.unavailable
    );
    let e = Detector::new()
        .sysfs_root(&root)
        .selection(Selection::Native)
        .run()
        .expect_err("native with a failing probe");
    assert!(matches!(e, Unavailable::ProbeNoSys { .. }), "{e}");
    let _ = std::fs::remove_dir_all(root);
}

/// Installs a seccomp filter in this (child) process that answers EPERM to syscall `nr`.
#[cfg(target_arch = "x86_64")]
fn deny_with_eperm(nr: u32) -> bool {
    let filter = seccomp::refusing(nr..=nr, None, seccomp::fail_with(libc::EPERM));
    seccomp::install(&filter).is_ok()
}

isolated_test! {
    /// EPERM from the probe (a seccomp filter or security module) means "not available":
    /// auto falls back with the reason, native is a typed error.
    fn s6_probe_eperm_means_not_available(_b) {
        #[cfg(target_arch = "x86_64")]
        {
            let root = advertise("eperm", Some("1\n"), Some("1000 1001 1002 1003 1004\n"));
            require!(deny_with_eperm(1000), "cannot install a seccomp filter here");
            let d = Detector::new()
                .sysfs_root(&root)
                .selection(Selection::Auto)
                .run()
                .unwrap();
            assert!(!d.is_native());
            assert!(
                matches!(d.unavailable, Some(Unavailable::ProbeDenied { nr: 1000 })),
                "{:?}",
                d.unavailable
            );
            let e = Detector::new()
                .sysfs_root(&root)
                .selection(Selection::Native)
                .run()
                .expect_err("native with a denied probe");
            assert!(matches!(e, Unavailable::ProbeDenied { .. }), "{e}");
            let _ = std::fs::remove_dir_all(root);
        }
    }
}
