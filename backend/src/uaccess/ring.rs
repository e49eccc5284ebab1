//! The ring of `kevent_init`, checked whole once; the engine writes it directly after that.

use kevent_sys::{Errno, kevent_ring};

use super::{CHUNK, Dir, copy, fallback_in_use};

/// Checks that the `len` bytes of a ring are mapped, readable and writable, by reading them
/// and writing the same bytes back (the ring is not in use yet: no queue has it). `EINVAL` if
/// `ring` is not aligned for `struct kevent_ring` (no C program can make such a pointer
/// without undefined behaviour, and the engine writes it with aligned stores).
pub(crate) fn check_ring(ring: *mut kevent_ring, len: usize) -> Result<(), Errno> {
    fallback_in_use();
    if ring.addr() % std::mem::align_of::<kevent_ring>() != 0 {
        return Err(Errno::EINVAL);
    }
    let mut buf = [0u8; CHUNK];
    let mut done = 0;
    while done < len {
        let chunk = (len - done).min(CHUNK);
        let user = ring.addr().checked_add(done).ok_or(Errno::EFAULT)?;
        // SAFETY: `buf` is valid for reads and writes of `chunk <= CHUNK` bytes.
        unsafe {
            copy(Dir::FromUser, buf.as_mut_ptr(), user, chunk)?;
            copy(Dir::ToUser, buf.as_mut_ptr(), user, chunk)?;
        }
        done += chunk;
    }
    Ok(())
}
