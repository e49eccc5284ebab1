//! The one conversion from `Result<_, Errno>` to the C convention: the value, or `-1` with
//! `errno` set (by [`Errno::set_last`]).

use std::os::raw::c_int;

use kevent_sys::Errno;

/// A successful result that C receives as a non-negative `int`.
pub(crate) trait CValue {
    /// The `int` C sees; `Err` if the value does not fit (then C sees `-1`/`EOVERFLOW`).
    fn into_c(self) -> Result<c_int, Errno>;
}

impl CValue for u32 {
    fn into_c(self) -> Result<c_int, Errno> {
        c_int::try_from(self).map_err(|_| Errno::EOVERFLOW)
    }
}

/// A file descriptor (`RawFd`).
impl CValue for c_int {
    fn into_c(self) -> Result<c_int, Errno> {
        Ok(self)
    }
}

impl CValue for () {
    fn into_c(self) -> Result<c_int, Errno> {
        Ok(0)
    }
}

/// `Ok(v)` → `v` (errno untouched); `Err(e)` → `-1` with `errno = e`.
pub(crate) fn c_return<T: CValue>(r: Result<T, Errno>) -> c_int {
    match r.and_then(CValue::into_c) {
        Ok(v) => v,
        Err(e) => {
            e.set_last();
            -1
        }
    }
}

/// As [`c_return`] for the calls that return a `long long` (a 64-bit id): the value, or `-1`
/// with `errno`; a value above `LLONG_MAX` is `-1`/`EOVERFLOW`.
pub(crate) fn c_return_ll(r: Result<u64, Errno>) -> std::os::raw::c_longlong {
    match r.and_then(|v| std::os::raw::c_longlong::try_from(v).map_err(|_| Errno::EOVERFLOW)) {
        Ok(v) => v,
        Err(e) => {
            e.set_last();
            -1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ok_passes_the_value_and_leaves_errno() {
        Errno::EAGAIN.set_last();
        assert_eq!(c_return(Ok(7u32)), 7);
        assert_eq!(c_return(Ok::<c_int, Errno>(3)), 3);
        assert_eq!(c_return(Ok(())), 0);
        assert_eq!(Errno::last(), Errno::EAGAIN);
    }

    #[test]
    fn err_is_minus_one_and_errno() {
        assert_eq!(c_return::<u32>(Err(Errno::EBADF)), -1);
        assert_eq!(Errno::last(), Errno::EBADF);
        assert_eq!(c_return(Ok(u32::MAX)), -1);
        assert_eq!(Errno::last(), Errno::EOVERFLOW);
    }

    #[test]
    fn long_long_return_is_the_value_or_minus_one_and_errno() {
        Errno::EAGAIN.set_last();
        assert_eq!(c_return_ll(Ok(1 << 40)), 1 << 40);
        assert_eq!(Errno::last(), Errno::EAGAIN);
        assert_eq!(c_return_ll(Err(Errno::ENOSYS)), -1);
        assert_eq!(Errno::last(), Errno::ENOSYS);
        assert_eq!(c_return_ll(Ok(u64::MAX)), -1);
        assert_eq!(Errno::last(), Errno::EOVERFLOW);
    }
}
