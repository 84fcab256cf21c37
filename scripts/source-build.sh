# shellcheck shell=bash
# Sourced, not run: what criu.sh and crun.sh share to build a program from
# a source tarball pinned by sha256 into a cache entry of its own
# (<cache>/<program>), once. The caller defines log().

# cached_path BIN CACHE prints BIN, marking CACHE used, when BIN is built;
# otherwise it fails (the scripts' --path).
cached_path() {
	[ -x "$1" ] || return 1
	touch -c "$2" 2>/dev/null || true # used
	echo "$1"
}

# build_lock BIN CACHE takes CACHE's lock (fd 9) unless BIN is built: held
# while building, another build waits, and pruning leaves the entry. The
# caller closes fd 9 when done.
build_lock() {
	[ -x "$1" ] && return 0
	mkdir -p "$2"
	exec 9>"$2/.lock"
	flock 9
}

# unpack_source URL SHA256 PACKAGE... installs the packages the build
# needs (deps.sh), then downloads URL into a new temporary directory,
# $work (removed when the script exits), checks its sha256 and unpacks it
# there.
unpack_source() {
	local url=$1 sha=$2
	shift 2
	"$(dirname "${BASH_SOURCE[0]}")/deps.sh" "$@"
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
	log "downloading $url"
	curl -fsSL --retry 3 -o "$work/source.tar" "$url"
	echo "$sha  $work/source.tar" | sha256sum -c --quiet - || {
		log "checksum mismatch for $url"
		return 1
	}
	tar -C "$work" -xf "$work/source.tar"
}

# build_failed shows the end of $work/build.log and fails the script.
build_failed() {
	tail -n 40 "$work/build.log" >&2
	log "build failed"
	exit 1
}
