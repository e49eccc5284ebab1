//! How the poller's watched descriptors are made and made readable: the two transports
//! (see the parent module's docs).
//!
//! # Safety
//!
//! `socketpair`, `bind`, `connect` and `socket` are called with pointers to locals that live
//! across each call, with their true lengths.
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, OwnedFd};

use crate::os;

/// How the watched descriptors are made and made readable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// N `AF_UNIX` datagram sockets, each connected to itself (N fds).
    UnixDgram,
    /// N `AF_UNIX` stream socketpairs (2N fds), the historic shape.
    SocketPair,
}

impl Transport {
    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Transport::UnixDgram => "unix-dgram",
            Transport::SocketPair => "socketpair",
        }
    }

    /// Parses a `--transport` value.
    pub fn parse(s: &str) -> Option<Transport> {
        match s {
            "unix-dgram" => Some(Transport::UnixDgram),
            "socketpair" => Some(Transport::SocketPair),
            _ => None,
        }
    }

    pub(super) fn fds_per_watched(self) -> usize {
        match self {
            Transport::UnixDgram => 1,
            Transport::SocketPair => 2,
        }
    }
}

/// The N watched descriptors and the means to make any of them readable.
pub(super) struct Sockets {
    pub(super) watched: Vec<OwnedFd>,
    writer: Writer,
}

enum Writer {
    Pairs(Vec<OwnedFd>),
    /// Each watched socket is connected to itself: writing to it makes it readable.
    SelfConnected,
}

impl Sockets {
    pub(super) fn new(t: Transport, n: usize) -> std::io::Result<Sockets> {
        let mut watched = Vec::with_capacity(n);
        match t {
            Transport::SocketPair => {
                let mut writers = Vec::with_capacity(n);
                for _ in 0..n {
                    let (w, peer) = os::socketpair()?;
                    watched.push(w);
                    writers.push(peer);
                }
                Ok(Sockets {
                    watched,
                    writer: Writer::Pairs(writers),
                })
            }
            Transport::UnixDgram => {
                let tag = format!("kevent-bench.{}.{}", std::process::id(), os::now_ns());
                for i in 0..n {
                    let fd = dgram_socket()?;
                    // SAFETY: sockaddr_un is plain data; zeroes are a valid empty address.
                    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
                    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
                    let name = format!("{tag}.{i}");
                    // Abstract namespace: sun_path[0] = 0, then the name (no file is made).
                    for (dst, src) in a.sun_path[1..].iter_mut().zip(name.bytes()) {
                        *dst = src as libc::c_char;
                    }
                    let len = (size_of::<libc::sa_family_t>() + 1 + name.len()) as libc::socklen_t;
                    let addr = (&raw const a).cast::<libc::sockaddr>();
                    // SAFETY: `a` is a local sockaddr_un and `len` does not exceed its size;
                    // bind and connect only read it. Connecting the socket to its own name
                    // makes a later send() deliver to itself without a name lookup.
                    let r = unsafe {
                        match libc::bind(fd.as_raw_fd(), addr, len) {
                            0 => libc::connect(fd.as_raw_fd(), addr, len),
                            e => e,
                        }
                    };
                    if r != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    watched.push(fd);
                }
                Ok(Sockets {
                    watched,
                    writer: Writer::SelfConnected,
                })
            }
        }
    }

    /// Makes watched descriptor `i` readable (one byte).
    pub(super) fn activate(&self, i: usize) {
        match &self.writer {
            Writer::Pairs(w) => os::write1(w[i].as_raw_fd()),
            Writer::SelfConnected => os::write1(self.watched[i].as_raw_fd()),
        }
    }
}

fn dgram_socket() -> std::io::Result<OwnedFd> {
    // SAFETY: socket takes no pointer.
    os::owned(unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })
}
