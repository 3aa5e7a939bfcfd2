"""TileLang's spellings accepted by the language: aliases, .astype, T.clamp, loop kinds, no-op hints."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilecore
import tilecore.language as T

BACKENDS = ["reference", "cpu", "npu"]


def _backend(name):
    pytest.importorskip({"reference": "tilecore", "cpu": "tile_cpu", "npu": "tile_npu"}[name])
    return name


@T.prim_func
def spelled(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), T.dtype("float32")), C: T.Tensor((16,), "int32")):
    with T.Kernel(1) as bx:
        T.disable_warp_group_reg_alloc()
        for i in T.vectorized(16):
            T.assume(i < 16)
            B[i] = T.clamp(A[i], -1.0, 1.0) + T.Cast(T.float, T.floordiv(i, 4)) + A[i].astype(T.int32)
        for i in T.Serial(16):
            C[i] = T.floormod(i - 5, 3) + T.floordiv(7, 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_aliases_mean_what_their_long_forms_mean(backend):
    a = np.linspace(-2.5, 2.5, 16).astype(np.float32)
    b, c = tilecore.compile(spelled, target=_backend(backend), out_idx=[1, 2])(a)
    np.testing.assert_allclose(b, np.clip(a, -1, 1) + np.arange(16) // 4 + np.trunc(a), rtol=1e-6)
    np.testing.assert_array_equal(c, (np.arange(16) - 5) % 3 + 3)


def test_python_level_values_compute_at_parse_time():
    assert T.floordiv(-7, 2) == -4 and T.floormod(-7, 2) == 1
    assert T.float == "float32" and T.dtype("half") == "float16" and T.Serial is T.serial
    assert isinstance(T.dtype("bf16"), T.DType) and T.dtype("bf16").as_torch is not None
    annotation = T.dtype | None  # TileLang signatures annotate `dtype: T.dtype | None`
    assert annotation is not None


@settings(max_examples=8, deadline=None)
@given(lo=st.floats(-4, 0, width=32), width=st.floats(0, 4, width=32))
def test_clamp_against_numpy_on_the_reference(lo, width):
    hi = np.float32(lo + width)

    @T.prim_func
    def clamp_k(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(8):
                B[i] = T.clamp(A[i], lo, hi)

    a = np.array([-5, -1, -0.5, 0, 0.25, 1, 3, np.nan], np.float32)
    b = tilecore.compile(clamp_k, target="reference", out_idx=[1])(a)
    np.testing.assert_array_equal(b, np.minimum(np.maximum(a, np.float32(lo)), hi))


def _kernel_using(name):
    return f"""
import tilecore.language as T

@T.prim_func
def k(A: T.Tensor((4,), "float32")):
    with T.Kernel(1) as bx:
        bar = T.{name}(1)
