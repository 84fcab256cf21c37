#!/usr/bin/env bash
# Checks and tests the Python SDK (make test-python): a virtualenv in
# sdk/python/.venv, made from the first Python >= 3.10 found and remade only
# when pyproject.toml or constraints.txt change; the SDK installed editable
# with its pinned dev tools; then ruff, mypy --strict (and the same on the
# repository's other Python, scripts/lint-python.sh), the unit tests with
# coverage >= 80 %, and the integration tests against $AGENT2ENV_BIN (default
# bin/agent2env), which need root (under CI a missing one is a failure:
# tests/integration/conftest.py reads CI as internal/testenv does).
set -euo pipefail
cd "$(dirname "$0")/../sdk/python"

usable() {
	"$1" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 10))' 2>/dev/null
}

python=""
for candidate in python3 python3.13 python3.12 python3.11 python3.10; do
	if command -v "$candidate" >/dev/null && usable "$candidate"; then
		python=$(command -v "$candidate")
		break
	fi
done
if [ -z "$python" ]; then
	echo "test-python: installing python3-venv (no Python >= 3.10 with venv found)" >&2
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3 python3-venv >/dev/null
	python=$(command -v python3)
	usable "$python" || { echo "test-python: $python is older than 3.10" >&2; exit 1; }
fi

stamp=$(cat pyproject.toml constraints.txt <("$python" -VV) <(pwd) | sha256sum | cut -c1-16)
venv=.venv
if [ "$(cat "$venv/.stamp" 2>/dev/null)" != "$stamp" ]; then
	echo "test-python: creating $PWD/$venv with $("$python" -V)" >&2
	rm -rf "$venv"
	"$python" -m venv "$venv"
	"$venv/bin/python" -m pip install --quiet --no-input --disable-pip-version-check \
		-c constraints.txt -e '.[dev]'
	echo "$stamp" >"$venv/.stamp"
fi
bin=$venv/bin

step() {
	local start=$SECONDS
	echo "test-python: $*" >&2
	"$@"
	echo "test-python: ($((SECONDS - start))s)" >&2
}

step "$bin/ruff" check --quiet .
step "$bin/ruff" format --check --quiet .
step "$bin/mypy"
step ../../scripts/lint-python.sh  # the repository's other Python
step "$bin/pytest" -q -m "not integration" --cov --cov-report=term --cov-fail-under=80 tests
export AGENT2ENV_BIN="${AGENT2ENV_BIN:-$(cd ../.. && pwd)/bin/agent2env}"
step "$bin/pytest" -q -m integration tests/integration
