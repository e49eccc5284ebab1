//! Which backend this process uses: native kevent syscalls or the userspace fallback (spec
//! section 6).
//!
//! The native backend is used only when the running kernel proves it carries kevent:
//!
//! 1. it advertises itself: `/sys/kernel/kevent/abi` holds `1` and
//!    `/sys/kernel/kevent/syscalls` holds the five syscall numbers (init, ctl, get_events, wait,
//!    commit), followed by a sixth, `kevent_aio_sendfile`'s, on a kernel with native AIO
//!    (D18), read by `sysfs.rs`; **and**
//! 2. a `kevent_init(NULL, 0, 0)` probe through *those* numbers returns a queue fd (`probe.rs`;
//!    the fd is closed again). `ENOSYS` or `EPERM` (seccomp) means: not available.
//!
//! `KEVENT_BACKEND` selects: `auto` (the default; also when unset or empty), `native` (an error
//! if native is unavailable) or `fallback` (no kevent syscall at all). Only with `native`, and
//! only when the kernel does not advertise kevent at all (a historic patched kernel), are the
//! `__NR_kevent_*` numbers the build found in a patched kernel's headers
//! ([`SyscallTable::from_header`]) probed instead; `auto` never uses them.
//!
//! [`current`] makes the decision once per process from the real `/sys` and `KEVENT_BACKEND`;
//! [`Detector`] runs it on demand, with a different sysfs root for tests.
//!
//! # Why detection never "tries a number and waits for `ENOSYS`"
//!
//! Probing a syscall number blindly is the usual way to detect a new syscall, and it is wrong
//! here for two reasons (rustix's `ppoll`/`ppoll_time64` choice follows the same rule):
//!
//! * A seccomp policy (containers, sandboxes, systemd's `SystemCallFilter=`) may answer an
//!   unknown syscall by killing the process (`SECCOMP_RET_KILL_PROCESS`) instead of returning
//!   `ENOSYS`. Detection must not be able to kill the program it runs in.
//! * kevent never got official numbers. The historic ones (x86_64 280–284, i386 319–323) now
//!   belong to other syscalls: x86_64 280 is `utimensat`, 281 `epoll_pwait`. "Probing" them on
//!   a stock kernel would run those syscalls with kevent's arguments.
//!
//! So a number is called only after the kernel itself has named it (the suite's
//! `tests/conformance/s6_detect_seccomp.rs` proves this under a seccomp filter that kills on 280–284).
//!
//! There is deliberately no environment variable that moves the sysfs root for [`current`]:
//! whoever controls the environment could then point detection at a directory of their own and
//! make the probe issue any syscall number they like. Tests use [`Detector::sysfs_root`].

mod probe;
mod sysfs;

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, OnceLock};

use libc::c_long;

use crate::Errno;
use crate::syscall::SyscallTable;

/// Where a kevent kernel advertises itself.
pub const SYSFS_ROOT: &str = "/sys/kernel/kevent";

/// The environment variable that selects the backend: `auto`, `native` or `fallback`.
pub const BACKEND_ENV: &str = "KEVENT_BACKEND";

/// What the user asked for with `KEVENT_BACKEND`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selection {
    /// `auto`, empty or unset: native if the kernel proves it carries kevent, else fallback.
    Auto,
    /// `native`: native or an error saying why not.
    Native,
    /// `fallback`: the userspace engine; no kevent syscall is ever issued.
    Fallback,
}

impl Selection {
    /// `"auto"`, `"native"` or `"fallback"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Selection::Auto => "auto",
            Selection::Native => "native",
            Selection::Fallback => "fallback",
        }
    }

    /// Reads `KEVENT_BACKEND` from the environment.
    ///
    /// # Errors
    ///
    /// [`Unavailable::InvalidSelection`] for any value other than `auto`, `native`, `fallback`
    /// or the empty string (a typo must not silently fall back to `auto`).
    pub fn from_env() -> Result<Selection, Unavailable> {
        match std::env::var_os(BACKEND_ENV) {
            None => Ok(Selection::Auto),
            Some(v) => match v.to_str() {
                Some(s) => s.parse(),
                None => Err(Unavailable::InvalidSelection {
                    value: v.to_string_lossy().into_owned(),
                }),
            },
        }
    }
}

