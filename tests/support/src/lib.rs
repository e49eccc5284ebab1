//! The conformance suite's harness (STYLE.md 6.6), compiled once and linked by every test
//! binary of the root package: the suite (`tests/conformance/`) and the C library's and
//! tools' tests (`tests/*.rs`).
//!
//! * **Generic runner.** A test body is written once as `fn(b: Backend)` and run against
//!   every backend this machine has: the fallback always, native when
//!   [`Backend::native`] is `Ok` (otherwise the reason is printed; a missing kevent kernel
//!   is never a failure). [`backend_test!`] declares such a test; [`isolated_test!`] runs each
//!   backend's run in a child process (re-executing this test binary), for tests that change
//!   process-wide state: signal dispositions, rlimits, `fork`, closing a queue under waiters.
//! * **`require!`** skips a test whose optional tool is missing (a FIFO-capable temp dir, a
//!   TCP loopback, …) and prints why; under `KEVENT_REQUIRE_ALL=1` the skip is a failure.
//! * **Exact expectations.** [`expect_events`] and [`Queue::expect_no_events`] are
//!   `#[track_caller]` and exact: every expected event must be there once, and an unexpected
//!   or duplicate event fails the test (the spec forbids duplicates). [`match_exact_by`] is
//!   the one matcher: the safe API's tests (`kevent/tests/`) match typed events with it.
//! * **Bounded time.** [`bounded`] runs a closure on a thread and fails the test if it does
//!   not finish in time; child processes are killed after a deadline.
//!
//! [`c`] finds, builds and runs the C library's programs; [`differential`] is the epoll
//! differential test's model, generator and shrinker.
#![allow(unsafe_code)]
// The harness's `new()`s open fds and processes: a `Default` would hide that.
#![allow(clippy::new_without_default)]

pub mod c;
pub mod differential;
mod fd;
pub mod forks;
mod queue;
mod rng;
mod runner;
#[cfg(target_arch = "x86_64")]
pub mod seccomp;
mod signals;
mod threads;
mod time;
mod ukevents;
mod want;

pub use kevent_backend::Backend;
pub use kevent_sys::ring::RingView;
pub use kevent_sys::*;

pub use fd::*;
pub use queue::*;
pub use rng::*;
pub use runner::*;
pub use signals::*;
pub use threads::*;
pub use time::*;
pub use ukevents::*;
pub use want::*;
