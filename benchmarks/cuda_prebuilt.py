"""GEMM builds compiled on a machine without a GPU and timed on one that needs no TVM: the build
step runs the tile-cuda plugin (TVM, nvcc) here and pickles each artifact (CUDA source, cubin,
launch facts); the run step loads them with the plugin's launcher alone (pure Python + the CUDA
driver), checks each against torch on fresh random data and times it next to cuBLAS (attention: cuDNN SDPA)
in the same process. A lent GPU host then needs no staged apache-tvm wheel: one call, no install.

    python benchmarks/cuda_prebuilt.py build DIR [TAG [REGEX [VARIANT]]]   # here: MATRIX's builds
                                   # (names matching REGEX; their CUDA source rewritten by VARIANT) into DIR
    python benchmarks/cuda_prebuilt.py run DIR [ROUNDS [GLOB]]    # on the GPU: one JSON line per build and round
    python benchmarks/cuda_prebuilt.py paired DIR [PAIRS [GLOB]]  # on the GPU: each build in ABBA pairs of
                                   # back-to-back bursts beside its peer; one JSON line per build

TAG names the tile-cuda the build used (e.g. "new", or "old" with an older tree's plugin first on
PYTHONPATH), so one DIR can hold both for an A/B in one process. A VARIANT (SOURCE_VARIANTS) edits
the generated CUDA source and compiles it again with the plugin's nvcc call: an experiment measured
before the lowering is changed.
"""

from __future__ import annotations

import glob
import json
import os
import pickle
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "plugins", "tile-cuda", "tests"))

QUICKSTART = dict(bm=128, bn=128, bk=32, stages=3, threads=128, swizzle_panel=8)  # TileLang's quickstart
BEST = dict(bm=128, bn=256, bk=64, stages=3, threads=256, swizzle_panel=8)  # issue 12's best config
# the quickstart's schedules with its own tiles (by default tile-cuda re-tiles it: tile_cuda/retile.py)
OWN = {"retile_gemm": False}
WS, MC = {**OWN, "warp_specialize": True}, {**OWN, "warp_specialize": True, "tma_multicast": True}
TWO = {**OWN, "warp_specialize": True, "ws_blocks_per_sm": 2}

ATTN_BATCH, ATTN_HEADS, ATTN_DIM = 4, 32, 128

# experiments on the generated source: name -> (description, rewrite)
SOURCE_VARIANTS = {
    # for trees before 23bf57d: since then tile-cuda leaves the fence out of TMA-fed warp-specialized
    # loops itself (its source no longer matches, and the build reports that the variant changes nothing)
    "nofence": (
        "no fence.proxy.async before each wgmma (TMA-fed stages are written by the async proxy already)",
        lambda src: src.replace("  fence_async_smem();\n  wgmma_fence();", "  wgmma_fence();"),
    ),
    # session 18: one 8192^3 launch under ncu ran at ~0.97x of cuBLAS's sustained time, the timed
    # loop at ~0.85x; if spinning waits cost power (clocks), a suspend-time hint (CUTLASS's
    # ClusterBarrier::wait passes 0x989680 ns) lets a waiting warp sleep instead of re-issuing
    "suspend": (
        "mbarrier.try_wait with a suspend-time hint (the waiting warp sleeps up to 10 ms instead of re-polling)",
        lambda src: src.replace(
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;",
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, 10000000;",
        ),
    ),
}


def _heavy_first_in_groups(group: int, qblocks: int = 32, heads: int = ATTN_HEADS):
    """Session 20: causal attention's launch order with the query-block index slowest within groups
    of `group` (head, batch) pairs: each group's longest blocks of every pair start first, so the
    grid's last wave is short blocks, while the blocks running at once read few heads' K/V (L2).
    The source's block indices become these (the lowering then reverses the query index as before);
    the lowering does this itself since (option heavy_first_group_blocks): apply to `attn_causal_alone`."""

    def rewrite(src: str) -> str:
        kernel = src.index("main_kernel(", src.rindex("__global__ void"))
        head = src.index("{", kernel) + 1
        x, y, z = (f"((int)blockIdx.{a})" for a in "xyz")
        decl = (
            f"\n  const int tc_lin = {x} + {qblocks} * ({y} + {heads} * {z});"
            f"\n  const int tc_grp = tc_lin / {qblocks * group}, tc_in = tc_lin % {qblocks * group};"
            f"\n  const int tc_pair = tc_grp * {group} + tc_in % {group};"
            f"\n  const int tc_bx = tc_in / {group}, tc_by = tc_pair % {heads}, tc_bz = tc_pair / {heads};"
        )
        body = src[head:]
        for a in "xyz":
            body = body.replace(f"((int)blockIdx.{a})", f"tc_b{a}")
        return src[:head] + decl + body

    return rewrite


