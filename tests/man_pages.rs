//! The C library's manual pages (issue 14 item 7), `man/man2/*.2` and `man/man3/*.3`:
//!
//! * each page has the man-pages sections (NAME, LIBRARY, SYNOPSIS, DESCRIPTION, RETURN VALUE,
//!   ERRORS, BACKENDS, STANDARDS, EXAMPLES, SEE ALSO), in that order, and a `.TH` line naming
//!   it;
//! * its ERRORS section lists exactly the errno values the call can give (the list below is
//!   the spec's and the C library's, so a page that forgets one, or invents one, fails);
//! * every page, and every `.so` alias, renders with `groff -ww` (all warnings) without a
//!   single diagnostic, as `man -l` would render it;
//! * every EXAMPLES program compiles against the generated `<kevent/kevent.h>` with
//!   `-std=c99 -Wall -Wextra -Werror`;
//! * every page the SEE ALSO sections name in this manual exists.
//!
//! Without `groff` or a C compiler the checks that need them are skipped with the reason
//! printed; under `KEVENT_REQUIRE_ALL=1` a skip is a failure.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Each page and the errno values of its ERRORS section.
const PAGES: [(&str, &[&str]); 7] = [
    (
        "man2/kevent_init.2",
        &["EFAULT", "EINVAL", "EMFILE", "ENFILE", "ENOMEM", "ENOSYS"],
    ),
    (
        "man2/kevent_ctl.2",
        &["EBADF", "EFAULT", "EINVAL", "ENOSYS"],
    ),
    (
        "man2/kevent_get_events.2",
        &["EBADF", "EFAULT", "EINVAL", "ENOSYS"],
    ),
    ("man2/kevent_wait.2", &["EBADF", "EINVAL", "ENOSYS"]),
    (
        "man2/kevent_commit.2",
        &["EBADF", "EINVAL", "EOVERFLOW", "ENOSYS"],
    ),
    (
        "man2/kevent_aio_sendfile.2",
        &[
            "EAGAIN", "EBADF", "EINVAL", "EMFILE", "ENFILE", "ENOMEM", "ENOSPC", "ENOSYS",
            "ENOTCONN",
        ],
    ),
    (
        "man3/kevent_timer_create.3",
        &["EAGAIN", "EBADF", "EFAULT", "EINVAL", "ENOMEM", "ENOSYS"],
    ),
];

/// Per-entry errors of `kevent_ctl` (spec section 3): in `ret_data[1]`, not in `errno`.
const CTL_ENTRY_ERRORS: [&str; 5] = ["ENOSYS", "EEXIST", "EBADF", "EINVAL", "ENOENT"];

/// Pages that only source another (`.so`), and the page they source.
const ALIASES: [(&str, &str); 4] = [
    ("man3/kevent_timer_settime.3", "man3/kevent_timer_create.3"),
    ("man3/kevent_timer_gettime.3", "man3/kevent_timer_create.3"),
    ("man3/kevent_timer_delete.3", "man3/kevent_timer_create.3"),
    ("man3/kevent_sigev_set_fd.3", "man3/kevent_timer_create.3"),
];

const SECTIONS: [&str; 10] = [
    "NAME",
    "LIBRARY",
    "SYNOPSIS",
    "DESCRIPTION",
    "RETURN VALUE",
    "ERRORS",
    "BACKENDS",
    "STANDARDS",
    "EXAMPLES",
    "SEE ALSO",
];

fn man_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("man")
}

fn read(page: &str) -> String {
    std::fs::read_to_string(man_dir().join(page)).unwrap_or_else(|e| panic!("{page}: {e}"))
}

/// Reports a skipped check; a failure under `KEVENT_REQUIRE_ALL=1`.
fn skip(test: &str, why: &str) {
    if std::env::var_os("KEVENT_REQUIRE_ALL").is_some_and(|v| v == "1") {
        panic!("{test}: {why} (KEVENT_REQUIRE_ALL=1: a skip is a failure)");
    }
    println!("{test}: skipped: {why}");
}

