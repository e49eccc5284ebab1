//! Typed registrations: one small builder per kevent type.
//!
//! Required arguments go in `new`, options are chained setters, and
//! [`Queue::add`](crate::Queue::add) turns the builder into a ukevent (io-uring's opcode
//! builders). Every builder has [`flags`](Socket::flags) (the [`ReqFlags`]) and
//! [`token`](Socket::token) (the ABI's `cookie`: a `u64` handed back untouched in every
//! [`Event`](crate::Event)).
//!
//! | builder | type | id | needs an fd |
//! |---|---|---|---|
//! | [`Socket`] | `KEVENT_SOCKET` | the socket fd | yes |
//! | [`Pipe`] | `KEVENT_PIPE` | the FIFO fd | yes |
//! | [`Pollable`] | `KEVENT_POLL` | any pollable fd | yes |
//! | [`Inode`] | `KEVENT_INODE` | a directory fd | yes |
//! | [`Timer`] | `KEVENT_TIMER` | the interval (seconds, nanoseconds) | no |
//! | [`Signal`] | `KEVENT_SIGNAL` | the signal number (+ NOMASK) | no |
//! | [`User`] | `KEVENT_UNOTIFY` | the caller's id | no |
//!
//! POSIX timers are not added: they are created ([`PosixTimer`](crate::PosixTimer)).
//!
//! # Fd sources hold their fd (D10)
//!
//! A builder that watches an fd takes the fd *holder* `F: AsFd`: a reference (`&TcpStream`,
//! `&File`, `BorrowedFd<'_>`) or an owned value (`TcpStream`, `OwnedFd`). The holder moves
//! into the [`Registration`](crate::Registration) and stays there until the registration is
//! removed or dropped (REMOVE), so safe code cannot close the fd while it is registered: a
//! reference keeps the value borrowed, an owned value is owned by the registration. See
//! [`Registration`](crate::Registration).
//!
//! The builders take the fd number once, from `F::as_fd()`, when they are made. `F`'s `AsFd`
//! must keep naming the same fd for as long as the value lives, as every `AsFd` of std does.

mod inode;
mod pipe;
mod poll;
mod signal;
mod socket;
mod timer;
mod user;

pub use inode::Inode;
pub use pipe::Pipe;
pub use poll::Pollable;
pub use signal::{Signal, Signo};
pub use socket::Socket;
pub use timer::Timer;
pub use user::User;

use kevent_sys::{Errno, kevent_id, ukevent};

use crate::flags::ReqFlags;

/// The fd holder of sources that watch no fd (timers, signals, user events).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NoFd;

/// A kevent ready to be added: its ukevent and the holder of its fd (if any).
///
/// Made from a builder ([`Socket`], [`Timer`], …) by [`Source::into_kevent`]; there is no
/// other way to make one, so an fd kevent always holds its fd.
#[derive(Debug)]
pub struct Kevent<F> {
    pub(crate) uk: ukevent,
    pub(crate) fd: F,
    /// Set when the arguments cannot be expressed in the ABI: ADD then reports the entry as
    /// failed with this error, without sending it.
    pub(crate) invalid: Option<Errno>,
}

impl<F> Kevent<F> {
    pub(crate) fn new(type_: u32, id: kevent_id, event: u32, common: Common, fd: F) -> Self {
        let mut uk = ukevent::new(type_, id, event, common.flags.bits());
        uk.set_cookie(common.token);
        Kevent {
            uk,
            fd,
            invalid: None,
        }
    }

    /// The ukevent that ADD will send.
    pub fn as_raw(&self) -> &ukevent {
        &self.uk
    }

    /// The key the kevent will have.
    pub fn key(&self) -> crate::Key {
        crate::Key::of(&self.uk)
    }
}

mod sealed {
    pub trait Sealed {}
}

/// Anything [`Queue::add`](crate::Queue::add) accepts: the builders of this module (sealed).
pub trait Source: sealed::Sealed {
    /// The fd holder the registration keeps: `F` for fd sources, [`NoFd`] otherwise.
    type Fd;

    /// The kevent to add.
    fn into_kevent(self) -> Kevent<Self::Fd>;
}

impl<F> sealed::Sealed for Kevent<F> {}

impl<F> Source for Kevent<F> {
    type Fd = F;

    fn into_kevent(self) -> Kevent<F> {
        self
    }
}

/// The options every builder shares.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Common {
    pub(crate) flags: ReqFlags,
    pub(crate) token: u64,
}

/// The `flags`/`token` setters of every builder, and its `Sealed` impl.
macro_rules! source_common {
    ($ty:ident $(<$f:ident>)?) => {
        impl$(<$f>)? $ty$(<$f>)? {
            /// Adds request flags ([`ReqFlags`](crate::ReqFlags)) to those already set: the
            /// calls accumulate (`Timer::oneshot(d).flags(ReqFlags::WAKEUP_ALL)` stays
            /// ONESHOT). Default: none, i.e. level-triggered, stays registered.
            pub fn flags(mut self, flags: crate::ReqFlags) -> Self {
                self.common.flags |= flags;
                self
            }

            /// Edge-triggered ([`ReqFlags::ET`](crate::ReqFlags::ET)): delivered once per
            /// new readiness.
            #[doc(alias = "KEVENT_REQ_ET")]
            pub fn edge(self) -> Self {
                self.flags(crate::ReqFlags::ET)
            }

            /// Wakes every waiting thread ([`ReqFlags::WAKEUP_ALL`](crate::ReqFlags::WAKEUP_ALL))
            /// instead of one; one of them gets the event.
            #[doc(alias = "KEVENT_REQ_WAKEUP_ALL")]
            pub fn wakeup_all(self) -> Self {
                self.flags(crate::ReqFlags::WAKEUP_ALL)
            }

            /// Sets the token (the ABI's `cookie`): any `u64`, returned untouched in every
            /// event of this kevent (default 0).
            #[doc(alias = "cookie")]
            pub fn token(mut self, token: u64) -> Self {
                self.common.token = token;
                self
            }
        }

        impl$(<$f>)? crate::source::sealed::Sealed for $ty$(<$f>)? {}
    };
}
pub(crate) use source_common;

/// Defines a builder of a kevent type whose id is an fd (`Socket`, `Pipe`, `Pollable`,
/// `Inode`): the struct holding the fd holder, `new(fd, events)`, the common setters and its
/// `Source` impl. One definition for the four.
macro_rules! fd_source {
    (
        $(#[$meta:meta])*
        pub struct $name:ident: $type_:path, $events:ty;
        $(#[$new_meta:meta])*
        new;
    ) => {
        $(#[$meta])*
        #[derive(Debug)]
        pub struct $name<F> {
            fd: F,
            raw: std::os::fd::RawFd,
            events: $events,
            common: crate::source::Common,
        }

        impl<F: std::os::fd::AsFd> $name<F> {
            $(#[$new_meta])*
            pub fn new(fd: F, events: $events) -> $name<F> {
                let raw = std::os::fd::AsRawFd::as_raw_fd(&fd.as_fd());
                $name {
                    fd,
                    raw,
                    events,
                    common: crate::source::Common::default(),
                }
            }
        }

        crate::source::source_common!($name<F>);

        impl<F> crate::source::Source for $name<F> {
            type Fd = F;

            fn into_kevent(self) -> crate::source::Kevent<F> {
                crate::source::Kevent::new(
                    $type_,
                    kevent_sys::kevent_id::from_raw([self.raw as u32, 0]),
                    self.events.bits(),
                    self.common,
                    self.fd,
                )
            }
        }
    };
}
pub(crate) use fd_source;
