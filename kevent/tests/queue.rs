//! `Queue` and `Builder`: backends, non-blocking, pollable fd, timeouts, `get_events`.

mod util;

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::{Duration, Instant, SystemTime};

use kevent::{Backend, Events, Key, Op, Queue, ReqFlags, Timeout, Timer, User};
use util::{ExpectEvent, expect_events};

fn poll_in(q: &Queue) -> bool {
    let mut p = libc::pollfd {
        fd: q.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll reads and writes one pollfd, a local.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n == 1 && p.revents & libc::POLLIN != 0
}

#[test]
fn s6_backend_is_the_process_choice_or_the_override() {
    let q = Queue::new().unwrap();
    assert_eq!(q.backend(), Backend::current().unwrap());
    let f = Queue::builder()
        .backend(Backend::fallback())
        .build()
        .unwrap();
    assert_eq!(f.backend(), Backend::Fallback);
    assert_eq!(Backend::Fallback.to_string(), "fallback");
    if q.backend() == Backend::Fallback {
        assert!(
            Backend::native_unavailable().is_some(),
            "fallback always says why"
        );
    }
}

fn ino(fd: i32) -> Option<(u64, u64)> {
    // SAFETY: an all-zero `stat` is a valid value of this plain-data struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes one `stat` into a local.
    let r = unsafe { libc::fstat(fd, &mut st) };
    (r == 0).then_some((st.st_dev, st.st_ino))
}

#[test]
fn queue_is_send_sync_and_owns_its_fd() {
    fn check<T: Send + Sync + AsFd + AsRawFd>() {}
    check::<Queue>();
    let q = Queue::new().unwrap();
    let raw = q.as_raw_fd();
    // SAFETY: fcntl(F_GETFD) reads the fd's flags only; it touches no memory.
    let fl = unsafe { libc::fcntl(raw, libc::F_GETFD) };
    assert!(fl & libc::FD_CLOEXEC != 0, "close-on-exec");
    let before = ino(raw).expect("the queue fd is open");
    drop(q);
    // Another test may reuse the number at once: then it names another file.
    assert_ne!(ino(raw), Some(before), "drop closes the fd");
}

#[test]
fn s3_nonblocking_queue_never_blocks() {
    let q = Queue::builder().nonblocking(true).build().unwrap();
    let mut events = Events::with_capacity(4);
    let t = Instant::now();
    assert_eq!(q.wait(&mut events, Timeout::FOREVER).unwrap(), 0);
    assert!(t.elapsed() < Duration::from_secs(1));
    q.set_nonblocking(false).unwrap();
    assert_eq!(q.wait(&mut events, Duration::from_millis(20)).unwrap(), 0);
}

#[test]
fn s4_queue_fd_is_readable_while_events_are_ready() {
    let q = Queue::new().unwrap();
    let _u = q.add(User::new(1)).unwrap();
    assert!(!poll_in(&q));
    q.ready(&[Key::user(1)]).unwrap();
    assert!(poll_in(&q));
    expect_events(&q, vec![ExpectEvent::key(Key::user(1))]);
    assert!(!poll_in(&q));
    q.wake().unwrap();
    assert!(poll_in(&q), "readable after a wake-up");
}

#[test]
fn d4_get_events_waits_for_min() {
    let q = Queue::new().unwrap();
    let regs: Vec<_> = (0..3).map(|i| q.add(User::new(i)).unwrap()).collect();
    let mut events = Events::with_capacity(8);
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..3 {
                std::thread::sleep(Duration::from_millis(15));
                q.ready(&[Key::user(i)]).unwrap();
            }
        });
        let mut total = q
            .wait_at_least(&mut events, 3, Duration::from_secs(5))
            .unwrap();
        // A backend may return early with fewer only on timeout; then collect the rest.
        while total < 3 {
            total += q.wait(&mut events, Duration::from_secs(5)).unwrap();
        }
        assert_eq!(total, 3);
    });
    drop(regs);
}

#[test]
fn s3_timeouts_relative_absolute_and_now() {
    let q = Queue::new().unwrap();
    let mut events = Events::with_capacity(4);
    let t = Instant::now();
    assert_eq!(q.wait(&mut events, Timeout::NOW).unwrap(), 0);
    let d = Duration::from_millis(30);
    let t = {
        let _ = t;
        Instant::now()
    };
    assert_eq!(q.wait(&mut events, d).unwrap(), 0);
    assert!(t.elapsed() >= d, "relative timeout returned early");
    let t = Instant::now();
    let at = SystemTime::now() + d;
    assert_eq!(q.wait(&mut events, Timeout::at(at)).unwrap(), 0);
    assert!(SystemTime::now() >= at, "absolute timeout returned early");
    assert!(t.elapsed() < Duration::from_secs(5));
    // A past absolute time does not block.
    let past = SystemTime::now() - Duration::from_secs(60);
    assert_eq!(q.wait(&mut events, past).unwrap(), 0);
    // Sub-millisecond: waits, not "do not block".
    assert_eq!(q.wait(&mut events, Duration::from_micros(300)).unwrap(), 0);
}

