//! Spec section 6: "Nothing ever calls a kevent syscall number on a kernel that did not
//! advertise it."
//!
//! Each test re-runs this test binary as a child (`--exact <its own name>`), which installs a
//! seccomp filter that kills the process (`SECCOMP_RET_KILL_PROCESS`, signal `SIGSYS`) on the
//! historic kevent numbers, x86_64 280–284, and then runs detection against a sysfs root in a
//! temporary directory. A child that survives and reports the expected result proves detection
//! issued none of those numbers; the control test proves the filter does kill on them.
//!
//! x86_64 only (the historic numbers and the filter's architecture check are x86_64's);
//! elsewhere each test prints why it skipped. Without seccomp support in the kernel the tests
//! skip too, and fail instead under `KEVENT_REQUIRE_ALL=1`.

#[cfg(target_arch = "x86_64")]
mod x86_64 {
    use std::os::unix::process::ExitStatusExt;
    use std::path::{Path, PathBuf};
    use std::process::{Command, Output};

    use kevent_sys::detect::{Detector, Selection};
    use kevent_sys::syscall::SyscallTable;
    use kevent_test_support::{forks, seccomp, test_path};

    /// Set in a child: the name of the test whose child role it plays.
    const CHILD_ENV: &str = "KEVENT_TEST_SECCOMP_CHILD";
    /// Set in a child: the sysfs root its detection reads.
    const ROOT_ENV: &str = "KEVENT_TEST_SECCOMP_ROOT";
    /// What a child prints before its result.
    const RESULT: &str = "SECCOMP-CHILD-RESULT: ";
    /// What a child prints when it cannot install the filter.
    const SKIP: &str = "SECCOMP-CHILD-SKIP: ";

    /// The historic kevent syscall numbers on x86_64 (take29), today `utimensat`..
    const HISTORIC_FIRST: u32 = 280;
    const HISTORIC_LAST: u32 = 284;

    /// Installs, on the calling thread, a filter that kills the process on x86_64 syscalls
    /// 280..=284 and allows everything else.
    fn install_filter() -> Result<(), String> {
        // SAFETY: PR_SET_DUMPABLE takes integer arguments only; clearing it keeps the kernel
        // from writing a core file when the control test's child is killed.
        unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
        let filter = seccomp::refusing(HISTORIC_FIRST..=HISTORIC_LAST, None, seccomp::KILL);
        seccomp::install(&filter).map_err(|e| format!("installing the seccomp filter: {e}"))
    }

    /// In a child process: the sysfs root to use, when this child plays `test`'s role.
    fn child_root(test: &str) -> Option<PathBuf> {
        (std::env::var_os(CHILD_ENV)? == test)
            .then(|| PathBuf::from(std::env::var_os(ROOT_ENV).expect("child without root")))
    }

    /// Child side: installs the filter, then runs `body` and prints its result.
    fn child(body: impl FnOnce() -> String) {
        if let Err(e) = install_filter() {
            println!("\n{SKIP}{e}");
            return;
        }
        let result = body();
        println!("\n{RESULT}{result}");
    }

    /// Child side: detection with `selection` on `root`, under the filter.
    fn child_detect(root: &Path, selection: Selection) {
        child(|| {
            format!(
                "{:?}",
                Detector::new().sysfs_root(root).selection(selection).run()
            )
        });
    }

    enum Child {
        /// The child printed a result and exited normally.
        Survived(String),
        /// The child was killed by this signal.
        Killed(i32),
        /// The child could not install the filter.
        Skipped(String),
    }

