//! `kevent::async_io::AsyncQueue` (feature `async-io`): the same contract on the async-io
//! reactor (smol, async-std).
#![cfg(feature = "async-io")]

use std::time::Duration;

use futures_lite::future;
use kevent::async_io::AsyncQueue;
use kevent::{EventKind, Key, Queue, User};

/// Generous bound for awaits that must complete (the bug it catches is a hang).
const HANG: Duration = Duration::from_secs(5);

/// `Some(output)`, or `None` if `d` passed first (the future is then dropped: cancelled).
async fn within<T>(d: Duration, f: impl Future<Output = T>) -> Option<T> {
    future::or(async { Some(f.await) }, async {
        async_io::Timer::after(d).await;
        None
    })
    .await
}

#[test]
fn next_hears_a_mark_from_another_thread_and_cancelling_loses_nothing() {
    future::block_on(async {
        let mut q = AsyncQueue::new(Queue::new().unwrap()).unwrap();
        let _u: Vec<_> = (0..3)
            .map(|i| q.get_ref().add(User::new(i)).unwrap())
            .collect();
        assert!(within(Duration::from_millis(10), q.next()).await.is_none());
        let marker = q.get_ref().try_clone().unwrap();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            marker
                .ready(&[Key::user(0), Key::user(1), Key::user(2)])
                .unwrap();
        });
        let mut ids = vec![];
        for _ in 0..3 {
            let e = within(HANG, q.next()).await.unwrap().unwrap();
            match e.kind() {
                EventKind::User { id } => ids.push(id),
                other => panic!("{other:?}"),
            }
        }
        ids.sort_unstable();
        assert_eq!(ids, [0, 1, 2]);
        assert!(within(Duration::from_millis(10), q.next()).await.is_none());
        t.join().unwrap();
        let mut events = kevent::Events::with_capacity(4);
        q.get_ref().ready(&[Key::user(1)]).unwrap();
        assert_eq!(within(HANG, q.wait(&mut events)).await.unwrap().unwrap(), 1);
        assert!(q.into_inner().is_ok());
    });
}
