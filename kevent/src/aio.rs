//! Kernel AIO (**D18**): [`Queue::sendfile`] sends a file to a connected stream socket in
//! the background and returns an [`AioRequest`]; the end arrives on the queue as one
//! [`EventKind::Aio`](crate::EventKind::Aio) event.

use std::os::fd::{AsFd, AsRawFd};
use std::sync::Weak;

use kevent_sys::{Errno, KEVENT_AIO, KEVENT_CTL_REMOVE, KEVENT_RET_BROKEN};

use crate::error::{Error, Op, Result};
use crate::event::Key;
use crate::queue::{Inner, Queue};

/// A running `kevent_aio_sendfile` transfer: its id, and [`cancel`](AioRequest::cancel).
///
/// The request holds its own references to the socket and the file (the caller may close
/// both; the transfer goes on). Dropping the handle does **not** cancel the transfer: its
/// event still arrives, named by [`AioRequest::id`]. Closing the queue cancels every
/// request.
#[derive(Debug)]
#[must_use = "the transfer runs whether or not the handle is kept; keep it to cancel"]
pub struct AioRequest {
    queue: Weak<Inner>,
    id: u64,
}

impl AioRequest {
    /// The request id (`> 0`, unique in its queue while the request lives; never reused by
    /// the queue): the `id` of its [`EventKind::Aio`](crate::EventKind::Aio) event.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The key of the request's kevent, `(KEVENT_AIO, id)`: what its event's
    /// [`Event::key`](crate::Event::key) is.
    pub fn key(&self) -> Key {
        Key::from_raw(KEVENT_AIO, self.id)
    }

    /// `kevent_ctl(KEVENT_CTL_REMOVE)` of the request: cancels the transfer, after which no
    /// event for it is delivered. The bytes already sent stay sent.
    ///
    /// Returns `Ok(true)` when the request was cancelled, `Ok(false)` when there was nothing
    /// left to cancel: its event was already delivered (the transfer ended), or the queue is
    /// closed (which cancelled it).
    ///
    /// # Errors
    ///
    /// [`Op::Remove`] when the call itself fails.
    pub fn cancel(self) -> Result<bool> {
        let Some(q) = self.queue.upgrade() else {
            return Ok(false);
        };
        let mut entry = [self.key().to_ukevent()];
        // D14: the call returns 0; whether the request was found is in the entry.
        q.ctl(Op::Remove, KEVENT_CTL_REMOVE, &mut entry)?;
        Ok(entry[0].ret_flags & KEVENT_RET_BROKEN == 0)
    }
}

impl Queue {
    /// `kevent_aio_sendfile`—Starts sending `count` bytes of `file`, from `offset`, to the
    /// connected stream socket `sock`, and returns at once (**D18**).
    ///
    /// The transfer runs in the kernel (native backend) or in the fallback engine's worker
    /// thread, never in the calling thread. `file`'s own offset is neither used nor moved;
    /// `sock` may be blocking or not. When the transfer ends, one
    /// [`EventKind::Aio`](crate::EventKind::Aio) event for [`AioRequest::id`] is queued
    /// (ONESHOT): the bytes sent, and the error if it failed (a peer that closed gives
    /// `EPIPE` or `ECONNRESET`; `SIGPIPE` is never raised). A transfer that reaches the end
    /// of the file ends there, without an error; `count == 0` completes at once.
    ///
    /// ```
    /// use std::io::{Read, Write};
    /// use std::os::unix::net::UnixStream;
    /// use kevent::{EventKind, Events, Queue, Timeout};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # if !kevent::Backend::current()?.has_aio() { return Ok(()); }
    /// let queue = Queue::new()?;
    /// let mut file = tempfile()?;
    /// file.write_all(b"hello, kevent")?;
    /// let (sock, mut peer) = UnixStream::pair()?;
    /// let request = queue.sendfile(&sock, &file, 7, 6)?;
    /// let mut events = Events::with_capacity(8);
    /// queue.wait(&mut events, Timeout::FOREVER)?;
    /// let event = events.iter().next().unwrap();
    /// assert_eq!(
    ///     event.kind(),
    ///     EventKind::Aio { request: request.id(), bytes: 6, error: None }
    /// );
    /// let mut got = [0; 6];
    /// peer.read_exact(&mut got)?;
    /// assert_eq!(&got, b"kevent");
    /// # Ok(()) }
    /// # fn tempfile() -> std::io::Result<std::fs::File> {
    /// #     let dir = std::env::temp_dir().join(format!("kevent-doc-aio-{}", std::process::id()));
    /// #     std::fs::create_dir_all(&dir)?;
    /// #     let path = dir.join("f");
    /// #     let f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path)?;
    /// #     std::fs::remove_dir_all(&dir)?;
    /// #     Ok(f)
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Op::AioSendfile`] with: `EBADF` (`sock` or `file` not open, or a queue inherited
    /// across `fork`, D11); `EINVAL` (`file` not a regular file open for reading, `sock` not
    /// a stream socket, `offset + count` past `i64::MAX`, decision P36); `ENOTCONN` (a
    /// stream socket without a peer); `ENOSPC` natively beyond the per-user kevent limit
    /// or the queue's (`EAGAIN` on the fallback); `ENOMEM`; `ENOSYS` on a kevent kernel
    /// without the call (decision P37; [`Backend::has_aio`](crate::Backend::has_aio)).
    #[doc(alias = "kevent_aio_sendfile")]
    pub fn sendfile(
        &self,
        sock: &impl AsFd,
        file: &impl AsFd,
        offset: u64,
        count: u64,
    ) -> Result<AioRequest> {
        let id = self
            .backend()
            .aio_sendfile(
                self.as_raw_fd(),
                sock.as_fd().as_raw_fd(),
                file.as_fd().as_raw_fd(),
                offset,
                count,
            )
            .map_err(|e| Error::os(Op::AioSendfile, e))?;
        Ok(AioRequest {
            queue: self.downgrade(),
            id,
        })
    }
}

/// The completion of a request, decoded from a `KEVENT_AIO` event's `ret_data`: on success
/// a 64-bit count; BROKEN, the low 32 bits of the count and `-errno` (**D18**).
pub(crate) fn completion(broken: bool, ret_data: [u32; 2]) -> (u64, Option<Errno>) {
    let [r0, r1] = ret_data;
    if broken {
        let e = Errno::from_negated(r1).unwrap_or(Errno::EIO);
        (u64::from(r0), Some(e))
    } else {
        (u64::from(r0) | (u64::from(r1) << 32), None)
    }
}
