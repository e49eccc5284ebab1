//! A periodic timer and a signal in one loop.
//!
//! A 20 ms periodic timer ticks; on every third tick the program sends itself `SIGUSR1`,
//! which the queue watches with NOMASK (reported only: no handler runs, the default action,
//! terminating the process, does not happen). It exits after 9 ticks and 3 signals, or
//! fails after 10 s.
//!
//! ```text
//! cargo run -p kevent --example timer_signal
//! ```

use std::time::{Duration, Instant};

use kevent::{EventKind, Events, Queue, Signal, Signo, Timer};

const TICK: u64 = 1;
const USR1: u64 = 2;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let queue = Queue::new()?;
    println!("timer_signal: {} backend", queue.backend());
    let period = Duration::from_millis(20);
    let _timer = queue.add(Timer::new(period).token(TICK))?;
    let _signal = queue.add(Signal::new(Signo::USR1).nomask().token(USR1))?;

    let start = Instant::now();
    let (mut ticks, mut signals, mut sent) = (0u32, 0u32, 0u32);
    let mut events = Events::with_capacity(8);
    while ticks < 9 || signals < 3 {
        if start.elapsed() > Duration::from_secs(10) {
            return Err(format!("timed out: {ticks} ticks, {signals} signals").into());
        }
        queue.wait(&mut events, Duration::from_secs(1))?;
        for event in &events {
            match event.kind() {
                EventKind::Timer {
                    expirations,
                    expired_at_ms,
                    ..
                } => {
                    ticks += expirations;
                    println!("tick {ticks} (x{expirations}) at {expired_at_ms} ms");
                    if ticks / 3 > sent && sent < 3 {
                        sent += 1;
                        // SAFETY: raise(3) sends SIGUSR1 to this thread; the queue watches it
                        // with NOMASK, so it is reported and not acted upon.
                        unsafe { libc::raise(libc::SIGUSR1) };
                    }
                }
                EventKind::Signal { signo, count, .. } => {
                    signals += count;
                    println!("signal {signo:?} x{count}");
                }
                other => println!("unexpected {other:?}"),
            }
        }
    }
    let elapsed = start.elapsed();
    assert!(
        elapsed >= period * 9,
        "9 ticks cannot come before 9 periods"
    );
    println!("timer_signal: {ticks} ticks and {signals} signals in {elapsed:?}");
    Ok(())
}
