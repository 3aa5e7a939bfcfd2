"""GEMMs on Intel AMX tiles (tile_cpu.amx), bfloat16 -> float32 and int8 -> int32: which GEMMs take
the path (cross-compiled, so checked on any host), the micro-kernels' sums against their plain C
loop (the fallback a process the OS refuses the tile state gets, compiled as such), and, on a host
with AMX, results against the exact product, the whole-grid GEMM against block-by-block bit for
bit, and sums through several K chunks."""

from __future__ import annotations

import ctypes
import subprocess

import ml_dtypes
import numpy as np
import pytest
from cpu_gemm_cases import matmul_rows_first, operand_maker
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tilecore
from tile_cpu import amx
from tile_cpu.build import compiler, target_info

RNG = np.random.default_rng(31)
rand = operand_maker(RNG)
HOST_FEATURES = target_info("cpu")["features"]
HOST_HAS_AMX = all(f in HOST_FEATURES for kind in amx.KINDS for f in kind.features)
needs_amx = pytest.mark.skipif(not HOST_HAS_AMX, reason="the host CPU has no AMX (amx-tile, amx-bf16, amx-int8)")
C_OF = {"bfloat16": "bfloat16", "int8": "int32", "float16": "float16"}


def matmul(M, N, K, bm, bn, bk, dtype="bfloat16", c_dtype=None, spare_row=False):
    """examples/gemm.py's matmul (cpu_gemm_cases.matmul_rows_first); spare_row: lowered block by block."""
    return matmul_rows_first(M, N, K, bm, bn, bk, dtype, c_dtype or C_OF[dtype], spare_row)


def llvm_ir(func, target):
    return tilecore.compile(func, target=target).artifact.source


def calls(func, target="cpu"):
    """The AMX micro-kernels `func`'s library calls."""
    ir = llvm_ir(func, target)
    return {kind.operand for kind in amx.KINDS if kind.symbol in ir}


# ------------------------------------------------------------------ which GEMMs take the path


@pytest.mark.parametrize(
    "target,dtype,bk,expected",
    [
        ("cpu:sapphirerapids", "bfloat16", 64, True),
        ("cpu:sapphirerapids", "int8", 64, True),
        ("cpu:sapphirerapids", "bfloat16", 16, False),  # a K step that is not a multiple of 32
        ("cpu:sapphirerapids", "int8", 32, False),  # int8's k step is 64
        ("cpu:sapphirerapids", "float16", 32, False),
        ("cpu:icelake-server", "bfloat16", 32, False),  # AVX-512, no AMX
        ("cpu:sapphirerapids,-amx-bf16", "bfloat16", 32, False),
    ],
)
def test_gemms_whose_k_tile_is_a_multiple_of_the_k_step_call_the_tile_kernel(target, dtype, bk, expected):
    """The whole-grid GEMM and (one spare row of blocks) the block-by-block T.gemm alike."""
    funcs = [matmul(96, 80, 128, 64, 64, bk, dtype, spare_row=s) for s in ((False, True) if expected else (False,))]
    for func in funcs:
        assert calls(func, target) == ({dtype} if expected else set()), (target, dtype, bk)


def test_host_target_adds_the_features_cpuinfo_reports():
    """A VM may report an older CPU model than its silicon: the host target still gets AMX."""
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    for flag, feature in (("amx_tile", "amx-tile"), ("amx_bf16", "amx-bf16"), ("amx_int8", "amx-int8")):
        assert (feature in HOST_FEATURES) == (flag in flags)


# ------------------------------------------------------------------ the micro-kernels themselves


