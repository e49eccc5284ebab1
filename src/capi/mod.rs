//! The C entry points of libkevent (`#[unsafe(no_mangle)] extern "C"`), as declared in
//! `<kevent/kevent.h>`.
//!
//! * [`calls`]: the five ABI calls of spec section 3.
//! * [`aio`]: `kevent_aio_sendfile` (D18).
//! * [`posix_timer`]: `kevent_timer_create` and friends (`SIGEV_KEVENT`).
//! * [`backend`]: `kevent_backend()`, `kevent_backend_unavailable()`.
//!
//! Every entry point follows one pattern: take the process's backend
//! ([`kevent_backend::Backend::current`], cached), call the dispatch's C-memory entry point
//! ([`kevent_backend::user`]: where a bad pointer becomes `EFAULT`), and return through
//! `errno::c_return` (the value, or `-1` with `errno` set). No function here matches on the
//! backend.
//!
//! A panic that reaches an `extern "C"` boundary aborts the process, so nothing reachable from
//! these functions unwraps or indexes out of bounds.

pub mod aio;
pub mod backend;
pub mod calls;
mod errno;
pub mod posix_timer;
