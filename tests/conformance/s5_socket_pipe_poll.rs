//! Spec section 5, the fd-state types: SOCKET (RECV on data and EOF, ACCEPT, SEND; error
//! or hang-up → BROKEN), PIPE (RECV, SEND; peer closed → BROKEN; FIFOs only), POLL (any
//! pollable fd; `ret_data[0]` = revents & event).
#![allow(unsafe_code)]

use std::io::Write as _;
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

use kevent_test_support::*;

fn sock(fd: &impl AsRawFd, event: u32, req: u32) -> ukevent {
    on_fd(KEVENT_SOCKET, fd.as_raw_fd(), event, req)
}

fn pipe_ev(fd: &OwnedFd, event: u32, req: u32) -> ukevent {
    on_fd(KEVENT_PIPE, fd.as_raw_fd(), event, req)
}

/// A loopback TCP listener (non-blocking), or `None` when the machine has no loopback.
fn listener() -> Option<TcpListener> {
    let l = TcpListener::bind("127.0.0.1:0").ok()?;
    l.set_nonblocking(true).ok()?;
    Some(l)
}

/// Fills a non-blocking socket's or pipe's send buffer.
fn fill(fd: &impl AsRawFd) {
    let chunk = [0u8; 65536];
    while write_fd(fd.as_raw_fd(), &chunk) > 0 {}
    while write_fd(fd.as_raw_fd(), &chunk[..1]) > 0 {}
}

/// Adds `e` (expected not ready) and waits for it to be delivered once `make_ready` ran.
#[track_caller]
fn ready_after(q: &Queue, e: ukevent, make_ready: impl FnOnce(), want: Want) -> ukevent {
    q.add_ok(&[e]);
    q.expect_no_events();
    make_ready();
    q.expect_within(Duration::from_secs(5), &[want])[0]
}

