//! Safe Rust API for kevent queues (work in progress).
