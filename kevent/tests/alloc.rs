//! Issue 23, item 6: the steady state of ADD and REMOVE through the safe API allocates
//! nothing (on this thread: the counting allocator counts per thread, so the test harness's
//! other threads do not disturb it).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::os::unix::net::UnixStream;

use kevent::{Queue, Socket, SocketEvents, Timer, User};

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded unchanged to the system allocator; the counter is a
// thread-local `Cell` with a const initialiser, which does not allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract for `alloc` is passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout (above).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract for `realloc` is passed on unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations(f: impl FnOnce()) -> u64 {
    let before = ALLOCS.with(Cell::get);
    f();
    ALLOCS.with(Cell::get) - before
}

#[test]
fn add_and_remove_allocate_nothing_in_the_steady_state() {
    assert!(
        allocations(|| drop(std::hint::black_box(vec![0u8; 8]))) >= 1,
        "the counter counts"
    );
    let q = Queue::new().unwrap();
    let (a, _b) = UnixStream::pair().unwrap();
    let round = |i: u64| {
        let u = q.add(User::new(i % 64)).unwrap();
        let s = q.add(Socket::new(&a, SocketEvents::RECV)).unwrap();
        let t = q
            .add(Timer::oneshot(std::time::Duration::from_secs(3600)))
            .unwrap();
        drop((u, s, t));
    };
    // Warm up: the key shards and the engine's tables reach their size.
    for i in 0..2000 {
        round(i);
    }
    let n = allocations(|| {
        for i in 0..1000 {
            round(i);
        }
    });
    assert_eq!(
        n, 0,
        "{n} allocations in 1000 rounds of 3 ADDs and 3 REMOVEs"
    );
}
