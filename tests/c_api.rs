//! The C library checked from C (issue 5): the programs in `examples/c/` are compiled with the
//! cc crate's compiler against the generated `<kevent/kevent.h>` and the built library, with
//! `-pedantic -Wall -Wextra -Werror`, as C99 and (where stated) as C++17, then run. Each
//! program prints what it checks and exits non-zero on the first failure class; the harness
//! prints its output. The header alone is checked in C99, C11, C++17 and C++20, and
//! `kevent-sys/include/linux/ukevent.h` as the kernel's uapi header (issue 11).
//!
//! Finding the library and header, compiling and running: `kevent_test_support::c` (`tests/support/src/c.rs`).

use std::path::Path;
use std::process::Command;

use kevent_test_support::backends;
use kevent_test_support::c::{
    Lang, Link, build, build_and_run, build_example, compiler, example, have_cxx, include_dir,
    out_dir, profile_dir, repo_dir, run, run_checked, run_cmd,
};

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

/// A program that includes nothing but the generated header and asserts the layout of spec
/// section 1 with the compiler.
const HEADER_ONLY_C: &str = r#"#define _POSIX_C_SOURCE 200809L
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
"#;

/// The header alone, in C99, C11, C++17 and C++20 with `-pedantic -Werror`, with the layout
/// of spec section 1 asserted by the compiler; and a clear error in strict ISO C without a
/// POSIX feature macro.
#[test]
fn c_header_compiles_alone_with_spec_layout() {
    let src = out_dir().join("header_only.c");
    std::fs::write(&src, HEADER_ONLY_C).expect("write header_only.c");
    // Every standard C and C++ users build with, -pedantic -Werror included (issue 11: the
    // anonymous unions are C11, the flexible array member is not C++).
    for lang in Lang::ALL {
        if lang.is_cxx() && !have_cxx() {
            continue;
        }
        run(&build(
            &src,
            &format!("header_only-{lang:?}"),
            lang,
            Link::Shared,
        ));
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

/// The same checks with clang and clang++, when they are installed (the header must not
/// depend on GCC's reading of `__extension__`).
#[test]
fn c_header_pedantic_with_clang() {
    let src = out_dir().join("header_only_clang.c");
    std::fs::write(&src, HEADER_ONLY_C).expect("write header_only_clang.c");
    for lang in Lang::ALL {
        let tool = if lang.is_cxx() { "clang++" } else { "clang" };
        if Command::new(tool).arg("--version").output().is_err() {
            println!("skipped: no {tool}");
            continue;
        }
        let mut cmd = Command::new(tool);
        cmd.arg(lang.std_flag())
            .args(["-x", if lang.is_cxx() { "c++" } else { "c" }])
            .args([
                "-pedantic",
                "-Wall",
                "-Wextra",
                "-Werror",
                "-fsyntax-only",
                "-I",
            ])
            .arg(include_dir())
            .arg(&src);
        run_checked(cmd, &format!("{tool} {}", lang.std_flag()));
    }
}

/// `kevent-sys/include/linux/ukevent.h` is also the kernel port's uapi header
/// (`include/uapi/linux/ukevent.h`): it must build as the kernel checks uapi headers
/// (`usr/include/Makefile`: `-std=c90 -Wall -Werror=implicit-function-declaration`, here with
/// `-Werror`), and as user programs include it (C99, C11, C++17, C++20, `-pedantic -Werror`),
/// with nothing but `<linux/types.h>`, with the layout of spec section 1; and it uses no libc
/// type (only `__u32`/`__u64` and plain C types).
#[test]
fn c_uapi_header_is_a_valid_kernel_uapi_header() {
    let include = repo_dir().join("kevent-sys/include");
    let text = std::fs::read_to_string(include.join("linux/ukevent.h")).expect("ukevent.h");
    let includes: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with("#include"))
        .collect();
    assert_eq!(
        includes,
        ["#include <linux/types.h>"],
        "uapi headers include only kernel headers"
    );
    for libc_type in [
        "uint32_t", "uint64_t", "size_t", "int32_t", "int64_t", "time_t", "pid_t",
    ] {
        let used = text
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .any(|w| w == libc_type);
        assert!(!used, "ukevent.h uses the libc type {libc_type}");
    }
    let src = out_dir().join("uapi_only.c");
    std::fs::write(
        &src,
        r#"#include <linux/ukevent.h>
#include <linux/ukevent.h> /* twice: guarded */
#include <stddef.h> /* the test's offsetof; the header needs nothing but <linux/types.h> */
#define ASSERT(name, cond) typedef char name[(cond) ? 1 : -1]
#define OFF(t, m) offsetof(t, m)
ASSERT(ukevent_size, sizeof(struct ukevent) == 40);
ASSERT(kevent_id_size, sizeof(struct kevent_id) == 8);
ASSERT(ring_header, sizeof(struct kevent_ring) == 8);
ASSERT(type_off, OFF(struct ukevent, type) == 8);
ASSERT(ret_data_off, OFF(struct ukevent, ret_data) == 24);
ASSERT(user_off, OFF(struct ukevent, user) == 32);
ASSERT(ring_events, OFF(struct kevent_ring, event) == 8);
int main(void)
{
	struct kevent_id id;
	id.raw_u64 = 0;
	return (int)id.raw[1];
}
"#,
    )
    .expect("write uapi_only.c");
    // The kernel's own check (C90, not pedantic: the kernel builds with GNU extensions).
    let mut cmd = compiler(Lang::C99);
    cmd.args(["-std=c90", "-Wno-pedantic", "-fsyntax-only", "-I"])
        .arg(&include)
        .arg(&src);
    run_checked(cmd, "ukevent.h as the kernel's uapi check builds it (C90)");
    for lang in Lang::ALL {
        if lang.is_cxx() && !have_cxx() {
            continue;
        }
        let mut cmd = compiler(lang);
        cmd.args(["-fsyntax-only", "-I"]).arg(&include).arg(&src);
        run_checked(cmd, &format!("ukevent.h alone, {}", lang.std_flag()));
    }
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

/// D18 from C: `kevent_aio_sendfile`, its completion, REMOVE, its errors (ENOSYS on a kevent
/// kernel without the call, where the program says so and exits 0).
#[test]
fn c_aio_sendfile() {
    build_and_run("aio_sendfile", Lang::C99, Link::Shared);
}

/// P38 from C: the asynchronous ring in an anonymous mapping, a producer thread, a consumer
/// that reads with no call and waits only when the ring is empty, the errnos, on every
/// backend this machine has (`KEVENT_BACKEND`); a kernel without P38 is a printed skip (a
/// failure under `KEVENT_REQUIRE_ALL=1`, inside the program).
#[test]
fn c_async_ring_on_every_backend() {
    let exe = build_example("async_ring", Lang::C99, Link::Shared);
    for b in backends("c_async_ring_on_every_backend") {
        let mut cmd = Command::new(&exe);
        cmd.env("KEVENT_BACKEND", b.as_str());
        run_cmd(cmd, &format!("async_ring on the {} backend", b.as_str()));
    }
    build_and_run("async_ring", Lang::Cxx17, Link::Shared);
}

#[test]
fn c_bad_input_every_errno() {
    build_and_run("bad_input", Lang::C99, Link::Shared);
    build_and_run("bad_input", Lang::Cxx17, Link::Shared);
}

/// Issue 11, items 2 and 4: `dup`/`close`/call gives EBADF in a thread that never called the
/// library (and after the calls that make the queue create internal fds); a closed queue's
/// NOMASK SIGNAL kevent gives the signal back to the handler, or to the default action.
#[test]
fn c_closed_fds_stay_closed_and_give_signals_back() {
    build_and_run("closed_fds", Lang::C99, Link::Shared);
    build_and_run("closed_fds", Lang::Cxx20, Link::Shared);
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
