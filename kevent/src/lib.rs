//! Safe Rust API for kevent queues (work in progress).
//!
//! [`backend`] dispatches every ABI call to the kernel's kevent syscalls or to the userspace
//! fallback engine; the C library (`libkevent`) uses the same dispatch.

pub mod backend;
