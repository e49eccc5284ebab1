//! What the C API's copies of caller memory (`src/capi/uaccess.rs`) cost on the fallback
//! backend: the same operations through the exported C functions and through the Rust backend
//! dispatch they wrap, which takes slices and copies nothing.
//!
//! A measurement, not a check:
//! `cargo test --release -p kevent-c --test c_uaccess_cost -- --ignored --nocapture`.
//! (On a kevent kernel the native arm passes C pointers straight to the kernel, so there is
//! nothing to measure there; this always measures the fallback.)

use std::ptr;
use std::time::Instant;

use kevent::backend::RawBackend;
use kevent_c::capi::calls;
use kevent_sys::{
    KEVENT_CTL_ADD, KEVENT_CTL_READY, KEVENT_CTL_REMOVE, KEVENT_UNOTIFY, kevent_id, kevent_ring,
    ukevent,
};

const ZERO: libc::timespec = libc::timespec {
    tv_sec: 0,
    tv_nsec: 0,
};

fn ns_per(iters: u32, mut f: impl FnMut()) -> f64 {
    for _ in 0..iters / 10 {
        f();
    }
    let t = Instant::now();
    for _ in 0..iters {
        f();
    }
    t.elapsed().as_nanos() as f64 / f64::from(iters)
}

fn unotify(id: u64) -> ukevent {
    ukevent::new(KEVENT_UNOTIFY, kevent_id::from_u64(id), 1, 0)
}

fn row(what: &str, c: f64, rust: f64) {
    println!(
        "{what:<44} C API {c:>6.0} ns | Rust dispatch {rust:>6.0} ns | copies {:>5.0} ns ({:>3.0}%)",
        c - rust,
        (c - rust) / c * 100.0
    );
}

#[test]
#[ignore = "a measurement; prints ns per call"]
fn uaccess_cost_per_call() {
    if !RawBackend::current().is_ok_and(|b| b == RawBackend::Fallback) {
        println!("skipped: the C API uses the native backend here (nothing is copied)");
        return;
    }
    let b = RawBackend::fallback();
    let iters = 100_000;
    // SAFETY: no ring.
    let fd = unsafe { b.init(ptr::null_mut(), 0, 0) }.expect("kevent_init");
    let mut reg: Vec<ukevent> = (0..64).map(unotify).collect();
    assert_eq!(b.ctl(fd, KEVENT_CTL_ADD, &mut reg), Ok(0));
    let mut out = vec![unotify(0); 64];

    for n in [1usize, 8, 64] {
        let mut mark: Vec<ukevent> = (0..n as u64).map(unotify).collect();
        let c = ns_per(iters, || {
            // SAFETY: `mark` and `out` are valid arrays of their lengths.
            unsafe {
                assert_eq!(
                    calls::kevent_ctl(fd, KEVENT_CTL_READY, n as u32, mark.as_mut_ptr()),
                    n as i32
                );
                assert_eq!(
                    calls::kevent_get_events(fd, n as u32, 64, ZERO, out.as_mut_ptr(), 0),
                    n as i32
                );
            }
        });
        let rust = ns_per(iters, || {
            assert_eq!(b.ctl(fd, KEVENT_CTL_READY, &mut mark), Ok(n as u32));
            assert_eq!(b.get_events(fd, n as u32, &mut out, &ZERO, 0), Ok(n as u32));
        });
        row(&format!("READY {n} + get_events {n}"), c, rust);
    }

    let c = ns_per(iters, || {
        // SAFETY: `out` is a valid array of 64 entries.
        let n = unsafe { calls::kevent_get_events(fd, 1, 64, ZERO, out.as_mut_ptr(), 0) };
        assert_eq!(n, 0);
    });
    let rust = ns_per(iters, || {
        assert_eq!(b.get_events(fd, 1, &mut out, &ZERO, 0), Ok(0))
    });
    row("get_events, nothing ready (no copy-out)", c, rust);

    let mut one = [unotify(1000)];
    let c = ns_per(iters, || {
        // SAFETY: as above.
        unsafe {
            one[0] = unotify(1000);
            assert_eq!(
                calls::kevent_ctl(fd, KEVENT_CTL_ADD, 1, one.as_mut_ptr()),
                0
            );
            one[0] = unotify(1000);
            assert_eq!(
                calls::kevent_ctl(fd, KEVENT_CTL_REMOVE, 1, one.as_mut_ptr()),
                0,
                "D14"
            );
        }
    });
    let rust = ns_per(iters, || {
        one[0] = unotify(1000);
        assert_eq!(b.ctl(fd, KEVENT_CTL_ADD, &mut one), Ok(0));
        one[0] = unotify(1000);
        assert_eq!(b.ctl(fd, KEVENT_CTL_REMOVE, &mut one), Ok(0), "D14");
    });
    row("ADD 1 + REMOVE 1 (write-back)", c, rust);
    // SAFETY: our queue fd, closed once.
    unsafe { libc::close(fd) };

    // The ring fast path: READY, wait, commit. Only READY copies (its one entry).
    const N: u32 = 64;
    let mut mem = vec![0u64; kevent_sys::ring_bytes(N).expect("size") / 8];
    let ring: *mut kevent_ring = mem.as_mut_ptr().cast();
    // SAFETY: `mem` outlives the queue (closed below) and is not otherwise accessed meanwhile
    // except through `ring`'s header fields, read only.
    let fd = unsafe { b.init(ring, N, 0) }.expect("kevent_init with ring");
    assert_eq!(b.ctl(fd, KEVENT_CTL_ADD, &mut reg[..1]), Ok(0));
    let mut mark = [unotify(0)];
    let mut uidx = 0;
    let mut step = |via_c: bool| {
        // SAFETY: `ring` stays valid while the queue lives; ring_over is only written by
        // kevent_commit, which this thread calls.
        let over = unsafe { ptr::read_volatile(&raw const (*ring).ring_over) };
        let n = if via_c {
            // SAFETY: `mark` is valid; the ring contract holds (above).
            unsafe {
                assert_eq!(
                    calls::kevent_ctl(fd, KEVENT_CTL_READY, 1, mark.as_mut_ptr()),
                    1
                );
                calls::kevent_wait(fd, 1, uidx, ZERO, 0)
            }
        } else {
            assert_eq!(b.ctl(fd, KEVENT_CTL_READY, &mut mark), Ok(1));
            b.wait(fd, 1, uidx, &ZERO, 0).expect("wait") as i32
        };
        assert_eq!(n, 1);
        uidx = (uidx + 1) % N;
        if via_c {
            // SAFETY: no pointers.
            assert_eq!(unsafe { calls::kevent_commit(fd, uidx, over) }, 1);
        } else {
            assert_eq!(b.commit(fd, uidx, over), Ok(1));
        }
    };
    let c = ns_per(iters, || step(true));
    let rust = ns_per(iters, || step(false));
    row("ring: READY 1 + wait + commit", c, rust);
    // SAFETY: our queue fd, closed once, before `mem` is freed.
    unsafe { libc::close(fd) };
    drop(mem);
}