def _rewrite_runs(pattern: str, emit):
    """A source rewrite: each run of 8 or more consecutive lines matching `pattern` becomes
    `emit(matches, lines)` (a list of lines)."""
    line = re.compile(pattern)

    def rewrite(src: str) -> str:
        lines, out, i = src.split("\n"), [], 0
        while i < len(lines):
            run = []
            while i + len(run) < len(lines) and line.match(lines[i + len(run)]):
                run.append(line.match(lines[i + len(run)]))
            if len(run) < 8:
                out.append(lines[i])
                i += 1
                continue
            out += emit(run, lines[i : i + len(run)])
            i += len(run)
        return "\n".join(out)

    return rewrite


def _exp2_range_check(run, _lines):
    """`x[i] = exp2f(arg);` lines (the softmax's scores): the arguments first, their minimum, and
    ex2.approx.ftz (no subnormal fix-up) when it is >= -126, where both give the same bits."""
    pad = run[0].group(1)
    return (
        [pad + "{ float tc_lo = 3.0e38f;"]
        + [f"{pad}  {m.group(2)} = {m.group(3)};" for m in run]
        + [f"{pad}  tc_lo = fminf(tc_lo, {m.group(2)});" for m in run]
        + [pad + "  if (tc_lo >= -126.0f) {"]
        + [f"{pad}    {m.group(2)} = tc::fast_exp2({m.group(2)});" for m in run]
        + [pad + "  } else {"]
        + [f"{pad}    {m.group(2)} = exp2f({m.group(2)});" for m in run]
        + [pad + "  } }"]
    )


def _skip_unit_rescale(run, lines):
    """`o[i] = (o[i] * s[r]);` lines (attention's rescale of the output accumulator): run only when
    some factor s[r] of the thread differs from 1 (x * 1 == x)."""
    pad = run[0].group(1)
    factors = sorted({f"{m.group(4)}[{m.group(5)}]" for m in run})
    return (
        [pad + "if (" + " || ".join(f"{f} != 1.0f" for f in factors) + ") {"] + ["  " + x for x in lines] + [pad + "}"]
    )


# session 21 (benchmarks/results/gpu-session21): both exact, both measured slower (the branch splits
# the softmax's straight-line code): 2.16 / 2.15 ms against 1.96 / 1.97 ms non-causal
SOURCE_VARIANTS["exp2check"] = (
    "the softmax's exp2 without exp2f's subnormal fix-up when every argument of the thread is >= -126",
    _rewrite_runs(r"^(\s*)(\w+\[\d+\]) = exp2f\((.*)\);$", _exp2_range_check),
)
SOURCE_VARIANTS["unitscale"] = (
    "attention's rescale of O skipped in a thread whose row factors are all 1 (the row maxima did not move)",
    _rewrite_runs(r"^(\s*)(\w+)\[(\d+)\] = \(\2\[\3\] \* (\w+)\[(\d+)\]\);$", _skip_unit_rescale),
)

SOURCE_VARIANTS.update(
    {
        f"lpt{g}": (
            f"causal attention: longest blocks first within groups of {g} (head, batch) pairs",
            _heavy_first_in_groups(g),
        )
        for g in (2, 4, 8)
    }
)

