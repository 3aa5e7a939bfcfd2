"""The whole-grid cpu GEMM at several K-chunk sizes (kc) and k-loop unrollings, against numpy.

    python benchmarks/cpu_gemm_blocking.py [--size 2048] [--threads 1] [--repeat 7] [--kc 0,256,384,512]
        [--unroll 0,1,8] [--nc 0,all] [--clock wall|cpu]

tile_cpu.gemm_grid chooses kc from the host's caches (`grid_k_chunk`). A larger kc reads
and writes C fewer times (once per K chunk) but needs a larger A panel in L1 and B block in
L2; the right size depends on the host. This times examples/gemm.py's matmul (fp32, size^3,
128x128x64 tiles: every tile size lowers to the same whole-grid GEMM) with kc overridden
(0 = the backend's own choice), B's column blocks --nc columns wide (0 = the backend's own, `all` =
all of N's full panels in one block: fewer parallel joins, a larger B block), and the
micro-kernel's k loop unrolled --unroll times, alternately
with numpy's a @ b, and prints the ratio numpy
time / tilecore time of the medians. Compile caching is off so that each kc is compiled.
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
import tilecore  # noqa: E402
from tile_cpu.gemm import MicroKernel  # noqa: E402


def kernel_with(n: int, kc: int, unroll: int, nc: str = "0"):
    """matmul at n^3 compiled with the whole-grid GEMM's K chunk forced to kc, B's column blocks
    nc wide and the micro-kernel's k loop unrolled `unroll` times (0: the backend's own choice)."""
    own_kc, own_unroll, own_shape = gemm_grid.grid_k_chunk, MicroKernel.K_UNROLL, gemm_grid.task_shape
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
        func = matmul.prim_func(n, n, n, 128, 128, 64, dtype="float32", accum="float32")
        return tilecore.compile(func, target="cpu", out_idx=[-1])
    finally:
        gemm_grid.grid_k_chunk, MicroKernel.K_UNROLL, gemm_grid.task_shape = own_kc, own_unroll, own_shape


def main():
    n = ARGS.size
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    want = a.astype(np.float64) @ b
    rows = []
    variants = [
        (int(kc), int(u), nc) for kc in ARGS.kc.split(",") for u in ARGS.unroll.split(",") for nc in ARGS.nc.split(",")
    ]
    for kc, unroll, nc in variants:
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
