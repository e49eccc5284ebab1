//! epoll tokens: which kevent (or which internal fd) an epoll event is for.
//!
//! A token is `generation << 32 | slot`. Registered kevents use their registry slot and its
//! generation, so an event harvested for a slot that was removed (and perhaps reused) since
//! is recognised as stale. The queue's internal fds use reserved slots at the top of the
//! `u32` range with the queue's own nonce as generation; an event whose token decodes to
//! neither is not from this queue's epoll, which is how the engine notices that a queue fd
//! number was closed and reused by another epoll instance.

/// Slots from here up are reserved for internal fds.
pub(crate) const FIRST_RESERVED_SLOT: u32 = u32::MAX - 15;
/// The queue's wake eventfd (READY(0), ready list non-empty).
pub(crate) const WAKE: u32 = u32::MAX;
/// The queue's timerfd.
pub(crate) const TIMER: u32 = u32::MAX - 1;
/// The process-wide signal doorbell.
pub(crate) const SIGNAL: u32 = u32::MAX - 2;
/// The queue's inotify fd.
pub(crate) const INODE: u32 = u32::MAX - 3;
/// A probe registration that lives only inside one `kevent_ctl` (the D10 staleness check);
/// a harvest that meets it ignores it.
pub(crate) const PROBE: u32 = u32::MAX - 4;

/// Builds a token.
pub(crate) const fn make(generation: u32, slot: u32) -> u64 {
    ((generation as u64) << 32) | slot as u64
}

/// Splits a token into `(generation, slot)`.
pub(crate) const fn split(token: u64) -> (u32, u32) {
    ((token >> 32) as u32, token as u32)
}
