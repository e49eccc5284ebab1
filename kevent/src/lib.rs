//! Safe Rust API for kevent: one event queue for sockets, pipes, any pollable fd, timers,
//! signals, POSIX timers, directory changes and user events, with an optional ring buffer
//! that several threads can consume at once.
//!
//! The same program runs on a Linux kernel that carries the kevent patch (the **native**
//! backend: raw syscalls) and on any stock kernel (the **fallback**: a userspace engine over
//! epoll, timerfd, eventfd, inotify and a signal handler). The choice is made at run time,
//! once per process ([`Backend::current`]); `KEVENT_BACKEND=fallback` forces the fallback,
//! `KEVENT_BACKEND=native` requires native. Every example in these docs runs on either.
//!
//! # The model
//!
//! **A queue** ([`Queue`]) is an fd. You register *kevents* in it, then wait for events.
//!
//! **A kevent** is named by its [`Key`]: a type and an id. The id is what is watched: an fd
//! number for sockets, pipes, poll and directories; the interval for timers; the signal
//! number; any number you choose for user events. Registering is [`Queue::add`] with a typed
//! builder from [`source`]:
//!
//! ```
//! use std::net::{TcpListener, TcpStream};
//! use kevent::{Events, EventKind, Queue, Socket, SocketEvents, Timeout};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let queue = Queue::new()?;
//! let listener = TcpListener::bind("127.0.0.1:0")?;
//! let reg = queue.add(Socket::new(&listener, SocketEvents::ACCEPT).token(1))?;
//! let _client = TcpStream::connect(listener.local_addr()?)?;
//! let mut events = Events::with_capacity(64);
//! queue.wait(&mut events, Timeout::FOREVER)?;
//! for event in &events {
//!     assert_eq!(event.token(), 1);
//!     assert!(matches!(event.kind(), EventKind::Socket { ready: SocketEvents::ACCEPT, .. }));
//! }
//! drop(reg); // REMOVE
//! # Ok(()) }
//! ```
//!
//! **Adding** returns a `Result`: `Ok` is a [`Registration`]; an [`AddError`] says why the
//! entry was refused (a bad fd, a duplicate key: [`Error`], with its [`Errno`]) and hands the
//! fd holder back, so nothing you pass is lost; `?` turns it into [`Error`]. A source that
//! is ready at once is registered and its event queued (decision P30);
//! [`Queue::add_or_ready`] keeps the ABI's "returned at once, not registered" ([`Added`]).
//!
//! **A registration holds its fd.** Builders take the fd *holder*: a reference (`&stream`)
//! keeps the stream borrowed while registered, an owned stream is owned by the registration.
//! Safe code therefore cannot close a registered fd, so events for a different file that
//! reuses the number can never be reported (**D10**). Dropping the registration unregisters
//! the kevent (REMOVE) first, then drops the holder. See [`Registration`].
//!
//! **Events** come back from [`Queue::wait`] into a reusable [`Events`] buffer (or from
//! the ring, below). Each [`Event`] carries your token and decodes into an [`EventKind`]: which
//! readiness of which socket, how many timer expirations, which signal, … A failed source is
//! *BROKEN* ([`Event::error`] gives the `io::Error`) and unregistered.
//!
//! # Level, edge, oneshot
//!
//! * **Level** (the default, **D7**): a socket, pipe or poll kevent whose source is still
//!   ready is delivered by *every* wait, like epoll's level mode. Read until `WouldBlock`, or
//!   expect it again.
//! * **Edge** ([`ReqFlags::ET`]): delivered once per *new* readiness; drain the source
//!   before waiting again or you may not hear from it.
//! * **Oneshot** ([`ReqFlags::ONESHOT`]): delivered once, then unregistered; the event
//!   carries [`RetFlags::DONE`]. Add it again to re-arm.
//!
//! Timers, signals, directory changes and user-event marks are *occurrences*: each is
//! consumed by the delivery that reports it, and occurrences that pile up before a delivery
//! are coalesced into one event with a count (**D8**).
//!
//! # Deadlines
//!
//! A TIMER kevent is named by its interval, so a queue holds one timer per interval.
//! [`Timers`] multiplexes any number of deadlines (a per-connection idle timeout, all the
//! same duration) over one TIMER kevent; moving a deadline later costs no system call
//! (**P31**).
//!
//! # Waiting
//!
//! Every wait takes a [`Timeout`]: [`Timeout::NOW`] (do not block), a relative `Duration`,
//! an `Instant` deadline, an absolute `SystemTime`, or [`Timeout::FOREVER`].
//! [`Queue::wait`] returns once an event is ready; [`Queue::wait_at_least`] once `min` are
//! (**D4**). [`Queue::wake`] makes
//! every thread waiting at that moment return at once; with nobody waiting, only the next
//! wait returns at once (**P7**). A queue built [`nonblocking`](Builder::nonblocking) never
//! blocks.
//!
//! # The ring and commits
//!
//! A queue built with [`Builder::ring_size`] owns a ring of `n` slots. Instead of copying
//! events into your buffer, the queue writes them into the ring ([`RingConsumer::wait`]);
//! you read them in place and then *commit*, which gives the slots back. At most `n - 1`
//! events are uncommitted (**D12**).
//!
//! ```
//! use kevent::{Key, Queue, Timeout, User};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let queue = Queue::builder().ring_size(64).build()?;
//! let _user = queue.add(User::new(1))?;
//! queue.ready(&[Key::user(1)])?;
//! let mut ring = queue.ring()?;
//! let snapshot = ring.wait(Timeout::FOREVER)?;
//! for event in snapshot {
//!     assert_eq!(event.key(), Key::user(1));
//! } // the snapshot is dropped here: what was read is committed
//! # Ok(()) }
//! ```
//!
//! # Threads
//!
//! [`Queue`] is `Send + Sync`: any thread may add, remove, mark ready and wait, at the same
//! time. Each ready kevent is delivered once, to one waiter, never twice. Its notification
//! wakes one waiting thread; with [`ReqFlags::WAKEUP_ALL`] it wakes every waiting thread,
//! one of which gets the event while the others return with whatever else is ready
//! (possibly nothing). [`SharedRing`] lets several threads consume one
//! ring: each claims a [`Batch`] of entries, and a commit happens only over a prefix every
//! thread has finished, because a commit releases every slot before it (**D13**).
//!
//! # Async runtimes
//!
//! The queue fd is readable while events are ready. Two adapters, each behind its cargo
//! feature, register it with a runtime's reactor and hand out events with no `unsafe` and no
//! readiness protocol to get right: `kevent::tokio::AsyncQueue` (feature `tokio`) and
//! `kevent::async_io::AsyncQueue` (feature `async-io`, for smol and async-std). Their `next()` is
//! cancellation-safe. See `examples/async_tokio.rs` (tokio sockets next to kevent timers,
//! signals and directory events) and `examples/async_smol.rs`.
//!
//! # What this crate leaves out
//!
//! Kernel AIO (`KEVENT_AIO`) is not added but started: [`Queue::sendfile`] returns an
//! [`AioRequest`], and the end decodes as [`EventKind::Aio`]. NAIO does not exist (ADD
//! answers `ENOSYS`). The normative contract
//! is the project's `kevent-abi.md`; the rule numbers these docs cite (**D7**, **P30**) are
//! summarised in [`rules`]. The [`guide`] walks through a first event loop.
//!
//! # The fallback's costs
//!
//! On a stock kernel the fallback engine runs the queue in user space. Two things differ
//! from a kevent kernel and are worth knowing:
//!
//! * An idle waiter wakes once a second to check that its queue fd is still open: closing
//!   an fd cannot be observed otherwise (decisions P14 and P34). A program that waits for
//!   hours costs one short system call per second per waiting thread; natively a waiter
//!   sleeps until an event, a timeout or a `close`.
//! * Signal kevents are fed by a process-wide handler. A handler installed later
//!   (`sigaction`, `tokio::signal`, `ctrlc`, `signal-hook`) replaces it until the engine
//!   takes the signal back, within about a second, chaining to that handler from then on;
//!   deliveries in between reach only the other handler (P34; see [`Signal`]). Natively,
//!   handlers never interfere.
#![deny(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]
#![doc(test(attr(deny(warnings))))]

