"""examples/gemm.py's matmul at a size its tiles do not divide (partial edge tiles) vs numpy.

    python benchmarks/cpu_gemm_ragged.py [--n 2000] [--tiles 128 128 64] [--threads 1]
        [--repeat 7] [--clock cpu|wall]

fp32, n^3 with bm x bn x bk tiles (2000 = 15 x 128 + 80: every edge tile is partial).
Checks the result against float64 first, then times tilecore and numpy (OpenBLAS)
alternately in this process (same thread count for TVM's pool and OpenBLAS, a pause
before each call so that neither library's spinning workers take the other's core) and
prints one JSON line: medians, ratio numpy / tilecore (higher is better), best-of ratio,
and how tile-cpu lowered the kernel (one whole GEMM or block by block).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("--n", type=int, default=2000)
p.add_argument("--tiles", type=int, nargs=3, default=(128, 128, 64))
p.add_argument("--threads", type=int, default=1)
p.add_argument("--repeat", type=int, default=7)
p.add_argument("--clock", choices=("wall", "cpu"), default="cpu")
ARGS = p.parse_args()
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TVM_NUM_THREADS"):
    os.environ[var] = str(ARGS.threads)

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
from gemm import matmul  # noqa: E402

from tilecore.ir import nodes as N  # noqa: E402
from tilecore.ir.visitor import walk_stmts  # noqa: E402
from tilecore.lowering.whole_gemm import match  # noqa: E402
from tilecore.runtime.api import lower  # noqa: E402

CLOCK = time.process_time if ARGS.clock == "cpu" else time.perf_counter
PAUSE_S = 0.3


def timed(fn):
    t = CLOCK()
    fn()
    return CLOCK() - t


def main():
    n, (bm, bn, bk) = ARGS.n, ARGS.tiles
    args = (n, n, n, bm, bn, bk)
    opts = {"dtype": "float32", "accum": "float32", "num_stages": 3}
    lowered, _ = lower(matmul.prim_func(*args, **opts), target="cpu")
    grid = next(st for st in walk_stmts(lowered.body) if isinstance(st, N.Kernel))
    t0 = time.perf_counter()
    kernel = matmul(*args, **opts)
    compile_s = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    want = a.astype(np.float64) @ b
    err = float(np.max(np.abs(kernel(a, b) - want)) / np.max(np.abs(want)))
    assert err < 1e-5, f"wrong result: {err}"
    a @ b  # warm both
    tt, nt = [], []
    for _ in range(ARGS.repeat):  # alternately, so that other jobs' noise hits both
        time.sleep(PAUSE_S)
        tt.append(timed(lambda: kernel(a, b)))
        time.sleep(PAUSE_S)
        nt.append(timed(lambda: a @ b))
    med_t, med_n = float(np.median(tt)), float(np.median(nt))
    record = {
        "kernel": f"gemm fp32 {n}^3 tiles {bm}x{bn}x{bk}",
        "lowering": "whole grid" if match(grid) is not None else "block by block",
        "threads": ARGS.threads,
        "clock": ARGS.clock,
        "tilecore_ms": round(med_t * 1e3, 1),
        "numpy_ms": round(med_n * 1e3, 1),
        "ratio": round(med_n / med_t, 3),
        "best_ratio": round(min(nt) / min(tt), 3),
        "max_rel_err": err,
        "compile_s": round(compile_s, 1),
        "load_avg": os.getloadavg()[0],
    }
    print(json.dumps(record))


if __name__ == "__main__":
    main()
