//! nginx as an outside anchor for the HTTP benchmark (issue 14 item 2): when an `nginx`
//! binary is installed, the benchmark starts it with one worker answering `return 200` with
//! keep-alive, from its own temporary prefix, pinned to the servers' CPU, and stops it (and
//! removes the prefix) afterwards.
//!
//! The configuration changes nginx's defaults only where the comparison needs it: one
//! worker, `keepalive_requests` large enough that nginx never closes a keep-alive connection
//! during a run (the project's servers never do), no access log, and a listen backlog as
//! large as the project's servers ask for (`net.core.somaxconn` caps both). Everything nginx
//! writes (pid, error log, temp directories) goes under the temporary prefix, so it runs as
//! any user.
//!
//! lighttpd (one process, `server.event-handler = "linux-sysepoll"`, the same 13-byte body
//! as a static `index.html`, keep-alive without a request limit) is started the same way
//! when installed (issue 15), and each of the two also runs a second time under
//! `libkevent-epoll.so` (`LD_PRELOAD`): the same unmodified server on kevent.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::os;

/// Where nginx is looked for after `PATH` (`/usr/sbin` is not on a normal user's `PATH`).
const PLACES: [&str; 3] = [
    "/usr/sbin/nginx",
    "/usr/local/sbin/nginx",
    "/usr/local/nginx/sbin/nginx",
];

/// An outside server the benchmark can start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// nginx: master and one worker.
    Nginx,
    /// lighttpd: one process.
    Lighttpd,
}

impl Kind {
    /// The binary's name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Nginx => "nginx",
            Kind::Lighttpd => "lighttpd",
        }
    }
}

/// The installed nginx binary, if any.
pub fn find() -> Option<PathBuf> {
    find_kind(Kind::Nginx)
}

/// The installed binary of `kind`, if any (`PATH`, then the sbin directories).
pub fn find_kind(kind: Kind) -> Option<PathBuf> {
    let name = kind.name();
    let on_path = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|f| f.is_file())
    });
    let places: Vec<PathBuf> = match kind {
        Kind::Nginx => PLACES.iter().map(PathBuf::from).collect(),
        Kind::Lighttpd => ["/usr/sbin/lighttpd", "/usr/local/sbin/lighttpd"]
            .iter()
            .map(PathBuf::from)
            .collect(),
    };
    on_path.or_else(|| places.into_iter().find(|f| f.is_file()))
}

/// `libkevent-epoll.so`: `KEVENT_EPOLL_SO`, else next to this executable (`cargo build
/// --release -p kevent-epoll-preload` puts it there). Run by `cargo run` (the main job) without
/// it, the benchmark builds it first, with the same profile into the same target directory,
/// so a fresh checkout measures the servers under the shim too.
pub fn find_shim() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KEVENT_EPOLL_SO") {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    let places = [
        dir.join("libkevent_epoll_preload.so"),
        dir.join("../lib/libkevent-epoll.so"),
    ];
    if let Some(p) = places.iter().find(|p| p.is_file()) {
        return Some(p.clone());
    }
    build_shim(dir)
        .then(|| places[0].clone())
        .filter(|p| p.is_file())
}

/// Under `cargo run` (which sets `CARGO` and `CARGO_MANIFEST_DIR` for the program):
/// `cargo build -p kevent-epoll-preload` into the profile directory `dir` of this executable.
/// Whether the build succeeded.
fn build_shim(dir: &Path) -> bool {
    let (Some(cargo), Some(manifest)) = (
        std::env::var_os("CARGO"),
        std::env::var_os("CARGO_MANIFEST_DIR"),
    ) else {
        return false;
    };
    let (Some(profile), Some(target)) = (dir.file_name(), dir.parent()) else {
        return false;
    };
    eprintln!("http: building libkevent-epoll.so (cargo build -p kevent-epoll-preload)");
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--quiet", "-p", "kevent-epoll-preload"])
        .current_dir(manifest)
        .env("CARGO_TARGET_DIR", target);
    match profile.to_str() {
        Some("release") => {
            cmd.arg("--release");
        }
        Some("debug") => {}
        _ => return false, // a custom profile or a --target directory: leave it to the user
    }
    cmd.status().is_ok_and(|s| s.success())
}

