"""Issue 16 on tile-cpu: a support object planted in the cache is never linked (its constructor would
run in the user's process), kernel libraries load from a private copy of the verified entry, and the
cache key follows tile-cpu's own source and toolchain."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tilecore.runtime import cache as C

ATOMIC_KERNEL = """
import sys
import numpy as np
import tilecore, tilecore.language as T

@T.prim_func
def count(A: T.Tensor((64,), "int32"), C: T.Tensor((1,), "int32")):
    with T.Kernel(4) as bx:
        for i in T.Parallel(16):
            T.atomic_add(C[0], A[bx * 16 + i])

kernel = tilecore.compile(count, target="cpu")
c = np.zeros(1, np.int32)
kernel(np.arange(64, dtype=np.int32), c)
assert int(c[0]) == 2016, c
import tile_cpu.build as build
print(build.library_file(kernel.artifact.blobs["kernel.so"]))
"""

EVIL_C = """
#include <stdio.h>
__attribute__((constructor)) static void planted(void) {
    FILE *f = fopen(MARKER, "w");
    if (f) { fputs("owned", f); fclose(f); }
}
"""


def _run(env, code):
    """Run `code` from a file in a fresh process (the frontend reads kernels from their file)."""
    script = os.path.join(env["TILECORE_CACHE_DIR"] + "-scripts", "kernel.py")
    os.makedirs(os.path.dirname(script), exist_ok=True)
    with open(script, "w") as f:
        f.write(textwrap.dedent(code))
    return subprocess.run([sys.executable, script], env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture
def cpu_env(tmp_path):
    env = dict(os.environ, TILECORE_CACHE_DIR=str(tmp_path / "cache"), TILECORE_PLUGINS="cpu")
    env.pop("TILECORE_CACHE", None)
    return env


def test_planted_support_object_is_never_linked(tmp_path, cpu_env):
    first = _run(cpu_env, ATOMIC_KERNEL)
    assert first.returncode == 0, first.stderr
    (obj,) = [p for p in (tmp_path / "cache" / "native" / "cpu-support").iterdir() if p.suffix == ".o"]
    # someone who can write the cache swaps in an object whose constructor runs at load time
    marker = tmp_path / "owned.txt"
    evil = tmp_path / "evil.c"
    evil.write_text(EVIL_C)
    subprocess.run(["cc", "-fPIC", "-c", f'-DMARKER="{marker}"', str(evil), "-o", str(obj)], check=True)
    for entry in C.DiskCache(str(tmp_path / "cache")).entries():
        os.unlink(entry[2])  # force a new link of the kernel library
    second = _run(cpu_env, ATOMIC_KERNEL)
    assert second.returncode == 0, second.stderr
    assert "fails its check; rebuilding it" in second.stderr
    assert not marker.exists()
    assert b"planted" not in obj.read_bytes()  # rebuilt from support.c


def test_kernel_library_loads_from_a_private_copy(cpu_env):
    proc = _run(cpu_env, ATOMIC_KERNEL)
    assert proc.returncode == 0, proc.stderr
    path = proc.stdout.strip().splitlines()[-1]
    assert not path.startswith(cpu_env["TILECORE_CACHE_DIR"])
    assert not os.path.exists(path)  # the process's private folder is gone with it
    assert os.path.basename(os.path.dirname(path)).startswith("tilecore-cpu-libs-")


def test_cache_key_covers_tile_cpu_source_and_toolchain():
    from tile_cpu import plugin
    from tilecore.plugin.registry import get_registry
    from tilecore.runtime.api import _code_fingerprint

    backend = get_registry().get("cpu")
    assert backend.toolchain_fingerprint is plugin.toolchain_fingerprint
    fingerprint = plugin.toolchain_fingerprint()
    assert "libtvm.so" in fingerprint and "libtvm_runtime.so" in fingerprint
    digest = _code_fingerprint(backend)
    assert len(digest) == 64 and digest == _code_fingerprint(backend)


def test_library_folder_of_a_killed_process_is_removed_by_the_next(cpu_env, tmp_path):
    """A process killed with SIGKILL runs no exit handler: its private folder of kernel libraries
    stayed in the temp folder for good. The next process that loads a kernel removes it."""
    temp = tmp_path / "tmp"
    temp.mkdir(mode=0o700)
    cpu_env["TMPDIR"] = str(temp)
    killed = _run(
        cpu_env, ATOMIC_KERNEL + "sys.stdout.flush()\nimport os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"
    )
    assert killed.returncode == -9, killed.stderr
    orphan = os.path.dirname(killed.stdout.strip().splitlines()[-1])
    assert os.path.isfile(os.path.join(orphan, os.listdir(orphan)[0]))  # left behind
    done = _run(cpu_env, ATOMIC_KERNEL)
    assert done.returncode == 0, done.stderr
    assert not os.path.exists(orphan)
    assert not [name for name in os.listdir(temp) if name.startswith("tilecore-cpu-libs-")]


def test_grid_past_int32_blocks_is_refused_never_wrapped():
    """Finding 11: a static 65536 x 65536 grid leaked TVM's "Literal value 4294967296 exceeds range
    of int32"; the same grid from dynamic dimensions wrapped to 0 blocks and returned untouched
    outputs with no error. The cpu numbers blocks with one int32 (the flattened grid)."""
    import numpy as np

    import tilecore
    import tilecore.language as T
    from tilecore.diagnostics import TileCompileError, TileRuntimeError

    @T.prim_func
    def static_grid(A: T.Tensor((16,), "int32"), C: T.Tensor((1,), "int32")):
        with T.Kernel(65536, 65536) as (bx, by):
            if bx + by == 0:
                C[0] = A[0] + 7

    with pytest.raises(
        TileCompileError,
        match=r"the grid \(65536, 65536\) has 4294967296 blocks, more than "
        r"backend cpu can number \(2147483647",
    ) as info:
        tilecore.compile(static_grid, target="cpu")
    assert "T.Kernel(65536, 65536)" in str(info.value) and "Literal value" not in str(info.value)

    M, N = T.dynamic("M"), T.dynamic("N")

    @T.prim_func
    def dynamic_grid(A: T.Tensor((M,), "int32"), B: T.Tensor((N,), "int32"), C: T.Tensor((1,), "int32")):
        with T.Kernel(M, N) as (bx, by):
            if bx + by == 0:
                C[0] = A[0] + B[0] + 7

    kernel = tilecore.compile(dynamic_grid, target="cpu")
    c = np.zeros(1, np.int32)
    kernel(np.ones(300, np.int32), np.ones(200, np.int32), c)
    assert c[0] == 9
    c[0] = 0
    with pytest.raises(
        TileRuntimeError,
        match=r"test_cpu_trust.py:\d+:\d+: the grid of this T.Kernel has more than "
        r"2147483647 blocks",
    ):
        kernel(np.ones(65536, np.int32), np.ones(65536, np.int32), c)
    assert c[0] == 0
