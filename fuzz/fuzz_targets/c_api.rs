//! The libFuzzer target over libkevent's C entry points (`cargo fuzz run c_api`).
//!
//! Built without `--cfg fuzzing` (plain `cargo build`), it is a replayer instead: it runs
//! each file named on the command line through the same harness, so a crash file that
//! libFuzzer saved can be reproduced on the stable toolchain:
//! `cargo run --manifest-path fuzz/Cargo.toml --bin c_api -- fuzz/artifacts/c_api/crash-…`.
#![cfg_attr(fuzzing, no_main)]

#[cfg(fuzzing)]
libfuzzer_sys::fuzz_target!(|data: &[u8]| kevent_fuzz::run_one(data));

#[cfg(not(fuzzing))]
fn main() {
    let mut n = 0u64;
    for arg in std::env::args_os().skip(1) {
        let path = std::path::PathBuf::from(arg);
        let files: Vec<std::path::PathBuf> = if path.is_dir() {
            let mut v: Vec<_> = std::fs::read_dir(&path)
                .expect("read the directory")
                .flatten()
                .map(|e| e.path())
                .collect();
            v.sort();
            v
        } else {
            vec![path]
        };
        for f in files {
            let data = std::fs::read(&f).expect("read the input");
            eprintln!("running {} ({} bytes)", f.display(), data.len());
            kevent_fuzz::run_one(&data);
            n += 1;
        }
    }
    kevent_fuzz::cleanup();
    eprintln!(
        "{n} inputs ran, no new finding; {}",
        kevent_fuzz::STATS.summary()
    );
}
