"""Regressions from conformance runs on GPUs (cuda:sm_90a, execute tier: seed 12 on an H200, later
seeds where a kernel names one): the generated CUDA text at the compile tier here, the values against
the reference interpreter on a GPU host."""

import re

import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tile_cuda import plugin, toolchain
from tilecore.plugin.backend import TileModule

needs_compiler = pytest.mark.skipif(
    toolchain.find_nvcc() is None and toolchain.find_nvrtc() is None, reason="no nvcc / NVRTC here"
)


def codegen(func, **options):
    be = plugin.make_backend()
    return plugin.tilecore_codegen(backend=be, module=TileModule(func, "cuda:sm_90a"), options=options)


@T.prim_func
def float_math(
    X: T.Tensor((256,), "float32"),
    E: T.Tensor((256,), "float32"),
    E2: T.Tensor((256,), "float32"),
    L: T.Tensor((256,), "float32"),
):
    with T.Kernel(1, threads=256) as bx:
        for i in T.Parallel(256):
            E[i] = T.exp(X[i])
            E2[i] = T.exp2(X[i])
            L[i] = T.log(T.abs(X[i]))


@T.prim_func
def other_math(X: T.Tensor((64,), "float32"), O: T.Tensor((6, 64), "float32")):
    with T.Kernel(1, threads=64) as bx:
        for i in T.Parallel(64):
            O[0, i] = T.tanh(X[i])
            O[1, i] = T.sigmoid(X[i])
            O[2, i] = T.sin(X[i])
            O[3, i] = T.cos(X[i])
            O[4, i] = T.pow(X[i], X[i])
            O[5, i] = T.log2(X[i])


# seed 12, program 53: ~ of a uint8 converted to float16 gave -1 (C promotes uchar to int)
@T.prim_func
def narrow_ints(
    A: T.Tensor((64,), "uint8"),
    B: T.Tensor((64,), "uint8"),
    C: T.Tensor((64,), "int8"),
    S: T.Tensor((64,), "uint8"),
    Out: T.Tensor((6, 64), "float16"),
):
    with T.Kernel(1, threads=64) as bx:
        for i in T.Parallel(64):
            Out[0, i] = ~T.if_then_else(A[i] < B[i], B[i] & A[i], T.min(A[i], B[i]))
            Out[1, i] = A[i] + B[i]
            Out[2, i] = A[i] - B[i]
            Out[3, i] = -C[i]
            Out[4, i] = C[i] << (S[i] & 7)
            Out[5, i] = A[i] << (S[i] & 7)


# seed 76767, intops program 86 (H100): ptxas sign-extended a 16-bit negate of -32768 as +32768
# (tile_cuda/ptx_fixes.py); the negation in each context that widens it again
@T.prim_func
def int16_negations(A: T.Tensor((64,), "int16"), B: T.Tensor((64,), "int16"), Out: T.Tensor((8, 64), "int16")):
    with T.Kernel(1, threads=64) as bx:
        for i in T.Parallel(64):
            Out[0, i] = T.min(~A[i], -B[i]) + B[i]
            Out[1, i] = T.max(-B[i], A[i])
            Out[2, i] = (-B[i]) >> 3
            Out[3, i] = T.if_then_else(-B[i] < A[i], 1, 0)
            Out[4, i] = (0 - B[i]) // 7
            Out[5, i] = T.min(B[i] * -1, A[i])
            # subtractions from other constants and doubling: ptxas keeps their wrap (SASS read here)
            Out[6, i] = T.min(16 - B[i], A[i])
            Out[7, i] = T.min(B[i] + B[i], A[i])


