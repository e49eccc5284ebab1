//! The dispatch's own tests: each arm reaches its engine.

use super::*;
use kevent_sys::{KEVENT_CTL_ADD, KEVENT_CTL_READY, KEVENT_UNOTIFY, kevent_id};

const ZERO: libc::timespec = libc::timespec {
    tv_sec: 0,
    tv_nsec: 0,
};

fn kevent_kernel() -> bool {
    std::path::Path::new(detect::SYSFS_ROOT).exists()
}

#[test]
fn fallback_is_the_fallback_arm() {
    assert_eq!(Backend::fallback(), Backend::Fallback);
    assert!(!Backend::fallback().is_native());
    assert_eq!(Backend::fallback().as_str(), "fallback");
    assert_eq!(Backend::fallback().as_cstr(), c"fallback");
    assert!(!Backend::fallback().dup_is_queue());
    let t = SyscallTable {
        init: 1,
        ctl: 2,
        get_events: 3,
        wait: 4,
        commit: 5,
        aio_sendfile: None,
    };
    assert!(Backend::Native(t).is_native());
    assert!(Backend::Native(t).dup_is_queue());
    assert_eq!(Backend::Native(t).as_str(), "native");
    assert_eq!(Backend::Native(t).to_string(), "native");
}

/// The fallback arm reaches `kevent_fallback`: each call gives exactly what the engine
/// gives for the same arguments (whether the engine is complete or not).
#[test]
fn fallback_arm_routes_to_the_engine() {
    let b = Backend::fallback();
    let mut ev = [ukevent::new(KEVENT_UNOTIFY, kevent_id::from_u64(1), 0, 0)];
    let mut ev2 = ev;
    assert_eq!(
        b.ctl(-1, KEVENT_CTL_ADD, &mut ev),
        kevent_fallback::kevent_ctl(-1, KEVENT_CTL_ADD, &mut ev2)
    );
    assert_eq!(
        b.ctl(-1, KEVENT_CTL_READY, &mut []),
        kevent_fallback::kevent_ctl(-1, KEVENT_CTL_READY, &mut [])
    );
    assert_eq!(
        b.get_events(-1, 0, &mut ev, &ZERO, 0),
        kevent_fallback::kevent_get_events(-1, 0, &mut ev2, &ZERO, 0)
    );
    assert_eq!(
        b.wait(-1, 1, 0, &ZERO, 0),
        kevent_fallback::kevent_wait(-1, 1, 0, &ZERO, 0)
    );
    assert_eq!(b.commit(-1, 0, 0), kevent_fallback::kevent_commit(-1, 0, 0));
    let id = TimerId(u32::MAX);
    assert_eq!(
        b.timer_delete(PosixTimerId::Fallback(id)),
        kevent_fallback::posix_timer::timer_delete(id)
    );
    assert_eq!(
        b.timer_gettime(PosixTimerId::Fallback(id))
            .map(|t| t.it_value.tv_nsec),
        kevent_fallback::posix_timer::timer_gettime(id).map(|t| t.it_value.tv_nsec)
    );
}

/// A queue made by the fallback arm is a working queue: `init` reaches the engine, and
/// once the engine serves, the fd is a real kevent queue.
#[test]
fn fallback_init_reaches_the_engine() {
    // SAFETY: a null ring with num 0: no ring memory is registered.
    let ours = unsafe { init(Backend::fallback(), std::ptr::null_mut(), 0, 0) };
    // SAFETY: as above.
    let theirs = unsafe { kevent_fallback::kevent_init(std::ptr::null_mut(), 0, 0) };
    assert_eq!(ours.is_ok(), theirs.is_ok());
    for fd in [ours, theirs].into_iter().flatten() {
        assert_eq!(
            Backend::fallback().ctl(fd, KEVENT_CTL_READY, &mut []),
            Ok(0)
        );
        // SAFETY: `fd` was just returned to us by the engine and is closed once.
        unsafe { libc::close(fd) };
    }
    if let Err(e) = ours {
        assert_eq!(Some(e), theirs.err());
    }
}

