//! Delivered events: [`Event`] (one `ukevent`, decoded on demand), [`EventKind`] (the typed
//! view), [`Key`] (what names a kevent) and [`Events`] (a reusable buffer for
//! [`Queue::wait`](crate::Queue::wait)).

use core::fmt;
use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

pub use kevent_sys::Key;
use kevent_sys::{self as sys, Errno, ukevent};

use crate::flags::{InodeEvents, PollEvents, ReqFlags, RetFlags, SocketEvents};
use crate::source::Signo;

/// One delivered event (or one entry an ADD wrote back): a `ukevent`, decoded on demand.
///
/// `#[repr(transparent)]` over [`ukevent`], so ring slots are read as `Event`s in place.
/// [`Event::kind`] is the typed view; [`Event::error`] the failure of a BROKEN event.
///
/// `Debug` prints the decoded view and the flags by name:
///
/// ```
/// use kevent::Event;
/// let mut uk = kevent_sys::ukevent::new(
///     kevent_sys::KEVENT_SOCKET,
///     kevent_sys::kevent_id::from_raw([7, 0]),
///     kevent_sys::KEVENT_SOCKET_RECV,
///     kevent_sys::KEVENT_REQ_ONESHOT,
/// );
/// uk.ret_flags = kevent_sys::KEVENT_RET_DONE;
/// uk.ret_data = [kevent_sys::KEVENT_SOCKET_RECV, 0];
/// let ev = Event::from_raw(uk);
/// assert_eq!(
///     format!("{ev:?}"),
///     "Event { kind: Socket { fd: 7, ready: RECV }, flags: ONESHOT, ret: DONE, token: 0x0 }"
/// );
/// ```
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct Event(ukevent);

/// The typed view of an [`Event`]: which source, and its `ret_data` decoded per type (spec
/// section 5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EventKind {
    /// `KEVENT_SOCKET`: the socket `fd` is ready for `ready` (`ret_data[0]`).
    Socket {
        /// The watched socket.
        fd: RawFd,
        /// What is ready.
        ready: SocketEvents,
    },
    /// `KEVENT_PIPE`: the FIFO `fd` is ready for `ready` (`RECV`, `SEND`).
    Pipe {
        /// The watched FIFO.
        fd: RawFd,
        /// What is ready.
        ready: SocketEvents,
    },
    /// `KEVENT_POLL`: `revents & event` (errors and hang-ups are always reported).
    Poll {
        /// The watched fd.
        fd: RawFd,
        /// The poll bits that are set.
        revents: PollEvents,
    },
    /// `KEVENT_TIMER`: the timer of this `interval` expired.
    Timer {
        /// The timer's interval (its id).
        interval: Duration,
        /// CLOCK_MONOTONIC milliseconds (low 32 bits) at the expiry (`ret_data[0]`).
        expired_at_ms: u32,
        /// Expirations since the last delivery (`ret_data[1]`, **D8**).
        expirations: u32,
    },
    /// `KEVENT_SIGNAL`: `signo` was delivered `count` times since the last delivery (**D8**).
    Signal {
        /// The signal.
        signo: Signo,
        /// Whether the kevent was registered with NOMASK.
        nomask: bool,
        /// Deliveries since the last report (`ret_data[0]`).
        count: u32,
    },
    /// `KEVENT_POSIX_TIMER`: a POSIX timer made with `SIGEV_KEVENT` expired; the token is
    /// its `sigev_value`.
    PosixTimer {
        /// The timer's id in this backend.
        timer: u64,
        /// CLOCK_MONOTONIC milliseconds (low 32 bits) at the expiry (`ret_data[0]`).
        expired_at_ms: u32,
        /// Expirations since the last delivery (`ret_data[1]`).
        expirations: u32,
    },
    /// `KEVENT_INODE`: entries were created in or removed from the directory `dir`.
    Inode {
        /// The watched directory's fd.
        dir: RawFd,
        /// What happened.
        events: InodeEvents,
    },
    /// `KEVENT_UNOTIFY`: the user event `id` was marked ready.
    User {
        /// The caller's id.
        id: u64,
    },
    /// `KEVENT_AIO`: the transfer [`Queue::sendfile`](crate::Queue::sendfile) started ended
    /// (**D18**). The request is gone (ONESHOT).
    Aio {
        /// The request id ([`AioRequest::id`](crate::AioRequest::id)).
        request: u64,
        /// Bytes sent: the 64-bit count (`ret_data[0..1]`, low word first); when `error` is
        /// set, the low 32 bits of the bytes sent before it (`ret_data[0]`).
        bytes: u64,
        /// Why the transfer stopped early (`ret_data[1] = -errno` of a BROKEN event): `EPIPE`
        /// or `ECONNRESET` when the peer closed, …; `None` when it sent `count` bytes or
        /// reached the end of the file.
        error: Option<Errno>,
    },
    /// A type this crate does not know.
    Other {
        /// The raw type.
        raw_type: u32,
        /// The raw id.
        id: u64,
    },
}

