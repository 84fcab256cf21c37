#!/usr/bin/env bash
# Builds the web console (web/) and checks its committed build.
#
#   scripts/web.sh deps    installs web/node_modules (npm ci) and prints the
#                          bin directory of the pinned Node.js
#   scripts/web.sh build   rebuilds internal/console/dist (make web)
#   scripts/web.sh check   runs the app's unit tests (npm test), and fails
#                          when a fresh build differs from the committed
#                          internal/console/dist (make test)
#
# Node.js is the one scripts/test-peers.sh pins (installed by npm, cached by
# version under $AGENT2ENV_CACHE_DIR/peers); npm's download cache is
# $AGENT2ENV_CACHE_DIR/npm, so a second install runs offline. web/node_modules
# is installed again only when web/package-lock.json changes. Every version
# is pinned in web/package-lock.json, and the build names its files by
# their content: one source, one build, byte for byte.
set -euo pipefail
cd "$(dirname "$0")/.."

NODE_VERSION=22.23.3 # as in scripts/test-peers.sh

cache="${AGENT2ENV_CACHE_DIR:-/var/cache/agent2env}"
mkdir -p "$cache/peers" "$cache/npm"

deps() {
	command -v npm >/dev/null 2>&1 || {
		sudo=""
		[ "$(id -u)" -eq 0 ] || sudo="sudo"
		echo "web: installing npm" >&2
		$sudo apt-get update -qq
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends npm >/dev/null
	}
	local node_dir="$cache/peers/node-$NODE_VERSION"
	(
		flock 9
		if [ ! -e "$node_dir/.done" ]; then
			echo "web: installing node@$NODE_VERSION" >&2
			rm -rf "$node_dir.partial"
			npm install --prefix "$node_dir.partial" --cache "$cache/npm" --no-audit --no-fund --no-update-notifier \
				--loglevel=error "node@$NODE_VERSION" >&2
			rm -rf "$node_dir" && mv "$node_dir.partial" "$node_dir"
			touch "$node_dir/.done"
		fi
		touch -c "$node_dir" # used: scripts/test-peers.sh prunes the rest
	) 9>"$cache/peers/.lock"
	node_bin="$node_dir/node_modules/.bin"
	export PATH="$node_bin:$PATH"
	local stamp
	stamp=$(sha256sum web/package-lock.json | cut -c1-16)
	if [ "$(cat web/node_modules/.stamp 2>/dev/null)" != "$stamp" ]; then
		echo "web: installing web/node_modules" >&2
		(cd web && npm ci --cache "$cache/npm" --prefer-offline --no-audit --no-fund --no-update-notifier --loglevel=error >&2)
		echo "$stamp" >web/node_modules/.stamp
	fi
}

case "${1:-}" in
deps)
	deps
	echo "$node_bin"
	;;
build)
	deps
	(cd web && npx --no-install tsc --noEmit && npx --no-install vite build --logLevel warn)
	;;
check)
	deps
	out=$(mktemp -d)
	trap 'rm -rf "$out"' EXIT
	(cd web && npm test --silent >&2 && npx --no-install tsc --noEmit && npx --no-install vite build --logLevel warn --outDir "$out" --emptyOutDir)
	if ! diff -r internal/console/dist "$out" >&2; then
		echo "web: internal/console/dist differs from a fresh build of web/: run make web and commit" >&2
		exit 1
	fi
	;;
*)
	echo "usage: scripts/web.sh deps|build|check" >&2
	exit 2
	;;
esac
