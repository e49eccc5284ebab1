//! `kevent_aio_sendfile` (spec **D18**): a file sent to a socket in the background, its end
//! reported as one `KEVENT_AIO` event.
//!
//! No C pointer is involved, so the function is the process's backend, one
//! [`Backend::aio_sendfile`](kevent_backend::Backend::aio_sendfile) call and `errno`'s
//! `long long` return.
//!
//! # Safety
//!
//! The only unsafe thing here is exporting an unmangled C symbol; the function takes integers
//! only.
#![allow(unsafe_code)]

use std::os::raw::{c_int, c_longlong};

use super::backend::process;
use super::errno::c_return_ll;

/// `long long kevent_aio_sendfile(int fd, int sock_fd, int in_fd, uint64_t offset,
/// uint64_t count)`—Starts sending `count` bytes of `in_fd` from `offset` to the connected
/// stream socket `sock_fd`; returns the request id (`> 0`), or -1 with `errno`.
#[unsafe(no_mangle)]
pub extern "C" fn kevent_aio_sendfile(
    fd: c_int,
    sock_fd: c_int,
    in_fd: c_int,
    offset: u64,
    count: u64,
) -> c_longlong {
    c_return_ll(process().and_then(|b| b.aio_sendfile(fd, sock_fd, in_fd, offset, count)))
}
