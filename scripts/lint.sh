#!/usr/bin/env bash
# Lint and type checks (configuration: [tool.ruff] and [tool.mypy] in pyproject.toml).
# Runs every check and fails when any fails; expects the venv of scripts/setup.sh.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bin=${VENV_BIN:-.venv/bin}
status=0
"$bin/ruff" check . || status=1
"$bin/ruff" format --check . || status=1
"$bin/mypy" || status=1
exit $status