impl Event {
    /// Wraps a raw `ukevent`.
    pub const fn from_raw(uk: ukevent) -> Event {
        Event(uk)
    }

    /// The raw `ukevent`.
    pub const fn as_raw(&self) -> &ukevent {
        &self.0
    }

    /// The raw `ukevent`, by value.
    pub const fn into_raw(self) -> ukevent {
        self.0
    }

    /// The key (type and id) of the kevent this event is about.
    pub fn key(&self) -> Key {
        Key::of(&self.0)
    }

    /// The caller's token (the ABI's `cookie`), returned untouched.
    #[doc(alias = "cookie")]
    pub const fn token(&self) -> u64 {
        self.0.cookie()
    }

    /// The request flags the kevent was registered with (as the queue keeps them: poll
    /// kevents always carry `LAST_CHECK`).
    pub const fn req_flags(&self) -> ReqFlags {
        ReqFlags::from_bits_retain(self.0.req_flags)
    }

    /// The return flags.
    pub const fn ret_flags(&self) -> RetFlags {
        RetFlags::from_bits_retain(self.0.ret_flags)
    }

    /// `ret_data[0]` and `ret_data[1]`, undecoded.
    pub const fn ret_data(&self) -> [u32; 2] {
        self.0.ret_data
    }

    /// `RET_BROKEN`: the source failed (see [`Event::error`]).
    pub const fn is_broken(&self) -> bool {
        self.0.ret_flags & sys::KEVENT_RET_BROKEN != 0
    }

    /// `RET_DONE`: the kevent is no longer registered (ONESHOT delivered, or BROKEN).
    pub const fn is_done(&self) -> bool {
        self.0.ret_flags & sys::KEVENT_RET_DONE != 0
    }

    /// `RET_COPY_FAILED`: `get_events` found no free ring slot; the event is only in the
    /// buffer.
    pub const fn is_copy_failed(&self) -> bool {
        self.0.ret_flags & sys::KEVENT_RET_COPY_FAILED != 0
    }

    /// For a BROKEN event, the error (`ret_data[1]` is `-errno`): `EBADF` for a watched fd
    /// closed without REMOVE (**D10**), `EPIPE` for a hang-up, the socket's error, `ENOENT`
    /// for a removed directory, … `None` when not BROKEN. A BROKEN event whose `ret_data[1]`
    /// is not a valid `-errno` reports `EIO`.
    pub fn error(&self) -> Option<io::Error> {
        if !self.is_broken() {
            return None;
        }
        let e = Errno::from_negated(self.0.ret_data[1]).unwrap_or(Errno::EIO);
        Some(e.into())
    }

