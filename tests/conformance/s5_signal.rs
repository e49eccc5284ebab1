//! Spec section 5, SIGNAL: `raw[0]` = signal number; reported when the signal is sent to
//! the process, and delivered as usual (the program's handler runs) unless NOMASK is set in
//! `raw_u64`, which makes it reported only (no handler, no default action), also in a
//! process whose other threads have the signal unblocked. D8: deliveries between two
//! reports are coalesced and counted in `ret_data[0]`. Section 4: closing the queue releases
//! its kevents, so a closed queue's NOMASK kevent no longer swallows the signal.
//!
//! Signal dispositions belong to the process: every test runs in a child process.
#![allow(unsafe_code)]

use std::ffi::c_int;
use std::time::{Duration, Instant};

use kevent_test_support::*;

/// Sends `signo` to this process.
fn kill_self(signo: c_int) {
    // SAFETY: kill takes no pointers.
    assert_eq!(unsafe { libc::kill(libc::getpid(), signo) }, 0);
}

/// Blocks or unblocks `signo` in the calling thread.
fn thread_mask(how: c_int, signo: c_int) {
    // SAFETY: `set` is initialised by sigemptyset before use; the old set is not read.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signo);
        assert_eq!(libc::pthread_sigmask(how, &set, std::ptr::null_mut()), 0);
    }
}

/// Waits up to 5 s for the handler count to reach `n`.
#[track_caller]
fn handled_reaches(n: u32) {
    count_reaches(n, handled);
}

