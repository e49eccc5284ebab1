//! The `report` (alias `backend`) subcommand: the backend this process would use (and,
//! when it is the fallback, exactly why native is unavailable), and a summary of the ABI this
//! build was compiled against.

use std::io::{self, Write};
use std::mem::{align_of, size_of};

use kevent_sys::detect::{BACKEND_ENV, Detection, Unavailable};
use kevent_sys::syscall::SyscallTable;

/// The `report` subcommand. Exit code 0, or 1 when no backend can be used (an invalid
/// `KEVENT_BACKEND`, or `native` on a kernel without kevent).
pub fn report(out: &mut impl Write, detection: Result<&Detection, &Unavailable>) -> io::Result<u8> {
    writeln!(out, "kevent-bench report")?;
    let selection = match std::env::var_os(BACKEND_ENV) {
        Some(v) => format!("{BACKEND_ENV}={}", v.to_string_lossy()),
        None => format!("{BACKEND_ENV} unset"),
    };
    let code = match detection {
        Ok(d) => {
            let name = if d.is_native() { "native" } else { "fallback" };
            writeln!(out, "backend: {name} ({selection})")?;
            match (&d.syscalls, &d.unavailable) {
                (Some(t), _) => {
                    writeln!(out, "  kevent syscalls: {}", table(t))?;
                }
                (_, Some(why)) => writeln!(out, "  native unavailable: {why}")?,
                _ => {}
            }
            0
        }
        Err(why) => {
            writeln!(out, "backend: none ({selection})")?;
            writeln!(out, "  error: {why}")?;
            1
        }
    };
    abi_summary(out)?;
    Ok(code)
}

fn table(t: &SyscallTable) -> String {
    format!(
        "init={} ctl={} get_events={} wait={} commit={}",
        t.init, t.ctl, t.get_events, t.wait, t.commit
    )
}

/// The ABI this binary was built against: where the bindings came from, the structures, and
/// the event types.
fn abi_summary(out: &mut impl Write) -> io::Result<()> {
    use kevent_sys::{kevent_id, kevent_ring, ukevent};
    writeln!(out, "ABI: kevent ABI v1")?;
    writeln!(out, "  bindings: {}", kevent_sys::BINDINGS_SOURCE)?;
    let header = SyscallTable::from_header().map_or_else(
        || "none (no patched kernel headers at build time)".to_owned(),
        |t| table(&t),
    );
    writeln!(out, "  header syscall numbers: {header}")?;
    for (name, size, align) in [
        (
            "struct kevent_id",
            size_of::<kevent_id>(),
            align_of::<kevent_id>(),
        ),
        (
            "struct ukevent",
            size_of::<ukevent>(),
            align_of::<ukevent>(),
        ),
        (
            "struct kevent_ring",
            size_of::<kevent_ring>(),
            align_of::<kevent_ring>(),
        ),
    ] {
        writeln!(out, "  {name:<18} size {size:>2}  align {align}")?;
    }
    writeln!(
        out,
        "  a ring of n entries takes {} + n * {} bytes",
        kevent_sys::KEVENT_RING_HEADER_SIZE,
        kevent_sys::UKEVENT_SIZE
    )?;
    let types: Vec<String> = (0..kevent_sys::KEVENT_MAX)
        .map(|t| format!("{}={t}", kevent_sys::type_name(t).unwrap_or("?")))
        .collect();
    writeln!(out, "  types: {}", types.join(" "))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kevent_sys::detect;

    fn render(detection: Result<&Detection, &Unavailable>) -> (String, u8) {
        let mut out = Vec::new();
        let code = report(&mut out, detection).unwrap();
        (String::from_utf8(out).unwrap(), code)
    }

    #[test]
    fn report_names_backend_reason_and_abi() {
        let d = detect::Detector::new()
            .sysfs_root("/nonexistent/kevent")
            .selection(detect::Selection::Auto)
            .run()
            .unwrap();
        let (text, code) = render(Ok(&d));
        assert_eq!(code, 0);
        assert!(text.contains("backend: fallback"), "{text}");
        assert!(
            text.contains("native unavailable: /nonexistent/kevent does not exist"),
            "{text}"
        );
        assert!(
            text.contains("struct ukevent     size 40  align 8"),
            "{text}"
        );
        assert!(text.contains("types: SOCKET=0 INODE=1"), "{text}");
        assert!(text.contains("UNOTIFY=9"), "{text}");
    }

    #[test]
    fn report_without_backend_exits_1() {
        let why = Unavailable::InvalidSelection {
            value: "bogus".into(),
        };
        let (text, code) = render(Err(&why));
        assert_eq!(code, 1);
        assert!(text.contains("backend: none"), "{text}");
        assert!(text.contains("invalid KEVENT_BACKEND=\"bogus\""), "{text}");
    }
}
