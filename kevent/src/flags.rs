//! Small typed bit sets: request flags, return flags and the per-type event masks.
//!
//! Each type wraps the `u32` the ABI uses. Constants drop the C prefix (`ReqFlags::ONESHOT`
//! is `KEVENT_REQ_ONESHOT`); their first doc line is the C name, and the C name is a doc alias,
//! so searching the docs for `KEVENT_REQ_ET` finds [`ReqFlags::ET`]. `Debug` prints the names
//! (`ONESHOT | ET`), with unknown bits in hex.
//!
//! Why not the `bitflags` crate (issue 23 asked): its `Debug` prints its own names in its own
//! format, while these print from `kevent_sys::names`, the one flag-name table the C
//! library's and `ukevent`'s `Debug` share (a unit test checks every constant against it);
//! and it would be a dependency for the ~100 lines of `flag_set!` below, whose API
//! (`bits`, `from_bits_retain`, `contains`, `|`, …) already follows bitflags 2's names, so a
//! later switch would not change callers.

use core::fmt;
use core::ops::{BitAnd, BitAndAssign, BitOr, BitOrAssign, Not};

use kevent_sys as sys;

/// Defines a flag set type over `u32` with named constants.
macro_rules! flag_set {
    (
        $(#[$meta:meta])*
        pub struct $name:ident, names $table:expr;
        $(
            $(#[$cmeta:meta])*
            $cname:literal => $flag:ident = $value:expr;
        )*
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name(u32);

        impl $name {
            $(
                #[doc = concat!("`", $cname, "`")]
                ///
                $(#[$cmeta])*
                #[doc(alias = $cname)]
                pub const $flag: $name = $name($value);
            )*

            /// Every named constant, with its name: checked against the table `Debug` prints
            /// from (`kevent_sys::names`).
            #[cfg(test)]
            const NAMES: &'static [(&'static str, u32)] = &[$((stringify!($flag), $value)),*];

            /// The one name table for these bits (`kevent_sys::names`).
            #[cfg(test)]
            const TABLE: sys::names::Table = $table;

            /// No flag set.
            pub const fn empty() -> $name {
                $name(0)
            }

            /// Every named flag.
            pub const fn all() -> $name {
                $name(0 $(| $value)*)
            }

            /// The raw ABI value.
            pub const fn bits(self) -> u32 {
                self.0
            }

            /// A set from a raw ABI value, keeping bits this crate has no name for.
            pub const fn from_bits_retain(bits: u32) -> $name {
                $name(bits)
            }

            /// Whether no bit is set.
            pub const fn is_empty(self) -> bool {
                self.0 == 0
            }

            /// Whether every bit of `other` is set in `self`.
            pub const fn contains(self, other: $name) -> bool {
                self.0 & other.0 == other.0
            }

            /// Whether `self` and `other` share a bit.
            pub const fn intersects(self, other: $name) -> bool {
                self.0 & other.0 != 0
            }

            /// `self` with the bits of `other` added.
            pub const fn union(self, other: $name) -> $name {
                $name(self.0 | other.0)
            }

            /// `self` without the bits of `other`.
            pub const fn difference(self, other: $name) -> $name {
                $name(self.0 & !other.0)
            }
        }

        impl BitOr for $name {
            type Output = $name;
            fn bitor(self, rhs: $name) -> $name {
                $name(self.0 | rhs.0)
            }
        }

        impl BitOrAssign for $name {
            fn bitor_assign(&mut self, rhs: $name) {
                self.0 |= rhs.0;
            }
        }

        impl BitAnd for $name {
            type Output = $name;
            fn bitand(self, rhs: $name) -> $name {
                $name(self.0 & rhs.0)
            }
        }

        impl BitAndAssign for $name {
            fn bitand_assign(&mut self, rhs: $name) {
                self.0 &= rhs.0;
            }
        }

        impl Not for $name {
            type Output = $name;
            fn not(self) -> $name {
                $name(!self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                sys::names::write_flags(f, self.0, $table, " | ", "(empty)")
            }
        }

        impl From<$name> for u32 {
            fn from(v: $name) -> u32 {
                v.0
            }
        }
    };
}

flag_set! {
    /// How a kevent is delivered: the `KEVENT_REQ_*` request flags (spec section 4).
    ///
    /// The default (no flag) is **level**: a socket, pipe or poll kevent whose source is still
    /// ready is delivered by every wait, like epoll's level mode.
    ///
    /// ```
    /// use kevent::ReqFlags;
    /// let f = ReqFlags::ONESHOT | ReqFlags::ET;
    /// assert!(f.contains(ReqFlags::ET));
    /// assert_eq!(format!("{f:?}"), "ONESHOT | ET");
    /// ```
    pub struct ReqFlags, names sys::names::REQ_FLAGS;
    /// Delivered once, then unregistered (the delivery carries [`RetFlags::DONE`]).
    "KEVENT_REQ_ONESHOT" => ONESHOT = sys::KEVENT_REQ_ONESHOT;
    /// A notification wakes every waiting thread instead of one.
    "KEVENT_REQ_WAKEUP_ALL" => WAKEUP_ALL = sys::KEVENT_REQ_WAKEUP_ALL;
    /// Edge-triggered: delivered when the source reports a *new* readiness, not again until
    /// the next one.
    "KEVENT_REQ_ET" => ET = sys::KEVENT_REQ_ET;
    /// Readiness is re-checked just before delivery; a kevent no longer ready is not
    /// delivered. Poll kevents always carry it.
    "KEVENT_REQ_LAST_CHECK" => LAST_CHECK = sys::KEVENT_REQ_LAST_CHECK;
    /// A source that is ready at ADD is registered and queued instead of being returned by
    /// the add as [`Added::Ready`](crate::Added::Ready). [`Queue::add`](crate::Queue::add)
    /// always sets it (decision P30).
    "KEVENT_REQ_ALWAYS_QUEUE" => ALWAYS_QUEUE = sys::KEVENT_REQ_ALWAYS_QUEUE;
    /// Registered and queued as ready as soon as it is added.
    "KEVENT_REQ_READY" => READY = sys::KEVENT_REQ_READY;
}

flag_set! {
    /// What the queue says about a delivered or written-back entry: the `KEVENT_RET_*`
    /// return flags.
    pub struct RetFlags, names sys::names::RET_FLAGS;
    /// The source failed; `ret_data[1]` holds `-errno` ([`Event::error`](crate::Event::error)).
    "KEVENT_RET_BROKEN" => BROKEN = sys::KEVENT_RET_BROKEN;
    /// The kevent is no longer registered (ONESHOT delivered, BROKEN, ready at ADD, or the
    /// entry of a REMOVE/MODIFY).
    "KEVENT_RET_DONE" => DONE = sys::KEVENT_RET_DONE;
    /// `get_events` found no free ring slot for this event: it is in the buffer only.
    "KEVENT_RET_COPY_FAILED" => COPY_FAILED = sys::KEVENT_RET_COPY_FAILED;
}

flag_set! {
    /// Readiness of a socket or pipe: the `KEVENT_SOCKET_*` bits (pipes use `RECV` and `SEND`).
    pub struct SocketEvents, names sys::names::SOCKET_EVENTS;
    /// Readable: data, EOF (or, for a pipe, data buffered).
    "KEVENT_SOCKET_RECV" => RECV = sys::KEVENT_SOCKET_RECV;
    /// A connection is pending on a listening socket.
    "KEVENT_SOCKET_ACCEPT" => ACCEPT = sys::KEVENT_SOCKET_ACCEPT;
    /// Writable (or, for a pipe, space free).
    "KEVENT_SOCKET_SEND" => SEND = sys::KEVENT_SOCKET_SEND;
}

flag_set! {
    /// A `KEVENT_POLL_*` mask: the same bits as Linux's `POLL*`.
    pub struct PollEvents, names sys::names::POLL_EVENTS;
    /// Data to read.
    "KEVENT_POLL_POLLIN" => IN = sys::KEVENT_POLL_POLLIN;
    /// Urgent data to read.
    "KEVENT_POLL_POLLPRI" => PRI = sys::KEVENT_POLL_POLLPRI;
    /// Writing is possible.
    "KEVENT_POLL_POLLOUT" => OUT = sys::KEVENT_POLL_POLLOUT;
    /// An error condition (always reported).
    "KEVENT_POLL_POLLERR" => ERR = sys::KEVENT_POLL_POLLERR;
    /// Hang-up (always reported).
    "KEVENT_POLL_POLLHUP" => HUP = sys::KEVENT_POLL_POLLHUP;
    /// Invalid request: the fd is not open.
    "KEVENT_POLL_POLLNVAL" => NVAL = sys::KEVENT_POLL_POLLNVAL;
    /// Normal data to read.
    "KEVENT_POLL_POLLRDNORM" => RDNORM = sys::KEVENT_POLL_POLLRDNORM;
    /// Priority band data to read.
    "KEVENT_POLL_POLLRDBAND" => RDBAND = sys::KEVENT_POLL_POLLRDBAND;
    /// Normal data can be written.
    "KEVENT_POLL_POLLWRNORM" => WRNORM = sys::KEVENT_POLL_POLLWRNORM;
    /// Priority data can be written.
    "KEVENT_POLL_POLLWRBAND" => WRBAND = sys::KEVENT_POLL_POLLWRBAND;
    /// `POLLMSG` (unused by Linux).
    "KEVENT_POLL_POLLMSG" => MSG = sys::KEVENT_POLL_POLLMSG;
    /// `POLLREMOVE` (historic; not requestable).
    "KEVENT_POLL_POLLREMOVE" => REMOVE = sys::KEVENT_POLL_POLLREMOVE;
    /// The peer shut down its writing half.
    "KEVENT_POLL_POLLRDHUP" => RDHUP = sys::KEVENT_POLL_POLLRDHUP;
}

flag_set! {
    /// Changes in a watched directory: the `KEVENT_INODE_*` bits.
    pub struct InodeEvents, names sys::names::INODE_EVENTS;
    /// An entry was created in (or moved into) the directory.
    "KEVENT_INODE_CREATE" => CREATE = sys::KEVENT_INODE_CREATE;
    /// An entry was removed from (or moved out of) the directory.
    "KEVENT_INODE_REMOVE" => REMOVE = sys::KEVENT_INODE_REMOVE;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_prints_names_and_unknown_bits() {
        assert_eq!(format!("{:?}", ReqFlags::empty()), "(empty)");
        assert_eq!(
            format!(
                "{:?}",
                ReqFlags::ONESHOT | ReqFlags::from_bits_retain(0x400)
            ),
            "ONESHOT | 0x400"
        );
        assert_eq!(
            format!("{:?}", PollEvents::IN | PollEvents::RDHUP),
            "IN | RDHUP"
        );
        assert_eq!(
            format!("{:?}", RetFlags::BROKEN | RetFlags::DONE),
            "BROKEN | DONE"
        );
    }

    /// The names `Debug` prints come from `kevent_sys::names`; each constant of these types
    /// has the same name there, and each table entry has a constant.
    #[test]
    fn constant_names_are_the_sys_table() {
        fn check(names: &[(&str, u32)], table: sys::names::Table) {
            assert_eq!(names.len(), table.len());
            for &(name, bit) in names {
                assert!(table.contains(&(bit, name)), "{name} = {bit:#x}");
            }
        }
        check(ReqFlags::NAMES, ReqFlags::TABLE);
        check(RetFlags::NAMES, RetFlags::TABLE);
        check(SocketEvents::NAMES, SocketEvents::TABLE);
        check(PollEvents::NAMES, PollEvents::TABLE);
        check(InodeEvents::NAMES, InodeEvents::TABLE);
    }

    #[test]
    fn constants_are_the_abi_values() {
        assert_eq!(ReqFlags::ONESHOT.bits(), 0x1);
        assert_eq!(ReqFlags::WAKEUP_ALL.bits(), 0x2);
        assert_eq!(ReqFlags::ET.bits(), 0x4);
        assert_eq!(ReqFlags::LAST_CHECK.bits(), 0x8);
        assert_eq!(ReqFlags::ALWAYS_QUEUE.bits(), 0x10);
        assert_eq!(ReqFlags::READY.bits(), 0x20);
        assert_eq!(ReqFlags::all().bits(), 0x3f);
        assert_eq!(SocketEvents::all().bits(), 0x7);
        assert_eq!(PollEvents::RDHUP.bits(), libc::POLLRDHUP as u32);
        assert_eq!(PollEvents::OUT.bits(), libc::POLLOUT as u32);
        assert_eq!(InodeEvents::all().bits(), 0x3);
    }

    #[test]
    fn set_operations() {
        let f = ReqFlags::ONESHOT | ReqFlags::ET;
        assert!(f.contains(ReqFlags::ET));
        assert!(!f.contains(ReqFlags::ET | ReqFlags::READY));
        assert!(f.intersects(ReqFlags::ET | ReqFlags::READY));
        assert_eq!(f.difference(ReqFlags::ET), ReqFlags::ONESHOT);
        assert_eq!(f & ReqFlags::ET, ReqFlags::ET);
        assert_eq!((!ReqFlags::empty()).bits(), u32::MAX);
    }
}
