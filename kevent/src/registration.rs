//! [`Added`] (the outcome of an ADD) and [`Registration`] (a registered kevent that holds
//! its fd).

use core::fmt;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Weak;

use kevent_sys::{
    Errno, KEVENT_CTL_MODIFY, KEVENT_CTL_READY, KEVENT_CTL_REMOVE, KEVENT_RET_BROKEN, ukevent,
};

use crate::error::{Error, Op, Result};
use crate::event::{Event, Key};
use crate::flags::ReqFlags;
use crate::queue::Inner;
use crate::source::Kevent;

/// What [`Queue::add_or_ready`](crate::Queue::add_or_ready) did with a source the ABI
/// accepted: registered it, or found it ready at once and handed it back.
///
/// `F` is the fd holder the builder was given.
#[derive(Debug)]
#[must_use = "a ready-at-once source is not registered: handle its event or it is lost"]
pub enum Added<F> {
    /// Registered: the kevent stays until the [`Registration`] is removed or dropped (or, for
    /// ONESHOT, until it is delivered).
    Registered(Registration<F>),
    /// The source was ready at once: the entry came back with `RET_DONE` and its data, and
    /// is **not** registered (spec section 3).
    Ready {
        /// The written-back entry, decoded like a delivered event.
        event: Event,
        /// The fd holder, handed back.
        fd: F,
    },
}

impl<F> Added<F> {
    /// Whether the kevent was registered.
    pub fn is_registered(&self) -> bool {
        matches!(self, Added::Registered(_))
    }
}

/// An ADD that did not register its source: the error, the written-back entry (when the ABI
/// wrote one), and the fd holder, handed back so that nothing is lost.
///
/// `?` turns it into [`Error`] (or `io::Error`, or `Box<dyn std::error::Error>`), dropping the
/// fd holder; [`AddError::into_fd`] or [`AddError::into_parts`] keep it. Like `anyhow::Error`,
/// it does not implement `std::error::Error` itself, so that `?` can convert it into a boxed
/// error whatever the holder's lifetime (a borrowed `&TcpStream` included).
///
/// ```
/// use std::os::unix::net::UnixStream;
/// use kevent::{Errno, Inode, InodeEvents, Queue, Socket, SocketEvents, User};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let queue = Queue::new()?;
/// let _first = queue.add(User::new(1))?;
/// let err = queue.add(User::new(1)).unwrap_err(); // the key is taken
/// assert_eq!(err.error().errno(), Some(Errno::EEXIST));
/// // A socket is not a directory: the ADD fails, and the stream comes back.
/// let (a, _b) = UnixStream::pair()?;
/// let err = queue.add(Inode::new(a, InodeEvents::CREATE)).unwrap_err();
/// assert_eq!(err.error().errno(), Some(Errno::EINVAL));
/// let a: UnixStream = err.into_fd();
/// let _reg = queue.add(Socket::new(a, SocketEvents::RECV))?;
/// # Ok(()) }
/// ```
#[must_use = "the fd holder is handed back in the error: dropping it closes an owned fd"]
pub struct AddError<F> {
    error: Error,
    event: Option<Event>,
    fd: F,
}

impl<F> AddError<F> {
    pub(crate) fn new(error: Error, event: Option<Event>, fd: F) -> AddError<F> {
        AddError { error, event, fd }
    }

    /// An entry refused with `errno`, not sent (the ABI cannot express it).
    pub(crate) fn refused(k: Kevent<F>, e: Errno) -> AddError<F> {
        let mut uk = k.uk;
        uk.ret_flags = kevent_sys::KEVENT_RET_BROKEN | kevent_sys::KEVENT_RET_DONE;
        uk.ret_data = [0, e.negated()];
        AddError::new(Error::os(Op::Add, e), Some(Event::from_raw(uk)), k.fd)
    }

    /// Why the source was not registered: [`Op::Add`] with `EEXIST` (the key is
    /// registered), `EBADF`, `EINVAL` (an fd of the wrong kind, a zero or too long timer
    /// interval, an uncatchable signal, a non-directory), `ENOSYS` (a type ADD does not
    /// create, **D2**), or the call's own error (the queue fd is not a queue).
    pub fn error(&self) -> &Error {
        &self.error
    }

    /// The entry the ABI wrote back (`RET_BROKEN`, `ret_data[1] = -errno`), if any: an error
    /// of the call itself writes none.
    pub fn event(&self) -> Option<&Event> {
        self.event.as_ref()
    }

    /// The fd holder, handed back.
    pub fn fd(&self) -> &F {
        &self.fd
    }

    /// The fd holder, handed back; the error is dropped.
    pub fn into_fd(self) -> F {
        self.fd
    }

    /// The error, the written-back entry and the fd holder.
    pub fn into_parts(self) -> (Error, Option<Event>, F) {
        (self.error, self.event, self.fd)
    }

    /// The error; the fd holder is dropped.
    pub fn into_error(self) -> Error {
        self.error
    }
}

