//! `ukevent`s as the harness handles them: to and from their 40 bytes, read out of caller
//! memory, and their `(type, id)` key.

use kevent_sys::{KEVENT_PIPE, KEVENT_POLL, KEVENT_SOCKET, ukevent};

pub(super) const UKEVENT: usize = 40;

pub(super) fn event_from_bytes(b: [u8; UKEVENT]) -> ukevent {
    // SAFETY: a ukevent is 40 bytes of integers and a union of integers and a raw pointer,
    // so every bit pattern is a valid value; `b` holds exactly 40 bytes.
    unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<ukevent>()) }
}

pub(super) fn event_bytes(e: &ukevent) -> [u8; UKEVENT] {
    let mut b = [0u8; UKEVENT];
    // SAFETY: `e` is 40 initialized bytes (no padding) and `b` has room for 40.
    unsafe {
        std::ptr::copy_nonoverlapping((e as *const ukevent).cast::<u8>(), b.as_mut_ptr(), UKEVENT)
    };
    b
}

pub(super) fn is_fd_type(t: u32) -> bool {
    matches!(t, KEVENT_SOCKET | KEVENT_PIPE | KEVENT_POLL)
}

/// Reads `n` ukevents at `p` (harness memory, readable).
pub(super) fn read_events(p: *const u8, n: usize) -> Vec<ukevent> {
    (0..n)
        .map(|i| {
            // SAFETY: the caller passes harness memory readable for `n` entries.
            unsafe { std::ptr::read_unaligned(p.add(i * UKEVENT).cast::<ukevent>()) }
        })
        .collect()
}
