//! AIO kevents (**D18**): `kevent_aio_sendfile` over a stock kernel, and the one
//! `KEVENT_AIO` event that reports each transfer's end.
//!
//! A request is a registered ONESHOT kevent `(KEVENT_AIO, id)` whose source is a [`Ticket`]
//! shared with the transfer. The transfer runs in one process-wide worker thread (decision
//! **P36**): it owns duplicates of the caller's two fds (so the caller's `close` ends nothing),
//! reads the file with `pread` into its buffer and writes it with
//! `send(MSG_DONTWAIT | MSG_NOSIGNAL)`: never blocking on the socket, whatever `O_NONBLOCK`
//! the caller's socket has, and never raising `SIGPIPE`. A full socket parks the request in
//! the worker's own epoll (`EPOLLOUT | EPOLLONESHOT`) until the peer reads. When a transfer
//! ends, the worker writes the outcome into the ticket and queues the kevent, found again by
//! its key: a request that REMOVE (or the queue's close) unregistered meanwhile is no longer
//! there, so no event follows it, and ids are never reused within a queue.
//!
//! Cancellation: unregistering the kevent (REMOVE, the queue's shutdown) marks the ticket
//! cancelled and rings the worker's doorbell; the worker drops the request and closes its
//! duplicates. A queue whose fd the caller closed is noticed by the worker within
//! [`SLICE_NS`] while it has requests in flight, and shut down.

use std::collections::{HashMap, VecDeque};
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Instant;

use kevent_sys::Errno;

use super::Source;
use crate::queue::{Queue, SLICE_NS};
use crate::rules::Report;
use crate::{fdtable, sys};

/// The bytes one `pread`/`send` round moves.
const CHUNK: usize = 64 * 1024;
/// The bytes one request may move before the worker turns to the next one (fairness among
/// transfers whose peers read fast).
const BUDGET: usize = 4 * CHUNK;
/// The worker's epoll token of its doorbell; requests use keys from 1.
const DOORBELL: u64 = 0;
/// How long an idle worker sleeps between looks at its doorbell-less epoll (it is woken by
/// the doorbell anyway).
const IDLE_NS: u64 = 3_600_000_000_000;

/// What a request and its kevent share: the cancellation mark and, once the transfer ended,
/// its outcome.
#[derive(Debug, Default)]
pub(crate) struct Ticket {
    cancelled: AtomicBool,
    done: AtomicBool,
    sent: AtomicU64,
    /// The error that ended the transfer (0: none).
    errno: AtomicI32,
}

impl Ticket {
    /// Records the outcome. The kevent is queued afterwards, under the queue lock, which
    /// publishes these stores to the delivering thread.
    fn finish(&self, sent: u64, err: Option<Errno>) {
        self.sent.store(sent, Ordering::Relaxed);
        self.errno
            .store(err.map_or(0, Errno::raw), Ordering::Relaxed);
        self.done.store(true, Ordering::Release);
    }

    fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }
}

/// An AIO kevent's source: the request's ticket.
#[derive(Debug)]
pub(crate) struct Aio(Arc<Ticket>);

impl Aio {
    /// What the delivery says: the bytes sent as a 64-bit count (low word first), or BROKEN
    /// with the low 32 bits of the bytes sent before the error. `None` while the transfer
    /// runs (a READY mark on a running request delivers nothing).
    pub(super) fn report(&self) -> Option<Report> {
        let t = &self.0;
        if !t.done.load(Ordering::Acquire) {
            return None;
        }
        let sent = t.sent.load(Ordering::Relaxed);
        Some(match Errno::from_raw(t.errno.load(Ordering::Relaxed)) {
            None => Report::Ready([sent as u32, (sent >> 32) as u32]),
            Some(e) => Report::BrokenAfter(sent as u32, e),
        })
    }

    /// The kevent left the registry (REMOVE, its delivery, the queue's shutdown): the
    /// transfer, if it still runs, stops and releases its fds.
    pub(super) fn disarm(&self) {
        if !self.0.done.load(Ordering::Acquire) {
            self.0.cancelled.store(true, Ordering::Release);
            poke();
        }
    }
}

