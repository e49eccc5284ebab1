#!/bin/sh
# Installs libkevent, the C library of kevent-for-Rust, into a prefix.
#
#   scripts/install.sh --prefix "$HOME/.local"
#
# builds the root package in release mode (cargo build --release -p kevent-c) and installs
#
#   PREFIX/lib/libkevent.so.1.0.0      the shared library (soname libkevent.so.1)
#   PREFIX/lib/libkevent.so.1 -> libkevent.so.1.0.0
#   PREFIX/lib/libkevent.so   -> libkevent.so.1
#   PREFIX/lib/libkevent.a
#   PREFIX/include/kevent/kevent.h
#   PREFIX/lib/pkgconfig/kevent.pc
#
# after which   cc prog.c $(pkg-config --cflags --libs kevent)   works (with
# PKG_CONFIG_PATH=PREFIX/lib/pkgconfig if PREFIX is not a system prefix).
#
# Options:
#   --prefix DIR    where to install (default /usr/local)
#   --libdir DIR    libraries and pkgconfig/ (default PREFIX/lib)
#   --destdir DIR   stage under DIR, for packagers (paths inside files stay PREFIX)
#   --no-build      install what is already built instead of running cargo
#   --from DIR      the cargo output directory to install from (default:
#                   <cargo target dir>/release); the build writes the header and kevent.pc
#                   there, next to libkevent_c.so and libkevent_c.a
set -eu

# The file name's version: the soname's major (build.rs SONAME_MAJOR) plus .0.0.
SOVERSION=1
REALNAME="libkevent.so.$SOVERSION.0.0"

prefix=/usr/local
libdir=
destdir=
build=1
from=

usage() {
	sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'
	exit "${1:-0}"
}

while [ $# -gt 0 ]; do
	case "$1" in
	--prefix) prefix=$2; shift 2 ;;
	--prefix=*) prefix=${1#*=}; shift ;;
	--libdir) libdir=$2; shift 2 ;;
	--libdir=*) libdir=${1#*=}; shift ;;
	--destdir) destdir=$2; shift 2 ;;
	--destdir=*) destdir=${1#*=}; shift ;;
	--no-build) build=0; shift ;;
	--from) from=$2; shift 2 ;;
	--from=*) from=${1#*=}; shift ;;
	-h|--help) usage 0 ;;
	*) echo "install.sh: unknown option $1" >&2; usage 2 >&2 ;;
	esac
done

case "$prefix" in
/*) ;;
*) prefix=$(cd "$prefix" 2>/dev/null && pwd || { mkdir -p "$prefix" && cd "$prefix" && pwd; }) ;;
esac
[ -n "$libdir" ] || libdir="$prefix/lib"
includedir="$prefix/include"

repo=$(cd "$(dirname "$0")/.." && pwd)

if [ -z "$from" ]; then
	if [ -n "${CARGO_TARGET_DIR:-}" ]; then
		target_dir=$CARGO_TARGET_DIR
	else
		target_dir=$(cd "$repo" && cargo metadata --no-deps --format-version 1 |
			sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
		[ -n "$target_dir" ] || target_dir="$repo/target"
	fi
	from="$target_dir/release"
fi

if [ "$build" = 1 ]; then
	echo "install.sh: cargo build --release -p kevent-c"
	(cd "$repo" && cargo build --release -p kevent-c)
fi

for f in libkevent_c.so libkevent_c.a include/kevent/kevent.h kevent.pc; do
	if [ ! -f "$from/$f" ]; then
		echo "install.sh: $from/$f is missing (build first, or pass --from)" >&2
		exit 1
	fi
done

lib="$destdir$libdir"
inc="$destdir$includedir"
pc="$destdir$libdir/pkgconfig"
mkdir -p "$lib" "$inc/kevent" "$pc"

install -m 0755 "$from/libkevent_c.so" "$lib/$REALNAME"
ln -sf "$REALNAME" "$lib/libkevent.so.$SOVERSION"
ln -sf "libkevent.so.$SOVERSION" "$lib/libkevent.so"
install -m 0644 "$from/libkevent_c.a" "$lib/libkevent.a"
install -m 0644 "$from/include/kevent/kevent.h" "$inc/kevent/kevent.h"
# The generated kevent.pc is relocatable (prefix=${pcfiledir}/../..); write the real paths.
sed -e "s|^prefix=.*|prefix=$prefix|" \
	-e "s|^libdir=.*|libdir=$libdir|" \
	-e "s|^includedir=.*|includedir=$includedir|" \
	"$from/kevent.pc" >"$pc/kevent.pc"
chmod 0644 "$pc/kevent.pc"

echo "install.sh: installed libkevent into $destdir$prefix:"
echo "  $lib/$REALNAME (+ libkevent.so.$SOVERSION, libkevent.so), $lib/libkevent.a"
echo "  $inc/kevent/kevent.h"
echo "  $pc/kevent.pc"

if [ -z "$destdir" ]; then
	case "$libdir" in
	/usr/lib | /usr/lib64 | /usr/local/lib | /usr/local/lib64 | /lib | /lib64)
		if [ "$(id -u)" = 0 ] && command -v ldconfig >/dev/null 2>&1; then ldconfig; fi
		;;
	*)
		echo "install.sh: $libdir is not on the default search paths; use"
		echo "  export PKG_CONFIG_PATH=$libdir/pkgconfig\${PKG_CONFIG_PATH:+:\$PKG_CONFIG_PATH}"
		echo "  and at run time LD_LIBRARY_PATH=$libdir, or link with -Wl,-rpath,$libdir"
		;;
	esac
fi
