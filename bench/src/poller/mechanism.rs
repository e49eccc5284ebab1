//! The mechanisms the poller benchmark compares, and one round of each: a mechanism's
//! registration of the N watched descriptors ([`Poller`]) and the round that makes A of them
//! readable, waits for them and reads them.
//!
//! # Safety
//!
//! `select` and `poll` are called with pointers to `fd_set`s or to `Vec`s that live across
//! each call, with their true lengths.
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use kevent_backend::Backend;
use kevent_sys::{
    KEVENT_CTL_ADD, KEVENT_REQ_ET, KEVENT_SOCKET, KEVENT_SOCKET_RECV, kevent_id, ukevent,
};

use super::transport::Sockets;
use crate::os;
use crate::rawqueue::{FOREVER, RawQueue};
use crate::uring::Uring;

/// A mechanism measured by the poller benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Mech {
    Select,
    Poll,
    Epoll,
    /// io_uring: a multishot `POLL_ADD` per descriptor, completions reaped from the CQ ring.
    Uring,
    /// No mechanism: the round's `write`s and `read`s alone, with nothing registered on the
    /// descriptors (so no wake-up callback runs either). Not a poller: the floor under every
    /// mechanism's round, what one that cost nothing would measure, so that a round's
    /// mechanism part (round − floor) can be read off.
    Floor,
    /// `kevent_get_events` on backend `.0` (index into the machine's backends).
    KeventGet(usize),
    /// `kevent_wait` + ring + `kevent_commit` on backend `.0`; `.1`: commits deferred until
    /// half the ring is read. Like every Rust row, its queue declares that it owns its fd
    /// (decision P65: on the fallback, no commit proves the number).
    KeventRing(usize, bool),
    /// [`Mech::KeventRing`] (a commit per wait) on backend `.0` without P65's declaration:
    /// on the fallback every commit proves the number (P54's `epoll_ctl`). Fallback rows only.
    KeventRingProved(usize),
    /// The asynchronous ring (P38) on backend `.0`: events read with no system call while
    /// the ring has any, `kevent_wait` only when it is empty. Its kevents are edge-triggered
    /// (`KEVENT_REQ_ET`): natively only those are posted by the producer as they occur (a
    /// level kevent needs `->poll()` in the consumer's `kevent_wait`, P38); every round
    /// writes one byte per active socket and the consumer reads it, so each write is one
    /// edge and one event, as each is one level event for the other rows.
    KeventAsync(usize),
    /// `kevent_get_events` through libkevent's exported C function, on the process's
    /// backend (`.0`, its index among the machine's backends).
    CGet(usize),
    /// The ring through libkevent's exported C functions, a commit per wait, on the process's
    /// backend `.0`.
    CRing(usize),
}

impl Mech {
    pub(super) fn name(self, backends: &[Backend]) -> String {
        match self {
            Mech::Select => "select".into(),
            Mech::Poll => "poll".into(),
            Mech::Epoll => "epoll".into(),
            Mech::Uring => "io_uring multishot poll".into(),
            Mech::Floor => "floor: write + read, no mechanism".into(),
            Mech::KeventGet(b) => format!("kevent get_events ({})", backends[b].as_str()),
            Mech::KeventRing(b, false) => {
                format!("kevent ring ({})", backends[b].as_str())
            }
            Mech::KeventRing(b, true) => {
                format!("kevent ring, batched commit ({})", backends[b].as_str())
            }
            Mech::KeventRingProved(b) => {
                format!(
                    "kevent ring, every commit proved ({})",
                    backends[b].as_str()
                )
            }
            Mech::KeventAsync(b) => format!("kevent async ring ({})", backends[b].as_str()),
            Mech::CGet(b) => format!("C kevent_get_events ({})", backends[b].as_str()),
            Mech::CRing(b) => format!("C kevent ring ({})", backends[b].as_str()),
        }
    }

    /// The Rust row a C row is compared with (the same calls through the Rust dispatch).
    pub(super) fn rust_twin(self) -> Option<Mech> {
        match self {
            Mech::CGet(b) => Some(Mech::KeventGet(b)),
            Mech::CRing(b) => Some(Mech::KeventRing(b, false)),
            _ => None,
        }
    }

    /// Whether this is a kevent row (compared with epoll).
    pub(super) fn is_kevent(self) -> bool {
        !matches!(
            self,
            Mech::Select | Mech::Poll | Mech::Epoll | Mech::Uring | Mech::Floor
        )
    }

    pub(super) fn key(self, backends: &[Backend]) -> String {
        match self {
            Mech::Select => "select".into(),
            Mech::Poll => "poll".into(),
            Mech::Epoll => "epoll".into(),
            Mech::Uring => "io_uring_multishot_poll".into(),
            Mech::Floor => "floor_write_read".into(),
            Mech::KeventGet(b) => format!("kevent_get_events_{}", backends[b].as_str()),
            Mech::KeventRing(b, false) => format!("kevent_ring_{}", backends[b].as_str()),
            Mech::KeventRing(b, true) => {
                format!("kevent_ring_batched_commit_{}", backends[b].as_str())
            }
            Mech::KeventRingProved(b) => format!("kevent_ring_proved_{}", backends[b].as_str()),
            Mech::KeventAsync(b) => format!("kevent_async_ring_{}", backends[b].as_str()),
            Mech::CGet(b) => format!("c_kevent_get_events_{}", backends[b].as_str()),
            Mech::CRing(b) => format!("c_kevent_ring_{}", backends[b].as_str()),
        }
    }
}