/// The queue-wide AIO state: the next request id.
#[derive(Debug)]
pub(crate) struct Requests {
    next: u64,
}

impl Requests {
    pub(super) fn new() -> Requests {
        Requests { next: 1 }
    }

    /// A fresh id: `> 0`, never reused in this queue (a 64-bit counter), never an address.
    pub(crate) fn next_id(&mut self) -> u64 {
        let id = self.next;
        self.next += 1;
        id
    }
}

/// The source of a new AIO kevent.
pub(crate) fn source(ticket: Arc<Ticket>) -> Source {
    Source::Aio(Aio(ticket))
}

/// `kevent_aio_sendfile(fd, sock_fd, in_fd, offset, count)`—Starts sending `count` bytes of
/// `in_fd` from `offset` to the connected stream socket `sock_fd`; returns the request id.
/// One `KEVENT_AIO` event reports the end (**D18**).
///
/// # Errors
///
/// `EBADF` (queue fd closed or negative; `in_fd` or `sock_fd` closed), `EINVAL` (`fd` not a
/// queue; `in_fd` not a regular file open for reading; `sock_fd` not a stream socket;
/// `offset + count` beyond the largest file offset, decision P36), `ENOTCONN` (a stream
/// socket without a peer), `EMFILE`/`ENFILE` (no fd for the request's duplicates), `EAGAIN`
/// (no worker thread).
pub fn kevent_aio_sendfile(
    fd: RawFd,
    sock_fd: RawFd,
    in_fd: RawFd,
    offset: u64,
    count: u64,
) -> Result<u64, Errno> {
    crate::with_queue(fd, |q| {
        q.verify()?;
        check_files(sock_fd, in_fd)?;
        let max = i64::MAX as u64;
        if offset.checked_add(count).is_none_or(|end| end > max) {
            return Err(Errno::EINVAL);
        }
        let ticket = Arc::new(Ticket::default());
        if count == 0 {
            ticket.finish(0, None);
            return q.aio_register(ticket, true);
        }
        let sock = sys::aio::dup_cloexec(sock_fd)?;
        let file = sys::aio::dup_cloexec(in_fd)?;
        let inbox = inbox()?;
        let id = q.aio_register(Arc::clone(&ticket), false)?;
        inbox.submit(Request {
            queue: Arc::downgrade(q),
            id,
            ticket,
            sock,
            file,
            offset,
            left: count,
            sent: 0,
            in_epoll: false,
        });
        Ok(id)
    })
}

/// The argument checks of D18 on the two fds, in its order: closed → `EBADF`; then the kinds.
fn check_files(sock_fd: RawFd, in_fd: RawFd) -> Result<(), Errno> {
    let file = sys::file_id(in_fd)?;
    let sock = sys::file_id(sock_fd)?;
    let flags = sys::status_flags(in_fd)?;
    if file.kind != libc::S_IFREG
        || flags & libc::O_PATH != 0
        || flags & libc::O_ACCMODE == libc::O_WRONLY
    {
        return Err(Errno::EINVAL);
    }
    if !sock.is_socket() || sys::aio::socket_type(sock_fd)? != libc::SOCK_STREAM {
        return Err(Errno::EINVAL);
    }
    sys::aio::peer_connected(sock_fd)
}

/// One transfer, owned by the worker.
#[derive(Debug)]
struct Request {
    queue: Weak<Queue>,
    id: u64,
    ticket: Arc<Ticket>,
    sock: OwnedFd,
    file: OwnedFd,
    /// The file offset of the next byte to send.
    offset: u64,
    /// Bytes still to send.
    left: u64,
    sent: u64,
    /// `sock` is registered in the worker's epoll.
    in_epoll: bool,
}

/// Where new requests wait for the worker, and its doorbell.
#[derive(Debug)]
struct Inbox {
    pending: Mutex<Vec<Request>>,
    doorbell: OwnedFd,
}

impl Inbox {
    fn pending(&self) -> MutexGuard<'_, Vec<Request>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn submit(&self, r: Request) {
        self.pending().push(r);
        sys::eventfd_signal(self.doorbell.as_raw_fd());
    }
}

