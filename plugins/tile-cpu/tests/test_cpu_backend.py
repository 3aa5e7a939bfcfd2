"""tile-cpu against the reference interpreter: every language feature, hypothesis-drawn shapes and dtypes.

Each test compiles a DSL kernel for "cpu" and for "reference" through
`tilecore.testing.assert_matches_reference`, runs both on fresh random inputs
and compares with the per-dtype tolerances.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tilecore
import tilecore.language as T
from tilecore.testing import assert_matches_reference

RNG = np.random.default_rng(11)
SLOW = settings(
    max_examples=5,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
NP = {
    "float32": np.float32,
    "float64": np.float64,
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
    "int32": np.int32,
    "int8": np.int8,
    "int64": np.int64,
}


def rand(shape, dtype="float32", lo=-1.0, hi=1.0):
    if dtype.startswith("int") or dtype == "uint8":
        return RNG.integers(-50 if dtype != "uint8" else 0, 50, size=shape).astype(NP.get(dtype, dtype))
    return RNG.uniform(lo, hi, size=shape).astype(NP[dtype])


def gemm_kernel(M, N, K, bm, bn, bk, dtype, accum, ta=False, tb=False):
    from tilecore.testing import gemm_kernel as shared_gemm_kernel

    return shared_gemm_kernel(M, N, K, dtype, accum, ta, tb, block_M=bm, block_N=bn, block_K=bk)


@settings(SLOW, max_examples=10)
@given(
    M=st.integers(1, 130),
    N=st.integers(1, 130),
    K=st.integers(1, 100),
    # leftover register blocks: M % MR, N % NR, N below one vector, K shorter than the tile
    tiles=st.sampled_from([(32, 32, 16), (64, 64, 32), (16, 48, 8), (13, 40, 7), (64, 64, 64)]),
    dtypes=st.sampled_from(
        [
            ("float32", "float32"),
            ("float16", "float32"),
            ("bfloat16", "float32"),
            ("int8", "int32"),
            ("float64", "float64"),
        ]
    ),
    ta=st.booleans(),
    tb=st.booleans(),
)
def test_gemm_matches_reference(M, N, K, tiles, dtypes, ta, tb):
    dtype, accum = dtypes
    f = gemm_kernel(M, N, K, *tiles, dtype, accum, ta, tb)
    a = rand((K, M) if ta else (M, K), dtype)
    b = rand((N, K) if tb else (K, N), dtype)
    assert_matches_reference(f, [a, b], backend="cpu", out_idx=[-1])


def test_gemm_large_tiles_use_the_micro_kernel():
    f = gemm_kernel(256, 256, 256, 128, 128, 64, "float32", "float32")
    a, b = rand((256, 256)), rand((256, 256))
    c = tilecore.compile(f, target="cpu", out_idx=[-1])(a, b)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


@SLOW
@given(
    M=st.integers(1, 80),
    N=st.sampled_from([16, 24, 64, 100]),
    kind=st.sampled_from(["sum", "max", "min", "abssum", "absmax"]),
    dim=st.sampled_from([0, 1]),
    clear=st.booleans(),
    dtype=st.sampled_from(["float32", "float16", "int32"]),
)
def test_reductions_match_reference(M, N, kind, dim, clear, dtype):
    bm = 16
    out_n = N if dim == 0 else bm
    red = getattr(T, f"reduce_{kind}")

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), O: T.Tensor((T.ceildiv(M, bm) * out_n,), dtype)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            a = T.alloc_fragment((bm, N), dtype)
            o = T.alloc_fragment((out_n,), dtype)
            T.copy(A[bx * bm, 0], a)
            T.fill(o, 1)
            red(a, o, dim=dim, clear=clear)
            T.copy(o, O[bx * out_n])

    assert_matches_reference(main, [rand((M, N), dtype)], backend="cpu", out_idx=[-1])


@SLOW
@given(
    M=st.integers(1, 40),
    N=st.sampled_from([8, 32, 48]),
    dim=st.sampled_from([0, 1]),
    reverse=st.booleans(),
    dtype=st.sampled_from(["float32", "int32", "float16"]),
)
def test_cumsum_matches_reference(M, N, dim, reverse, dtype):
    bm = 8

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, bm)) as bx:
            a = T.alloc_shared((bm, N), dtype)
            T.copy(A[bx * bm, 0], a)
            T.cumsum(a, dim=dim, reverse=reverse)
            T.copy(a, B[bx * bm, 0])

    assert_matches_reference(main, [rand((M, N), dtype)], backend="cpu", out_idx=[-1])


@SLOW
@given(
    M=st.integers(1, 100), N=st.integers(1, 100), dtype=st.sampled_from(["float32", "float16", "bfloat16", "float64"])
)
def test_elementwise_math_partial_tiles(M, N, dtype):
    bm, bn = 32, 32

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            t = T.alloc_fragment((bm, bn), dtype)
            T.copy(A[by * bm, bx * bn], t)
            for i, j in T.Parallel(bm, bn):
                t[i, j] = (
                    T.sigmoid(t[i, j]) * T.exp(t[i, j])
                    + T.sqrt(T.abs(t[i, j]))
                    - T.tanh(t[i, j])
                    + T.exp2(t[i, j]) * T.log(T.abs(t[i, j]) + 1.0)
                    + T.rsqrt(t[i, j] * t[i, j] + 1.0)
                    + T.sin(t[i, j]) * T.cos(t[i, j])
                    + T.floor(t[i, j] * 4.0)
                    + T.ceil(t[i, j])
                    + T.log2(T.abs(t[i, j]) + 2.0)
                    + T.max(t[i, j], 0.25)
                    + T.min(t[i, j], -0.5)
                )
            T.copy(t, B[by * bm, bx * bn])

    assert_matches_reference(main, [rand((M, N), dtype)], backend="cpu", out_idx=[-1])


def test_exp_edge_values():
    n = 64

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(n):
                # exp2 and sigmoid compile alongside; `* 0.0` is NaN for inf (IEEE), so select it away
                B[i] = T.exp(A[i]) + T.if_then_else(A[i] < 100.0, T.exp2(A[i]) * 0.0 + T.sigmoid(A[i]) * 0.0, 0.0)

    a = np.array(
        [0.0, -0.0, 1.0, -1.0, 88.7, 89.0, -87.0, -103.0, -110.0, 200.0, -200.0, np.inf, -np.inf]
        + list(np.linspace(-20, 20, n - 13)),
        np.float32,
    )
    b = tilecore.compile(main, target="cpu", out_idx=[-1])(a)
    with np.errstate(over="ignore"):
        want = np.exp(a.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(b, want, rtol=3e-7, atol=0)


@SLOW
@given(n=st.integers(1, 300), dtype=st.sampled_from(["int32", "int8", "int64"]))
def test_integer_arithmetic_is_exact(n, dtype):
    @T.prim_func
    def main(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), C: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, 64)) as bx:
            for i in T.Parallel(64):
                if bx * 64 + i < n:
                    C[bx * 64 + i] = (
                        (A[bx * 64 + i] // B[bx * 64 + i]) * 3
                        + A[bx * 64 + i] % B[bx * 64 + i]
                        - (A[bx * 64 + i] ^ B[bx * 64 + i])
                        + T.abs(A[bx * 64 + i])
                    )

    a = rand(n, dtype)
    b = rand(n, dtype)
    b[b == 0] = 7
    assert_matches_reference(main, [a, b], backend="cpu", out_idx=[-1])


def test_atomics_across_parallel_blocks():
    n, bins, block = 4000, 16, 128

    @T.prim_func
    def main(
        V: T.Tensor((n,), "int32"),
        W: T.Tensor((n,), "float32"),
        H: T.Tensor((bins,), "int32"),
        S: T.Tensor((bins,), "float32"),
        X: T.Tensor((bins,), "float32"),
    ):
        with T.Kernel(T.ceildiv(n, block)) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    T.atomic_add(H[V[bx * block + i] % bins], 1)
                    T.atomic_add(S[V[bx * block + i] % bins], W[bx * block + i])
                    T.atomic_max(X[V[bx * block + i] % bins], W[bx * block + i])

    v = RNG.integers(0, 1000, n).astype(np.int32)
    w = RNG.integers(-100, 100, n).astype(np.float32)  # integral: exact in any order
    h = np.zeros(bins, np.int32)
    s = np.zeros(bins, np.float32)
    x = np.full(bins, -1e9, np.float32)
    tilecore.compile(main, target="cpu")(v, w, h, s, x)
    np.testing.assert_array_equal(h, np.bincount(v % bins, minlength=bins))
    np.testing.assert_array_equal(s, np.bincount(v % bins, weights=w, minlength=bins).astype(np.float32))
    want = np.full(bins, -1e9, np.float32)
    np.maximum.at(want, v % bins, w)
    np.testing.assert_array_equal(x, want)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64", "int64"])
def test_tile_atomic_add_partial_tile(dtype):
    @T.prim_func
    def main(A: T.Tensor((10, 8), dtype), O: T.Tensor((6,), dtype)):
        with T.Kernel(10) as bx:
            row = T.alloc_fragment((8,), dtype)
            T.copy(A[bx, 0:8], row)
            T.atomic_add(O[0:8], row)

    a = rand((10, 8), dtype, 0, 4).astype(np.float32).round().astype(NP[dtype])
    assert_matches_reference(main, [a, np.zeros(6, NP[dtype])], backend="cpu")


def test_runtime_if_serial_loop_alloc_var_and_unroll():
    n = 37

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), O: T.Tensor((2,), "float32")):
        with T.Kernel(1) as bx:
            acc = T.alloc_var("float32")
            acc = 0.0
            for k in T.serial(n):
                if A[k] > 0:
                    acc = acc + A[k]
                else:
                    acc = acc - 1.0
            O[0] = acc
            for u in T.unroll(4):
                O[1] = O[1] + A[u]

    assert_matches_reference(main, [rand(n), np.zeros(2, np.float32)], backend="cpu")


@pytest.mark.parametrize("rows", [1, 33, 90, 257])
def test_dynamic_shapes(rows):
    m = T.dynamic("m")
    block = 32

    @T.prim_func
    def main(A: T.Tensor((m, 8), "float32"), B: T.Tensor((m, 8), "float32")):
        with T.Kernel(T.ceildiv(m, block)) as bx:
            t = T.alloc_shared((block, 8), "float32")
            T.copy(A[bx * block, 0], t)
            for i, j in T.Parallel(block, 8):
                t[i, j] = t[i, j] * 3.0 + T.cast(i, "float32")
            T.copy(t, B[bx * block, 0])

    kernel = tilecore.compile(main, target="cpu", out_idx=[-1])
    a = rand((rows, 8))
    # LLVM may fuse a*3 + i into one FMA (one rounding instead of two): within an ulp of a*3 (|a*3| < 3)
    np.testing.assert_allclose(
        kernel(a), a * np.float32(3) + (np.arange(rows) % 32)[:, None].astype(np.float32), rtol=2e-7, atol=5e-7
    )


def test_select_casts_and_narrow_stores():
    @T.prim_func
    def main(
        A: T.Tensor((64,), "float32"),
        B: T.Tensor((64,), "bfloat16"),
        C: T.Tensor((64,), "int8"),
        D: T.Tensor((64,), "float16"),
    ):
        with T.Kernel(1) as bx:
            for i in T.Parallel(64):
                B[i] = T.if_then_else(A[i] > 0, A[i], -A[i] * 2.0)
                C[i] = T.cast(A[i] * 100.0, "int8")
                D[i] = T.cast(A[i], "float16") * T.cast(A[i], "float16") + T.cast(1.0, "float16")

    assert_matches_reference(main, [rand(64)], backend="cpu", out_idx=[1, 2, 3])


def test_print(capfd):
    @T.prim_func
    def main(A: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            T.print(bx * 10 + 3, msg="block")
            T.print(A[1], msg="a1")

    a = np.array([0, 2.5, 0, 0], np.float32)
    tilecore.compile(main, target="cpu")(a)
    out = capfd.readouterr().out.splitlines()
    assert out == ["[block (0,)] block: 3", "[block (0,)] a1: 2.5"]


def test_torch_tensors_zero_copy():
    torch = pytest.importorskip("torch")

    @T.prim_func
    def main(A: T.Tensor((16, 16), "bfloat16"), B: T.Tensor((16, 16), "float32")):
        with T.Kernel(1) as bx:
            for i, j in T.Parallel(16, 16):
                B[i, j] = T.cast(A[i, j], "float32") * 2.0

    a = torch.randn(16, 16).to(torch.bfloat16)
    b = torch.zeros(16, 16)
    tilecore.compile(main, target="cpu")(a, b)
    assert torch.equal(b, a.float() * 2)
    # numpy bfloat16 arrays (no DLPack in numpy) go through a zero-copy torch view
    an = np.asarray(a.float().numpy()).astype(ml_dtypes.bfloat16)
    bn = tilecore.compile(main, target="cpu", out_idx=[-1])(an)
    np.testing.assert_array_equal(bn, an.astype(np.float32) * 2)


def test_kernel_source_is_llvm_ir():
    f = gemm_kernel(64, 64, 64, 32, 32, 32, "float32", "float32")
    k = tilecore.compile(f, target="cpu", out_idx=[-1])
    assert "define" in k.source and "fmuladd" in k.source


def test_toolchain_status_shows_llvm_and_triple():
    from tile_cpu.plugin import toolchain_status

    status = toolchain_status()
    assert status.ok, status.summary
    details = dict(status.details)
    assert details["llvm"].isdigit() and "-" in details["target triple"]


def test_a_host_without_a_usable_tvm_still_names_its_device(monkeypatch):
    from tile_cpu import build
    from tile_cpu.plugin import toolchain_status

    def broken():
        raise ImportError("No module named 'tvm'")

    monkeypatch.setattr(build, "host_info", broken)
    status = toolchain_status()
    assert not status.ok and "No module named 'tvm'" in status.summary
    assert status.device == "host CPU"


def test_element_index_out_of_bounds_reports_the_users_line():
    from tilecore.diagnostics import TileRuntimeError

    @T.prim_func
    def main(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(16):
                B[i] = A[i + 1] * 2.0  # OOB-LINE

    kernel = tilecore.compile(main, target="cpu")
    with pytest.raises(TileRuntimeError) as info:
        kernel(rand(16), np.zeros(16, np.float32))
    text = str(info.value)
    assert "index out of bounds: A[16] but A has shape (16,)" in text
    assert "OOB-LINE" in text


def test_guarded_element_access_is_not_an_error():
    n = 100

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 32)) as bx:
            for i in T.Parallel(32):
                if bx * 32 + i < n:
                    B[bx * 32 + i] = T.if_then_else(bx * 32 + i + 1 < n, A[bx * 32 + i + 1], 0.0)

    assert_matches_reference(main, [rand(n)], backend="cpu", out_idx=[-1])


def test_third_party_rules_and_intrinsics_override_the_cpu_lowering(monkeypatch):
    """tilecore_lowering_rules / tilecore_intrinsics from another plugin reach the CPU lowering."""
    from tvm import tirx as tx

    from tilecore.plugin import hookimpl, register_plugin, unregister_plugin

    monkeypatch.setenv("TILECORE_CACHE", "0")  # the disk cache key does not cover other plugins

    class Overrides:
        @hookimpl
        def tilecore_intrinsics(self, backend, table):
            if backend.name == "cpu":
                table[("exp", "float32")] = lambda args: args[0] + tx.const(1.0, "float32")

        @hookimpl
        def tilecore_lowering_rules(self, backend, rules):
            if backend.name == "cpu":
                # fills become no-ops: the output keeps its previous contents
                rules["Fill"] = lambda lowering, stmt: tx.Evaluate(tx.const(0, "int32"))

    @T.prim_func
    def main(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32"), C: T.Tensor((16,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(16):
                B[i] = T.exp(A[i])
            T.fill(C, 5.0)

    name = register_plugin(Overrides(), name="test-overrides")
    try:
        a = rand(16)
        b = np.zeros(16, np.float32)
        c = np.full(16, 2.0, np.float32)
        tilecore.compile(main, target="cpu")(a, b, c)
    finally:
        unregister_plugin(name)
    np.testing.assert_array_equal(b, a + np.float32(1))
    np.testing.assert_array_equal(c, np.full(16, 2.0, np.float32))


def test_bool_and_narrow_integer_tensors_wrap_like_numpy():
    @T.prim_func
    def main(
        A: T.Tensor((64,), "int8"),
        B: T.Tensor((64,), "int8"),
        M: T.Tensor((64,), "bool"),
        C: T.Tensor((64,), "int8"),
        D: T.Tensor((64,), "bool"),
        U: T.Tensor((64,), "uint8"),
    ):
        with T.Kernel(1) as bx:
            for i in T.Parallel(64):
                C[i] = T.if_then_else(M[i], A[i] + B[i], A[i] * B[i])
                D[i] = (A[i] > B[i]) != M[i]
                U[i] = T.cast(A[i], "uint8") + T.cast(B[i], "uint8")

    a = RNG.integers(-128, 127, 64).astype(np.int8)
    b = RNG.integers(-128, 127, 64).astype(np.int8)
    m = RNG.integers(0, 2, 64).astype(bool)
    assert_matches_reference(main, [a, b, m], backend="cpu", out_idx=[3, 4, 5])


def test_intermediate_bfloat16_casts_round_exactly():
    """T.cast(x, "bfloat16") rounds even when the value is widened again (TVM keeps bf16 math in f32)."""

    @T.prim_func
    def main(
        A: T.Tensor((64,), "float32"),
        H: T.Tensor((64,), "float16"),
        O: T.Tensor((64,), "float32"),
        P: T.Tensor((64,), "float16"),
    ):
        with T.Kernel(1) as bx:
            for i in T.Parallel(64):
                O[i] = T.cast(A[i], "bfloat16")
                P[i] = T.cast(H[i], "bfloat16")

    a = rand(64, "float32", -2, 2)
    a[:4] = [np.nan, np.inf, -np.inf, 3.3895e38]
    h = rand(64, "float16", -2, 2)
    assert_matches_reference(main, [a, h], backend="cpu", out_idx=[2, 3], rtol=0, atol=0)
