//! [`Added`] (the outcome of an ADD) and [`Registration`] (a registered kevent that holds
//! its fd).

use std::io;
use std::sync::Weak;

use kevent_sys::{
    Errno, KEVENT_CTL_MODIFY, KEVENT_CTL_READY, KEVENT_CTL_REMOVE, KEVENT_RET_BROKEN, ukevent,
};

use crate::error::{Error, Op, Result};
use crate::event::{Event, Key};
use crate::flags::ReqFlags;
use crate::queue::Inner;
use crate::source::Kevent;

/// What ADD did with one entry (spec section 3). Not an error in any case: per-entry
/// failures are data.
///
/// `F` is the fd holder the builder was given; when the entry is not registered, it is
/// handed back.
#[derive(Debug)]
#[must_use = "dropping a Registration removes the kevent"]
pub enum Added<F> {
    /// Registered: the kevent stays until the [`Registration`] is removed or dropped (or, for
    /// ONESHOT, until it is delivered).
    Registered(Registration<F>),
    /// The source was ready at once: the entry came back with `RET_DONE` and its data, and
    /// is **not** registered (add with
    /// [`ReqFlags::ALWAYS_QUEUE`](crate::ReqFlags::ALWAYS_QUEUE) to register it anyway).
    Ready {
        /// The written-back entry, decoded like a delivered event.
        event: Event,
        /// The fd holder, handed back.
        fd: F,
    },
    /// The entry was refused (`RET_BROKEN`): `EEXIST`, `EBADF`, `EINVAL`, `ENOSYS`, …
    Failed {
        /// `-ret_data[1]`, as an `io::Error`.
        error: io::Error,
        /// The written-back entry.
        event: Event,
        /// The fd holder, handed back.
        fd: F,
    },
}

impl<F> Added<F> {
    pub(crate) fn failed(k: Kevent<F>, e: Errno) -> Added<F> {
        let mut uk = k.uk;
        uk.ret_flags = kevent_sys::KEVENT_RET_BROKEN | kevent_sys::KEVENT_RET_DONE;
        uk.ret_data = [0, e.negated()];
        Added::Failed {
            error: e.into(),
            event: Event::from_raw(uk),
            fd: k.fd,
        }
    }

    /// Whether the kevent was registered.
    pub fn is_registered(&self) -> bool {
        matches!(self, Added::Registered(_))
    }

    /// The registration, if the kevent was registered (otherwise the outcome is dropped,
    /// with the fd holder).
    pub fn registration(self) -> Option<Registration<F>> {
        match self {
            Added::Registered(r) => Some(r),
            _ => None,
        }
    }

    /// The registration, or the error of a failed entry. A ready-at-once entry is
    /// `Err(None)`.
    ///
    /// # Errors
    ///
    /// `Err(Some(error))` for [`Added::Failed`], `Err(None)` for [`Added::Ready`].
    pub fn into_result(self) -> std::result::Result<Registration<F>, Option<io::Error>> {
        match self {
            Added::Registered(r) => Ok(r),
            Added::Ready { .. } => Err(None),
            Added::Failed { error, .. } => Err(Some(error)),
        }
    }

    /// The event of a ready-at-once or failed entry.
    pub fn event(&self) -> Option<&Event> {
        match self {
            Added::Registered(_) => None,
            Added::Ready { event, .. } | Added::Failed { event, .. } => Some(event),
        }
    }

