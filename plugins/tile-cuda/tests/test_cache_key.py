"""Issue 16, finding 9: the cache key follows the CUDA compiler that makes the cubins. nvcc on PATH
is often a wrapper script (`exec /usr/local/cuda-13.0/bin/nvcc "$@"`) whose bytes, size and date do
not change when the toolkit behind it does, so for a script the key holds what nvcc itself reports;
a real nvcc binary is fingerprinted by its files (no process started on a cache hit)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tile_cuda import toolchain

pytestmark = pytest.mark.skipif(toolchain.find_nvcc() is None, reason="needs nvcc (compile tier)")

FINGERPRINT = (
    "from tilecore.plugin.registry import get_registry\nprint(get_registry().get('cuda').toolchain_fingerprint())\n"
)


def test_fingerprint_names_the_toolkit_behind_a_wrapper_script(tmp_path):
    real = toolchain.find_nvcc()
    build = subprocess.run([real, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    home = tmp_path / "cuda-wrapper"
    (home / "bin").mkdir(parents=True)
    wrapper = home / "bin" / "nvcc"
    wrapper.write_text(f'#!/bin/sh\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    env = dict(os.environ, CUDA_HOME=str(home), TILECORE_PLUGINS="cuda")
    out = subprocess.run([sys.executable, "-c", FINGERPRINT], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert build in out.stdout  # e.g. "Build cuda_13.0.r13.0/compiler.36424714_0"
    assert "release" in out.stdout


def test_a_real_nvcc_binary_is_fingerprinted_without_running_it(tmp_path, monkeypatch):
    """A compiled nvcc: its file, its ptxas and the toolkit's version.json, by stat; replacing any of
    them changes the key."""
    home = tmp_path / "cuda"
    (home / "bin").mkdir(parents=True)
    nvcc = home / "bin" / "nvcc"
    nvcc.write_bytes(b"\x7fELF" + b"\0" * 60)
    nvcc.chmod(0o755)
    (home / "bin" / "ptxas").write_bytes(b"\x7fELF")
    (home / "version.json").write_text('{"cuda": {"version": "13.0.0"}}')
    monkeypatch.setattr(toolchain, "find_nvcc", lambda: str(nvcc))
    ran = []
    monkeypatch.setattr(toolchain, "nvcc_identity", lambda: ran.append(1) or "never")
    before = toolchain.compiler_fingerprint()
    assert not ran and str(nvcc) in before and "version.json" in before
    (home / "version.json").write_text('{"cuda": {"version": "13.1.0"}}  ')
    assert toolchain.compiler_fingerprint() != before
