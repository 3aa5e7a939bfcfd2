"""tilecore on the "cpu" backend vs numpy (OpenBLAS), side by side in one run.

    python benchmarks/cpu_vs_numpy.py [--threads N] [--repeat R] [--quick]

For each kernel: check correctness on fresh random inputs first, then time
tilecore and numpy alternately (R runs each, same thread count for TVM's pool
and OpenBLAS, a short pause before each call) and print the ratio numpy time /
tilecore time of the medians (higher is better; best-of-R ratios are recorded too).
The GEMM is `examples/gemm.py`'s matmul, fp32 2048^3, at the common tile sizes
of issue 19 (a host-specific regression shows at one of them), and the best; then
its float16 and bfloat16 variants (float32 accumulation) against numpy's float32 GEMM.
Also measures a cold GEMM compile (empty cache) and a cache hit in a fresh
process. Writes JSON with the machine (CPU model, LLVM's CPU and features, the
micro-kernel's register block, numpy's OpenBLAS build and the core kernel it
chose) to benchmarks/results/cpu_vs_numpy-<date>.json.

Run it with `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE` where a machine sets
those: they pin OpenBLAS to a kernel other than the one it picks for the CPU
(the JSON records both variables as the process saw them).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

sys.path.insert(0, HERE)
import cpu_host  # noqa: E402  (no numpy or TVM at import: pin still comes first)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run, not the bars)")
    p.add_argument("--gemm-only", action="store_true", help="only the GEMM tile sizes (no compile figures)")
    cpu_host.add_clock_argument(p)
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    return p.parse_args(argv)


ARGS = parse_args()

cpu_host.pin(ARGS.threads)

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "examples"))
from cpu_host import machine  # noqa: E402

import tilecore  # noqa: E402
import tilecore.language as T  # noqa: E402


def median(values):
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else 0.5 * (ordered[mid - 1] + ordered[mid])


CLOCK = cpu_host.clock(ARGS.clock)


def side_by_side(tile_fn, numpy_fn, repeat):
    """(tilecore times, numpy times) in seconds, measured alternately on this run's clock."""
    return cpu_host.side_by_side(tile_fn, numpy_fn, repeat, CLOCK)


@tilecore.jit(out_idx=[-1])
def vector_add(n, block=1 << 16, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), C: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, block)) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] + B[bx * block + i]

    return main


@tilecore.jit(out_idx=[-1])
def softmax_reciprocal(M, N, block_M=8, dtype="float32"):
    """Row softmax as a CPU kernel author writes it: one reciprocal per row, then multiplies."""
    log2e = 1.4426950408889634

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
            x = T.alloc_fragment((block_M, N), dtype)
            row_max = T.alloc_fragment((block_M,), dtype)
            row_sum = T.alloc_fragment((block_M,), dtype)
            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, row_max, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.exp2((x[i, j] - row_max[i]) * log2e)
            T.reduce_sum(x, row_sum, dim=1)
            for i in T.Parallel(block_M):
                row_sum[i] = 1.0 / row_sum[i]
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] * row_sum[i]
            T.copy(x, Y[bx * block_M, 0])

    return main


# (block_M, block_N, block_K, num_stages) of examples/gemm.py's matmul: the common choices of
# issue 19; each should reach 0.9x numpy, the best 1.0x
GEMM_TILE_SIZES = (
    (64, 64, 32, 3),
    (128, 128, 64, 3),
    (64, 256, 64, 3),
    (128, 256, 128, 3),
    (256, 512, 128, 3),
    (64, 64, 64, 2),
)
GEMM_TILES = (256, 512, 128)  # for the compile-time figures
GEMM_BAR, GEMM_BEST_BAR = 0.9, 1.0


def gemm_kernel(n, tiles=GEMM_TILES + (3,)):
    from gemm import matmul

    bm, bn, bk, stages = tiles
    return matmul(n, n, n, bm, bn, bk, dtype="float32", accum="float32", num_stages=stages)


