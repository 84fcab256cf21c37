#!/usr/bin/env bash
# Installs the stock clients the Go tests drive agent2env with, and prints
# the path of the Python interpreter that has the Python ones:
#   - Python packages pinned in scripts/peers-requirements.txt (the OpenAI,
#     Anthropic and Google GenAI SDKs for the LLM proxy, the official MCP
#     SDK `mcp`, pytest), in one virtualenv;
#   - the MCP Inspector CLI and the OpenSandbox JS SDK (npm), on a Node.js
#     that npm itself installs.
# Everything goes under $AGENT2ENV_CACHE_DIR/peers (default
# /var/cache/agent2env), keyed by versions: the venv by a hash of the
# requirements and the interpreter, Node and the Inspector by theirs, so a
# second run installs nothing and runs offline. It writes clients.env
# there (NODE_BIN, INSPECTOR, PYTHON, OPENSANDBOX_JS: the node_modules
# holding @alibaba-group/opensandbox), the paths the end-to-end tests read. make test runs it (AGENT2ENV_PYTHON=$(scripts/test-peers.sh));
# make mcp-clients too. With --env it prints the path of its clients-KEY.env
# instead (below). Each run marks what it installed used and prunes the
# rest of $AGENT2ENV_CACHE_DIR/peers (other versions' venvs and prefixes,
# other checkouts' clients-KEY.env), unused for an hour
# (scripts/cache-prune.sh); scripts/web.sh marks its Node.js used too.
set -euo pipefail
cd "$(dirname "$0")"
# shellcheck source-path=SCRIPTDIR source=cache-prune.sh
. ./cache-prune.sh

NODE_VERSION=22.23.3      # the Inspector needs Node.js >= 22.7.5
INSPECTOR_VERSION=2.12.0  # @modelcontextprotocol/inspector
OPENSANDBOX_JS_VERSION=0.1.11  # @alibaba-group/opensandbox
# E2B's JS SDKs (e2b, @e2b/code-interpreter): the newest and the oldest
# the E2B-compatible API supports (the oldest code interpreter needs e2b
# >= 2.28, so it has a prefix of its own).
E2B_JS="e2b@2.51.0 @e2b/code-interpreter@2.8.0"
E2B_JS_OLDEST="e2b@2.7.0"
E2B_CI_JS_OLDEST="e2b@2.28.0 @e2b/code-interpreter@2.7.0"

cache="${AGENT2ENV_CACHE_DIR:-/var/cache/agent2env}/peers"
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
apt_install() { # Debian package
	echo "test-peers: installing $1" >&2
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$1" >/dev/null
}
command -v npm >/dev/null 2>&1 || apt_install npm
command -v python3 >/dev/null 2>&1 || apt_install python3

# Python: one venv for every Python client.
python=$(command -v python3)
stamp=$(cat peers-requirements.txt <("$python" -VV) | sha256sum | cut -c1-16)
venv="$cache/$stamp"
if [ ! -x "$venv/bin/python" ] || [ ! -f "$venv/.complete" ]; then
	echo "test-peers: creating $venv" >&2
	rm -rf "$venv"
	if ! "$python" -m venv "$venv" 2>/dev/null; then
		apt_install python3-venv
		rm -rf "$venv"
		"$python" -m venv "$venv"
	fi
	"$venv/bin/python" -m pip install --quiet --no-input --disable-pip-version-check -r peers-requirements.txt >&2
	touch "$venv/.complete"
fi

# E2B's oldest supported Python SDKs, each in a venv of its own (the
# oldest code interpreter needs an e2b newer than the oldest e2b).
e2b_venv() { # package==version...
	local dir
	dir="$cache/py-$( (echo "$*"; "$python" -VV) | sha256sum | cut -c1-16)"
	if [ ! -f "$dir/.complete" ]; then
		echo "test-peers: creating $dir for $*" >&2
		rm -rf "$dir"
		"$python" -m venv "$dir"
		"$dir/bin/python" -m pip install --quiet --no-input --disable-pip-version-check "$@" >&2
		touch "$dir/.complete"
	fi
	echo "$dir/bin/python"
}
python_e2b_oldest=$(e2b_venv e2b==2.7.0)
python_e2b_ci_oldest=$(e2b_venv e2b-code-interpreter==2.9.0 e2b==2.26.0)

# Node.js and the MCP Inspector, each by its version.
npm_install() { # prefix, package@version...
	if [ ! -e "$1/.done" ]; then
		echo "test-peers: installing ${*:2}" >&2
		rm -rf "$1.partial"
		npm install --prefix "$1.partial" --no-audit --no-fund --no-update-notifier --loglevel=error "${@:2}" >&2
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
opensandbox_js_dir="$cache/opensandbox-js-$OPENSANDBOX_JS_VERSION"
npm_install "$opensandbox_js_dir" "@alibaba-group/opensandbox@$OPENSANDBOX_JS_VERSION"
npm_prefix() { # package@version... -> a prefix keyed by them
	echo "$cache/npm-$(echo "$*" | sha256sum | cut -c1-16)"
}
# shellcheck disable=SC2086 # the lists split into packages
{
	e2b_js=$(npm_prefix $E2B_JS) && npm_install "$e2b_js" $E2B_JS
	e2b_js_oldest=$(npm_prefix $E2B_JS_OLDEST) && npm_install "$e2b_js_oldest" $E2B_JS_OLDEST
	e2b_ci_js_oldest=$(npm_prefix $E2B_CI_JS_OLDEST) && npm_install "$e2b_ci_js_oldest" $E2B_CI_JS_OLDEST
}

# clients.env is the last run's, whatever checkout ran it; clients-KEY.env
# is this script's own (KEY: a hash of it, its requirements and the
# interpreter), which `--env` prints and make test passes to the tests as
# AGENT2ENV_CLIENTS, so that checkouts of other versions on one machine
# never read each other's.
key=$(cat "$(basename "$0")" peers-requirements.txt <("$python" -VV) | sha256sum | cut -c1-16)
cat >"$cache/clients.env.partial" <<ENV
NODE_BIN=$node_bin
INSPECTOR=$inspector_dir/node_modules/.bin/mcp-inspector
PYTHON=$venv/bin/python
OPENSANDBOX_JS=$opensandbox_js_dir/node_modules
E2B_JS=$e2b_js/node_modules
E2B_JS_OLDEST=$e2b_js_oldest/node_modules
E2B_CI_JS_OLDEST=$e2b_ci_js_oldest/node_modules
PYTHON_E2B_OLDEST=$python_e2b_oldest
PYTHON_E2B_CI_OLDEST=$python_e2b_ci_oldest
ENV
cp "$cache/clients.env.partial" "$cache/clients-$key.env"
mv "$cache/clients.env.partial" "$cache/clients.env"
used=("$venv" "${python_e2b_oldest%/bin/python}" "${python_e2b_ci_oldest%/bin/python}" "$node_dir" "$inspector_dir"
	"$opensandbox_js_dir" "$e2b_js" "$e2b_js_oldest" "$e2b_ci_js_oldest" "$cache/clients-$key.env" "$cache/clients.env")
touch -c "${used[@]}"
cache_prune "$cache" '*' "${used[@]##*/}"
if [ "${1:-}" = "--env" ]; then
	echo "$cache/clients-$key.env"
else
	echo "$venv/bin/python"
fi
