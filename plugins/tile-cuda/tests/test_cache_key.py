"""Issue 16, finding 9: the cache key follows the CUDA compiler that makes the cubins. nvcc on PATH
is often a wrapper script (`exec /usr/local/cuda-13.0/bin/nvcc "$@"`) whose bytes, size and date do
not change when the toolkit behind it does, so the key holds what nvcc itself reports."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tile_cuda import toolchain

pytestmark = pytest.mark.skipif(toolchain.find_nvcc() is None, reason="needs nvcc (compile tier)")

FINGERPRINT = ("from tilecore.plugin.registry import get_registry\n"
               "print(get_registry().get('cuda').toolchain_fingerprint())\n")


def test_fingerprint_names_the_toolkit_behind_a_wrapper_script(tmp_path):
    real = toolchain.find_nvcc()
    build = subprocess.run([real, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    home = tmp_path / "cuda-wrapper"
    (home / "bin").mkdir(parents=True)
    wrapper = home / "bin" / "nvcc"
    wrapper.write_text(f'#!/bin/sh\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    env = dict(os.environ, CUDA_HOME=str(home), TILECORE_PLUGINS="cuda")
    out = subprocess.run([sys.executable, "-c", FINGERPRINT], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert build in out.stdout  # e.g. "Build cuda_13.0.r13.0/compiler.36424714_0"
    assert "release" in out.stdout
