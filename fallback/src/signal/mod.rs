//! SIGNAL kevents (spec section 5): which signal a kevent watches, and the process-wide
//! [`dispatch`] that sees every delivery; [`safecopy`], the C library's fault-safe copy of
//! caller memory, whose faults that same handler turns into `EFAULT`.
//!
//! A SIGNAL kevent's id is encoded as [`kevent_id::signal`] says (the one definition:
//! `raw[0]` = signal number, `KEVENT_SIGNAL_NOMASK` asking that the signal be reported only).
//! The same signal with and without NOMASK are two different `(type, id)` keys, of which a
//! queue holds at most one (**P27**, `source::same_target`); [`dispatch::watch`] counts them
//! separately (two queues may hold the two variants).

pub mod dispatch;
pub mod safecopy;

#[cfg(doc)]
use kevent_sys::kevent_id;
