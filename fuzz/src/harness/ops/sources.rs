//! The event sources around the queues: opening, closing and poking fds of every kind
//! (sockets, pipes, eventfds, epoll, directories, files), raising signals, and creating and
//! removing files in the watched directory.

use std::os::fd::RawFd;

use crate::harness::MAX_FDS;
use crate::harness::os::{close_fd, loopback};
use crate::harness::state::{HFd, Harness, Kind};
use crate::input::Src;

impl Harness {
    pub(in crate::harness) fn add_fd(&mut self, fd: RawFd, kind: Kind) {
        if fd < 0 {
            return;
        }
        self.closed.retain(|&c| c != fd);
        self.fds.push(HFd { fd, kind });
    }

    pub(in crate::harness) fn op_open_fd(&mut self, s: &mut Src<'_>) {
        if self.fds.len() >= MAX_FDS {
            return;
        }
        let c = s.below(10);
        let fl = libc::O_NONBLOCK | libc::O_CLOEXEC;
        match c {
            0 => {
                let mut sv = [-1; 2];
                // SAFETY: socketpair writes two fds into the local array.
                if unsafe {
                    libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | fl, 0, sv.as_mut_ptr())
                } == 0
                {
                    self.add_fd(sv[0], Kind::Unix);
                    self.add_fd(sv[1], Kind::Unix);
                }
            }
            1 => {
                let mut p = [-1; 2];
                // SAFETY: pipe2 writes two fds into the local array.
                if unsafe { libc::pipe2(p.as_mut_ptr(), fl) } == 0 {
                    self.add_fd(p[0], Kind::PipeR);
                    self.add_fd(p[1], Kind::PipeW);
                }
            }
            2 => {
                // SAFETY: eventfd has no memory arguments.
                let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
                self.add_fd(fd, Kind::Event);
            }
            3 => {
                // SAFETY: the name is a NUL-terminated literal.
                let fd = unsafe { libc::memfd_create(c"kevent-fuzz".as_ptr(), libc::MFD_CLOEXEC) };
                self.add_fd(fd, Kind::Memfd);
            }
            4 => {
                let path = std::ffi::CString::new(self.dir.as_os_str().as_encoded_bytes())
                    .unwrap_or_default();
                // SAFETY: `path` is a NUL-terminated string that outlives the call.
                let fd = unsafe {
                    libc::open(
                        path.as_ptr(),
                        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
                    )
                };
                self.add_fd(fd, Kind::Dir);
            }
            5 => {
                // A plain epoll instance: a queue fd number may be reused by one.
                // SAFETY: no memory arguments.
                let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
                self.add_fd(fd, Kind::Epoll);
            }
            6 => {
                // SAFETY: socket has no memory arguments.
                let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | fl, 0) };
                if fd >= 0 {
                    let mut a = loopback(0);
                    let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
                    // SAFETY: `a` and `len` are locals of the sizes passed.
                    let ok = unsafe {
                        libc::bind(fd, (&raw const a).cast(), len) == 0
                            && libc::listen(fd, 8) == 0
                            && libc::getsockname(fd, (&raw mut a).cast(), &mut len) == 0
                    };
                    if ok {
                        self.listener_port = Some(u16::from_be(a.sin_port));
                    }
                    self.add_fd(fd, Kind::Listener);
                }
            }
            7 => {
                // SAFETY: socket has no memory arguments.
                let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | fl, 0) };
                if fd >= 0 {
                    if let Some(port) = self.listener_port {
                        let a = loopback(port);
                        // SAFETY: `a` is a local sockaddr_in of the size passed.
                        unsafe {
                            libc::connect(
                                fd,
                                (&raw const a).cast(),
                                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
                            )
                        };
                    }
                    self.add_fd(fd, Kind::Tcp);
                }
            }
            8 => {
                // SAFETY: socket has no memory arguments.
                let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | fl, 0) };
                self.add_fd(fd, Kind::Udp);
            }
            _ => {
                // A regular file that is not a memfd: wrong kind for every fd type.
                let fd = {
                    let path =
                        std::ffi::CString::new(self.dir.join("f0").as_os_str().as_encoded_bytes())
                            .unwrap_or_default();
                    // SAFETY: `path` is NUL-terminated and outlives the call.
                    unsafe {
                        libc::open(
                            path.as_ptr(),
                            libc::O_RDWR | libc::O_CREAT | libc::O_CLOEXEC,
                            0o600,
                        )
                    }
                };
                self.add_fd(fd, Kind::Memfd);
            }
        }
        self.trace(format_args!(
            "open -> {:?}",
            self.fds.iter().map(|f| (f.fd, f.kind)).collect::<Vec<_>>()
        ));
    }

    pub(in crate::harness) fn op_close_fd(&mut self, s: &mut Src<'_>) {
        if self.fds.is_empty() {
            return;
        }
        let i = s.below(self.fds.len() as u32) as usize;
        let f = self.fds.remove(i);
        self.trace(format_args!("close(fd {} {:?})", f.fd, f.kind));
        close_fd(f.fd);
        self.closed.push(f.fd);
    }

    pub(in crate::harness) fn op_poke_fd(&mut self, s: &mut Src<'_>) {
        if self.fds.is_empty() {
            return;
        }
        let i = s.below(self.fds.len() as u32) as usize;
        let (fd, kind) = (self.fds[i].fd, self.fds[i].kind);
        let big = s.chance(32);
        let mut buf = vec![
            0x42u8;
            if big {
                256 * 1024
            } else {
                1 + s.below(64) as usize
            }
        ];
        let read = s.chance(100);
        self.trace(format_args!(
            "poke(fd {fd} {kind:?}, read {read}, big {big})"
        ));
        match kind {
            Kind::Listener => {
                // SAFETY: NULL address arguments are allowed.
                let c = unsafe {
                    libc::accept4(
                        fd,
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                        libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                    )
                };
                if c >= 0 {
                    if self.fds.len() < MAX_FDS {
                        self.add_fd(c, Kind::Tcp);
                    } else {
                        close_fd(c);
                    }
                }
            }
            Kind::Event => {
                let v = 1u64;
                // SAFETY: 8-byte buffers of the harness's own, as eventfd requires.
                unsafe {
                    if read {
                        let mut v = 0u64;
                        libc::read(fd, (&raw mut v).cast(), 8);
                    } else {
                        libc::write(fd, (&raw const v).cast(), 8);
                    }
                }
            }
            Kind::Unix | Kind::Tcp | Kind::PipeR | Kind::PipeW | Kind::Udp | Kind::Memfd => {
                // SAFETY: `buf` is the harness's own, valid for its length.
                unsafe {
                    if read {
                        libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
                    } else if s.chance(20) && matches!(kind, Kind::Unix | Kind::Tcp) {
                        libc::shutdown(
                            fd,
                            s.pick(&[libc::SHUT_RD, libc::SHUT_WR, libc::SHUT_RDWR]),
                        );
                    } else if matches!(kind, Kind::Unix | Kind::Tcp | Kind::Udp) {
                        libc::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL);
                    } else {
                        libc::write(fd, buf.as_ptr().cast(), buf.len());
                    }
                }
            }
            Kind::Dir | Kind::Epoll => {}
        }
    }

    pub(in crate::harness) fn op_signal(&mut self, s: &mut Src<'_>) {
        let sig = s.pick(&[libc::SIGUSR1, libc::SIGUSR2]);
        self.trace(format_args!("raise({sig})"));
        // SAFETY: SIGUSR1/SIGUSR2 have the harness's no-op handler (or the library's, which
        // chains to it, or reports only with NOMASK).
        unsafe { libc::raise(sig) };
    }

    pub(in crate::harness) fn op_inode(&mut self, s: &mut Src<'_>) {
        let name = format!("f{}", s.below(4));
        let path = self.dir.join(&name);
        let create = s.chance(128);
        self.trace(format_args!("inode({name}, create {create})"));
        if create {
            let _ = std::fs::write(&path, b"x");
        } else {
            let _ = std::fs::remove_file(&path);
        }
    }
}
