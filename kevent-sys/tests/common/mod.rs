//! Shared by this crate's integration tests: the skip gate and the spec's constant table.
#![allow(dead_code)] // each test crate uses a different part

/// Reports a test that cannot run here: prints why, or fails under `KEVENT_REQUIRE_ALL=1`
/// (CI sets it, so a missing tool can never turn a check into a silent pass).
pub fn skip(test: &str, why: &str) {
    let msg = format!("{test}: skipped: {why}");
    if std::env::var_os("KEVENT_REQUIRE_ALL").is_some_and(|v| v == "1") {
        panic!("{msg} (KEVENT_REQUIRE_ALL=1)");
    }
    eprintln!("{msg}");
}

/// Whether bindgen can load libclang (Debian: `libclang-dev`). bindgen panics rather than
/// returning an error when it cannot, so the panic is caught here.
pub fn libclang() -> Result<String, String> {
    std::panic::catch_unwind(bindgen::clang_version)
        .map(|v| v.full)
        .map_err(|e| {
            e.downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "bindgen could not load libclang".to_owned())
        })
}

/// One checked value: its name, the Rust side (`kevent_sys`), and the spec's number.
pub struct Check {
    /// The C name (`KEVENT_SOCKET`, `offsetof(ukevent.type)`).
    pub name: String,
    /// The value in this build of `kevent_sys`.
    pub rust: u64,
    /// The value spec sections 1-2 give.
    pub spec: u64,
}

/// Spec section 2: every constant, with the spec's value.
pub fn constant_checks() -> Vec<Check> {
    use kevent_sys::*;
    macro_rules! consts {
        ($($name:ident = $spec:expr),* $(,)?) => {
            vec![$(Check { name: stringify!($name).to_owned(), rust: $name as u64, spec: $spec }),*]
        };
    }
    consts![
        KEVENT_SOCKET = 0,
        KEVENT_INODE = 1,
        KEVENT_TIMER = 2,
        KEVENT_POLL = 3,
        KEVENT_NAIO = 4,
        KEVENT_AIO = 5,
        KEVENT_PIPE = 6,
        KEVENT_SIGNAL = 7,
        KEVENT_POSIX_TIMER = 8,
        KEVENT_UNOTIFY = 9,
        KEVENT_MAX = 10,
        KEVENT_REQ_ONESHOT = 0x1,
        KEVENT_REQ_WAKEUP_ALL = 0x2,
        KEVENT_REQ_ET = 0x4,
        KEVENT_REQ_LAST_CHECK = 0x8,
        KEVENT_REQ_ALWAYS_QUEUE = 0x10,
        KEVENT_REQ_READY = 0x20,
        KEVENT_RET_BROKEN = 0x1,
        KEVENT_RET_DONE = 0x2,
        KEVENT_RET_COPY_FAILED = 0x4,
        KEVENT_CTL_ADD = 0,
        KEVENT_CTL_REMOVE = 1,
        KEVENT_CTL_MODIFY = 2,
        KEVENT_CTL_READY = 3,
        KEVENT_FLAGS_ABSTIME = 0x1,
        KEVENT_SOCKET_RECV = 0x1,
        KEVENT_SOCKET_ACCEPT = 0x2,
        KEVENT_SOCKET_SEND = 0x4,
        KEVENT_INODE_CREATE = 0x1,
        KEVENT_INODE_REMOVE = 0x2,
        KEVENT_TIMER_FIRED = 0x1,
        KEVENT_POLL_POLLIN = 0x1,
        KEVENT_POLL_POLLPRI = 0x2,
        KEVENT_POLL_POLLOUT = 0x4,
        KEVENT_POLL_POLLERR = 0x8,
        KEVENT_POLL_POLLHUP = 0x10,
        KEVENT_POLL_POLLNVAL = 0x20,
        KEVENT_POLL_POLLRDNORM = 0x40,
        KEVENT_POLL_POLLRDBAND = 0x80,
        KEVENT_POLL_POLLWRNORM = 0x100,
        KEVENT_POLL_POLLWRBAND = 0x200,
        KEVENT_POLL_POLLMSG = 0x400,
        KEVENT_POLL_POLLREMOVE = 0x1000,
        KEVENT_POLL_POLLRDHUP = 0x2000,
        KEVENT_SIGNAL_DELIVERY = 0x1,
        KEVENT_SIGNAL_NOMASK = 0x8000_0000_0000_0000,
        KEVENT_AIO_BIO = 0x1,
        KEVENT_MASK_ALL = 0xffff_ffff,
        KEVENT_MASK_EMPTY = 0x0,
        SIGEV_KEVENT = 8,
    ]
}