/// Waits up to 5 s for `count()` (a handler's runs) to reach `n`: the handler may run on
/// another thread, after the kevent was reported.
#[track_caller]
fn count_reaches(n: u32, count: fn() -> u32) {
    let start = Instant::now();
    while count() < n {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "handler ran {} times, expected {n}",
            count()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

isolated_test! {
    /// Without NOMASK the signal is reported (`ret_data[0]` = 1) and delivered as usual:
    /// the program's handler runs.
    fn s5_signal_reported_and_handler_runs_without_nomask(b) {
        install_counting_handler(libc::SIGUSR1, true);
        let q = Queue::new(b);
        let e = signal(libc::SIGUSR1, false, 0);
        q.add_ok(&[e]);
        q.expect_no_events();
        kill_self(libc::SIGUSR1);
        handled_reaches(1);
        q.expect_within(Duration::from_secs(5), &[Want::of(&e).data0(1)]);
        q.expect_no_events();
        assert_eq!(handled(), 1);
    }

    /// With NOMASK the signal is reported only: the program's handler does not run.
    fn s5_signal_nomask_reported_only(b) {
        install_counting_handler(libc::SIGUSR1, true);
        let q = Queue::new(b);
        let e = signal(libc::SIGUSR1, true, 0);
        q.add_ok(&[e]);
        kill_self(libc::SIGUSR1);
        q.expect_within(Duration::from_secs(5), &[Want::of(&e).data0(1)]);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(handled(), 0, "the handler ran");
    }

    /// With NOMASK the default action does not happen: SIGTERM and SIGINT do not terminate.
    fn s5_signal_nomask_default_action_does_not_happen(b) {
        let q = Queue::new(b);
        let term = signal(libc::SIGTERM, true, 0);
        let int = signal(libc::SIGINT, true, 0);
        q.add_ok(&[term, int]);
        kill_self(libc::SIGTERM);
        kill_self(libc::SIGINT);
        q.expect_within(Duration::from_secs(5), &[Want::of(&term).data0(1), Want::of(&int).data0(1)]);
        // Still alive to say so.
    }

    /// NOMASK holds in a process with a second thread that has the signal unblocked (the
    /// calling thread blocks it): sent to the process or to that thread, the signal is
    /// reported and the handler never runs.
    fn s5_signal_nomask_with_a_second_thread_unblocked(b) {
        install_counting_handler(libc::SIGUSR2, true);
        let q = Queue::new(b);
        let e = signal(libc::SIGUSR2, true, 0);
        q.add_ok(&[e]);
        thread_mask(libc::SIG_BLOCK, libc::SIGUSR2);
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (ptx, prx) = std::sync::mpsc::channel();
        let other = std::thread::spawn(move || {
            thread_mask(libc::SIG_UNBLOCK, libc::SIGUSR2);
            // SAFETY: pthread_self takes no arguments.
            ptx.send(unsafe { libc::pthread_self() } as usize).unwrap();
            rx.recv().unwrap();
        });
        let tid = prx.recv().unwrap();
        // To the thread itself.
        // SAFETY: `tid` is a live thread of this process (it waits on `rx`).
        assert_eq!(unsafe { libc::pthread_kill(tid as libc::pthread_t, libc::SIGUSR2) }, 0);
        q.expect_within(Duration::from_secs(5), &[Want::of(&e).data0(1)]);
        // To the process (only that thread, or the harness's, can take it).
        kill_self(libc::SIGUSR2);
        q.expect_within(Duration::from_secs(5), &[Want::of(&e).data0(1)]);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(handled(), 0, "the handler ran");
        tx.send(()).unwrap();
        other.join().unwrap();
    }

    /// D8: deliveries between two reports are coalesced into one event whose `ret_data[0]`
    /// counts them.
    fn d8_signal_deliveries_coalesced_and_counted(b) {
        install_counting_handler(libc::SIGUSR1, true);
        let q = Queue::new(b);
        let e = signal(libc::SIGUSR1, false, 0);
        q.add_ok(&[e]);
        for i in 1..=5 {
            kill_self(libc::SIGUSR1);
            // Wait for each delivery, so the kernel cannot merge two pending signals.
            handled_reaches(i);
        }
        std::thread::sleep(Duration::from_millis(20));
        q.expect(&ms(1000), &[Want::of(&e).data0(5)]);
        q.expect_no_events();
        kill_self(libc::SIGUSR1);
        handled_reaches(6);
        q.expect_within(Duration::from_secs(5), &[Want::of(&e).data0(1)]);
    }

    /// D8 with a READY mark: a SIGNAL kevent added with REQ_READY and a signal delivered
    /// before the wait are one event counting both (a mark is one occurrence, as for
    /// UNOTIFY, P8), never two events over two waits. (The fallback once delivered the
    /// marked kevent before it looked at the signals of the same wait; the native-against-
    /// fallback differential test found it.)
    fn d8_a_mark_and_a_signal_before_the_wait_are_one_event(b) {
        install_counting_handler(libc::SIGUSR1, true);
        let q = Queue::new(b);
        let e = signal(libc::SIGUSR1, false, KEVENT_REQ_READY);
        q.add_ok(&[e]);
        kill_self(libc::SIGUSR1);
        handled_reaches(1);
        q.expect(&ZERO, &[Want::of(&e).data0(2)]);
        q.expect_no_events();
    }

    /// A signal is reported to every queue that watches it.
    fn s5_signal_reported_to_every_watching_queue(b) {
        install_counting_handler(libc::SIGUSR1, true);
        let q1 = Queue::new(b);
        let q2 = Queue::new(b);
        let e = signal(libc::SIGUSR1, false, 0);
        q1.add_ok(&[e]);
        q2.add_ok(&[e]);
        kill_self(libc::SIGUSR1);
        q1.expect_within(Duration::from_secs(5), &[Want::of(&e).data0(1)]);
        q2.expect_within(Duration::from_secs(5), &[Want::of(&e).data0(1)]);
        handled_reaches(1);
    }

    /// REMOVE of a NOMASK kevent gives the signal back to the program: its handler runs and
    /// nothing is reported.
    fn s5_signal_remove_gives_the_signal_back(b) {
        install_counting_handler(libc::SIGUSR1, true);
        let q = Queue::new(b);
        let e = signal(libc::SIGUSR1, true, 0);
        q.add_ok(&[e]);
        q.remove_ok(&[e]);
        kill_self(libc::SIGUSR1);
        handled_reaches(1);
        std::thread::sleep(Duration::from_millis(20));
        q.expect_no_events();
    }

    /// Section 4: closing the queue fd releases every kevent: a closed queue's NOMASK
    /// kevent no longer swallows the signal, the program's handler runs again (on the
    /// fallback at the first delivery after the close, before the engine releases the kevent
    /// itself: decision P17).
    fn s4_close_releases_signal_kevents(b) {
        install_counting_handler(libc::SIGUSR1, true);
        let mut q = Queue::new(b);
        q.add_ok(&[signal(libc::SIGUSR1, true, 0)]);
        q.close();
        kill_self(libc::SIGUSR1);
        handled_reaches(1);
    }

    /// Signal numbers that are not signals are rejected per entry (`-EINVAL`).
    fn s5_signal_invalid_number_einval(b) {
        let q = Queue::new(b);
        for signo in [0, 65, 1000, -1] {
            let e = signal(signo, false, 0);
            expect_events(&q.add(&[e]), &[Want::of(&e).broken(Errno::EINVAL)]);
        }
        assert_usable(&q);
    }

    /// Decision P27: a SIGNAL id is the signal number and the NOMASK bit, nothing else: an
    /// ADD with any of id bits 32-62 set is `-EINVAL` for that entry (and registers
    /// nothing: the plain id is then still free).
    fn p27_signal_id_high_bits_einval(b) {
        let q = Queue::new(b);
        for (bit, nomask) in [(32, false), (40, true), (62, false), (47, true)] {
            let mut e = signal(libc::SIGUSR1, nomask, 0);
            e.id = kevent_id::from_u64(e.id.as_u64() | (1 << bit));
            expect_events(&q.add(&[e]), &[Want::of(&e).broken(Errno::EINVAL)]);
        }
        let e = signal(libc::SIGUSR1, false, 0);
        q.add_ok(&[e]);
        q.remove_ok(&[e]);
        assert_usable(&q);
    }

    /// Decision P27: a queue watches a signal once: the other NOMASK variant of a watched
    /// signal is `-EEXIST` (both ways round), the registered kevent stays as it was, and
    /// after its REMOVE the other variant is accepted. Another queue is not concerned.
    fn p27_signal_other_nomask_variant_eexist(b) {
        install_counting_handler(libc::SIGUSR1, true);
        let q = Queue::new(b);
        let other = Queue::new(b);
        for first_nomask in [false, true] {
            let first = signal(libc::SIGUSR1, first_nomask, 0);
            let second = signal(libc::SIGUSR1, !first_nomask, 0);
            q.add_ok(&[first]);
            expect_events(&q.add(&[second]), &[Want::of(&second).broken(Errno::EEXIST)]);
            // The first is still the one registered: REMOVE of the refused key finds nothing.
            expect_events(
                &q.ctl_in_place(KEVENT_CTL_REMOVE, &[second]),
                &[Want::of(&second).broken(Errno::ENOENT)],
            );
            other.add_ok(&[second]);
            other.remove_ok(&[second]);
            q.remove_ok(&[first]);
            q.add_ok(&[second]);
            q.remove_ok(&[second]);
        }
        // The refusal left the watching intact: a signal is reported once, as the
        // registered variant says (without NOMASK the handler runs too).
        let e = signal(libc::SIGUSR1, false, 0);
        q.add_ok(&[e]);
        let nomask = signal(libc::SIGUSR1, true, 0);
        expect_events(&q.add(&[nomask]), &[Want::of(&nomask).broken(Errno::EEXIST)]);
        kill_self(libc::SIGUSR1);
        handled_reaches(1);
        q.expect_within(Duration::from_secs(5), &[Want::of(&e).data0(1)]);
        q.expect_no_events();
    }
}

/// Runs of [`chaining_handler`].
static CHAINED_RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
/// The handler [`chaining_handler`] replaced (0: none, or not a function).
static REPLACED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A program handler installed after the kevent, as `tokio::signal` (signal-hook) installs
/// one: it counts, then calls the handler it replaced, if that was a function.
extern "C" fn chaining_handler(signo: c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    use std::sync::atomic::Ordering::SeqCst;
    CHAINED_RUNS.fetch_add(1, SeqCst);
    let prev = REPLACED.load(SeqCst);
    if prev != 0 {
        // SAFETY: `prev` is the SA_SIGINFO handler sigaction reported as replaced (checked
        // when it was stored); the kernel's `info` and `ctx` are passed on unchanged.
        let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute::<usize, _>(prev) };
        f(signo, info, ctx);
    }
}

/// Sends SIGUSR1 until the queue reports a delivery (each wait 300 ms; fails after 10 s);
/// returns how many were sent.
fn until_reported_again(q: &Queue) -> u32 {
    let start = Instant::now();
    let mut sent = 0;
    loop {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the kevent never reported again"
        );
        kill_self(libc::SIGUSR1);
        sent += 1;
        if !q.get(8, &ms(300)).is_empty() {
            return sent;
        }
    }
}

