"""Interpreter speed, as ratios only (no absolute times in tests; the figures live in the README).

1. Vectorization: a T.Parallel body over 256x256 elements must cost far less than
   256x a 16x16 one (a per-element Python loop would cost ~256x).
2. Overhead: the tiled GEMM 512x512x512 (64x64x32 tiles) through the interpreter
   against the same tile loop written directly in numpy (same copies, same
   float64 tile products): the interpreter may be a few times slower, not more.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import pytest

from tilecore.interp import compile_program, run
from tilecore.ir import nodes as N

sys.path.insert(0, os.path.dirname(__file__))
from test_interp_support import binop, buf, func, gemm_ir, kernel, load, mul, parallel, store, var  # noqa: E402

pytestmark = pytest.mark.skipif(os.environ.get("TILECORE_SKIP_SPEED") == "1", reason="TILECORE_SKIP_SPEED=1")


def best_of(fn, repeats=5):
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def elementwise(n):
    A, B = buf("A", (n, n)), buf("B", (n, n))
    i, j = var("i"), var("j")
    x = load(A, i, j)
    value = binop("+", mul(x, x), N.Call("exp", (x,), "float32"))
    return func([A, B], [kernel([1], ["bx"], [parallel(["i", "j"], [n, n], [store(B, [j, i], value)])])])


def test_parallel_bodies_are_vectorized():
    small, large = elementwise(16), elementwise(256)
    a_s, b_s = np.ones((16, 16), np.float32), np.zeros((16, 16), np.float32)
    a_l, b_l = np.ones((256, 256), np.float32), np.zeros((256, 256), np.float32)
    compile_program(small)
    compile_program(large)
    t_small = best_of(lambda: run(small, [a_s, b_s]))
    t_large = best_of(lambda: run(large, [a_l, b_l]))
    ratio = t_large / t_small
    assert ratio < 64, f"256x more elements cost {ratio:.0f}x: the Parallel body is not vectorized"


def numpy_tiled_gemm(a, b, c, bm=64, bn=64, bk=32):
    """The GEMM tile loop written directly in numpy: the floor for any interpreter of it."""
    M, K = a.shape
    N_ = b.shape[1]
    for by in range(-(-M // bm)):
        for bx in range(-(-N_ // bn)):
            a_s = np.empty((bm, bk), np.float32)
            b_s = np.empty((bk, bn), np.float32)
            acc = np.zeros((bm, bn), np.float32)
            for k in range(-(-K // bk)):
                a_s[...] = a[by * bm : (by + 1) * bm, k * bk : (k + 1) * bk]
                b_s[...] = b[k * bk : (k + 1) * bk, bx * bn : (bx + 1) * bn]
                acc[...] = (acc + a_s.astype(np.float64) @ b_s.astype(np.float64)).astype(np.float32)
            c[by * bm : (by + 1) * bm, bx * bn : (bx + 1) * bn] = acc


def test_gemm_interpretation_overhead_is_a_small_factor():
    f = gemm_ir(512, 512, 512, 64, 64, 32)
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-1, 1, (512, 512)).astype(np.float32), rng.uniform(-1, 1, (512, 512)).astype(np.float32)
    c1, c2 = np.zeros((512, 512), np.float32), np.zeros((512, 512), np.float32)
    compile_program(f)
    t_interp = best_of(lambda: run(f, [a, b, c1]), 3)
    t_numpy = best_of(lambda: numpy_tiled_gemm(a, b, c2), 3)
    np.testing.assert_allclose(c1, c2, rtol=1e-6, atol=1e-6)
    ratio = t_interp / t_numpy
    assert ratio < 8, f"the interpreter is {ratio:.1f}x slower than the same tile loop in numpy"