/// The process's worker: its inbox and the fork epoch it was started in (a fork child has no
/// worker thread and starts its own).
static WORKER: Mutex<Option<(u64, Arc<Inbox>)>> = Mutex::new(None);

fn worker() -> MutexGuard<'static, Option<(u64, Arc<Inbox>)>> {
    WORKER.lock().unwrap_or_else(|p| p.into_inner())
}

/// The worker's inbox, starting the worker on first use (and in a fork child).
fn inbox() -> Result<Arc<Inbox>, Errno> {
    let mut w = worker();
    let epoch = fdtable::epoch();
    if let Some((e, inbox)) = &*w {
        if *e == epoch {
            return Ok(Arc::clone(inbox));
        }
    }
    let ep = sys::epoll_create()?;
    let doorbell = sys::eventfd()?;
    sys::epoll_ctl(
        ep.as_raw_fd(),
        libc::EPOLL_CTL_ADD,
        doorbell.as_raw_fd(),
        libc::EPOLLIN as u32,
        DOORBELL,
    )?;
    let inbox = Arc::new(Inbox {
        pending: Mutex::new(Vec::new()),
        doorbell,
    });
    let theirs = Arc::clone(&inbox);
    std::thread::Builder::new()
        .name("kevent-aio".into())
        .spawn(move || run(&ep, &theirs))
        .map_err(|_| Errno::EAGAIN)?;
    *w = Some((epoch, Arc::clone(&inbox)));
    Ok(inbox)
}

/// Rings the worker's doorbell (a cancellation to look at).
fn poke() {
    if let Some((e, inbox)) = &*worker() {
        if *e == fdtable::epoch() {
            sys::eventfd_signal(inbox.doorbell.as_raw_fd());
        }
    }
}

/// What one turn of a transfer came to.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    /// The socket is full: wait for `EPOLLOUT`.
    Blocked,
    /// Used its budget; more to send.
    Yield,
    /// Finished: complete, end of file, or the error.
    Done(Option<Errno>),
    /// Cancelled meanwhile (REMOVE, the queue's shutdown): stop at once.
    Cancelled,
}

/// Moves up to [`BUDGET`] bytes of `r`.
fn pump(r: &mut Request, buf: &mut [u8]) -> Step {
    let mut budget = BUDGET;
    loop {
        // Looked at before every chunk: after a REMOVE returns, at most the chunk being
        // sent still goes out.
        if r.ticket.is_cancelled() {
            return Step::Cancelled;
        }
        if r.left == 0 {
            return Step::Done(None);
        }
        let want = usize::try_from(r.left).map_or(buf.len(), |l| l.min(buf.len()));
        let n = match sys::aio::pread(&r.file, &mut buf[..want], r.offset) {
            Ok(0) => return Step::Done(None),
            Ok(n) => n,
            Err(Errno::EINTR) => continue,
            Err(e) => return Step::Done(Some(e)),
        };
        let mut at = 0;
        while at < n {
            match sys::aio::send_nowait(&r.sock, &buf[at..n]) {
                Ok(0) | Err(Errno::EAGAIN) => return Step::Blocked,
                Ok(s) => {
                    at += s;
                    r.offset += s as u64;
                    r.left -= s as u64;
                    r.sent += s as u64;
                }
                Err(Errno::EINTR) => {}
                Err(e) => return Step::Done(Some(e)),
            }
        }
        budget = budget.saturating_sub(n);
        if budget == 0 {
            return Step::Yield;
        }
    }
}