/// A mechanism's registration of all N sockets, built for one repetition.
pub(super) enum Poller {
    Select {
        master: libc::fd_set,
        nfds: i32,
    },
    Poll {
        pfds: Vec<libc::pollfd>,
    },
    Epoll {
        ep: OwnedFd,
        buf: Vec<libc::epoll_event>,
    },
    Get {
        q: RawQueue,
        buf: Vec<ukevent>,
    },
    Ring {
        q: RawQueue,
    },
    AsyncRing {
        q: RawQueue,
    },
    Uring(UringPoller),
    Floor,
}

/// io_uring with a multishot poll on every watched descriptor; the polls are removed on drop.
pub(super) struct UringPoller {
    u: Uring,
    fds: Vec<RawFd>,
}

impl Drop for UringPoller {
    fn drop(&mut self) {
        self.u.remove_all(&self.fds).expect("io_uring POLL_REMOVE");
    }
}

/// The most active descriptors a round may have (the wait buffers' size).
pub(super) const MAX_A: usize = 256;

impl Poller {
    pub(super) fn build(m: Mech, s: &Sockets, backends: &[Backend]) -> Poller {
        match m {
            Mech::Select => {
                // SAFETY: fd_set is a plain bit array; zeroes are the empty set.
                let mut master: libc::fd_set = unsafe { std::mem::zeroed() };
                let mut max = 0;
                for w in &s.watched {
                    // SAFETY: the caller checked every fd is below FD_SETSIZE.
                    unsafe { libc::FD_SET(w.as_raw_fd(), &mut master) };
                    max = max.max(w.as_raw_fd());
                }
                Poller::Select {
                    master,
                    nfds: max + 1,
                }
            }
            Mech::Poll => Poller::Poll {
                pfds: s
                    .watched
                    .iter()
                    .map(|w| libc::pollfd {
                        fd: w.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    })
                    .collect(),
            },
            Mech::Epoll => {
                let ep = os::epoll().expect("epoll_create1");
                for w in &s.watched {
                    let fd = w.as_raw_fd();
                    os::epoll_ctl(
                        ep.as_raw_fd(),
                        libc::EPOLL_CTL_ADD,
                        fd,
                        libc::EPOLLIN as u32,
                        fd as u64,
                    )
                    .expect("epoll_ctl ADD");
                }
                Poller::Epoll {
                    ep,
                    buf: vec![libc::epoll_event { events: 0, u64: 0 }; MAX_A],
                }
            }
            Mech::Uring => {
                let mut u = Uring::new(1024, 4096).expect("io_uring_setup");
                let fds: Vec<RawFd> = s.watched.iter().map(AsRawFd::as_raw_fd).collect();
                for &fd in &fds {
                    u.poll_add(fd, libc::POLLIN as u32)
                        .expect("io_uring POLL_ADD");
                }
                u.flush().expect("io_uring_enter");
                Poller::Uring(UringPoller { u, fds })
            }
            Mech::Floor => Poller::Floor,
            Mech::KeventGet(b)
            | Mech::KeventRing(b, _)
            | Mech::KeventRingProved(b)
            | Mech::KeventAsync(b)
            | Mech::CGet(b)
            | Mech::CRing(b) => {
                let ring = if matches!(
                    m,
                    Mech::KeventRing(..)
                        | Mech::KeventRingProved(_)
                        | Mech::CRing(_)
                        | Mech::KeventAsync(_)
                ) {
                    1024
                } else {
                    0
                };
                let q = match m {
                    Mech::CGet(_) | Mech::CRing(_) => RawQueue::new_c(ring)
                        .expect("the process has a backend")
                        .expect("kevent_init (C)"),
                    Mech::KeventAsync(_) => {
                        RawQueue::new_async(backends[b], ring).expect("kevent_init (async ring)")
                    }
                    _ => RawQueue::new(backends[b], ring).expect("kevent_init"),
                };
                let mut q = q;
                if matches!(
                    m,
                    Mech::KeventGet(_) | Mech::KeventRing(..) | Mech::KeventAsync(_)
                ) {
                    // P65: a Rust owner of its fd and ring; the C rows cannot declare it.
                    q.declare_owner().expect("declare the queue's owner (P65)");
                }
                let req = if matches!(m, Mech::KeventAsync(_)) {
                    KEVENT_REQ_ET
                } else {
                    0
                };
                let mut adds: Vec<ukevent> = s
                    .watched
                    .iter()
                    .map(|w| {
                        let fd = w.as_raw_fd() as u32;
                        ukevent::new(
                            KEVENT_SOCKET,
                            kevent_id::from_raw([fd, 0]),
                            KEVENT_SOCKET_RECV,
                            req,
                        )
                    })
                    .collect();
                for chunk in adds.chunks_mut(4096) {
                    assert_eq!(q.ctl(KEVENT_CTL_ADD, chunk), Ok(0), "kevent_ctl ADD");
                }
                if matches!(m, Mech::KeventAsync(_)) {
                    Poller::AsyncRing { q }
                } else if ring == 0 {
                    Poller::Get {
                        q,
                        buf: vec![ukevent::default(); MAX_A],
                    }
                } else {
                    let mut q = q;
                    if m == Mech::KeventRing(b, true) {
                        q.set_commit_every(ring / 2);
                    }
                    Poller::Ring { q }
                }
            }
        }
    }