def gemm_lowering(n, tiles):
    """How tile-cpu lowers the matmul at these tiles: as one whole cache-blocked GEMM or block by block."""
    from gemm import matmul

    from tilecore.ir import nodes as N
    from tilecore.ir.visitor import walk_stmts
    from tilecore.lowering.whole_gemm import match
    from tilecore.runtime.api import lower

    bm, bn, bk, stages = tiles
    lowered, _ = lower(
        matmul.prim_func(n, n, n, bm, bn, bk, dtype="float32", accum="float32", num_stages=stages), target="cpu"
    )
    kernel = next(st for st in walk_stmts(lowered.body) if isinstance(st, N.Kernel))
    return "whole grid" if match(kernel) is not None else "block by block"


def gemm_runs(args, rng, n, record):
    """examples/gemm.py's matmul at every tile size, checked, then timed against a @ b."""
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    want = a.astype(np.float64) @ b
    for tiles in GEMM_TILE_SIZES:
        k = gemm_kernel(n, tiles)
        c = k(a, b)
        err = float(np.max(np.abs(c - want)) / np.max(np.abs(want)))
        assert err < 1e-5, f"gemm {tiles} wrong: {err}"
        tt, nt = side_by_side(lambda k=k: k(a, b), lambda: a @ b, args.repeat)
        bm, bn, bk, stages = tiles
        record(
            f"gemm fp32 {bm}x{bn}x{bk}" + (f" {stages} stages" if stages != 3 else ""),
            f"{n}^3",
            GEMM_BAR,
            tt,
            nt,
            err,
            tiles=list(tiles),
            lowering=gemm_lowering(n, tiles),
        )
    narrow_gemm_runs(args, rng, n, record)


def narrow_gemm_runs(args, rng, n, record):
    """examples/gemm.py's default: float16 (and bfloat16) in and out, float32 accumulation, its
    default 128x128x32 tiles. numpy has no half-precision BLAS, so the peer is numpy's float32
    GEMM of the same values (already converted: the conversion is not timed)."""
    import ml_dtypes
    from gemm import matmul

    for dtype, np_dtype in (("float16", np.float16), ("bfloat16", ml_dtypes.bfloat16)):
        a = rng.standard_normal((n, n)).astype(np_dtype)
        b = rng.standard_normal((n, n)).astype(np_dtype)
        a32, b32 = a.astype(np.float32), b.astype(np.float32)
        want = a32.astype(np.float64) @ b32
        k = matmul(n, n, n, 128, 128, 32, dtype=dtype, accum="float32")
        err = float(np.max(np.abs(k(a, b).astype(np.float64) - want)) / np.max(np.abs(want)))
        assert err < 2e-2, f"gemm {dtype} wrong: {err}"
        tt, nt = side_by_side(lambda k=k, a=a, b=b: k(a, b), lambda a=a32, b=b32: a @ b, args.repeat)
        record(
            f"gemm {dtype}->fp32 acc 128x128x32 (numpy: fp32)", f"{n}^3", GEMM_BAR, tt, nt, err, tiles=[128, 128, 32, 3]
        )
    int8_gemm_run(args, rng, n, record)


def int8_gemm_run(args, rng, n, record):
    """int8 in, int32 sums and C, 128x128x64 tiles (AMX hosts take tile_cpu.dot_gemm's AMX path,
    AVX-512 VNNI hosts its VNNI path). numpy has no int8 BLAS: the peer is numpy's float32 GEMM of
    the same values. The result must be exact."""
    sys.path.insert(0, os.path.join(ROOT, "plugins", "tile-cpu", "tests"))
    from cpu_gemm_cases import matmul_rows_first

    import tilecore

    a = rng.integers(-100, 100, (n, n)).astype(np.int8)
    b = rng.integers(-100, 100, (n, n)).astype(np.int8)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    k = tilecore.compile(matmul_rows_first(n, n, n, 128, 128, 64, "int8", "int32"), target="cpu")
    c = np.zeros((n, n), np.int32)
    k(a, b, c)
    assert (c == a.astype(np.int64) @ b.astype(np.int64)).all(), "gemm int8 wrong"
    tt, nt = side_by_side(lambda: k(a, b, c), lambda: a32 @ b32, args.repeat)
    record("gemm int8->int32 128x128x64 (numpy: fp32)", f"{n}^3", GEMM_BAR, tt, nt, 0.0, tiles=[128, 128, 64, 3])


