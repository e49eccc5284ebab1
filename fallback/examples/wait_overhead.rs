//! Per-wait overhead of the fallback engine against a raw `epoll_wait` loop doing the same
//! work (issue 3's measurement; the full poller benchmark lives in `kevent-bench`).
//!
//! N socketpairs, read ends all watched, A active (evenly spaced). One round: write one byte
//! to each active pair, one wait that returns them, read each byte. Rounds of the two
//! mechanisms are interleaved in blocks so that machine noise hits both alike; the figure is
//! the median of the per-block means, in microseconds per round.
//!
//! `cargo run --release -p kevent-fallback --example wait_overhead [rounds]`

use std::time::Instant;

use kevent_fallback as kf;
use kevent_sys::*;

struct Pairs {
    rd: Vec<i32>,
    wr: Vec<i32>,
}

fn pairs(n: usize) -> Pairs {
    let mut p = Pairs {
        rd: vec![],
        wr: vec![],
    };
    for _ in 0..n {
        let mut sv = [0; 2];
        // SAFETY: `sv` is valid for two ints.
        let r = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_NONBLOCK,
                0,
                sv.as_mut_ptr(),
            )
        };
        assert_eq!(r, 0, "socketpair: raise the fd limit (ulimit -n)");
        p.rd.push(sv[0]);
        p.wr.push(sv[1]);
    }
    p
}

fn write1(fd: i32) {
    // SAFETY: writes one byte from a static.
    unsafe { libc::write(fd, b"x".as_ptr().cast(), 1) };
}

fn read1(fd: i32) {
    let mut b = 0u8;
    // SAFETY: reads one byte into `b`.
    unsafe { libc::read(fd, (&mut b as *mut u8).cast(), 1) };
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid rlimit out-pointers.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        // Root may raise the hard limit; everyone may raise the soft one to the hard one.
        let want = libc::rlimit {
            rlim_cur: 1 << 16,
            rlim_max: lim.rlim_max.max(1 << 16),
        };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &want) != 0 {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
    println!("| N | A | epoll µs/round | kevent get_events µs/round | ratio |");
    println!("|---|---|---|---|---|");
    for &n in &[100usize, 1000, 9000] {
        let p = pairs(n);
        // SAFETY: plain syscall.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        // SAFETY: no ring.
        let q = unsafe { kf::kevent_init(std::ptr::null_mut(), 0, 0) }.unwrap();
        let mut adds: Vec<ukevent> =
            p.rd.iter()
                .map(|&fd| {
                    ukevent::new(
                        KEVENT_SOCKET,
                        kevent_id::from_raw([fd as u32, 0]),
                        KEVENT_SOCKET_RECV,
                        0,
                    )
                })
                .collect();
        assert_eq!(kf::kevent_ctl(q, KEVENT_CTL_ADD, &mut adds), Ok(0));
        for &fd in &p.rd {
            let mut ev = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: fd as u64,
            };
            // SAFETY: `ev` lives across the call.
            unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) };
        }
        for &a in &[1usize, 10, 100] {
            let active: Vec<usize> = (0..a).map(|i| i * (n / a)).collect();
            let mut eb = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
            let mut kb = vec![ukevent::default(); 256];
            let forever = kevent_sys::FOREVER;
            let epoll_round = |eb: &mut Vec<libc::epoll_event>| {
                for &i in &active {
                    write1(p.wr[i]);
                }
                // SAFETY: `eb` has room for 256 events.
                let got = unsafe { libc::epoll_wait(ep, eb.as_mut_ptr(), 256, -1) };
                assert_eq!(got as usize, a);
                for e in &eb[..got as usize] {
                    read1(e.u64 as i32);
                }
            };
            let kevent_round = |kb: &mut Vec<ukevent>| {
                for &i in &active {
                    write1(p.wr[i]);
                }
                let got = kf::kevent_get_events(q, a as u32, kb, &forever, 0).unwrap();
                assert_eq!(got as usize, a);
                for e in &kb[..got as usize] {
                    read1(e.id.raw()[0] as i32);
                }
            };
            for _ in 0..200 {
                epoll_round(&mut eb);
                kevent_round(&mut kb);
            }
            let block = 50;
            let (mut te, mut tk) = (vec![], vec![]);
            for _ in 0..rounds / block {
                let t = Instant::now();
                for _ in 0..block {
                    epoll_round(&mut eb);
                }
                te.push(t.elapsed().as_secs_f64() * 1e6 / block as f64);
                let t = Instant::now();
                for _ in 0..block {
                    kevent_round(&mut kb);
                }
                tk.push(t.elapsed().as_secs_f64() * 1e6 / block as f64);
            }
            let (e, k) = (median(&mut te), median(&mut tk));
            println!("| {n} | {a} | {e:.2} | {k:.2} | {:.3} |", k / e);
        }
        // SAFETY: closing fds this program opened.
        unsafe {
            libc::close(q);
            libc::close(ep);
            for (&r, &w) in p.rd.iter().zip(&p.wr) {
                libc::close(r);
                libc::close(w);
            }
        }
    }
}