    /// The error of a failed entry.
    pub fn error(&self) -> Option<&io::Error> {
        match self {
            Added::Failed { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// The part of a registration that removes the kevent on drop.
#[derive(Debug)]
pub(crate) struct Guard {
    queue: Weak<Inner>,
    /// The entry as registered (event, flags, cookie), for MODIFY.
    uk: ukevent,
    /// Which registration of the key this is (0: removed).
    generation: u64,
}

impl Guard {
    pub(crate) fn new(queue: Weak<Inner>, uk: ukevent, generation: u64) -> Guard {
        Guard {
            queue,
            uk,
            generation,
        }
    }

    fn key(&self) -> Key {
        Key::of(&self.uk)
    }

    /// REMOVE, if this is still the key's current registration. `Ok(true)` when a kevent was
    /// removed.
    fn remove(&mut self) -> Result<bool> {
        let generation = std::mem::replace(&mut self.generation, 0);
        let Some(q) = self.queue.upgrade() else {
            // The queue is closed: closing released every kevent.
            return Ok(false);
        };
        let mut keys = q.lock_keys();
        if !keys.release(self.key(), generation) {
            return Ok(false);
        }
        let mut entry = [self.key().to_ukevent()];
        // D14: the call returns 0; whether the kevent was found is in the entry.
        q.ctl(Op::Remove, KEVENT_CTL_REMOVE, &mut entry)?;
        Ok(entry[0].ret_flags & KEVENT_RET_BROKEN == 0)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.remove();
    }
}

/// A registered kevent. It holds the source's fd holder `F` and removes the kevent when
/// dropped (REMOVE), *before* `F` is dropped.
///
/// # Why a closed fd can never be reported (D10)
///
/// An fd kevent names its fd by number. If the fd were closed while registered and the number
/// reused, events of the new file must never appear under the old registration. The ABI
/// guarantees that much (spec section 5), but the old registration would still be reported
/// once as BROKEN. This type rules the situation out in safe code:
///
/// * the builder takes the fd holder `F` (`&TcpStream`, `BorrowedFd<'fd>`, or an owned
///   `TcpStream`), and `F` lives inside the registration;
/// * with a reference, the referent stays borrowed until the registration is gone, so it
///   cannot be dropped (closed) or moved meanwhile: the compiler refuses;
/// * with an owned value, the registration owns the fd, and gives out only `&F`
///   ([`Registration::get_ref`]), never `&mut F` (which would allow swapping the fd out);
///   [`Registration::remove`] gives the value back after REMOVE;
/// * dropping the registration runs REMOVE first, then drops `F`.
///
/// ```compile_fail,E0505
/// use std::os::unix::net::UnixStream;
/// use kevent::{Queue, Socket, SocketEvents};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let queue = Queue::new()?;
/// let (a, _b) = UnixStream::pair()?;
/// let reg = queue.add(Socket::new(&a, SocketEvents::RECV))?;
/// drop(a); // error[E0505]: cannot move out of `a` because it is borrowed
/// drop(reg);
/// # Ok(()) }
/// ```
///
/// The only way around it is to leak the registration (`mem::forget`), which ends the borrow
/// without REMOVE. That is memory-safe: the backend's own D10 rule then applies (the kevent
/// is reported at most once, as BROKEN with `EBADF`, and never for a new file).
///
/// # Keys and stale registrations
///
/// A kevent is named by its key (type and id). A ONESHOT kevent leaves the queue when it is
/// delivered, and a BROKEN one too; the registration value still exists. If the same key is
/// then added again, the *new* registration owns the key: the old one no longer removes,
/// modifies or marks anything (this crate tracks which registration is current), so replacing
/// a registration in a variable (`t = queue.add(...)`, which drops the old value after adding
/// the new one) is safe.
///
/// ```
/// use std::os::unix::net::UnixStream;
/// use kevent::{Queue, Socket, SocketEvents};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let queue = Queue::new()?;
/// let (a, _b) = UnixStream::pair()?;
/// // An owned stream: the registration owns the fd.
/// let reg = queue.add(Socket::new(a, SocketEvents::RECV))?.registration().unwrap();
/// let stream: &UnixStream = reg.get_ref();
/// let _ = stream.peer_addr()?;
/// let a: UnixStream = reg.remove()?; // REMOVE, then the stream is ours again
/// # drop(a);
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "dropping a Registration removes the kevent"]
pub struct Registration<F> {
    // Field order is drop order: REMOVE (guard) before the fd holder is dropped.
    guard: Guard,
    fd: F,
}

impl<F> Registration<F> {
    pub(crate) fn new(guard: Guard, fd: F) -> Registration<F> {
        Registration { guard, fd }
    }

    /// The kevent's key.
    pub fn key(&self) -> Key {
        self.guard.key()
    }

    /// The cookie it was registered (or last modified) with.
    pub fn cookie(&self) -> u64 {
        self.guard.uk.cookie()
    }

    /// The request flags it was registered (or last modified) with.
    pub fn flags(&self) -> ReqFlags {
        ReqFlags::from_bits_retain(self.guard.uk.req_flags)
    }

    /// The raw `event` mask it was registered (or last modified) with.
    pub fn event_mask(&self) -> u32 {
        self.guard.uk.event
    }

    /// The fd holder.
    pub fn get_ref(&self) -> &F {
        &self.fd
    }

    /// `kevent_ctl(KEVENT_CTL_REMOVE)`—Unregisters the kevent and hands back the fd holder.
    ///
    /// A ready kevent that is removed is never delivered afterwards (spec section 3). A
    /// kevent already gone (ONESHOT delivered, BROKEN, or the queue closed) is not an error:
    /// the ABI reports it only in the written-back entry (`-ENOENT`; the call itself returns
    /// 0 either way, **D14**).
    ///
    /// # Errors
    ///
    /// [`Op::Remove`] when the call itself fails (`EBADF`/`EINVAL`: the queue fd is not a
    /// queue); the fd holder is then dropped.
    pub fn remove(self) -> Result<F> {
        let Registration { mut guard, fd } = self;
        guard.remove()?;
        Ok(fd)
    }

    /// Starts a `kevent_ctl(KEVENT_CTL_MODIFY)`: change the event mask, the request flags
    /// and/or the cookie, then [`Modify::apply`]. Unchanged fields keep their values.
    pub fn modify(&mut self) -> Modify<'_, F> {
        let uk = self.guard.uk;
        Modify { reg: self, uk }
    }

    /// `kevent_ctl(KEVENT_CTL_READY)`—Marks this kevent ready; returns whether it was still
    /// registered.
    ///
    /// On a socket, pipe or poll kevent with [`ReqFlags::LAST_CHECK`] (poll kevents always
    /// have it), a mark whose source is not ready at delivery delivers nothing; without it,
    /// the mark is delivered once with what the source has then (decision P6, see
    /// [`Queue::ready`](crate::Queue::ready)).
    ///
    /// # Errors
    ///
    /// [`Op::Ready`] when the call itself fails.
    pub fn ready(&self) -> Result<bool> {
        let Some(q) = self.guard.queue.upgrade() else {
            return Ok(false);
        };
        let keys = q.lock_keys();
        if !keys.owns(self.key(), self.guard.generation) {
            return Ok(false);
        }
        let mut entry = [self.key().to_ukevent()];
        Ok(q.ctl(Op::Ready, KEVENT_CTL_READY, &mut entry)? == 1)
    }
}

/// A pending `kevent_ctl(KEVENT_CTL_MODIFY)` of a [`Registration`].
///
/// ```
/// use kevent::{Queue, ReqFlags, User};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let queue = Queue::new()?;
/// let mut reg = queue.add(User::new(1))?.registration().unwrap();
/// reg.modify().flags(ReqFlags::ONESHOT).cookie(9).apply()?;
/// assert_eq!(reg.cookie(), 9);
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "nothing changes until `apply`"]
pub struct Modify<'r, F> {
    reg: &'r mut Registration<F>,
    uk: ukevent,
}

