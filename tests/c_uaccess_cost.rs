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

use kevent_backend::Backend;
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
    if !Backend::current().is_ok_and(|b| b == Backend::Fallback) {
        println!("skipped: the C API uses the native backend here (nothing is copied)");
        return;
    }
    let b = Backend::fallback();
    let iters = 100_000;
    // SAFETY: no ring.
    let fd = unsafe { kevent_backend::init(b, ptr::null_mut(), 0, 0) }.expect("kevent_init");
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
    let fd = unsafe { kevent_backend::init(b, ring, N, 0) }.expect("kevent_init with ring");
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

// ---------------------------------------------------------------------------------------------
// Issue 11's targets, measured through the exported C functions against the Rust dispatch on
// the same backend, in one process, interleaved: the poller round of `kevent-bench poller`
// (N AF_UNIX datagram socketpairs watched, A of them made readable per round, one wait that
// returns them, one read each) and `kevent_ctl` ADD+REMOVE of one entry.
//
// `cargo test --release -p kevent-c --test c_uaccess_cost -- --ignored --nocapture --test-threads=1`

/// Timed blocks per cell (medians are reported) and the length of one block.
const REPS: usize = 21;
const BLOCK: std::time::Duration = std::time::Duration::from_millis(20);
const N_WATCHED: usize = 1000;
const MAX_A: usize = 128;
const RING: u32 = 1024;

use kevent_sys::FOREVER;

/// Pins the calling thread to the last CPU (as kevent-bench does), if it can.
fn pin_last_cpu() {
    // SAFETY: sysconf has no preconditions; `set` is a local cpu_set_t the calls fill.
    unsafe {
        let n = libc::sysconf(libc::_SC_NPROCESSORS_ONLN).max(1) as usize;
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(n - 1, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set);
    }
}

struct Pairs {
    /// (watched, peer)
    fds: Vec<(i32, i32)>,
}

impl Pairs {
    fn new(n: usize) -> Pairs {
        let fds = (0..n)
            .map(|_| {
                let mut sv = [0; 2];
                // SAFETY: socketpair writes two fds into `sv`.
                let r = unsafe {
                    libc::socketpair(
                        libc::AF_UNIX,
                        libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                        0,
                        sv.as_mut_ptr(),
                    )
                };
                assert_eq!(r, 0, "socketpair: {}", std::io::Error::last_os_error());
                (sv[0], sv[1])
            })
            .collect();
        Pairs { fds }
    }

    fn activate(&self, i: usize) {
        let b = 1u8;
        // SAFETY: writes one byte from a local.
        let n = unsafe { libc::write(self.fds[i].1, (&raw const b).cast(), 1) };
        assert_eq!(n, 1);
    }
}

impl Drop for Pairs {
    fn drop(&mut self) {
        for &(a, b) in &self.fds {
            // SAFETY: our fds, closed once.
            unsafe {
                libc::close(a);
                libc::close(b);
            }
        }
    }
}

