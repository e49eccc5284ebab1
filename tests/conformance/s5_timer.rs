//! Spec section 5, TIMER: `raw[0]` seconds and `raw[1]` nanoseconds (non-zero) on
//! CLOCK_MONOTONIC, periodic unless ONESHOT; `ret_data[0]` = CLOCK_MONOTONIC milliseconds
//! (low 32 bits) at the expiry; D8: `ret_data[1]` = expirations since the last delivery,
//! expiries that pile up are coalesced into one event.

use std::time::{Duration, Instant};

use kevent_test_support::*;

/// CLOCK_MONOTONIC in milliseconds, low 32 bits (the unit of `ret_data[0]`).
fn mono_ms() -> u32 {
    (clock_ns(libc::CLOCK_MONOTONIC) / 1_000_000) as u32
}

backend_test! {
    /// A timer fires after its interval on CLOCK_MONOTONIC: never early, not much late on the
    /// best of several runs; ONESHOT fires once and is unregistered.
    fn s5_timer_oneshot_fires_once_never_early(b) {
        let q = Queue::new(b);
        let interval = Duration::from_millis(30);
        let mut best = Duration::MAX;
        for i in 0..5u32 {
            let t = timer(0, 30_000_000 + i, KEVENT_REQ_ONESHOT);
            let start = Instant::now();
            q.add_ok(&[t]);
            let got = q.get(4, &ts(5, 0));
            let elapsed = start.elapsed();
            expect_events(&got, &[Want::of(&t).data1(1)]);
            assert!(elapsed >= interval, "fired after {elapsed:?}");
            best = best.min(elapsed - interval);
            // ONESHOT: gone.
            let r = q.ctl_in_place(KEVENT_CTL_REMOVE, &[t]);
            assert!(Want::of(&t).broken(Errno::ENOENT).matches(&r[0]));
        }
        assert!(best < Duration::from_millis(25), "best lateness {best:?}");
        let got = q.get(4, &ms(80));
        assert!(got.is_empty(), "{got:#?}");
    }

    /// Without ONESHOT a timer is periodic: it keeps firing, one event per expiry, until
    /// removed; `ret_data[0]` advances by about the interval.
    fn s5_timer_periodic_until_removed(b) {
        let q = Queue::new(b);
        let t = timer(0, 20_000_000, 0);
        let start = Instant::now();
        q.add_ok(&[t]);
        let mut stamps = Vec::new();
        while stamps.len() < 6 {
            for e in q.get(4, &ts(2, 0)) {
                expect_events(&[e], &[Want::of(&t)]);
                assert!(e.ret_data[1] >= 1);
                stamps.push((e.ret_data[0], e.ret_data[1]));
            }
            assert!(start.elapsed() < Duration::from_secs(10));
        }
        let expiries: u32 = stamps.iter().map(|s| s.1).sum();
        assert!(start.elapsed() >= Duration::from_millis(20) * expiries, "{expiries} expiries early");
        for w in stamps.windows(2) {
            let d = w[1].0.wrapping_sub(w[0].0);
            assert!(d >= 19 * w[1].1, "expiry stamps {w:?} closer than the interval");
        }
        q.remove_ok(&[t]);
        std::thread::sleep(Duration::from_millis(50));
        q.expect_no_events();
    }

    /// `ret_data[0]` is the CLOCK_MONOTONIC time of the expiry in milliseconds (low 32 bits):
    /// not before ADD + interval, not after the delivery.
    fn s5_timer_ret_data0_is_monotonic_ms_of_the_expiry(b) {
        let q = Queue::new(b);
        let t = timer(0, 40_000_000, KEVENT_REQ_ONESHOT);
        let added = mono_ms();
        q.add_ok(&[t]);
        let got = q.get(4, &ts(5, 0));
        let after = mono_ms();
        expect_events(&got, &[Want::of(&t)]);
        let stamp = got[0].ret_data[0];
        assert!(
            stamp.wrapping_sub(added) >= 40 && after.wrapping_sub(stamp) < 1000,
            "added {added}, stamp {stamp}, delivered {after}"
        );
    }

    /// D8: expiries that pile up before a delivery are coalesced into one event whose
    /// `ret_data[1]` counts them; the count restarts after each delivery.
    fn d8_timer_expirations_coalesced_and_counted(b) {
        let q = Queue::new(b);
        let t = timer(0, 10_000_000, 0);
        let start = Instant::now();
        q.add_ok(&[t]);
        std::thread::sleep(Duration::from_millis(205));
        let got = q.get(8, &ZERO);
        let elapsed = start.elapsed();
        expect_events(&got, &[Want::of(&t)]);
        let count = got[0].ret_data[1];
        let max = (elapsed.as_millis() / 10) as u32;
        assert!((15..=max).contains(&count), "count {count}, at most {max} periods elapsed");
        // After a delivery the count restarts: the next event counts only the periods since
        // (bounded by the time that passed, however slow the machine), not the 15 before.
        let got = q.get(8, &ms(15));
        let max = (start.elapsed() - elapsed).as_millis() as u32 / 10 + 1;
        for e in &got {
            assert!(e.ret_data[1] <= max, "{e:?}: at most {max} periods since the delivery");
        }
        q.remove_ok(&[t]);
    }

    /// The interval must be non-zero and `raw[1] < 1e9`: `-EINVAL` per entry otherwise.
    fn s5_timer_zero_or_invalid_interval_einval(b) {
        let q = Queue::new(b);
        for (s, ns) in [(0, 0), (0, 1_000_000_000), (1, u32::MAX)] {
            let t = timer(s, ns, 0);
            expect_events(&q.add(&[t]), &[Want::of(&t).broken(Errno::EINVAL)]);
        }
        assert_usable(&q);
    }

    /// Seconds and nanoseconds both count: a 1 s + 1 ns timer has not fired after 0.9 s.
    fn s5_timer_seconds_and_nanoseconds(b) {
        let q = Queue::new(b);
        let t = timer(1, 1, KEVENT_REQ_ONESHOT);
        let start = Instant::now();
        q.add_ok(&[t]);
        let got = q.get(4, &ms(900));
        assert!(got.is_empty(), "fired after {:?}", start.elapsed());
        let got = q.get(4, &ts(5, 0));
        expect_events(&got, &[Want::of(&t)]);
        assert!(start.elapsed() >= Duration::from_nanos(1_000_000_001));
    }
}
