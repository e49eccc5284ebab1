//! Unmodified epoll servers on kevent (issue 15): nginx and lighttpd, when installed, run
//! under `libkevent-epoll.so` on every backend (`KEVENT_BACKEND`) from a temporary prefix
//! (one worker, a port on loopback), and answer a few hundred requests — connections that
//! close after one request and keep-alive connections of many, for a small file and for one
//! large enough that the server's writes fill the socket and wait for `EPOLLOUT` — each
//! response checked to the byte. A missing server is a printed skip (a failure with
//! `KEVENT_REQUIRE_ALL=1`).
//!
//! Not part of the conformance binary (a static executable cannot preload the shim).
#![allow(unsafe_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kevent_test_support::differential::shim::shim;
use kevent_test_support::*;

/// The large file: bigger than a loopback socket's buffers, so the server waits for
/// writability.
const BIG: usize = 3 << 20;
/// Connections that send one request with `Connection: close`.
const CLOSE_CONNS: usize = 120;
/// Keep-alive connections, and requests on each.
const KEEPALIVE_CONNS: usize = 8;
const KEEPALIVE_REQS: usize = 25;
/// A guard against a hung server: no response may take longer (not a timing assertion).
const IO_LIMIT: Duration = Duration::from_secs(20);

fn find(name: &str) -> Option<PathBuf> {
    let dirs = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    dirs.into_iter()
        .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|f| f.is_file())
}

fn big_body() -> Vec<u8> {
    let mut r = Rng::new(0xb16);
    (0..BIG).map(|_| r.next_u64() as u8).collect()
}

/// A temporary prefix with the document root (`hello.txt`, `big.bin`).
fn prefix(tag: &str) -> PathBuf {
    let p = temp_dir(tag);
    for d in ["html", "logs", "tmp"] {
        std::fs::create_dir_all(p.join(d)).expect("mkdir");
    }
    std::fs::write(p.join("html/hello.txt"), b"hello, kevent\n").expect("write");
    std::fs::write(p.join("html/big.bin"), big_body()).expect("write");
    // Workers may run as another user (nginx's `nobody` when started as root).
    let _ = Command::new("chmod").args(["-R", "a+rX"]).arg(&p).status();
    p
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().expect("local_addr").port()
}

fn nginx_conf(p: &Path, port: u16) -> String {
    let p = p.display();
    format!(
        "daemon off;\nmaster_process on;\nworker_processes 1;\npid {p}/nginx.pid;\n\
         error_log {p}/logs/error.log warn;\n\
         events {{ worker_connections 512; use epoll; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {p}/tmp/body;\n\
         \x20 proxy_temp_path {p}/tmp/proxy;\n  fastcgi_temp_path {p}/tmp/fastcgi;\n\
         \x20 uwsgi_temp_path {p}/tmp/uwsgi;\n  scgi_temp_path {p}/tmp/scgi;\n\
         \x20 keepalive_requests 10000;\n  sendfile off;\n\
         \x20 server {{ listen 127.0.0.1:{port}; root {p}/html; }}\n}}\n"
    )
}

fn lighttpd_conf(p: &Path, port: u16) -> String {
    let p = p.display();
    format!(
        "server.document-root = \"{p}/html\"\nserver.bind = \"127.0.0.1\"\nserver.port = {port}\n\
         server.errorlog = \"{p}/logs/error.log\"\nserver.event-handler = \"linux-sysepoll\"\n\
         server.max-worker = 0\nserver.max-keep-alive-requests = 10000\n\
         server.network-backend = \"writev\"\n\
         mimetype.assign = (\".txt\" => \"text/plain\", \".bin\" => \"application/octet-stream\")\n"
    )
}

/// One server under test.
struct Server {
    child: Child,
    prefix: PathBuf,
}

