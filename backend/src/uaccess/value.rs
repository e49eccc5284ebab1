//! Single values of the C caller's (`sigevent`, `itimerspec`, `timer_t`, …), read and
//! written whole; only types whose every bit pattern is valid ([`Plain`]).

use std::mem::{MaybeUninit, size_of};

use kevent_sys::{Errno, ukevent};

use super::{Dir, copy};

/// Types that may be filled with arbitrary bytes from a C caller.
///
/// # Safety
///
/// Every bit pattern of `size_of::<Self>()` bytes is a valid value of the type.
pub(crate) unsafe trait Plain: Copy {}

// SAFETY: integers.
unsafe impl Plain for libc::c_int {}
// SAFETY: an integer.
unsafe impl Plain for u8 {}
// SAFETY: integers, a union of integers and a raw pointer (any bits are a valid raw pointer).
unsafe impl Plain for ukevent {}
// SAFETY: `sigevent` is ints, a `sigval` union (int or raw pointer) and int padding.
unsafe impl Plain for libc::sigevent {}
// SAFETY: two `timespec`s, each two integers.
unsafe impl Plain for libc::itimerspec {}
// SAFETY: `timer_t` is a raw pointer, valid with any bits; it is never dereferenced.
unsafe impl Plain for libc::timer_t {}

/// Reads one `T` from the C caller's `user`.
pub(crate) fn read_value<T: Plain>(user: *const T) -> Result<T, Errno> {
    let mut v = MaybeUninit::<T>::uninit();
    // SAFETY: `v` is valid for writes of `size_of::<T>()` bytes.
    unsafe {
        copy(
            Dir::FromUser,
            v.as_mut_ptr().cast(),
            user.addr(),
            size_of::<T>(),
        )?
    };
    // SAFETY: the copy succeeded, so every byte was written, and any bytes are a valid `T`
    // (`Plain`).
    Ok(unsafe { v.assume_init() })
}

/// Writes `v` to the C caller's `user`.
pub(crate) fn write_value<T: Plain>(user: *mut T, v: &T) -> Result<(), Errno> {
    let local: *const T = v;
    // SAFETY: `v` is valid for reads of `size_of::<T>()` bytes; `copy` only reads it.
    unsafe {
        copy(
            Dir::ToUser,
            local.cast_mut().cast(),
            user.addr(),
            size_of::<T>(),
        )
    }
}
