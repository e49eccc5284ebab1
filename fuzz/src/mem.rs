//! Caller memory with a guard page: rings and ukevent arrays that end exactly where an
//! inaccessible page starts, so a call that reaches past what the harness gave it faults
//! (`EFAULT` from the library, or a crash that the fuzzer reports) instead of silently
//! corrupting the heap.
#![allow(unsafe_code)]

use std::ptr::NonNull;

fn page() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p)
        .ok()
        .filter(|p| *p >= 4096)
        .unwrap_or(4096)
}

/// `len` bytes (plus up to 7 bytes of alignment slack) that end right before a
/// `PROT_NONE` page. Unmapped on drop.
#[derive(Debug)]
pub struct Guarded {
    map: NonNull<u8>,
    map_len: usize,
    data_len: usize,
    ptr: *mut u8,
}

impl Guarded {
    /// Maps room for `len` bytes at an address `misalign` (0..8) bytes past an 8-byte
    /// boundary, zero-filled and writable. `None` if the mapping fails.
    pub fn new(len: usize, misalign: usize) -> Option<Guarded> {
        let page = page();
        let data_len = len.checked_add(16)?.div_ceil(page).checked_mul(page)?;
        let map_len = data_len.checked_add(page)?;
        // SAFETY: a new private anonymous mapping at an address of the kernel's choice.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return None;
        }
        let map = NonNull::new(p.cast::<u8>())?;
        // SAFETY: the last page of the mapping just made; nothing else uses it.
        let guarded =
            unsafe { libc::mprotect(map.as_ptr().add(data_len).cast(), page, libc::PROT_NONE) }
                == 0;
        if !guarded {
            // SAFETY: the mapping just made, used by nobody.
            unsafe { libc::munmap(p, map_len) };
            return None;
        }
        let end = map.as_ptr() as usize + data_len;
        let mut start = (end - len) & !7;
        let misalign = misalign % 8;
        if misalign != 0 {
            start = start - 8 + misalign;
        }
        Some(Guarded {
            map,
            map_len,
            data_len,
            ptr: map.as_ptr().wrapping_add(start - map.as_ptr() as usize),
        })
    }

    /// The start of the usable bytes.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Makes the data pages read-only (`read`) or inaccessible (`!read`).
    pub fn protect(&self, read: bool) {
        let prot = if read {
            libc::PROT_READ
        } else {
            libc::PROT_NONE
        };
        // SAFETY: the data pages of this mapping, which only this object hands out.
        unsafe { libc::mprotect(self.map.as_ptr().cast(), self.data_len, prot) };
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once; no reference into it outlives
        // `self` (the harness only keeps raw pointers, and drops a ring only after closing the
        // queue fd that uses it, as the C contract requires).
        unsafe { libc::munmap(self.map.as_ptr().cast(), self.map_len) };
    }
}

/// An address that was mapped a moment ago and no longer is.
pub fn unmapped_addr() -> usize {
    let page = page();
    // SAFETY: a new private anonymous mapping at an address of the kernel's choice.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            page,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return 8;
    }
    // SAFETY: the page just mapped, used by nobody.
    unsafe { libc::munmap(p, page) };
    p as usize
}