fn read1(fd: i32) {
    let mut b = 0u8;
    // SAFETY: reads one byte into a local.
    assert_eq!(unsafe { libc::read(fd, (&raw mut b).cast(), 1) }, 1);
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mech {
    Epoll,
    RustGet,
    CGet,
    RustRing,
    CRing,
}

struct Poller {
    mech: Mech,
    fd: i32,
    buf: Vec<ukevent>,
    ep_buf: Vec<libc::epoll_event>,
    ring: Vec<u64>,
    uidx: u32,
}

impl Poller {
    fn new(mech: Mech, pairs: &Pairs) -> Poller {
        let b = Backend::fallback();
        let mut ring = Vec::new();
        let fd = match mech {
            Mech::Epoll => {
                // SAFETY: no pointers.
                let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
                assert!(ep >= 0);
                for &(w, _) in &pairs.fds {
                    let mut ev = libc::epoll_event {
                        events: libc::EPOLLIN as u32,
                        u64: w as u64,
                    };
                    // SAFETY: `ev` is a live local.
                    let r = unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, w, &mut ev) };
                    assert_eq!(r, 0);
                }
                ep
            }
            _ => {
                let fd = if matches!(mech, Mech::RustRing | Mech::CRing) {
                    ring = vec![0u64; kevent_sys::ring_bytes(RING).expect("size") / 8];
                    // SAFETY: `ring` lives in this Poller, which closes the fd before dropping
                    // it (Drop below).
                    unsafe { kevent_backend::init(b, ring.as_mut_ptr().cast(), RING, 0) }
                        .expect("init")
                } else {
                    // SAFETY: no ring.
                    unsafe { kevent_backend::init(b, ptr::null_mut(), 0, 0) }.expect("init")
                };
                let mut adds: Vec<ukevent> = pairs
                    .fds
                    .iter()
                    .map(|&(w, _)| {
                        ukevent::new(
                            kevent_sys::KEVENT_SOCKET,
                            kevent_id::from_raw([w as u32, 0]),
                            kevent_sys::KEVENT_SOCKET_RECV,
                            0,
                        )
                    })
                    .collect();
                assert_eq!(b.ctl(fd, KEVENT_CTL_ADD, &mut adds), Ok(0));
                fd
            }
        };
        Poller {
            mech,
            fd,
            buf: vec![unotify(0); MAX_A],
            ep_buf: vec![libc::epoll_event { events: 0, u64: 0 }; MAX_A],
            ring,
            uidx: 0,
        }
    }

    fn ring(&self) -> *mut kevent_ring {
        self.ring.as_ptr().cast_mut().cast()
    }

    fn round(&mut self, pairs: &Pairs, active: &[usize]) {
        for &i in active {
            pairs.activate(i);
        }
        let a = active.len();
        let b = Backend::fallback();
        match self.mech {
            Mech::Epoll => {
                let mut got = 0;
                while got < a {
                    // SAFETY: `ep_buf` is valid for MAX_A entries.
                    let n = unsafe {
                        libc::epoll_wait(self.fd, self.ep_buf.as_mut_ptr(), MAX_A as i32, 5000)
                    };
                    assert!(n > 0);
                    for e in &self.ep_buf[..n as usize] {
                        read1(e.u64 as i32);
                    }
                    got += n as usize;
                }
            }
            Mech::RustGet | Mech::CGet => {
                let n = if self.mech == Mech::CGet {
                    // SAFETY: `buf` is valid for MAX_A entries.
                    unsafe {
                        calls::kevent_get_events(
                            self.fd,
                            a as u32,
                            MAX_A as u32,
                            FOREVER,
                            self.buf.as_mut_ptr(),
                            0,
                        )
                    }
                } else {
                    b.get_events(self.fd, a as u32, &mut self.buf, &FOREVER, 0)
                        .expect("get_events") as i32
                };
                assert_eq!(n as usize, a);
                for e in &self.buf[..a] {
                    read1(e.id.raw()[0] as i32);
                }
            }
            Mech::RustRing | Mech::CRing => {
                let ring = self.ring();
                let mut got = 0;
                while got < a {
                    // SAFETY: the ring stays valid while the queue lives; ring_over is only
                    // written by kevent_commit, which this thread calls.
                    let over = unsafe { ptr::read_volatile(&raw const (*ring).ring_over) };
                    let n = if self.mech == Mech::CRing {
                        // SAFETY: no pointers; the ring contract holds.
                        unsafe { calls::kevent_wait(self.fd, RING - 1, self.uidx, FOREVER, 0) }
                    } else {
                        b.wait(self.fd, RING - 1, self.uidx, &FOREVER, 0)
                            .expect("wait") as i32
                    };
                    assert!(n > 0);
                    // SAFETY: an Acquire load of the producer index, then the entries it
                    // published (the spec's ring protocol).
                    let kidx = unsafe {
                        (*(&raw const (*ring).ring_kidx).cast::<std::sync::atomic::AtomicU32>())
                            .load(std::sync::atomic::Ordering::Acquire)
                    };
                    let mut i = self.uidx;
                    while i != kidx {
                        // SAFETY: slot `i < RING` of the ring, published by `kidx`.
                        let e = unsafe {
                            ptr::read((&raw const (*ring).event).cast::<ukevent>().add(i as usize))
                        };
                        read1(e.id.raw()[0] as i32);
                        i = (i + 1) % RING;
                        got += 1;
                    }
                    let released = if self.mech == Mech::CRing {
                        // SAFETY: no pointers.
                        unsafe { calls::kevent_commit(self.fd, kidx, over) }
                    } else {
                        b.commit(self.fd, kidx, over).expect("commit") as i32
                    };
                    assert_eq!(released, n);
                    self.uidx = kidx;
                }
            }
        }
    }
}

impl Drop for Poller {
    fn drop(&mut self) {
        // SAFETY: our fd, closed once, before `ring` is freed.
        unsafe { libc::close(self.fd) };
    }
}