    /// The rest of the first line of `stdout` that starts with `marker`.
    fn marked<'a>(stdout: &'a str, marker: &str) -> Option<&'a str> {
        stdout.lines().find_map(|l| l.strip_prefix(marker))
    }

    /// Parent side: runs this binary's test `test` as a child with sysfs root `root`.
    fn run_child(test: &str, root: &Path) -> Child {
        let out: Output = forks::output(
            Command::new(std::env::current_exe().expect("current_exe"))
                .args(["--exact", test, "--nocapture", "--test-threads=1"])
                .env(CHILD_ENV, test)
                .env(ROOT_ENV, root),
        )
        .expect("spawn the test binary as a child");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if let Some(sig) = out.status.signal() {
            return Child::Killed(sig);
        }
        assert!(
            out.status.success(),
            "child {test} failed: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
            out.status
        );
        if let Some(line) = marked(&stdout, SKIP) {
            return Child::Skipped(line.to_owned());
        }
        match marked(&stdout, RESULT) {
            Some(line) => Child::Survived(line.to_owned()),
            None => panic!("child {test} printed no result\nstdout:\n{stdout}\nstderr:\n{stderr}"),
        }
    }

    /// Parent side: the child's result, which must have survived; `None` if seccomp is not
    /// available (a failure under `KEVENT_REQUIRE_ALL=1`).
    fn survived(test: &str, root: &Path) -> Option<String> {
        match run_child(test, root) {
            Child::Survived(result) => Some(result),
            Child::Killed(sig) => panic!(
                "{test}: the child was killed by signal {sig}{}: detection issued a \
                 forbidden syscall",
                if sig == libc::SIGSYS { " (SIGSYS)" } else { "" }
            ),
            Child::Skipped(why) => {
                skip(test, &why);
                None
            }
        }
    }

    fn skip(test: &str, why: &str) {
        kevent_test_support::skip(test, &format!("seccomp filter unavailable: {why}"));
    }

    /// A fresh scratch directory for one test, removed on drop (also when the test fails).
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(test: &str) -> Scratch {
            let dir =
                std::env::temp_dir().join(format!("kevent-seccomp-{}-{test}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("create scratch dir");
            Scratch(dir)
        }
    }

    impl std::ops::Deref for Scratch {
        type Target = Path;
        fn deref(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A sysfs root advertising `abi` and `syscalls` under `dir`.
    fn advertise(dir: &Path, abi: &str, syscalls: &str) -> PathBuf {
        let root = dir.join("kevent");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("abi"), abi).unwrap();
        std::fs::write(root.join("syscalls"), syscalls).unwrap();
        root
    }

    /// (c) The control: the filter really kills on 280, so a surviving child means something.
    #[test]
    fn s6_seccomp_control_filter_kills_on_historic_number() {
        let name = &test_path(
            module_path!(),
            "s6_seccomp_control_filter_kills_on_historic_number",
        );
        if child_root(name).is_some() {
            child(|| {
                // utimensat(-1, NULL, NULL, 0) if the filter did not stop it: fails with
                // EBADF and touches nothing.
                // SAFETY: every argument is an integer or null; syscall 280 on x86_64 with a
                // null path and null times reads no user memory.
                let r = unsafe {
                    libc::syscall(
                        HISTORIC_FIRST as libc::c_long,
                        -1 as libc::c_long,
                        core::ptr::null::<libc::c_char>(),
                        core::ptr::null::<libc::timespec>(),
                        0 as libc::c_long,
                    )
                };
                format!("syscall 280 returned {r}: the filter did not kill")
            });
            return;
        }
        let dir = Scratch::new("control");
        match run_child(name, &dir) {
            Child::Killed(sig) => assert_eq!(sig, libc::SIGSYS, "killed, but not by SIGSYS"),
            Child::Survived(r) => panic!("the filter does not work: {r}"),
            Child::Skipped(why) => skip(name, &why),
        }
    }

    /// (a) No `kevent/` directory → fallback, and the child survives.
    #[test]
    fn s6_no_sysfs_dir_is_fallback_under_seccomp() {
        let name = &test_path(module_path!(), "s6_no_sysfs_dir_is_fallback_under_seccomp");
        if let Some(root) = child_root(name) {
            child_detect(&root, Selection::Auto);
            return;
        }
        let dir = Scratch::new("nodir");
        if let Some(r) = survived(name, &dir.join("kevent")) {
            assert!(r.starts_with("Ok(") && r.contains("syscalls: None"), "{r}");
            assert!(r.contains("NotAdvertised"), "{r}");
        }
    }

    /// (b) A `kevent/` directory advertising numbers this kernel does not implement → the
    /// probe gets ENOSYS, fallback with that reason, and the child survives.
    #[test]
    fn s6_unimplemented_numbers_probe_enosys_under_seccomp() {
        let name = &test_path(
            module_path!(),
            "s6_unimplemented_numbers_probe_enosys_under_seccomp",
        );
        if let Some(root) = child_root(name) {
            child_detect(&root, Selection::Auto);
            return;
        }
        let dir = Scratch::new("enosys");
        let root = advertise(&dir, "1\n", "1000 1001 1002 1003 1004\n");
        if let Some(r) = survived(name, &root) {
            assert!(r.starts_with("Ok(") && r.contains("syscalls: None"), "{r}");
            assert!(r.contains("ProbeNoSys { nr: 1000 }"), "{r}");
        }
    }

    /// `KEVENT_BACKEND=native` without an advertisement: a typed error, no syscall, unless the
    /// build found header numbers (then those, and only those, are probed).
    #[test]
    fn s6_native_without_advertisement_is_typed_error_under_seccomp() {
        let name = &test_path(
            module_path!(),
            "s6_native_without_advertisement_is_typed_error_under_seccomp",
        );
        if let Some(root) = child_root(name) {
            child_detect(&root, Selection::Native);
            return;
        }
        let dir = Scratch::new("native");
        if let Some(r) = survived(name, &dir.join("kevent")) {
            match SyscallTable::from_header() {
                None => assert!(r.starts_with("Err(NoSyscallNumbers"), "{r}"),
                Some(t) => eprintln!("header numbers {t:?} in this build; the child said {r}"),
            }
        }
    }

    /// `KEVENT_BACKEND=fallback` never probes, even numbers the kernel advertises: here the
    /// historic ones, which the filter kills on.
    #[test]
    fn s6_fallback_selection_never_probes_under_seccomp() {
        let name = &test_path(
            module_path!(),
            "s6_fallback_selection_never_probes_under_seccomp",
        );
        if let Some(root) = child_root(name) {
            child_detect(&root, Selection::Fallback);
            return;
        }
        let dir = Scratch::new("fallback");
        let root = advertise(&dir, "1\n", "280 281 282 283 284\n");
        if let Some(r) = survived(name, &root) {
            assert!(
                r.contains("syscalls: None") && r.contains("Disabled"),
                "{r}"
            );
        }
    }

    /// An advertisement that fails its checks (another ABI version, a short syscall list) is
    /// never probed, even though it names the historic numbers.
    #[test]
    fn s6_bad_advertisement_is_never_probed_under_seccomp() {
        let name = &test_path(
            module_path!(),
            "s6_bad_advertisement_is_never_probed_under_seccomp",
        );
        if let Some(root) = child_root(name) {
            child(|| {
                [
                    ("abi2", Selection::Auto),
                    ("short", Selection::Auto),
                    ("short", Selection::Native),
                ]
                .iter()
                .map(|(sub, sel)| {
                    let d = Detector::new().sysfs_root(root.join(sub).join("kevent"));
                    format!("{sub}/{sel}={:?}", d.selection(*sel).run())
                })
                .collect::<Vec<_>>()
                .join(" ;; ")
            });
            return;
        }
        let dir = Scratch::new("bad");
        advertise(&dir.join("abi2"), "2\n", "280 281 282 283 284\n");
        advertise(&dir.join("short"), "1\n", "280 281\n");
        if let Some(r) = survived(name, &dir) {
            assert!(
                r.contains("abi2/auto=Ok(") && r.contains("UnsupportedAbi"),
                "{r}"
            );
            assert!(
                r.contains("short/auto=Ok(") && r.contains("Unparsable"),
                "{r}"
            );
            assert!(r.contains("short/native=Err(Unparsable"), "{r}");
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[test]
fn s6_seccomp_tests_need_x86_64() {
    eprintln!(
        "skipped: the seccomp detection tests filter the historic x86_64 kevent numbers \
         (280-284); this target is {}",
        std::env::consts::ARCH
    );
}
