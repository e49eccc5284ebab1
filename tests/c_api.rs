//! The C library checked from C (issue 5): the programs in `examples/c/` are compiled with the
//! cc crate's compiler against the generated `<kevent/kevent.h>` and the built library, with
//! `-Wall -Wextra -Werror`, as C99 and (where stated) as C++17, then run. Each program prints
//! what it checks and exits non-zero on the first failure class; the harness prints its output.
//!
//! The library and header are found next to this test executable: `target/<profile>/deps/`
//! holds the test, `target/<profile>/` holds `libkevent_c.so`, `libkevent_c.a`, the
//! `libkevent.so*` / `libkevent.a` symlinks and `include/kevent/kevent.h` (see `build.rs`).
//! Compiled programs go to `target/<profile>/c-tests/`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one C program may run.
const RUN_LIMIT: Duration = Duration::from_secs(90);

fn profile_dir() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().expect("current_exe");
        // target/<profile>/deps/c_api-<hash>
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
/// (`libkevent_c.so`, `libkevent_c.a`) exists only after a `cargo build`. Build it here when
/// it is missing, so that `cargo test --workspace` on a fresh clone runs these tests.
fn ensure_c_library(profile: &Path) {
    if profile.join("libkevent_c.so").exists() && profile.join("libkevent_c.a").exists() {
        return;
    }
    let target = profile.parent().expect("target/<profile>");
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["build", "-p", "kevent-c", "--lib"])
        .current_dir(repo_dir())
        .env("CARGO_TARGET_DIR", target);
    if profile.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let status = cmd.status().expect("run cargo build for the C library");
    assert!(status.success(), "cargo build -p kevent-c --lib failed");
}

fn repo_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn include_dir() -> PathBuf {
    profile_dir().join("include")
}

fn out_dir() -> PathBuf {
    let d = profile_dir().join("c-tests");
    std::fs::create_dir_all(&d).expect("create c-tests dir");
    d
}

#[derive(Clone, Copy, Debug)]
enum Lang {
    C99,
    Cxx17,
}

#[derive(Clone, Copy, Debug)]
enum Link {
    /// `-lkevent` against `libkevent.so` (soname `libkevent.so.1`), with an rpath.
    Shared,
    /// `libkevent.a` and the native libraries a Rust staticlib needs.
    Static,
}

fn compiler(lang: Lang) -> Command {
    let target = env!("KEVENT_C_TARGET");
    let tool = cc::Build::new()
        .cargo_metadata(false)
        .cargo_warnings(false)
        .target(target)
        .host(target)
        .opt_level(0)
        .debug(false)
        .cpp(matches!(lang, Lang::Cxx17))
        .get_compiler();
    let mut cmd = tool.to_command();
    match lang {
        Lang::C99 => cmd.args(["-std=c99", "-x", "c"]),
        Lang::Cxx17 => cmd.args(["-std=c++17", "-x", "c++"]),
    };
    cmd.args(["-Wall", "-Wextra", "-Werror"]);
    cmd
}

fn run_checked(mut cmd: Command, what: &str) -> String {
    let out = cmd
        .output()
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
fn build(src: &Path, name: &str, lang: Lang, link: Link) -> PathBuf {
    let exe = out_dir().join(name);
    let mut cmd = compiler(lang);
    cmd.arg("-I")
        .arg(include_dir())
        .arg(src)
        .arg("-o")
        .arg(&exe);
    // After the source: -x applies to inputs, and libraries must follow their users.
    cmd.args(["-x", "none"]);
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

/// Runs `exe` with a time limit; prints its output; fails the test on a non-zero exit.
fn run(exe: &Path) {
    // cargo puts target/<profile> on LD_LIBRARY_PATH for tests, which would win over the
    // programs' own rpath: they must find libkevent.so.1 the way users' programs do.
    let mut child = Command::new(exe)
        .env_remove("LD_LIBRARY_PATH")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", exe.display()));
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
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut s) = child.stdout.take() {
        let _ = s.read_to_string(&mut out);
    }
    if let Some(mut s) = child.stderr.take() {
        let _ = s.read_to_string(&mut err);
    }
    println!("---- {} ----\n{out}{err}", exe.display());
    match status {
        None => panic!("{} ran longer than {RUN_LIMIT:?}", exe.display()),
        Some(s) => assert!(s.success(), "{} exited with {s}", exe.display()),
    }
}

fn example(name: &str) -> PathBuf {
    repo_dir().join("examples/c").join(format!("{name}.c"))
}

/// Whether a C++ compiler is there. A missing one skips the C++17 builds with a message, and
/// fails them under `KEVENT_REQUIRE_ALL=1` (as every tool-dependent test of the project).
fn have_cxx() -> bool {
    let found = compiler(Lang::Cxx17)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        let msg = "no C++ compiler (install g++): the C++17 builds of the header are skipped";
        assert!(
            std::env::var_os("KEVENT_REQUIRE_ALL").is_none_or(|v| v != "1"),
            "{msg}"
        );
        println!("skipped: {msg}");
    }
    found
}

