#!/usr/bin/env bash
# Builds the libFuzzer target `c_api` exactly as `cargo fuzz build c_api` does (the same
# RUSTFLAGS: sancov coverage, AddressSanitizer, `--cfg fuzzing`, debug assertions), but
# without needing cargo-fuzz installed, and on the stable toolchain (RUSTC_BOOTSTRAP=1 lets
# it accept the -Z flags). Then fuzzes for SECONDS (default 60), keeping the corpus in
# fuzz/corpus/c_api and any crash in fuzz/artifacts/c_api/.
#
#   bash fuzz/run-libfuzzer.sh [SECONDS] [extra libFuzzer flags...]
#
# With cargo-fuzz installed the same run is:
#   RUSTC_BOOTSTRAP=1 cargo fuzz run c_api -- -max_total_time=60 -handle_usr1=0 -handle_usr2=0
set -euo pipefail

cd "$(dirname "$0")"
secs="${1:-60}"
shift || true
triple="$(rustc -vV | sed -n 's/^host: //p')"

export RUSTC_BOOTSTRAP=1
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing \
-Cllvm-args=-simplifycfg-branch-fold-threshold=0 -Zsanitizer=address \
-Cllvm-args=-sanitizer-coverage-stack-depth -Cdebug-assertions -Ccodegen-units=1"

start=$(date +%s)
cargo build --manifest-path Cargo.toml --target "$triple" --release \
    --config 'profile.release.debug="line-tables-only"' --bin c_api
echo "libFuzzer build: $(( $(date +%s) - start )) s"

target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
bin="$target_dir/$triple/release/c_api"
mkdir -p corpus/c_api artifacts/c_api
# SIGUSR1/SIGUSR2 belong to the harness (it raises them for SIGNAL kevents), not to
# libFuzzer's graceful-exit handlers. Inputs up to 1 KiB from the start: one input is a
# sequence of up to 48 calls, and short inputs reach few of them.
ASAN_OPTIONS="detect_odr_violation=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}" "$bin" \
    -artifact_prefix=artifacts/c_api/ -max_total_time="$secs" \
    -handle_usr1=0 -handle_usr2=0 -print_final_stats=1 -max_len=1024 -len_control=0 \
    "$@" corpus/c_api