fn have(tool: &str, arg: &str) -> bool {
    Command::new(tool)
        .arg(arg)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The lines of section `name` (from its `.SH` up to the next one).
fn section<'a>(page: &'a str, name: &str) -> Vec<&'a str> {
    let heading = format!(".SH {name}");
    let heading_q = format!(".SH \"{name}\"");
    page.lines()
        .skip_while(|l| *l != heading && *l != heading_q)
        .skip(1)
        .take_while(|l| !l.starts_with(".SH "))
        .collect()
}

/// The `.B EXXX` tags of an ERRORS-style list (`.TP` then `.B EXXX`), in order.
fn errno_tags(lines: &[&str]) -> Vec<String> {
    lines
        .windows(2)
        .filter(|w| w[0] == ".TP")
        .filter_map(|w| w[1].strip_prefix(".B "))
        .filter(|t| t.starts_with('E') && t.chars().all(|c| c.is_ascii_uppercase()))
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_page_has_the_man_pages_sections_in_order() {
    for (page, _) in PAGES {
        let text = read(page);
        let (name, sec) = page
            .rsplit('/')
            .next()
            .and_then(|f| f.rsplit_once('.'))
            .expect("name.section");
        let th = text
            .lines()
            .find(|l| l.starts_with(".TH "))
            .unwrap_or_else(|| panic!("{page}: no .TH"));
        assert!(
            th.starts_with(&format!(".TH {} {sec} ", name.to_uppercase())),
            "{page}: {th}"
        );
        let found: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix(".SH "))
            .map(|s| s.trim_matches('"'))
            .collect();
        let wanted: Vec<&str> = found
            .iter()
            .copied()
            .filter(|s| SECTIONS.contains(s))
            .collect();
        assert_eq!(wanted, SECTIONS, "{page}: sections {found:?}");
        assert!(
            section(&text, "NAME")
                .iter()
                .any(|l| l.contains(&format!("{name} \\-")) || l.contains(&format!("{name},"))),
            "{page}: NAME does not name {name}"
        );
    }
}

#[test]
fn errors_sections_list_every_errno_and_no_other() {
    for (page, errnos) in PAGES {
        let text = read(page);
        let mut listed = errno_tags(&section(&text, "ERRORS"));
        listed.sort();
        let mut want: Vec<String> = errnos.iter().map(|e| (*e).to_owned()).collect();
        want.sort();
        assert_eq!(listed, want, "{page}: ERRORS");
    }
    // kevent_ctl's per-entry errors are a list of their own in DESCRIPTION.
    let ctl = read("man2/kevent_ctl.2");
    let per_entry: Vec<&str> = ctl
        .lines()
        .skip_while(|l| *l != ".SS Per-entry errors")
        .skip(1)
        .take_while(|l| !l.starts_with(".S"))
        .collect();
    let mut listed = errno_tags(&per_entry);
    listed.sort();
    let mut want: Vec<String> = CTL_ENTRY_ERRORS.iter().map(|e| (*e).to_owned()).collect();
    want.sort();
    assert_eq!(listed, want, "kevent_ctl(2) per-entry errors");
}

#[test]
fn aliases_and_see_also_point_at_pages_that_exist() {
    for (alias, target) in ALIASES {
        assert_eq!(read(alias).trim(), format!(".so {target}"), "{alias}");
        assert!(man_dir().join(target).is_file(), "{target}");
    }
    for (page, _) in PAGES {
        for line in section(&read(page), "SEE ALSO") {
            let Some(rest) = line.strip_prefix(".BR kevent") else {
                continue;
            };
            // ".BR kevent_wait (2)," -> man2/kevent_wait.2
            let (name, sec) = rest.split_once(" (").expect("name (section)");
            let sec = sec.trim_end_matches([')', ',']);
            let path = format!("man{sec}/kevent{name}.{sec}");
            assert!(man_dir().join(&path).is_file(), "{page}: SEE ALSO {path}");
        }
    }
}