def run(args):
    from layernorm import layernorm
    from softmax import softmax

    rng = np.random.default_rng()
    results = []
    big = not args.quick
    n_gemm = 2048 if big else 512
    rows, cols = (4096, 4096) if big else (1024, 1024)
    n_add = (1 << 24) if big else (1 << 20)

    def record(name, size, bar, tile_times, numpy_times, err, **extra):
        tile_t, numpy_t = median(tile_times), median(numpy_times)
        ratio = numpy_t / tile_t
        results.append(
            {
                "kernel": name,
                "size": size,
                "tilecore_ms": tile_t * 1e3,
                "numpy_ms": numpy_t * 1e3,
                "ratio": ratio,
                "best_of_ratio": min(numpy_times) / min(tile_times),
                "tilecore_runs_ms": [t * 1e3 for t in tile_times],
                "numpy_runs_ms": [t * 1e3 for t in numpy_times],
                "bar": bar,
                "meets_bar": ratio >= bar,
                "max_rel_error": err,
                **extra,
            }
        )
        print(
            f"{name:<32} {size:<10} tilecore {tile_t * 1e3:8.2f} ms   numpy {numpy_t * 1e3:8.2f} ms   "
            f"ratio {ratio:5.2f}x (best-of {min(numpy_times) / min(tile_times):5.2f}x; bar {bar}x) "
            f"{'ok' if ratio >= bar else 'BELOW BAR'}   max rel err {err:.2e}",
            flush=True,
        )

    def rel_err(got, want):
        return float(np.max(np.abs(got.astype(np.float64) - want) / (np.abs(want) + 1e-6)))

    gemm_runs(args, rng, n_gemm, record)
    best = max((r for r in results if r["kernel"].startswith("gemm fp32")), key=lambda r: r["ratio"])
    print(
        f"best GEMM tiles: {best['kernel']} {best['ratio']:.2f}x (bar {GEMM_BEST_BAR}x) "
        f"{'ok' if best['ratio'] >= GEMM_BEST_BAR else 'BELOW BAR'}",
        flush=True,
    )
    if args.gemm_only:
        return results

    # softmax over rows
    k = softmax(rows, cols, 8)
    x = rng.uniform(-4, 4, (rows, cols)).astype(np.float32)
    y = k(x)
    xd = x.astype(np.float64)
    e = np.exp(xd - xd.max(1, keepdims=True))
    err = rel_err(y, e / e.sum(1, keepdims=True))
    assert err < 1e-4, f"softmax wrong: {err}"

    def np_softmax():
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    t, nt = side_by_side(lambda: k(x), np_softmax, args.repeat)
    record("softmax fp32 (example)", f"{rows}x{cols}", 2.0, t, nt, err)

    k = softmax_reciprocal(rows, cols, 8)
    y = k(x)
    err = rel_err(y, e / e.sum(1, keepdims=True))
    assert err < 1e-4, f"softmax (reciprocal) wrong: {err}"
    t, nt = side_by_side(lambda: k(x), np_softmax, args.repeat)
    record("softmax fp32 (1/sum)", f"{rows}x{cols}", 2.0, t, nt, err)

    # layernorm
    k = layernorm(rows, cols, 8)
    w = rng.standard_normal(cols, dtype=np.float32)
    bias = rng.standard_normal(cols, dtype=np.float32)
    y = k(x, w, bias)
    mu = xd.mean(1, keepdims=True)
    var = ((xd - mu) ** 2).mean(1, keepdims=True)
    want = (xd - mu) / np.sqrt(var + 1e-5) * w + bias
    err = float(np.max(np.abs(y - want)) / np.max(np.abs(want)))
    assert err < 1e-4, f"layernorm wrong: {err}"

    def np_layernorm():
        mu = x.mean(axis=1, keepdims=True)
        d = x - mu
        var = (d * d).mean(axis=1, keepdims=True)
        return d / np.sqrt(var + 1e-5) * w + bias

    t, nt = side_by_side(lambda: k(x, w, bias), np_layernorm, args.repeat)
    record("layernorm fp32", f"{rows}x{cols}", 2.0, t, nt, err)

    # elementwise add
    k = vector_add(n_add)
    a = rng.standard_normal(n_add, dtype=np.float32)
    b = rng.standard_normal(n_add, dtype=np.float32)
    out = np.empty_like(a)
    assert np.array_equal(k(a, b), a + b)
    t, nt = side_by_side(lambda: k(a, b), lambda: np.add(a, b), args.repeat)
    record("add fp32", f"2^{n_add.bit_length() - 1}", 0.9, t, nt, 0.0)
    del out
    return results


