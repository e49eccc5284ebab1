//! The copies on every path, against good, read-only, inaccessible and NULL memory.

use super::*;
use std::mem::size_of;

use kevent_sys::mem::{AnonMap, Prot, page_size};
use kevent_sys::{kevent_ring, ukevent};

use super::events::{MAX_OUT, ZERO_EVENT};
use super::vm::own_pid;

/// A `validate` that accepts.
fn ok() -> Result<(), Errno> {
    Ok(())
}

/// The paths a copy can take here: safecopy (x86_64), `process_vm_*`, the pipe.
fn paths() -> Vec<Path> {
    let mut v = Vec::new();
    if cfg!(target_arch = "x86_64") {
        assert!(
            safecopy::refresh(),
            "safecopy must be usable in this test thread"
        );
        v.push(Path::Safecopy);
    }
    v.extend([Path::ProcessVm, Path::Pipe]);
    v
}

/// Runs `f` once on every path.
fn all_ways(f: impl Fn()) {
    for p in paths() {
        FORCE.with(|c| c.set(Some(p)));
        f();
    }
    FORCE.with(|c| c.set(None));
}

/// Two pages whose second page is inaccessible (`PROT_NONE`: the kernel's copies fail on
/// it exactly as on an unmapped page, and unlike an unmapped hole no other test's `mmap`
/// can land there), and a read-only page.
struct Pages {
    rw: *mut u8,
    ro: *mut u8,
    page: usize,
    /// The two mappings, unmapped when the pages are dropped.
    _maps: [AnonMap; 2],
}

impl Pages {
    fn new() -> Pages {
        let page = page_size();
        let rw = AnonMap::new(2 * page).unwrap();
        let ro = AnonMap::new(page).unwrap();
        // SAFETY: fresh mappings, no reference into them; the second page of `rw` becomes a
        // hole right after the first page.
        unsafe {
            rw.protect(page, page, Prot::None).unwrap();
            ro.protect(0, page, Prot::Read).unwrap();
        }
        Pages {
            rw: rw.base().as_ptr(),
            ro: ro.base().as_ptr(),
            page,
            _maps: [rw, ro],
        }
    }

    /// `n` ukevents ending exactly at the hole.
    fn events_before_hole(&self, n: usize) -> *mut ukevent {
        self.rw
            .wrapping_add(self.page - n * size_of::<ukevent>())
            .cast()
    }
}

/// The cached pid is the child's own in a forked child (MADV_WIPEONFORK), so a child
/// never copies from its parent.
#[test]
fn cached_pid_follows_fork() {
    // The child copies with process_vm_readv (the thread-local choice is inherited).
    FORCE.with(|c| c.set(Some(Path::ProcessVm)));
    // SAFETY: getpid has no preconditions.
    assert_eq!(own_pid(), unsafe { libc::getpid() });
    // SAFETY: the child only calls async-signal-safe functions (getpid, the atomic load
    // and store of own_pid's already initialized slot, process_vm_readv) and `_exit`s.
    let child = unsafe { libc::fork() };
    if child == 0 {
        let mut x: libc::c_int = 5;
        // SAFETY: as above.
        let ok = own_pid() == unsafe { libc::getpid() } && read_value(&raw mut x) == Ok(5);
        x = 0;
        // SAFETY: as above.
        unsafe { libc::_exit(if ok && x == 0 { 0 } else { 1 }) };
    }
    assert!(child > 0);
    let mut status = 0;
    // SAFETY: waits for our own child, writing `status`, a local.
    assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{status:#x}"
    );
    FORCE.with(|c| c.set(None));
}