"""


@pytest.mark.parametrize("name", ["alloc_barrier", "tma_copy", "mbarrier_wait_parity", "tcgen05_gemm", "wgmma_gemm"])
def test_vendor_primitives_the_cuda_plugin_declares_are_unsupported_at_the_line(name):
    pytest.importorskip("tile_cuda")
    from tile_cuda.tilelang_names import TILELANG_NAMES
    from tilecore.diagnostics import UnsupportedFeatureError
    from tilecore.frontend.parser import parse_source

    assert TILELANG_NAMES.declares_primitive(name)
    with pytest.raises(UnsupportedFeatureError) as info:
        parse_source(_kernel_using(name))
    assert f"T.{name}, a TileLang primitive specific to the hardware of backend 'cuda'" in str(info.value)
    assert TILELANG_NAMES.primitive_note in str(info.value)
    assert info.value.span.line == 7
    with pytest.raises(UnsupportedFeatureError):
        getattr(T, name)
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        T.not_a_name
    assert not hasattr(T, "tma_copy")  # still an AttributeError for hasattr/getattr defaults


def test_without_the_declaring_plugin_a_vendor_primitive_is_an_unknown_name_at_the_line(monkeypatch):
    from tilecore.diagnostics import TileCompileError, UnsupportedFeatureError
    from tilecore.frontend.parser import parse_source
    from tilecore.plugin import reset_plugins

    monkeypatch.delenv("TILECORE_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.setenv("TILECORE_PLUGINS", "npu")
    reset_plugins()
    try:
        with pytest.raises(TileCompileError) as info:
            parse_source(_kernel_using("wgmma_gemm"))
        assert not isinstance(info.value, UnsupportedFeatureError)
        assert "has no attribute 'wgmma_gemm'" in str(info.value) and info.value.span.line == 7
    finally:
        monkeypatch.undo()
        reset_plugins()


@pytest.mark.parametrize("name", ["float8_e4m3", "float8_e8m0fnu", "uint32"])
def test_tilelang_dtypes_tilecore_lacks_are_unsupported_by_name(name):
    from tilecore.diagnostics import UnsupportedFeatureError

    with pytest.raises(UnsupportedFeatureError, match=f"the dtype T.{name}"):
        getattr(T, name)


@pytest.mark.parametrize("backend", BACKENDS)
def test_atomic_add_memory_order_is_a_hint(backend):
    @T.prim_func
    def count(A: T.Tensor((8,), "float32"), S: T.Tensor((1,), "float32")):
        with T.Kernel(4) as bx:
            for i in T.serial(2):
                T.atomic_add(S[0], A[bx * 2 + i], memory_order="relaxed")

    a = np.arange(8, dtype=np.float32)
    s = np.zeros(1, np.float32)
    tilecore.compile(count, target=_backend(backend))(a, s)
    assert s[0] == a.sum()


def test_atomic_add_return_prev_is_unsupported_and_a_bad_order_is_named():
    from tilecore.diagnostics import TileCompileError, UnsupportedFeatureError

    with pytest.raises(UnsupportedFeatureError, match="return_prev=True"):

        @T.prim_func
        def prev(S: T.Tensor((1,), "float32")):
            with T.Kernel(1) as bx:
                T.atomic_add(S[0], 1.0, return_prev=True)

    # TileLang's form that uses the old value names the feature too (not "a statement has no value")
    with pytest.raises(UnsupportedFeatureError, match=r"atomic_add\(\.\.\., return_prev=True\)") as got:

        @T.prim_func
        def taken(S: T.Tensor((1,), "float32"), P: T.Tensor((1,), "float32")):
            with T.Kernel(1) as bx:
                P[0] = T.atomic_add(S[0], 1.0, return_prev=True)

    assert got.value.span is not None and "P[0] = T.atomic_add" in str(got.value)

    with pytest.raises(TileCompileError, match="memory_order must be one of"):

        @T.prim_func
        def bad(S: T.Tensor((1,), "float32")):
            with T.Kernel(1) as bx:
                T.atomic_add(S[0], 1.0, memory_order="sometimes")


@pytest.mark.parametrize("backend", BACKENDS)
def test_tfloat32_tensors_are_float32_computed_in_full_precision(backend):
    """TileLang's T.tfloat32 (float32 storage, TF32 tensor-core GEMMs there) is float32 here."""
    assert T.tfloat32 == "float32" and T.dtype("tfloat32") == "float32"

    @T.prim_func
    def mm(A: T.Tensor((16, 8), T.tfloat32), B: T.Tensor((8, 16), "tfloat32"), C: T.Tensor((16, 16), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((16, 8), T.tfloat32)
            b = T.alloc_shared((8, 16), T.tfloat32)
            c = T.alloc_fragment((16, 16), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.gemm(a, b, c, clear_accum=True)
            T.copy(c, C)

    rng = np.random.default_rng(3)
    x, y = rng.random((16, 8), np.float32), rng.random((8, 16), np.float32)
    out = tilecore.compile(mm, target=backend, out_idx=[-1])(x, y)
    np.testing.assert_allclose(out, x.astype(np.float64) @ y, rtol=1e-5)  # not TF32's 10-bit mantissa


def test_tensor_subscript_spelling_and_a_bare_dynamic_dim():
    """TileLang's `T.Tensor[shape, dtype]` and `T.Tensor((n), dtype)` (a bare dim, not a tuple)."""
    n = T.dynamic("n")

    @T.prim_func
    def scale(A: T.Tensor[[n, 4], T.float32], S: T.Tensor((n), "float32")):
        with T.Kernel(T.ceildiv(n, 8)) as bx:
            for i in T.Parallel(8):
                if bx * 8 + i < n:
                    S[bx * 8 + i] = A[bx * 8 + i, 0] + A[bx * 8 + i, 3]

    assert [p.shape for p in scale.params] == [(scale.dyn_vars[0], 4), (scale.dyn_vars[0],)]
    a = np.random.default_rng(5).random((11, 4)).astype(np.float32)
    out = tilecore.compile(scale, target="reference", out_idx=[-1])(a)
    np.testing.assert_allclose(out, a[:, 0] + a[:, 3], rtol=1e-6)

    @tilecore.jit(target="reference")
    def eager_sum(X):
        m = T.const("m")
        X: T.Tensor[(m, 2), "float32"]  # noqa: F821 (a dtype string, not a forward reference)
        Y = T.empty((m,), "float32")
        with T.Kernel(m) as bx:
            Y[bx] = X[bx, 0] + X[bx, 1]
        return Y

    x = np.arange(10, dtype=np.float32).reshape(5, 2)
    np.testing.assert_array_equal(eager_sum(x), x.sum(axis=1))


@pytest.mark.parametrize("name", ["shfl_xor", "shfl_sync", "warp_reduce_sum", "ballot_sync", "get_lane_idx"])
def test_warp_level_primitives_are_named_as_unsupported_at_the_line(name):
    """TileLang's warp shuffles, votes and warp reductions are refused by name, with the portable way
    (shared memory in statement lockstep), not as an unknown attribute."""
    from tilecore.diagnostics import UnsupportedFeatureError

    assert not hasattr(T, name)
    with pytest.raises(UnsupportedFeatureError, match=f"T.{name}: warp-level primitives") as got:

        @T.prim_func
        def k(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                t = T.get_thread_binding()
                B[t] = getattr(T, name)(A[t], 1)

    assert "T.alloc_shared" in str(got.value) and got.value.span is not None
