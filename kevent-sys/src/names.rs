//! The one table of names for the ABI's types and flag bits: `Debug` of [`ukevent`] here and
//! of the safe API's flag sets (`kevent::ReqFlags`, …) print from these tables.
//!
//! Each name is the C constant without its group prefix: `KEVENT_REQ_ONESHOT` is `ONESHOT`,
//! `KEVENT_POLL_POLLIN` is `IN` (the prefix `KEVENT_POLL_POLL`), which is also the name of the
//! safe API's constant for that bit.
//!
//! [`ukevent`]: crate::ukevent

use core::fmt;

/// A table of `(bit, name)`, in the order the bits are printed.
pub type Table = &'static [(u32, &'static str)];

/// `KEVENT_REQ_*` (spec section 2).
pub const REQ_FLAGS: Table = &[
    (crate::KEVENT_REQ_ONESHOT, "ONESHOT"),
    (crate::KEVENT_REQ_WAKEUP_ALL, "WAKEUP_ALL"),
    (crate::KEVENT_REQ_ET, "ET"),
    (crate::KEVENT_REQ_LAST_CHECK, "LAST_CHECK"),
    (crate::KEVENT_REQ_ALWAYS_QUEUE, "ALWAYS_QUEUE"),
    (crate::KEVENT_REQ_READY, "READY"),
];

/// `KEVENT_RET_*`.
pub const RET_FLAGS: Table = &[
    (crate::KEVENT_RET_BROKEN, "BROKEN"),
    (crate::KEVENT_RET_DONE, "DONE"),
    (crate::KEVENT_RET_COPY_FAILED, "COPY_FAILED"),
];

/// `KEVENT_SOCKET_*` (also the PIPE events).
pub const SOCKET_EVENTS: Table = &[
    (crate::KEVENT_SOCKET_RECV, "RECV"),
    (crate::KEVENT_SOCKET_ACCEPT, "ACCEPT"),
    (crate::KEVENT_SOCKET_SEND, "SEND"),
];

/// `KEVENT_POLL_POLL*`.
pub const POLL_EVENTS: Table = &[
    (crate::KEVENT_POLL_POLLIN, "IN"),
    (crate::KEVENT_POLL_POLLPRI, "PRI"),
    (crate::KEVENT_POLL_POLLOUT, "OUT"),
    (crate::KEVENT_POLL_POLLERR, "ERR"),
    (crate::KEVENT_POLL_POLLHUP, "HUP"),
    (crate::KEVENT_POLL_POLLNVAL, "NVAL"),
    (crate::KEVENT_POLL_POLLRDNORM, "RDNORM"),
    (crate::KEVENT_POLL_POLLRDBAND, "RDBAND"),
    (crate::KEVENT_POLL_POLLWRNORM, "WRNORM"),
    (crate::KEVENT_POLL_POLLWRBAND, "WRBAND"),
    (crate::KEVENT_POLL_POLLMSG, "MSG"),
    (crate::KEVENT_POLL_POLLREMOVE, "REMOVE"),
    (crate::KEVENT_POLL_POLLRDHUP, "RDHUP"),
];

/// `KEVENT_INODE_*`.
pub const INODE_EVENTS: Table = &[
    (crate::KEVENT_INODE_CREATE, "CREATE"),
    (crate::KEVENT_INODE_REMOVE, "REMOVE"),
];

/// The name of a `KEVENT_*` type constant (`KEVENT_SOCKET` is `SOCKET`).
pub fn type_name(type_: u32) -> Option<&'static str> {
    Some(match type_ {
        crate::KEVENT_SOCKET => "SOCKET",
        crate::KEVENT_INODE => "INODE",
        crate::KEVENT_TIMER => "TIMER",
        crate::KEVENT_POLL => "POLL",
        crate::KEVENT_NAIO => "NAIO",
        crate::KEVENT_AIO => "AIO",
        crate::KEVENT_PIPE => "PIPE",
        crate::KEVENT_SIGNAL => "SIGNAL",
        crate::KEVENT_POSIX_TIMER => "POSIX_TIMER",
        crate::KEVENT_UNOTIFY => "UNOTIFY",
        _ => return None,
    })
}

/// Writes the names of the bits of `bits` found in `table`, joined by `sep`, then any bits
/// left over in hex (`ONESHOT|ET|0x400`); `empty` when `bits == 0`.
///
/// # Errors
///
/// What the formatter returns.
pub fn write_flags(
    f: &mut fmt::Formatter<'_>,
    bits: u32,
    table: Table,
    sep: &str,
    empty: &str,
) -> fmt::Result {
    if bits == 0 {
        return f.write_str(empty);
    }
    let mut rest = bits;
    let mut first = true;
    for &(bit, name) in table {
        if bit != 0 && bits & bit == bit && rest & bit != 0 {
            if !first {
                f.write_str(sep)?;
            }
            f.write_str(name)?;
            first = false;
            rest &= !bit;
        }
    }
    if rest != 0 {
        if !first {
            f.write_str(sep)?;
        }
        write!(f, "{rest:#x}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_name_distinct_single_bits() {
        for t in [
            REQ_FLAGS,
            RET_FLAGS,
            SOCKET_EVENTS,
            POLL_EVENTS,
            INODE_EVENTS,
        ] {
            let mut seen = 0u32;
            for &(bit, name) in t {
                assert_eq!(bit.count_ones(), 1, "{name}");
                assert_eq!(seen & bit, 0, "{name}");
                seen |= bit;
            }
        }
    }
}
