//! Issue 24, "native and fallback never disagree": one random sequence of kevent operations
//! driven through both backends in the same process, side by side, every return value,
//! written-back entry, delivered event set and ring slot compared (the driver, its twin
//! worlds and what it compares where the spec lets the backends differ are in
//! `tests/support/src/differential/twin.rs`). It needs a kevent kernel, so it runs in
//! `scripts/vm-lane test`'s guest (1,000,000 operations there, `KEVENT_NATDIFF_OPS`); on a
//! machine without one it is skipped with the reason (a failure under
//! `KEVENT_REQUIRE_ALL=1` only where the kernel advertises kevent, so native was expected).
//! The driver itself is checked everywhere by running the same sequences on two fallback
//! queues. Both tests run in a child process: they install signal handlers.

use std::time::Duration;

use kevent_test_support::differential::twin;
use kevent_test_support::*;

/// The child's time limit: generous for the lane's million operations under TCG.
fn limit() -> Duration {
    match differential::env_u64("KEVENT_NATDIFF_OPS") {
        Some(n) if n > 100_000 => Duration::from_secs(1500),
        _ => Duration::from_secs(600),
    }
}

/// Runs `body` in a child process (this test binary again), printing its notes.
fn in_child(name: &str, body: fn(&str)) {
    let name = &test_path(module_path!(), name);
    if std::env::var(ROLE_ENV).as_deref() == Ok(name.as_str()) {
        twin::install_handlers();
        body(name);
        println!("\nCHILD-OK");
        return;
    }
    let out = run_child(name, "fallback", &[], limit());
    assert!(out.ok, "[{name}] {}", out.describe());
    for line in out.stderr.lines().filter(|l| !l.trim().is_empty()) {
        eprintln!("[{name}]   child: {line}");
    }
}

/// Sections 3-5, D10, D12, D13, D17, D8, and the EINTR rule of section 3 (issue 24 items 1
/// and 2 among what it catches): the native and fallback backends agree on every step of
/// random sequences.
#[test]
fn d10_d13_differential_native_and_fallback_agree() {
    const NAME: &str = "d10_d13_differential_native_and_fallback_agree";
    if std::env::var(ROLE_ENV).is_err() {
        if let Err(e) = Backend::native() {
            let expected = std::path::Path::new(kevent_sys::detect::SYSFS_ROOT).exists()
                && std::env::var("KEVENT_BACKEND").as_deref() != Ok("fallback");
            let why = format!("no native backend: {}", e.reason());
            if expected {
                skip(NAME, &why);
            } else {
                eprintln!("[{NAME}] skipped: {why}");
            }
            return;
        }
    }
    in_child(NAME, |name| {
        let native = Backend::native().expect("the parent saw a native backend");
        let (cases, ops) = twin::explore(name, native, Backend::fallback(), u64::MAX);
        assert!(cases > 0 && ops > 0);
    });
}

/// The driver compared with itself: two fallback queues in one process agree on every
/// sequence, so a disagreement of the native test is the backends', not the driver's (at
/// most 100,000 operations: the lane's million is for the native test).
#[test]
fn differential_twin_driver_fallback_agrees_with_itself() {
    in_child(
        "differential_twin_driver_fallback_agrees_with_itself",
        |name| {
            let (cases, ops) =
                twin::explore(name, Backend::fallback(), Backend::fallback(), 100_000);
            assert!(cases > 0 && ops > 0);
        },
    );
}
