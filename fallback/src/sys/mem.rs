//! Test-only memory mappings: pages with chosen protections, for the fault tests of
//! `signal::safecopy`.

/// Three fresh anonymous pages: 0 read-write, 1 inaccessible, 2 read-only. Returns the base
/// and the page size; panics if the kernel refuses.
pub(crate) fn guarded_pages() -> (*mut u8, usize) {
    // SAFETY: sysconf has no preconditions; the mapping is new and ours, and `mprotect` only
    // changes pages inside it.
    unsafe {
        let page = libc::sysconf(libc::_SC_PAGESIZE) as usize;
        let base = libc::mmap(
            std::ptr::null_mut(),
            3 * page,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(base, libc::MAP_FAILED);
        let base = base.cast::<u8>();
        assert_eq!(
            libc::mprotect(base.add(page).cast(), page, libc::PROT_NONE),
            0
        );
        assert_eq!(
            libc::mprotect(base.add(2 * page).cast(), page, libc::PROT_READ),
            0
        );
        (base, page)
    }
}

/// Unmaps what [`guarded_pages`] returned.
pub(crate) fn unmap_pages(base: *mut u8, page: usize) {
    // SAFETY: the caller passes a mapping made by `guarded_pages`, no longer used.
    unsafe { libc::munmap(base.cast(), 3 * page) };
}
