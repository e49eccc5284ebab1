//! Signals: one counting handler for the tests that need the program's own handler in
//! place, and sending a signal to this process. Tests that install a handler change
//! process-wide state, so they are `isolated_test!`s: each child counts from zero.

use std::ffi::c_int;
use std::sync::atomic::{AtomicU32, Ordering};

static HANDLED: AtomicU32 = AtomicU32::new(0);

extern "C" fn count_handler(_: c_int) {
    HANDLED.fetch_add(1, Ordering::SeqCst);
}

/// Installs a handler for `signo` that counts its runs ([`handled`]), with `SA_RESTART`
/// when `restart` (without it, interrupted system calls see `EINTR`).
pub fn install_counting_handler(signo: c_int, restart: bool) {
    // SAFETY: `sa` is fully initialised (zeroed, then handler, empty mask and flags set);
    // `count_handler` is an `extern "C" fn(c_int)` that only touches an atomic.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = count_handler as extern "C" fn(c_int) as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        sa.sa_flags = if restart { libc::SA_RESTART } else { 0 };
        assert_eq!(libc::sigaction(signo, &sa, std::ptr::null_mut()), 0);
    }
}

/// How many times the counting handler ran in this process.
pub fn handled() -> u32 {
    HANDLED.load(Ordering::SeqCst)
}

/// Starts counting from zero again.
pub fn reset_handled() {
    HANDLED.store(0, Ordering::SeqCst);
}
