#!/usr/bin/env bash
# The whole test suite: set up, then run the core's, every plugin's and the conformance suite's tests.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/setup.sh"
cd "$root"
# the folders with the longest files (certification runs) first: xdist hands out files in this
# order, so the short ones fill in at the end instead of one long file running alone
paths=()
for d in conformance/tests plugins/*/tests; do [ -d "$d" ] && paths+=("$d"); done
paths+=(tests)
# one pytest worker per core (at most 4: each loads TVM and torch), a test file per worker at a time
# (module fixtures are shared within a file)
jobs=$(nproc 2>/dev/null || echo 2)
jobs=$(( jobs > 4 ? 4 : jobs ))
exec .venv/bin/python -m pytest -q -p no:cacheprovider -n "$jobs" --dist loadfile "${paths[@]}" "$@"
