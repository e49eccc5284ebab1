//! Builds libkevent's C face: the header, the pkg-config file and the shared library's soname.
//!
//! * `$OUT_DIR/include/kevent/kevent.h` is generated from `kevent-sys/include/linux/ukevent.h`
//!   (the one ABI header of the project, spec sections 1–2) plus the prototypes of
//!   `src/capi`. The ABI part is the same file, rewritten only so that it stands alone:
//!   `#include <linux/types.h>` becomes `<stdint.h>`, `__u32`/`__u64` become
//!   `uint32_t`/`uint64_t`, and `SIGEV_KEVENT` is defined only if a patched kernel's
//!   `<signal.h>` has not already done so. Its include guard `__UKEVENT_H` is kept, so a
//!   patched kernel's `<linux/ukevent.h>` with the same guard and `<kevent/kevent.h>` can be
//!   included together without redefinitions. Anything in `ukevent.h` that this rewrite does
//!   not expect fails the build instead of producing a header that drifts.
//! * `$OUT_DIR/kevent.pc` is the pkg-config file, relocatable (`prefix=${pcfiledir}/../..`);
//!   `scripts/install.sh` writes the absolute prefix into the installed copy.
//! * Both are mirrored into the profile directory (`target/<profile>/include/kevent/kevent.h`,
//!   `target/<profile>/kevent.pc`), next to `libkevent_c.so` and `libkevent_c.a`, together with
//!   the symlinks `libkevent.so`, `libkevent.so.1` (→ `libkevent_c.so`) and `libkevent.a`
//!   (→ `libkevent_c.a`), so that an uninstalled build links like an installed one:
//!   `cc prog.c -Itarget/debug/include -Ltarget/debug -lkevent -Wl,-rpath,$PWD/target/debug`.
//! * The cdylib gets the soname `libkevent.so.1` (`-Wl,-soname`).

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

/// The soname's major version: bumped only when the C ABI breaks.
const SONAME_MAJOR: u32 = 1;

/// Native libraries a Rust staticlib needs on Linux (`rustc --print native-static-libs`).
const STATIC_LIBS_GNU: &str = "-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc";
const STATIC_LIBS_MUSL: &str = "-lc";

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    // kevent-sys exports its bundled header's directory (`links = "kevent"` metadata); the
    // path inside this repository is the fallback for a kevent-sys without that export.
    let ukevent_h = env::var_os("DEP_KEVENT_INCLUDE")
        .map_or_else(|| manifest.join("kevent-sys/include"), PathBuf::from);
    let ukevent_h = ukevent_h.join("linux/ukevent.h");
    let version = env::var("CARGO_PKG_VERSION").expect("cargo sets it");
    let target = env::var("TARGET").expect("cargo sets TARGET");

    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={}", ukevent_h.display());

    // The soname (only the cdylib gets it; rlib and staticlib are unaffected).
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libkevent.so.{SONAME_MAJOR}");

    let body = match fs::read_to_string(&ukevent_h) {
        Ok(b) => b,
        Err(e) => panic!("cannot read {}: {e}", ukevent_h.display()),
    };
    let header = match kevent_h(&body, &version) {
        Ok(h) => h,
        Err(e) => panic!(
            "{}: {e}; update the rewrite in build.rs together with the header",
            ukevent_h.display()
        ),
    };
    let static_libs = if target.contains("musl") {
        STATIC_LIBS_MUSL
    } else {
        STATIC_LIBS_GNU
    };
    let pc = kevent_pc(&version, static_libs);

    write_if_changed(&out.join("include/kevent/kevent.h"), &header);
    write_if_changed(&out.join("kevent.pc"), &pc);
    println!(
        "cargo:rustc-env=KEVENT_C_HEADER={}",
        out.join("include/kevent/kevent.h").display()
    );

    // OUT_DIR is <profile>/build/kevent-c-<hash>/out; mirror next to the libraries.
    let profile = out.ancestors().nth(3).filter(|_| {
        out.ancestors()
            .nth(2)
            .and_then(Path::file_name)
            .is_some_and(|n| n == "build")
    });
    let Some(profile) = profile else {
        println!(
            "cargo:warning=unexpected OUT_DIR layout {}; the header and kevent.pc are only in OUT_DIR",
            out.display()
        );
        return;
    };
    write_if_changed(&profile.join("include/kevent/kevent.h"), &header);
    write_if_changed(&profile.join("kevent.pc"), &pc);
    for (link, to) in [
        ("libkevent.so", "libkevent_c.so"),
        (&format!("libkevent.so.{SONAME_MAJOR}"), "libkevent_c.so"),
        ("libkevent.a", "libkevent_c.a"),
    ] {
        symlink(&profile.join(link), Path::new(to));
    }
}

