"""Interpreter speed figures: `python benchmarks/interp_speed.py`.

Times tilecore.interp.run on the issue's two bars: GEMM 512x512x512 fp32 with
64x64x32 tiles, and FlashAttention forward with S=1024, D=64 (B=1, H=1, fp16
inputs, fp32 accumulation; causal and not). Each figure is the best of a few
runs on fresh random inputs, after one warm-up run that also builds the
interpreter's closures (reported separately); results are checked against numpy
before timing. The kernels are the examples' own (examples/gemm.py and
examples/flash_attention.py); the ratio column is the numpy formula's time over
the interpreter's (the interpreter runs the tiled kernel, numpy one fused call).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np

from tilecore.interp import compile_program, np_dtype, run

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
import flash_attention  # noqa: E402
import gemm  # noqa: E402


def attention_reference(q, k, v, is_causal):
    """The numpy formula (float64), the peer the interpreter is compared with."""
    return flash_attention.reference(q, k, v, is_causal)


def _time(func, make_args, repeats):
    """(seconds of the first run incl. closure building, best of `repeats` later runs, last args)."""
    args = make_args()
    start = time.perf_counter()
    compile_program(func)
    run(func, args)
    first = time.perf_counter() - start
    best = float("inf")
    for _ in range(repeats):
        args = make_args()
        start = time.perf_counter()
        run(func, args)
        best = min(best, time.perf_counter() - start)
    return first, best, args


def _best(fn, repeats):
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def measure(repeats: int = 3):
    """[(label, first-run seconds, best seconds, max relative error)] for the issue's bars."""
    rng = np.random.default_rng()
    rows = []
    f = gemm.matmul.prim_func(512, 512, 512, 64, 64, 32, dtype="float32", accum="float32")

    def gemm_args():
        return [rng.uniform(-1, 1, (512, 512)).astype(np.float32) for _ in range(2)] + [
            np.zeros((512, 512), np.float32)
        ]

    first, best, (a, b, c) = _time(f, gemm_args, repeats)
    ref = a.astype(np.float64) @ b
    peer = _best(lambda: a @ b, repeats)
    rows.append(
        (
            "GEMM 512x512x512 fp32, tiles 64x64x32",
            first,
            best,
            float(np.abs(c - ref).max() / np.abs(ref).max()),
            peer / best,
        )
    )
    for causal in (False, True):
        f = flash_attention.flashattn.prim_func(1, 1, 1024, 64, causal, dtype="float16")
        shape = (1, 1024, 1, 64)

        def fa_args():
            return [rng.uniform(-1, 1, shape).astype(np_dtype("float16")) for _ in range(3)] + [
                np.zeros(shape, np.float16)
            ]

        first, best, (q, k, v, o) = _time(f, fa_args, repeats)
        ref = attention_reference(q, k, v, causal)
        peer = _best(lambda: attention_reference(q, k, v, causal), repeats)
        rows.append(
            (
                f"FlashAttention fwd B=1 H=1 S=1024 D=64 fp16 {'causal' if causal else 'full'}",
                first,
                best,
                float(np.abs(o.astype(np.float64) - ref).max() / np.abs(ref).max()),
                peer / best,
            )
        )
    return rows


def report(rows) -> str:
    lines = [
        f"tilecore reference interpreter speed ({platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, numpy {np.__version__}, Python {platform.python_version()})",
        "command: python benchmarks/interp_speed.py",
        f"{'kernel':<58} {'first run':>10} {'best run':>10} {'max rel err':>12} {'numpy/interp':>13}",
    ]
    for label, first, best, err, ratio in rows:
        lines.append(f"{label:<58} {first:>9.3f}s {best:>9.3f}s {err:>12.2e} {ratio:>12.2f}x")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Time the reference interpreter on the issue's bars.")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None, help="also write the figures to this file")
    args = parser.parse_args(argv)
    text = report(measure(args.repeats))
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