impl Server {
    fn start(name: &'static str, bin: &Path, so: &Path, backend: &str, port: u16) -> Server {
        let prefix = prefix(name);
        let conf = prefix.join(format!("{name}.conf"));
        let (text, args): (String, Vec<String>) = match name {
            "nginx" => (
                nginx_conf(&prefix, port),
                vec![
                    "-p".into(),
                    prefix.display().to_string(),
                    "-c".into(),
                    conf.display().to_string(),
                ],
            ),
            _ => (
                lighttpd_conf(&prefix, port),
                vec!["-D".into(), "-f".into(), conf.display().to_string()],
            ),
        };
        std::fs::write(&conf, text).expect("write config");
        let child = Command::new(bin)
            .args(&args)
            .env("LD_PRELOAD", so)
            .env("KEVENT_BACKEND", backend)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn server");
        let s = Server { child, prefix };
        let start = Instant::now();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            assert!(
                start.elapsed() < IO_LIMIT,
                "{name} never listened: {}",
                s.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        s
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.prefix.join("logs/error.log")).unwrap_or_default()
    }

    /// Whether the server mapped the shim.
    fn preloaded(&self) -> bool {
        std::fs::read_to_string(format!("/proc/{}/maps", self.child.id()))
            .is_ok_and(|m| m.contains("libkevent_epoll") || m.contains("libkevent-epoll"))
    }

    /// Whether the server's epoll instances are kevent queues: in the server or one of its
    /// children (nginx's worker), on the fallback an epoll that holds the engine's wake
    /// eventfd (its token's slot is `u32::MAX`), on a kevent kernel no epoll at all.
    fn on_kevent(&self, backend: &str) -> Result<(), String> {
        let pid = self.child.id();
        let kids =
            std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        let pids: Vec<String> = std::iter::once(pid.to_string())
            .chain(kids.split_whitespace().map(str::to_owned))
            .collect();
        let mut epolls = Vec::new();
        for p in &pids {
            let Ok(dir) = std::fs::read_dir(format!("/proc/{p}/fd")) else {
                continue;
            };
            for e in dir.flatten() {
                let link = std::fs::read_link(e.path()).unwrap_or_default();
                if link.to_string_lossy().contains("eventpoll") {
                    let fd = e.file_name().to_string_lossy().into_owned();
                    epolls.push(
                        std::fs::read_to_string(format!("/proc/{p}/fdinfo/{fd}"))
                            .unwrap_or_default(),
                    );
                }
            }
        }
        let engine = |info: &String| {
            info.lines().any(|l| {
                l.split_whitespace()
                    .skip_while(|w| *w != "data:")
                    .nth(1)
                    .is_some_and(|d| d.len() > 8 && d.ends_with("ffffffff"))
            })
        };
        match backend {
            "fallback" if epolls.iter().any(engine) => Ok(()),
            "fallback" => Err(format!(
                "no epoll of processes {pids:?} is a fallback queue: {epolls:#?}"
            )),
            _ if epolls.is_empty() => Ok(()),
            _ => Err(format!(
                "processes {pids:?} have epoll instances: {epolls:#?}"
            )),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SAFETY: kill takes integers; the pid is our child's.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let start = Instant::now();
        while self.child.try_wait().ok().flatten().is_none() {
            if start.elapsed() > Duration::from_secs(10) {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = std::fs::remove_dir_all(&self.prefix);
    }
}

/// Reads one response; returns (status line, body).
fn response(r: &mut BufReader<TcpStream>) -> Result<(String, Vec<u8>, bool), String> {
    let mut status = String::new();
    r.read_line(&mut status)
        .map_err(|e| format!("status line: {e}"))?;
    let mut len = None;
    let mut close = false;
    loop {
        let mut h = String::new();
        r.read_line(&mut h).map_err(|e| format!("header: {e}"))?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let lower = h.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            len = v.trim().parse::<usize>().ok();
        }
        if lower.starts_with("connection:") && lower.contains("close") {
            close = true;
        }
    }
    let len = len.ok_or_else(|| format!("no Content-Length after {status:?}"))?;
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)
        .map_err(|e| format!("body of {len}: {e}"))?;
    Ok((status.trim_end().to_owned(), body, close))
}

fn check(
    what: &str,
    got: Result<(String, Vec<u8>, bool), String>,
    want: &[u8],
) -> Result<bool, String> {
    let (status, body, close) = got.map_err(|e| format!("{what}: {e}"))?;
    if !status.starts_with("HTTP/1.1 200") {
        return Err(format!("{what}: {status}"));
    }
    if body != want {
        return Err(format!(
            "{what}: body of {} bytes differs from the file's {}",
            body.len(),
            want.len()
        ));
    }
    Ok(close)
}

fn connect(port: u16) -> Result<TcpStream, String> {
    let s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(IO_LIMIT))
        .map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(IO_LIMIT))
        .map_err(|e| e.to_string())?;
    Ok(s)
}

