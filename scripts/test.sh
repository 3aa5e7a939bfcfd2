#!/usr/bin/env bash
# The whole test suite: set up, then run the core's, every plugin's and the conformance suite's tests.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/setup.sh"
cd "$root"
paths=(tests)
for d in plugins/*/tests conformance/tests; do [ -d "$d" ] && paths+=("$d"); done
# one pytest worker per core (at most 4: each loads TVM and torch), a test file per worker at a time
# (module fixtures are shared within a file)
jobs=$(nproc 2>/dev/null || echo 2)
jobs=$(( jobs > 4 ? 4 : jobs ))
exec .venv/bin/python -m pytest -q -p no:cacheprovider -n "$jobs" --dist loadfile "${paths[@]}" "$@"
