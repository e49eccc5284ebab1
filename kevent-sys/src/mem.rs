//! [`AnonMap`]: the one anonymous memory mapping of the project (rings, guard pages, the
//! fork-wiped pid page), so that `mmap`, `mprotect` and `munmap` of private anonymous memory
//! are written once.

use core::ptr::NonNull;

use crate::Errno;

/// The system's page size (4096 where `sysconf` would not say).
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p)
        .ok()
        .filter(|&p| p >= 4096)
        .unwrap_or(4096)
}

/// A page protection for [`AnonMap::protect`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prot {
    /// `PROT_NONE`: any access faults.
    None,
    /// `PROT_READ`.
    Read,
    /// `PROT_READ | PROT_WRITE`, as a new mapping is.
    ReadWrite,
}

impl Prot {
    fn raw(self) -> libc::c_int {
        match self {
            Prot::None => libc::PROT_NONE,
            Prot::Read => libc::PROT_READ,
            Prot::ReadWrite => libc::PROT_READ | libc::PROT_WRITE,
        }
    }
}

/// A private anonymous mapping (`MAP_PRIVATE | MAP_ANONYMOUS`) at an address of the kernel's
/// choice: page-aligned, zero-filled, readable and writable, unmapped on drop (or, after
/// [`AnonMap::reserve_on_drop`], replaced by an inaccessible reservation).
///
/// It hands out its address only as a raw pointer ([`AnonMap::base`]): what is read or
/// written there, and for how long, is the user's `unsafe` business.
///
/// ```
/// use kevent_sys::mem::{AnonMap, Prot, page_size};
/// let page = page_size();
/// let map = AnonMap::new(2 * page)?;
/// assert_eq!(map.base().as_ptr() as usize % page, 0);
/// // SAFETY: no reference into the second page exists.
/// unsafe { map.protect(page, page, Prot::None)? };
/// # Ok::<(), kevent_sys::Errno>(())
/// ```
#[derive(Debug)]
pub struct AnonMap {
    base: NonNull<u8>,
    len: usize,
    reserve_on_drop: bool,
}

// SAFETY: the mapping is owned by this value and reached only through raw pointers whose use
// is the user's responsibility; unmapping it from another thread is fine.
unsafe impl Send for AnonMap {}
// SAFETY: `&AnonMap` gives out the address and length only (`protect` is `unsafe`).
unsafe impl Sync for AnonMap {}

impl AnonMap {
    /// Maps `len` bytes (rounded up to whole pages by the kernel).
    ///
    /// # Errors
    ///
    /// What `mmap` says (`ENOMEM`; `EINVAL` for `len == 0`).
    pub fn new(len: usize) -> Result<AnonMap, Errno> {
        // SAFETY: a new private anonymous mapping at an address the kernel chooses touches no
        // existing memory; the result is checked for MAP_FAILED below.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                Prot::ReadWrite.raw(),
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Errno::last());
        }
        let base = NonNull::new(p.cast()).ok_or(Errno::ENOMEM)?;
        Ok(AnonMap {
            base,
            len,
            reserve_on_drop: false,
        })
    }

    /// The first byte (page-aligned).
    pub fn base(&self) -> NonNull<u8> {
        self.base
    }

    /// The length asked for.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always `false`: a mapping has at least one byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Sets the protection of the pages `offset..offset + len` (`offset` page-aligned).
    ///
    /// # Errors
    ///
    /// `EINVAL` for a range outside the mapping or an unaligned `offset`; what `mprotect`
    /// says.
    ///
    /// # Safety
    ///
    /// No reference (`&`, `&mut`) into the range may be live while it is less accessible
    /// than the reference needs: the access would fault.
    pub unsafe fn protect(&self, offset: usize, len: usize, prot: Prot) -> Result<(), Errno> {
        if offset.checked_add(len).is_none_or(|end| end > self.len) {
            return Err(Errno::EINVAL);
        }
        let start = self.base.as_ptr().wrapping_add(offset);
        // SAFETY: the range lies inside our own mapping (checked above); the caller keeps no
        // reference that the new protection would break.
        let r = unsafe { libc::mprotect(start.cast(), len, prot.raw()) };
        if r == 0 { Ok(()) } else { Err(Errno::last()) }
    }

    /// `MADV_WIPEONFORK`: a child process gets these pages zero-filled (Linux 4.14).
    ///
    /// # Errors
    ///
    /// What `madvise` says (`EINVAL` on an older kernel).
    pub fn wipe_on_fork(&self) -> Result<(), Errno> {
        // SAFETY: our own mapping; the advice changes only what a child process sees.
        let r =
            unsafe { libc::madvise(self.base.as_ptr().cast(), self.len, libc::MADV_WIPEONFORK) };
        if r == 0 { Ok(()) } else { Err(Errno::last()) }
    }

    /// On drop, replace the pages by an inaccessible reservation of the same range
    /// (`PROT_NONE`, `MAP_NORESERVE`) instead of unmapping them: a writer that still has
    /// the address (a kernel producer behind a duplicated fd) then gets `EFAULT`, and no
    /// later mapping of this process can take the range and be written into.
    pub fn reserve_on_drop(&mut self) {
        self.reserve_on_drop = true;
    }

    /// Gives up ownership: the pages stay mapped for the life of the process.
    pub fn leak(self) -> NonNull<u8> {
        let base = self.base;
        core::mem::forget(self);
        base
    }
}

impl Drop for AnonMap {
    fn drop(&mut self) {
        let p = self.base.as_ptr().cast::<libc::c_void>();
        if self.reserve_on_drop {
            // SAFETY: replaces our own mapping (same address and length) by an inaccessible
            // reservation; the owner references it no more (it is being dropped).
            unsafe {
                libc::mmap(
                    p,
                    self.len,
                    libc::PROT_NONE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
        } else {
            // SAFETY: unmaps exactly our own mapping, which its owner references no more.
            unsafe { libc::munmap(p, self.len) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protect_checks_its_range() {
        let page = page_size();
        let map = AnonMap::new(2 * page).unwrap();
        // SAFETY: no reference into the mapping exists.
        unsafe {
            assert_eq!(map.protect(page, 2 * page, Prot::Read), Err(Errno::EINVAL));
            assert_eq!(map.protect(usize::MAX, 2, Prot::Read), Err(Errno::EINVAL));
            assert_eq!(map.protect(1, page, Prot::Read), Err(Errno::EINVAL));
            assert_eq!(map.protect(page, page, Prot::Read), Ok(()));
        }
        assert_eq!(AnonMap::new(0).err(), Some(Errno::EINVAL));
    }
}
