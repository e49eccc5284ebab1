//! SIGNAL kevents (spec section 5): which signal a kevent watches, and the process-wide
//! [`dispatch`] that sees every delivery; [`safecopy`], the C library's fault-safe copy of
//! caller memory, whose faults that same handler turns into `EFAULT`.
//!
//! A SIGNAL kevent's id is `raw[0]` = signal number, with [`KEVENT_SIGNAL_NOMASK`] (bit 63 of
//! `raw_u64`, i.e. bit 31 of `raw[1]`) asking that the signal be reported only. The same signal
//! with and without NOMASK are two different `(type, id)` keys; [`dispatch::watch`] counts
//! them separately.
//!
//! [`KEVENT_SIGNAL_NOMASK`]: kevent_sys::KEVENT_SIGNAL_NOMASK

pub mod dispatch;
pub mod safecopy;

use kevent_sys::KEVENT_SIGNAL_NOMASK;

/// Splits a SIGNAL kevent id (`id.raw_u64`) into `(signo, nomask)`.
///
/// `signo` is `raw[0]` reinterpreted as `i32` (so a huge `raw[0]` becomes negative and
/// [`dispatch::watch`] rejects it with `EINVAL`); `nomask` is the [`KEVENT_SIGNAL_NOMASK`] bit.
/// Other bits of `raw[1]` are not looked at here: they stay part of the registry key.
pub fn decode_id(raw_u64: u64) -> (i32, bool) {
    (raw_u64 as u32 as i32, raw_u64 & KEVENT_SIGNAL_NOMASK != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_signal_id() {
        assert_eq!(decode_id(10), (10, false));
        assert_eq!(decode_id(10 | KEVENT_SIGNAL_NOMASK), (10, true));
        assert_eq!(decode_id(0xffff_ffff), (-1, false));
    }
}