def _kernel(tmp_path, kind, refused: bool):
    cc = compiler()
    if cc is None:
        pytest.skip("no C compiler")
    so = tmp_path / ("refused.so" if refused else "amx.so")
    flags = list(amx.NATIVE[1]) + (["-DTC_AMX_REFUSED"] if refused else [])
    proc = subprocess.run(
        [cc, "-O2", "-fPIC", "-shared", *flags, "-x", "c", amx.SOURCE, "-o", str(so)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    fn = getattr(ctypes.CDLL(str(so)), kind.symbol)
    fn.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] + [ctypes.c_int32] * 4
    return fn


def _panels(kind, a, b):
    """a (32 x K) and b (K x 32) packed as the kernel reads them (K a multiple of the k step)."""
    S, g = kind.kstep, kind.group
    steps = a.shape[1] // S
    ap = np.ascontiguousarray(a.reshape(32, steps, S).transpose(1, 0, 2))  # [q][i][k]
    bp = np.ascontiguousarray(b.reshape(steps, 16, g, 32).transpose(0, 1, 3, 2))  # [q][p][j][t]
    return ap, bp


@pytest.mark.parametrize("refused", [False, True])
def test_bfloat16_block_kernel_sums_and_stores_rows_and_columns_of_the_edge(tmp_path, refused):
    if not refused and not HOST_HAS_AMX:
        pytest.skip("the host CPU has no AMX")
    fn = _kernel(tmp_path, amx.BF16, refused)
    K, rows, cols, ldc = 96, 29, 21, 40
    a = RNG.uniform(-1, 1, (32, K)).astype(ml_dtypes.bfloat16)
    b = RNG.uniform(-1, 1, (K, 32)).astype(ml_dtypes.bfloat16)
    ap, bp = _panels(amx.BF16, a, b)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    # mode 1 (start at 0), then mode 0 (accumulate the same product again) into float32 C
    c = np.full((rows + 3, ldc), 7.0, dtype=np.float32)
    args = (ap.ctypes.data, bp.ctypes.data, c.ctypes.data, ldc, K // 32, rows, cols)
    assert fn(*args, 1) == 0
    np.testing.assert_allclose(c[:rows, :cols], exact[:rows, :cols], rtol=1e-5, atol=1e-5)
    assert (c[:rows, cols:] == 7).all() and (c[rows:] == 7).all()  # nothing outside rows x cols
    assert fn(*args, 0) == 0
    np.testing.assert_allclose(c[:rows, :cols], 2 * exact[:rows, :cols], rtol=1e-5, atol=1e-5)
    # mode 2: bfloat16 C, rounded once to nearest even
    c16 = np.zeros((rows, ldc), dtype=ml_dtypes.bfloat16)
    assert fn(ap.ctypes.data, bp.ctypes.data, c16.ctypes.data, ldc, K // 32, rows, cols, 2) == 0
    once = exact[:rows, :cols].astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)
    ulp = 2.0 ** (np.floor(np.log2(np.maximum(np.abs(once), 1e-30))) - 7)
    assert np.all(np.abs(c16[:, :cols].astype(np.float64) - once) <= ulp)


@pytest.mark.parametrize("refused", [False, True])
def test_int8_block_kernel_sums_exactly(tmp_path, refused):
    if not refused and not HOST_HAS_AMX:
        pytest.skip("the host CPU has no AMX")
    fn = _kernel(tmp_path, amx.INT8, refused)
    K, rows, cols, ldc = 192, 32, 17, 33
    a = RNG.integers(-128, 128, (32, K)).astype(np.int8)
    b = RNG.integers(-128, 128, (K, 32)).astype(np.int8)
    ap, bp = _panels(amx.INT8, a, b)
    exact = a.astype(np.int64) @ b.astype(np.int64)
    c = np.full((rows, ldc), -5, dtype=np.int32)
    args = (ap.ctypes.data, bp.ctypes.data, c.ctypes.data, ldc, K // 64, rows, cols)
    assert fn(*args, 1) == 0
    np.testing.assert_array_equal(c[:, :cols], exact[:rows, :cols])
    assert (c[:, cols:] == -5).all()
    assert fn(*args, 0) == 0
    np.testing.assert_array_equal(c[:, :cols], 2 * exact[:rows, :cols])


# ------------------------------------------------------------------ kernels on an AMX host


@needs_amx
@settings(max_examples=3, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.sampled_from([("bfloat16", (32, 32, 32)), ("bfloat16", (64, 48, 64)), ("int8", (16, 64, 64))]),
    shape=st.tuples(st.integers(1, 90), st.integers(1, 70), st.integers(1, 150)),
)
def test_whole_gemm_and_block_by_block_agree_bit_for_bit(case, shape):
    dtype, (bm, bn, bk) = case
    M, N, K = shape
    whole, blockwise = (matmul(M, N, K, bm, bn, bk, dtype, spare_row=spare) for spare in (False, True))
    assert calls(whole) == {dtype} and calls(blockwise) == {dtype}
    a, b = rand((M, K), dtype), rand((K, N), dtype)
    c_np = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.int32
    results = []
    for f in (whole, blockwise):
        c = np.full((M, N), np.nan if dtype == "bfloat16" else -7, dtype=c_np)
        tilecore.compile(f, target="cpu")(a, b, c)
        results.append(c)
    bits = np.uint16 if dtype == "bfloat16" else np.int32
    np.testing.assert_array_equal(results[0].view(bits), results[1].view(bits))
    exact = a.astype(np.float64) @ b.astype(np.float64)
    if dtype == "int8":
        np.testing.assert_array_equal(results[0], exact.astype(np.int64))
    else:
        np.testing.assert_allclose(results[0].astype(np.float64), exact, rtol=2e-2, atol=2e-2)


@needs_amx
@pytest.mark.parametrize("dtype,K", [("bfloat16", 700), ("int8", 1300)])
def test_sums_through_several_k_chunks_match_the_reference(dtype, K):
    """K is several chunks of the whole GEMM (C holds the partial sums), and the block-by-block
    T.gemm accumulates into its float32 / int32 fragment: float32 summation error, or exact."""
    M, N = 70, 90
    c_dtype, bk = ("float32", 32) if dtype == "bfloat16" else ("int32", 64)
    for f in (matmul(M, N, K, 64, 64, bk, dtype, c_dtype), matmul(M, N, K, 32, 32, 2 * bk, dtype, c_dtype, True)):
        assert calls(f) == {dtype}
        a, b = rand((M, K), dtype), rand((K, N), dtype)
        c = np.zeros((M, N), dtype=np.float32 if dtype == "bfloat16" else np.int32)
        tilecore.compile(f, target="cpu")(a, b, c)
        exact = a.astype(np.float64) @ b.astype(np.float64)
        if dtype == "int8":
            np.testing.assert_array_equal(c, exact.astype(np.int64))
        else:
            np.testing.assert_allclose(c, exact, rtol=1e-4, atol=1e-4)
