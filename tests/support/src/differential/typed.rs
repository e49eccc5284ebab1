//! The typed subject: the same epoll sequences on SOCKET kevents (the socketpair's ends),
//! PIPE kevents (the pipe's and the FIFO's ends) and POLL kevents (the eventfd), so that the
//! differential test covers every state type (issue 15: "for POLL, SOCKET and PIPE
//! kevents").
//!
//! A typed kevent can say less than a POLL kevent: `RECV` and `SEND` only, and a hang-up
//! that leaves nothing to report is BROKEN (`-EPIPE`) and ends the registration (decision
//! P9, P5), where epoll keeps reporting `EPOLLHUP`. The driver models that difference
//! explicitly (decision P24): the reference registers what the kevent watches
//! ([`Typed::reference_mask`]: `EPOLLIN | EPOLLRDHUP` for a socket's RECV, `EPOLLIN` for a
//! pipe's, `EPOLLOUT` for SEND), every epoll event it reports is translated into the kevent
//! it stands for ([`Typed::expect`]), and after a BROKEN delivery the reference's
//! registration is deleted too. Requests carry `LAST_CHECK`, so that a READY mark is
//! re-checked like every other path (P6) and stays equivalent to `EPOLL_CTL_MOD`. ONESHOT
//! is re-armed by ADD, as `kevent_epoll::Epoll` does for POLL kevents.

use std::collections::HashMap;
use std::os::fd::RawFd;

use kevent_epoll::{Options, Via, mapping};

use super::{E_ET, E_IN, E_ONESHOT, E_OUT, E_RDHUP, Subject};
use crate::*;

/// `events` bit of a re-encoded BROKEN delivery (above every epoll bit the driver uses);
/// the errno sits in bits 16..26.
pub const BROKEN: u32 = 1 << 26;

const HUP: u32 = libc::EPOLLHUP as u32;
const ERR: u32 = libc::EPOLLERR as u32;

/// Which kevent type watches an fd.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A socket: SOCKET.
    Socket,
    /// A FIFO: PIPE.
    Pipe,
    /// Anything else: POLL.
    Poll,
}

/// What `fd` is.
pub fn kind_of(fd: RawFd) -> Kind {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `st` is valid for writes of one `struct stat`.
    if unsafe { libc::fstat(fd, st.as_mut_ptr()) } != 0 {
        return Kind::Poll;
    }
    // SAFETY: fstat succeeded.
    match unsafe { st.assume_init() }.st_mode & libc::S_IFMT {
        libc::S_IFSOCK => Kind::Socket,
        libc::S_IFIFO => Kind::Pipe,
        _ => Kind::Poll,
    }
}

/// Typed kevents on a queue of one backend.
#[derive(Debug)]
pub struct Typed {
    b: Backend,
    q: Queue,
    opts: Options,
    /// fds whose ONESHOT fired (kevent unregistered them; epoll holds them disabled).
    fired: HashMap<RawFd, bool>,
    /// The registration's events per fd (to re-encode deliveries).
    events: HashMap<RawFd, u32>,
    /// The BROKEN report the last ADD wrote back (a source broken at ADD, without
    /// ALWAYS_QUEUE), re-encoded: where epoll registers the fd and reports `EPOLLHUP`.
    broken_at_add: Option<u32>,
}

fn key(fd: RawFd) -> ukevent {
    match kind_of(fd) {
        Kind::Socket => on_fd(KEVENT_SOCKET, fd, 0, 0),
        Kind::Pipe => on_fd(KEVENT_PIPE, fd, 0, 0),
        Kind::Poll => mapping::key(fd),
    }
}

impl Typed {
    /// A subject for `opts` (`Via::Ring` uses a ring of that size).
    pub fn new(b: Backend, opts: Options) -> Typed {
        let q = match opts.via {
            Via::GetEvents => Queue::new(b),
            Via::Ring(n) => Queue::with_ring(b, n),
        };
        Typed {
            b,
            q,
            opts,
            fired: HashMap::new(),
            events: HashMap::new(),
            broken_at_add: None,
        }
    }

