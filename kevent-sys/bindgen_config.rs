//! The one bindgen configuration for `linux/ukevent.h`.
//!
//! Shared by `build.rs` (a patched kernel's header) and `tests/regen.rs` (the bundled header,
//! compared with the checked-in `src/bindings.rs`), so both paths produce the same shape.

use std::path::Path;

use bindgen::callbacks::{IntKind, ParseCallbacks};

/// Gives `KEVENT_SIGNAL_NOMASK` (a bit of the 64-bit `id.raw_u64`) the type `u64`; bindgen
/// would otherwise read `0x8000000000000000ULL` as a negative `i64`.
#[derive(Debug)]
struct IntTypes;

impl ParseCallbacks for IntTypes {
    fn int_macro(&self, name: &str, _value: i64) -> Option<IntKind> {
        (name == "KEVENT_SIGNAL_NOMASK").then_some(IntKind::U64)
    }
}

/// Header text handed to bindgen: the ABI header, plus the syscall table header so that a
/// patched kernel's `__NR_kevent_*` numbers are seen (on a stock kernel there are none).
pub fn wrapper_header(with_syscall_numbers: bool) -> String {
    let mut s = String::from("#include <linux/ukevent.h>\n");
    if with_syscall_numbers {
        s.push_str("#include <asm/unistd.h>\n");
    }
    s
}

/// Runs bindgen with the project's allowlist. `include_dir` is searched before the system
/// include path.
pub fn generate(include_dir: &Path, with_syscall_numbers: bool) -> Result<String, String> {
    let builder = bindgen::Builder::default()
        .header_contents("kevent_wrapper.h", &wrapper_header(with_syscall_numbers))
        .clang_arg(format!("-I{}", include_dir.display()))
        .allowlist_type("ukevent")
        .allowlist_type("kevent_.*")
        .allowlist_var("KEVENT_.*")
        .allowlist_var("__NR_kevent_.*")
        .allowlist_var("SIGEV_KEVENT")
        .parse_callbacks(Box::new(IntTypes))
        .use_core()
        .layout_tests(true)
        .derive_default(true)
        .derive_debug(false)
        .generate_comments(false);
    let bindings = builder.generate().map_err(|e| e.to_string())?;
    Ok(bindings.to_string())
}
