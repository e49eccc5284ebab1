//! A kevent queue inside tokio: the queue fd is pollable, so `AsyncFd` can await it.
//!
//! `AsyncFd::register_with_interest` is `unsafe` (tokio asks that the fd stay open and the
//! same for the registration's life); an `Arc<Queue>` guarantees it, since the queue owns
//! its fd. The task awaits readability of the queue fd, then takes what is ready with
//! `get_events(.., Timeout::NOW)` (never blocking the runtime), and clears readiness only
//! when nothing was left. Events: a 10 ms periodic timer, and a user event that a plain
//! thread marks ready. Exits after 5 ticks and 3 user events (or fails after 10 s).
//!
//! ```text
//! cargo run -p kevent --example async_tokio
//! ```

use std::sync::Arc;
use std::time::Duration;

use kevent::{EventKind, Events, Key, Queue, Timeout, Timer, User};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    // Non-blocking: even a mistaken timeout could not block the runtime's thread.
    let queue = Arc::new(Queue::builder().nonblocking(true).build()?);
    println!("async_tokio: {} backend", queue.backend());
    let _timer = queue.add(Timer::new(Duration::from_millis(10)))?;
    let _users: Vec<_> = (7..10)
        .filter_map(|id| queue.add(User::new(id)).ok())
        .collect();

    // A plain thread marks the user events, as a producer outside the runtime would.
    let producer = {
        let queue = Arc::clone(&queue);
        std::thread::spawn(move || -> Result<(), kevent::Error> {
            for id in 7..10 {
                std::thread::sleep(Duration::from_millis(15));
                queue.ready(&[Key::user(id)])?;
            }
            Ok(())
        })
    };

    // SAFETY: the `Arc<Queue>` moved into the AsyncFd keeps the queue, which owns its fd
    // (an `OwnedFd` closed only when the last `Arc` drops), so the fd stays open and names
    // the same queue for the AsyncFd's whole life, and `as_raw_fd` always returns it.
    let afd = unsafe { AsyncFd::register_with_interest(Arc::clone(&queue), Interest::READABLE) }?;
    let (mut ticks, mut users) = (0u32, 0u32);
    let mut events = Events::with_capacity(16);
    let work = async {
        while ticks < 5 || users < 3 {
            let mut guard = afd.readable().await?;
            let n = queue.get_events(&mut events, 0, Timeout::NOW)?;
            if n == 0 {
                guard.clear_ready();
                continue;
            }
            for event in &events {
                match event.kind() {
                    EventKind::Timer { expirations, .. } => ticks += expirations,
                    EventKind::User { id } => {
                        users += 1;
                        println!("user event {id}");
                    }
                    other => println!("unexpected {other:?}"),
                }
            }
        }
        Ok::<_, Box<dyn std::error::Error>>(())
    };
    tokio::time::timeout(Duration::from_secs(10), work).await??;
    producer.join().map_err(|_| "producer panicked")??;
    println!("async_tokio: {ticks} ticks, {users} user events");
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(run())
}