/// The installed header: the guard, the system headers the prototypes need, the rewritten
/// `ukevent.h`, then the prototypes inside `extern "C"`.
fn kevent_h(ukevent_h: &str, version: &str) -> Result<String, String> {
    let abi = rewrite_ukevent_h(ukevent_h)?;
    let mut h = String::new();
    let _ = write!(
        h,
        r#"/*
 * kevent/kevent.h - libkevent {version}: the kevent ABI v1 for C and C++.
 *
 * GENERATED by kevent-c's build.rs from kevent-sys/include/linux/ukevent.h (the project's one
 * ABI header) plus the prototypes of libkevent. Do not edit; edit those instead.
 *
 * Link with `pkg-config --cflags --libs kevent` (-lkevent). The same binary uses the kernel's
 * kevent syscalls on a kevent kernel and the userspace fallback engine elsewhere; see
 * kevent_backend().
 *
 * Errors: every int-returning call returns -1 and sets errno.
 *
 * SPDX-License-Identifier: MIT OR Apache-2.0
 */
#ifndef KEVENT_KEVENT_H
#define KEVENT_KEVENT_H

/*
 * The prototypes use POSIX types (struct timespec, clockid_t, timer_t, struct itimerspec,
 * struct sigevent). In strict ISO C mode (-std=c99, -std=c11) the C library hides them unless a
 * POSIX feature macro is defined before the first #include.
 */
#if defined(__STRICT_ANSI__) && !defined(__cplusplus) && !defined(_POSIX_C_SOURCE) && \
    !defined(_XOPEN_SOURCE) && !defined(_GNU_SOURCE) && !defined(_DEFAULT_SOURCE) && \
    !defined(_BSD_SOURCE)
#error "<kevent/kevent.h> needs POSIX: #define _POSIX_C_SOURCE 200809L before any #include (or compile with -std=gnu99)"
#endif

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <signal.h>
#include <time.h>

/* libkevent's version, and the version of the kevent ABI it implements. */
#define LIBKEVENT_VERSION "{version}"
#define KEVENT_ABI_VERSION 1

/* ---- begin kevent-sys/include/linux/ukevent.h ---- */
{abi}/* ---- end kevent-sys/include/linux/ukevent.h ---- */

#ifdef __cplusplus
extern "C" {{
#endif

/*
 * Creates a queue and returns its fd (close-on-exec). ring == NULL && num == 0: a queue
 * without a ring; otherwise ring != NULL and num >= 2 (EINVAL). No flags are defined (EINVAL).
 *
 * The ring is sizeof(struct kevent_ring) + num * sizeof(struct ukevent) bytes of the caller's
 * memory, aligned for struct kevent_ring. It must stay mapped and writable until the queue fd
 * (and every dup of it) is closed: the queue writes ring_kidx, ring_over and entries during
 * later calls. An unmapped or read-only ring gives EFAULT here; unmapping or freeing it while
 * the queue lives is undefined behaviour, as for an io_uring buffer.
 */
int kevent_init(struct kevent_ring *ring, unsigned int num, unsigned int flags);

/*
 * KEVENT_CTL_ADD / _REMOVE / _MODIFY / _READY on num entries at arg (rewritten in place).
 * ADD returns how many entries it wrote back to the start of arg (ready at once, or failed with
 * KEVENT_RET_BROKEN and ret_data[1] = -errno); READY returns how many it marked.
 * EBADF/EINVAL for a bad fd, EINVAL for an unknown cmd, EFAULT if arg is not readable and
 * writable for num entries (NULL with num > 0).
 */
int kevent_ctl(int fd, unsigned int cmd, unsigned int num, struct ukevent *arg);

/*
 * Waits until max(min_nr, 1) kevents are ready, the timeout passes or a READY(0) wake-up
 * comes, then copies up to max_nr ready events to buf and returns how many (0 on timeout).
 * timeout is relative on CLOCK_MONOTONIC ({{0, 0}}: do not block), or absolute on
 * CLOCK_REALTIME with KEVENT_FLAGS_ABSTIME. EINVAL for a bad timeout or unknown flags, EFAULT
 * if events are ready and buf is not writable.
 */
int kevent_get_events(int fd, unsigned int min_nr, unsigned int max_nr,
                      struct timespec timeout, struct ukevent *buf, unsigned int flags);

/*
 * Waits as kevent_get_events(), then moves up to num ready events into the ring and returns
 * how many; returns 0 at once if old_uidx is not the queue's consumer index. EINVAL without a
 * ring or for num larger than the ring. A ring of n entries holds at most n - 1 events.
 */
int kevent_wait(int fd, unsigned int num, unsigned int old_uidx,
                struct timespec timeout, unsigned int flags);

/*
 * Releases ring slots up to new_uidx (one past the last consumed); returns how many, 0 for a
 * stale commit. over is the ring_over read before consuming. EINVAL for new_uidx >= n or a
 * queue without a ring, EOVERFLOW if over is neither ring_over nor ring_over - 1.
 */
int kevent_commit(int fd, unsigned int new_uidx, unsigned int over);

/*
 * Starts sending count bytes of in_fd, from offset, to the connected stream socket sock_fd in
 * the background, and returns at once with a request id > 0 (or -1 and errno). When the
 * transfer ends, one KEVENT_AIO event is queued on fd: id.raw_u64 = the request id,
 * ret_data[0..1] = bytes sent (64-bit, low word first; fewer than count at end of file); on an
 * error KEVENT_RET_BROKEN, ret_data[1] = -errno and ret_data[0] = the bytes sent before it (a
 * closed peer gives -EPIPE or -ECONNRESET, never SIGPIPE). count == 0 completes at once.
 * Closing in_fd or sock_fd does not end a transfer; KEVENT_CTL_REMOVE of (KEVENT_AIO, id)
 * cancels it (no event follows), and so does closing the queue. Errors: EBADF (bad fd, closed
 * in_fd or sock_fd), EINVAL (fd not a queue, in_fd not a regular file open for reading,
 * sock_fd not a stream socket, offset + count past the largest file offset), ENOTCONN
 * (unconnected stream socket), ENOSYS (a kevent kernel without native AIO). See
 * kevent_aio_sendfile(2).
 */
long long kevent_aio_sendfile(int fd, int sock_fd, int in_fd, uint64_t offset, uint64_t count);

/*
 * "native" or "fallback": the backend this process uses, chosen once from KEVENT_BACKEND
 * (auto, native, fallback) and the running kernel. NULL when there is none (KEVENT_BACKEND
 * invalid, or native required but unavailable); every call then fails with ENOSYS.
 */
const char *kevent_backend(void);

/*
 * Why the native backend is not used (a sentence for logs), or NULL when it is used. The
 * string is static.
 */
const char *kevent_backend_unavailable(void);

/*
 * timer_create() for timers that report to a kevent queue: sevp->sigev_notify = SIGEV_KEVENT,
 * the queue fd in the first int of sevp->_sigev_un (use kevent_sigev_set_fd()), and
 * sevp->sigev_value.sival_ptr comes back in each event's ptr. On a kevent kernel these are the
 * kernel's POSIX timers; elsewhere the fallback engine emulates them. The timer_t values belong
 * to libkevent: use them only with the kevent_timer_* calls. sevp == NULL gives EINVAL.
 */
int kevent_timer_create(clockid_t clockid, struct sigevent *sevp, timer_t *timerid);
int kevent_timer_settime(timer_t timerid, int flags, const struct itimerspec *new_value,
                         struct itimerspec *old_value);
int kevent_timer_gettime(timer_t timerid, struct itimerspec *curr_value);
int kevent_timer_delete(timer_t timerid);

/*
 * Stores a queue fd where SIGEV_KEVENT expects it: the first int of the sigevent's _sigev_un
 * union (glibc's _sigev_un._tid, sigev_notify_thread_id), which directly follows sigev_notify.
 */
static inline void kevent_sigev_set_fd(struct sigevent *sev, int fd)
{{
	memcpy((char *)sev + offsetof(struct sigevent, sigev_notify) + sizeof(int), &fd, sizeof fd);
}}

#ifdef __cplusplus
}}
#endif

#endif /* KEVENT_KEVENT_H */
"#
    );
    Ok(h)
}

