"""bfloat16 GEMMs on Intel AMX (tile_cpu.amx_bf16): which GEMMs take the path (cross-compiled, so
checked on any host), the micro-kernel's sums against a plain loop (its own fallback, compiled as
a process the OS refuses the tile state gets it), and, on a host with AMX, results against the
float64 product, the whole-grid GEMM against block-by-block bit for bit, and float32 C through
several K chunks."""

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
from tile_cpu import amx_bf16
from tile_cpu.build import compiler, target_info

RNG = np.random.default_rng(31)
rand = operand_maker(RNG)
HOST_HAS_AMX = all(f in target_info("cpu")["features"] for f in amx_bf16.FEATURES)
needs_amx = pytest.mark.skipif(not HOST_HAS_AMX, reason="the host CPU has no AMX (amx-tile, amx-bf16)")


def matmul(M, N, K, bm, bn, bk, dtype="bfloat16", c_dtype="bfloat16", spare_row=False):
    """examples/gemm.py's matmul (cpu_gemm_cases.matmul_rows_first); spare_row: lowered block by block."""
    return matmul_rows_first(M, N, K, bm, bn, bk, dtype, c_dtype, spare_row)


def llvm_ir(func, target):
    return tilecore.compile(func, target=target).artifact.source


# ------------------------------------------------------------------ which GEMMs take the path


@pytest.mark.parametrize(
    "target,dtype,bk,expected",
    [
        ("cpu:sapphirerapids", "bfloat16", 64, True),
        ("cpu:sapphirerapids", "bfloat16", 16, False),  # a K step that is not a multiple of 32
        ("cpu:sapphirerapids", "float16", 32, False),
        ("cpu:icelake-server", "bfloat16", 32, False),  # AVX-512, no AMX
        ("cpu:sapphirerapids,-amx-bf16", "bfloat16", 32, False),
    ],
)
def test_bfloat16_gemms_with_32_k_steps_on_amx_targets_call_the_tile_kernel(target, dtype, bk, expected):
    """The whole-grid GEMM and (one spare row of blocks) the block-by-block T.gemm alike."""
    funcs = [matmul(96, 80, 64, 64, 64, bk, dtype, dtype, spare) for spare in ((False, True) if expected else (False,))]
    for func in funcs:
        assert (amx_bf16.SYMBOL in llvm_ir(func, target)) == expected, (target, dtype, bk)


def test_host_target_adds_the_features_cpuinfo_reports():
    """A VM may report an older CPU model than its silicon: the host target still gets AMX."""
    info = target_info("cpu")
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    for flag, feature in (("amx_tile", "amx-tile"), ("amx_bf16", "amx-bf16")):
        assert (feature in info["features"]) == (flag in flags)


# ------------------------------------------------------------------ the micro-kernel itself


def _kernel_library(tmp_path, refused: bool):
    cc = compiler()
    if cc is None:
        pytest.skip("no C compiler")
    so = tmp_path / ("refused.so" if refused else "amx.so")
    flags = list(amx_bf16.NATIVE[1]) + (["-DTC_AMX_REFUSED"] if refused else [])
    proc = subprocess.run(
        [cc, "-O2", "-fPIC", "-shared", *flags, "-x", "c", amx_bf16.SOURCE, "-o", str(so)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    lib = ctypes.CDLL(str(so))
    fn = getattr(lib, amx_bf16.SYMBOL)
    fn.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] + [ctypes.c_int32] * 4
    return fn


def _panels(a, b):
    """a (32 x K) and b (K x 32) bfloat16 packed as the kernel reads them (K a multiple of 32)."""
    steps = a.shape[1] // 32
    ap = np.ascontiguousarray(a.reshape(32, steps, 32).transpose(1, 0, 2))  # [q][i][k]
    bp = np.ascontiguousarray(b.reshape(steps, 16, 2, 32).transpose(0, 1, 3, 2))  # [q][p][j][t]
    return ap, bp


@pytest.mark.parametrize("refused", [False, True])
def test_block_kernel_sums_and_stores_rows_and_columns_of_the_edge(tmp_path, refused):
    if not refused and not HOST_HAS_AMX:
        pytest.skip("the host CPU has no AMX")
    fn = _kernel_library(tmp_path, refused)
    K, rows, cols, ldc = 96, 29, 21, 40
    a = RNG.uniform(-1, 1, (32, K)).astype(ml_dtypes.bfloat16)
    b = RNG.uniform(-1, 1, (K, 32)).astype(ml_dtypes.bfloat16)
    ap, bp = _panels(a, b)
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


# ------------------------------------------------------------------ kernels on an AMX host


@needs_amx
@settings(max_examples=3, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    tiles=st.sampled_from([(32, 32, 32), (64, 48, 64), (16, 64, 32)]),
    shape=st.tuples(st.integers(1, 90), st.integers(1, 70), st.integers(1, 100)),
)
def test_whole_gemm_and_block_by_block_agree_bit_for_bit(tiles, shape):
    (bm, bn, bk), (M, N, K) = tiles, shape
    whole, blockwise = (matmul(M, N, K, bm, bn, bk, spare_row=spare) for spare in (False, True))
    assert amx_bf16.SYMBOL in llvm_ir(whole, "cpu") and amx_bf16.SYMBOL in llvm_ir(blockwise, "cpu")
    a, b = rand((M, K), "bfloat16"), rand((K, N), "bfloat16")
    results = []
    for f in (whole, blockwise):
        c = np.full((M, N), np.nan, dtype=ml_dtypes.bfloat16)
        tilecore.compile(f, target="cpu")(a, b, c)
        results.append(c.view(np.uint16))
    np.testing.assert_array_equal(results[0], results[1])
    exact = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(results[0].view(ml_dtypes.bfloat16).astype(np.float64), exact, rtol=2e-2, atol=2e-2)


@needs_amx
def test_float32_c_through_several_k_chunks_matches_the_reference():
    """K = 700 is three chunks of the whole GEMM (C holds the partial sums), and the block-by-block
    T.gemm accumulates into its float32 fragment: both within float32 summation error."""
    M, N, K = 70, 90, 700
    for f in (
        matmul(M, N, K, 64, 64, 32, c_dtype="float32"),
        matmul(M, N, K, 32, 32, 64, c_dtype="float32", spare_row=True),
    ):
        assert amx_bf16.SYMBOL in llvm_ir(f, "cpu")
        a, b = rand((M, K), "bfloat16"), rand((K, N), "bfloat16")
        c = np.zeros((M, N), dtype=np.float32)
        tilecore.compile(f, target="cpu")(a, b, c)
        np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)
