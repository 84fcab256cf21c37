#!/usr/bin/env bash
# Builds the Kubernetes binaries the kube runtime's tests run, from the Go
# module proxy only, and caches them under
# $AGENT2ENV_CACHE_DIR/kube/<key>/bin, where <key> names the versions and
# hashes everything that decides the bytes (the wrapper modules, the flags,
# the Go version). A warm run builds nothing. Prints the bin directory.
#
#   scripts/kube-binaries.sh [a|b]   build (or reuse) tier a (default) or b
#   scripts/kube-binaries.sh --background [a|b]
#                                    the same, building at the lowest CPU
#                                    priority in the background (log:
#                                    <key>/build.log) so that a cold make
#                                    test overlaps it with its other work
#   scripts/kube-binaries.sh --dir   print the bin directory once no build
#                                    of it is going on, build nothing
#
# Tier a, a control plane with kwok's fake nodes: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, kwok. Tier b adds kubelet
# and kube-router (only its NetworkPolicy firewall runs on the test node).
#
# Kubernetes and etcd are built from the wrapper modules in
# scripts/kube-binaries/ (their go.mod says why and how to move to another
# release); kwok is "go install"ed at KWOK_VERSION, kube-router at
# KUBE_ROUTER_VERSION (its version is not in the cache key, which would
# rebuild everything when it moves: kube-router.version beside it says
# which one the binary is, and another is built over it).
#
# Each run marks its key used; a build, warm or cold, then prunes the other
# keys' directories, unused for an hour (scripts/cache-prune.sh).
set -euo pipefail

KWOK_VERSION=v0.8.0
KUBE_ROUTER_VERSION=v2.1.0
# Change RECIPE whenever the way the binaries are built changes (flags,
# packages), so that the cache key changes with it.
RECIPE=1

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=cache-prune.sh
. "$here/cache-prune.sh"
kubemod=$here/kube-binaries/kubernetes
etcdmod=$here/kube-binaries/etcd
go=${GO:-go}

# required prints the version module $2 is required at in go.mod $1.
required() {
	awk -v m="$2" '($1 == m && $2 ~ /^v/) || ($1 == "require" && $2 == m) { print ($1 == m ? $2 : $3); exit }' "$1"
}
KUBE_VERSION=$(required "$kubemod/go.mod" k8s.io/kubernetes)
ETCD_VERSION=$(required "$etcdmod/go.mod" go.etcd.io/etcd/server/v3)
[ -n "$KUBE_VERSION" ] && [ -n "$ETCD_VERSION" ] || {
	echo "kube-binaries: cannot read the pinned versions from $here/kube-binaries" >&2
	exit 1
}
etcd_ldflags="-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD_VERSION"

key=$(
	{
		cat "$kubemod/go.mod" "$kubemod/go.sum" "$etcdmod/go.mod" "$etcdmod/go.sum"
		echo "recipe $RECIPE kwok $KWOK_VERSION"
		"$go" version
	} | sha256sum | cut -c1-12
)
root=${AGENT2ENV_CACHE_DIR:-/var/cache/agent2env}/kube
cache=$root/k8s-$KUBE_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION-$key
bin=$cache/bin

# finish marks this key used, prunes the others and prints the bin directory.
finish() {
	touch -c "$cache"
	cache_prune "$root" 'k8s-*' "${cache##*/}"
	echo "$bin"
}

tier=a
background=
if [ "${1:-}" = --background ]; then
	background=1
	shift
fi
case "${1:-a}" in
--dir)
	# A build in progress holds the lock: wait for it (a shared lock).
	if [ -z "$background" ] && [ -e "$cache/.lock" ]; then
		exec 9<"$cache/.lock"
		flock -s 9
	fi
	touch -c "$cache" 2>/dev/null || true # used
	echo "$bin"
	exit 0
	;;
a | b) tier=${1:-a} ;;
*)
	echo "usage: $0 [--background] [a|b] | --dir" >&2
	exit 2
	;;
esac

kube=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
if [ "$tier" = b ]; then
	kube+=(kubelet)
fi

mkdir -p "$bin"
# One build at a time per key: a second caller waits, then finds the files.
exec 9>"$cache/.lock"
flock 9

missing=()
for b in "${kube[@]}"; do
	[ -x "$bin/$b" ] || missing+=("$b")
done
[ -x "$bin/etcd" ] || missing+=(etcd)
[ -x "$bin/kwok" ] || missing+=(kwok)
if [ "$tier" = b ] && [ "$(cat "$bin/kube-router.version" 2>/dev/null)" != "$KUBE_ROUTER_VERSION" ]; then
	missing+=(kube-router)
fi
if ((${#missing[@]} == 0)); then
	finish
	exit 0
fi

build() {
	echo "kube-binaries: building ${missing[*]} (Kubernetes $KUBE_VERSION, etcd $ETCD_VERSION, kwok $KWOK_VERSION) into $bin" >&2
	start=$SECONDS
	tmp=$(mktemp -d "$cache/.build.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	export CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOTOOLCHAIN=local

	pkgs=()
	for b in "${missing[@]}"; do
		case $b in
		etcd)
			(cd "$etcdmod" && "$go" build -trimpath -ldflags "$etcd_ldflags" -o "$tmp/etcd" go.etcd.io/etcd/server/v3)
			;;
		kwok)
			(cd "$tmp" && GOBIN=$tmp "$go" install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION")
			;;
		kube-router)
			(cd "$tmp" && GOBIN=$tmp "$go" install -trimpath -ldflags "-s -w" \
				"github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$KUBE_ROUTER_VERSION")
			;;
		*) pkgs+=("k8s.io/kubernetes/cmd/$b") ;;
		esac
	done
	if ((${#pkgs[@]} > 0)); then
		# The release the binaries say they are (kubectl version, /version), and
		# the time of its tag as the build date, so that a rebuild gives the same
		# bytes. The module proxy does not know the commit.
		date=$(cd "$kubemod" && "$go" list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)
		minor=${KUBE_VERSION#v1.}
		minor=${minor%%.*}
		ldflags="-s -w"
		for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
			ldflags+=" -X $p.gitVersion=$KUBE_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
			ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=$date -X $p.gitCommit="
		done
		# One invocation for all of them: they share most packages.
		mkdir -p "$tmp/kube"
		(cd "$kubemod" && "$go" build -trimpath -ldflags "$ldflags" -o "$tmp/kube/" "${pkgs[@]}")
		mv "$tmp"/kube/* "$tmp/"
	fi
	for b in "${missing[@]}"; do
		mv "$tmp/$b" "$bin/$b"
	done
	if [[ " ${missing[*]} " == *" kube-router "* ]]; then
		echo "$KUBE_ROUTER_VERSION" >"$bin/kube-router.version"
	fi
	echo "kube-binaries: built ${missing[*]} in $((SECONDS - start))s" >&2
}

if [ -n "$background" ]; then
	# The child inherits descriptor 9, and with it the lock, which it holds
	# until it is done: --dir and other builds wait for it.
	echo "kube-binaries: building ${missing[*]} in the background; log: $cache/build.log" >&2
	(
		renice -n 19 -p "$BASHPID" >/dev/null
		build
		finish
	) </dev/null >"$cache/build.log" 2>&1 &
	exit 0
fi
build
finish
