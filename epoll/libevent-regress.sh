#!/usr/bin/env bash
# libevent's own regression suite (test/regress) through libkevent-epoll.so (issue 24):
#
#   epoll/libevent-regress.sh [WORKDIR]
#
# fetches Debian's libevent source package (apt-get source: needs a deb-src line for the
# release, dpkg-dev, autoconf, automake, libtool; WORKDIR defaults to a new temporary
# directory), builds test/regress, and runs it with only epoll enabled
# (EVENT_NOPOLL=1 EVENT_NOSELECT=1) four ways: on epoll, on epoll with
# EVENT_EPOLL_USE_CHANGELIST=1 (ctest's variant), and the same two under libkevent-epoll.so
# on the fallback backend (and on native too when KEVENT_BACKEND=native works). Prints each
# run's summary line and wall time; fails unless every shimmed run passes as many tests as
# the same run on epoll. Too long for CI (about 80 s a run on 2 cores); run by hand. On a
# loaded machine libevent's timer-precision checks (util/usleep, util/monotonic_prc, which
# make no epoll call) can fail in either mode: the failed tests are printed; run again.
#
# The library is KEVENT_EPOLL_SO when set, else target/debug/libkevent_epoll_preload.so
# (cargo build -p kevent-epoll-preload).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
so=${KEVENT_EPOLL_SO:-$repo/target/debug/libkevent_epoll_preload.so}
[ -f "$so" ] || { echo "libevent-regress: $so missing (cargo build -p kevent-epoll-preload)" >&2; exit 2; }
work=${1:-$(mktemp -d)}
mkdir -p "$work"
cd "$work"
if ! compgen -G 'libevent-*/' > /dev/null; then
    apt-get source -qq libevent
fi
srcs=(libevent-*/)
cd "${srcs[0]}"
if [ ! -x test/regress ]; then
    autoreconf -fi > /dev/null
    ./configure -q --disable-openssl --disable-samples
    make -j"$(nproc)" > /dev/null
    make -j"$(nproc)" test/regress > /dev/null
fi
cd test

# run LABEL [ENV...]: prints "LABEL: <ok count> <summary> (<seconds> s)", sets OK.
run() {
    local label=$1
    shift
    local start end out
    start=$(date +%s)
    out=$(env "$@" EVENT_NOPOLL=1 EVENT_NOSELECT=1 ./regress 2>&1 || true)
    end=$(date +%s)
    local summary
    summary=$(printf '%s\n' "$out" | grep -E 'tests ok|TESTS FAILED' | tail -1)
    OK=$(printf '%s\n' "$summary" | grep -oE '^[0-9]+' | head -1)
    # "N/M TESTS FAILED": passed = M - N.
    if printf '%s\n' "$summary" | grep -q 'TESTS FAILED'; then
        local f m
        f=$(printf '%s\n' "$summary" | sed -E 's#^([0-9]+)/([0-9]+).*#\1#')
        m=$(printf '%s\n' "$summary" | sed -E 's#^([0-9]+)/([0-9]+).*#\2#')
        OK=$((m - f))
        printf '%s\n' "$out" | grep -E 'FAILED\]|^  FAIL ' | head -20 >&2 || true
    fi
    echo "$label: $OK passed; $summary ($((end - start)) s)"
}

backends=fallback
if KEVENT_BACKEND=native LD_PRELOAD=$so true 2> /dev/null && [ -d /sys/kernel/kevent ]; then
    backends="fallback native"
fi
status=0
for variant in "" "EVENT_EPOLL_USE_CHANGELIST=1"; do
    name=${variant:-plain}
    run "epoll $name" $variant
    want=$OK
    for b in $backends; do
        run "libkevent-epoll.so ($b) $name" LD_PRELOAD="$so" KEVENT_BACKEND="$b" $variant
        if [ "$OK" != "$want" ]; then
            echo "libevent-regress: $b $name: $OK passed, epoll $want" >&2
            status=1
        fi
    done
done
exit $status