/// Makes `ukevent.h` self-contained (see the crate's build docs); fails on anything the
/// rewrite does not expect.
fn rewrite_ukevent_h(src: &str) -> Result<String, String> {
    if !src.contains("#ifndef __UKEVENT_H") {
        return Err("the include guard __UKEVENT_H is missing".into());
    }
    let mut out = String::with_capacity(src.len() + 128);
    let mut saw_types = false;
    let mut saw_sigev = false;
    for line in src.lines() {
        let t = line.trim();
        if t == "#include <linux/types.h>" {
            out.push_str("#include <stdint.h> /* was <linux/types.h>: __u32, __u64 */\n");
            saw_types = true;
            continue;
        }
        if t.starts_with("#include") {
            return Err(format!("unexpected include {t:?}"));
        }
        if t.starts_with("#define SIGEV_KEVENT") {
            out.push_str("#ifndef SIGEV_KEVENT /* a patched kernel's <signal.h> may have it */\n");
            out.push_str(line);
            out.push_str("\n#endif\n");
            saw_sigev = true;
            continue;
        }
        out.push_str(&replace_word(
            &replace_word(line, "__u32", "uint32_t"),
            "__u64",
            "uint64_t",
        ));
        out.push('\n');
    }
    if !saw_types {
        return Err("#include <linux/types.h> is missing".into());
    }
    if !saw_sigev {
        return Err("#define SIGEV_KEVENT is missing".into());
    }
    if let Some(w) = [
        "__u8",
        "__u16",
        "__s8",
        "__s16",
        "__s32",
        "__s64",
        "__kernel_",
        "__le",
        "__be",
    ]
    .iter()
    .find(|w| out.contains(**w))
    {
        return Err(format!("it uses {w}, which the rewrite does not map"));
    }
    Ok(out)
}