#[test]
fn native_on_a_stock_kernel_is_a_typed_error() {
    if kevent_kernel() {
        eprintln!("skipped: this kernel advertises kevent");
        return;
    }
    let err = Backend::native().expect_err("a stock kernel has no native backend");
    // `auto`: the kernel does not advertise; `fallback`: disabled; `native`: no numbers.
    assert!(
        matches!(
            err.reason(),
            Unavailable::NotAdvertised { .. }
                | Unavailable::Disabled
                | Unavailable::NoSyscallNumbers { .. }
                | Unavailable::InvalidSelection { .. }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string().starts_with("kevent backend unavailable: "),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        format!("kevent backend unavailable: {}", err.reason())
    );
}

#[test]
fn current_on_a_stock_kernel_is_the_fallback_or_an_error() {
    if kevent_kernel() {
        eprintln!("skipped: this kernel advertises kevent");
        return;
    }
    match Backend::current() {
        Ok(b) => assert_eq!(b, Backend::Fallback),
        // KEVENT_BACKEND=native (or invalid) on a stock kernel.
        Err(e) => assert!(Backend::native().is_err(), "{e}"),
    }
}

#[test]
fn timer_ids_round_trip_through_timer_t() {
    let fallback = Backend::Fallback;
    for id in [0, 1, 7, u32::MAX] {
        let t = PosixTimerId::Fallback(TimerId(id));
        assert_eq!(fallback.timer_from_timer_t(t.to_timer_t()), Ok(t));
    }
    let native = Backend::Native(SyscallTable {
        init: -1,
        ctl: -1,
        get_events: -1,
        wait: -1,
        commit: -1,
        aio_sendfile: None,
    });
    for id in [0, 1, i32::MAX] {
        let t = PosixTimerId::Native(id);
        assert_eq!(native.timer_from_timer_t(t.to_timer_t()), Ok(t));
    }
    // Not an id: negative (glibc's SIGEV_THREAD pointers) or too wide.
    let neg = PosixTimerId::Native(-5).to_timer_t();
    assert_eq!(native.timer_from_timer_t(neg), Err(Errno::EINVAL));
    let wide = std::ptr::without_provenance_mut(1usize << 40);
    assert_eq!(native.timer_from_timer_t(wide), Err(Errno::EINVAL));
    assert_eq!(fallback.timer_from_timer_t(wide), Err(Errno::EINVAL));
}

#[test]
fn timer_ids_of_the_other_backend_are_einval() {
    let native = Backend::Native(SyscallTable {
        init: -1,
        ctl: -1,
        get_events: -1,
        wait: -1,
        commit: -1,
        aio_sendfile: None,
    });
    let f = PosixTimerId::Fallback(TimerId(3));
    assert_eq!(native.timer_delete(f), Err(Errno::EINVAL));
    assert_eq!(
        Backend::Fallback.timer_delete(PosixTimerId::Native(3)),
        Err(Errno::EINVAL)
    );
    assert!(matches!(native.timer_gettime(f), Err(Errno::EINVAL)));
}

/// The native arm's POSIX timer calls are the kernel's: on any kernel, a plain
/// `SIGEV_NONE` timer can be created, read back and deleted through them (no kevent
/// syscall is involved).
#[test]
fn native_timer_calls_are_the_kernels() {
    let native = Backend::Native(SyscallTable {
        init: -1,
        ctl: -1,
        get_events: -1,
        wait: -1,
        commit: -1,
        aio_sendfile: None,
    });
    // SAFETY: `sigevent` is plain data (ints, a union of int and pointer, padding): all
    // zeroes is a valid value.
    let mut sev: libc::sigevent = unsafe { std::mem::zeroed() };
    sev.sigev_notify = libc::SIGEV_NONE;
    let id = native
        .timer_create(libc::CLOCK_MONOTONIC, &sev)
        .expect("timer_create");
    assert!(matches!(id, PosixTimerId::Native(n) if n >= 0));
    let new = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 5_000_000,
        },
        it_value: libc::timespec {
            tv_sec: 100,
            tv_nsec: 0,
        },
    };
    let mut old = new;
    native
        .timer_settime(id, 0, &new, Some(&mut old))
        .expect("settime");
    assert_eq!((old.it_value.tv_sec, old.it_value.tv_nsec), (0, 0));
    let cur = native.timer_gettime(id).expect("gettime");
    assert_eq!(cur.it_interval.tv_nsec, 5_000_000);
    assert!(cur.it_value.tv_sec > 90);
    native.timer_delete(id).expect("delete");
    assert_eq!(native.timer_delete(id), Err(Errno::EINVAL));
    let bad = libc::itimerspec {
        it_interval: ZERO,
        it_value: libc::timespec {
            tv_sec: 0,
            tv_nsec: 2_000_000_000,
        },
    };
    let id = native
        .timer_create(libc::CLOCK_MONOTONIC, &sev)
        .expect("timer_create");
    assert_eq!(native.timer_settime(id, 0, &bad, None), Err(Errno::EINVAL));
    native.timer_delete(id).expect("delete");
}

/// P37: a kevent kernel that advertised five syscall numbers has no native AIO: the call is
/// `ENOSYS` without any syscall (the numbers here are invalid ones), whatever the fds; with a
/// sixth number the backend says it can start transfers. The fallback always can.
#[test]
fn p37_native_aio_only_with_a_sixth_number() {
    let five = SyscallTable {
        init: -1,
        ctl: -1,
        get_events: -1,
        wait: -1,
        commit: -1,
        aio_sendfile: None,
    };
    let native = Backend::Native(five);
    assert!(!native.has_aio());
    assert_eq!(native.aio_sendfile(-1, -1, -1, 0, 1), Err(Errno::ENOSYS));
    assert_eq!(native.aio_sendfile(0, 1, 2, 0, 0), Err(Errno::ENOSYS));
    let six = Backend::Native(SyscallTable {
        aio_sendfile: Some(-1),
        ..five
    });
    assert!(six.has_aio());
    assert!(Backend::Fallback.has_aio());
}
