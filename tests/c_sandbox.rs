//! Issue 11, item 5: the C example programs under seccomp filters that refuse, one at a
//! time, each optional system call the fallback engine or the C library uses, with `EPERM`
//! (what older container runtimes answer for calls they do not know) and with `ENOSYS`.
//! Every program must pass unchanged: each optional call is probed once, and any failure
//! selects the path that needs nothing new.
//!
//! | call | who | path without it |
//! |---|---|---|
//! | `epoll_pwait2` | the engine's blocking waits (ns timeouts) | `epoll_wait`, timeouts rounded up to ms |
//! | `process_vm_readv`, `process_vm_writev` | the C library's copies where safecopy is not usable (a thread blocking `SIGSEGV`/`SIGBUS`: `bad_input.c` and `closed_fds.c` run such a thread) | a per-thread pipe above the fd floor |
//! | `madvise(MADV_WIPEONFORK)` | the pid cache of those copies | `getpid()` per copy |
//!
//! (The kevent syscalls themselves are probed by backend detection;
//! `tests/conformance/s6_detect_seccomp.rs` covers them.) Each run also starts a probe program under the same
//! filter that makes the refused call itself and checks the errno, so a filter that did not
//! take effect fails the test instead of passing it vacuously.
//!
//! The filter is installed in the child between `fork` and `exec` (`pre_exec`), with
//! `PR_SET_NO_NEW_PRIVS`, so no privilege is needed. x86_64 only (the filter checks the
//! architecture and the syscall numbers are x86_64's); without seccomp in the kernel the tests
//! skip, and fail instead under `KEVENT_REQUIRE_ALL=1`.

#[cfg(target_arch = "x86_64")]
mod x86_64 {
    use std::os::unix::process::CommandExt;
    use std::path::PathBuf;
    use std::process::Command;
    use std::sync::OnceLock;

    use kevent_test_support::c::{
        EXAMPLES, Lang, Link, build, build_example, out_dir, require_all_forbids, run_cmd,
    };
    use kevent_test_support::seccomp;

    /// One optional call to refuse: its number, and for `madvise` the one advice it is
    /// refused for (`args[2]`), so that the C library's and malloc's other uses still work.
    #[derive(Clone, Copy, Debug)]
    struct Refused {
        name: &'static str,
        nr: i64,
        arg2: Option<u32>,
    }

    const EPOLL_PWAIT2: Refused = Refused {
        name: "epoll_pwait2",
        nr: libc::SYS_epoll_pwait2,
        arg2: None,
    };
    const PROCESS_VM_READV: Refused = Refused {
        name: "process_vm_readv",
        nr: libc::SYS_process_vm_readv,
        arg2: None,
    };
    const PROCESS_VM_WRITEV: Refused = Refused {
        name: "process_vm_writev",
        nr: libc::SYS_process_vm_writev,
        arg2: None,
    };
    const MADV_WIPEONFORK: Refused = Refused {
        name: "madvise(MADV_WIPEONFORK)",
        nr: libc::SYS_madvise,
        arg2: Some(libc::MADV_WIPEONFORK as u32),
    };

    /// The BPF program: on x86_64, `refused` (with its `args[2]`, if given) answers
    /// `-errno`; everything else is allowed.
    fn filter(refused: Refused, errno: i32) -> Vec<libc::sock_filter> {
        let nr = refused.nr as u32;
        seccomp::refusing(nr..=nr, refused.arg2, seccomp::fail_with(errno))
    }

    /// Makes `cmd` run under `filter` (installed in the child before `exec`).
    fn sandboxed(mut cmd: Command, filter: Vec<libc::sock_filter>) -> Command {
        // SAFETY: the closure runs in the forked child before exec and only calls
        // `seccomp::install` (two prctl calls, async-signal-safe) with a program that lives in
        // the closure (moved in, never freed before exec).
        unsafe { cmd.pre_exec(move || seccomp::install(&filter)) };
        cmd
    }

    /// Whether this kernel takes seccomp filters at all (a child without privileges).
    fn seccomp_available() -> bool {
        let cmd = sandboxed(Command::new("true"), filter(EPOLL_PWAIT2, libc::EPERM));
        let mut cmd = cmd;
        cmd.output().is_ok_and(|o| o.status.success())
    }

