"""int4 (docs/semantics.md "int4"): tensors passed packed two per int8 byte, tiles of int4 values,
computed as int8; the reference interpreter unpacks by itself, every other backend runs the core
rewrite (passes/int4_storage.py). Results are checked against numpy integer math on values this
file unpacks on its own."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tilecore
import tilecore.language as T
from tilecore.diagnostics import TileCompileError, TileRuntimeError, UnsupportedFeatureError
from tilecore.ir import nodes as N
from tilecore.ir.types import promote
from tilecore.ir.visitor import walk
from tilecore.testing import gemm_kernel, pack_int4


def _targets():
    import importlib.util

    installed = [t for t in ("cpu", "npu") if importlib.util.find_spec(f"tile_{t}") is not None]
    return ["reference"] + installed


TARGETS = _targets()
# the checks whose code is the core's alone (argument checks, the rewrite's indexing) skip the cpu's
# compile time: the npu runs the same rewritten kernels
QUICK_TARGETS = [t for t in TARGETS if t != "cpu"]


def unpacked(packed: np.ndarray) -> np.ndarray:
    """The int4 values of a packed array, by nibble arithmetic on Python ints (not the code under test)."""
    flat = [
        [((b & 0xF) ^ 8) - 8 if half == 0 else (((b >> 4) & 0xF) ^ 8) - 8 for b in row for half in (0, 1)]
        for row in packed.reshape(-1, packed.shape[-1]).view(np.uint8).astype(int).tolist()
    ]
    return np.array(flat, dtype=np.int64).reshape(packed.shape[:-1] + (2 * packed.shape[-1],))


def test_packing_order_and_sign_extension():
    values = np.array([[1, -1, -8, 7, 0, 5]], dtype=np.int8)
    packed = pack_int4(values)
    assert packed.dtype == np.int8 and packed.shape == (1, 3)
    assert packed.view(np.uint8).tolist() == [[0xF1, 0x78, 0x50]]  # element 0 low nibble, element 1 high
    np.testing.assert_array_equal(unpacked(packed), values)


def test_int4_is_computed_in_int8():
    assert T.int4 == "int4" and promote("int4", "int4") == "int8" and promote("int4", "int32") == "int32"

    @T.prim_func
    def k(A: T.Tensor((4,), T.int4), B: T.Tensor((4,), "int32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(4):
                B[i] = -A[i] * 3 + T.abs(A[i])

    assert all(not isinstance(n, (N.BinOp, N.UnaryOp, N.Call, N.Const)) or n.dtype != "int4" for n in walk(k))
    with pytest.raises(AttributeError, match="uint4"):
        T.uint4  # noqa: B018 - still a clear unsupported-dtype error


def _nt_gemm(M, N, K, bm=16, bn=16, bk=32):
    return gemm_kernel(M, N, K, "int4", "int32", transpose_B=True, block_M=bm, block_N=bn, block_K=bk)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape", [(32, 32, 64), (40, 24, 70)])
def test_gemm_of_packed_int4_tensors_is_exact(target, shape):
    M, N, K = shape
    if target != "reference" and shape == (32, 32, 64):
        pytest.skip("the ragged shape covers the compiled backends (test time)")
    rng = np.random.default_rng(K)
    a, b = rng.integers(-8, 8, (M, K)), rng.integers(-8, 8, (N, K))
    kernel = tilecore.compile(_nt_gemm(M, N, K), target=target, out_idx=-1)
    c = kernel(pack_int4(a), pack_int4(b))
    np.testing.assert_array_equal(c, a @ b.T)


@pytest.mark.parametrize("target", QUICK_TARGETS)
def test_transposed_a_packs_along_m(target):
    M, N, K = 24, 16, 20  # A is (K, M): its rows hold M values, the ragged tile edge crosses bytes
    rng = np.random.default_rng(1)
    a, b = rng.integers(-8, 8, (K, M)), rng.integers(-8, 8, (K, N))
    kernel = tilecore.compile(
        gemm_kernel(M, N, K, "int4", "int32", transpose_A=True, block_M=16, block_N=16, block_K=16),
        target=target,
        out_idx=-1,
    )
    np.testing.assert_array_equal(kernel(pack_int4(a), pack_int4(b)), a.T @ b)


def _elementwise():
    @T.prim_func
    def k(A: T.Tensor((6, 8), T.int4), B: T.Tensor((6, 8), "int32"), C: T.Tensor((6, 8), "int32")):
        with T.Kernel(1, threads=32) as bx:
            t = T.alloc_fragment((6, 8), T.int4)
            s = T.alloc_shared((4, 8), T.int4)
            for i, j in T.Parallel(6, 8):
                B[i, j] = A[i, j] * 3 - T.cast(A[i, j] * 5, T.int4)  # int8 product, wrapped
                t[i, j] = A[i, j] + 5  # int8 arithmetic, then wrapped into int4
            T.copy(A[4, 0], s)  # rows 4, 5 and two rows past the tensor (read as 0)
            for i, j in T.Parallel(6, 8):
                C[i, j] = t[i, j] * 10 + T.if_then_else(i < 4, s[i % 4, j], T.int4(9))

    return k


def _wrap(x):
    return ((x + 8) % 16) - 8


@pytest.mark.parametrize("target", TARGETS)
def test_element_reads_tile_stores_and_partial_copies(target):
    a = np.random.default_rng(2).integers(-8, 8, (6, 8))
    kernel = tilecore.compile(_elementwise(), target=target, out_idx=[1, 2])
    b, c = kernel(pack_int4(a))
    np.testing.assert_array_equal(b, a * 3 - _wrap(a * 5))
    tile = np.zeros((4, 8), dtype=np.int64)
    tile[:2] = a[4:]
    far = np.where(np.arange(6)[:, None] < 4, tile[np.arange(6) % 4], _wrap(9))
    np.testing.assert_array_equal(c, _wrap(a + 5) * 10 + far)


def test_eager_style_reads_sizes_from_the_packed_arrays():
    @tilecore.jit(target="reference")
    def nt(A, B, block: int = 16):
        M, N, K = T.const("M, N, K")
        A: T.Tensor((M, K), T.int4)
        B: T.Tensor((N, K), T.int4)
        C = T.empty((M, N), T.int32)
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block)) as (bx, by):
            A_s = T.alloc_shared((block, 32), T.int4)
            B_s = T.alloc_shared((block, 32), T.int4)
            C_f = T.alloc_fragment((block, block), T.int32)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, 32), num_stages=2):
                T.copy(A[by * block, k * 32], A_s)
                T.copy(B[bx * block, k * 32], B_s)
                T.gemm(A_s, B_s, C_f, transpose_B=True)
            T.copy(C_f, C[by * block, bx * block])
        return C

    rng = np.random.default_rng(5)
    a, b = rng.integers(-8, 8, (20, 36)), rng.integers(-8, 8, (18, 36))
    np.testing.assert_array_equal(nt(pack_int4(a), pack_int4(b)), a @ b.T)  # K = 36, from 18 bytes a row


_HYPOTHESIS_KERNELS: dict = {}


@settings(max_examples=6, deadline=None)
@given(
    hnp.arrays(np.int8, (20, 9), elements=st.integers(-128, 127)),
    hnp.arrays(np.int8, (12, 9), elements=st.integers(-128, 127)),
)
def test_any_packed_bytes_multiply_as_their_nibbles(a, b):
    """Every byte is two int4 values: sign extension of both nibbles, on the rewrite and the interpreter."""
    want = unpacked(a) @ unpacked(b).T
    for target in QUICK_TARGETS:
        if target not in _HYPOTHESIS_KERNELS:
            _HYPOTHESIS_KERNELS[target] = tilecore.compile(_nt_gemm(20, 12, 18, bk=16), target=target, out_idx=-1)
        np.testing.assert_array_equal(_HYPOTHESIS_KERNELS[target](a, b), want)


# ---- errors


def test_an_odd_last_dimension_is_an_error_at_the_parameter():
    with pytest.raises(TileCompileError, match="int4 tensor 'A' has an odd last dimension \\(63\\)") as info:
        tilecore.compile(_nt_gemm(32, 32, 63), target="reference", out_idx=-1)
    assert "A: T.Tensor(" in str(info.value)  # the caret points at the parameter


def test_a_dynamic_last_dimension_is_refused():
    K = T.dynamic("K")

    @T.prim_func
    def k(A: T.Tensor((4, K), T.int4), B: T.Tensor((4,), "int32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(4):
                B[i] = A[i, 0]

    with pytest.raises(UnsupportedFeatureError, match="int4 tensor 'A' with a dynamic last dimension"):
        tilecore.compile(k, target="reference", out_idx=-1)


@pytest.mark.parametrize("target", QUICK_TARGETS)
def test_arguments_must_be_the_packed_int8_array(target):
    kernel = tilecore.compile(_nt_gemm(32, 16, 64), target=target, out_idx=-1)
    a, b = np.zeros((32, 32), np.int8), np.zeros((16, 32), np.int8)
    with pytest.raises(TileRuntimeError, match="expected dtype int8 \\(int4 values packed two per byte"):
        kernel(a.view(np.uint8), b)
    with pytest.raises(TileRuntimeError, match="expected shape \\(32, 32\\) \\(int4 values packed.*got \\(32, 64\\)"):
        kernel(np.zeros((32, 64), np.int8), b)  # the unpacked shape
    assert kernel(a, b).shape == (32, 16)


def test_writing_an_int4_tensor_is_refused_at_the_line():
    @T.prim_func
    def k(A: T.Tensor((4, 8), "int8"), B: T.Tensor((4, 8), T.int4)):
        with T.Kernel(1) as bx:
            t = T.alloc_shared((4, 8), T.int4)
            T.copy(A, t)
            T.copy(t, B)

    with pytest.raises(UnsupportedFeatureError, match="writing the int4 tensor 'B'") as info:
        tilecore.compile(k, target="reference")
    assert "T.copy(t, B)" in str(info.value)
    with pytest.raises(UnsupportedFeatureError, match="the int4 output 'B'"):
        tilecore.compile(k, target="reference", out_idx=-1)


def test_reductions_into_int4_tiles_are_refused():
    @T.prim_func
    def k(A: T.Tensor((4, 8), "int8"), B: T.Tensor((4,), "int32")):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((4, 8), "int8")
            r = T.alloc_fragment((4,), T.int4)
            T.copy(A, t)
            T.reduce_sum(t, r, dim=1)
            T.copy(r, B)

    with pytest.raises(UnsupportedFeatureError, match="T.reduce_sum into the int4 tile 'r'"):
        tilecore.compile(k, target="reference", out_idx=-1)