#[test]
fn ring_size_is_checked_and_consumers_are_exclusive() {
    for bad in [0, 1, kevent::MAX_RING_SIZE + 1, u32::MAX] {
        let e = Queue::builder().ring_size(bad).build().unwrap_err();
        assert_eq!(
            (e.op(), e.raw_os_error()),
            (Op::Init, Some(libc::EINVAL)),
            "{bad}"
        );
    }
    let q = Queue::builder().ring_size(2).build().unwrap();
    assert_eq!(q.ring_size(), Some(2));
    let r = q.ring().unwrap();
    let e = q.shared_ring().unwrap_err();
    assert_eq!(
        (e.op(), e.raw_os_error()),
        (Op::RingConsumer, Some(libc::EBUSY))
    );
    drop(r);
    drop(q.shared_ring().unwrap());
    let no_ring = Queue::new().unwrap();
    let e = no_ring.ring().unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
}

#[test]
fn registrations_may_outlive_the_queue() {
    let q = Queue::new().unwrap();
    let reg = q.add(User::new(1)).unwrap();
    drop(q);
    assert!(!reg.ready().unwrap());
    assert!(reg.remove().is_ok());
}

/// Issue 23, item 3: builder flags accumulate; `Timer::oneshot(d).flags(WAKEUP_ALL)` stays
/// ONESHOT.
#[test]
fn builder_flags_accumulate() {
    let q = Queue::new().unwrap();
    let t = q
        .add(Timer::oneshot(Duration::from_secs(3600)).flags(ReqFlags::WAKEUP_ALL))
        .unwrap();
    assert!(
        t.flags().contains(ReqFlags::ONESHOT | ReqFlags::WAKEUP_ALL),
        "{:?}",
        t.flags()
    );
    let u = q
        .add(User::new(1).edge().wakeup_all().flags(ReqFlags::ONESHOT))
        .unwrap();
    assert!(
        u.flags()
            .contains(ReqFlags::ET | ReqFlags::WAKEUP_ALL | ReqFlags::ONESHOT)
    );
}

/// `try_clone` is another handle to the same queue; `OwnedFd::try_from` hands the fd over
/// only from the last handle of a queue without a ring.
#[test]
fn try_clone_and_into_owned_fd() {
    let q = Queue::new().unwrap();
    let q2 = q.try_clone().unwrap();
    assert_eq!(q.as_raw_fd(), q2.as_raw_fd());
    let _u = q2.add(User::new(1)).unwrap();
    q.ready(&[Key::user(1)]).unwrap();
    expect_events(&q, vec![ExpectEvent::key(Key::user(1))]);
    let raw = q.as_raw_fd();
    let q = OwnedFd::try_from(q).expect_err("another handle exists");
    drop(q2);
    let fd: OwnedFd = OwnedFd::try_from(q).expect("the last handle");
    assert_eq!(fd.as_raw_fd(), raw);
    let ringed = Queue::builder().ring_size(4).build().unwrap();
    assert!(
        OwnedFd::try_from(ringed).is_err(),
        "a ring must outlive its fd"
    );
}

/// `Timeout` accepts an `Instant` deadline; one already passed does not block.
#[test]
fn instant_deadlines() {
    let q = Queue::new().unwrap();
    let mut events = Events::with_capacity(4);
    let start = Instant::now();
    assert_eq!(
        q.wait(&mut events, start + Duration::from_millis(20))
            .unwrap(),
        0
    );
    assert!(start.elapsed() >= Duration::from_millis(20));
    assert_eq!(q.wait(&mut events, Timeout::until(start)).unwrap(), 0);
}

/// Issue 23, item 6: threads adding, removing and marking the same few keys at once (their
/// shards locked across each call) neither deadlock nor fail but with `EEXIST`, and leave
/// nothing registered: afterwards every key can be added again.
#[test]
fn concurrent_add_remove_of_shared_keys() {
    const THREADS: u64 = 4;
    const KEYS: u64 = 8;
    let q = Queue::new().unwrap();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let q = &q;
            s.spawn(move || {
                let mut mine = Vec::new();
                for i in 0..5000u64 {
                    let id = (i * 7 + t) % KEYS;
                    match q.add(User::new(id)) {
                        Ok(reg) => mine.push(reg),
                        Err(e) => assert_eq!(e.error().errno(), Some(kevent::Errno::EEXIST)),
                    }
                    if i % 3 == 0 {
                        let _ = q.ready(&[Key::user(id)]).unwrap();
                    }
                    if mine.len() > 2 {
                        mine.remove(0).remove().unwrap();
                    }
                }
            });
        }
    });
    let mut events = Events::with_capacity(64);
    while q.wait(&mut events, Timeout::NOW).unwrap() > 0 {}
    let again: Vec<_> = (0..KEYS).map(|id| q.add(User::new(id)).unwrap()).collect();
    assert_eq!(again.len(), KEYS as usize, "every key was free again");
}
