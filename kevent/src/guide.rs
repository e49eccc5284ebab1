//! A first event loop, step by step (documentation only).
//!
//! # 1. A queue
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let queue = kevent::Queue::new()?;
//! println!("running on the {} backend", queue.backend());
//! # Ok(()) }
//! ```
//!
//! [`Queue::new`](crate::Queue::new) uses the process's backend. If you want to know why the
//! kernel's kevent is not used, [`Backend::native_unavailable`](crate::Backend::native_unavailable)
//! says.
//!
//! # 2. Sources
//!
//! Register what you want to hear about. Give each registration a token (the ABI's `cookie`): it comes back in
//! every event, so you know which connection or timer an event is about without looking the
//! fd up.
//!
//! ```
//! use std::net::TcpListener;
//! use std::time::Duration;
//! use kevent::{Queue, Socket, SocketEvents, Timer};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let queue = Queue::new()?;
//! let listener = TcpListener::bind("127.0.0.1:0")?;
//! listener.set_nonblocking(true)?;
//! const LISTENER: u64 = 0;
//! const TICK: u64 = 1;
//! let accept = queue
//!     .add(Socket::new(&listener, SocketEvents::ACCEPT).token(LISTENER))?;
//! let tick = queue
//!     .add(Timer::new(Duration::from_millis(10)).token(TICK))?;
//! # drop((accept, tick));
//! # Ok(()) }
//! ```
//!
//! `add` returns a `Result`: `Ok` is the registration, and an error hands back the fd
//! holder with the reason (`?` turns it into [`Error`](crate::Error)). A socket that is
//! *already* ready when you add it (a connection whose request arrived with it) is
//! registered and its event queued, so the next wait reports it (decision P30);
//! [`Queue::add_or_ready`](crate::Queue::add_or_ready) returns it at once instead, as the
//! ABI does.
//!
//! # 3. The loop
//!
//! ```
//! use std::io::{Read, Write};
//! use std::net::{TcpListener, TcpStream};
//! use std::collections::HashMap;
//! use kevent::{Events, EventKind, Queue, Registration, Socket, SocketEvents, Timeout};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let queue = Queue::new()?;
//! let listener = TcpListener::bind("127.0.0.1:0")?;
//! listener.set_nonblocking(true)?;
//! let _accept = queue.add(Socket::new(&listener, SocketEvents::ACCEPT).token(0))?;
//! // The connections: each registration *owns* its stream.
//! let mut conns: HashMap<u64, Registration<TcpStream>> = HashMap::new();
//! let mut next_id = 1;
//!
//! let mut client = TcpStream::connect(listener.local_addr()?)?;
//! client.write_all(b"ping")?;
//!
//! let mut events = Events::with_capacity(64);
//! let mut echoed = false;
//! while !echoed {
//!     queue.wait(&mut events, Timeout::FOREVER)?;
//!     for event in &events {
//!         match (event.token(), event.kind()) {
//!             (0, _) => {
//!                 // Level-triggered: drain the accept queue.
//!                 while let Ok((stream, _)) = listener.accept() {
//!                     stream.set_nonblocking(true)?;
//!                     let id = next_id;
//!                     next_id += 1;
//!                     let reg = queue.add(Socket::new(stream, SocketEvents::RECV).token(id))?;
//!                     conns.insert(id, reg);
//!                 }
//!             }
//!             (id, EventKind::Socket { .. }) => {
//!                 let Some(conn) = conns.get_mut(&id) else { continue };
//!                 let mut buf = [0; 64];
//!                 let stream: &mut TcpStream = conn.get_mut();
//!                 match stream.read(&mut buf) {
//!                     Ok(0) => { conns.remove(&id); } // EOF: drop = REMOVE, then close
//!                     Ok(n) => { stream.write_all(&buf[..n])?; echoed = true; }
//!                     Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
//!                     Err(_) => { conns.remove(&id); }
//!                 }
//!             }
//!             _ => {}
//!         }
//!     }
//! }
//! let mut reply = [0; 4];
//! client.read_exact(&mut reply)?;
//! assert_eq!(&reply, b"ping");
//! # Ok(()) }
//! ```
//!
//! # 4. Shutting down
//!
//! Drop the registrations (or call [`Registration::remove`](crate::Registration::remove) to
//! get an owned stream back), then the queue. Dropping the queue closes its fd, which
//! releases every kevent still registered; registrations that outlive the queue do nothing
//! when dropped.
//!
//! # 5. Going further
//!
//! * Many events per second: give the queue a ring and read events in place
//!   ([`Queue::ring`](crate::Queue::ring)), or from several threads
//!   ([`Queue::shared_ring`](crate::Queue::shared_ring)).
//! * Wake a waiting thread from another: [`Queue::wake`](crate::Queue::wake), or a
//!   [`User`](crate::User) event marked with [`Queue::ready`](crate::Queue::ready).
//! * Signals without a handler: [`Signal::nomask`](crate::Signal::nomask).
