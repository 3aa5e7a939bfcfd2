#!/usr/bin/env bash
# Idempotent set-up of a fresh machine: Debian packages, the .venv virtual environment,
# tilecore + every plugin + the conformance suite (editable), and the test tools.
# Sourced or run by scripts/main.sh and scripts/test.sh; re-running is cheap.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

# Debian packages: lld-22 and rocm-device-libs link AMDGPU code objects (tile-rocm compile tier).
missing=()
for pkg in lld-22 rocm-device-libs; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  echo "setup: apt-get install ${missing[*]}"
  $sudo apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}" >/dev/null
fi

python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv

# Our distributions, in dependency order (core first).
dists=(.)
for d in plugins/*/ conformance/; do
  [ -f "$d/pyproject.toml" ] && dists+=("${d%/}")
done
stamp=.venv/.tilecore-setup
# C sources built at install time (tile-cuda's _fastcall.c) count too: a changed one is rebuilt
want=$(cat requirements-dev.txt "${dists[@]/%//pyproject.toml}" plugins/*/tile_*/*.c 2>/dev/null | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: installing into .venv (${dists[*]})"
  .venv/bin/python -m pip install -q --upgrade pip setuptools wheel
  .venv/bin/python -m pip install -q -r requirements-dev.txt
  editable=()
  for d in "${dists[@]}"; do editable+=(-e "$d"); done
  .venv/bin/python -m pip install -q --no-build-isolation "${editable[@]}"
  echo "$want" > "$stamp"
fi