fn build_and_run(name: &str, lang: Lang, link: Link) {
    if matches!(lang, Lang::Cxx17) && !have_cxx() {
        return;
    }
    let suffix = match (lang, link) {
        (Lang::C99, Link::Shared) => "",
        (Lang::Cxx17, Link::Shared) => "-cxx",
        (Lang::C99, Link::Static) => "-static",
        (Lang::Cxx17, Link::Static) => "-cxx-static",
    };
    let exe = build(&example(name), &format!("{name}{suffix}"), lang, link);
    run(&exe);
}

#[test]
fn c_header_is_the_generated_one() {
    let built = std::fs::read_to_string(include_dir().join("kevent/kevent.h"))
        .expect("target/<profile>/include/kevent/kevent.h");
    let generated = std::fs::read_to_string(env!("KEVENT_C_HEADER")).expect("OUT_DIR header");
    assert_eq!(built, generated);
    // The ABI part is kevent-sys's ukevent.h, not a copy that could drift.
    let ukevent_h = std::fs::read_to_string(repo_dir().join("kevent-sys/include/linux/ukevent.h"))
        .expect("ukevent.h");
    for line in ukevent_h
        .lines()
        .filter(|l| l.starts_with("#define KEVENT_"))
    {
        assert!(built.contains(line), "kevent.h lacks {line:?}");
    }
    assert!(!built.contains("linux/types.h") || built.contains("was <linux/types.h>"));
    assert!(!built.contains("__u32") || built.contains("was <linux/types.h>: __u32"));
}

/// The header alone, in both languages, with the layout of spec section 1 asserted by the C
/// compiler; and a clear error in strict ISO C without a POSIX feature macro.
#[test]
fn c_header_compiles_alone_with_spec_layout() {
    let src = out_dir().join("header_only.c");
    std::fs::write(
        &src,
        r#"#define _POSIX_C_SOURCE 200809L
#include <kevent/kevent.h>
#include <kevent/kevent.h> /* twice: guarded */
#define ASSERT(name, cond) typedef char name[(cond) ? 1 : -1]
ASSERT(ukevent_size, sizeof(struct ukevent) == 40);
ASSERT(kevent_id_size, sizeof(struct kevent_id) == 8);
ASSERT(ring_header, sizeof(struct kevent_ring) == 8);
ASSERT(type_off, offsetof(struct ukevent, type) == 8);
ASSERT(req_off, offsetof(struct ukevent, req_flags) == 16);
ASSERT(ret_data_off, offsetof(struct ukevent, ret_data) == 24);
ASSERT(user_off, offsetof(struct ukevent, user) == 32);
ASSERT(ptr_off, offsetof(struct ukevent, ptr) == 32);
ASSERT(ring_events, offsetof(struct kevent_ring, event) == 8);
ASSERT(sigev_kevent, SIGEV_KEVENT == 8);
ASSERT(nomask, KEVENT_SIGNAL_NOMASK == 0x8000000000000000ULL);
int main(void)
{
	struct sigevent sev;
	int fd = 0;
	memset(&sev, 0, sizeof sev);
	kevent_sigev_set_fd(&sev, 42);
	memcpy(&fd, (char *)&sev + offsetof(struct sigevent, sigev_notify) + sizeof(int), sizeof fd);
	(void)kevent_backend_unavailable(); /* links */
	return fd == 42 ? 0 : 1;
}
"#,
    )
    .expect("write header_only.c");
    run(&build(&src, "header_only", Lang::C99, Link::Shared));
    if have_cxx() {
        run(&build(&src, "header_only-cxx", Lang::Cxx17, Link::Shared));
    }

    let strict = out_dir().join("header_strict.c");
    std::fs::write(
        &strict,
        "#include <kevent/kevent.h>\nint main(void) { return 0; }\n",
    )
    .expect("write header_strict.c");
    let mut cmd = compiler(Lang::C99);
    cmd.arg("-I")
        .arg(include_dir())
        .arg("-fsyntax-only")
        .arg(&strict);
    let out = cmd.output().expect("run the compiler");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("needs POSIX"),
        "{err}"
    );
}

