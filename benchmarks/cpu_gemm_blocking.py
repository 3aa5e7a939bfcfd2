"""The whole-grid cpu GEMM at several K-chunk sizes (kc) and k-loop unrollings, against numpy.

    python benchmarks/cpu_gemm_blocking.py [--size 2048] [--threads 1] [--repeat 7] [--kc 0,256,384,512]
        [--unroll 0,1,8] [--nc 0,all] [--clock wall|cpu]
    python benchmarks/cpu_gemm_blocking.py --threads 16 --variants "base;sync=barrier;kc=384,tile=8x3" [--rounds 9]

tile_cpu.gemm_grid chooses kc from the host's caches (`grid_k_chunk`). A larger kc reads
and writes C fewer times (once per K chunk) but needs a larger A panel in L1 and B block in
L2; the right size depends on the host. This times examples/gemm.py's matmul (fp32, size^3,
128x128x64 tiles: every tile size lowers to the same whole-grid GEMM) with kc overridden
(0 = the backend's own choice), B's column blocks --nc columns wide (0 = the backend's own, `all` =
all of N's full panels in one block: fewer parallel joins, a larger B block), and the
micro-kernel's k loop unrolled --unroll times, alternately
with numpy's a @ b, and prints the ratio numpy
time / tilecore time of the medians. Compile caching is off so that each kc is compiled.

--variants (';'-separated, each ','-separated key=value, `base` = the backend's own choices) times
several variants in interleaved rounds instead (each round: every variant once, each call followed by
numpy's), so that a noisy minute hits all of them; keys: kc, nc, unroll, sync (tile_cpu.gemm_grid.SYNC:
launch | barrier), order (rows | cols: gemm_grid.ROWS_OUTER), ahead (gemm_grid.PREFETCH_K), rotate
(0/1: gemm_grid.ROTATE_PANELS), dyn (gemm_grid.DYNAMIC_ROWS; 0: static tasks), whole (0/1: gemm_grid.WHOLE_BLOCK_TASKS),
tile (the fp32 register block MRxNR_VECTORS, e.g. 12x2, 8x2, 6x4), tiles (the example's
block_M x block_N x block_K, default 128x128x64) and stages (its num_stages, default 3).
Writes benchmarks/results/cpu_gemm_blocking-<date>.json (machine, versions, command).
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

sys.path.insert(0, HERE)
import cpu_host  # noqa: E402  (no numpy or TVM at import: pin still comes first)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=2048)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--kc", default="0,128,192,256,384,512", help="comma-separated K chunks; 0 = the backend's own")
    p.add_argument("--unroll", default="0", help="comma-separated k-loop unroll factors; 0 = the backend's own")
    p.add_argument("--nc", default="0", help="comma-separated B block widths (columns); 0 = the backend's own, all = N")
    p.add_argument("--variants", default="", help="interleaved variants (see the docstring); overrides kc/unroll/nc")
    p.add_argument("--rounds", type=int, default=9, help="rounds of --variants")
    cpu_host.add_clock_argument(p)
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    return p.parse_args(argv)


ARGS = parse_args()

cpu_host.pin(ARGS.threads)
os.environ["TILECORE_CACHE"] = "0"

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "examples"))
from cpu_host import machine, side_by_side  # noqa: E402
from gemm import matmul  # noqa: E402
from results_file import utc_stamp, write_record  # noqa: E402

import tile_cpu.gemm_grid as gemm_grid  # noqa: E402
import tile_cpu.lower as cpu_lower  # noqa: E402
import tilecore  # noqa: E402
from tile_cpu.gemm import MicroKernel, MicroTile  # noqa: E402


def kernel_with(
    n: int,
    kc: int,
    unroll: int,
    nc="0",
    sync="",
    tile="",
    tiles="128x128x64",
    stages=3,
    order="",
    ahead=0,
    rotate=0,
    dyn=None,
    whole=0,
):
    """matmul at n^3 compiled with the whole-grid GEMM's K chunk forced to kc, B's column blocks
    nc wide and the micro-kernel's k loop unrolled `unroll` times (0: the backend's own choice);
    sync: gemm_grid.SYNC; tile: the fp32 register block "MRxNR_VECTORS" ("": the backend's own);
    tiles, stages: the example's block sizes and pipeline stages; order: "rows" or "cols" (gemm_grid.ROWS_OUTER);
    ahead: gemm_grid.PREFETCH_K; rotate: gemm_grid.ROTATE_PANELS (0/1); dyn: gemm_grid.DYNAMIC_ROWS;
    whole: gemm_grid.WHOLE_BLOCK_TASKS (0/1)."""
    own_kc, own_unroll, own_shape = gemm_grid.grid_k_chunk, MicroKernel.K_UNROLL, gemm_grid.task_shape
    own_sync, own_tile, own_order = gemm_grid.SYNC, cpu_lower.micro_tile, gemm_grid.ROWS_OUTER
    own_ahead, own_rotate, own_dyn = gemm_grid.PREFETCH_K, gemm_grid.ROTATE_PANELS, gemm_grid.DYNAMIC_ROWS
    own_whole = gemm_grid.WHOLE_BLOCK_TASKS
    gemm_grid.WHOLE_BLOCK_TASKS = bool(int(whole)) or own_whole
    gemm_grid.DYNAMIC_ROWS = own_dyn if dyn is None else int(dyn)  # dyn=0: static tasks
    gemm_grid.PREFETCH_K = int(ahead) or own_ahead
    gemm_grid.ROTATE_PANELS = bool(int(rotate)) or own_rotate
    if order:
        gemm_grid.ROWS_OUTER = order == "rows"
    if sync:
        gemm_grid.SYNC = sync
    if tile:
        mr, nr_vec = (int(v) for v in tile.split("x"))
        cpu_lower.micro_tile = lambda bits, regs, acc: (
            MicroTile(mr, nr_vec, bits // 32) if acc == "float32" else own_tile(bits, regs, acc)
        )
    if kc:
        gemm_grid.grid_k_chunk = lambda tile, M, K, acc_bytes, caches: min(kc, K)
    if nc != "0":

        def task_shape(tile, plan, kc_, caches, cores):
            mc, _ = own_shape(tile, plan, kc_, caches, cores)
            full = plan.N // tile.nr * tile.nr
            return mc, full if nc == "all" else min(full, int(nc) // tile.nr * tile.nr)

        gemm_grid.task_shape = task_shape
    MicroKernel.K_UNROLL = unroll or own_unroll
    try:
        bm, bn, bk = (int(v) for v in tiles.split("x"))
        func = matmul.prim_func(n, n, n, bm, bn, bk, dtype="float32", accum="float32", num_stages=int(stages))
        return tilecore.compile(func, target="cpu", out_idx=[-1])
    finally:
        gemm_grid.grid_k_chunk, MicroKernel.K_UNROLL, gemm_grid.task_shape = own_kc, own_unroll, own_shape
        gemm_grid.SYNC, cpu_lower.micro_tile, gemm_grid.ROWS_OUTER = own_sync, own_tile, own_order
        gemm_grid.PREFETCH_K, gemm_grid.ROTATE_PANELS, gemm_grid.DYNAMIC_ROWS = own_ahead, own_rotate, own_dyn
        gemm_grid.WHOLE_BLOCK_TASKS = own_whole


def interleaved(n, a, b, want):
    """--variants: every variant compiled and checked, then timed in rounds (each call next to numpy's)."""
    import time

    specs = [v.strip() for v in ARGS.variants.split(";") if v.strip()]
    kernels = []
    for spec in specs:
        opts = dict(kv.split("=", 1) for kv in spec.split(",") if kv != "base")
        t0 = time.perf_counter()
        k = kernel_with(n, int(opts.pop("kc", 0)), int(opts.pop("unroll", 0)), opts.pop("nc", "0"), **opts)
        c = k(a, b)
        err = float(np.max(np.abs(c - want)) / np.max(np.abs(want)))
        assert err < 1e-5, f"{spec}: wrong result ({err})"
        print(f"compiled {spec} in {time.perf_counter() - t0:.1f} s", flush=True)
        kernels.append(k)
    timer = cpu_host.clock(ARGS.clock)
    tt = [[] for _ in specs]
    nt = [[] for _ in specs]
    for k in kernels:  # warm up
        k(a, b)
    a @ b
    for r in range(ARGS.rounds):
        for i, k in enumerate(kernels):
            t, u = cpu_host.side_by_side(lambda k=k: k(a, b), lambda: a @ b, 1, timer, warm=False)
            tt[i] += t
            nt[i] += u
        print(f"round {r}: " + "  ".join(f"{t[-1] * 1e3:.2f}/{u[-1] * 1e3:.2f}" for t, u in zip(tt, nt)), flush=True)
    rows = []
    for spec, t, u in zip(specs, tt, nt):
        ratio = float(np.median(u) / np.median(t))
        pair = float(np.median(np.array(u) / np.array(t)))
        print(
            f"{spec:>40}  tilecore {np.median(t) * 1e3:7.2f} ms (min {min(t) * 1e3:6.2f})  "
            f"numpy {np.median(u) * 1e3:7.2f} ms (min {min(u) * 1e3:6.2f})  ratio {ratio:5.3f}x  "
            f"median pair ratio {pair:5.3f}x",
            flush=True,
        )
        rows.append(
            {
                "variant": spec,
                "tilecore_ms": [x * 1e3 for x in t],
                "numpy_ms": [x * 1e3 for x in u],
                "ratio": ratio,
                "pair_ratio": pair,
            }
        )
    return rows


def main():
    n = ARGS.size
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    want = a.astype(np.float64) @ b
    rows = interleaved(n, a, b, want) if ARGS.variants else []
    variants = [
        (int(kc), int(u), nc) for kc in ARGS.kc.split(",") for u in ARGS.unroll.split(",") for nc in ARGS.nc.split(",")
    ]
    for kc, unroll, nc in [] if ARGS.variants else variants:
        k = kernel_with(n, kc, unroll, nc)
        c = k(a, b)
        err = float(np.max(np.abs(c - want)) / np.max(np.abs(want)))
        assert err < 1e-5, f"kc={kc}: wrong result ({err})"
        tt, nt = side_by_side(lambda k=k: k(a, b), lambda: a @ b, ARGS.repeat, cpu_host.clock(ARGS.clock))
        ratio = float(np.median(nt) / np.median(tt))
        label = (f"own {own_k_chunk(n)}" if kc == 0 else str(kc)) + f", unroll {unroll or MicroKernel.K_UNROLL}"
        label += "" if nc == "0" else f", nc {nc}"
        print(
            f"kc {label:>28}  tilecore {np.median(tt) * 1e3:8.2f} ms  numpy {np.median(nt) * 1e3:8.2f} ms  "
            f"ratio {ratio:5.2f}x",
            flush=True,
        )
        rows.append(
            {
                "kc": kc,
                "unroll": unroll,
                "nc": nc,
                "label": label,
                "tilecore_ms": [t * 1e3 for t in tt],
                "numpy_ms": [t * 1e3 for t in nt],
                "ratio": ratio,
            }
        )
    stamp = utc_stamp()
    record = {
        "benchmark": "cpu_gemm_blocking",
        "command": " ".join(["python"] + sys.argv),
        "date": stamp,
        "size": n,
        "threads": ARGS.threads,
        "clock": ARGS.clock,
        "machine": machine(),
        "results": rows,
    }
    write_record(ARGS.out, "cpu_gemm_blocking", stamp, record)


def own_k_chunk(n: int) -> int:
    """The kc the backend chooses for the fp32 GEMM at n^3 on this host."""
    from tile_cpu.build import host_info
    from tile_cpu.gemm import micro_tile

    info = host_info()
    tile = micro_tile(info["vector_bits"], info["vector_regs"], "float32")
    return gemm_grid.grid_k_chunk(tile, n, n, 4, info["caches"])


if __name__ == "__main__":
    main()
