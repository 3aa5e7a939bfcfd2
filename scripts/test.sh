#!/usr/bin/env bash
# The whole test suite: set up, then run the core's, every plugin's and the conformance suite's tests.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/setup.sh"
cd "$root"
paths=(tests)
for d in plugins/*/tests conformance/tests; do [ -d "$d" ] && paths+=("$d"); done
exec .venv/bin/python -m pytest -q -p no:cacheprovider "${paths[@]}" "$@"