fn request(path: &str, keep: bool) -> String {
    format!(
        "GET /{path} HTTP/1.1\r\nHost: localhost\r\nConnection: {}\r\n\r\n",
        if keep { "keep-alive" } else { "close" }
    )
}

/// The requests; returns how many responses were checked.
fn load(port: u16) -> Result<usize, String> {
    let hello: &[u8] = b"hello, kevent\n";
    let big = big_body();
    let mut n = 0;
    for i in 0..CLOSE_CONNS {
        let (path, want) = if i % 10 == 9 {
            ("big.bin", &big[..])
        } else {
            ("hello.txt", hello)
        };
        let mut s = connect(port)?;
        s.write_all(request(path, false).as_bytes())
            .map_err(|e| e.to_string())?;
        let mut r = BufReader::new(s);
        check(&format!("close #{i} {path}"), response(&mut r), want)?;
        // The server closes: EOF next.
        let mut rest = Vec::new();
        r.read_to_end(&mut rest)
            .map_err(|e| format!("close #{i}: {e}"))?;
        if !rest.is_empty() {
            return Err(format!(
                "close #{i}: {} bytes after the response",
                rest.len()
            ));
        }
        n += 1;
    }
    // Keep-alive connections, interleaved: each request waits while the others are idle.
    let mut conns = Vec::new();
    for _ in 0..KEEPALIVE_CONNS {
        let s = connect(port)?;
        conns.push((s.try_clone().map_err(|e| e.to_string())?, BufReader::new(s)));
    }
    for k in 0..KEEPALIVE_REQS {
        for (c, (w, r)) in conns.iter_mut().enumerate() {
            let (path, want) = if (k + c) % 7 == 3 {
                ("big.bin", &big[..])
            } else {
                ("hello.txt", hello)
            };
            // Two pipelined requests now and then.
            let pipelined = k % 5 == 4;
            let mut req = request(path, true);
            if pipelined {
                req.push_str(&request("hello.txt", true));
            }
            w.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
            if check(
                &format!("keep-alive conn {c} req {k} {path}"),
                response(r),
                want,
            )? {
                return Err(format!(
                    "keep-alive conn {c} req {k}: the server closed the connection"
                ));
            }
            n += 1;
            if pipelined {
                check(
                    &format!("keep-alive conn {c} req {k} pipelined"),
                    response(r),
                    hello,
                )?;
                n += 1;
            }
        }
    }
    Ok(n)
}

fn serve(name: &'static str) {
    let test = format!("s_{name}_serves_under_libkevent_epoll");
    let bin = find(name);
    require!(bin.is_some(), "{name} is not installed");
    let bin = bin.expect("checked");
    let so = shim();
    require!(so.is_ok(), "libkevent-epoll.so unavailable: {:?}", so.err());
    let so = so.expect("checked");
    for b in backends(&test) {
        let kind = b.as_str();
        let port = free_port();
        let server = Server::start(name, &bin, &so, kind, port);
        assert!(
            server.preloaded(),
            "[{test}] {name} did not map libkevent-epoll.so"
        );
        match load(port) {
            Ok(n) => eprintln!("[{test}] {name} on the {kind} backend: {n} responses, all correct"),
            Err(e) => panic!(
                "[{test}] {name} on the {kind} backend: {e}\n--- error log ---\n{}",
                server.log()
            ),
        }
        if let Err(e) = server.on_kevent(kind) {
            panic!("[{test}] {name} is not on kevent: {e}");
        }
        let log = server.log();
        assert!(
            !log.contains("[alert]") && !log.contains("[emerg]") && !log.contains("(epoll"),
            "[{test}] {name} logged trouble:\n{log}"
        );
        drop(server);
    }
}

/// nginx (one worker) on kevent through the shim, every response checked.
#[test]
fn s_nginx_serves_under_libkevent_epoll() {
    serve("nginx");
}

/// lighttpd (one process) on kevent through the shim, every response checked.
#[test]
fn s_lighttpd_serves_under_libkevent_epoll() {
    serve("lighttpd");
}