    /// One round: activate `active`, wait for them all, read each.
    pub(super) fn round(&mut self, s: &Sockets, active: &[usize]) {
        for &i in active {
            s.activate(i);
        }
        let a = active.len();
        match self {
            Poller::Select { master, nfds } => {
                let mut rd = *master;
                // SAFETY: `rd` is a local fd_set; the other sets are null; no timeout.
                let n = unsafe {
                    libc::select(
                        *nfds,
                        &mut rd,
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                    )
                };
                assert_eq!(n as usize, a, "select");
                for w in &s.watched {
                    // SAFETY: reads one bit of the local `rd`; fd < FD_SETSIZE.
                    if unsafe { libc::FD_ISSET(w.as_raw_fd(), &rd) } {
                        os::read1(w.as_raw_fd());
                    }
                }
            }
            Poller::Poll { pfds } => {
                // SAFETY: `pfds` is valid for reads and writes of its length for the call.
                let n = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, -1) };
                assert_eq!(n as usize, a, "poll");
                for p in pfds.iter() {
                    if p.revents != 0 {
                        os::read1(p.fd);
                    }
                }
            }
            Poller::Epoll { ep, buf } => {
                let mut got = 0;
                while got < a {
                    let n = os::epoll_wait(ep.as_raw_fd(), buf, 5000);
                    assert!(n > 0, "epoll_wait timed out");
                    for e in &buf[..n] {
                        os::read1(e.u64 as RawFd);
                    }
                    got += n;
                }
            }
            Poller::Uring(p) => {
                let mut got = 0;
                while got < a as u32 {
                    // A system call only when the CQ ring is empty.
                    p.u.wait().expect("io_uring_enter");
                    got +=
                        p.u.reap(libc::POLLIN as u32, |fd, _| os::read1(fd as RawFd))
                            .expect("io_uring re-arm");
                }
            }
            Poller::Floor => {
                for &i in active {
                    os::read1(s.watched[i].as_raw_fd());
                }
            }
            Poller::Get { q, buf } => {
                let n = q.get_events(a as u32, buf, &FOREVER).expect("get_events") as usize;
                assert_eq!(n, a, "get_events");
                for e in &buf[..n] {
                    os::read1(e.id.raw()[0] as RawFd);
                }
            }
            Poller::Ring { q } => {
                let mut got = 0;
                while got < a {
                    let n = q.wait(q.ring_len() - 1, &FOREVER).expect("kevent_wait");
                    assert!(n > 0, "kevent_wait returned nothing");
                    got += q
                        .consume(|e| os::read1(e.id.raw()[0] as RawFd))
                        .expect("kevent_commit") as usize;
                }
            }
            Poller::AsyncRing { q } => {
                let mut got = 0;
                loop {
                    // No system call while the ring has events.
                    got += q.consume_async(|e| os::read1(e.id.raw()[0] as RawFd)) as usize;
                    if got >= a {
                        break;
                    }
                    // Empty: returns at once if events arrived since the look.
                    q.wait_async(&FOREVER).expect("kevent_wait");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::poller::Transport;

    #[test]
    fn every_mechanism_completes_rounds_on_both_transports() {
        let backends = [Backend::fallback()];
        for t in [Transport::UnixDgram, Transport::SocketPair] {
            let s = Sockets::new(t, 64).unwrap();
            for m in [
                Mech::Select,
                Mech::Poll,
                Mech::Epoll,
                Mech::Uring,
                Mech::Floor,
                Mech::KeventGet(0),
                Mech::KeventRing(0, false),
                Mech::KeventRing(0, true),
                Mech::KeventRingProved(0),
                Mech::KeventAsync(0),
                Mech::CGet(0),
                Mech::CRing(0),
            ] {
                if matches!(m, Mech::CGet(_) | Mech::CRing(_))
                    && !Backend::current().is_ok_and(|b| b == Backend::fallback())
                {
                    continue;
                }
                if m == Mech::Uring && Uring::probe().is_err() {
                    continue;
                }
                let mut p = Poller::build(m, &s, &backends);
                for active in [vec![0], vec![1, 9, 30, 63]] {
                    for _ in 0..700 {
                        p.round(&s, &active);
                    }
                }
            }
        }
    }
}