/// Replaces whole-word occurrences of `from` (C identifier boundaries).
fn replace_word(s: &str, from: &str, to: &str) -> String {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(from) {
        let before = rest[..i].chars().next_back();
        let after = rest[i + from.len()..].chars().next();
        out.push_str(&rest[..i]);
        if before.is_some_and(is_ident) || after.is_some_and(is_ident) {
            out.push_str(from);
        } else {
            out.push_str(to);
        }
        rest = &rest[i + from.len()..];
    }
    out.push_str(rest);
    out
}

/// The pkg-config file. `prefix` is relative to the file's own directory, so an installed copy
/// works wherever it lands; scripts/install.sh writes the absolute prefix anyway.
fn kevent_pc(version: &str, static_libs: &str) -> String {
    format!(
        "prefix=${{pcfiledir}}/../..\n\
         exec_prefix=${{prefix}}\n\
         libdir=${{exec_prefix}}/lib\n\
         includedir=${{prefix}}/include\n\
         \n\
         Name: kevent\n\
         Description: The kevent event-notification ABI: kernel syscalls or a userspace fallback\n\
         Version: {version}\n\
         Libs: -L${{libdir}} -lkevent\n\
         Libs.private: {static_libs}\n\
         Cflags: -I${{includedir}}\n"
    )
}

fn write_if_changed(path: &Path, content: &str) {
    if fs::read_to_string(path).is_ok_and(|old| old == content) {
        return;
    }
    if let Some(dir) = path.parent() {
        if let Err(e) = fs::create_dir_all(dir) {
            panic!("cannot create {}: {e}", dir.display());
        }
    }
    if let Err(e) = fs::write(path, content) {
        panic!("cannot write {}: {e}", path.display());
    }
}

fn symlink(link: &Path, to: &Path) {
    if fs::read_link(link).is_ok_and(|old| old == to) {
        return;
    }
    let _ = fs::remove_file(link);
    if let Err(e) = std::os::unix::fs::symlink(to, link) {
        println!("cargo:warning=cannot create {}: {e}", link.display());
    }
}
