//! A kevent queue on the `async-io` reactor (what smol and async-std run on), with
//! `kevent::async_io::AsyncQueue`: a user event marked by a plain thread and a timer, awaited
//! with no `unsafe`.
//!
//! ```text
//! cargo run -p kevent --features async-io --example async_smol
//! ```

use std::time::Duration;

use kevent::async_io::AsyncQueue;
use kevent::{EventKind, Key, Queue, Timer, User};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    futures_lite::future::block_on(async {
        let queue = Queue::new()?;
        println!("async_smol: {} backend", queue.backend());
        let _user = queue.add(User::new(7))?;
        let _timer = queue.add(Timer::oneshot(Duration::from_millis(20)))?;
        let marker = queue.try_clone()?;
        let mut queue = AsyncQueue::new(queue)?;
        let producer = std::thread::spawn(move || marker.ready(&[Key::user(7)]));
        let (mut user, mut timer) = (false, false);
        while !(user && timer) {
            match queue.next().await?.kind() {
                EventKind::User { id } => {
                    println!("user event {id}");
                    user = true;
                }
                EventKind::Timer { expirations, .. } => {
                    println!("timer x{expirations}");
                    timer = true;
                }
                other => println!("unexpected {other:?}"),
            }
        }
        producer.join().map_err(|_| "producer panicked")??;
        println!("async_smol: done");
        Ok(())
    })
}
