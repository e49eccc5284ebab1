//! Threads: kernel ids and whether a thread sleeps.

use std::time::{Duration, Instant};

/// This thread's kernel id.
pub fn gettid() -> libc::pid_t {
    // SAFETY: gettid takes no arguments and touches no memory.
    unsafe { libc::gettid() }
}

/// Whether thread `tid` of this process is asleep (state `S`) according to `/proc`.
pub fn thread_sleeping(tid: libc::pid_t) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")) else {
        return false;
    };
    // The state follows the command name's closing parenthesis.
    stat.rsplit_once(')')
        .is_some_and(|(_, rest)| rest.trim_start().starts_with('S'))
}

/// Waits until every thread in `tids` is asleep, twice in a row 20 ms apart (so a thread
/// briefly asleep on a lock does not count), then returns; fails after 10 s.
#[track_caller]
pub fn until_asleep(tids: &[libc::pid_t]) {
    let start = Instant::now();
    let mut streak = 0;
    while streak < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "threads {tids:?} never all went to sleep"
        );
        if tids.iter().all(|&t| thread_sleeping(t)) {
            streak += 1;
        } else {
            streak = 0;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
