//! `Signal` registrations. Signals are process-wide: this file is its own test process, and
//! its tests take a lock so that they do not see each other's signals.

mod util;

use std::sync::Mutex;
use std::time::Duration;

use kevent::{Errno, EventKind, Key, Queue, Signal, Signo};
use util::{ExpectEvent, expect_events, expect_no_events};

static SERIAL: Mutex<()> = Mutex::new(());

fn raise(signo: i32) {
    // SAFETY: raise(3) only sends a signal to this thread; the tests watch it with NOMASK or
    // use a signal whose default action is to be ignored.
    assert_eq!(unsafe { libc::raise(signo) }, 0);
}

#[test]
fn s5_nomask_signal_is_reported_with_its_count() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let q = Queue::new().unwrap();
    let reg = q.add(Signal::new(Signo::USR1).nomask().token(1)).unwrap();
    assert_eq!(reg.key(), Key::signal(Signo::USR1, true));
    raise(libc::SIGUSR1);
    raise(libc::SIGUSR1);
    let seen = expect_events(
        &q,
        vec![ExpectEvent::with(reg.key(), "SIGUSR1", |e| {
            matches!(
                e.kind(),
                EventKind::Signal {
                    signo: Signo::USR1,
                    nomask: true,
                    ..
                }
            )
        })],
    );
    let mut count = match seen[0].kind() {
        EventKind::Signal { count, .. } => count,
        _ => 0,
    };
    // Both raises may be reported together (D8) or one by one.
    if count < 2 {
        let more = expect_events(&q, vec![ExpectEvent::key(reg.key())]);
        if let EventKind::Signal { count: c, .. } = more[0].kind() {
            count += c;
        }
    }
    assert_eq!(count, 2);
    drop(reg);
    expect_no_events(&q, Duration::from_millis(30));
}

#[test]
fn s5_signal_without_nomask_is_reported_and_delivered() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let q = Queue::new().unwrap();
    // SIGURG's default action is to be ignored, so delivering it as usual is harmless.
    let reg = q.add(Signal::new(Signo::URG)).unwrap();
    raise(libc::SIGURG);
    expect_events(&q, vec![ExpectEvent::key(Key::signal(Signo::URG, false))]);
    drop(reg);
}

#[test]
fn s3_uncatchable_signals_fail_per_entry() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let q = Queue::new().unwrap();
    for signo in [libc::SIGKILL, libc::SIGSTOP, 0, -1, 1000] {
        let err = q
            .add(Signal::new(Signo::from_raw(signo)).nomask())
            .unwrap_err();
        assert_eq!(
            err.error().errno(),
            Some(Errno::EINVAL),
            "signal {signo}: {err:?}"
        );
        assert!(err.event().is_some_and(|e| e.is_broken()), "{err:?}");
    }
}
