#!/usr/bin/env bash
# Installs the system packages agent2env needs to run sandboxes and build
# its images: an OCI runtime, mmdebstrap, and the tools the tests use
# (tmux: the terminal tests drive the CLI under a real terminal;
# postgresql: the PostgreSQL store's tests start a server of their own, on
# a private socket, from its binaries; chromium: the web console's browser
# tests).
# Idempotent: installs only what is missing.
#
#   scripts/deps.sh [package...]   those packages instead (make kube-node)
set -euo pipefail

packages=(runc crun mmdebstrap e2fsprogs busybox-static iproute2 ca-certificates util-linux tmux postgresql chromium)
if (($# > 0)); then
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
