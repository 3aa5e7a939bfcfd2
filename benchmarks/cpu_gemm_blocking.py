"""The whole-grid cpu GEMM at several K-chunk sizes (kc) and k-loop unrollings, against numpy.

    python benchmarks/cpu_gemm_blocking.py [--size 2048] [--threads 1] [--repeat 7] [--kc 0,256,384,512]
        [--unroll 0,1,8] [--clock wall|cpu]

tile_cpu.gemm_grid chooses kc from the host's caches (`grid_k_chunk`). A larger kc reads
and writes C fewer times (once per K chunk) but needs a larger A panel in L1 and B block in
L2; the right size depends on the host. This times examples/gemm.py's matmul (fp32, size^3,
128x128x64 tiles: every tile size lowers to the same whole-grid GEMM) with kc overridden
(0 = the backend's own choice) and the micro-kernel's k loop unrolled --unroll times, alternately
with numpy's a @ b, and prints the ratio numpy
time / tilecore time of the medians. Compile caching is off so that each kc is compiled.
Writes benchmarks/results/cpu_gemm_blocking-<date>.json (machine, versions, command).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=2048)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--kc", default="0,128,192,256,384,512", help="comma-separated K chunks; 0 = the backend's own")
    p.add_argument("--unroll", default="0", help="comma-separated k-loop unroll factors; 0 = the backend's own")
    p.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="cpu: this process's CPU time per call (with --threads 1, robust on a shared machine)",
    )
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    return p.parse_args(argv)


ARGS = parse_args()
sys.path.insert(0, HERE)
import cpu_host  # noqa: E402

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


def kernel_with(n: int, kc: int, unroll: int):
    """matmul at n^3 compiled with the whole-grid GEMM's K chunk forced to kc and the micro-kernel's
    k loop unrolled `unroll` times (0: the backend's own choice)."""
    own_kc, own_unroll = gemm_grid.grid_k_chunk, MicroKernel.K_UNROLL
    if kc:
        gemm_grid.grid_k_chunk = lambda tile, M, K, acc_bytes, caches: min(kc, K)
    MicroKernel.K_UNROLL = unroll or own_unroll
    try:
        func = matmul.prim_func(n, n, n, 128, 128, 64, dtype="float32", accum="float32")
        return tilecore.compile(func, target="cpu", out_idx=[-1])
    finally:
        gemm_grid.grid_k_chunk, MicroKernel.K_UNROLL = own_kc, own_unroll


def main():
    n = ARGS.size
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    want = a.astype(np.float64) @ b
    rows = []
    variants = [(int(kc), int(u)) for kc in ARGS.kc.split(",") for u in ARGS.unroll.split(",")]
    for kc, unroll in variants:
        k = kernel_with(n, kc, unroll)
        c = k(a, b)
        err = float(np.max(np.abs(c - want)) / np.max(np.abs(want)))
        assert err < 1e-5, f"kc={kc}: wrong result ({err})"
        clock = time.process_time if ARGS.clock == "cpu" else time.perf_counter
        tt, nt = side_by_side(lambda k=k: k(a, b), lambda: a @ b, ARGS.repeat, clock)
        ratio = float(np.median(nt) / np.median(tt))
        label = (f"own {own_k_chunk(n)}" if kc == 0 else str(kc)) + f", unroll {unroll or MicroKernel.K_UNROLL}"
        print(
            f"kc {label:>20}  tilecore {np.median(tt) * 1e3:8.2f} ms  numpy {np.median(nt) * 1e3:8.2f} ms  "
            f"ratio {ratio:5.2f}x",
            flush=True,
        )
        rows.append(
            {
                "kc": kc,
                "unroll": unroll,
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
