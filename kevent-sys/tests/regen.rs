//! The regeneration path: bindgen on the bundled header must reproduce the checked-in
//! `src/bindings.rs` byte for byte. Run with `KEVENT_BLESS=1` to rewrite the file after an
//! intended change to `include/linux/ukevent.h`.
//!
//! Needs libclang (Debian: `libclang-dev`). Without it the test prints why it skipped, and
//! fails instead under `KEVENT_REQUIRE_ALL=1`.

#[path = "../bindgen_config.rs"]
mod bindgen_config;

use std::path::Path;

#[test]
fn checked_in_bindings_match_bundled_header() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let generated = match bindgen_config::generate(&root.join("include"), false) {
        Ok(text) => text,
        Err(e) => {
            let msg = format!("skipped: bindgen could not run (is libclang installed?): {e}");
            if std::env::var_os("KEVENT_REQUIRE_ALL").is_some_and(|v| v == "1") {
                panic!("{msg} (KEVENT_REQUIRE_ALL=1)");
            }
            eprintln!("{msg}");
            return;
        }
    };
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
