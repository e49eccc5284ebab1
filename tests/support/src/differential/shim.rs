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
    let status = cmd.status().map_err(|e| format!("cargo build: {e}"))?;
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
