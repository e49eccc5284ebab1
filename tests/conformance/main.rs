//! The conformance suite: one test binary, one module per spec section or decision, every
//! test run against every backend this machine has (the harness is the `kevent-test-support`
//! crate, `tests/support/`).
//!
//! `cargo test -p kevent-c --test conformance` runs it all; a module path filters one
//! section (`cargo test -p kevent-c --test conformance s4_delivery::`). The same executable
//! is what `scripts/vm-lane` boots with a kevent kernel: it needs no cargo and no C compiler,
//! and isolated tests re-execute it. Built statically for a minimal VM:
//!
//! ```sh
//! # musl, if `rustup target add x86_64-unknown-linux-musl` was done:
//! cargo test -p kevent-c --test conformance --target x86_64-unknown-linux-musl --no-run
//! # otherwise glibc with a static C runtime:
//! RUSTFLAGS="-C target-feature=+crt-static" \
//!     cargo test -p kevent-c --test conformance --target x86_64-unknown-linux-gnu --no-run
//! ```

mod bad_input;
mod d10_fd_reuse;
mod d11_fork;
mod d17_state_reevaluation;
mod d18_aio;
mod differential_epoll;
mod faults;
mod model;
mod p38_async_ring;
mod s3_ctl;
mod s3_get_events;
mod s3_init;
mod s3_ring;
mod s4_concurrency;
mod s4_delivery;
mod s4_lost_wakeup;
mod s5_inode_unotify;
mod s5_posix_timer;
mod s5_signal;
mod s5_socket_pipe_poll;
mod s5_timer;
mod s6_detect;
mod s6_detect_seccomp;
