//! `kevent-bench add-scaling [PAIRS]` (issue 23, item 6): ADD + REMOVE pairs per second
//! from 1, 2 and 4 threads on one queue through the safe API (`Queue::add` of a `Pollable`
//! eventfd, then dropping the registration), against `epoll_ctl` ADD + DEL of the same
//! eventfds on one epoll instance from the same threads.
//!
//! Each thread registers and unregisters its own 64 eventfds round-robin, `PAIRS` pairs per
//! thread (default 20,000); the figure is all threads' pairs divided by the wall time from
//! the start barrier to the last thread's end. One run per row: indicative, not an
//! interval. On a machine with fewer cores than threads the rows show contention for CPUs
//! as much as for locks.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Barrier;

use kevent::{PollEvents, Pollable, Queue};

use crate::os;

const FDS: usize = 64;

/// Runs `work(thread)` on `threads` threads at once; returns the wall ns from the barrier to
/// the last end.
fn timed(threads: usize, work: impl Fn(usize) + Sync) -> u64 {
    let barrier = Barrier::new(threads + 1);
    let mut start = 0;
    std::thread::scope(|s| {
        for t in 0..threads {
            let (barrier, work) = (&barrier, &work);
            s.spawn(move || {
                barrier.wait();
                work(t);
            });
        }
        barrier.wait();
        start = os::now_ns();
    }); // joins every thread
    os::now_ns().saturating_sub(start)
}

fn eventfds(threads: usize) -> std::io::Result<Vec<Vec<OwnedFd>>> {
    (0..threads)
        .map(|_| (0..FDS).map(|_| os::eventfd()).collect())
        .collect()
}

fn kevent_rate(threads: usize, pairs: usize) -> std::io::Result<f64> {
    let queue = Queue::new().map_err(std::io::Error::from)?;
    let fds = eventfds(threads)?;
    let failed = std::sync::atomic::AtomicBool::new(false);
    let ns = timed(threads, |t| {
        for i in 0..pairs {
            match queue.add(Pollable::new(&fds[t][i % FDS], PollEvents::IN)) {
                Ok(reg) => drop(reg),
                Err(_) => failed.store(true, std::sync::atomic::Ordering::Relaxed),
            }
        }
    });
    if failed.into_inner() {
        return Err(std::io::Error::other("an ADD failed"));
    }
    Ok((threads * pairs) as f64 / (ns as f64 / 1e9))
}

fn epoll_rate(threads: usize, pairs: usize) -> std::io::Result<f64> {
    let ep = os::epoll()?;
    let fds = eventfds(threads)?;
    let failed = std::sync::atomic::AtomicBool::new(false);
    let ns = timed(threads, |t| {
        for i in 0..pairs {
            let fd = fds[t][i % FDS].as_raw_fd();
            let ok = os::epoll_ctl(
                ep.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                fd,
                libc::EPOLLIN as u32,
                0,
            )
            .and_then(|()| os::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_DEL, fd, 0, 0));
            if ok.is_err() {
                failed.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
    });
    if failed.into_inner() {
        return Err(std::io::Error::other("an epoll_ctl failed"));
    }
    Ok((threads * pairs) as f64 / (ns as f64 / 1e9))
}

/// `kevent-bench add-scaling [PAIRS]`: prints a Markdown table.
pub fn command(args: &[String]) -> std::io::Result<u8> {
    let pairs: usize = match args.first().map(|a| a.parse()) {
        None => 20_000,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("kevent-bench add-scaling: PAIRS must be a positive number");
            return Ok(2);
        }
    };
    let backend = Queue::new()
        .map(|q| q.backend().to_string())
        .unwrap_or_default();
    println!(
        "ADD + REMOVE pairs per second, {pairs} per thread, one queue / one epoll \
         ({backend} backend, {} CPUs)\n",
        os::allowed_cpus().len()
    );
    println!("| threads | kevent::Queue (Pollable) | epoll_ctl | ratio |");
    println!("|---|---|---|---|");
    for threads in [1, 2, 4] {
        let k = kevent_rate(threads, pairs)?;
        let e = epoll_rate(threads, pairs)?;
        println!("| {threads} | {:.0} | {:.0} | {:.2} |", k, e, k / e);
    }
    Ok(0)
}
