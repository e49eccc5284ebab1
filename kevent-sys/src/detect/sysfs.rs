//! The kernel's advertisement: `<root>/abi` and `<root>/syscalls` (spec section 6).
//!
//! `abi` holds the ABI version (`1`); `syscalls` holds the five syscall numbers in the order
//! init, ctl, get_events, wait, commit, followed on a kernel with native AIO by a sixth,
//! `kevent_aio_sendfile`'s (D18), separated by whitespace. Reading them issues no kevent
//! syscall: this is how detection learns the numbers *before* it calls any of them.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use libc::c_long;

use super::Unavailable;
use crate::syscall::SyscallTable;

/// The only ABI version this crate implements.
pub(crate) const ABI_VERSION: u32 = 1;

/// Reads and checks the advertisement under `root` (normally `/sys/kernel/kevent`).
pub(crate) fn read(root: &Path) -> Result<SyscallTable, Unavailable> {
    match std::fs::metadata(root) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(Unavailable::NotAdvertised {
                path: root.to_path_buf(),
            });
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(Unavailable::NotAdvertised {
                path: root.to_path_buf(),
            });
        }
        Err(e) => return Err(unreadable(root.to_path_buf(), e)),
    }
    let abi_path = root.join("abi");
    parse_abi(&abi_path, &read_file(&abi_path)?)?;
    let syscalls_path = root.join("syscalls");
    parse_syscalls(&syscalls_path, &read_file(&syscalls_path)?)
}

fn unreadable(path: PathBuf, error: io::Error) -> Unavailable {
    Unavailable::Unreadable {
        path,
        error: Arc::new(error),
    }
}