isolated_test! {
    /// Decision P34 (issue 23 item 8): a handler the program installs after a SIGNAL kevent
    /// was added (here one that chains to the handler it replaced, as signal-hook's and so
    /// tokio::signal's does) does not silence the kevent for good: within a bounded time the
    /// kevent reports deliveries again, the program's handler runs exactly once per
    /// delivery, and the signal's default action (terminate) never happens. Natively a
    /// handler never stands between the signal and the kevent.
    fn p34_signal_kevent_survives_a_handler_installed_after_it(b) {
        use std::sync::atomic::Ordering::SeqCst;
        let q = Queue::new(b);
        let e = signal(libc::SIGUSR1, false, 0);
        q.add_ok(&[e]);
        // SAFETY: `sa` is fully initialised; `old` is written by sigaction.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = chaining_handler as extern "C" fn(c_int, *mut libc::siginfo_t, *mut libc::c_void) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            sa.sa_flags = libc::SA_SIGINFO;
            let mut old: libc::sigaction = std::mem::zeroed();
            assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, &mut old), 0);
            let h = old.sa_sigaction;
            if h != libc::SIG_DFL && h != libc::SIG_IGN && old.sa_flags & libc::SA_SIGINFO != 0 {
                REPLACED.store(h, SeqCst);
            }
        }
        let chained = || CHAINED_RUNS.load(SeqCst);
        let sent = until_reported_again(&q);
        count_reaches(sent, chained);
        // From now on every delivery is reported and handled once (one at a time: pending
        // standard signals coalesce in the kernel).
        q.expect_no_events();
        for i in 1..=3 {
            kill_self(libc::SIGUSR1);
            q.expect_within(Duration::from_secs(5), &[Want::of(&e).data0(1)]);
            count_reaches(sent + i, chained);
        }
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(chained(), sent + 3, "the program's handler ran once per delivery");
        // A handler that does not chain (as ctrlc's): the kevent reports again within a
        // bounded time all the same, and that handler runs once per delivery.
        install_counting_handler(libc::SIGUSR1, true);
        let sent = until_reported_again(&q);
        handled_reaches(sent);
        kill_self(libc::SIGUSR1);
        q.expect_within(Duration::from_secs(5), &[Want::of(&e).data0(1)]);
        handled_reaches(sent + 1);
        assert_eq!(handled(), sent + 1, "the program's handler ran once per delivery");
    }
}
