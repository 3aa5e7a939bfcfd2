"""One attention or GEMM configuration on an NVIDIA GPU, compiled with tile-cuda's warp-specialized
pipeline (option warp_specialize=True, "ws") and as the default build ("base"): each checked against
torch on fresh random data, then timed (with "t"), with cuDNN SDPA / cuBLAS in the same process.
Prints one JSON line. A deadlock would show as the caller's timeout, so run each configuration in its
own process (benchmarks/results/h200-session7/README.md).

    python benchmarks/cuda_ws_compare.py attn CAUSAL BM BN STAGES SEQ BATCH HEADS DTYPE [t|ws|base|tma|defer|default|mc]
    python benchmarks/cuda_ws_compare.py gemm N BM BN BK STAGES THREADS [t|tma|persist|default|per_sm|mc] [DTYPE]

With "ws" or "base" only that build runs, once (for a profiler); with "t" both are timed. With "tma"
the warp-specialized build is timed with TMA loads ("ws_tma", option tma's default) and with the
producer's cp.async loops ("ws_cp_async", tma=False), next to the build without warp specialization
("no_ws") and cuBLAS / cuDNN. With "defer" (attention) the warp-specialized build is timed with and
without option defer_gemm (tile_cuda/ws_deferred.py). With "persist" (gemm) the warp-specialized build
is timed with one block per tile ("ws") and persistent ("persistent", option persistent=True: one block
per SM looping over the tiles, tile_cuda/persistent.py), each also with the epilogue's TMA stores
("..._tma_store", option tma_store, tile_cuda/tma_store.py), next to cuBLAS; the row has each build's
launch grid and whether all builds gave the same bits ("same_bits"). With "default" the build with
tile-cuda's default options alone ("default") is timed next to cuBLAS / cuDNN, and (gemm) the same with
the kernel's own tiles ("own_tiles"). Every GEMM build but "default" keeps the kernel's own tiles
(retile_gemm=False; tile_cuda/retile.py rebuilds smaller blocks by default). With "per_sm" (gemm)
the build without warp specialization (wgmma_overlap's default schedule and "slack"), the
warp-specialized one and the warp-specialized one planned
for two blocks per SM (option ws_blocks_per_sm=2) are timed next to cuBLAS. With "mc" the default
build is timed next to warp-specialized builds with TMA multicast in clusters of two blocks (option
tma_multicast, tile_cuda/cluster.py), one and two blocks per SM, and (attention) the default build
with and without the option.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_bench import bench, build  # noqa: E402  (also puts plugins/tile-cuda/tests on the path)

VARIANTS = (("ws", {"warp_specialize": True}), ("base", {}))
TMA_VARIANTS = (
    ("ws_tma", {"warp_specialize": True}),
    ("ws_cp_async", {"warp_specialize": True, "tma": False}),
    ("no_ws", {"warp_specialize": False}),
)
DEFER_VARIANTS = (
    ("ws_tma", {"warp_specialize": True, "defer_gemm": False}),
    ("ws_defer", {"warp_specialize": True, "defer_gemm": True}),
)
PERSISTENT_VARIANTS = (  # (tma_store explicit: its default, auto, depends on K)
    ("ws", {"warp_specialize": True, "tma_store": False}),
    ("persistent", {"warp_specialize": True, "persistent": True, "tma_store": False}),
    ("ws_tma_store", {"warp_specialize": True, "tma_store": True}),
    ("persistent_tma_store", {"warp_specialize": True, "persistent": True, "tma_store": True}),
)
DEFAULT_VARIANTS = (("default", {}), ("own_tiles", {}))
BLOCKS_PER_SM_VARIANTS = (  # option ws_blocks_per_sm: a one-warpgroup consumer's block and a second one per SM
    ("no_ws", {"warp_specialize": False}),
    ("no_ws_slack", {"warp_specialize": False, "wgmma_overlap": "slack"}),
    ("ws", {"warp_specialize": True}),
    ("ws_2_per_sm", {"warp_specialize": True, "ws_blocks_per_sm": 2}),
)
MULTICAST_VARIANTS = (  # option tma_multicast (tile_cuda/cluster.py): clusters of two blocks share a stage load
    ("default", {}),
    ("ws", {"warp_specialize": True}),
    ("ws_mc", {"warp_specialize": True, "tma_multicast": True}),
    ("ws_2_per_sm", {"warp_specialize": True, "ws_blocks_per_sm": 2}),
    ("ws_2_per_sm_mc", {"warp_specialize": True, "ws_blocks_per_sm": 2, "tma_multicast": True}),
)
ATTN_MULTICAST_VARIANTS = (("default", {}), ("default_mc", {"tma_multicast": True}))


def attention(argv):
    import torch
    import torch.nn.functional as F
    from examples_util import example
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import tilecore

    causal, bm, bn, st, S, B, H = (int(a) for a in argv[:7])
    dt, mode = argv[7], (argv[8] if len(argv) > 8 else "")
    fa, D = example("flash_attention"), 128
    q, k, v = (torch.randn(B, S, H, D, device="cuda", dtype=getattr(torch, dt)) for _ in range(3))
    heads_first = [x.transpose(1, 2) for x in (q, k, v)]
    ref = F.scaled_dot_product_attention(*(x.float() for x in heads_first), is_causal=bool(causal)).transpose(1, 2)
    row = {"kind": "attn", "causal": causal, "cfg": [bm, bn, st], "S": S, "B": B, "H": H, "dtype": dt}
    flops = 4 * B * H * S * S * D * (0.5 if causal else 1.0)
    variants = {
        "tma": TMA_VARIANTS,
        "defer": DEFER_VARIANTS,
        "default": DEFAULT_VARIANTS,
        "mc": ATTN_MULTICAST_VARIANTS,
    }.get(mode, VARIANTS)
    mode = "t" if mode in ("tma", "defer", "default", "mc") else mode
    for name, opts in variants:
        if mode in ("ws", "base") and name != mode or not mode and name == "base":
            continue
        t0 = time.perf_counter()
        func = fa.flashattn.prim_func(B, H, S, D, bool(causal), block_M=bm, block_N=bn, num_stages=st, dtype=dt)
        kern = tilecore.compile(func, target="cuda", out_idx=[3], **opts)
        row[name + "_compile_s"] = time.perf_counter() - t0
        row[name + "_is_ws"] = "mbar_wait" in kern.artifact.source
        row[name + "_clusters"] = "__cluster_dims__" in kern.artifact.source
        row[name + "_tma_maps"] = len(kern.artifact.meta.get("tensor_maps", ()))
        out = kern(q, k, v)
        torch.cuda.synchronize()
        row[name + "_rel_err"] = ((out.float() - ref).norm() / ref.norm()).item()
        if mode == "t":
            row[name + "_ms"] = t = bench(lambda: kern(q, k, v), warmup=3, iters=10)
            row[name + "_tflops"] = flops / t / 1e9
    if mode == "t":
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            row["cudnn_ms"] = bench(
                lambda: F.scaled_dot_product_attention(*heads_first, is_causal=bool(causal)), warmup=3, iters=10
            )
        for name, _ in variants:
            row[name + "_vs_cudnn"] = row["cudnn_ms"] / row[name + "_ms"]
    return row


def gemm(argv):
    import kernels as K
    import torch

    n, bm, bn, bk, stages, threads = (int(a) for a in argv[:6])
    timing = len(argv) > 6
    named = {
        "tma": TMA_VARIANTS,
        "persist": PERSISTENT_VARIANTS,
        "default": DEFAULT_VARIANTS,
        "per_sm": BLOCKS_PER_SM_VARIANTS,
        "mc": MULTICAST_VARIANTS,
    }
    variants = named.get(argv[6], VARIANTS) if timing else VARIANTS
    variants = tuple(v for v in variants if timing or v[0] != "base")
    dt = argv[7] if len(argv) > 7 else "float16"
    row = {"kind": "gemm", "n": n, "cfg": [bm, bn, bk, stages, threads], "dtype": dt}
    builds = {}
    for name, opts in variants:  # every build first: with TC_TIMING_LOCK, compiles overlap other processes
        func = K.gemm_kernel(
            n,
            n,
            n,
            bm=bm,
            bn=bn,
            bk=bk,
            stages=stages,
            threads=threads,
            dtype=dt,
            swizzle_panel=8,
            predicated=n % bm != 0 or n % bn != 0 or n % bk != 0,
        )
        # every variant but "default" (as the user compiles it) keeps the kernel's own tiles: by default
        # tile-cuda rebuilds a whole-grid GEMM with its preferred blocks (tile_cuda/retile.py)
        opts = opts if name == "default" else {"retile_gemm": False, **opts}
        art, launch, row[name + "_compile_s"] = build(func, options=opts)
        row[name + "_is_ws"] = "mbar_wait" in art.source
        row[name + "_clusters"] = "__cluster_dims__" in art.source
        row[name + "_tma_maps"] = len(art.meta.get("tensor_maps", ()))
        row[name + "_grid"] = art.meta["grid_py"]
        builds[name] = launch
    with timing_lock():
        a, b = (torch.randn(n, n, device="cuda", dtype=getattr(torch, dt)) for _ in range(2))
        ref = torch.matmul(a.float(), b.float())
        outs = {}
        for name, launch in builds.items():
            c = outs[name] = torch.full((n, n), float("nan"), device="cuda", dtype=getattr(torch, dt))
            launch([a, b, c], {})
            torch.cuda.synchronize()
            row[name + "_rel_err"] = ((c.float() - ref).norm() / ref.norm()).item()
        first = next(iter(outs.values()))
        row["same_bits"] = all(torch.equal(first, c) for c in outs.values())
        if timing:
            calls = {name: (lambda f=f, c=outs[name]: f([a, b, c], {})) for name, f in builds.items()}
            calls["cublas"] = lambda: torch.matmul(a, b)
            times = timed_rounds(calls, int(os.environ.get("TC_TIMING_ROUNDS", "1")))
            for name, t in times.items():
                row[name + "_ms"] = t
                row[name + "_tflops"] = 2 * n**3 / t / 1e9
            for name in builds:
                row[name + "_vs_cublas"] = times["cublas"] / times[name]
    return row


def timed_rounds(calls, rounds: int):
    """{name: ms}: `bench` of each call, the calls taking turns for `rounds` rounds (the median
    round per call: a slow moment of the GPU falls on every build alike)."""
    got = {name: [] for name in calls}
    for _ in range(rounds):
        for name, fn in calls.items():
            got[name].append(bench(fn))
    return {name: sorted(ts)[len(ts) // 2] for name, ts in got.items()}


@contextlib.contextmanager
def timing_lock():
    """Hold the file lock named by $TC_TIMING_LOCK (if set) while checking and timing, so that
    several processes compile at once but use the GPU one after the other. A process that holds
    it longer than $TC_TIMING_LIMIT seconds (default 45: a kernel that never ends) exits, which
    frees the lock and its GPU context for the next one."""
    path = os.environ.get("TC_TIMING_LOCK")
    if not path:
        yield
        return
    import faulthandler
    import fcntl

    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        faulthandler.dump_traceback_later(float(os.environ.get("TC_TIMING_LIMIT", "45")), exit=True)
        try:
            yield
        finally:
            faulthandler.cancel_dump_traceback_later()
            fcntl.flock(f, fcntl.LOCK_UN)


if __name__ == "__main__":
    kind = sys.argv[1]
    print(json.dumps(attention(sys.argv[2:]) if kind == "attn" else gemm(sys.argv[2:])), flush=True)