#[test]
fn values_round_trip_and_bad_addresses_are_efault() {
    all_ways(|| {
        let mut x: libc::c_int = 0;
        write_value(&mut x, &42).unwrap();
        assert_eq!(read_value(&x), Ok(42));
        assert_eq!(
            read_value::<libc::c_int>(std::ptr::null()),
            Err(Errno::EFAULT)
        );
        assert_eq!(
            write_value::<libc::c_int>(std::ptr::null_mut(), &1),
            Err(Errno::EFAULT)
        );
        let p = Pages::new();
        let hole: *mut libc::c_int = p.rw.wrapping_add(p.page).cast();
        assert_eq!(read_value(hole), Err(Errno::EFAULT));
        // Straddling the end of the mapping.
        let straddle: *mut libc::itimerspec = p.rw.wrapping_add(p.page - 8).cast();
        assert_eq!(read_value(straddle).map(|_| ()), Err(Errno::EFAULT));
        // Read-only memory can be read, not written.
        assert_eq!(read_value(p.ro.cast::<libc::c_int>()), Ok(0));
        assert_eq!(
            write_value(p.ro.cast::<libc::c_int>(), &1),
            Err(Errno::EFAULT)
        );
        let top: *const libc::c_int = std::ptr::without_provenance(usize::MAX - 1);
        assert_eq!(read_value(top), Err(Errno::EFAULT));
    });
}

#[test]
fn inout_writes_back_only_the_changed_span() {
    all_ways(|| {
        let mut arr = [ZERO_EVENT; 5];
        for (i, e) in arr.iter_mut().enumerate() {
            e.event = i as u32;
        }
        let r = with_events_inout(arr.as_mut_ptr(), 5, ok, |ev| {
            assert_eq!(ev.len(), 5);
            ev[1].ret_flags = 2;
            ev[3].ret_flags = 3;
            Ok(7u32)
        });
        assert_eq!(r, Ok(7));
        assert_eq!(arr.map(|e| e.ret_flags), [0, 2, 0, 3, 0]);
        assert_eq!(arr.map(|e| e.event), [0, 1, 2, 3, 4]);

        // Read-only and unchanged: fine, as with the kernel. Changed: EFAULT.
        let p = Pages::new();
        let ro = p.ro.cast::<ukevent>();
        assert_eq!(with_events_inout(ro, 2, ok, |_| Ok(())), Ok(()));
        let r = with_events_inout(ro, 2, ok, |ev| {
            ev[1].ret_flags = 1;
            Ok(())
        });
        assert_eq!(r, Err(Errno::EFAULT));
        // NULL with num > 0, and arrays that run into a hole.
        assert_eq!(
            with_events_inout(std::ptr::null_mut(), 1, ok, |_| Ok(())),
            Err(Errno::EFAULT)
        );
        assert_eq!(
            with_events_inout(std::ptr::null_mut(), 0, ok, |ev| Ok(ev.len())),
            Ok(0)
        );
        let end = p.events_before_hole(2);
        assert_eq!(with_events_inout(end, 2, ok, |ev| Ok(ev.len())), Ok(2));
        assert_eq!(
            with_events_inout(end, 3, ok, |_| Ok(())),
            Err(Errno::EFAULT)
        );
        // Large (heap) arrays.
        let mut big = vec![ZERO_EVENT; 100];
        let r = with_events_inout(big.as_mut_ptr(), 100, ok, |ev| {
            ev[99].ret_data = [1, 2];
            Ok(ev.len())
        });
        assert_eq!(r, Ok(100));
        assert_eq!(big[99].ret_data, [1, 2]);
        // A call error still returns the call's error.
        assert_eq!(
            with_events_inout(big.as_mut_ptr(), 1, ok, |_| Err::<(), _>(Errno::EBADF)),
            Err(Errno::EBADF)
        );
    });
}

/// The queue fd is validated first exactly when the copy would create fds (the pipe),
/// and its error is the call's; safecopy and process_vm create none and skip it.
#[test]
fn inout_validates_first_only_on_the_pipe() {
    for p in paths() {
        FORCE.with(|c| c.set(Some(p)));
        let mut arr = [ZERO_EVENT; 2];
        let ran = std::cell::Cell::new(false);
        let r = with_events_inout(
            arr.as_mut_ptr(),
            2,
            || Err(Errno::EBADF),
            |_| {
                ran.set(true);
                Ok(())
            },
        );
        if p == Path::Pipe {
            assert_eq!(r, Err(Errno::EBADF));
            assert!(!ran.get(), "f ran after a failed validation");
        } else {
            assert_eq!(r, Ok(()), "{p:?}");
            assert!(ran.get());
        }
    }
    FORCE.with(|c| c.set(None));
}