backend_test! {
    /// SOCKET RECV: ready when data is buffered.
    fn s5_socket_recv_ready_on_data(b) {
        let q = Queue::new(b);
        let (a, peer) = socketpair();
        let e = sock(&a, KEVENT_SOCKET_RECV, 0);
        ready_after(&q, e, || assert_eq!(write_fd(peer.as_raw_fd(), b"hi"), 2), Want::of(&e));
    }

    /// SOCKET RECV: ready at EOF (the peer shut its side down).
    fn s5_socket_recv_ready_on_eof(b) {
        let q = Queue::new(b);
        let (a, peer) = socketpair();
        let e = sock(&a, KEVENT_SOCKET_RECV, 0);
        ready_after(
            &q,
            e,
            // SAFETY: shutdown takes no pointer.
            || assert_eq!(unsafe { libc::shutdown(peer.as_raw_fd(), libc::SHUT_WR) }, 0),
            Want::of(&e),
        );
    }

    /// SOCKET ACCEPT: ready when a connection is pending on a listening socket.
    fn s5_socket_accept_ready_on_pending_connection(b) {
        let l = listener();
        require!(l.is_some(), "no TCP loopback (127.0.0.1) on this machine");
        let l = l.unwrap();
        let q = Queue::new(b);
        let e = sock(&l, KEVENT_SOCKET_ACCEPT, 0);
        let addr = l.local_addr().unwrap();
        let mut conns = Vec::new();
        ready_after(&q, e, || conns.push(TcpStream::connect(addr).expect("connect")), Want::of(&e));
        // Level: still pending until accepted.
        q.expect(&ZERO, &[Want::of(&e)]);
        let _accepted = l.accept().expect("accept");
        q.expect_no_events();
    }

    /// SOCKET SEND: ready when writable; a full send buffer is not ready until the peer
    /// reads. A writable socket is ready at ADD (returned at once).
    fn s5_socket_send_ready_when_writable(b) {
        let q = Queue::new(b);
        let (a, peer) = socketpair();
        let e = sock(&a, KEVENT_SOCKET_SEND, 0);
        let back = q.add(&[e]);
        expect_events(&back, &[Want::of(&e).flags(KEVENT_RET_DONE)]);
        fill(&a);
        ready_after(&q, e, || { drain(peer.as_raw_fd()); }, Want::of(&e));
    }

    /// SOCKET: an error (the connection reset by the peer) is BROKEN with `-errno`.
    fn s5_socket_error_is_broken(b) {
        let l = listener();
        require!(l.is_some(), "no TCP loopback (127.0.0.1) on this machine");
        let l = l.unwrap();
        let q = Queue::new(b);
        let c = TcpStream::connect(l.local_addr().unwrap()).expect("connect");
        c.set_nonblocking(true).unwrap();
        let (s, _) = loop {
            match l.accept() {
                Ok(x) => break x,
                Err(_) => std::thread::sleep(Duration::from_millis(1)),
            }
        };
        let e = sock(&c, KEVENT_SOCKET_RECV, 0);
        let reset = Errno::from_raw(libc::ECONNRESET).unwrap();
        ready_after(
            &q,
            e,
            || {
                // SO_LINGER {on, 0}: close sends RST.
                let lg = libc::linger { l_onoff: 1, l_linger: 0 };
                // SAFETY: `lg` is a valid linger struct of the size passed.
                let r = unsafe {
                    libc::setsockopt(
                        s.as_raw_fd(),
                        libc::SOL_SOCKET,
                        libc::SO_LINGER,
                        (&raw const lg).cast(),
                        size_of::<libc::linger>() as u32,
                    )
                };
                assert_eq!(r, 0);
                drop(s);
            },
            Want::of(&e).broken(reset),
        );
        // BROKEN unregisters it.
        q.expect_no_events();
        let r = q.ctl_in_place(KEVENT_CTL_REMOVE, &[e]);
        assert!(Want::of(&e).broken(Errno::ENOENT).matches(&r[0]));
    }

    /// SOCKET: a hang-up (the peer closed the connection) is BROKEN for a kevent that can no
    /// longer do what it waits for: a SEND-only kevent on a socket whose peer is gone.
    fn s5_socket_hangup_is_broken(b) {
        let q = Queue::new(b);
        let (a, peer) = socketpair();
        fill(&a);
        let e = sock(&a, KEVENT_SOCKET_SEND, 0);
        ready_after(&q, e, || drop(peer), Want::of(&e).with(KEVENT_RET_BROKEN));
    }

    /// SOCKET on something that is not a socket: `-EINVAL`.
    fn s5_socket_needs_a_socket(b) {
        let q = Queue::new(b);
        let (r, _w) = pipe();
        let e = on_fd(KEVENT_SOCKET, r.as_raw_fd(), KEVENT_SOCKET_RECV, 0);
        expect_events(&q.add(&[e]), &[Want::of(&e).broken(Errno::EINVAL)]);
    }

    /// PIPE RECV: ready when data is buffered; SEND: ready when there is space.
    fn s5_pipe_recv_on_data_and_send_on_space(b) {
        let q = Queue::new(b);
        let (r, w) = pipe();
        let er = pipe_ev(&r, KEVENT_SOCKET_RECV, 0);
        ready_after(&q, er, || assert_eq!(write_fd(w.as_raw_fd(), b"x"), 1), Want::of(&er));
        drain(r.as_raw_fd());
        q.expect_no_events();
        q.remove_ok(&[er]);
        let ew = pipe_ev(&w, KEVENT_SOCKET_SEND, 0);
        expect_events(&q.add(&[ew]), &[Want::of(&ew).flags(KEVENT_RET_DONE)]);
        fill(&w);
        ready_after(&q, ew, || { drain(r.as_raw_fd()); }, Want::of(&ew));
    }

    /// PIPE: the writer closing (nothing left to read) is BROKEN for the read end.
    fn s5_pipe_read_end_broken_when_the_writer_closes(b) {
        let q = Queue::new(b);
        let (r, w) = pipe();
        let e = pipe_ev(&r, KEVENT_SOCKET_RECV, 0);
        ready_after(&q, e, || drop(w), Want::of(&e).with(KEVENT_RET_BROKEN));
        q.expect_no_events();
    }

    /// PIPE: the reader closing is BROKEN for the write end.
    fn s5_pipe_write_end_broken_when_the_reader_closes(b) {
        let q = Queue::new(b);
        let (r, w) = pipe();
        fill(&w);
        let e = pipe_ev(&w, KEVENT_SOCKET_SEND, 0);
        ready_after(&q, e, || drop(r), Want::of(&e).with(KEVENT_RET_BROKEN));
        q.expect_no_events();
    }

    /// PIPE accepts named FIFOs and refuses sockets and regular files (`-EINVAL`).
    fn s5_pipe_needs_a_fifo(b) {
        let q = Queue::new(b);
        let (s, _s2) = socketpair();
        let e = on_fd(KEVENT_PIPE, s.as_raw_fd(), KEVENT_SOCKET_RECV, 0);
        expect_events(&q.add(&[e]), &[Want::of(&e).broken(Errno::EINVAL)]);
        let dir = temp_dir("fifo");
        let path = dir.join("fifo");
        let cpath = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `cpath` is a valid NUL-terminated path.
        let made = unsafe { libc::mkfifo(cpath.as_ptr(), 0o600) } == 0;
        require!(made, "cannot make a FIFO in {}", dir.display());
        // SAFETY: as above; O_RDWR on a FIFO never blocks on Linux.
        let fd = owned(unsafe { libc::open(cpath.as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC) }, "open fifo");
        let e = pipe_ev(&fd, KEVENT_SOCKET_RECV, 0);
        ready_after(&q, e, || assert_eq!(write_fd(fd.as_raw_fd(), b"x"), 1), Want::of(&e));
        let mut f = std::fs::File::create(dir.join("plain")).unwrap();
        f.write_all(b"x").unwrap();
        let e = on_fd(KEVENT_PIPE, f.as_raw_fd(), KEVENT_SOCKET_RECV, 0);
        expect_events(&q.add(&[e]), &[Want::of(&e).broken(Errno::EINVAL)]);
        let _ = std::fs::remove_dir_all(dir);
    }

    /// POLL: ready when the fd's poll reports a bit of the mask; `ret_data[0]` is exactly
    /// `revents & event`, as poll(2) reports it.
    fn s5_poll_ret_data_is_revents_and_event(b) {
        let q = Queue::new(b);
        let (a, peer) = socketpair();
        let mask = KEVENT_POLL_POLLIN | KEVENT_POLL_POLLOUT | KEVENT_POLL_POLLPRI;
        let e = on_fd(KEVENT_POLL, a.as_raw_fd(), KEVENT_POLL_POLLIN | KEVENT_POLL_POLLPRI, 0);
        ready_after(&q, e, || assert_eq!(write_fd(peer.as_raw_fd(), b"x"), 1), Want::of(&e).data0(KEVENT_POLL_POLLIN));
        q.remove_ok(&[e]);
        let e = on_fd(KEVENT_POLL, a.as_raw_fd(), mask, KEVENT_REQ_ALWAYS_QUEUE);
        q.add_ok(&[e]);
        let revents = poll_now(a.as_raw_fd(), libc::POLLIN | libc::POLLOUT | libc::POLLPRI) as u16 as u32;
        q.expect(&ZERO, &[Want::of(&e).data0(revents & mask)]);
        assert_eq!(revents & mask, KEVENT_POLL_POLLIN | KEVENT_POLL_POLLOUT);
    }

    /// POLL: an fd that reports no bit of the mask is not ready (an eventfd without a
    /// count, asked for POLLIN), and becomes ready when it does.
    fn s5_poll_ready_only_for_bits_of_the_mask(b) {
        let q = Queue::new(b);
        let efd = eventfd(0);
        let e = on_fd(KEVENT_POLL, efd.as_raw_fd(), KEVENT_POLL_POLLIN | KEVENT_POLL_POLLPRI, 0);
        ready_after(
            &q,
            e,
            || assert_eq!(write_fd(efd.as_raw_fd(), &3u64.to_ne_bytes()), 8),
            Want::of(&e).data0(KEVENT_POLL_POLLIN),
        );
    }

    /// POLL needs an fd with poll support: regular files and directories give `-EINVAL`.
    fn s5_poll_needs_poll_support(b) {
        let q = Queue::new(b);
        let dir = temp_dir("pollreg");
        let f = std::fs::File::create(dir.join("f")).unwrap();
        let d = std::fs::File::open(&dir).unwrap();
        for fd in [f.as_raw_fd(), d.as_raw_fd()] {
            let e = on_fd(KEVENT_POLL, fd, KEVENT_POLL_POLLIN, 0);
            expect_events(&q.add(&[e]), &[Want::of(&e).broken(Errno::EINVAL)]);
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    /// Decision P28: an fd kevent's id is its fd: `id.raw[1]` must be 0, or the entry is
    /// `-EINVAL` (SOCKET, PIPE and POLL alike), also while the fd is watched under its
    /// proper id (not `-EEXIST`: the id itself is wrong), which stays registered.
    fn p28_fd_kevent_raw1_einval(b) {
        let q = Queue::new(b);
        let (s, _peer) = socketpair();
        let (r, _w) = pipe();
        let ev = eventfd(0);
        let fds = [
            (KEVENT_SOCKET, s.as_raw_fd(), KEVENT_SOCKET_RECV),
            (KEVENT_PIPE, r.as_raw_fd(), KEVENT_SOCKET_RECV),
            (KEVENT_POLL, ev.as_raw_fd(), KEVENT_POLL_POLLIN),
        ];
        for (type_, fd, event) in fds {
            let good = on_fd(type_, fd, event, 0);
            assert_raw1_refused(&q, good, fd);
            q.add_ok(&[good]);
            assert_raw1_refused(&q, good, fd);
            q.remove_ok(&[good]);
        }
        assert_usable(&q);
    }
}