/// lighttpd's configuration for `port`, everything under `prefix` (the document root
/// `prefix/html` holds `index.html`, the 13-byte body).
pub fn lighttpd_config(prefix: &Path, port: u16, max_fds: u64) -> String {
    let p = prefix.display();
    format!(
        "# kevent-bench: lighttpd as an outside anchor (one process, keep-alive)\n\
         server.document-root = \"{p}/html\"\n\
         server.bind = \"127.0.0.1\"\n\
         server.port = {port}\n\
         server.errorlog = \"{p}/logs/error.log\"\n\
         server.event-handler = \"linux-sysepoll\"\n\
         server.max-worker = 0\n\
         server.max-fds = {max_fds}\n\
         server.max-connections = {}\n\
         server.listen-backlog = 65535\n\
         server.max-keep-alive-requests = 1000000000\n\
         server.max-keep-alive-idle = 300\n\
         index-file.names = (\"index.html\")\n\
         mimetype.assign = (\".html\" => \"text/plain\")\n",
        max_fds / 2
    )
}

/// `nginx -V` (version and configure arguments; nginx prints them to stderr).
fn version_info(bin: &Path) -> String {
    Command::new(bin)
        .arg("-V")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
        .unwrap_or_default()
}

/// The configuration file for `port`, with everything under `prefix`. `configure` is the
/// output of `nginx -V`: temp paths are set only for modules the binary has.
pub fn config(prefix: &Path, port: u16, worker_connections: u64, configure: &str) -> String {
    let p = prefix.display();
    let mut temp = format!("    client_body_temp_path {p}/tmp/client_body;\n");
    for m in ["proxy", "fastcgi", "uwsgi", "scgi"] {
        if !configure.contains(&format!("--without-http_{m}_module")) {
            temp.push_str(&format!("    {m}_temp_path {p}/tmp/{m};\n"));
        }
    }
    format!(
        "# kevent-bench: nginx as an outside anchor (one worker, return 200, keep-alive)\n\
         daemon off;\n\
         master_process on;\n\
         worker_processes 1;\n\
         pid {p}/nginx.pid;\n\
         error_log {p}/logs/error.log error;\n\
         events {{\n    worker_connections {worker_connections};\n}}\n\
         http {{\n\
         \x20   access_log off;\n\
         \x20   default_type text/plain;\n\
         \x20   keepalive_requests 1000000000;\n\
         \x20   keepalive_timeout 300s;\n\
         {temp}\
         \x20   server {{\n\
         \x20       listen 127.0.0.1:{port} backlog=65535;\n\
         \x20       location / {{\n\
         \x20           return 200 \"Hello, world\\n\";\n\
         \x20       }}\n\
         \x20   }}\n\
         }}\n"
    )
}

/// A running nginx (master + one worker).
#[derive(Debug)]
pub struct Nginx {
    child: Option<Child>,
    /// Where it listens on 127.0.0.1.
    pub port: u16,
    prefix: PathBuf,
    /// `nginx/1.22.1` or similar.
    pub version: String,
}

fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

impl Nginx {
    /// Starts `bin` pinned to `cpu`; waits (up to 5 s) until it accepts connections.
    pub fn start(bin: &Path, cpu: Option<usize>) -> Result<Nginx, String> {
        Nginx::start_kind(Kind::Nginx, bin, cpu, None)
    }