impl FromStr for Selection {
    type Err = Unavailable;

    /// Parses a `KEVENT_BACKEND` value: `""` and `"auto"` are [`Selection::Auto`], `"native"`
    /// and `"fallback"` the others; anything else is [`Unavailable::InvalidSelection`].
    fn from_str(s: &str) -> Result<Selection, Unavailable> {
        match s {
            "" | "auto" => Ok(Selection::Auto),
            "native" => Ok(Selection::Native),
            "fallback" => Ok(Selection::Fallback),
            _ => Err(Unavailable::InvalidSelection {
                value: s.to_owned(),
            }),
        }
    }
}

impl fmt::Display for Selection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Exactly why the native backend is not used (or, with `KEVENT_BACKEND=native`, cannot be).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Unavailable {
    /// The kernel does not advertise kevent: there is no sysfs directory.
    #[error("{} does not exist: the running kernel does not advertise kevent", path.display())]
    NotAdvertised {
        /// The sysfs directory looked for (normally `/sys/kernel/kevent`).
        path: PathBuf,
    },
    /// An advertisement file exists (or should) but cannot be read.
    #[error("cannot read {}: {error}", path.display())]
    Unreadable {
        /// The `abi` or `syscalls` file (or the directory itself).
        path: PathBuf,
        /// The read error.
        error: Arc<io::Error>,
    },
    /// An advertisement file holds something other than what the ABI defines.
    #[error("{} holds {content:?}, expected {expected}", path.display())]
    Unparsable {
        /// The `abi` or `syscalls` file.
        path: PathBuf,
        /// Its whole content.
        content: String,
        /// What it should hold.
        expected: &'static str,
    },
    /// The kernel advertises an ABI version other than the one this library implements.
    #[error(
        "{} says kevent ABI version {version}; this library implements version {}",
        path.display(),
        sysfs::ABI_VERSION
    )]
    UnsupportedAbi {
        /// The `abi` file.
        path: PathBuf,
        /// The version it holds.
        version: u32,
    },
    /// The `kevent_init(NULL, 0, 0)` probe failed with `ENOSYS`: the numbers do not reach a
    /// kevent implementation.
    #[error("the kevent_init probe (syscall {nr}) failed with ENOSYS: no such syscall")]
    ProbeNoSys {
        /// The syscall number probed.
        nr: c_long,
    },
    /// The probe failed with `EPERM`: a seccomp filter or security module denies the syscall.
    #[error(
        "the kevent_init probe (syscall {nr}) failed with EPERM: denied by a seccomp filter \
         or security policy"
    )]
    ProbeDenied {
        /// The syscall number probed.
        nr: c_long,
    },
    /// The probe failed with another error number.
    #[error("the kevent_init probe (syscall {nr}) failed with {errno}")]
    ProbeFailed {
        /// The syscall number probed.
        nr: c_long,
        /// The error it returned.
        errno: Errno,
    },
    /// `KEVENT_BACKEND=fallback`: native was not considered.
    #[error("disabled by {BACKEND_ENV}=fallback")]
    Disabled,
    /// `KEVENT_BACKEND` holds something other than `auto`, `native`, `fallback` or nothing.
    #[error("invalid {BACKEND_ENV}={value:?}: expected auto, native or fallback")]
    InvalidSelection {
        /// The value found.
        value: String,
    },
    /// `KEVENT_BACKEND=native`, but the kernel does not advertise kevent and this build found
    /// no `__NR_kevent_*` numbers in a patched kernel's headers to try instead.
    #[error(
        "{BACKEND_ENV}=native, but {} does not exist (the kernel does not advertise kevent) \
         and this build found no __NR_kevent_* numbers in a patched kernel's headers \
         (build with KEVENT_INCLUDE_DIR to use a historic kevent kernel)",
        path.display()
    )]
    NoSyscallNumbers {
        /// The sysfs directory looked for.
        path: PathBuf,
    },
}