# seed 77777, idioms program 120 (H100): a thread read the shared element (31 - tx) // 2, (31 - tx) % 2
# of another; TVM's iter-map simplification (FlattenBuffer) made the index 30 - tx
# (tilecore/lowering/tir_expr.py: hide_from_iter_map)
@T.prim_func
def reversed_indices(A: T.Tensor((32,), "int32"), Out: T.Tensor((4, 32), "int32")):
    with T.Kernel(1, threads=32) as bx:
        S = T.alloc_shared((16, 2), "int32")
        for i in T.Parallel(32):
            S[i // 2, i % 2] = A[i]
        for i in T.Parallel(32):
            Out[0, i] = A[(31 - i) // 2 * 2 + (31 - i) % 2]
            Out[1, i] = S[(31 - i) // 2, (31 - i) % 2]
            Out[2, i] = A[(33 - i) // 4 + (30 - 2 * i) % 3]
            Out[3, i] = (7 - i) // 3 * 100 + (5 - i) % 4


# session 6: int32 data arithmetic wraps (cpu seed 5151 program 163 folded it under nsw), and a
# bfloat16 name converted through float64 back to bfloat16 (held in a register for rocm)
@T.prim_func
def data_wraps_and_bfloat16_through_float64(
    A: T.Tensor((64,), "uint8"),
    B: T.Tensor((64,), "int32"),
    H: T.Tensor((64,), "bfloat16"),
    D: T.Tensor((64,), "float64"),
    Out: T.Tensor((4, 64), "int32"),
    Hb: T.Tensor((64,), "bfloat16"),
):
    with T.Kernel(1, threads=64) as bx:
        for i in T.Parallel(64):
            Out[0, i] = T.cast(not ((B[i] + A[i]) > B[i]), "int32")
            x = B[i] * 2
            Out[1, i] = T.cast(x + 1 > x, "int32")
            Out[2, i] = T.cast(-B[i] < 0, "int32")
            Out[3, i] = T.min(B[i] + B[i], 100)
            h = H[i] * 3
            Hb[i] = T.cast(T.cast(h, "float64") + D[i], "bfloat16")


m = T.dynamic("m")


# seed 12, program 79 verbatim: T.unroll over a run-time trip count failed in TVM's UnrollLoop
@T.prim_func
def dynamic_unroll_reduce(A: T.Tensor((m, 5), "bfloat16"), Out: T.Tensor((5,), "float64")):
    with T.Kernel(3, threads=128) as bx:
        A_t = T.alloc_shared((32, 2), "bfloat16")
        R_t = T.alloc_fragment((2,), "bfloat16")
        T.fill(R_t, 1.0)
        for k in T.unroll(T.ceildiv(m, 32)):
            T.copy(A[k * 32, bx * 2], A_t)
            T.reduce_min(A_t, R_t, dim=0, clear=False)
        T.copy(R_t, Out[bx * 2])


@needs_compiler
def test_float32_math_is_accurate_by_default_and_fast_only_under_fast_math():
    # seed 12, programs 32 and 76: __expf was the default, 7 ulp off near overflow (table: 4)
    body = codegen(float_math).source.split("__global__", 1)[1]
    assert "expf(" in body and "exp2f(" in body and "logf(" in body
    assert "__expf(" not in body and "__logf(" not in body and "fast_exp2(" not in body
    fast = codegen(float_math, fast_math=True).source.split("__global__", 1)[1]
    assert "__expf(" in fast and "__logf(" in fast and "tc::fast_exp2(" in fast


@needs_compiler
def test_other_float32_math_calls_the_accurate_functions_by_default():
    body = codegen(other_math).source.split("__global__", 1)[1]
    for name in ("tanhf(", "expf(", "sinf(", "cosf(", "powf(", "log2f("):
        assert name in body
    assert not re.search(r"__\w+f\(", body)  # no __sinf, __expf, __powf...


@needs_compiler
def test_narrow_unsigned_results_are_truncated_before_conversion():
    art = codegen(narrow_ints)
    stores = re.findall(r"Out_ptr\[[^\n]*", art.source)
    assert len(stores) == 6
    # every 8/16-bit integer result reaches the float16 conversion through a cast to its own type
    for store in stores:
        assert re.search(r"\(half\)\(\((uchar|signed char|char|short|ushort)\)", store), store
    assert art.blobs["cubin"][:4] == b"\x7fELF"


@needs_compiler
def test_unroll_over_a_dynamic_trip_count_compiles_to_a_loop():
    art = codegen(dynamic_unroll_reduce)
    assert re.search(r"for \(int \w+ = 0; \w+ < \(\(m \+ 31\) >> 5\)", art.source)
    assert art.blobs["cubin"][:4] == b"\x7fELF"


def test_a_reversed_index_keeps_its_value_in_the_generated_source():
    from tile_cuda.compiler import generate_source

    src = generate_source(reversed_indices, "sm_90a", {})[0]  # TVM only: no CUDA compiler needed
    assert "A_ptr[(31 - ((int)threadIdx.x))]" in src and "(30 - ((int)threadIdx.x))" not in src


# ---- execute tier: the values against the reference interpreter


def _run_both(func, arrays, out_idx):

    ref = tilecore.compile(func, target="reference", out_idx=out_idx)(*arrays)
    got = tilecore.compile(func, target="cuda", out_idx=out_idx)(*[_to_torch(a).cuda() for a in arrays])
    got = got if isinstance(got, (list, tuple)) else [got]
    ref = ref if isinstance(ref, (list, tuple)) else [ref]
    return [np.asarray(r) for r in ref], [_to_numpy(g.cpu()) for g in got]


def _to_torch(a):
    """torch.from_numpy, also for ml_dtypes bfloat16 arrays (torch takes only numpy's own dtypes)."""
    import torch

    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.view(np.uint16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def _to_numpy(t):
    """tensor.numpy(), also for bfloat16 tensors (as ml_dtypes bfloat16)."""
    import ml_dtypes
    import torch

    if t.dtype == torch.bfloat16:
        return t.view(torch.uint16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


@pytest.mark.gpu
def test_float32_math_within_the_ulp_table_on_the_gpu():
    from tile_conformance import accuracy
    from tile_conformance.edges import ulp

    x = np.concatenate(
        [np.linspace(80.0, 88.72, 96), np.linspace(-87.0, 3.0, 96), np.linspace(100.0, 127.9, 64)]
    ).astype(np.float32)
    refs, gots = _run_both(float_math, [x], [1, 2, 3])
    for name, ref, got in zip(("exp", "exp2", "log"), refs, gots):
        limit = accuracy.ulps(name, "float32") * ulp(ref.astype(np.float64), "float32")
        with np.errstate(invalid="ignore"):  # inf - inf where both overflow: (ref == got) accepts those
            err = np.abs(got.astype(np.float64) - ref.astype(np.float64))
        assert np.all((err <= limit) | (ref == got)), (name, float(np.max(err / limit)))


@pytest.mark.gpu
def test_narrow_integer_results_match_the_interpreter_on_the_gpu():
    rng = np.random.default_rng(53)
    edges = np.array([0, 1, 127, 128, 254, 255], np.uint8)
    a = np.concatenate([edges, rng.integers(0, 256, 58)]).astype(np.uint8)
    b = np.concatenate([edges[::-1], rng.integers(0, 256, 58)]).astype(np.uint8)
    c = np.concatenate([np.array([-128, -1, 0, 1, 127, 64], np.int8), rng.integers(-128, 128, 58)]).astype(np.int8)
    s = rng.integers(0, 8, 64).astype(np.uint8)
    (ref,), (got,) = _run_both(narrow_ints, [a, b, c, s], -1)
    np.testing.assert_array_equal(got, ref)


@pytest.mark.gpu
def test_dynamic_unroll_reduce_matches_the_interpreter_on_the_gpu():
    import ml_dtypes

    a = np.random.default_rng(79).uniform(-2, 2, (96, 5)).astype(ml_dtypes.bfloat16)
    a[3, 0], a[50, 4] = -np.inf, np.nan
    (ref,), (got,) = _run_both(dynamic_unroll_reduce, [a], -1)
    np.testing.assert_array_equal(got, ref)


@pytest.mark.gpu
def test_int32_data_wraps_and_bfloat16_through_float64_on_the_gpu():
    import ml_dtypes

    rng = np.random.default_rng(61)
    a = rng.integers(0, 256, 64).astype(np.uint8)
    b = np.concatenate(
        [np.array([2**31 - 1, -(2**31), 2**30, -(2**30) - 1], np.int64), rng.integers(-(2**31), 2**31, 60)]
    ).astype(np.int32)
    h = rng.uniform(-3, 3, 64).astype(ml_dtypes.bfloat16)
    d = rng.uniform(-1, 1, 64) * 10.0 ** rng.integers(-6, 2, 64)
    ref, got = _run_both(data_wraps_and_bfloat16_through_float64, [a, b, h, d], [-2, -1])
    for r, g in zip(ref, got):
        np.testing.assert_array_equal(g, r)


@pytest.mark.gpu
def test_int16_negations_wrap_on_the_gpu():
    rng = np.random.default_rng(86)
    edges = np.array([-32768, -32767, -1, 0, 1, 32767, -32768, -32768], np.int16)
    a = np.concatenate([np.array([-32, 0, 5, -32768, 32767, -1, 32767, -32768], np.int16), rng.integers(-100, 100, 56)])
    b = np.concatenate([edges, rng.choice([-32768, -32767, 32767], 56)]).astype(np.int16)
    (ref,), (got,) = _run_both(int16_negations, [a.astype(np.int16), b], -1)
    np.testing.assert_array_equal(got, ref)


@pytest.mark.gpu
def test_int16_negations_wrap_on_the_gpu_through_nvrtc(monkeypatch):
    """The same without nvcc: NVRTC's PTX, rewritten, is assembled by the driver at load."""
    from tile_cuda import compiler

    if toolchain.find_nvrtc() is None:
        pytest.skip("no NVRTC on this host")
    monkeypatch.setattr(toolchain, "find_nvcc", lambda: None)
    monkeypatch.setenv("TILECORE_CACHE", "0")  # the cache key's compiler part is computed once per process
    b = np.array([-32768, -32767, -1, 0, 1, 32767] * 10 + [-32768] * 4, np.int16)
    a = np.arange(-32, 32, dtype=np.int16)
    src = tilecore.compile(int16_negations, target="cuda:sm_90a").artifact.source
    blob, how, _ = compiler.compile_cubin(src, "sm_90a")
    assert how == "nvrtc (PTX: negate_int16_unsigned)" and b"sub.u16" in blob
    assert tilecore.compile(int16_negations, target="cuda").artifact.meta["compiler"] == how
    (ref,), (got,) = _run_both(int16_negations, [a, b], -1)
    np.testing.assert_array_equal(got, ref)


@pytest.mark.gpu
def test_reversed_indices_match_the_interpreter_on_the_gpu():
    a = np.arange(100, 132, dtype=np.int32)
    (ref,), (got,) = _run_both(reversed_indices, [a], -1)
    np.testing.assert_array_equal(got, ref)