    /// The kevent for the epoll registration `(fd, events, data)`.
    fn kevent(&self, fd: RawFd, events: u32, data: u64) -> ukevent {
        let mut req = KEVENT_REQ_LAST_CHECK;
        if self.opts.always_queue {
            req |= KEVENT_REQ_ALWAYS_QUEUE;
        }
        if events & E_ET != 0 {
            req |= KEVENT_REQ_ET;
        }
        if events & E_ONESHOT != 0 {
            req |= KEVENT_REQ_ONESHOT;
        }
        let mut e = match kind_of(fd) {
            Kind::Poll => mapping::to_ukevent(fd, events, data, self.opts.always_queue),
            k => {
                let mut ev = 0;
                if events & E_IN != 0 {
                    ev |= KEVENT_SOCKET_RECV;
                }
                if events & E_OUT != 0 {
                    ev |= KEVENT_SOCKET_SEND;
                }
                on_fd(
                    if k == Kind::Socket {
                        KEVENT_SOCKET
                    } else {
                        KEVENT_PIPE
                    },
                    fd,
                    ev,
                    0,
                )
            }
        };
        e.req_flags |= req;
        e.set_cookie(data);
        e
    }

    fn entry(e: &ukevent) -> Result<(), Errno> {
        if e.ret_flags & KEVENT_RET_BROKEN != 0 {
            Err(Errno::from_negated(e.ret_data[1]).unwrap_or(Errno::EIO))
        } else {
            Ok(())
        }
    }

    fn add(&mut self, fd: RawFd, events: u32, data: u64) -> Result<(), Errno> {
        let mut e = [self.kevent(fd, events, data)];
        if self.q.ctl(KEVENT_CTL_ADD, &mut e)? == 0 {
            return Ok(());
        }
        if e[0].type_ != KEVENT_POLL && Self::entry(&e[0]) == Err(Errno::EPIPE) {
            // Ready at once as BROKEN (a hung-up source): the ADD's write-back is the
            // report, and nothing stays registered (P9, P24).
            self.broken_at_add = Some(Self::encode(&e[0]));
            return Ok(());
        }
        Self::entry(&e[0])?;
        // Ready at once, returned, not registered (no ALWAYS_QUEUE): queue it as ready.
        let mut again = [self.kevent(fd, events, data)];
        again[0].req_flags |= KEVENT_REQ_READY;
        if self.q.ctl(KEVENT_CTL_ADD, &mut again)? == 0 {
            return Ok(());
        }
        Self::entry(&again[0]).and(Err(Errno::EIO))
    }

    /// The mask the reference epoll registers for the kevent that `events` maps to: what
    /// the fallback's epoll would be asked for (`EPOLLRDHUP` with a socket's RECV), so that
    /// the reference reports the same conditions.
    pub fn reference_mask(fd: RawFd, events: u32) -> u32 {
        let flags = events & (E_ET | E_ONESHOT);
        match kind_of(fd) {
            Kind::Poll => events,
            k => {
                let mut m = events & E_OUT;
                if events & E_IN != 0 {
                    m |= E_IN;
                    if k == Kind::Socket {
                        m |= E_RDHUP;
                    }
                }
                m | flags
            }
        }
    }

    /// The re-encoded delivery a kevent watching `watched` (epoll bits) owes for the epoll
    /// event `rev` (P9): `RECV`/`SEND` as `EPOLLIN`/`EPOLLOUT`; a socket error or a hang-up
    /// with nothing to report as [`BROKEN`] with the errno (`None` for a socket error:
    /// whatever `SO_ERROR` said).
    pub fn expect(fd: RawFd, watched: u32, rev: u32) -> (u32, Option<Errno>) {
        match kind_of(fd) {
            Kind::Poll => (rev, None),
            Kind::Socket => {
                if rev & ERR != 0 {
                    return (BROKEN, None);
                }
                let mut r = 0;
                if rev & (E_IN | E_RDHUP | HUP) != 0 {
                    r |= watched & E_IN;
                }
                if rev & E_OUT != 0 {
                    r |= watched & E_OUT;
                }
                if r == 0 && rev & HUP != 0 {
                    (BROKEN, Some(Errno::EPIPE))
                } else {
                    (r, None)
                }
            }
            Kind::Pipe => {
                let mut r = 0;
                if rev & E_IN != 0 {
                    r |= watched & E_IN;
                }
                if rev & E_OUT != 0 {
                    r |= watched & E_OUT;
                }
                if r == 0 && rev & (HUP | ERR) != 0 {
                    (BROKEN, Some(Errno::EPIPE))
                } else {
                    (r, None)
                }
            }
        }
    }