#[test]
fn c_ring_consumer_wait_commit_wraparound() {
    build_and_run("ring_consumer", Lang::C99, Link::Shared);
    build_and_run("ring_consumer", Lang::Cxx17, Link::Shared);
}

#[test]
fn c_ring_consumer_static_link() {
    build_and_run("ring_consumer", Lang::C99, Link::Static);
}

#[test]
fn c_timer_and_signal() {
    build_and_run("timer_signal", Lang::C99, Link::Shared);
}

#[test]
fn c_posix_timer() {
    build_and_run("posix_timer", Lang::C99, Link::Shared);
}

#[test]
fn c_tcp_server() {
    build_and_run("tcp_server", Lang::C99, Link::Shared);
}

#[test]
fn c_bad_input_every_errno() {
    build_and_run("bad_input", Lang::C99, Link::Shared);
    build_and_run("bad_input", Lang::Cxx17, Link::Shared);
}

/// The documented install (`scripts/install.sh`, here without its release build: it installs
/// this profile's artifacts), then `cc prog.c $(pkg-config --cflags --libs kevent)`.
#[test]
fn c_install_then_pkg_config() {
    if Command::new("pkg-config")
        .arg("--version")
        .output()
        .is_err()
    {
        println!("skipped: no pkg-config");
        return;
    }
    let prefix = out_dir().join("prefix");
    let _ = std::fs::remove_dir_all(&prefix);
    let mut install = Command::new("sh");
    install
        .arg(repo_dir().join("scripts/install.sh"))
        .arg("--prefix")
        .arg(&prefix)
        .arg("--no-build")
        .arg("--from")
        .arg(profile_dir());
    println!("{}", run_checked(install, "scripts/install.sh"));

    let lib = prefix.join("lib");
    for f in [
        "libkevent.so.1.0.0",
        "libkevent.so.1",
        "libkevent.so",
        "libkevent.a",
    ] {
        assert!(lib.join(f).exists(), "{f} not installed");
    }
    assert_eq!(
        std::fs::read_link(lib.join("libkevent.so.1")).expect("symlink"),
        Path::new("libkevent.so.1.0.0")
    );
    assert!(prefix.join("include/kevent/kevent.h").is_file());

    let pc_path = lib.join("pkgconfig");
    let mut pc = Command::new("pkg-config");
    pc.env("PKG_CONFIG_PATH", &pc_path)
        .args(["--cflags", "--libs", "kevent"]);
    let flags = run_checked(pc, "pkg-config --cflags --libs kevent");
    println!("pkg-config: {flags}");
    assert!(
        flags.contains(&format!("-I{}", prefix.join("include").display())),
        "{flags}"
    );

    let exe = out_dir().join("pkg_config_ring_consumer");
    let mut cc = compiler(Lang::C99);
    cc.arg(example("ring_consumer"))
        .arg("-o")
        .arg(&exe)
        .args(["-x", "none"]);
    cc.args(flags.split_whitespace());
    cc.arg(format!("-Wl,-rpath,{}", lib.display()));
    run_checked(
        cc,
        "cc ring_consumer.c $(pkg-config --cflags --libs kevent)",
    );
    let ldd = Command::new("ldd")
        .arg(&exe)
        .env_remove("LD_LIBRARY_PATH")
        .output();
    if let Ok(ldd) = ldd {
        let text = String::from_utf8_lossy(&ldd.stdout);
        assert!(
            text.contains(&format!(
                "libkevent.so.1 => {}",
                lib.join("libkevent.so.1").display()
            )),
            "{text}"
        );
    }
    run(&exe);
}
