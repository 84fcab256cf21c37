#!/usr/bin/env bash
# Prints the path of a Python interpreter that has the stock client libraries
# the Go tests drive agent2env with (scripts/peers-requirements.txt), making
# its virtualenv under $AGENT2ENV_CACHE_DIR/peers/<hash of the list> first
# when it is missing. Used by make test; idempotent and offline once made.
set -euo pipefail
cd "$(dirname "$0")"
cache="${AGENT2ENV_CACHE_DIR:-/var/cache/agent2env}/peers"
python=$(command -v python3)
stamp=$(cat peers-requirements.txt <("$python" -VV) | sha256sum | cut -c1-16)
venv="$cache/$stamp"
if [ ! -x "$venv/bin/python" ] || [ ! -f "$venv/.complete" ]; then
	echo "test-peers: creating $venv" >&2
	rm -rf "$venv"
	mkdir -p "$cache"
	"$python" -m venv "$venv"
	"$venv/bin/python" -m pip install --quiet --no-input --disable-pip-version-check -r peers-requirements.txt >&2
	touch "$venv/.complete"
fi
echo "$venv/bin/python"
