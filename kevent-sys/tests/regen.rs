//! The regeneration path: bindgen on the bundled header must reproduce the checked-in
//! `src/bindings.rs` byte for byte. Run with `KEVENT_BLESS=1` to rewrite the file after an
//! intended change to `include/linux/ukevent.h`.
//!
//! Needs libclang (Debian: `libclang-dev`). Without it the test prints why it skipped, and
//! fails instead under `KEVENT_REQUIRE_ALL=1`.

#[path = "../bindgen_config.rs"]
mod bindgen_config;
mod common;

use std::path::Path;

#[test]
fn checked_in_bindings_match_bundled_header() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // bindgen panics (rather than returning an error) when libclang is missing: ask first.
    if let Err(e) = common::libclang() {
        let test = "checked_in_bindings_match_bundled_header";
        return common::skip(test, &format!("bindgen cannot load libclang: {e}"));
    }
    let generated = bindgen_config::generate(&root.join("include"), false)
        .unwrap_or_else(|e| panic!("bindgen failed on the bundled header: {e}"));
    let path = root.join("src/bindings.rs");
    if std::env::var_os("KEVENT_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &generated).expect("write src/bindings.rs");
        return;
    }
    let checked_in = std::fs::read_to_string(&path).expect("read src/bindings.rs");
    assert!(
        checked_in == generated,
        "src/bindings.rs is out of date with include/linux/ukevent.h; \
         regenerate with `KEVENT_BLESS=1 cargo test -p kevent-sys --test regen`"
    );
}
