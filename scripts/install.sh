#!/bin/sh
# Installs libkevent, the C library of kevent-for-Rust, into a prefix.
#
#   scripts/install.sh --prefix "$HOME/.local"
#
# builds the root package with the `dist` profile (cargo build --profile dist -p kevent-c:
# the release settings plus fat LTO, one codegen unit and panic=abort, see Cargo.toml) and
# installs
#
#   PREFIX/lib/libkevent.so.1.0.0      the shared library (soname libkevent.so.1), stripped
#   PREFIX/lib/libkevent.so.1 -> libkevent.so.1.0.0
#   PREFIX/lib/libkevent.so   -> libkevent.so.1
#   PREFIX/lib/libkevent.a             the static library, debug info stripped
#   PREFIX/lib/.debug/libkevent.so.1.0.0.debug
#                                      the shared library's debug info, split off (gdb finds
#                                      it through the library's .gnu_debuglink)
#   PREFIX/include/kevent/kevent.h
#   PREFIX/lib/pkgconfig/kevent.pc
#   PREFIX/share/man/man2/kevent_{init,ctl,get_events,wait,commit,aio_sendfile}.2
#   PREFIX/share/man/man3/kevent_timer_create.3 (and its aliases)
#   PREFIX/lib/libkevent-epoll.so      the LD_PRELOAD library that runs epoll programs on
#                                      kevent (stripped), and
#   PREFIX/bin/kevent-run              its wrapper: kevent-run CMD ARGS...
#                                      (both only when libkevent_epoll_preload.so was built)
#
# after which   cc prog.c $(pkg-config --cflags --libs kevent)   works (with
# PKG_CONFIG_PATH=PREFIX/lib/pkgconfig if PREFIX is not a system prefix).
#
# Options:
#   --prefix DIR    where to install (default /usr/local)
#   --libdir DIR    libraries and pkgconfig/ (default PREFIX/lib)
#   --mandir DIR    manual pages (default PREFIX/share/man)
#   --bindir DIR    kevent-run (default PREFIX/bin)
#   --destdir DIR   stage under DIR, for packagers (paths inside files stay PREFIX)
#   --profile NAME  the cargo profile to build and install (default dist; release works too)
#   --no-build      install what is already built instead of running cargo
#   --from DIR      the cargo output directory to install from (default:
#                   <cargo target dir>/<profile>); the build writes the header and kevent.pc
#                   there, next to libkevent_c.so and libkevent_c.a
#   --no-strip      install the libraries as built, debug info included
#   --no-debug-file do not install the split-off debug info
set -eu

# The file name's version: the soname's major (build.rs SONAME_MAJOR) plus .0.0.
SOVERSION=1
REALNAME="libkevent.so.$SOVERSION.0.0"

prefix=/usr/local
libdir=
mandir=
bindir=
destdir=
profile=dist
build=1
from=
strip=1
debugfile=1

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
	--mandir) mandir=$2; shift 2 ;;
	--mandir=*) mandir=${1#*=}; shift ;;
	--bindir) bindir=$2; shift 2 ;;
	--bindir=*) bindir=${1#*=}; shift ;;
	--profile) profile=$2; shift 2 ;;
	--profile=*) profile=${1#*=}; shift ;;
	--no-strip) strip=0; shift ;;
	--no-debug-file) debugfile=0; shift ;;
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
[ -n "$mandir" ] || mandir="$prefix/share/man"
[ -n "$bindir" ] || bindir="$prefix/bin"
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
	# cargo's output directory is named after the profile (dev builds go to debug/).
	case "$profile" in
	dev) from="$target_dir/debug" ;;
	*) from="$target_dir/$profile" ;;
	esac
fi

if [ "$build" = 1 ]; then
	echo "install.sh: cargo build --profile $profile -p kevent-c -p kevent-epoll-preload"
	(cd "$repo" && cargo build --profile "$profile" -p kevent-c -p kevent-epoll-preload)
fi

if [ "$strip" = 1 ] && ! command -v objcopy >/dev/null 2>&1; then
	echo "install.sh: objcopy not found (binutils): installing the libraries unstripped" >&2
	strip=0
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
man="$destdir$mandir"
mkdir -p "$lib" "$inc/kevent" "$pc" "$man/man2" "$man/man3"

