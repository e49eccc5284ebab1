//! Finding `libkevent-epoll.so` for the tests that preload it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `target/<profile>/libkevent_epoll_preload.so`, built first (a no-op when up to date): `cargo
/// test` builds no cdylib of another package by itself. `KEVENT_EPOLL_SO` names another
/// copy (an installed one).
pub fn shim() -> Result<PathBuf, String> {
    if let Ok(p) = std::env::var("KEVENT_EPOLL_SO") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .ok_or("the test executable lives in target/<profile>/deps")?
        .to_path_buf();
    let target = profile.parent().ok_or("target/<profile>")?;
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["build", "-p", "kevent-epoll-preload"])
        .current_dir(crate::c::repo_dir())
        .env("CARGO_TARGET_DIR", target);
    if profile.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let status = crate::forks::status(&mut cmd).map_err(|e| format!("cargo build: {e}"))?;
    if !status.success() {
        return Err("cargo build -p kevent-epoll-preload failed".into());
    }
    let so = profile.join("libkevent_epoll_preload.so");
    if so.exists() {
        Ok(so)
    } else {
        Err(format!("{} was not built", so.display()))
    }
}

/// [`shim`], or a printed skip of test `name` (a failure under `KEVENT_REQUIRE_ALL=1`):
/// `None` then.
pub fn shim_or_skip(name: &str) -> Option<String> {
    match shim() {
        Ok(so) => Some(so.to_str().expect("utf-8 path").to_string()),
        Err(why) => {
            crate::skip(name, &format!("libkevent-epoll.so unavailable: {why}"));
            None
        }
    }
}

/// Runs test `name` of this test binary under `LD_PRELOAD=libkevent-epoll.so`, once per
/// backend (`KEVENT_BACKEND`), in a child process: in the child (`child_env` set to the
/// backend's name) `child` runs, then `None`; in the parent every child must pass within
/// `limit`, and their outputs are returned with the backend's names (`None` when the shim
/// is unavailable: a skip).
pub fn run_preloaded(
    name: &str,
    child_env: &str,
    limit: std::time::Duration,
    child: fn(&str),
) -> Option<Vec<(String, crate::ChildOutput)>> {
    if let Ok(backend) = std::env::var(child_env) {
        child(&backend);
        println!("\nCHILD-OK");
        return None;
    }
    let so = shim_or_skip(name)?;
    let mut outs = Vec::new();
    for b in crate::backends(name) {
        let kind = b.as_str();
        let out = crate::run_child(
            name,
            kind,
            &[
                ("LD_PRELOAD", so.as_str()),
                (child_env, kind),
                ("KEVENT_BACKEND", kind),
            ],
            limit,
        );
        assert!(
            out.ok,
            "[{name}] preloaded child on the {kind} backend failed: {}",
            out.describe()
        );
        outs.push((kind.to_string(), out));
    }
    Some(outs)
}
