//! What the C library's tests share (`tests/c_api.rs`, `tests/c_sandbox.rs`): finding the built
//! library and generated header, compiling C and C++ programs against them, and running the
//! programs with a time limit.
//!
//! The library and header are found next to the test executable: `target/<profile>/deps/`
//! holds the test, `target/<profile>/` holds `libkevent_c.so`, `libkevent_c.a`, the
//! `libkevent.so*` / `libkevent.a` symlinks and `include/kevent/kevent.h` (see `build.rs`).
//! Compiled programs go to `target/<profile>/c-tests/`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one C program may run.
pub const RUN_LIMIT: Duration = Duration::from_secs(90);

/// `target/<profile>/`, where the C library, its header and the compiled programs live
/// (the C library is built first, once per process).
pub fn profile_dir() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().expect("current_exe");
        // target/<profile>/deps/<test>-<hash>
        let dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("the test executable lives in target/<profile>/deps")
            .to_path_buf();
        ensure_c_library(&dir);
        dir
    })
    .clone()
}

/// `cargo test` builds the root package only as the rlib its tests link; the C library
/// (`libkevent_c.so`, `libkevent_c.a`) is made by `cargo build`. Run that once per test
/// process (a no-op when it is up to date), so that `cargo test --workspace` on a fresh clone
/// runs these tests, and never against a library older than the sources.
fn ensure_c_library(profile: &Path) {
    let target = profile.parent().expect("target/<profile>");
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["build", "-p", "kevent-c", "--lib"])
        .current_dir(repo_dir())
        .env("CARGO_TARGET_DIR", target);
    if profile.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let status = crate::forks::status(&mut cmd).expect("run cargo build for the C library");
    assert!(status.success(), "cargo build -p kevent-c --lib failed");
}

/// The repository's root directory.
pub fn repo_dir() -> PathBuf {
    // This crate is `tests/support/` of the repository.
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The generated header's include directory (`kevent/kevent.h` under it).
pub fn include_dir() -> PathBuf {
    profile_dir().join("include")
}

/// Where compiled test programs go (`target/<profile>/c-tests/`).
pub fn out_dir() -> PathBuf {
    let d = profile_dir().join("c-tests");
    std::fs::create_dir_all(&d).expect("create c-tests dir");
    d
}

/// The language standards the header is checked in, and the examples built as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    /// C99.
    C99,
    /// C11.
    C11,
    /// C++17.
    Cxx17,
    /// C++20.
    Cxx20,
}

impl Lang {
    /// Every standard, C first.
    pub const ALL: [Lang; 4] = [Lang::C99, Lang::C11, Lang::Cxx17, Lang::Cxx20];

    /// Whether this is a C++ standard.
    pub fn is_cxx(self) -> bool {
        matches!(self, Lang::Cxx17 | Lang::Cxx20)
    }

    /// The compiler's `-std=` flag.
    pub fn std_flag(self) -> &'static str {
        match self {
            Lang::C99 => "-std=c99",
            Lang::C11 => "-std=c11",
            Lang::Cxx17 => "-std=c++17",
            Lang::Cxx20 => "-std=c++20",
        }
    }

    fn suffix(self) -> &'static str {
        match self {
            Lang::C99 => "",
            Lang::C11 => "-c11",
            Lang::Cxx17 => "-cxx",
            Lang::Cxx20 => "-cxx20",
        }
    }
}

/// How a test program links the C library.
#[derive(Clone, Copy, Debug)]
pub enum Link {
    /// `-lkevent` against `libkevent.so` (soname `libkevent.so.1`), with an rpath.
    Shared,
    /// `libkevent.a` and the native libraries a Rust staticlib needs.
    Static,
}

/// The cc crate's C or C++ compiler for this target, with `-std=…` for `lang` and
/// `-pedantic -Wall -Wextra -Werror`.
pub fn compiler(lang: Lang) -> Command {
    let target = env!("KEVENT_C_TARGET");
    let tool = cc::Build::new()
        .cargo_metadata(false)
        .cargo_warnings(false)
        .target(target)
        .host(target)
        .opt_level(0)
        .debug(false)
        .cpp(lang.is_cxx())
        .get_compiler();
    let mut cmd = tool.to_command();
    cmd.arg(lang.std_flag())
        .args(["-x", if lang.is_cxx() { "c++" } else { "c" }]);
    cmd.args(["-pedantic", "-Wall", "-Wextra", "-Werror"]);
    cmd
}

