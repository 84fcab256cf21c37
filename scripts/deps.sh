#!/usr/bin/env bash
# Installs the system packages agent2env needs to run sandboxes and build
# its images: an OCI runtime, mmdebstrap and their tools (make run). With
# --tests, also the tools only the tests use (make test): tmux (the
# terminal tests drive the CLI under a real terminal), postgresql (the
# PostgreSQL store's tests start a server of their own, on a private
# socket, from its binaries), chromium (the web console's browser
# tests), the assemblers and the user-mode qemu that check the agent's
# OOM trampoline for both architectures — none of which running the
# daemon needs.
# Idempotent: installs only what is missing.
#
#   scripts/deps.sh [--tests]      the daemon's packages [and the tests']
#   scripts/deps.sh package...     those packages instead (make kube-node)
set -euo pipefail

packages=(runc mmdebstrap e2fsprogs busybox-static iproute2 ca-certificates util-linux)
if [ "${1:-}" = "--tests" ]; then
	packages+=(tmux postgresql chromium binutils-x86-64-linux-gnu binutils-aarch64-linux-gnu qemu-user)
elif (($# > 0)); then
	packages=("$@")
fi
missing=()
for pkg in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$pkg")
	fi
done
if ((${#missing[@]} == 0)); then
	exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
	sudo="sudo"
fi
echo "deps: installing ${missing[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