#[test]
fn out_writes_what_was_filled() {
    all_ways(|| {
        let mut arr = [ZERO_EVENT; 4];
        let r = with_events_out(arr.as_mut_ptr(), 4, |ev| {
            assert_eq!(ev.len(), 4);
            ev[0].event = 9;
            ev[1].event = 8;
            Ok(2)
        });
        assert_eq!(r, Ok(2));
        assert_eq!(arr.map(|e| e.event), [9, 8, 0, 0]);
        // D15: NULL with room for events is EFAULT before `f` runs (it must not wait);
        // NULL with no room is left to the engine (EINVAL for max_nr == 0).
        let ran = std::cell::Cell::new(false);
        let f = |_: &mut [ukevent]| {
            ran.set(true);
            Ok(0)
        };
        assert_eq!(
            with_events_out(std::ptr::null_mut(), 4, f),
            Err(Errno::EFAULT)
        );
        assert_eq!(
            with_events_out(std::ptr::null_mut(), u32::MAX, f),
            Err(Errno::EFAULT)
        );
        assert!(!ran.get(), "f ran for a NULL buffer");
        assert_eq!(with_events_out(std::ptr::null_mut(), 0, f), Ok(0));
        assert!(ran.get());
        // Other addresses: nothing to write, any buffer is fine; something to write,
        // EFAULT.
        let p = Pages::new();
        assert_eq!(with_events_out(p.ro.cast(), 4, |_| Ok(0)), Ok(0));
        assert_eq!(
            with_events_out(p.ro.cast(), 4, |_| Ok(1)),
            Err(Errno::EFAULT)
        );
        // The buffer is capped.
        let r = with_events_out(p.ro.cast(), u32::MAX, |ev| {
            assert_eq!(ev.len(), MAX_OUT);
            Ok(0)
        });
        assert_eq!(r, Ok(0));
    });
}

#[test]
fn ring_check_needs_the_whole_ring_writable() {
    all_ways(|| {
        let p = Pages::new();
        // 8 + 2 * 40 bytes at the end of the first page: fits; one more entry does not.
        let ring = p.rw.wrapping_add(p.page - 88).cast::<kevent_ring>();
        let bytes = |n| kevent_sys::ring_bytes(n).unwrap();
        assert_eq!(check_ring(ring, bytes(2)), Ok(()));
        assert_eq!(check_ring(ring, bytes(3)), Err(Errno::EFAULT));
        // P38: the asynchronous ring's tail (8 more bytes) must be there too.
        let tail = kevent_sys::ring::async_ring_bytes(2).unwrap();
        assert_eq!(check_ring(ring, tail), Err(Errno::EFAULT));
        let ring8 = p.rw.wrapping_add(p.page - 96).cast::<kevent_ring>();
        assert_eq!(check_ring(ring8, tail), Ok(()));
        assert_eq!(check_ring(p.ro.cast(), bytes(2)), Err(Errno::EFAULT));
        assert_eq!(
            check_ring(std::ptr::null_mut(), bytes(2)),
            Err(Errno::EFAULT)
        );
        let odd = p.rw.wrapping_add(4).cast::<kevent_ring>();
        assert_eq!(check_ring(odd, bytes(2)), Err(Errno::EINVAL));
        // The bytes are preserved.
        let mut mem = vec![0u64; (8 + 100 * 40) / 8];
        for (i, w) in mem.iter_mut().enumerate() {
            *w = i as u64;
        }
        assert_eq!(check_ring(mem.as_mut_ptr().cast(), bytes(100)), Ok(()));
        assert!(mem.iter().enumerate().all(|(i, w)| *w == i as u64));
    });
}