/// The outcome of detection: native with these syscall numbers, or the fallback and why.
///
/// This crate only decides; the one type that names a backend and dispatches to it is
/// `kevent_backend::Backend`, built from this.
#[derive(Debug, Clone)]
pub struct Detection {
    /// The syscall numbers the native backend uses; `Some` exactly when native is used.
    pub syscalls: Option<SyscallTable>,
    /// Why native is not used; `Some` exactly when the fallback is used.
    pub unavailable: Option<Unavailable>,
}

impl Detection {
    fn native(syscalls: SyscallTable) -> Detection {
        Detection {
            syscalls: Some(syscalls),
            unavailable: None,
        }
    }

    fn fallback(why: Unavailable) -> Detection {
        Detection {
            syscalls: None,
            unavailable: Some(why),
        }
    }

    /// Whether the native backend is used (the syscall numbers are known and probed).
    pub const fn is_native(&self) -> bool {
        self.syscalls.is_some()
    }
}

/// Runs backend detection (spec section 6) with a chosen sysfs root and selection.
///
/// ```
/// use kevent_sys::detect::{Detector, Selection, Unavailable};
///
/// // A root that does not exist: the kernel "does not advertise kevent".
/// let d = Detector::new()
///     .sysfs_root("/nonexistent/kevent")
///     .selection(Selection::Auto)
///     .run()
///     .unwrap();
/// assert!(!d.is_native());
/// assert!(matches!(d.unavailable, Some(Unavailable::NotAdvertised { .. })));
/// ```
#[derive(Debug, Clone)]
pub struct Detector {
    root: PathBuf,
    selection: Result<Selection, Unavailable>,
}

impl Default for Detector {
    fn default() -> Detector {
        Detector::new()
    }
}

impl Detector {
    /// Detection as [`current`] does it: sysfs root [`SYSFS_ROOT`], selection from
    /// `KEVENT_BACKEND` (read now).
    pub fn new() -> Detector {
        Detector {
            root: PathBuf::from(SYSFS_ROOT),
            selection: Selection::from_env(),
        }
    }

    /// Reads the advertisement from `root` instead of `/sys/kernel/kevent` (for tests).
    pub fn sysfs_root(mut self, root: impl Into<PathBuf>) -> Detector {
        self.root = root.into();
        self
    }

    /// Uses `selection` instead of the value of `KEVENT_BACKEND`.
    pub fn selection(mut self, selection: Selection) -> Detector {
        self.selection = Ok(selection);
        self
    }

    /// The sysfs root this detector reads.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Decides the backend.
    ///
    /// With [`Selection::Auto`] this never fails: when native is unavailable the result is
    /// the fallback with the reason in [`Detection::unavailable`].
    ///
    /// # Errors
    ///
    /// * [`Unavailable::InvalidSelection`] if `KEVENT_BACKEND` held an invalid value (and no
    ///   [`Detector::selection`] replaced it).
    /// * With [`Selection::Native`], the reason native is unavailable.
    pub fn run(&self) -> Result<Detection, Unavailable> {
        match self.selection.clone()? {
            Selection::Fallback => Ok(Detection::fallback(Unavailable::Disabled)),
            Selection::Auto => Ok(match self.native(false) {
                Ok(t) => Detection::native(t),
                Err(why) => Detection::fallback(why),
            }),
            Selection::Native => self.native(true).map(Detection::native),
        }
    }

    /// Finds the numbers and probes them. `historic` allows the header numbers when the kernel
    /// does not advertise kevent (only for an explicit `KEVENT_BACKEND=native`).
    fn native(&self, historic: bool) -> Result<SyscallTable, Unavailable> {
        let table = match sysfs::read(&self.root) {
            Ok(t) => t,
            Err(Unavailable::NotAdvertised { path }) if historic => {
                match SyscallTable::from_header() {
                    // The user vouched for this kernel: it carries the patch whose headers the
                    // build saw. The probe still has to succeed.
                    Some(t) => t,
                    None => return Err(Unavailable::NoSyscallNumbers { path }),
                }
            }
            // Every other case: no number has been named by the kernel, so none is called.
            Err(why) => return Err(why),
        };
        probe::run(&table)?;
        Ok(table)
    }
}