    /// The typed view: which source, and its data.
    pub fn kind(&self) -> EventKind {
        let uk = &self.0;
        let [r0, r1] = uk.ret_data;
        let [id0, id1] = uk.id.raw();
        match uk.type_ {
            sys::KEVENT_SOCKET => EventKind::Socket {
                fd: id0 as RawFd,
                ready: SocketEvents::from_bits_retain(r0),
            },
            sys::KEVENT_PIPE => EventKind::Pipe {
                fd: id0 as RawFd,
                ready: SocketEvents::from_bits_retain(r0),
            },
            sys::KEVENT_POLL => EventKind::Poll {
                fd: id0 as RawFd,
                revents: PollEvents::from_bits_retain(r0),
            },
            sys::KEVENT_TIMER => EventKind::Timer {
                // id1 >= 1e9 is never registered; saturate rather than fail.
                interval: Duration::from_secs(u64::from(id0))
                    .saturating_add(Duration::from_nanos(u64::from(id1))),
                expired_at_ms: r0,
                expirations: r1,
            },
            sys::KEVENT_SIGNAL => {
                let (signo, nomask) = uk.id.signal_parts();
                EventKind::Signal {
                    signo: Signo::from_raw(signo),
                    nomask,
                    count: r0,
                }
            }
            sys::KEVENT_POSIX_TIMER => EventKind::PosixTimer {
                timer: uk.id.as_u64(),
                expired_at_ms: r0,
                expirations: r1,
            },
            sys::KEVENT_INODE => EventKind::Inode {
                dir: id0 as RawFd,
                events: InodeEvents::from_bits_retain(r0),
            },
            sys::KEVENT_UNOTIFY => EventKind::User { id: uk.id.as_u64() },
            sys::KEVENT_AIO => {
                let (bytes, error) = crate::aio::completion(self.is_broken(), [r0, r1]);
                EventKind::Aio {
                    request: uk.id.as_u64(),
                    bytes,
                    error,
                }
            }
            other => EventKind::Other {
                raw_type: other,
                id: uk.id.as_u64(),
            },
        }
    }
}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Event");
        d.field("kind", &self.kind());
        d.field("flags", &self.req_flags());
        d.field("ret", &self.ret_flags());
        if let Some(e) = self.error() {
            d.field("error", &e);
        }
        d.field("token", &format_args!("{:#x}", self.token()));
        d.finish()
    }
}

impl PartialEq for Event {
    /// Byte-wise equality of the two ukevents (the token included).
    fn eq(&self, other: &Event) -> bool {
        let (a, b) = (&self.0, &other.0);
        a.id.as_u64() == b.id.as_u64()
            && a.type_ == b.type_
            && a.event == b.event
            && a.req_flags == b.req_flags
            && a.ret_flags == b.ret_flags
            && a.ret_data == b.ret_data
            && a.cookie() == b.cookie()
    }
}

impl Eq for Event {}

impl From<ukevent> for Event {
    fn from(uk: ukevent) -> Event {
        Event(uk)
    }
}

impl AsRef<ukevent> for Event {
    fn as_ref(&self) -> &ukevent {
        &self.0
    }
}

/// A reusable buffer for [`Queue::wait`](crate::Queue::wait).
///
/// Its capacity is the `max_nr` of each call; the events of the last call are what
/// [`Events::iter`] yields. Allocated once, reused by every call (mio's `Events`).
///
/// ```
/// use kevent::Events;
/// let events = Events::with_capacity(64);
/// assert_eq!(events.capacity(), 64);
/// assert!(events.is_empty());
/// ```
pub struct Events {
    buf: Vec<ukevent>,
    len: usize,
}

impl Events {
    /// The largest capacity (2^20 events, 40 MiB): larger requests are clamped. More events
    /// than that per call buy nothing, and the clamp keeps a huge argument from exhausting
    /// memory.
    pub const MAX_CAPACITY: usize = 1 << 20;

    /// A buffer for up to `capacity` events per call (at least 1, at most
    /// [`Events::MAX_CAPACITY`]).
    pub fn with_capacity(capacity: usize) -> Events {
        let cap = capacity.clamp(1, Self::MAX_CAPACITY);
        Events {
            buf: vec![ukevent::default(); cap],
            len: 0,
        }
    }

    /// How many events one call can return.
    pub fn capacity(&self) -> usize {
        self.buf.len()
    }

    /// How many events the last call returned.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the last call returned nothing.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Forgets the events of the last call.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// The events of the last call, in delivery order.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            inner: self.buf[..self.len.min(self.buf.len())].iter(),
        }
    }

    /// The `i`-th event of the last call.
    pub fn get(&self, i: usize) -> Option<Event> {
        if i < self.len {
            self.buf.get(i).copied().map(Event)
        } else {
            None
        }
    }

    /// The whole buffer, for the call; the call sets the length with [`Events::set_len`].
    pub(crate) fn raw_buffer(&mut self) -> &mut [ukevent] {
        &mut self.buf
    }

    pub(crate) fn set_len(&mut self, len: usize) {
        self.len = len.min(self.buf.len());
    }
}