impl<F> Modify<'_, F> {
    /// The new event mask ([`SocketEvents`](crate::SocketEvents),
    /// [`PollEvents`](crate::PollEvents), [`InodeEvents`](crate::InodeEvents), or a raw
    /// `u32`).
    pub fn events(mut self, events: impl Into<u32>) -> Self {
        self.uk.event = events.into();
        self
    }

    /// The new request flags.
    pub fn flags(mut self, flags: ReqFlags) -> Self {
        self.uk.req_flags = flags.bits();
        self
    }

    /// The new cookie.
    pub fn cookie(mut self, cookie: u64) -> Self {
        self.uk.set_cookie(cookie);
        self
    }

    /// `kevent_ctl(KEVENT_CTL_MODIFY)`—Replaces the kevent's event mask, request flags and
    /// cookie.
    ///
    /// For a socket, pipe or poll kevent the source is re-evaluated under the new mask, as
    /// `EPOLL_CTL_MOD` does (**D17**): if it is ready now the kevent is queued (with
    /// [`ReqFlags::ET`] as one new edge); if not, nothing queued for it before (readiness
    /// under the old mask, a [`Registration::ready`] mark) is delivered.
    ///
    /// # Errors
    ///
    /// [`Op::Modify`]: `ENOENT` when the kevent is no longer registered (ONESHOT delivered,
    /// BROKEN, re-added by a newer registration, or the queue closed); `EINVAL` for unknown
    /// request flags; `EBADF` when the fd no longer names the registered file (**D10**); or
    /// the call's own error. The ABI call returns 0 whatever happened to the entry
    /// (**D14**): these per-entry results are read from the written-back entry.
    pub fn apply(self) -> Result<()> {
        let guard = &mut self.reg.guard;
        let Some(q) = guard.queue.upgrade() else {
            return Err(Error::os(Op::Modify, Errno::ENOENT));
        };
        let keys = q.lock_keys();
        if !keys.owns(Key::of(&guard.uk), guard.generation) {
            return Err(Error::os(Op::Modify, Errno::ENOENT));
        }
        let mut entry = [self.uk];
        // D14: the call returns 0; the entry's result is in the entry.
        q.ctl(Op::Modify, KEVENT_CTL_MODIFY, &mut entry)?;
        if entry[0].ret_flags & KEVENT_RET_BROKEN != 0 {
            let e = Errno::from_negated(entry[0].ret_data[1]).unwrap_or(Errno::EIO);
            return Err(Error::os(Op::Modify, e));
        }
        guard.uk = self.uk;
        Ok(())
    }
}
