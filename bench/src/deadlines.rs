//! `kevent-bench deadlines [N]` (issue 23, item 1): N per-connection deadlines through the
//! safe API's `kevent::Timers` (one TIMER kevent, decision P31) and, with the `tokio`
//! feature, through tokio's timer wheel, in the same process and thread.
//!
//! Three figures per mechanism, each the thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`: time
//! other processes take from us is not counted) divided by N:
//!
//! * **insert**: N deadlines 60 s ahead (kevent: `Timers::insert`; tokio: a `sleep_until`
//!   polled once, which registers it in the wheel);
//! * **reset**: each moved 1 s later (kevent: `Timers::reset`, no system call; tokio:
//!   `Sleep::reset`);
//! * **expiry**: N deadlines spread over 100 ms, from the first wait until the last one is
//!   handed out (kevent: `wait` + `pop_expired`; tokio: one task per deadline awaiting its
//!   `sleep_until`, so a tokio expiry includes waking its task).
//!
//! One run, no repetitions: the figures are indicative, not intervals.

use std::time::{Duration, Instant};

use kevent::{Events, Queue, Timeout, Timers};

use crate::os;

/// What one mechanism measured, ns per deadline.
struct Row {
    name: &'static str,
    insert: f64,
    reset: f64,
    expiry: f64,
}

fn per(n: usize, start_ns: u64) -> f64 {
    (os::thread_cpu_ns() - start_ns) as f64 / n as f64
}

fn kevent_row(n: usize) -> kevent::Result<Row> {
    let queue = Queue::new()?;
    let mut timers = Timers::new(&queue, 1)?;
    let base = Instant::now() + Duration::from_secs(60);
    let t = os::thread_cpu_ns();
    let ids = (0..n)
        .map(|i| timers.insert(base + Duration::from_micros(i as u64), i as u64))
        .collect::<kevent::Result<Vec<_>>>()?;
    let insert = per(n, t);
    let t = os::thread_cpu_ns();
    for (i, id) in ids.iter().enumerate() {
        timers.reset(
            *id,
            base + Duration::from_secs(1) + Duration::from_micros(i as u64),
        )?;
    }
    let reset = per(n, t);
    drop(timers);

    let mut timers = Timers::new(&queue, 2)?;
    let start = Instant::now() + Duration::from_millis(10);
    let spread = Duration::from_millis(100);
    for i in 0..n {
        timers.insert(start + spread * i as u32 / n as u32, i as u64)?;
    }
    let mut events = Events::with_capacity(64);
    let mut expired = 0;
    let t = os::thread_cpu_ns();
    while expired < n {
        queue.wait(&mut events, Timeout::FOREVER)?;
        for e in &events {
            timers.handles(&e);
        }
        while timers.pop_expired()?.is_some() {
            expired += 1;
        }
    }
    Ok(Row {
        name: "kevent::Timers",
        insert,
        reset,
        expiry: per(n, t),
    })
}

#[cfg(feature = "tokio")]
fn tokio_row(n: usize) -> std::io::Result<Row> {
    use std::future::Future;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Waker};

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    rt.block_on(async {
        let base = tokio::time::Instant::now() + Duration::from_secs(60);
        let mut cx = Context::from_waker(Waker::noop());
        let t = os::thread_cpu_ns();
        let mut sleeps: Vec<_> = (0..n)
            .map(|i| {
                let mut s = Box::pin(tokio::time::sleep_until(
                    base + Duration::from_micros(i as u64),
                ));
                let _ = s.as_mut().poll(&mut cx);
                s
            })
            .collect();
        let insert = per(n, t);
        let t = os::thread_cpu_ns();
        for (i, s) in sleeps.iter_mut().enumerate() {
            s.as_mut()
                .reset(base + Duration::from_secs(1) + Duration::from_micros(i as u64));
        }
        let reset = per(n, t);
        drop(sleeps);

        let done = Arc::new(AtomicUsize::new(0));
        let start = tokio::time::Instant::now() + Duration::from_millis(10);
        let spread = Duration::from_millis(100);
        for i in 0..n {
            let done = Arc::clone(&done);
            let at = start + spread * i as u32 / n as u32;
            tokio::spawn(async move {
                tokio::time::sleep_until(at).await;
                done.fetch_add(1, Ordering::Relaxed);
            });
        }
        let t = os::thread_cpu_ns();
        while done.load(Ordering::Relaxed) < n {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        Ok(Row {
            name: "tokio timer wheel",
            insert,
            reset,
            expiry: per(n, t),
        })
    })
}

/// `kevent-bench deadlines [N]`: prints a Markdown table.
pub fn command(args: &[String]) -> std::io::Result<u8> {
    let n: usize = match args.first().map(|a| a.parse()) {
        None => 100_000,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("kevent-bench deadlines: N must be a positive number");
            return Ok(2);
        }
    };
    let kevent = kevent_row(n).map_err(std::io::Error::from)?;
    #[cfg(feature = "tokio")]
    let rows = [kevent, tokio_row(n)?];
    #[cfg(not(feature = "tokio"))]
    let rows = [kevent];
    println!(
        "{n} deadlines, one thread, CPU ns per deadline ({} backend)\n",
        Queue::new()
            .map(|q| q.backend().to_string())
            .unwrap_or_default()
    );
    println!("| mechanism | insert | reset (later) | expiry |");
    println!("|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {:.0} | {:.0} | {:.0} |",
            r.name, r.insert, r.reset, r.expiry
        );
    }
    if cfg!(not(feature = "tokio")) {
        println!("\n(tokio's row: build kevent-bench with `--features tokio`)");
    }
    Ok(0)
}
