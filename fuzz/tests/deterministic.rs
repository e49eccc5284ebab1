//! The fuzz harness over a deterministic corpus: the same inputs on every machine, on the
//! stable toolchain, bounded in time. This is what CI runs (`.ci/run`).
//!
//! * `KEVENT_FUZZ_INPUTS` (default 20000): how many inputs;
//! * `KEVENT_FUZZ_SEED` (default 0x6b6576656e74): which corpus;
//! * `KEVENT_FUZZ_FIRST` (default 0): skip the inputs before this one;
//! * `KEVENT_FUZZ_VERBOSE`: name each input on stderr before running it, and keep it in
//!   `kevent-fuzz-current.bin` (for a crash, which ends the process without a message).
//!
//! A failing input is written to `target/kevent-fuzz-failure.bin` (or `$CARGO_TARGET_TMPDIR`)
//! and can be replayed with `cargo run --manifest-path fuzz/Cargo.toml --bin c_api -- FILE`.

use std::time::Instant;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| {
            let v = v.trim();
            v.strip_prefix("0x")
                .map_or_else(|| v.parse().ok(), |h| u64::from_str_radix(h, 16).ok())
        })
        .unwrap_or(default)
}

#[test]
fn c_api_deterministic_corpus() {
    let inputs = env_u64("KEVENT_FUZZ_INPUTS", 20_000);
    let seed = env_u64("KEVENT_FUZZ_SEED", 0x6b65_7665_6e74);
    let first = env_u64("KEVENT_FUZZ_FIRST", 0);
    let verbose = std::env::var_os("KEVENT_FUZZ_VERBOSE").is_some();
    let start = Instant::now();
    for i in first..inputs {
        let data = kevent_fuzz::input::generate(seed, i);
        if verbose {
            // A crash (a signal, not a panic) ends the process: the last line names the input,
            // and the file holds it for the replayer.
            let path = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
                .join("kevent-fuzz-current.bin");
            let _ = std::fs::write(&path, &data);
            eprintln!("input {i} ({} bytes)", data.len());
        }
        let r = std::panic::catch_unwind(|| kevent_fuzz::run_one(&data));
        if let Err(e) = r {
            let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
            let path = dir.join("kevent-fuzz-failure.bin");
            let _ = std::fs::write(&path, &data);
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!(
                "input {i} of seed {seed:#x} failed; saved to {} (replay: cargo run \
                 --manifest-path fuzz/Cargo.toml --bin c_api -- {})\n{msg}",
                path.display(),
                path.display()
            );
        }
    }
    kevent_fuzz::cleanup();
    let took = start.elapsed();
    println!(
        "kevent-fuzz: {inputs} inputs (seed {seed:#x}) in {took:.2?}: {}",
        kevent_fuzz::STATS.summary()
    );
}
