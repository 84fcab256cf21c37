#!/usr/bin/env bash
# Builds the CRIU that the oci runtime's checkpoint and restore drive, and
# caches it under $AGENT2ENV_CACHE_DIR/criu-<version>-<key>/ (default
# /var/cache/agent2env), where <key> hashes the recipe and the patches. A
# warm run builds nothing. Prints the path of the criu binary. Beside it:
# lib/libcriu.so.2 of the same build, which crun loads to drive CRIU, and
# include/ and lib/pkgconfig/criu.pc, which scripts/crun.sh builds crun
# against.
#
#   scripts/criu.sh           build (or reuse) criu and print its path
#   scripts/criu.sh --check   the same, then run `criu check` with it, and
#                             check its nftables network lock works here
#   scripts/criu.sh --path    print the path only if it is built (exit 1
#                             if not): how the tests find it
#
# Why not Debian 12's criu: 3.17 fails `criu check` on kernels >= 6.13.
# The source is Debian's package of CRIU 4.1.1 (trixie), pinned by sha256,
# plus the upstream fix for kernels >= 6.16, which refuse SO_PASSCRED and
# SO_PASSSEC on sockets other than unix and netlink (upstream commit
# 4b73985955ec, "criu/sockets: Restrict SO_PASSCRED and SO_PASSSEC to
# supported families", in CRIU 4.2; scripts/criu/*.patch). Without it every
# dump of a process holding a TCP socket fails with "Can't get 1:16 opt".
# Two more fixes of ours (scripts/criu/0002-*, 0003-*): reading the limits of
# another user's process without CAP_SYS_RESOURCE, which root lacks on this
# project's machines (CI's too); and an inherit-fd of runc's CRIU
# configuration file (org.criu.config), which CRIU's RPC mode parses twice,
# counted once. Two for speed, found in the CRIU logs of a snapshot and a
# restore (which spent about 100 ms each on other processes): CRIU locks a
# sandbox's network for the dump (and a restored one until it runs) with
# nftables, through libnftables in its own process, rather than its
# default, iptables, whose unlock alone runs iptables-restore four times
# and a shell once (70 ms of every snapshot and restore here; built with
# NETWORK_LOCK_DEFAULT; a snapshot records its method and its restores use
# it, so the iptables build's snapshots restore as before; `--check` checks
# the kernel has what it needs); and a tmpfs (a sandbox has five: /dev,
# /dev/shm, the cgroup mounts' parent, two masked directories) is saved
# without tar when empty and without gzip otherwise (0005; the older
# images, gzip-compressed, still restore). And one for terminals (0006):
# CRIU refused to save an interactive shell on a terminal ("ctty
# inheritance detected"), as the shell opens /dev/tty while the agent,
# outside its session, holds the terminal's master end, and CRIU took the
# first end it found for the one the shell must hold. Only `make criu` is built: no
# documentation, no Python library, no plugins. Each run marks its version
# used and prunes the others, unused for an hour (scripts/cache-prune.sh).
set -euo pipefail

VERSION=4.1.1
ORIG_URL=http://deb.debian.org/debian/pool/main/c/criu/criu_${VERSION}.orig.tar.xz
ORIG_SHA256=f80a66cb3726bb2116266d4759ce3bcbfab7abdb6b6d430bf20dd41911717afe
# Change RECIPE whenever the way criu is built changes, so the key changes.
RECIPE=3
BUILD_DEPS=(gcc make pkg-config curl xz-utils patch libprotobuf-c-dev protobuf-c-compiler
	libprotobuf-dev protobuf-compiler python3-protobuf libnl-3-dev libnet1-dev libcap-dev
	libaio-dev libgnutls28-dev libbsd-dev libnftables-dev uuid-dev iptables)

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=cache-prune.sh
. "$here/cache-prune.sh"
# shellcheck source-path=SCRIPTDIR source=source-build.sh
. "$here/source-build.sh"
key=$( { echo "recipe $RECIPE $ORIG_SHA256"; cat "$here"/criu/*.patch; } | sha256sum | cut -c1-12)
root=${AGENT2ENV_CACHE_DIR:-/var/cache/agent2env}
cache=$root/criu-$VERSION-$key
bin=$cache/criu

log() { echo "criu: $*" >&2; }

if [ "${1:-}" = --path ]; then
	cached_path "$bin" "$cache"
	exit
fi
build_lock "$bin" "$cache"
if [ ! -x "$bin" ]; then
	log "building CRIU $VERSION into $cache (once; later runs reuse it)"
	unpack_source "$ORIG_URL" "$ORIG_SHA256" "${BUILD_DEPS[@]}"
	src=$work/criu-$VERSION
	for p in "$here"/criu/*.patch; do
		log "applying $(basename "$p")"
		patch -s -p1 -d "$src" <"$p"
	done
	log "compiling (make criu lib/c/libcriu.so, $(nproc) jobs)"
	make -s -C "$src" -j"$(nproc)" NETWORK_LOCK_DEFAULT=NETWORK_LOCK_NFTABLES criu lib/c/libcriu.so >"$work/build.log" 2>&1 || build_failed
	# What lib/Makefile's install target installs, less the Python library.
	rm -rf "$cache/lib" "$cache/include"
	install -D -m 0755 "$src/lib/c/libcriu.so" "$cache/lib/libcriu.so.2"
	ln -s libcriu.so.2 "$cache/lib/libcriu.so"
	install -D -m 0644 -t "$cache/include/criu" "$src/lib/c/criu.h" "$src/images/rpc.pb-c.h" "$src/criu/include/version.h"
	mkdir -p "$cache/lib/pkgconfig"
	sed -e "s,@version@,$VERSION," -e "s,@libdir@,$cache/lib," -e "s,@includedir@,$cache/include," \
		"$src/lib/c/criu.pc.in" >"$cache/lib/pkgconfig/criu.pc"
	install -m 0755 "$src/criu/criu" "$bin.tmp.$$"
	mv "$bin.tmp.$$" "$bin"
	log "built $bin"
fi
exec 9>&-
touch -c "$cache" 2>/dev/null || true # used
cache_prune "$root" 'criu-*' "criu-$VERSION-$key"
if [ "${1:-}" = --check ]; then
	"$bin" check >&2
	"$bin" check --feature network_lock_nftables >&2
fi
echo "$bin"
