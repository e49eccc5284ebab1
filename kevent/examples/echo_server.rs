//! A TCP echo server on one kevent queue (issue 23's program (a)): every connection has an
//! idle timeout, and SIGINT or SIGTERM shuts the server down cleanly.
//!
//! * Connections are owned by their `Registration` (dropping it removes the kevent, then
//!   closes the stream); one that already sent data when it is accepted is registered and
//!   its event queued, never lost.
//! * Idle timeouts are deadlines of one `Timers`: all of them the same duration, one kernel
//!   timer, and activity pushes a deadline back without a system call.
//! * SIGINT and SIGTERM are watched with NOMASK: reported to the queue, no handler, no
//!   default action, so the loop ends and everything is dropped in order.
//!
//! It prints `listening on ADDR`, then one line per connection event, and `shutdown on
//! SIGTERM` (or SIGINT) at the end.
//!
//! ```text
//! cargo run -p kevent --example echo_server -- [IDLE_MS] [ADDR]
//! ```

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use kevent::{
    EventKind, Events, Queue, Registration, Signal, Signo, Socket, SocketEvents, Timeout, TimerId,
    Timers,
};

const LISTENER: u64 = u64::MAX;
const SIGNALS: u64 = u64::MAX - 1;
const TIMERS: u64 = u64::MAX - 2;

struct Conn {
    stream: Registration<TcpStream>,
    idle: TimerId,
}

/// Echoes what `stream` has; `true` when the peer is gone.
fn echo(stream: &mut TcpStream) -> bool {
    let mut buf = [0; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(n) => {
                if stream.write_all(&buf[..n]).is_err() {
                    return true;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let idle = Duration::from_millis(match args.next() {
        Some(ms) => ms.parse()?,
        None => 5000,
    });
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:0".into());

    let queue = Queue::new()?;
    let listener = TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    let _accept = queue.add(Socket::new(&listener, SocketEvents::ACCEPT).token(LISTENER))?;
    let _int = queue.add(Signal::new(Signo::INT).nomask().token(SIGNALS))?;
    let _term = queue.add(Signal::new(Signo::TERM).nomask().token(SIGNALS))?;
    let mut timers = Timers::new(&queue, TIMERS)?;
    println!(
        "listening on {} ({} backend)",
        listener.local_addr()?,
        queue.backend()
    );

    let mut conns: HashMap<u64, Conn> = HashMap::new();
    let (mut next_id, mut served) = (0u64, 0u64);
    let mut events = Events::with_capacity(64);
    let stopped_by = 'serve: loop {
        queue.wait(&mut events, Timeout::FOREVER)?;
        for event in &events {
            if timers.handles(&event) {
                continue;
            }
            match (event.token(), event.kind()) {
                (SIGNALS, EventKind::Signal { signo, .. }) => break 'serve signo,
                (LISTENER, _) => loop {
                    let (stream, peer) = match listener.accept() {
                        Ok(accepted) => accepted,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) => return Err(e.into()),
                    };
                    stream.set_nonblocking(true)?;
                    next_id += 1;
                    let id = next_id;
                    let stream = queue.add(Socket::new(stream, SocketEvents::RECV).token(id))?;
                    let idle = timers.insert_after(idle, id)?;
                    conns.insert(id, Conn { stream, idle });
                    println!("connection {id} from {peer}");
                },
                (id, _) => {
                    let Some(conn) = conns.get_mut(&id) else {
                        continue;
                    };
                    let gone = event.error().is_some() || echo(conn.stream.get_mut());
                    if gone {
                        if let Some(conn) = conns.remove(&id) {
                            timers.cancel(conn.idle);
                        }
                        served += 1;
                        println!("connection {id} closed by the peer");
                    } else {
                        timers.reset(conn.idle, std::time::Instant::now() + idle)?;
                    }
                }
            }
        }
        while let Some((_, id)) = timers.pop_expired()? {
            if conns.remove(&id).is_some() {
                served += 1;
                println!("connection {id} idle for {} ms, closed", idle.as_millis());
            }
        }
    };
    println!(
        "shutdown on {stopped_by:?}: served {served} connections, closing {} open",
        conns.len()
    );
    Ok(())
}