impl fmt::Debug for Events {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// The iterator of [`Events::iter`]; yields [`Event`]s by value (40 bytes each).
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    inner: std::slice::Iter<'a, ukevent>,
}

impl Iterator for Iter<'_> {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        self.inner.next().copied().map(Event)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a Events {
    type Item = Event;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(type_: u32, id: [u32; 2], ret: u32, data: [u32; 2]) -> Event {
        let mut uk = ukevent::new(type_, sys::kevent_id::from_raw(id), 0, 0);
        uk.ret_flags = ret;
        uk.ret_data = data;
        Event(uk)
    }

    #[test]
    fn broken_carries_the_io_error() {
        let e = ev(
            sys::KEVENT_SOCKET,
            [3, 0],
            sys::KEVENT_RET_BROKEN | sys::KEVENT_RET_DONE,
            [0, Errno::EBADF.negated()],
        );
        assert!(e.is_broken() && e.is_done());
        assert_eq!(e.error().and_then(|e| e.raw_os_error()), Some(libc::EBADF));
        let s = format!("{e:?}");
        assert!(s.contains("ret: BROKEN | DONE"), "{s}");
        // Garbage in ret_data[1] still decodes, as EIO.
        let e = ev(sys::KEVENT_SOCKET, [3, 0], sys::KEVENT_RET_BROKEN, [0, 5]);
        assert_eq!(e.error().and_then(|e| e.raw_os_error()), Some(libc::EIO));
    }

    #[test]
    fn kinds_decode_ret_data_per_type() {
        let t = ev(sys::KEVENT_TIMER, [1, 500], 0, [1234, 3]).kind();
        assert_eq!(
            t,
            EventKind::Timer {
                interval: Duration::new(1, 500),
                expired_at_ms: 1234,
                expirations: 3
            }
        );
        let s = ev(sys::KEVENT_SIGNAL, [10, 0x8000_0000], 0, [2, 0]).kind();
        assert_eq!(
            s,
            EventKind::Signal {
                signo: Signo::from_raw(10),
                nomask: true,
                count: 2
            }
        );
        let a = ev(sys::KEVENT_AIO, [9, 0], 0, [1, 1]).kind();
        assert_eq!(
            a,
            EventKind::Aio {
                request: 9,
                bytes: (1 << 32) | 1,
                error: None
            }
        );
        // D18: BROKEN carries the low 32 bits of the count and -errno.
        let flags = sys::KEVENT_RET_BROKEN | sys::KEVENT_RET_DONE;
        let epipe = (-libc::EPIPE) as u32;
        let a = ev(sys::KEVENT_AIO, [3, 0], flags, [4096, epipe]).kind();
        assert_eq!(
            a,
            EventKind::Aio {
                request: 3,
                bytes: 4096,
                error: Some(Errno::EPIPE)
            }
        );
        let o = ev(77, [1, 0], 0, [0, 0]).kind();
        assert_eq!(
            o,
            EventKind::Other {
                raw_type: 77,
                id: 1
            }
        );
        // A timer id that was never valid still decodes without panicking.
        let _ = ev(sys::KEVENT_TIMER, [u32::MAX, u32::MAX], 0, [0, 0]).kind();
    }

    #[test]
    fn events_capacity_is_clamped() {
        assert_eq!(Events::with_capacity(0).capacity(), 1);
        let mut e = Events::with_capacity(2);
        e.set_len(5);
        assert_eq!(e.len(), 2);
        assert_eq!(e.iter().count(), 2);
        assert!(e.get(2).is_none());
    }

    #[test]
    fn key_of_signal_includes_nomask() {
        assert_ne!(
            Key::signal(Signo::USR1, true),
            Key::signal(Signo::USR1, false)
        );
        assert_eq!(Key::signal(Signo::USR1, false).id(), libc::SIGUSR1 as u64);
    }
}
