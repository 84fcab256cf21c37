#!/usr/bin/env bash
# Lints the repository's Python outside sdk/python (the kernel driver, the
# bench and end-to-end drivers, the example tasks) with the SDK's pinned
# tools from sdk/python/.venv, which scripts/test-python.sh makes and runs
# this from: ruff check and ruff format --check on every tracked *.py
# (ruff.toml), mypy --strict on the files mypy.ini lists. With
# AGENT2ENV_PYTHON (scripts/test-peers.sh) mypy also sees the stock SDKs
# the bench drivers import.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=sdk/python/.venv/bin
[ -x "$bin/ruff" ] || { echo "lint-python: no $bin/ruff: run scripts/test-python.sh first" >&2; exit 1; }
mapfile -t files < <(git ls-files '*.py' ':!:sdk/python/**')
"$bin/ruff" check --quiet "${files[@]}"
"$bin/ruff" format --check --quiet "${files[@]}"
"$bin/mypy" ${AGENT2ENV_PYTHON:+--python-executable "$AGENT2ENV_PYTHON"}
