//! `libkevent-epoll.so` (the `kevent-epoll-preload` crate) driven by the differential test of
//! `differential_epoll.rs`: this test binary re-executes itself under
//! `LD_PRELOAD=libkevent_epoll_preload.so`, once per backend (`KEVENT_BACKEND`), where its calls to
//! libc's `epoll_create1`, `epoll_ctl` and `epoll_wait` land in the shim, and compares them
//! with the kernel's epoll reached through raw system calls, sequence by sequence.
//!
//! Not part of the conformance binary: that one is linked statically for the VM, and a
//! static executable cannot preload anything.
#![allow(unsafe_code)]

use std::time::Duration;

use kevent_test_support::differential::shim::run_preloaded;
use kevent_test_support::differential::*;

/// Set in the re-executed child: the backend the parent chose for it.
const CHILD_ENV: &str = "KEVENT_PRELOAD_CHILD";

/// The file that defines the `epoll_ctl` this process calls.
fn epoll_ctl_provider() -> String {
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    let f: unsafe extern "C" fn(i32, i32, i32, *mut libc::epoll_event) -> i32 = libc::epoll_ctl;
    // SAFETY: `info` is valid for writes; dladdr only reads the address.
    let ok = unsafe { libc::dladdr(f as *const libc::c_void, info.as_mut_ptr()) };
    if ok == 0 {
        return String::new();
    }
    // SAFETY: dladdr succeeded and filled `info`; `dli_fname` is a C string or null.
    let info = unsafe { info.assume_init() };
    if info.dli_fname.is_null() {
        return String::new();
    }
    // SAFETY: non-null, NUL-terminated (dladdr's contract).
    unsafe { std::ffi::CStr::from_ptr(info.dli_fname) }
        .to_string_lossy()
        .into_owned()
}

/// The child: preloaded, so `LibcEpoll` is the shim; the differential driver against the
/// raw-syscall epoll.
fn child(backend: &str) {
    let provider = epoll_ctl_provider();
    assert!(
        provider.contains("libkevent_epoll") || provider.contains("libkevent-epoll"),
        "LD_PRELOAD did not take: epoll_ctl comes from {provider:?}"
    );
    // The instance is a kevent queue: on the fallback an epoll holding the engine's wake
    // eventfd although the program registered nothing; on a kevent kernel no epoll at all.
    let ep = LibcEpoll::new();
    let info =
        std::fs::read_to_string(format!("/proc/self/fdinfo/{}", ep.fd())).unwrap_or_default();
    match backend {
        "fallback" => assert!(info.contains("tfd:"), "not a fallback queue: {info}"),
        _ => assert!(!info.contains("tfd:"), "a native queue is no epoll: {info}"),
    }
    drop(ep);
    let (cases, ops) = explore(
        "d17_differential_epoll_through_the_preloaded_shim",
        0x5417,
        &|_| format!("libkevent-epoll.so on the {backend} backend"),
        &|_| LibcEpoll::new(),
    );
    assert!(cases > 0 && ops > 0);
}

/// The shim under `LD_PRELOAD`, on every backend, against the kernel's epoll.
#[test]
fn d17_differential_epoll_through_the_preloaded_shim() {
    const NAME: &str = "d17_differential_epoll_through_the_preloaded_shim";
    let outs = run_preloaded(NAME, CHILD_ENV, Duration::from_secs(300), child);
    for (kind, out) in outs.unwrap_or_default() {
        for line in out.stderr.lines().filter(|l| l.contains("all agree")) {
            eprintln!("[{NAME}] {kind}: {line}");
        }
    }
}
