//! Four worker threads on one queue, woken by user events (issue 23's program (b)).
//!
//! The main thread registers `JOBS` user events and marks them ready in batches; each ready
//! kevent is delivered to exactly one waiting worker (each wait takes one event). Then one
//! "stop" user event per worker is marked: a worker exits after taking one, so each worker
//! gets exactly one. The program checks that every job was handled exactly once.
//!
//! ```text
//! cargo run -p kevent --example user_workers -- [JOBS]
//! ```

use std::sync::atomic::{AtomicU32, Ordering};

use kevent::{EventKind, Events, Key, Queue, Timeout, User};

const WORKERS: u64 = 4;
/// Stop events have ids from here on (job ids are below).
const STOP: u64 = 1 << 32;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let jobs: u64 = match std::env::args().nth(1) {
        Some(n) => n.parse()?,
        None => 1000,
    };
    let queue = Queue::new()?;
    println!(
        "user_workers: {} backend, {jobs} jobs, {WORKERS} workers",
        queue.backend()
    );
    let _regs = queue
        .add_all((0..jobs).chain(STOP..STOP + WORKERS).map(User::new))
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    let handled: Vec<AtomicU32> = (0..jobs).map(|_| AtomicU32::new(0)).collect();

    let per_worker = std::thread::scope(|s| {
        let workers: Vec<_> = (0..WORKERS)
            .map(|w| {
                let (queue, handled) = (&queue, &handled);
                s.spawn(move || -> kevent::Result<u64> {
                    let mut events = Events::with_capacity(1);
                    let mut mine = 0;
                    loop {
                        queue.wait(&mut events, Timeout::FOREVER)?;
                        for event in &events {
                            match event.kind() {
                                EventKind::User { id } if id >= STOP => {
                                    println!("worker {w} handled {mine} jobs");
                                    return Ok(mine);
                                }
                                EventKind::User { id } => {
                                    handled[id as usize].fetch_add(1, Ordering::Relaxed);
                                    mine += 1;
                                }
                                other => println!("worker {w}: unexpected {other:?}"),
                            }
                        }
                    }
                })
            })
            .collect();
        let keys: Vec<Key> = (0..jobs).map(Key::user).collect();
        for batch in keys.chunks(100) {
            queue.ready(batch)?;
        }
        // Every job must be taken before the stops are marked, or a worker could stop early:
        // wait until the counts add up.
        while handled
            .iter()
            .map(|h| h.load(Ordering::Relaxed))
            .sum::<u32>()
            < jobs as u32
        {
            std::thread::yield_now();
        }
        let stops: Vec<Key> = (STOP..STOP + WORKERS).map(Key::user).collect();
        queue.ready(&stops)?;
        workers
            .into_iter()
            .map(|w| w.join().map_err(|_| "worker panicked")?.map_err(Into::into))
            .collect::<Result<Vec<u64>, Box<dyn std::error::Error>>>()
    })?;

    let twice = handled
        .iter()
        .filter(|h| h.load(Ordering::Relaxed) > 1)
        .count();
    let never = handled
        .iter()
        .filter(|h| h.load(Ordering::Relaxed) == 0)
        .count();
    if twice > 0 || never > 0 || per_worker.iter().sum::<u64>() != jobs {
        return Err(format!("{twice} jobs handled twice, {never} never").into());
    }
    println!("all {jobs} jobs handled exactly once");
    Ok(())
}