#[test]
fn pages_render_with_groff_ww_without_a_warning() {
    if !have("groff", "--version") {
        skip(
            "pages_render_with_groff_ww_without_a_warning",
            "groff is not installed (Debian: apt-get install groff-base)",
        );
        return;
    }
    let pages = PAGES.iter().map(|p| p.0).chain(ALIASES.iter().map(|a| a.0));
    for page in pages {
        // From man/, as man(1) does, so that `.so man3/...` resolves; -t runs tbl.
        let out = Command::new("groff")
            .current_dir(man_dir())
            .args(["-ww", "-t", "-man", "-Tutf8", "-rLL=80n"])
            .arg(page)
            .output()
            .expect("run groff");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{page}: groff failed: {err}");
        assert!(err.trim().is_empty(), "{page}: groff -ww said:\n{err}");
        let plain = strip_overstrike(&String::from_utf8_lossy(&out.stdout));
        assert!(
            plain.contains("SYNOPSIS") && plain.contains("ERRORS"),
            "{page}"
        );
        // Rendered for an 80-column terminal: no line of the text runs past it.
        for line in plain.lines() {
            assert!(
                line.chars().count() <= 80,
                "{page}: a rendered line is {} columns: {line}",
                line.chars().count()
            );
        }
    }
}

/// nroff's bold and underline (`c\bc`, `_\bc`) as plain text.
fn strip_overstrike(s: &str) -> String {
    let mut out: Vec<char> = Vec::with_capacity(s.len());
    for c in s.chars() {
        if c == '\u{8}' {
            out.pop();
            continue;
        }
        out.push(c);
    }
    out.into_iter().collect()
}

/// The C of an `.EX`/`.EE` block, with the roff escapes the pages use undone.
fn unescape(block: &[&str]) -> String {
    let mut s = String::new();
    for line in block {
        let l = line
            .replace("\\&", "")
            .replace("\\-", "-")
            .replace("\\e", "\\")
            .replace("\\(aq", "'")
            .replace("\\(dq", "\"");
        s.push_str(&l);
        s.push('\n');
    }
    s
}

#[test]
fn examples_compile_against_the_generated_header() {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    if !have(&cc, "--version") {
        skip(
            "examples_compile_against_the_generated_header",
            &format!("no C compiler `{cc}` (Debian: apt-get install gcc)"),
        );
        return;
    }
    // .../include/kevent/kevent.h -> .../include
    let header = Path::new(env!("KEVENT_C_HEADER"));
    let include = header.parent().and_then(Path::parent).expect("include dir");
    let out_dir = std::env::temp_dir().join(format!("kevent-man-examples-{}", std::process::id()));
    std::fs::create_dir_all(&out_dir).expect("temp dir");
    for (page, _) in PAGES {
        let text = read(page);
        let examples = section(&text, "EXAMPLES");
        let start = examples
            .iter()
            .position(|l| *l == ".EX")
            .unwrap_or_else(|| panic!("{page}: EXAMPLES has no .EX block"));
        let len = examples[start + 1..]
            .iter()
            .position(|l| *l == ".EE")
            .unwrap_or_else(|| panic!("{page}: .EX without .EE"));
        let code = unescape(&examples[start + 1..start + 1 + len]);
        let name = page.replace('/', "_");
        let src = out_dir.join(format!("{name}.c"));
        std::fs::write(&src, &code).expect("write example");
        let out = Command::new(&cc)
            .args([
                "-std=c99",
                "-Wall",
                "-Wextra",
                "-Werror",
                "-fsyntax-only",
                "-I",
            ])
            .arg(include)
            .arg(&src)
            .output()
            .expect("run the C compiler");
        assert!(
            out.status.success(),
            "{page}: EXAMPLES does not compile:\n{}\n{code}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&out_dir);
}
