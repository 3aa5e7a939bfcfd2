"""Issue 16 bar: 8 processes x 20 compiles into one cache (the same and different kernels, on the
reference and npu backends), three of them SIGKILLed in the middle of writing an entry, under a size
limit small enough that trimming runs while others read and write. Afterwards: every result was
right, every entry in the cache verifies, no temporary file is left and the limit holds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from tilecore.runtime import cache as C

sys.path.insert(0, os.path.dirname(__file__))
from test_plugin_support import REPO, clean_env  # noqa: E402

pytest.importorskip("tile_npu")

WORKER = r"""
import os, signal, sys
import numpy as np
import tilecore, tilecore.language as T

worker, compiles, die_at = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
if die_at:  # killed by SIGKILL in the middle of its die_at-th cache write (data written, not renamed)
    real_fsync, writes = os.fsync, [0]
    def fsync_then_die(fd):
        writes[0] += 1
        if writes[0] == die_at:
            os.kill(os.getpid(), signal.SIGKILL)
        real_fsync(fd)
    os.fsync = fsync_then_die


def make(scale):
    @T.prim_func
    def scaled(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(64):
                B[i] = A[i] * scale + 1.0
    return scaled


a = np.linspace(-1, 1, 64, dtype=np.float32)
for j in range(compiles):
    scale = float(j % 6) if j % 3 else float(10 + worker)  # shared kernels and this worker's own
    target = "npu" if j % 2 else "reference"
    kernel = tilecore.compile(make(scale), target=target, out_idx=[-1])
    got = kernel(a)
    if not np.allclose(got, a * scale + 1.0, rtol=1e-6):
        print(f"WRONG worker {worker} compile {j} scale {scale} on {target}", flush=True)
        sys.exit(3)
    tilecore.runtime.api.clear_memory_cache()  # every compile goes to the disk cache
print("ok", flush=True)
"""


@pytest.mark.slow
def test_concurrent_compiles_with_kills_leave_a_consistent_cache(tmp_path):
    limit_mb = 0.06
    env = clean_env(tmp_path, TILECORE_PLUGINS="npu", TILECORE_CACHE_MAX_MB=str(limit_mb))
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "plugins" / "tile-npu"), env["PYTHONPATH"]])
    script = tmp_path / "worker.py"
    script.write_text(textwrap.dedent(WORKER))
    die_at = {2: 2, 5: 1, 7: 2}  # worker -> the cache write during which it is killed
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(w), "20", str(die_at.get(w, 0))],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(8)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    for w, (p, (out, err)) in enumerate(zip(procs, outs)):
        if w in die_at:
            assert p.returncode == -signal.SIGKILL, (w, p.returncode, err)
        else:
            assert p.returncode == 0 and out.strip() == "ok", (w, p.returncode, out, err[-3000:])
    cache = C.DiskCache(env["TILECORE_CACHE_DIR"])
    secret = cache.secret()
    files = cache.managed_files()
    assert any(kind == "temp" for kind, _, _, _ in files)  # the killed workers left theirs behind
    for kind, _, _, path in files:
        if kind == "entry":
            C.decode_entry(open(path, "rb").read(), os.path.basename(path)[: -len(C.SUFFIX)], secret)
    # the next process to write cleans up after the dead ones and enforces the limit
    done = subprocess.run(
        [sys.executable, str(script), "99", "1", "0"], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.stdout.strip() == "ok", done.stderr[-3000:]
    files = cache.managed_files()
    assert not [path for kind, _, _, path in files if kind == "temp"]
    assert sum(size for _, _, size, _ in files) <= limit_mb * 1e6
    assert not [name for name in os.listdir(env["TILECORE_CACHE_DIR"]) if name.endswith(".tmp")]
