"""GEMM builds compiled on a machine without a GPU and timed on one that needs no TVM: the build
step runs the tile-cuda plugin (TVM, nvcc) here and pickles each artifact (CUDA source, cubin,
launch facts); the run step loads them with the plugin's launcher alone (pure Python + the CUDA
driver), checks each against torch on fresh random data and times it next to cuBLAS in the same
process. A lent GPU host then needs no staged apache-tvm wheel: one call, no install.

    python benchmarks/cuda_prebuilt.py build DIR [TAG [REGEX]]   # here: MATRIX's builds (names matching REGEX) into DIR
    python benchmarks/cuda_prebuilt.py run DIR [ROUNDS [GLOB]]    # on the GPU: one JSON line per build and round

TAG names the tile-cuda the build used (e.g. "new", or "old" with an older tree's plugin first on
PYTHONPATH), so one DIR can hold both for an A/B in one process.
"""

from __future__ import annotations

import glob
import json
import os
import pickle
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "plugins", "tile-cuda", "tests"))

QUICKSTART = dict(bm=128, bn=128, bk=32, stages=3, threads=128, swizzle_panel=8)  # TileLang's quickstart
BEST = dict(bm=128, bn=256, bk=64, stages=3, threads=256, swizzle_panel=8)  # issue 12's best config
WS, MC = {"warp_specialize": True}, {"warp_specialize": True, "tma_multicast": True}
TWO = {"warp_specialize": True, "ws_blocks_per_sm": 2}

# (name, n, shape, dtype, options)
MATRIX = [
    *(
        (f"quickstart_{v}", n, QUICKSTART, "float16", opts)
        for n in (8192, 4096)
        for v, opts in (
            ("default", {}),
            ("ws", WS),
            ("ws_mc", MC),
            ("ws_2sm", TWO),
            ("ws_2sm_mc", {**TWO, "tma_multicast": True}),
        )
    ),
    ("quickstart6_ws", 8192, {**QUICKSTART, "stages": 6}, "float16", WS),
    ("quickstart6_ws_mc", 8192, {**QUICKSTART, "stages": 6}, "float16", MC),
    ("quickstart4_ws_mc", 8192, {**QUICKSTART, "stages": 4}, "float16", MC),
    *((f"best_{dt}", n, BEST, dt, {}) for n in (4096, 8192) for dt in ("float16", "bfloat16")),
    *((f"best_{dt}_mc", n, BEST, dt, {"tma_multicast": True}) for n in (4096, 8192) for dt in ("float16",)),
    ("ragged_default", 4000, {**BEST, "predicated": True}, "float16", {}),
]


def build(out_dir: str, tag: str, pattern: str = "") -> None:
    """Compile MATRIX's builds whose name matches `pattern` for sm_90a into out_dir/<tag>-<name>-<n>.pkl."""
    import re

    import kernels as K

    import tilecore

    os.makedirs(out_dir, exist_ok=True)
    for name, n, shape, dtype, opts in MATRIX:
        if not re.search(pattern, name):
            continue
        t0 = time.perf_counter()
        func = K.gemm_kernel(n, n, n, dtype=dtype, **shape)
        try:
            art = tilecore.compile(func, target="cuda:sm_90a", **opts).artifact
        except Exception as err:  # report and go on: the run step skips what is missing
            print(f"{tag} {name} {n}: {type(err).__name__}: {str(err)[:300]}", flush=True)
            continue
        entry = {"tag": tag, "name": name, "n": n, "shape": shape, "dtype": dtype, "options": opts}
        with open(os.path.join(out_dir, f"{tag}-{name}-{n}.pkl"), "wb") as f:
            pickle.dump((entry, art), f)
        notes = [x for x in art.meta.get("notes", ()) if "multicast" in x or "warp-special" in x or "per SM" in x]
        print(f"{tag} {name} {n}: {time.perf_counter() - t0:.1f} s {notes}", flush=True)


def run(out_dir: str, rounds: int, pattern: str = "*") -> None:
    """Check and time the pickled builds whose file name matches `pattern`, rounds times, cuBLAS
    timed in each round."""
    import torch
    from cuda_bench import bench

    from tile_cuda import plugin

    builds = []
    for path in sorted(glob.glob(os.path.join(out_dir, pattern + ".pkl"))):
        with open(path, "rb") as f:
            entry, art = pickle.load(f)
        builds.append((entry, art, plugin.tilecore_launcher(backend=plugin.make_backend(), artifact=art)))
    env = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "builds": len(builds)}
    print(json.dumps(env), flush=True)
    for r in range(rounds):
        for key in sorted({(e["n"], e["dtype"]) for e, _, _ in builds}):
            n, dt = key
            a, b = (torch.randn(n, n, device="cuda", dtype=getattr(torch, dt)) for _ in range(2))
            ref = a.float() @ b.float()
            t_ref = bench(lambda: torch.matmul(a, b), warmup=5, iters=20)
            for entry, art, launch in builds:
                if (entry["n"], entry["dtype"]) != key:
                    continue
                c = torch.full((n, n), float("nan"), device="cuda", dtype=getattr(torch, dt))
                row = dict(entry, round=r, clusters="__cluster_dims__" in art.source)
                try:
                    launch([a, b, c], {})
                    torch.cuda.synchronize()
                    row["rel_err"] = err = ((c.float() - ref).norm() / ref.norm()).item()
                    if err < 1e-2:  # timed only when right
                        row["ms"] = t = bench(lambda: launch([a, b, c], {}), warmup=5, iters=20)
                        row["vs_cublas"] = t_ref / t
                        row["tflops"] = 2 * n**3 / t / 1e9
                except Exception as err:  # one failing build must not hide the others' figures
                    row["error"] = repr(err)[-300:]
                row["cublas_ms"] = t_ref
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    mode, directory, *rest = sys.argv[1:]
    if mode == "build":
        build(directory, *rest)
    else:
        run(directory, int(rest[0]) if rest else 1, *rest[1:])