/// ns per `f()`, over one block of about `BLOCK`.
fn block_ns(mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < BLOCK {
        for _ in 0..16 {
            f();
        }
        n += 16;
    }
    start.elapsed().as_nanos() as f64 / n as f64
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
#[ignore = "a measurement; prints µs per round and ratios"]
fn c_poller_vs_rust_and_epoll() {
    if !Backend::current().is_ok_and(|b| b == Backend::Fallback) {
        println!("skipped: the C API uses the native backend here (nothing is copied)");
        return;
    }
    pin_last_cpu();
    let pairs = Pairs::new(N_WATCHED);
    let mechs = [
        Mech::Epoll,
        Mech::RustGet,
        Mech::CGet,
        Mech::RustRing,
        Mech::CRing,
    ];
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    println!(
        "poller, N = {N_WATCHED} AF_UNIX datagram socketpairs, medians of {REPS} blocks of {BLOCK:?}; \
         ratios are medians of per-repetition ratios"
    );
    for a in [1usize, 10, 100] {
        let mut pollers: Vec<Poller> = mechs.iter().map(|&m| Poller::new(m, &pairs)).collect();
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); mechs.len()];
        let mut r_c_rust = Vec::new();
        let mut r_c_epoll = Vec::new();
        let mut r_cring_rustring = Vec::new();
        let mut r_cring_epoll = Vec::new();
        let mut r_rust_epoll = Vec::new();
        for rep in 0..=REPS {
            let active: Vec<usize> =
                (0..a)
                    .map(|_| (next() as usize) % N_WATCHED)
                    .fold(Vec::new(), |mut v, i| {
                        if !v.contains(&i) {
                            v.push(i);
                        }
                        v
                    });
            let mut t = vec![0.0; mechs.len()];
            for k in 0..mechs.len() {
                let i = (k + rep) % mechs.len();
                let p = &mut pollers[i];
                t[i] = block_ns(|| p.round(&pairs, &active)) * a as f64 / active.len() as f64;
            }
            if rep == 0 {
                continue; // warm-up
            }
            for i in 0..mechs.len() {
                times[i].push(t[i]);
            }
            r_c_rust.push(t[2] / t[1]);
            r_c_epoll.push(t[2] / t[0]);
            r_cring_rustring.push(t[4] / t[3]);
            r_cring_epoll.push(t[4] / t[0]);
            r_rust_epoll.push(t[1] / t[0]);
        }
        let med: Vec<f64> = times.iter_mut().map(|v| median(v) / 1000.0).collect();
        println!(
            "A={a:>3}: epoll {:.2} µs | Rust get_events {:.2} | C get_events {:.2} | Rust ring {:.2} | C ring {:.2}",
            med[0], med[1], med[2], med[3], med[4]
        );
        println!(
            "       C get_events ÷ Rust {:.3}, ÷ epoll {:.3} | Rust get_events ÷ epoll {:.3} | C ring ÷ Rust ring {:.3}, ÷ epoll {:.3}",
            median(&mut r_c_rust),
            median(&mut r_c_epoll),
            median(&mut r_rust_epoll),
            median(&mut r_cring_rustring),
            median(&mut r_cring_epoll)
        );
    }
}

/// `kevent_ctl` ADD + REMOVE of one UNOTIFY entry, C and Rust in alternating blocks.
#[test]
#[ignore = "a measurement; prints ns per ADD+REMOVE and the ratio"]
fn c_ctl_add_remove_vs_rust() {
    if !Backend::current().is_ok_and(|b| b == Backend::Fallback) {
        println!("skipped: the C API uses the native backend here (nothing is copied)");
        return;
    }
    pin_last_cpu();
    let b = Backend::fallback();
    // SAFETY: no ring.
    let fd = unsafe { kevent_backend::init(b, ptr::null_mut(), 0, 0) }.expect("kevent_init");
    let mut one = [unotify(1000)];
    let mut c_once = || {
        one[0] = unotify(1000);
        // SAFETY: `one` is a valid array of one entry.
        unsafe {
            assert_eq!(
                calls::kevent_ctl(fd, KEVENT_CTL_ADD, 1, one.as_mut_ptr()),
                0
            );
            one[0] = unotify(1000);
            assert_eq!(
                calls::kevent_ctl(fd, KEVENT_CTL_REMOVE, 1, one.as_mut_ptr()),
                0
            );
        }
    };
    let mut two = [unotify(1000)];
    let mut rust_once = || {
        two[0] = unotify(1000);
        assert_eq!(b.ctl(fd, KEVENT_CTL_ADD, &mut two), Ok(0));
        two[0] = unotify(1000);
        assert_eq!(b.ctl(fd, KEVENT_CTL_REMOVE, &mut two), Ok(0));
    };
    let (mut tc, mut tr, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
    for rep in 0..=REPS {
        let (c, r) = if rep % 2 == 0 {
            let c = block_ns(&mut c_once);
            (c, block_ns(&mut rust_once))
        } else {
            let r = block_ns(&mut rust_once);
            (block_ns(&mut c_once), r)
        };
        if rep > 0 {
            tc.push(c);
            tr.push(r);
            ratio.push(c / r);
        }
    }
    println!(
        "kevent_ctl ADD+REMOVE of one entry: C {:.0} ns | Rust {:.0} ns | C ÷ Rust {:.3}",
        median(&mut tc),
        median(&mut tr),
        median(&mut ratio)
    );
    // SAFETY: our queue fd, closed once.
    unsafe { libc::close(fd) };
}
