//! Helpers shared by the integration tests: exact `expect_events` / `expect_no_events`
//! (mio's, made exact: an event nobody expected fails the test; the matching is the
//! conformance harness's one matcher, `kevent_test_support::match_exact_by`), fd helpers.
#![allow(dead_code)]

use std::os::fd::{FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use kevent::{Event, Events, Key, Queue, Timeout};
use kevent_test_support::match_exact_by;

/// One expected event: its key and a predicate on the whole event.
pub struct ExpectEvent {
    key: Key,
    what: String,
    pred: Box<dyn Fn(&Event) -> bool>,
}

impl ExpectEvent {
    /// Any event of `key`.
    pub fn key(key: Key) -> ExpectEvent {
        ExpectEvent {
            key,
            what: "any".into(),
            pred: Box::new(|_| true),
        }
    }

    /// An event of `key` for which `pred` holds (`what` describes it in failures).
    pub fn with(key: Key, what: &str, pred: impl Fn(&Event) -> bool + 'static) -> ExpectEvent {
        ExpectEvent {
            key,
            what: what.into(),
            pred: Box::new(pred),
        }
    }

    fn matches(&self, e: &Event) -> bool {
        e.key() == self.key && (self.pred)(e)
    }
}

impl std::fmt::Debug for ExpectEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} ({})", self.key, self.what)
    }
}

/// Waits (up to 5 s) until every expected event was seen. Exact: an event that matches no
/// expectation fails, and so does one expectation matched twice by one wait (the spec
/// delivers a kevent at most once per wait). A later wait may repeat an already matched
/// event (level kevents, D7). Returns the events seen.
#[track_caller]
pub fn expect_events(queue: &Queue, expected: Vec<ExpectEvent>) -> Vec<Event> {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut events = Events::with_capacity(64);
    let mut matched = vec![false; expected.len()];
    let mut seen = Vec::new();
    while matched.iter().any(|m| !m) {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "timed out; still expected {:?}; seen {seen:?}",
            expected
                .iter()
                .zip(&matched)
                .filter(|(_, m)| !**m)
                .map(|(e, _)| e)
                .collect::<Vec<_>>()
        );
        queue
            .wait(&mut events, Timeout::after(left))
            .expect("get_events");
        let got: Vec<Event> = events.iter().collect();
        let (missing, extra) = match_exact_by(&got, &expected, |x, ev| x.matches(ev));
        assert!(
            extra.is_empty(),
            "unexpected events {:?}; expected {expected:?}",
            extra.iter().map(|&g| &got[g]).collect::<Vec<_>>()
        );
        for (w, m) in matched.iter_mut().enumerate() {
            *m |= !missing.contains(&w);
        }
        seen.extend(got);
    }
    seen
}

/// No event within `within`.
#[track_caller]
pub fn expect_no_events(queue: &Queue, within: Duration) {
    let mut events = Events::with_capacity(16);
    let n = queue
        .wait(&mut events, Timeout::after(within))
        .expect("get_events");
    assert_eq!(n, 0, "unexpected events: {events:?}");
}

/// A pipe: (read end, write end), close-on-exec.
pub fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two ints into `fds`, a local array of two.
    let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) };
    assert_eq!(r, 0, "pipe2: {}", std::io::Error::last_os_error());
    // SAFETY: pipe2 just returned these two fds; nothing else owns them.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

/// Writes `data` to an fd.
pub fn write_fd(fd: &OwnedFd, data: &[u8]) {
    let mut f = std::fs::File::from(fd.try_clone().expect("dup"));
    std::io::Write::write_all(&mut f, data).expect("write");
}

/// Reads what is there from an fd (non-blocking fds).
pub fn drain_fd(fd: &OwnedFd) -> usize {
    let mut f = std::fs::File::from(fd.try_clone().expect("dup"));
    let mut buf = [0u8; 4096];
    let mut total = 0;
    loop {
        match std::io::Read::read(&mut f, &mut buf) {
            Ok(0) => return total,
            Ok(n) => total += n,
            Err(_) => return total,
        }
    }
}

/// A fresh empty directory under the temp dir.
pub fn temp_dir(tag: &str) -> std::path::PathBuf {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let p = std::env::temp_dir().join(format!("kevent-test-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    std::fs::create_dir_all(&p).expect("mkdir");
    p
}
