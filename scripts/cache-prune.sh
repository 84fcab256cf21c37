# shellcheck shell=bash
# Sourced, not run: cache_prune, which the scripts that cache builds under
# $AGENT2ENV_CACHE_DIR (criu.sh, kube-binaries.sh, test-peers.sh) call once
# they have made their current version, to remove other versions' entries
# no one is using. The rule is internal/buildcache's (the image builds'):
# an entry of another version goes unless it is in use, that is its lock
# (ENTRY/.lock) is held or it was modified within the last hour (callers
# touch the entries they use). Symbolic links are never followed nor
# removed, and rm stays on the entry's file system (a mount below is kept).

# cache_prune DIR PATTERN CURRENT... removes the entries of DIR matching
# the glob PATTERN (dot files excepted) other than CURRENT..., the names
# of this version's entries, unless in use.
cache_prune() {
	local dir=$1 pattern=$2 entry name current
	shift 2
	[ -d "$dir" ] && [ ! -L "$dir" ] || return 0
	for entry in "$dir"/$pattern; do
		name=${entry##*/}
		[ -L "$entry" ] || [ -e "$entry" ] || continue # no match
		for current in "$@"; do
			[ "$name" = "$current" ] && continue 2
		done
		[ -L "$entry" ] && continue
		[ -L "$entry/.lock" ] && continue
		if [ -f "$entry/.lock" ]; then
			# Held by another process: being made or used. Removing the
			# entry while holding its lock: a builder waiting on it fails
			# (its directory is gone) rather than filling a removed one.
			(flock -n 9 && cache_prune_unused "$entry") 9<"$entry/.lock" || continue
		else
			cache_prune_unused "$entry" || continue
		fi
		echo "${0##*/}: removed $entry (another version, unused for an hour)" >&2
	done
}

# cache_prune_unused ENTRY removes ENTRY unless it was modified within the
# last hour; it fails when it leaves it.
cache_prune_unused() {
	[ -z "$(find "$1" -maxdepth 0 -mmin -60)" ] || return 1
	rm -rf --one-file-system -- "$1"
}