if [ "$strip" = 1 ]; then
	# The debug info goes to its own file, named where gdb looks for the library's
	# .gnu_debuglink (DIR/.debug/NAME); the library keeps only what it needs to run.
	work=$(mktemp -d "${TMPDIR:-/tmp}/kevent-install.XXXXXX")
	trap 'rm -rf "$work"' EXIT
	cp "$from/libkevent_c.so" "$work/$REALNAME"
	objcopy --only-keep-debug "$work/$REALNAME" "$work/$REALNAME.debug"
	objcopy --strip-unneeded --remove-section=.comment \
		--add-gnu-debuglink="$work/$REALNAME.debug" "$work/$REALNAME" "$work/$REALNAME.stripped"
	install -m 0755 "$work/$REALNAME.stripped" "$lib/$REALNAME"
	if [ "$debugfile" = 1 ]; then
		mkdir -p "$lib/.debug"
		install -m 0644 "$work/$REALNAME.debug" "$lib/.debug/$REALNAME.debug"
	fi
	# The archive keeps its symbols (a program links against them), not its DWARF.
	objcopy --strip-debug "$from/libkevent_c.a" "$work/libkevent.a"
	install -m 0644 "$work/libkevent.a" "$lib/libkevent.a"
else
	install -m 0755 "$from/libkevent_c.so" "$lib/$REALNAME"
	install -m 0644 "$from/libkevent_c.a" "$lib/libkevent.a"
fi
ln -sf "$REALNAME" "$lib/libkevent.so.$SOVERSION"
ln -sf "libkevent.so.$SOVERSION" "$lib/libkevent.so"
install -m 0644 "$from/include/kevent/kevent.h" "$inc/kevent/kevent.h"
# The generated kevent.pc is relocatable (prefix=${pcfiledir}/../..); write the real paths.
sed -e "s|^prefix=.*|prefix=$prefix|" \
	-e "s|^libdir=.*|libdir=$libdir|" \
	-e "s|^includedir=.*|includedir=$includedir|" \
	"$from/kevent.pc" >"$pc/kevent.pc"
chmod 0644 "$pc/kevent.pc"
for page in "$repo"/man/man2/*.2; do install -m 0644 "$page" "$man/man2/"; done
for page in "$repo"/man/man3/*.3; do install -m 0644 "$page" "$man/man3/"; done

# libkevent-epoll.so and kevent-run (README, "epoll programs on kevent").
shim=0
if [ -f "$from/libkevent_epoll_preload.so" ]; then
	shim=1
	bin="$destdir$bindir"
	mkdir -p "$bin"
	if [ "$strip" = 1 ]; then
		objcopy --strip-unneeded --remove-section=.comment "$from/libkevent_epoll_preload.so" \
			"${work:?}/libkevent-epoll.so"
		install -m 0755 "$work/libkevent-epoll.so" "$lib/libkevent-epoll.so"
	else
		install -m 0755 "$from/libkevent_epoll_preload.so" "$lib/libkevent-epoll.so"
	fi
	sed -e "s|@KEVENT_EPOLL_SO@|$libdir/libkevent-epoll.so|" "$repo/scripts/kevent-run" >"$bin/kevent-run"
	chmod 0755 "$bin/kevent-run"
else
	echo "install.sh: $from/libkevent_epoll_preload.so not built: libkevent-epoll.so and kevent-run not installed" >&2
fi

size() { wc -c <"$1" | tr -d ' '; }
echo "install.sh: installed libkevent into $destdir$prefix:"
echo "  $lib/$REALNAME ($(size "$lib/$REALNAME") bytes; + libkevent.so.$SOVERSION, libkevent.so)"
echo "  $lib/libkevent.a ($(size "$lib/libkevent.a") bytes)"
if [ "$strip" = 1 ] && [ "$debugfile" = 1 ]; then
	echo "  $lib/.debug/$REALNAME.debug (debug info, $(size "$lib/.debug/$REALNAME.debug") bytes)"
fi
echo "  $inc/kevent/kevent.h"
echo "  $pc/kevent.pc"
echo "  $man/man2/kevent_*.2, $man/man3/kevent_*.3"
if [ "$shim" = 1 ]; then
	echo "  $lib/libkevent-epoll.so ($(size "$lib/libkevent-epoll.so") bytes)"
	echo "  $destdir$bindir/kevent-run"
fi

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