/// The backend of this process: decided once (the first call runs [`Detector::new`]) and
/// returned unchanged afterwards, from the real `/sys/kernel/kevent` and `KEVENT_BACKEND`.
///
/// # Errors
///
/// The reason, when `KEVENT_BACKEND` is invalid or is `native` and native is unavailable. With
/// `auto` or `fallback` this never fails.
pub fn current() -> Result<&'static Detection, &'static Unavailable> {
    static CURRENT: OnceLock<Result<Detection, Unavailable>> = OnceLock::new();
    CURRENT.get_or_init(|| Detector::new().run()).as_ref()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s6_selection_parses_the_three_words_and_empty() {
        assert_eq!("".parse::<Selection>().unwrap(), Selection::Auto);
        assert_eq!("auto".parse::<Selection>().unwrap(), Selection::Auto);
        assert_eq!("native".parse::<Selection>().unwrap(), Selection::Native);
        assert_eq!(
            "fallback".parse::<Selection>().unwrap(),
            Selection::Fallback
        );
        for s in [Selection::Auto, Selection::Native, Selection::Fallback] {
            assert_eq!(s.as_str().parse::<Selection>().unwrap(), s);
        }
    }

    #[test]
    fn s6_selection_rejects_anything_else() {
        for v in [
            "Native",
            "FALLBACK",
            " auto",
            "auto ",
            "kernel",
            "1",
            "native,fallback",
        ] {
            match v.parse::<Selection>() {
                Err(Unavailable::InvalidSelection { value }) => assert_eq!(value, v),
                other => panic!("{v:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn s6_fallback_selection_gives_disabled_reason() {
        // That `fallback` never probes, even numbers a kernel advertised, is checked under
        // seccomp in tests/conformance/s6_detect_seccomp.rs.
        let d = Detector::new()
            .sysfs_root("/nonexistent/kevent")
            .selection(Selection::Fallback)
            .run()
            .unwrap();
        assert!(!d.is_native());
        assert!(d.syscalls.is_none());
        assert!(matches!(d.unavailable, Some(Unavailable::Disabled)));
    }

    #[test]
    fn s6_invalid_env_value_is_an_error_from_run() {
        let d = Detector {
            root: PathBuf::from("/nonexistent"),
            selection: "bogus".parse(),
        };
        assert!(matches!(
            d.run(),
            Err(Unavailable::InvalidSelection { value }) if value == "bogus"
        ));
        // An explicit selection replaces the invalid value.
        assert!(d.selection(Selection::Auto).run().is_ok());
    }

    #[test]
    fn s6_auto_without_advertisement_is_fallback() {
        let d = Detector::new()
            .sysfs_root("/nonexistent/kevent")
            .selection(Selection::Auto)
            .run()
            .unwrap();
        assert!(!d.is_native());
        assert!(d.syscalls.is_none());
        assert!(matches!(
            d.unavailable,
            Some(Unavailable::NotAdvertised { .. })
        ));
    }

    #[test]
    fn s6_reasons_display_path_and_content() {
        let e = Unavailable::Unparsable {
            path: PathBuf::from("/sys/kernel/kevent/syscalls"),
            content: "1 2\n".into(),
            expected: "five",
        };
        let s = e.to_string();
        assert!(s.contains("/sys/kernel/kevent/syscalls"), "{s}");
        assert!(s.contains("\"1 2\\n\""), "{s}");
        let s = Unavailable::ProbeFailed {
            nr: 1000,
            errno: Errno::EINVAL,
        }
        .to_string();
        assert!(s.contains("1000") && s.contains("EINVAL"), "{s}");
    }

    #[test]
    fn s6_current_is_decided_once() {
        let a = current();
        let b = current();
        match (a, b) {
            (Ok(a), Ok(b)) => assert!(std::ptr::eq(a, b)),
            (Err(a), Err(b)) => assert!(std::ptr::eq(a, b)),
            _ => panic!("current() changed its answer"),
        }
    }
}
