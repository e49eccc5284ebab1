//! A TCP echo server on 127.0.0.1, driven by one kevent queue.
//!
//! It listens on an ephemeral port, starts its own clients (threads that connect, send a few
//! lines and check the echo), and exits once `N` connections have been served (default 4,
//! or the first argument), or after a 10 s timeout. Connections are owned by
//! their `Registration`: dropping the registration removes the
//! kevent and then closes the stream.
//!
//! ```text
//! cargo run -p kevent --example echo_server -- 8
//! KEVENT_BACKEND=fallback cargo run -p kevent --example echo_server
//! ```

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use kevent::{EventKind, Events, Queue, Registration, Socket, SocketEvents, Timeout};

const LISTENER: u64 = 0;

fn client(addr: std::net::SocketAddr, n: usize) -> io::Result<()> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    for i in 0..3 {
        let line = format!("client {n} line {i}\n");
        s.write_all(line.as_bytes())?;
        let mut got = vec![0; line.len()];
        s.read_exact(&mut got)?;
        if got != line.as_bytes() {
            return Err(io::Error::other(format!("bad echo: {got:?}")));
        }
    }
    Ok(()) // dropping `s` closes the connection: the server sees EOF
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let wanted: usize = match std::env::args().nth(1) {
        Some(a) => a.parse()?,
        None => 4,
    };
    let deadline = Instant::now() + Duration::from_secs(10);

    let queue = Queue::new()?;
    println!("echo_server: {} backend", queue.backend());
    let listener = TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let _accept = queue.add(Socket::new(&listener, SocketEvents::ACCEPT).token(LISTENER))?;

    let clients: Vec<_> = (0..wanted)
        .map(|n| std::thread::spawn(move || client(addr, n)))
        .collect();

    let mut conns: HashMap<u64, Registration<TcpStream>> = HashMap::new();
    let mut next_id = 1;
    let mut served = 0;
    let mut events = Events::with_capacity(64);
    while served < wanted {
        if Instant::now() >= deadline {
            return Err(format!("timed out after serving {served} of {wanted}").into());
        }
        queue.wait(
            &mut events,
            Timeout::at(std::time::SystemTime::now() + Duration::from_millis(200)),
        )?;
        for event in &events {
            if let Some(err) = event.error() {
                println!("connection {} broken: {err}", event.token());
                conns.remove(&event.token());
                served += 1;
                continue;
            }
            match (event.token(), event.kind()) {
                (LISTENER, _) => loop {
                    match listener.accept() {
                        Ok((stream, peer)) => {
                            stream.set_nonblocking(true)?;
                            let id = next_id;
                            next_id += 1;
                            // Registered even if data already arrived (then queued).
                            let reg =
                                queue.add(Socket::new(stream, SocketEvents::RECV).token(id))?;
                            println!("connection {id} from {peer}");
                            conns.insert(id, reg);
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) => return Err(e.into()),
                    }
                },
                (id, EventKind::Socket { .. }) => {
                    let Some(conn) = conns.get(&id) else { continue };
                    let mut stream: &TcpStream = conn.get_ref();
                    let mut buf = [0; 4096];
                    let closed = loop {
                        match stream.read(&mut buf) {
                            Ok(0) => break true,
                            Ok(n) => stream.write_all(&buf[..n])?,
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break false,
                            Err(_) => break true,
                        }
                    };
                    if closed {
                        conns.remove(&id); // REMOVE, then close
                        served += 1;
                        println!("connection {id} closed ({served}/{wanted})");
                    }
                }
                (_, other) => println!("unexpected event {other:?}"),
            }
        }
    }
    for c in clients {
        c.join().map_err(|_| "client panicked")??;
    }
    println!("echo_server: served {served} connections");
    Ok(())
}
