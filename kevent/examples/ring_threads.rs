//! A ring consumed by several threads at once (`SharedRing`).
//!
//! Producer threads mark user events ready (each id exactly once); consumer threads wait on
//! the shared ring, read their batches in place, and drop them (which commits the finished
//! prefix). At the end every id must have been consumed exactly once.
//!
//! ```text
//! cargo run -p kevent --example ring_threads -- [events] [producers] [consumers]
//! ```

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kevent::{Key, Queue, User};

fn arg(i: usize, default: usize) -> Result<usize, Box<dyn std::error::Error>> {
    Ok(match std::env::args().nth(i) {
        Some(a) => a.parse()?,
        None => default,
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n = arg(1, 50_000)?;
    let producers = arg(2, 2)?.max(1);
    let consumers = arg(3, 3)?.max(1);
    let queue = Queue::builder().ring_size(512).build()?;
    println!(
        "ring_threads: {} backend, {n} events, {producers} producers, {consumers} consumers",
        queue.backend()
    );
    let regs = queue
        .add_all((0..n as u64).map(User::new))
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    assert_eq!(regs.len(), n, "every user event registers");

    let ring = queue.shared_ring()?;
    let seen: Vec<AtomicU8> = (0..n).map(|_| AtomicU8::new(0)).collect();
    let consumed = AtomicUsize::new(0);
    let per_thread: Vec<AtomicUsize> = (0..consumers).map(|_| AtomicUsize::new(0)).collect();
    let start = Instant::now();
    let deadline = start + Duration::from_secs(60);
    std::thread::scope(|s| -> Result<(), kevent::Error> {
        for p in 0..producers {
            let queue = &queue;
            s.spawn(move || -> Result<(), kevent::Error> {
                let mine: Vec<Key> = (p..n)
                    .step_by(producers)
                    .map(|i| Key::user(i as u64))
                    .collect();
                for chunk in mine.chunks(128) {
                    queue.ready(chunk)?;
                }
                Ok(())
            });
        }
        for c in 0..consumers {
            let (ring, seen, consumed, per_thread) = (&ring, &seen, &consumed, &per_thread);
            s.spawn(move || -> Result<(), kevent::Error> {
                while consumed.load(Ordering::SeqCst) < n && Instant::now() < deadline {
                    let batch = ring.wait(64, Duration::from_millis(50))?;
                    for event in batch.iter() {
                        seen[event.key().id() as usize].fetch_add(1, Ordering::Relaxed);
                    }
                    per_thread[c].fetch_add(batch.len(), Ordering::Relaxed);
                    consumed.fetch_add(batch.len(), Ordering::SeqCst);
                    // `batch` drops here: its slots are marked done and committed.
                }
                Ok(())
            });
        }
        Ok(())
    })?;
    let elapsed = start.elapsed();
    let total = consumed.load(Ordering::SeqCst);
    let wrong = seen
        .iter()
        .filter(|c| c.load(Ordering::Relaxed) != 1)
        .count();
    for (c, k) in per_thread.iter().enumerate() {
        println!("consumer {c}: {} events", k.load(Ordering::Relaxed));
    }
    println!("ring_threads: {total} events in {elapsed:?}, {wrong} ids not seen exactly once");
    if total != n || wrong != 0 {
        return Err("lost or duplicated events".into());
    }
    Ok(())
}
