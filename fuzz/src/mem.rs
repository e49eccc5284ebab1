//! Caller memory with a guard page: rings and ukevent arrays that end exactly where an
//! inaccessible page starts, so a call that reaches past what the harness gave it faults
//! (`EFAULT` from the library, or a crash that the fuzzer reports) instead of silently
//! corrupting the heap.
#![allow(unsafe_code)]

use kevent_sys::mem::{AnonMap, Prot, page_size};

/// `len` bytes (plus up to 7 bytes of alignment slack) that end right before a
/// `PROT_NONE` page. Unmapped on drop (the harness only keeps raw pointers, and drops a ring
/// only after closing the queue fd that uses it, as the C contract requires).
#[derive(Debug)]
pub struct Guarded {
    map: AnonMap,
    data_len: usize,
    ptr: *mut u8,
}

impl Guarded {
    /// Maps room for `len` bytes at an address `misalign` (0..8) bytes past an 8-byte
    /// boundary, zero-filled and writable. `None` if the mapping fails.
    pub fn new(len: usize, misalign: usize) -> Option<Guarded> {
        let page = page_size();
        let data_len = len.checked_add(16)?.div_ceil(page).checked_mul(page)?;
        let map = AnonMap::new(data_len.checked_add(page)?).ok()?;
        // SAFETY: the last page of the mapping just made; nothing references it.
        unsafe { map.protect(data_len, page, Prot::None) }.ok()?;
        let base = map.base().as_ptr();
        let end = base as usize + data_len;
        let mut start = (end - len) & !7;
        let misalign = misalign % 8;
        if misalign != 0 {
            start = start - 8 + misalign;
        }
        Some(Guarded {
            ptr: base.wrapping_add(start - base as usize),
            map,
            data_len,
        })
    }

    /// The start of the usable bytes.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Makes the data pages read-only (`read`) or inaccessible (`!read`).
    pub fn protect(&self, read: bool) {
        let prot = if read { Prot::Read } else { Prot::None };
        // SAFETY: the data pages of this mapping, which only this object hands out, and only
        // as raw pointers.
        let _ = unsafe { self.map.protect(0, self.data_len, prot) };
    }
}

/// An address that was mapped a moment ago and no longer is.
pub fn unmapped_addr() -> usize {
    AnonMap::new(page_size()).map_or(8, |map| map.base().as_ptr() as usize)
}
