//! What lives longer than an input: the once-per-process set-up ([`setup`], the probe
//! queue), and the end of each input ([`Harness::finish`]: close everything, check no fd
//! leaked).

use std::os::fd::RawFd;
use std::path::PathBuf;
use std::sync::Mutex;

use kevent_c::capi::backend::kevent_backend;
use kevent_c::capi::calls::{kevent_commit, kevent_ctl, kevent_get_events, kevent_init};
use kevent_c::capi::posix_timer::kevent_timer_delete;
use kevent_sys::{KEVENT_CTL_ADD, KEVENT_CTL_REMOVE, KEVENT_SIGNAL, kevent_id, ukevent};

#[cfg(fuzzing)]
use super::STATS;
use super::os::{close_fd, count_fds, errno, errno_name, list_fds};
use super::state::Harness;

/// Set up once per process: the probe queue and the scratch directory.
#[derive(Debug)]
pub(super) struct Global {
    /// A queue that lives for the whole process; a successful call on it after each input
    /// replaces the library's per-thread lookup cache, so that a closed queue's memory and
    /// internal fds are released before the fds are counted.
    pub(super) probe: RawFd,
    pub(super) dir: PathBuf,
}

pub(super) static GLOBAL: Mutex<Option<Global>> = Mutex::new(None);

extern "C" fn noop_handler(_: libc::c_int) {}

pub(super) fn setup() -> Global {
    // SAFETY: no arguments; a static string or NULL.
    if unsafe { kevent_backend() }.is_null() {
        panic!("kevent-fuzz: no kevent backend in this process (KEVENT_BACKEND?)");
    }
    // SAFETY: installs a handler that does nothing for SIGUSR1/SIGUSR2 (so raising them is
    // harmless whatever the library does), and ignores SIGPIPE (writes to closed pipes).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = noop_handler as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
        libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut());
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    #[cfg(fuzzing)]
    {
        extern "C" fn print_stats() {
            eprintln!("kevent-fuzz: {}", STATS.summary());
        }
        // SAFETY: registers a plain `extern "C"` function that lives for the whole program.
        unsafe { libc::atexit(print_stats) };
    }
    let dir = std::env::temp_dir().join(format!("kevent-fuzz-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    // SAFETY: no ring.
    let probe = unsafe { kevent_init(std::ptr::null_mut(), 0, 0) };
    assert!(
        probe >= 0,
        "kevent-fuzz: kevent_init failed: {}",
        errno_name(errno())
    );
    // The library's process-wide signal doorbell (an eventfd) is made by the first SIGNAL
    // kevent and lives for the process: make it now, so it is part of the baseline.
    let mut e = [ukevent::new(
        KEVENT_SIGNAL,
        kevent_id::signal(libc::SIGUSR2, true),
        1,
        0,
    )];
    // SAFETY: a one-entry local array.
    unsafe {
        kevent_ctl(probe, KEVENT_CTL_ADD, 1, e.as_mut_ptr());
        kevent_ctl(probe, KEVENT_CTL_REMOVE, 1, e.as_mut_ptr());
    }
    let zero = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let mut one = [ukevent::default()];
    // SAFETY: a one-entry local buffer.
    unsafe { kevent_get_events(probe, 0, 1, zero, one.as_mut_ptr(), 0) };
    Global { probe, dir }
}

impl Harness {
    /// Closes everything this input made, releases what the library still holds for closed
    /// queues, and checks that no fd was leaked.
    pub(super) fn finish(&mut self, g: &Global, fds_before: usize) {
        for (t, _) in std::mem::take(&mut self.timers) {
            let tid: libc::timer_t = std::ptr::without_provenance_mut(t);
            // SAFETY: a timer_t by value.
            let r = unsafe { kevent_timer_delete(tid) };
            if r != 0 {
                violation!(
                    self,
                    "kevent_timer_delete of live timer {t:#x} failed: {}",
                    errno_name(errno())
                );
            }
        }
        for q in std::mem::take(&mut self.queues) {
            close_fd(q.fd);
            self.bury(q.ring);
            self.dead_queues.push(q.fd);
        }
        for f in std::mem::take(&mut self.fds) {
            close_fd(f.fd);
        }
        // A closed queue's resources are released by the library's next call on its number
        // (or by a later kevent_init that sweeps it): make that happen now.
        for fd in std::mem::take(&mut self.dead_queues) {
            // SAFETY: integers only.
            let r = unsafe { kevent_commit(fd, 0, 0) };
            if r >= 0 {
                violation!(self, "kevent_commit on closed queue fd {fd} returned {r}");
            }
        }
        self.check_graveyard("the clean-up");
        self.graveyard.clear();
        self.graveyard_lens.clear();
        let mut one = [ukevent::default()];
        let zero = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a one-entry local buffer; a zero timeout.
        let r = unsafe { kevent_get_events(g.probe, 0, 1, zero, one.as_mut_ptr(), 0) };
        if r != 0 {
            violation!(
                self,
                "the probe queue returned {r} ({})",
                errno_name(errno())
            );
        }
        for i in 0..4 {
            let _ = std::fs::remove_file(self.dir.join(format!("f{i}")));
        }
        let n = count_fds();
        if n != fds_before {
            violation!(
                self,
                "fd leak: {n} fds open after the input, {fds_before} before it\n{}",
                list_fds()
            );
        }
    }
}