    /// Starts the server `kind` from `bin` pinned to `cpu`, under `LD_PRELOAD=shim` when
    /// given (then on kevent queues, on the process's backend).
    pub fn start_kind(
        kind: Kind,
        bin: &Path,
        cpu: Option<usize>,
        shim: Option<&Path>,
    ) -> Result<Nginx, String> {
        let info = match kind {
            Kind::Nginx => version_info(bin),
            Kind::Lighttpd => Command::new(bin)
                .arg("-v")
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default(),
        };
        let version = match kind {
            Kind::Nginx => info
                .lines()
                .find_map(|l| l.strip_prefix("nginx version: "))
                .unwrap_or("nginx (version unknown)"),
            Kind::Lighttpd => info
                .split_whitespace()
                .next()
                .unwrap_or("lighttpd (version unknown)"),
        }
        .trim()
        .to_owned();
        let prefix = std::env::temp_dir().join(format!(
            "kevent-bench-nginx.{}.{}",
            std::process::id(),
            os::now_ns()
        ));
        for d in ["logs", "tmp", "html"] {
            std::fs::create_dir_all(prefix.join(d)).map_err(|e| format!("{e}"))?;
        }
        std::fs::write(prefix.join("html/index.html"), "Hello, world\n")
            .map_err(|e| format!("{e}"))?;
        let port = free_port().map_err(|e| format!("no free port: {e}"))?;
        let (soft, _) = os::raise_fd_limit();
        let conf = prefix.join(format!("{}.conf", kind.name()));
        let text = match kind {
            Kind::Nginx => config(&prefix, port, soft.saturating_sub(64).max(1024), &info),
            Kind::Lighttpd => lighttpd_config(&prefix, port, soft.saturating_sub(64).max(1024)),
        };
        std::fs::write(&conf, text).map_err(|e| format!("{}: {e}", conf.display()))?;
        let mut n = Nginx {
            child: None,
            port,
            prefix,
            version,
        };
        let mut cmd = Command::new(bin);
        match kind {
            Kind::Nginx => cmd
                .arg("-p")
                .arg(&n.prefix)
                .arg("-c")
                .arg(&conf)
                .arg("-e")
                .arg(n.prefix.join("logs/error.log")),
            Kind::Lighttpd => cmd.arg("-D").arg("-f").arg(&conf),
        };
        if let Some(so) = shim {
            cmd.env("LD_PRELOAD", so);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        pin_child(&mut cmd, cpu);
        let child = cmd.spawn().map_err(|e| format!("{}: {e}", bin.display()))?;
        n.child = Some(child);
        let started = Instant::now();
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(n);
            }
            let exited = n.child.as_mut().and_then(|c| c.try_wait().ok().flatten());
            if exited.is_some() || started.elapsed() > Duration::from_secs(5) {
                let mut why = String::new();
                if let Some(c) = n.child.as_mut().and_then(|c| c.stderr.as_mut()) {
                    use std::io::Read;
                    let _ = c.read_to_string(&mut why);
                }
                let log =
                    std::fs::read_to_string(n.prefix.join("logs/error.log")).unwrap_or_default();
                let why = format!("{} {}", why.trim(), log.trim());
                return Err(format!(
                    "{} did not start ({}): {}",
                    kind.name(),
                    exited.map_or("timed out".to_owned(), |s| s.to_string()),
                    why.trim()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What nginx logged at level `error` or worse during the run.
    pub fn errors(&self) -> String {
        std::fs::read_to_string(self.prefix.join("logs/error.log")).unwrap_or_default()
    }

    /// Stops nginx (fast shutdown, then SIGKILL after 5 s) and removes its prefix.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: kill takes no pointer; `c` is our child, not yet reaped.
            unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGTERM) };
            let started = Instant::now();
            while c.try_wait().ok().flatten().is_none() {
                if started.elapsed() > Duration::from_secs(5) {
                    let _ = c.kill();
                    let _ = c.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let _ = std::fs::remove_dir_all(&self.prefix);
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Makes `cmd`'s process (and its children) run on `cpu` only.
pub fn pin_child(cmd: &mut Command, cpu: Option<usize>) {
    if let Some(cpu) = cpu {
        // SAFETY: the closure runs in the child between fork and exec and only makes the
        // sched_setaffinity syscall on a stack-local cpu_set_t, which is async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu, &mut set);
                libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set);
                Ok(())
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_keeps_everything_under_the_prefix() {
        let c = config(
            Path::new("/tmp/x"),
            8080,
            19936,
            "configure arguments: --without-http_uwsgi_module --without-http_scgi_module",
        );
        assert!(c.contains("worker_processes 1;"));
        assert!(c.contains("listen 127.0.0.1:8080 backlog=65535;"));
        assert!(c.contains("return 200 \"Hello, world\\n\";"));
        assert!(c.contains("worker_connections 19936;"));
        assert!(c.contains("proxy_temp_path /tmp/x/tmp/proxy;"));
        assert!(!c.contains("uwsgi_temp_path") && !c.contains("scgi_temp_path"));
        let files = ["pid ", "error_log ", "_temp_path "];
        for line in c.lines().filter(|l| files.iter().any(|f| l.contains(f))) {
            assert!(line.contains("/tmp/x/"), "outside the prefix: {line}");
        }
        // Balanced braces.
        assert_eq!(c.matches('{').count(), c.matches('}').count());
    }

    /// Runs only where nginx is installed (`.ci/run` installs nginx-light); says so otherwise,
    /// and fails under `KEVENT_REQUIRE_ALL=1`.
    #[test]
    fn starts_answers_and_stops() {
        let Some(bin) = find() else {
            let why = "nginx not installed (apt-get install nginx-light)";
            assert!(
                std::env::var_os("KEVENT_REQUIRE_ALL").is_none_or(|v| v != "1"),
                "{why}; KEVENT_REQUIRE_ALL=1 makes this skip a failure"
            );
            println!("skipped: {why}");
            return;
        };
        let mut n = Nginx::start(&bin, None).unwrap();
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", n.port)).unwrap();
        s.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        let mut r = String::new();
        s.read_to_string(&mut r).unwrap();
        assert!(r.starts_with("HTTP/1.1 200 OK"), "{r}");
        assert!(r.ends_with("Hello, world\n"), "{r}");
        let prefix = n.prefix.clone();
        n.stop();
        assert!(!prefix.exists());
        assert!(std::net::TcpStream::connect(("127.0.0.1", n.port)).is_err());
    }
}
