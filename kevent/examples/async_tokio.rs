//! A kevent queue inside tokio, next to tokio's own sockets (issue 23's program (c)).
//!
//! One task serves TCP echo with tokio's `TcpListener`/`TcpStream`; a client task talks to
//! it. Meanwhile the main task awaits the kevent queue through `kevent::tokio::AsyncQueue`
//! (no `unsafe`, no readiness protocol): three deadlines of one `Timers` (the same duration,
//! one kernel timer), `SIGUSR1` (sent by `sh -c kill`, reported with NOMASK: no handler, no
//! default action) and the creation of a file in a watched directory. It exits once the echo
//! came back and every kevent arrived, and fails after 10 s.
//!
//! ```text
//! cargo run -p kevent --features tokio --example async_tokio
//! ```

use std::time::Duration;

use kevent::tokio::AsyncQueue;
use kevent::{EventKind, Inode, InodeEvents, Queue, Signal, Signo, Timers};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const TIMERS: u64 = 1;
const SIGNAL: u64 = 2;
const DIR: u64 = 3;

/// tokio's half: an echo server and one client; returns what the client read back.
async fn echo_round_trip() -> std::io::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        if let Ok((mut s, _)) = listener.accept().await {
            let mut buf = [0; 64];
            while let Ok(n) = s.read(&mut buf).await {
                if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
        }
    });
    let mut client = TcpStream::connect(addr).await?;
    client.write_all(b"hello from tokio").await?;
    let mut got = vec![0; 16];
    client.read_exact(&mut got).await?;
    Ok(String::from_utf8_lossy(&got).into_owned())
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let queue = Queue::new()?;
    println!("async_tokio: {} backend", queue.backend());
    let mut timers = Timers::new(&queue, TIMERS)?;
    for conn in 0..3 {
        timers.insert_after(Duration::from_millis(30), conn)?;
    }
    let _signal = queue.add(Signal::new(Signo::USR1).nomask().token(SIGNAL))?;
    let dir = std::env::temp_dir().join(format!("kevent-async-tokio-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let _dir = queue.add(Inode::new(std::fs::File::open(&dir)?, InodeEvents::CREATE).token(DIR))?;
    let mut queue = AsyncQueue::new(queue)?;

    let echo = tokio::spawn(echo_round_trip());
    // Another process signals us (the shell's builtin `kill`), and a file appears: both
    // while we await.
    let kill = format!("kill -USR1 {}", std::process::id());
    std::process::Command::new("sh")
        .args(["-c", &kill])
        .status()?;
    std::fs::write(dir.join("new-file"), b"")?;

    let (mut expired, mut signalled, mut created) = (0, false, false);
    let kevents = async {
        while expired < 3 || !signalled || !created {
            let event = queue.next().await?;
            match event.kind() {
                _ if timers.handles(&event) => {} // expired deadlines are popped below
                EventKind::Signal { signo, count, .. } => {
                    println!("signal {signo:?} x{count}");
                    signalled = true;
                }
                EventKind::Inode { events, .. } => {
                    println!("directory: {events:?}");
                    created |= events.contains(InodeEvents::CREATE);
                }
                other => println!("unexpected {other:?}"),
            }
            while let Some((_, conn)) = timers.pop_expired()? {
                println!("timer of connection {conn} expired");
                expired += 1;
            }
        }
        Ok::<_, kevent::Error>(())
    };
    tokio::time::timeout(Duration::from_secs(10), kevents).await??;
    let echoed = tokio::time::timeout(Duration::from_secs(10), echo).await???;
    println!("echo: {echoed}");
    std::fs::remove_dir_all(&dir)?;
    println!("async_tokio: done");
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(run())
}