fn read_file(path: &Path) -> Result<String, Unavailable> {
    let bytes = std::fs::read(path).map_err(|e| unreadable(path.to_path_buf(), e))?;
    // Sysfs files are ASCII; anything else is reported as the content it is.
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Checks the content of the `abi` file: the version number `1`, surrounding whitespace
/// allowed.
pub(crate) fn parse_abi(path: &Path, content: &str) -> Result<(), Unavailable> {
    match content.trim().parse::<u32>() {
        Ok(ABI_VERSION) => Ok(()),
        Ok(version) => Err(Unavailable::UnsupportedAbi {
            path: path.to_path_buf(),
            version,
        }),
        Err(_) => Err(Unavailable::Unparsable {
            path: path.to_path_buf(),
            content: content.to_owned(),
            expected: "an ABI version number",
        }),
    }
}

/// Parses the content of the `syscalls` file: five or six distinct non-negative decimal
/// numbers, in the order init, ctl, get_events, wait, commit[, aio_sendfile].
pub(crate) fn parse_syscalls(path: &Path, content: &str) -> Result<SyscallTable, Unavailable> {
    let bad = || Unavailable::Unparsable {
        path: path.to_path_buf(),
        content: content.to_owned(),
        expected: "five or six distinct syscall numbers \
                   (init ctl get_events wait commit [aio_sendfile])",
    };
    let mut nr: Vec<c_long> = Vec::with_capacity(6);
    for word in content.split_whitespace() {
        if nr.len() == 6 {
            return Err(bad());
        }
        // Decimal digits only: no sign, no `0x`, so a number is read the one way the kernel
        // printed it.
        if !word.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        nr.push(word.parse().map_err(|_| bad())?);
    }
    for (i, a) in nr.iter().enumerate() {
        if nr[..i].contains(a) {
            return Err(bad());
        }
    }
    match nr[..] {
        [init, ctl, get_events, wait, commit] => Ok(SyscallTable {
            init,
            ctl,
            get_events,
            wait,
            commit,
            aio_sendfile: None,
        }),
        [init, ctl, get_events, wait, commit, aio] => Ok(SyscallTable {
            init,
            ctl,
            get_events,
            wait,
            commit,
            aio_sendfile: Some(aio),
        }),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> &'static Path {
        Path::new("/sys/kernel/kevent/x")
    }

    #[test]
    fn s6_abi_one_is_accepted_with_whitespace() {
        assert!(parse_abi(p(), "1").is_ok());
        assert!(parse_abi(p(), "1\n").is_ok());
        assert!(parse_abi(p(), "  1 \n").is_ok());
    }

    #[test]
    fn s6_abi_other_version_is_unsupported() {
        for (text, v) in [("2\n", 2), ("0", 0), ("17", 17)] {
            match parse_abi(p(), text) {
                Err(Unavailable::UnsupportedAbi { version, .. }) => assert_eq!(version, v),
                other => panic!("{text:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn s6_abi_bad_content_is_unparsable_with_content() {
        for text in ["", "\n", "one", "1 2", "-1", "1.0", "0x1"] {
            match parse_abi(p(), text) {
                Err(Unavailable::Unparsable { content, path, .. }) => {
                    assert_eq!(content, text);
                    assert_eq!(path, p());
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn s6_syscalls_five_numbers_in_order() {
        let t = parse_syscalls(p(), "1000 1001\t1002\n1003  1004\n").unwrap();
        assert_eq!(
            t,
            SyscallTable {
                init: 1000,
                ctl: 1001,
                get_events: 1002,
                wait: 1003,
                commit: 1004,
                aio_sendfile: None,
            }
        );
    }

    /// D18: a kernel with native AIO appends `kevent_aio_sendfile`'s number as a sixth.
    #[test]
    fn d18_syscalls_six_numbers_name_aio_sendfile() {
        let t = parse_syscalls(p(), "1000 1001 1002 1003 1004 1005\n").unwrap();
        assert_eq!(
            t,
            SyscallTable {
                init: 1000,
                ctl: 1001,
                get_events: 1002,
                wait: 1003,
                commit: 1004,
                aio_sendfile: Some(1005),
            }
        );
        // The sixth obeys the same rules as the five: distinct, decimal.
        for text in [
            "1 2 3 4 5 1",
            "1 2 3 4 5 x",
            "1 2 3 4 5 -6",
            "1 2 3 4 5 0x6",
        ] {
            assert!(
                matches!(
                    parse_syscalls(p(), text),
                    Err(Unavailable::Unparsable { .. })
                ),
                "{text:?}"
            );
        }
    }

    #[test]
    fn s6_syscalls_wrong_count_is_unparsable() {
        for text in ["", "\n", "1 2 3 4", "1 2 3 4 5 6 7", "1000"] {
            match parse_syscalls(p(), text) {
                Err(Unavailable::Unparsable { content, .. }) => assert_eq!(content, text),
                other => panic!("{text:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn s6_syscalls_bad_numbers_are_unparsable() {
        for text in [
            "1 2 3 4 x",
            "-1 2 3 4 5",
            "+1 2 3 4 5",
            "0x10 2 3 4 5",
            "1 2 3 4 99999999999999999999999",
            "1 2 3 4 1",
        ] {
            assert!(
                matches!(
                    parse_syscalls(p(), text),
                    Err(Unavailable::Unparsable { .. })
                ),
                "{text:?}"
            );
        }
    }

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("kevent-sys-sysfs-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn s6_read_missing_dir_is_not_advertised() {
        let dir = scratch("missing");
        let root = dir.join("kevent");
        match read(&root) {
            Err(Unavailable::NotAdvertised { path }) => assert_eq!(path, root),
            other => panic!("{other:?}"),
        }
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn s6_read_missing_files_are_unreadable_with_path() {
        let root = scratch("nofiles");
        match read(&root) {
            Err(Unavailable::Unreadable { path, error }) => {
                assert_eq!(path, root.join("abi"));
                assert_eq!(error.kind(), io::ErrorKind::NotFound);
            }
            other => panic!("{other:?}"),
        }
        std::fs::write(root.join("abi"), "1\n").unwrap();
        match read(&root) {
            Err(Unavailable::Unreadable { path, .. }) => assert_eq!(path, root.join("syscalls")),
            other => panic!("{other:?}"),
        }
        std::fs::write(root.join("syscalls"), "7 8 9 10 11\n").unwrap();
        assert_eq!(read(&root).unwrap().get_events, 9);
        assert_eq!(read(&root).unwrap().aio_sendfile, None);
        std::fs::write(root.join("syscalls"), "7 8 9 10 11 12\n").unwrap();
        assert_eq!(read(&root).unwrap().aio_sendfile, Some(12));
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn s6_read_checks_abi_before_syscalls() {
        let root = scratch("abi2");
        std::fs::write(root.join("abi"), "2\n").unwrap();
        std::fs::write(root.join("syscalls"), "7 8 9 10 11\n").unwrap();
        assert!(matches!(
            read(&root),
            Err(Unavailable::UnsupportedAbi { version: 2, .. })
        ));
        std::fs::remove_dir_all(root).unwrap();
    }
}