/// The worker thread: its epoll holds the doorbell and the sockets of parked requests.
fn run(ep: &OwnedFd, inbox: &Inbox) {
    sys::aio::block_all_signals();
    let ep = ep.as_raw_fd();
    let mut reqs: HashMap<u64, Request> = HashMap::new();
    let mut runnable: VecDeque<u64> = VecDeque::new();
    let mut buf = vec![0u8; CHUNK];
    let mut events = vec![MaybeUninit::<libc::epoll_event>::uninit(); 256];
    let mut next_key: u64 = DOORBELL + 1;
    let mut last_check = Instant::now();
    loop {
        let timeout = if !runnable.is_empty() {
            0
        } else if reqs.is_empty() {
            IDLE_NS
        } else {
            SLICE_NS
        };
        let mut rang = false;
        if let Ok(got) = sys::epoll_wait(ep, &mut events, timeout, None) {
            for ev in got {
                let key = ev.u64;
                if key == DOORBELL {
                    rang = true;
                } else if reqs.contains_key(&key) {
                    runnable.push_back(key);
                }
            }
        }
        if rang {
            sys::eventfd_drain(inbox.doorbell.as_raw_fd());
            for r in inbox.pending().drain(..) {
                reqs.insert(next_key, r);
                runnable.push_back(next_key);
                next_key += 1;
            }
            drop_cancelled(ep, &mut reqs);
        }
        for key in std::mem::take(&mut runnable) {
            let Some(r) = reqs.get_mut(&key) else {
                continue;
            };
            let step = match pump(r, &mut buf) {
                Step::Blocked => park(ep, r, key),
                other => other,
            };
            match step {
                Step::Blocked => {}
                Step::Yield => runnable.push_back(key),
                Step::Cancelled => {
                    if let Some(r) = reqs.remove(&key) {
                        retire(ep, r);
                    }
                }
                Step::Done(err) => {
                    if let Some(r) = reqs.remove(&key) {
                        complete(ep, r, err);
                    }
                }
            }
        }
        if !reqs.is_empty() && last_check.elapsed().as_nanos() >= u128::from(SLICE_NS) {
            last_check = Instant::now();
            check_queues(ep, &mut reqs);
        }
    }
}

/// Waits for room in `r`'s socket (one `EPOLLOUT`; errors and hang-ups are reported too).
fn park(ep: RawFd, r: &mut Request, key: u64) -> Step {
    let events = (libc::EPOLLOUT | libc::EPOLLONESHOT) as u32;
    let op = if r.in_epoll {
        libc::EPOLL_CTL_MOD
    } else {
        libc::EPOLL_CTL_ADD
    };
    match sys::epoll_ctl(ep, op, r.sock.as_raw_fd(), events, key) {
        Ok(()) => {
            r.in_epoll = true;
            Step::Blocked
        }
        Err(e) => Step::Done(Some(e)),
    }
}

/// Releases a request's fds (its socket leaves the worker's epoll first: the caller's own fd
/// keeps the file, and with it an epoll item, alive).
fn retire(ep: RawFd, r: Request) {
    if r.in_epoll {
        let _ = sys::epoll_ctl(ep, libc::EPOLL_CTL_DEL, r.sock.as_raw_fd(), 0, 0);
    }
    drop(r);
}

/// Ends a transfer: records the outcome, closes the fds, queues the kevent (if it is still
/// registered: a REMOVE meanwhile means no event).
fn complete(ep: RawFd, r: Request, err: Option<Errno>) {
    r.ticket.finish(r.sent, err);
    let (queue, id) = (r.queue.clone(), r.id);
    retire(ep, r);
    if let Some(q) = queue.upgrade() {
        q.aio_complete(id);
    }
}

fn drop_cancelled(ep: RawFd, reqs: &mut HashMap<u64, Request>) {
    let gone: Vec<u64> = reqs
        .iter()
        .filter(|(_, r)| r.ticket.is_cancelled() || r.queue.strong_count() == 0)
        .map(|(k, _)| *k)
        .collect();
    for key in gone {
        if let Some(r) = reqs.remove(&key) {
            retire(ep, r);
        }
    }
}

/// Shuts down the queues of in-flight requests whose fd the caller closed (their shutdown
/// cancels the requests), then drops every cancelled request.
fn check_queues(ep: RawFd, reqs: &mut HashMap<u64, Request>) {
    let mut seen: Vec<*const Queue> = Vec::new();
    let mut queues: Vec<Arc<Queue>> = Vec::new();
    for r in reqs.values() {
        let p = r.queue.as_ptr();
        if seen.contains(&p) {
            continue;
        }
        seen.push(p);
        if let Some(q) = r.queue.upgrade() {
            queues.push(q);
        }
    }
    for q in queues {
        if q.verify().is_err() {
            fdtable::forget(q.fd(), &q);
            q.shut_down();
        }
    }
    drop_cancelled(ep, reqs);
}
