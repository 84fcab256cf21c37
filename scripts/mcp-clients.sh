#!/usr/bin/env bash
# Installs the stock MCP clients the end-to-end tests drive agent2env's MCP
# server with: the MCP Inspector CLI (npm, on a Node.js 22 that npm itself
# installs) and the official Python SDK, `mcp` (PyPI), in a venv. Everything
# goes under $AGENT2ENV_CACHE_DIR/mcp-clients (default /var/cache/agent2env),
# one directory per version, so a second run installs nothing. It writes
# clients.env there: the paths the tests read.
set -euo pipefail

NODE_VERSION=22.23.3      # the Inspector needs Node.js >= 22.7.5
INSPECTOR_VERSION=2.12.0  # @modelcontextprotocol/inspector
MCP_PY_VERSION=2.3.0      # mcp on PyPI

cache="${AGENT2ENV_CACHE_DIR:-/var/cache/agent2env}/mcp-clients"
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9

need() { # command, Debian package
	if ! command -v "$1" >/dev/null 2>&1; then
		sudo=""
		[ "$(id -u)" -eq 0 ] || sudo="sudo"
		echo "mcp-clients: installing $2" >&2
		$sudo apt-get update -qq
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$2" >/dev/null
	fi
}
need npm npm
need python3 python3

npm_install() { # prefix, package@version
	if [ ! -e "$1/.done" ]; then
		echo "mcp-clients: installing $2" >&2
		rm -rf "$1.partial"
		npm install --prefix "$1.partial" --no-audit --no-fund --no-update-notifier --loglevel=error "$2" >&2
		rm -rf "$1" && mv "$1.partial" "$1"
		touch "$1/.done"
	fi
}

node_dir="$cache/node-$NODE_VERSION"
npm_install "$node_dir" "node@$NODE_VERSION"
node_bin="$node_dir/node_modules/.bin"
export PATH="$node_bin:$PATH"
inspector_dir="$cache/inspector-$INSPECTOR_VERSION"
npm_install "$inspector_dir" "@modelcontextprotocol/inspector@$INSPECTOR_VERSION"

venv="$cache/python-mcp-$MCP_PY_VERSION"
if [ ! -e "$venv/.done" ]; then
	echo "mcp-clients: installing mcp $MCP_PY_VERSION" >&2
	rm -rf "$venv"
	if ! python3 -m venv "$venv" 2>/dev/null; then
		need_pkg=python3-venv
		sudo=""
		[ "$(id -u)" -eq 0 ] || sudo="sudo"
		$sudo apt-get update -qq
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$need_pkg" >/dev/null
		rm -rf "$venv"
		python3 -m venv "$venv"
	fi
	"$venv/bin/pip" install -q --disable-pip-version-check --no-input "mcp==$MCP_PY_VERSION" >&2
	touch "$venv/.done"
fi

cat >"$cache/clients.env.partial" <<ENV
NODE_BIN=$node_bin
INSPECTOR=$inspector_dir/node_modules/.bin/mcp-inspector
PYTHON=$venv/bin/python
ENV
mv "$cache/clients.env.partial" "$cache/clients.env"