    /// The probe: makes the refused call and exits 0 when it fails with the expected errno.
    fn probe_exe() -> PathBuf {
        static EXE: OnceLock<PathBuf> = OnceLock::new();
        EXE.get_or_init(|| {
            let src = out_dir().join("sandbox_probe.c");
            std::fs::write(
                &src,
                r#"#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include <kevent/kevent.h>
/* argv[1]: the call, argv[2]: the errno it must fail with. */
int main(int argc, char **argv)
{
	long r = 0;
	char a = 1, b = 0;
	struct iovec l = {&b, 1}, rm = {&a, 1};
	if (argc != 3)
		return 2;
	int want = atoi(argv[2]);
	errno = 0;
	if (!strcmp(argv[1], "epoll_pwait2")) {
		struct timespec z = {0, 0};
		r = syscall(SYS_epoll_pwait2, -1, NULL, 1, &z, NULL, 0);
	} else if (!strcmp(argv[1], "process_vm_readv")) {
		r = process_vm_readv(getpid(), &l, 1, &rm, 1, 0);
	} else if (!strcmp(argv[1], "process_vm_writev")) {
		r = process_vm_writev(getpid(), &l, 1, &rm, 1, 0);
	} else if (!strcmp(argv[1], "madvise(MADV_WIPEONFORK)")) {
		void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		r = madvise(p, 4096, MADV_WIPEONFORK);
	} else {
		return 2;
	}
	printf("probe: %s returned %ld, errno %d (%s); want %d\n", argv[1], r, errno,
	       strerror(errno), want);
	return r == -1 && errno == want ? 0 : 1;
}
"#,
            )
            .expect("write sandbox_probe.c");
            build(&src, "sandbox_probe", Lang::C99, Link::Shared)
        })
        .clone()
    }

    fn examples() -> &'static [(&'static str, PathBuf)] {
        static EXES: OnceLock<Vec<(&'static str, PathBuf)>> = OnceLock::new();
        EXES.get_or_init(|| {
            EXAMPLES
                .iter()
                .map(|&name| (name, build_example(name, Lang::C99, Link::Shared)))
                .collect()
        })
    }

    /// Every example program, and the probe, under a filter refusing `refused` with `errno`.
    fn every_example_without(refused: Refused, errno: i32) {
        if !seccomp_available() {
            return require_all_forbids("seccomp filters are not available here");
        }
        let what = format!("{} refused with errno {errno}", refused.name);
        let mut probe = Command::new(probe_exe());
        probe.arg(refused.name).arg(errno.to_string());
        run_cmd(
            sandboxed(probe, filter(refused, errno)),
            &format!("the probe ({what})"),
        );
        for (name, exe) in examples() {
            let mut cmd = Command::new(exe);
            // The fallback engine is what uses these calls (a native kernel's C library
            // passes caller memory to the kernel and never waits in epoll).
            cmd.env("KEVENT_BACKEND", "fallback");
            run_cmd(
                sandboxed(cmd, filter(refused, errno)),
                &format!("{name} ({what})"),
            );
        }
    }

    #[test]
    fn p23_c_examples_without_epoll_pwait2_eperm() {
        every_example_without(EPOLL_PWAIT2, libc::EPERM);
    }

    #[test]
    fn p23_c_examples_without_epoll_pwait2_enosys() {
        every_example_without(EPOLL_PWAIT2, libc::ENOSYS);
    }

    #[test]
    fn p23_c_examples_without_process_vm_readv_eperm() {
        every_example_without(PROCESS_VM_READV, libc::EPERM);
    }

    #[test]
    fn p23_c_examples_without_process_vm_readv_enosys() {
        every_example_without(PROCESS_VM_READV, libc::ENOSYS);
    }

    #[test]
    fn p23_c_examples_without_process_vm_writev_eperm() {
        every_example_without(PROCESS_VM_WRITEV, libc::EPERM);
    }

    #[test]
    fn p23_c_examples_without_process_vm_writev_enosys() {
        every_example_without(PROCESS_VM_WRITEV, libc::ENOSYS);
    }

    #[test]
    fn p23_c_examples_without_madv_wipeonfork_eperm() {
        every_example_without(MADV_WIPEONFORK, libc::EPERM);
    }

    #[test]
    fn p23_c_examples_without_madv_wipeonfork_enosys() {
        every_example_without(MADV_WIPEONFORK, libc::ENOSYS);
    }

    /// The filter itself: the refused call fails, a neighbour (plain `epoll_wait`, another
    /// `madvise` advice) does not, so the runs above prove what they claim.
    #[test]
    fn p23_c_sandbox_filter_refuses_only_its_call() {
        if !seccomp_available() {
            return require_all_forbids("seccomp filters are not available here");
        }
        let f = filter(MADV_WIPEONFORK, libc::EPERM);
        assert_eq!(
            f.len(),
            9,
            "arch (2), nr range (3), args[2] (2), two returns"
        );
        let mut sh = Command::new("sh");
        sh.args(["-c", "exit 0"]);
        run_cmd(sandboxed(sh, f), "sh under the madvise filter");
        let mut probe = Command::new(probe_exe());
        probe.args(["epoll_pwait2", &libc::EBADF.to_string()]);
        // Under a filter for another call, epoll_pwait2(-1, ...) reaches the kernel: EBADF.
        run_cmd(
            sandboxed(probe, filter(PROCESS_VM_READV, libc::EPERM)),
            "the probe, epoll_pwait2 not refused",
        );
    }
}
