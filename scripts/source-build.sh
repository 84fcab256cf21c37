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

# fetch_source URL SHA256 FILE downloads URL to FILE and checks its sha256.
fetch_source() {
	log "downloading $1"
	curl -fsSL --retry 3 -o "$3" "$1"
	echo "$2  $3" | sha256sum -c --quiet - || {
		log "checksum mismatch for $1"
		return 1
	}
}