/// Runs `cmd`, which must succeed (`what` names it in messages); returns its output.
pub fn run_checked(mut cmd: Command, what: &str) -> String {
    let out = crate::forks::output(&mut cmd)
        .unwrap_or_else(|e| panic!("{what}: cannot run {cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{what} failed: {cmd:?}\n{text}");
    text
}

/// Compiles `src` into `target/<profile>/c-tests/<name>` and returns the executable.
pub fn build(src: &Path, name: &str, lang: Lang, link: Link) -> PathBuf {
    let exe = out_dir().join(name);
    let mut cmd = compiler(lang);
    cmd.arg("-I")
        .arg(include_dir())
        .arg(src)
        .arg("-o")
        .arg(&exe);
    // After the source: -x applies to inputs, and libraries must follow their users.
    cmd.args(["-x", "none", "-pthread"]);
    let profile = profile_dir();
    match link {
        Link::Shared => {
            cmd.arg("-L").arg(&profile).arg("-lkevent");
            cmd.arg(format!("-Wl,-rpath,{}", profile.display()));
        }
        Link::Static => {
            cmd.arg(profile.join("libkevent.a"));
            cmd.args([
                "-lgcc_s",
                "-lutil",
                "-lrt",
                "-lpthread",
                "-lm",
                "-ldl",
                "-lc",
            ]);
        }
    }
    run_checked(
        cmd,
        &format!("compiling {} ({lang:?}, {link:?})", src.display()),
    );
    exe
}

/// Runs `cmd` with a time limit; returns whether it exited 0, and its output. cargo puts
/// `target/<profile>` on `LD_LIBRARY_PATH` for tests, which would win over the programs' own
/// rpath: they must find libkevent.so.1 the way users' programs do.
pub fn run_output(mut cmd: Command) -> (Option<std::process::ExitStatus>, String) {
    cmd.env_remove("LD_LIBRARY_PATH")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child =
        crate::forks::spawn(&mut cmd).unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    // Drain both pipes while the program runs (a full pipe would stall it).
    let mut out_pipe = child.stdout.take().expect("stdout");
    let mut err_pipe = child.stderr.take().expect("stderr");
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out_pipe.read_to_string(&mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err_pipe.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if start.elapsed() > RUN_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let text = format!(
        "{}{}",
        out_t.join().unwrap_or_default(),
        err_t.join().unwrap_or_default()
    );
    (status, text)
}

/// Runs `exe` with a time limit; prints its output; fails the test on a non-zero exit.
pub fn run(exe: &Path) {
    run_cmd(Command::new(exe), &exe.display().to_string());
}

/// As [`run`], for a prepared command (`what` names it in messages).
pub fn run_cmd(cmd: Command, what: &str) {
    let (status, text) = run_output(cmd);
    println!("---- {what} ----\n{text}");
    match status {
        None => panic!("{what} ran longer than {RUN_LIMIT:?}"),
        Some(s) => assert!(s.success(), "{what} exited with {s}\n{text}"),
    }
}

/// The source of example `name` (`examples/c/<name>.c`).
pub fn example(name: &str) -> PathBuf {
    repo_dir().join("examples/c").join(format!("{name}.c"))
}

/// Every program in `examples/c/`, by name.
pub const EXAMPLES: [&str; 6] = [
    "ring_consumer",
    "timer_signal",
    "posix_timer",
    "tcp_server",
    "bad_input",
    "closed_fds",
];

/// Whether a C++ compiler is there. A missing one skips the C++ builds with a message, and
/// fails them under `KEVENT_REQUIRE_ALL=1` (as every tool-dependent test of the project).
pub fn have_cxx() -> bool {
    let found = crate::forks::output(compiler(Lang::Cxx17).arg("--version"))
        .is_ok_and(|o| o.status.success());
    if !found {
        let msg = "no C++ compiler (install g++): the C++ builds of the header are skipped";
        require_all_forbids(msg);
    }
    found
}

/// A tool-dependent part is skipped: print why; under `KEVENT_REQUIRE_ALL=1` fail instead.
pub fn require_all_forbids(msg: &str) {
    assert!(
        std::env::var_os("KEVENT_REQUIRE_ALL").is_none_or(|v| v != "1"),
        "{msg}"
    );
    println!("skipped: {msg}");
}

/// Builds example `name` for `lang` and `link` (the executable's name says both).
pub fn build_example(name: &str, lang: Lang, link: Link) -> PathBuf {
    let suffix = match link {
        Link::Shared => lang.suffix().to_string(),
        Link::Static => format!("{}-static", lang.suffix()),
    };
    build(&example(name), &format!("{name}{suffix}"), lang, link)
}

/// Builds example `name` for `lang` and `link` and runs it (C++ builds skip without a C++
/// compiler).
pub fn build_and_run(name: &str, lang: Lang, link: Link) {
    if lang.is_cxx() && !have_cxx() {
        return;
    }
    run(&build_example(name, lang, link));
}