    fn encode(e: &ukevent) -> u32 {
        if e.ret_flags & KEVENT_RET_BROKEN != 0 {
            let errno = Errno::from_negated(e.ret_data[1]).map_or(0, |x| x.raw() as u32);
            return BROKEN | ((errno & 0x3ff) << 16);
        }
        if e.type_ == KEVENT_POLL {
            return e.ret_data[0];
        }
        let mut r = 0;
        if e.ret_data[0] & (KEVENT_SOCKET_RECV | KEVENT_SOCKET_ACCEPT) != 0 {
            r |= E_IN;
        }
        if e.ret_data[0] & KEVENT_SOCKET_SEND != 0 {
            r |= E_OUT;
        }
        r
    }

    fn take(&mut self) -> Result<Vec<ukevent>, Errno> {
        match self.opts.via {
            Via::GetEvents => self.q.get_events(1, 64, &ZERO, 0),
            Via::Ring(_) => {
                let n = self.q.ring_size();
                let (k0, over) = (self.q.kidx(), self.q.over());
                let got = self.q.wait(n - 1, k0, &ZERO)?;
                let evs: Vec<ukevent> = (0..got)
                    .map(|i| self.q.slot(ring::advance(n, k0, i)))
                    .collect();
                if got > 0 {
                    self.q.commit(ring::advance(n, k0, got), over)?;
                }
                Ok(evs)
            }
        }
    }
}

impl Subject for Typed {
    fn ctl(&mut self, op: i32, fd: RawFd, ev: Option<libc::epoll_event>) -> Result<(), Errno> {
        let fired = self.fired.get(&fd).copied().unwrap_or(false);
        match op {
            libc::EPOLL_CTL_ADD | libc::EPOLL_CTL_MOD => {
                let ev = ev.ok_or(Errno::EFAULT)?;
                let (events, data) = (ev.events, ev.u64);
                if op == libc::EPOLL_CTL_ADD && fired {
                    return Err(Errno::EEXIST);
                }
                if op == libc::EPOLL_CTL_ADD || fired {
                    self.add(fd, events, data)
                } else {
                    let mut e = [self.kevent(fd, events, data)];
                    self.q.ctl(KEVENT_CTL_MODIFY, &mut e)?;
                    Self::entry(&e[0])
                }
                .map(|()| {
                    self.events.insert(fd, events);
                    self.fired.remove(&fd);
                })
            }
            libc::EPOLL_CTL_DEL if fired => {
                self.fired.remove(&fd);
                Ok(())
            }
            libc::EPOLL_CTL_DEL => {
                let mut e = [key(fd)];
                self.q.ctl(KEVENT_CTL_REMOVE, &mut e)?;
                Self::entry(&e[0])
            }
            _ => Err(Errno::EINVAL),
        }
    }

    fn wait(&mut self, out: &mut [libc::epoll_event]) -> Result<usize, Errno> {
        let got = self.take()?;
        let mut n = 0;
        for e in &got {
            let fd = e.id.raw()[0] as RawFd;
            if e.ret_flags & KEVENT_RET_DONE != 0 && e.ret_flags & KEVENT_RET_BROKEN == 0 {
                self.fired.insert(fd, true);
            }
            out[n] = libc::epoll_event {
                events: Self::encode(e),
                u64: e.cookie(),
            };
            n += 1;
        }
        Ok(n)
    }

    fn ready(&mut self, fd: RawFd) -> Option<u32> {
        let mut k = [key(fd)];
        Some(
            self.b
                .ctl(self.q.fd, KEVENT_CTL_READY, &mut k)
                .expect("kevent_ctl(READY)"),
        )
    }

    fn typed(&self) -> bool {
        true
    }

    fn broken_at_add(&mut self) -> Option<u32> {
        self.broken_at_add.take()
    }
}