impl<F> fmt::Debug for AddError<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AddError")
            .field("error", &self.error)
            .field("event", &self.event)
            .finish_non_exhaustive()
    }
}

impl<F> fmt::Display for AddError<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl<F> From<AddError<F>> for Error {
    fn from(e: AddError<F>) -> Error {
        e.error
    }
}

impl<F> From<AddError<F>> for io::Error {
    fn from(e: AddError<F>) -> io::Error {
        e.error.into()
    }
}

impl<F> From<AddError<F>> for Box<dyn std::error::Error + Send + Sync + 'static> {
    fn from(e: AddError<F>) -> Self {
        Box::new(e.error)
    }
}

impl<F> From<AddError<F>> for Box<dyn std::error::Error + 'static> {
    fn from(e: AddError<F>) -> Self {
        Box::new(e.error)
    }
}

/// The part of a registration that removes the kevent on drop.
#[derive(Debug)]
pub(crate) struct Guard {
    queue: Weak<Inner>,
    /// The entry as registered (event, flags, token), for MODIFY.
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
        let mut shard = q.keys.lock(self.key());
        if !shard.release(self.key(), generation) {
            return Ok(false);
        }
        let mut entry = [self.key().to_ukevent()];
        // D14: the call returns 0; whether the kevent was found is in the entry.
        q.ctl(Op::Remove, KEVENT_CTL_REMOVE, &mut entry)?;
        Ok(entry[0].ret_flags & KEVENT_RET_BROKEN == 0)
    }
}

impl Guard {
    /// The kevent left the queue by itself (its ONESHOT delivery was seen): forget it
    /// without a REMOVE.
    fn forget_delivered(&mut self) {
        let generation = std::mem::replace(&mut self.generation, 0);
        if let Some(q) = self.queue.upgrade() {
            q.keys.lock(self.key()).release(self.key(), generation);
        }
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
/// * with an owned value, the registration owns the fd; [`Registration::get_ref`] and
///   [`Registration::get_mut`] lend it (a `BufReader` or a TLS stream needs `&mut`), and
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
/// Two ways around it remain, both memory-safe: leaking the registration (`mem::forget`),
/// which ends the borrow without REMOVE, and replacing an owned holder through
/// [`Registration::get_mut`] (`mem::replace`), which closes the registered fd. That is memory-safe: the backend's own D10 rule then applies (the kevent
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
/// let mut reg = queue.add(Socket::new(a, SocketEvents::RECV))?;
/// let stream: &mut UnixStream = reg.get_mut();
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

    /// The token (the ABI's `cookie`) it was registered (or last modified) with.
    #[doc(alias = "cookie")]
    pub fn token(&self) -> u64 {
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

    /// The fd holder, mutably (to read from a registered stream through `&mut`, or wrap it in
    /// a `BufReader`). Replacing the holder (`mem::replace`) is memory-safe but closes the
    /// registered fd: the kevent is then reported once as BROKEN (`EBADF`, **D10**), never
    /// for the new fd.
    pub fn get_mut(&mut self) -> &mut F {
        &mut self.fd
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

    /// Drops a registration whose ONESHOT (or BROKEN) delivery was seen, without the REMOVE
    /// that would only find nothing.
    pub(crate) fn forget_delivered(mut self) {
        self.guard.forget_delivered();
    }

    /// Starts a `kevent_ctl(KEVENT_CTL_MODIFY)`: change the event mask, the request flags
    /// and/or the token, then [`Modify::apply`]. Unchanged fields keep their values.
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
        let shard = q.keys.lock(self.key());
        if !shard.owns(self.key(), self.guard.generation) {
            return Ok(false);
        }
        let mut entry = [self.key().to_ukevent()];
        Ok(q.ctl(Op::Ready, KEVENT_CTL_READY, &mut entry)? == 1)
    }
}

impl<F: AsFd> AsFd for Registration<F> {
    /// The registered fd.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A pending `kevent_ctl(KEVENT_CTL_MODIFY)` of a [`Registration`].
///
/// ```
/// use kevent::{Queue, ReqFlags, User};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let queue = Queue::new()?;
/// let mut reg = queue.add(User::new(1))?;
/// reg.modify().flags(ReqFlags::ONESHOT).token(9).apply()?;
/// assert_eq!(reg.token(), 9);
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

    /// The new request flags (they replace the registered ones: MODIFY sets the whole word).
    pub fn flags(mut self, flags: ReqFlags) -> Self {
        self.uk.req_flags = flags.bits();
        self
    }

    /// The new token (the ABI's `cookie`).
    #[doc(alias = "cookie")]
    pub fn token(mut self, token: u64) -> Self {
        self.uk.set_cookie(token);
        self
    }

    /// `kevent_ctl(KEVENT_CTL_MODIFY)`—Replaces the kevent's event mask, request flags and
    /// token.
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
        let shard = q.keys.lock(Key::of(&guard.uk));
        if !shard.owns(Key::of(&guard.uk), guard.generation) {
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
