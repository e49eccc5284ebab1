//! `kevent_backend()` and `kevent_backend_unavailable()`: which backend this process uses, and
//! why native is not used.
//!
//! # Safety
//!
//! The returned strings are NUL-terminated and static: literals, or a `CString` stored once in
//! a `OnceLock` that is never cleared, so C may keep the pointers for the life of the process.
#![allow(unsafe_code)]

use std::ffi::{CString, c_char};
use std::sync::OnceLock;

use kevent_backend::Backend;
use kevent_sys::Errno;

/// The process's backend for the C calls; `ENOSYS` when there is none (`KEVENT_BACKEND`
/// invalid, or `native` and unavailable: `kevent_backend_unavailable()` says why). Kept as
/// the bare `Copy` value after the first call: every C call starts here.
pub(crate) fn process() -> Result<Backend, Errno> {
    static PROCESS: OnceLock<Option<Backend>> = OnceLock::new();
    PROCESS
        .get_or_init(|| Backend::current().ok())
        .ok_or(Errno::ENOSYS)
}

/// `const char *kevent_backend(void)`—`"native"` or `"fallback"`, the backend this process
/// uses (chosen once, from `KEVENT_BACKEND` and the running kernel); NULL when there is none.
///
/// # Safety
///
/// Callable from any thread; the result is a static string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kevent_backend() -> *const c_char {
    match process() {
        Ok(b) => b.as_cstr().as_ptr(),
        Err(_) => std::ptr::null(),
    }
}

/// `const char *kevent_backend_unavailable(void)`—Why the native backend is not used, as one
/// sentence; NULL when it is used.
///
/// # Safety
///
/// Callable from any thread; the result is a static string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn kevent_backend_unavailable() -> *const c_char {
    static WHY: OnceLock<Option<CString>> = OnceLock::new();
    let why = WHY.get_or_init(|| {
        let reason = Backend::native_unavailable().map(ToString::to_string);
        // A reason never holds NUL, but a C string must not: escape rather than fail.
        reason.and_then(|s| CString::new(s.replace('\0', "\\0")).ok())
    });
    match why {
        Some(s) => s.as_ptr(),
        None => std::ptr::null(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn backend_names_match_the_rust_side() {
        // SAFETY: no arguments; the result is NULL or a static C string.
        let name = unsafe { kevent_backend() };
        match Backend::current() {
            Ok(b) => {
                assert!(!name.is_null());
                // SAFETY: non-null results are static NUL-terminated strings.
                let s = unsafe { CStr::from_ptr(name) }.to_str().unwrap();
                assert_eq!(s, b.as_str());
            }
            Err(_) => assert!(name.is_null()),
        }
    }

    #[test]
    fn unavailable_is_null_exactly_when_native() {
        // SAFETY: as above.
        let why = unsafe { kevent_backend_unavailable() };
        let native = Backend::current().is_ok_and(|b| b.is_native());
        assert_eq!(why.is_null(), native);
        if !why.is_null() {
            // SAFETY: a static NUL-terminated string.
            let s = unsafe { CStr::from_ptr(why) }.to_str().unwrap();
            assert!(!s.is_empty());
            // SAFETY: as above; the same pointer every time.
            assert_eq!(unsafe { kevent_backend_unavailable() }, why);
        }
    }
}
