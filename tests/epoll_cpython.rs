//! CPython's own epoll tests through `libkevent-epoll.so` (issue 24): the system Python's
//! `test_epoll` and `test_selectors` (and `test_asyncio` with `KEVENT_CPYTHON_SUITES=full`,
//! about 1.5 minutes per run), unmodified, once on epoll and once under the shim on every
//! backend; each suite must run the same number of tests with the same number skipped and
//! none failed. Debian ships the suites in `libpython3.<minor>-testsuite` (`.ci/run`
//! installs it); without it the test is a printed skip (a failure under
//! `KEVENT_REQUIRE_ALL=1`).
//!
//! The wall time of every run is printed (`--nocapture`).

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use kevent_test_support::differential::shim::shim_or_skip;
use kevent_test_support::*;

const NAME: &str = "i24_cpython_epoll_suites_under_the_shim_as_on_epoll";

/// What one suite's run said: tests run, skipped, failed (failures + errors), or why it did
/// not say.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    ran: u64,
    skipped: u64,
    failed: u64,
}

/// The number after `key` (`skipped=41`) in `line`.
fn count(line: &str, key: &str) -> u64 {
    line.split([' ', ',', '(', ')'])
        .find_map(|w| w.strip_prefix(key))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Parses unittest's summary: `Ran N tests in …`, then `OK (skipped=K)` or
/// `FAILED (failures=F, errors=E, skipped=K)`.
fn parse(out: &str) -> Option<Outcome> {
    let ran = out
        .lines()
        .filter_map(|l| l.strip_prefix("Ran "))
        .filter_map(|l| l.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    let verdicts: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("OK") || l.starts_with("FAILED ("))
        .collect();
    if verdicts.is_empty() {
        return None;
    }
    let mut o = Outcome {
        ran,
        skipped: 0,
        failed: 0,
    };
    for v in verdicts {
        o.skipped += count(v, "skipped=");
        o.failed += count(v, "failures=") + count(v, "errors=");
    }
    Some(o)
}

/// Runs `python -m test -v <suite>` (preloaded when `preload` is given); its outcome, the
/// wall time in seconds, and the output.
fn run(python: &str, suite: &str, preload: Option<(&str, &str)>) -> (Option<Outcome>, f64, String) {
    let mut cmd = Command::new(python);
    cmd.args(["-m", "test", "-v", suite])
        .env_remove("PYTHONPATH")
        .current_dir(std::env::temp_dir());
    if let Some((so, backend)) = preload {
        cmd.env("LD_PRELOAD", so).env("KEVENT_BACKEND", backend);
    }
    let start = Instant::now();
    let out = cmd.output().expect("run python");
    let secs = start.elapsed().as_secs_f64();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (parse(&text), secs, text)
}

/// The lines of a run that name failed tests.
fn failures(text: &str) -> String {
    text.lines()
        .filter(|l| {
            l.ends_with("... FAIL")
                || l.ends_with("... ERROR")
                || l.starts_with("FAIL:")
                || l.starts_with("ERROR:")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn i24_cpython_epoll_suites_under_the_shim_as_on_epoll() {
    // The system Python (the one the Debian test package belongs to), not a PATH one.
    let Some((python, lib)) = ["3.13", "3.12", "3.11"]
        .iter()
        .map(|v| {
            (
                format!("/usr/bin/python{v}"),
                format!("/usr/lib/python{v}/test/test_epoll.py"),
            )
        })
        .find(|(p, _)| Path::new(p).exists())
    else {
        skip(NAME, "no system Python (/usr/bin/python3.1x)");
        return;
    };
    if !Path::new(&lib).exists() {
        let minor = python.trim_start_matches("/usr/bin/python");
        skip(
            NAME,
            &format!("{lib} is missing: apt-get install libpython{minor}-testsuite"),
        );
        return;
    }
    let Some(so) = shim_or_skip(NAME) else {
        return;
    };
    let so = so.as_str();
    let mut suites = vec!["test_epoll", "test_selectors"];
    if std::env::var("KEVENT_CPYTHON_SUITES").is_ok_and(|v| v == "full") {
        suites.push("test_asyncio");
    }
    let backends = backends(NAME);
    for suite in suites {
        let (plain, secs, text) = run(&python, suite, None);
        let plain = plain.unwrap_or_else(|| panic!("{suite} on epoll said nothing:\n{text}"));
        println!("[{NAME}] {python} {suite} on epoll: {plain:?} in {secs:.1} s");
        assert_eq!(
            plain.failed,
            0,
            "{suite} fails on epoll itself:\n{}",
            failures(&text)
        );
        for b in &backends {
            let (shimmed, secs, text) = run(&python, suite, Some((so, b.as_str())));
            println!(
                "[{NAME}] {python} {suite} under libkevent-epoll.so on {}: {shimmed:?} in {secs:.1} s",
                b.as_str()
            );
            assert_eq!(
                shimmed.as_ref(),
                Some(&plain),
                "{suite} under the shim on {} differs from epoll:\n{}\n{}",
                b.as_str(),
                failures(&text),
                text.lines().rev().take(30).collect::<Vec<_>>().join("\n")
            );
        }
    }
}