# (name, n, shape, dtype, options)
MATRIX = [
    *(
        (f"quickstart_{v}", n, QUICKSTART, "float16", opts)
        for n in (8192, 4096)
        for v, opts in (
            ("default", {}),  # as compiled by default: re-tiled to the best config's blocks
            ("own", OWN),  # its own 128x128x32 blocks, no warp specialization
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
    # examples/flash_attention.py, B4 H32 S4096 D128, 128x128 blocks, 2 stages (issue 12's bar)
    ("attn", 4096, dict(attention=True, causal=False), "float16", {}),
    ("attn_causal", 4096, dict(attention=True, causal=True), "float16", {}),
    # session 19 (benchmarks/results/gpu-session19): four stages of the best config (192 KiB: no
    # room for the TMA-store staging tile), block panels of 16 / 4 rows (T.use_swizzle; a wave of 132
    # 128x256 blocks in panels of 8 rows is 8 x 16.5 blocks, 82 MB of A and B from DRAM at 8192^3,
    # 16 x 8.25 65 MB): neither faster; the TMA-store epilogue at 8192^3 (then not on by default) 5%
    # faster, so default since; "plain" rows keep the global-store epilogue for the A/B
    *((f"best4_{dt}", 8192, {**BEST, "stages": 4}, dt, {}) for dt in ("float16",)),
    # session 24: 256x128 blocks (each consumer warpgroup two m64n128 row blocks, A read once per
    # block instead of B) against the best config's 128x256, 3 and 4 stages; session 25 timed them:
    # 0.78-0.83x cuBLAS against 1.00x (each warpgroup reads B from shared memory twice per k-step)
    *(
        (f"tall{s}_{dt}", 8192, {**BEST, "bm": 256, "bn": 128, "stages": s}, dt, {})
        for dt in ("float16", "bfloat16")
        for s in (3, 4)
    ),
    *(
        (f"best_{dt}_sw{p}", n, {**BEST, "swizzle_panel": p}, dt, {})
        for dt in ("float16", "bfloat16")
        for p in (16, 4)
        for n in (8192, 4096)
    ),
    ("best_float16_tmastore", 8192, BEST, "float16", {"tma_store": True}),
    *((f"best_{dt}_plain", 8192, BEST, dt, {"tma_store": False}) for dt in ("float16", "bfloat16")),
    # persistent blocks at 4096^3 (3.9 waves of 128x256 tiles; session 12's H200: +0-2%)
    *(
        (f"best_{dt}_persist", n, BEST, dt, {"persistent": True})
        for dt in ("float16", "bfloat16")
        for n in (4096, 8192)
    ),
    ("ragged_persist", 4000, {**BEST, "predicated": True}, "float16", {"persistent": True}),
    # attention's exp2 without the subnormal-result handling exp2f adds (FSETP + two predicated FMULs)
    ("attn_fast", 4096, dict(attention=True, causal=False), "float16", {"fast_math": True}),
    ("attn_causal_fast", 4096, dict(attention=True, causal=True), "float16", {"fast_math": True}),
    # session 20: the longest query blocks first within each (head, batch) alone, as before the
    # grouped order (`heavy_first_group_blocks`, tile_cuda/target.py)
    ("attn_causal_alone", 4096, dict(attention=True, causal=True), "float16", {"heavy_first_group_blocks": 0}),
    # session 21: persistent attention blocks (the general form of tile_cuda/persistent.py; causal
    # takes it by default, in snake order) against one block per (query block, head, batch)
    ("attn_causal_np", 4096, dict(attention=True, causal=True), "float16", {"persistent": False}),
    ("attn_persist", 4096, dict(attention=True, causal=False), "float16", {"persistent": True}),
    # ... with the next tile's Q loaded by the producer (option tile_loads, tile_cuda/ws_tile_loads.py)
    ("attn_causal_tl", 4096, dict(attention=True, causal=True), "float16", {"tile_loads": True}),
    ("attn_persist_tl", 4096, dict(attention=True, causal=False), "float16", {"persistent": True, "tile_loads": True}),
    # session 22: the epilogue's staging tile O_shared swizzled (tile_cuda/staging_tiles.py, default on)
    # against the row-major tile (8-way bank conflicts on the accumulator's stores)
    ("attn_nosw", 4096, dict(attention=True, causal=False), "float16", {"staging_swizzle": False}),
    ("attn_causal_nosw", 4096, dict(attention=True, causal=True), "float16", {"staging_swizzle": False}),
    *(
        (f"attn_causal_g{g}", 4096, dict(attention=True, causal=True), "float16", {"heavy_first_group_blocks": g})
        for g in (32, 128)
    ),
]


def _func(n: int, shape: dict, dtype: str):
    """The Tile IR of one MATRIX entry: a GEMM of kernels.py or the attention example."""
    import kernels as K

    if not shape.get("attention"):
        return K.gemm_kernel(n, n, n, dtype=dtype, **shape)
    from examples_util import example

    fa = example("flash_attention")
    return fa.flashattn.prim_func(
        ATTN_BATCH, ATTN_HEADS, n, ATTN_DIM, shape["causal"], block_M=128, block_N=128, num_stages=2, dtype=dtype
    )


def build(out_dir: str, tag: str, pattern: str = "", variant: str = "") -> None:
    """Compile MATRIX's builds whose name matches `pattern` for sm_90a into
    out_dir/<tag>-<name>[+variant]-<n>.pkl (the source rewritten by SOURCE_VARIANTS[variant])."""
    import dataclasses
    import re

    import tilecore
    from tile_cuda.compiler import compile_cubin

    os.makedirs(out_dir, exist_ok=True)
    for name, n, shape, dtype, opts in MATRIX:
        if not re.search(pattern, name):
            continue
        t0 = time.perf_counter()
        try:
            art = tilecore.compile(_func(n, shape, dtype), target="cuda:sm_90a", **opts).artifact
        except Exception as err:  # report and go on: the run step skips what is missing
            print(f"{tag} {name} {n}: {type(err).__name__}: {str(err)[:300]}", flush=True)
            continue
        if variant:
            source = SOURCE_VARIANTS[variant][1](art.source)
            if source == art.source:
                print(f"{tag} {name} {n}: variant {variant} changes nothing", flush=True)
                continue
            art = dataclasses.replace(
                art, source=source, blobs={**art.blobs, "cubin": compile_cubin(source, "sm_90a")[0]}
            )
            name = f"{name}+{variant}"
        entry = {"tag": tag, "name": name, "n": n, "shape": shape, "dtype": dtype, "options": opts}
        with open(os.path.join(out_dir, f"{tag}-{name}-{n}.pkl"), "wb") as f:
            pickle.dump((entry, art), f)
        notes = [x for x in art.meta.get("notes", ()) if "multicast" in x or "warp-special" in x or "per SM" in x]
        print(f"{tag} {name} {n}: {time.perf_counter() - t0:.1f} s {notes}", flush=True)


def run(out_dir: str, rounds: int, pattern: str = "*") -> None:
    """Check and time the pickled builds whose file name matches `pattern` (a glob; "!GLOB": those
    that do not match it), rounds times, the peer timed in each round."""
    import torch

    builds = _load(out_dir, pattern)
    for r in range(rounds):
        for key in sorted({(e["n"], e["dtype"], bool(e["shape"].get("attention"))) for e, _, _ in builds}):
            n, dt, attention = key
            for causal in (False, True) if attention else (None,):
                group = [
                    (e, art, launch)
                    for e, art, launch in builds
                    if (e["n"], e["dtype"], bool(e["shape"].get("attention"))) == key
                    and (causal is None or e["shape"]["causal"] == causal)
                ]
                if group:
                    _time_group(group, n, getattr(torch, dt), causal, r)


def _load(out_dir: str, pattern: str):
    """[(entry, artifact, launcher)] of the pickled builds whose file name matches `pattern` (a glob;
    "!GLOB": those that do not), after one JSON line naming the GPU."""
    import fnmatch

    import torch

    from tile_cuda import plugin

    builds = []
    paths = sorted(glob.glob(os.path.join(out_dir, "*.pkl")))
    keep = fnmatch.fnmatch if not pattern.startswith("!") else lambda name, p: not fnmatch.fnmatch(name, p[1:])
    for path in (p for p in paths if keep(os.path.basename(p), pattern + ".pkl")):
        with open(path, "rb") as f:
            entry, art = pickle.load(f)
        builds.append((entry, art, plugin.tilecore_launcher(backend=plugin.make_backend(), artifact=art)))
    env = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "builds": len(builds)}
    print(json.dumps(env), flush=True)
    return builds


def paired(out_dir: str, pairs: int = 12, pattern: str = "*", burst_ms: float = 20.0) -> None:
    """Check each build, then time it beside its peer in `pairs` ABBA-ordered pairs of bursts of
    back-to-back launches (`cuda_bench.interleaved`, about burst_ms each). `run`'s rounds time the
    peer before and after a group of builds (20 synchronized calls each), whose mean matches a
    build's state only where the card's clock drifts evenly across the group; here both sides of
    every pair share the card's state. One JSON line per build: vs_peer is the ratio of the summed
    times, pair_ratios each pair's."""
    import torch
    from cuda_bench import interleaved

    for entry, art, launch in _load(out_dir, pattern):
        ins, ref, peer_call, peer_backend, out, flops = problem(
            entry["n"],
            getattr(torch, entry["dtype"]),
            (entry["shape"]["causal"] if entry["shape"].get("attention") else None),
        )
        row = dict(entry, mode="paired", clusters="__cluster_dims__" in art.source)
        out.fill_(float("nan"))
        try:
            launch([*ins, out], {})
            torch.cuda.synchronize()
            row["rel_err"] = err = ((out.float() - ref).norm() / ref.norm()).item()
            if err >= 1e-2:  # timed only when right
                print(json.dumps(row), flush=True)
                continue
            with peer_backend():
                timed = interleaved(lambda: launch([*ins, out], {}), peer_call, pairs, burst_ms)
        except Exception as err:  # one failing build must not hide the others' figures
            row["error"] = repr(err)[-300:]
            print(json.dumps(row), flush=True)
            continue
        row.update(
            reps=timed["reps"],
            ms=timed["ms"],
            peer_ms=timed["peer_ms"],
            vs_peer=timed["peer_ms"] / timed["ms"],
            pair_ratios=[round(x, 4) for x in timed["pair_ratios"]],
            tflops=flops / timed["ms"] / 1e9,
        )
        print(json.dumps(row), flush=True)


def problem(n, dt, causal):
    """(inputs, float32 reference, one call of the peer, the context the peer runs in, output,
    FLOPs) of a GEMM of size n (causal None) or of attention B4 H32 S=n D128: fresh random data."""
    import contextlib

    import torch
    import torch.nn.functional as F

    if causal is None:
        ins = [torch.randn(n, n, device="cuda", dtype=dt) for _ in range(2)]
        ref = ins[0].float() @ ins[1].float()
        out = torch.empty(n, n, device="cuda", dtype=dt)
        return ins, ref, lambda: torch.matmul(*ins), contextlib.nullcontext, out, 2 * n**3
    from torch.nn.attention import SDPBackend, sdpa_kernel

    ins = [torch.randn(ATTN_BATCH, n, ATTN_HEADS, ATTN_DIM, device="cuda", dtype=dt) for _ in range(3)]
    heads_first = [x.transpose(1, 2) for x in ins]
    ref = F.scaled_dot_product_attention(*(x.float() for x in heads_first), is_causal=causal).transpose(1, 2)
    flops = 4 * ATTN_BATCH * ATTN_HEADS * n * n * ATTN_DIM * (0.5 if causal else 1.0)
    return (
        ins,
        ref,
        lambda: F.scaled_dot_product_attention(*heads_first, is_causal=causal),
        lambda: sdpa_kernel(SDPBackend.CUDNN_ATTENTION),
        torch.empty_like(ins[0]),
        flops,
    )


def _time_group(group, n, dt, causal, r) -> None:
    """Check and time the builds of one problem (a GEMM of size n, or attention when causal is not
    None) next to their peer (cuBLAS / cuDNN SDPA), timed before and after them in this round (the
    mean of the two: a card whose clock sinks as it heats would otherwise favour the peer)."""
    import torch
    from cuda_bench import bench

    ins, ref, peer_call, peer_backend, out, flops = problem(n, dt, causal)
    warmup, iters = (5, 20) if causal is None else (3, 10)

    def peer():
        with peer_backend():
            return bench(peer_call, warmup=warmup, iters=iters)

    t_before, rows = peer(), []
    for entry, art, launch in group:
        out.fill_(float("nan"))
        row = dict(entry, round=r, clusters="__cluster_dims__" in art.source)
        try:
            launch([*ins, out], {})
            torch.cuda.synchronize()
            row["rel_err"] = err = ((out.float() - ref).norm() / ref.norm()).item()
            if err < 1e-2:  # timed only when right
                row["ms"] = t = bench(lambda: launch([*ins, out], {}), warmup=5, iters=20)
                row["tflops"] = flops / t / 1e9
        except Exception as err:  # one failing build must not hide the others' figures
            row["error"] = repr(err)[-300:]
        rows.append(row)
    t_after = peer()
    for row in rows:
        row.update(peer_ms=(t_before + t_after) / 2, peer_ms_before=t_before, peer_ms_after=t_after)
        if "ms" in row:
            row["vs_peer"] = row["peer_ms"] / row["ms"]
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    mode, directory, *rest = sys.argv[1:]
    if mode == "build":
        build(directory, *rest)
    elif mode == "paired":
        paired(directory, int(rest[0]) if rest else 12, *rest[1:])
    else:
        run(directory, int(rest[0]) if rest else 1, *rest[1:])
