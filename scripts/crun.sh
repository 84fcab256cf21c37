#!/usr/bin/env bash
# Builds the crun that the oci runtime runs sandboxes with by default, and
# caches it under $AGENT2ENV_CACHE_DIR/crun-<version>-<key>/ (default
# /var/cache/agent2env), where <key> hashes the recipe and the CRIU it is
# built against. A warm run builds nothing. Prints the path of the crun
# binary.
#
#   scripts/crun.sh           build (or reuse) crun and print its path
#   scripts/crun.sh --path    print the path only if it is built (exit 1
#                             if not): how the daemon and the tests find it
#
# Why not Debian 12's crun: 1.8.1 is built without CRIU, so it has no
# checkpoint and restore (snapshots, fork).
# This one is crun 1.21 (Debian trixie's source, pinned by sha256), built
# with CRIU support against the headers of the project's CRIU
# (scripts/criu.sh, built first); it loads that CRIU's libcriu.so.2 when it
# checkpoints or restores (the daemon points LD_LIBRARY_PATH at it). Built
# without systemd and libseccomp, neither of which the daemon's bundles use
# (the agent installs the sandbox's seccomp filter itself), and with yajl
# linked in: it loads libc and libcap only, where Debian's crun loads six
# libraries on every command. Each run marks its version used and prunes
# the others, unused for an hour (scripts/cache-prune.sh).
#
# Two patches (scripts/crun/*.patch): crun read all of /proc/mounts on every
# container start to learn whether SELinux is on, a cost that grows with
# each live sandbox's mounts; it now asks /proc/filesystems first. And crun
# refused hybrid cgroup hosts whose cgroup2 holds a controller (as this
# machine's does: hugetlb); it now runs there as runc does, limits in the v1
# hierarchies, so the daemon need not hide that cgroup2 from every command.
set -euo pipefail

VERSION=1.21
ORIG_URL=http://deb.debian.org/debian/pool/main/c/crun/crun_${VERSION}.orig.tar.gz
ORIG_SHA256=4bfb700e764a4804a4de3ecf07753f4c391005356d60356df65d80ae0914c486
# Change RECIPE whenever the way crun is built changes, so the key changes.
RECIPE=1
BUILD_DEPS=(gcc make pkg-config curl patch libcap-dev)

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=cache-prune.sh
. "$here/cache-prune.sh"
# shellcheck source-path=SCRIPTDIR source=source-build.sh
. "$here/source-build.sh"
root=${AGENT2ENV_CACHE_DIR:-/var/cache/agent2env}

log() { echo "crun: $*" >&2; }

if [ "${1:-}" = --path ]; then
	criu=$("$here/criu.sh" --path) || exit 1
else
	criu=$("$here/criu.sh")
fi
criu_dir=$(dirname "$criu")
key=$( { echo "recipe $RECIPE $ORIG_SHA256 $(basename "$criu_dir")"; cat "$here"/crun/*.patch; } | sha256sum | cut -c1-12)
cache=$root/crun-$VERSION-$key
bin=$cache/crun

if [ "${1:-}" = --path ]; then
	cached_path "$bin" "$cache"
	exit
fi
build_lock "$bin" "$cache"
if [ ! -x "$bin" ]; then
	log "building crun $VERSION into $cache (once; later runs reuse it)"
	unpack_source "$ORIG_URL" "$ORIG_SHA256" "${BUILD_DEPS[@]}"
	src=$work/crun-$VERSION
	for p in "$here"/crun/*.patch; do
		log "applying $(basename "$p")"
		patch -s -p1 -d "$src" <"$p"
	done
	log "configuring and compiling ($(nproc) jobs)"
	(
		cd "$src"
		PKG_CONFIG_PATH=$criu_dir/lib/pkgconfig ./configure --disable-systemd --disable-seccomp \
			--enable-embedded-yajl --disable-shared
		# The release tarball lacks the header naming its commit; make
		# writes it from .tarball-version.
		make git-version.h
		make -j"$(nproc)" CPPFLAGS="-I$criu_dir/include"
	) >"$work/build.log" 2>&1 || build_failed
	"$src/crun" --version | grep -q '+CRIU' || {
		"$src/crun" --version >&2
		log "built without CRIU"
		exit 1
	}
	install -m 0755 "$src/crun" "$bin.tmp.$$"
	mv "$bin.tmp.$$" "$bin"
	log "built $bin"
fi
exec 9>&-
touch -c "$cache" 2>/dev/null || true # used
cache_prune "$root" 'crun-*' "crun-$VERSION-$key"
echo "$bin"