COMPILE_SNIPPET = r"""
import os, sys, time
sys.path.insert(0, {examples!r})
t0 = time.perf_counter()
import tilecore
from gemm import matmul
func = matmul.prim_func(2048, 2048, 2048, {tiles}, dtype="float32", accum="float32") \
    if hasattr(matmul, "prim_func") else None
{preload}
t1 = time.perf_counter()
from tilecore.plugin import get_registry
get_registry()  # plugin discovery (imports every installed plugin): timed separately
t2 = time.perf_counter()
k = tilecore.compile(func, target="cpu", out_idx=[-1])
t3 = time.perf_counter()
k._launcher()  # load the library (a cache hit does it without TVM)
t4 = time.perf_counter()
print(f"{{t1 - t0:.4f}} {{t2 - t1:.4f}} {{t3 - t2:.4f}} {{t4 - t3:.4f}} {{int('tvm' in sys.modules)}}")
"""


def compile_times():
    """Fresh-process figures, each (hits: best of 3): a dict of seconds and whether a hit imported TVM.

    The cold process imports TVM before the timed compile (its import is not
    compile time); the cache-hit processes never import it themselves.
    """
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as cache:
        env["TILECORE_CACHE_DIR"] = cache
        out = []
        for i in range(4):  # one cold process, then three fresh processes that hit the cache
            code = COMPILE_SNIPPET.format(
                examples=os.path.join(ROOT, "examples"),
                tiles=", ".join(map(str, GEMM_TILES)),
                preload="import tvm" if i == 0 else "",
            )
            proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(proc.stderr)
            out.append([float(v) for v in proc.stdout.split()[-5:]])
    hits = out[1:]
    return {
        "gemm_cold_s": out[0][1] + out[0][2],  # discovery + compile, TVM already imported
        "gemm_cache_hit_fresh_process_s": min(h[2] for h in hits),  # compile() after discovery
        "library_load_fresh_process_s": min(h[3] for h in hits),  # first launcher, no TVM
        "import_tilecore_s": min(h[0] for h in hits),
        "plugin_discovery_s": min(h[1] for h in hits),
        "tvm_imported_on_cache_hit": any(h[4] for h in hits),
    }


def main():
    args = ARGS
    print(f"threads: {args.threads} (TVM pool and OpenBLAS)")
    results = run(args)
    times = {} if args.gemm_only else compile_times()
    if times:
        print(
            f"gemm compile: cold {times['gemm_cold_s']:.2f} s (bar 3 s; TVM imported before); cache hit in a "
            f"fresh process: compile {times['gemm_cache_hit_fresh_process_s'] * 1e3:.1f} ms + library load "
            f"{times['library_load_fresh_process_s'] * 1e3:.1f} ms (bar 50 ms), after importing tilecore "
            f"({times['import_tilecore_s'] * 1e3:.0f} ms) and plugin discovery "
            f"({times['plugin_discovery_s'] * 1e3:.0f} ms); TVM imported on a hit: "
            f"{times['tvm_imported_on_cache_hit']}"
        )
    report = {
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "threads": args.threads,
        "clock": args.clock,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "results": results,
        "compile": times,
        "gemm_tile_sizes": [list(t) for t in GEMM_TILE_SIZES],
        "gemm_bar": GEMM_BAR,
        "gemm_best_bar": GEMM_BEST_BAR,
        "pause_before_each_call_s": cpu_host.PAUSE_S,
        "note": "the machine may be shared with other jobs; ratio = median numpy time / median "
        "tilecore time of R alternating runs with a pause before each call (idle BLAS/TVM "
        "workers spin); best_of_ratio uses the fastest run of each",
    }
    os.makedirs(args.out, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    tag = ("-quick" if args.quick else "") + ("-gemm" if args.gemm_only else "")
    path = os.path.join(args.out, f"cpu_vs_numpy-{stamp}{tag}.json")
    with open(path, "w") as f:
        json.dump(report, f, indent=2)
    print(f"wrote {os.path.relpath(path, ROOT)}")


if __name__ == "__main__":
    main()
