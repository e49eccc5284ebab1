//! Errors carry the operation and the OS error; odd input never panics.

mod util;

use std::time::Duration;

use kevent::{Error, Events, Op, Queue, Timeout, Timer, User};

#[test]
fn errors_name_the_operation_and_keep_the_errno() {
    let q = Queue::new().unwrap();
    let mut events = Events::with_capacity(2);
    let e = q.wait_at_least(&mut events, 3, Timeout::NOW).unwrap_err();
    assert_eq!(e.op(), Op::GetEvents);
    assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
    assert!(e.to_string().starts_with("kevent_get_events: "), "{e}");
    assert!(std::error::Error::source(&e).is_some());
    let io: std::io::Error = e.into();
    assert_eq!(io.kind(), std::io::ErrorKind::InvalidInput);
    assert!(
        io.get_ref()
            .and_then(|i| i.downcast_ref::<Error>())
            .is_some()
    );

    let mut reg = q
        .add(User::new(1).flags(kevent::ReqFlags::ONESHOT | kevent::ReqFlags::READY))
        .unwrap();
    q.wait(&mut events, Timeout::FOREVER).unwrap();
    let e = reg.modify().token(1).apply().unwrap_err();
    assert_eq!(e.op(), Op::Modify);
    assert_eq!(e.errno(), Some(kevent_sys::Errno::ENOENT));
    assert!(e.to_string().contains("KEVENT_CTL_MODIFY"), "{e}");
}

#[test]
fn unknown_request_flags_fail_per_entry() {
    let q = Queue::new().unwrap();
    let added = q
        .add(User::new(1).flags(kevent::ReqFlags::from_bits_retain(0x400)))
        .unwrap_err();
    assert_eq!(added.error().raw_os_error(), Some(libc::EINVAL));
}

#[test]
fn odd_input_never_panics() {
    let q = Queue::new().unwrap();
    let mut events = Events::with_capacity(usize::MAX);
    assert_eq!(events.capacity(), Events::MAX_CAPACITY);
    assert_eq!(q.wait_at_least(&mut events, 0, Duration::ZERO).unwrap(), 0);
    // Duration::MAX means "until an event" (capped, D6): on a non-blocking queue it returns.
    let nb = Queue::builder().nonblocking(true).build().unwrap();
    assert_eq!(nb.wait(&mut events, Duration::MAX).unwrap(), 0);
    for d in [Duration::ZERO, Duration::MAX, Duration::from_nanos(1)] {
        let _ = q.add(Timer::new(d));
    }
    let _reg = q.add(User::new(u64::MAX)).unwrap();
    let _ = q
        .ready(&[kevent::Key::from_raw(u32::MAX, u64::MAX)])
        .unwrap();
    assert!(
        q.add(kevent::Signal::new(kevent::Signo::from_raw(i32::MIN)))
            .is_err()
    );
}