#[cfg(not(target_os = "linux"))]
compile_error!(
    "kevent: the kevent ABI exists on Linux only (a kevent kernel, or the fallback engine over epoll, timerfd, eventfd and inotify)"
);

mod aio;
mod async_ring;
mod error;
mod event;
mod flags;
pub mod guide;
mod keys;
mod posix_timer;
mod queue;
mod registration;
mod ring;
pub mod rules;
#[cfg(any(feature = "tokio", feature = "async-io"))]
mod runtime;
pub mod source;
mod timeout;
mod timers;

pub use aio::AioRequest;
pub use async_ring::{ASYNC_RING_MAX, AsyncRing, Drain};
pub use error::{Error, Op, Result};
pub use event::{Event, EventKind, Events, Iter, Key};
pub use flags::{InodeEvents, PollEvents, ReqFlags, RetFlags, SocketEvents};
pub use kevent_backend::{Backend, BackendError};
pub use kevent_sys::Errno;
pub use kevent_sys::detect::Unavailable;
pub use posix_timer::{Clock, PosixTimer};
pub use queue::{AddResult, Builder, Queue, ReadyOutcome};
pub use registration::{AddError, Added, Modify, Registration};
pub use ring::{Batch, MAX_RING_SIZE, RingConsumer, SharedRing, Snapshot};
pub use source::{Inode, NoFd, Pipe, Pollable, Signal, Signo, Socket, Timer, User};
pub use timeout::{FOREVER_SECS, Timeout};
pub use timers::{DEFAULT_RESOLUTION, TimerId, Timers};

/// The tokio adapter (feature `tokio`): [`tokio::AsyncQueue`].
#[cfg(feature = "tokio")]
pub mod tokio {
    pub use crate::runtime::tokio::AsyncQueue;
}

/// The `async-io` adapter for smol and async-std (feature `async-io`):
/// [`async_io::AsyncQueue`].
#[cfg(feature = "async-io")]
pub mod async_io {
    pub use crate::runtime::async_io::AsyncQueue;
}
