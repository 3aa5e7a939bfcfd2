#!/usr/bin/env bash
# The main job: set up, then run every example kernel on the default backend and check it
# against the reference interpreter and a numpy formula.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/setup.sh"
cd "$root"
.venv/bin/tile backends
exec .venv/bin/python examples/run_all.py "$@"
