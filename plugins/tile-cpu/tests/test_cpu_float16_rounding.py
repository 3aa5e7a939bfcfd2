"""float16 arithmetic on cpu is bit-identical to the reference (IEEE half, rounded per operation).

A float16 constant that float16 cannot hold exactly (`A[i, j] * 0.3`) reached LLVM as
float32(0.3) = 0.30000001 instead of the float16 0.300048828125: TVM keeps a FloatImm's
value as a double and folded `Cast("float32", FloatImm("float16", 0.3))` at float32
precision. About 5% of the elements of `(a * 0.3 + b) * c - a` and 23% of a float16
name `x = a * 0.3` used twice came out one or more float16 ulps off. The per-operation
roundings themselves were kept (fptrunc after each float32 operation, or LLVM's
half-precision vector ops); `tir_const` now rounds each constant to its dtype.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilecore
import tilecore.language as T

# none of these is a float16 value (0.3 and 0.7 round up to float16, 0.1, 1.1 and 1/3 down)
SCALES = [0.3, 0.1, 0.7, 1.1, 1.0 / 3.0]


def _chain(out_dtype: str, scale: float):
    """Out = (A * scale + B) * C - A in float16, stored as `out_dtype` (vectorized: T.Parallel)."""

    @T.prim_func
    def chain(
        A: T.Tensor((16, 8), "float16"),
        B: T.Tensor((16, 8), "float16"),
        C: T.Tensor((16, 8), "float16"),
        Out: T.Tensor((16, 8), out_dtype),
    ):
        with T.Kernel(1) as bx:
            for i, j in T.Parallel(16, 8):
                Out[i, j] = T.cast((A[i, j] * scale + B[i, j]) * C[i, j] - A[i, j], out_dtype)

    return chain


def _named(parallel: bool, scale: float):
    """A float16 name `x = A * scale` used twice, in a T.Parallel (vector) or serial (scalar) loop."""
    if parallel:

        @T.prim_func
        def named(A: T.Tensor((16, 8), "float16"), Out: T.Tensor((16, 8), "float32")):
            with T.Kernel(1) as bx:
                for i, j in T.Parallel(16, 8):
                    x_v = A[i, j] * scale
                    Out[i, j] = T.cast(x_v * 3.0 + x_v, "float32")

        return named

    @T.prim_func
    def named_serial(A: T.Tensor((16, 8), "float16"), Out: T.Tensor((16, 8), "float32")):
        with T.Kernel(1) as bx:
            for i in T.serial(16):
                for j in T.serial(8):
                    x_v = A[i, j] * scale
                    Out[i, j] = T.cast(x_v * 3.0 + x_v, "float32")

    return named_serial


def _inputs(seed: int, count: int, magnitude: float):
    rng = np.random.default_rng(seed)
    return [(rng.uniform(-4, 4, (16, 8)) * magnitude).astype(np.float16) for _ in range(count)]


def _bit_exact(func, inputs):
    """The cpu result, asserted bit-identical to the reference's; returns both."""
    got = np.asarray(tilecore.compile(func, target="cpu", out_idx=[-1])(*inputs))
    want = np.asarray(tilecore.compile(func, target="reference", out_idx=[-1])(*inputs))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))
    return got, want


@settings(max_examples=6, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    out_dtype=st.sampled_from(["float16", "float32"]),
    scale=st.sampled_from(SCALES),
    magnitude=st.sampled_from([1.0, 1e-3, 100.0]),
)
def test_a_float16_chain_with_an_inexact_constant_is_bit_exact(seed, out_dtype, scale, magnitude):
    a, b, c = _inputs(seed, 3, magnitude)
    _, want = _bit_exact(_chain(out_dtype, scale), [a, b, c])
    # the reference is IEEE half arithmetic rounded per operation, as numpy's float16
    h = np.float16
    with np.errstate(over="ignore", invalid="ignore"):
        numpy_half = ((a * h(scale) + b) * c - a).astype(out_dtype)
    np.testing.assert_array_equal(want, numpy_half)


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 2**16), parallel=st.booleans(), scale=st.sampled_from(SCALES))
def test_a_float16_name_scaled_by_an_inexact_constant_is_bit_exact(seed, parallel, scale):
    (a,) = _inputs(seed, 1, 1.0)
    _bit_exact(_named(parallel, scale), [a])


def test_the_float16_constant_reaches_the_code_rounded():
    # float16(0.3) is 0x34CD; float32(0.3) widened would be 0x3FD3333340000000
    source = tilecore.compile(_named(True, 0.3), target="cpu", out_idx=[-1]).source
    assert "0x3FD3333340000000" not in source
    assert "0xH34CD" in source or "0x3FD3340000000000" in source


@pytest.mark.parametrize("target", ["cpu:sapphirerapids", "cpu:emeraldrapids"])
def test_native_half_arithmetic_is_off_where_the_cpu_has_it(target):
    """AVX512-FP16 lets LLVM fuse a float16 multiply and add into one rounding (vfmadd...ph): on
    an Emerald Rapids host 25% of the chain's elements came out one ulp off the reference. tile-cpu
    turns the feature off (half arithmetic via float32, rounded per operation); a target that names
    the feature itself keeps it. The assembly tells, with or without such a host."""
    import re

    from tile_cpu.target import describe

    assert "-avx512fp16" in describe(target)["mattr"]
    assert "-avx512fp16" not in describe(f"{target},+avx512fp16")["mattr"]
    assert "-fullfp16" in describe("cpu:neoverse-v2")["mattr"]

    def half_ops(t):
        asm = tilecore.compile(_chain("float16", 0.3), target=t, out_idx=[-1], source="asm").source
        return set(re.findall(r"\bv(?:fn?m(?:add|sub)\d+|add|mul|sub)ph\b", asm))

    assert not half_ops(target)
    assert half_ops(f"{target},+avx512fp16")  # (the check would see them)
