//! The whole conformance suite as **one** test binary, for a minimal VM with nothing else
//! installed (no cargo, no C compiler): every section file of `tests/` is a module here, so
//! `cargo test --test conformance --no-run` produces a single executable that runs every
//! conformance test against every backend available on that machine (the native backend
//! where the kernel advertises kevent). Isolated tests re-execute this same binary.
//!
//! Not run by a plain `cargo test` (`test = false` in Cargo.toml: the per-section binaries
//! already run the same tests); build it explicitly, statically where the toolchain allows:
//!
//! ```sh
//! # musl, if `rustup target add x86_64-unknown-linux-musl` was done:
//! cargo test -p kevent-c --test conformance --target x86_64-unknown-linux-musl --no-run
//! # otherwise glibc with a static C runtime:
//! RUSTFLAGS="-C target-feature=+crt-static" \
//!     cargo test -p kevent-c --test conformance --target x86_64-unknown-linux-gnu --no-run
//! ```
//!
//! Then copy the printed executable into the VM and run it (`./conformance-<hash>`; libtest's
//! usual arguments filter tests, e.g. `d13_` or `--include-ignored`).
// Each section file declares its own `mod common;`, so the harness is compiled once per
// section here: the price of keeping the files unchanged as stand-alone test binaries.
#![allow(clippy::duplicate_mod)]

#[path = "bad_input.rs"]
mod bad_input;
#[path = "d10_fd_reuse.rs"]
mod d10_fd_reuse;
#[path = "d11_fork.rs"]
mod d11_fork;
#[path = "d17_state_reevaluation.rs"]
mod d17_state_reevaluation;
#[path = "differential_epoll.rs"]
mod differential_epoll;
#[path = "faults.rs"]
mod faults;
#[path = "model.rs"]
mod model;
#[path = "s3_ctl.rs"]
mod s3_ctl;
#[path = "s3_get_events.rs"]
mod s3_get_events;
#[path = "s3_init.rs"]
mod s3_init;
#[path = "s3_ring.rs"]
mod s3_ring;
#[path = "s4_concurrency.rs"]
mod s4_concurrency;
#[path = "s4_delivery.rs"]
mod s4_delivery;
#[path = "s5_inode_unotify.rs"]
mod s5_inode_unotify;
#[path = "s5_posix_timer.rs"]
mod s5_posix_timer;
#[path = "s5_signal.rs"]
mod s5_signal;
#[path = "s5_socket_pipe_poll.rs"]
mod s5_socket_pipe_poll;
#[path = "s5_timer.rs"]
mod s5_timer;
#[path = "s6_detect.rs"]
mod s6_detect;
