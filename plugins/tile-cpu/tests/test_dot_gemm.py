"""GEMMs on x86 matrix and dot-product instructions (tile_cpu.dot_gemm): AMX for bfloat16 -> float32
and int8 -> int32, AVX-512 VNNI for int8 -> int32 without AMX. Which GEMMs take which path
(cross-compiled, so checked on any host); the micro-kernels' sums against exact products (AMX's
also through the plain C loop a process the OS refuses the tile state gets, compiled as such);
and, on a host with the features, results against the exact product, the whole-grid GEMM against
block-by-block bit for bit, and sums through several K chunks."""

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
from tile_cpu import dot_gemm as D
from tile_cpu.build import compiler, target_info

RNG = np.random.default_rng(31)
rand = operand_maker(RNG)
HOST_FEATURES = target_info("cpu")["features"]
HOST_HAS_AMX = all(f in HOST_FEATURES for kind in (D.BF16, D.INT8) for f in kind.features)
HOST_HAS_VNNI = all(f in HOST_FEATURES for f in D.VNNI_INT8.features)
needs_amx = pytest.mark.skipif(not HOST_HAS_AMX, reason="the host CPU has no AMX (amx-tile, amx-bf16, amx-int8)")
needs_vnni = pytest.mark.skipif(not HOST_HAS_VNNI, reason="the host CPU has no AVX-512 VNNI")
VNNI_TARGET = "cpu:icelake-server"  # AVX-512 VNNI, no AMX (runs on an AMX host too)
C_OF = {"bfloat16": "bfloat16", "int8": "int32", "float16": "float16"}


def matmul(M, N, K, bm, bn, bk, dtype="bfloat16", c_dtype=None, spare_row=False):
    """examples/gemm.py's matmul (cpu_gemm_cases.matmul_rows_first); spare_row: lowered block by block."""
    return matmul_rows_first(M, N, K, bm, bn, bk, dtype, c_dtype or C_OF[dtype], spare_row)


def llvm_ir(func, target):
    return tilecore.compile(func, target=target).artifact.source


def calls(func, target="cpu"):
    """The micro-kernels `func`'s library calls."""
    ir = llvm_ir(func, target)
    return {kind for kind in D.KINDS if kind.symbol in ir}


# ------------------------------------------------------------------ which GEMMs take the path


@pytest.mark.parametrize(
    "target,dtype,bk,expected",
    [
        ("cpu:sapphirerapids", "bfloat16", 64, D.BF16),
        ("cpu:sapphirerapids", "int8", 16, D.INT8),  # exact sums: any K step
        ("cpu:sapphirerapids", "bfloat16", 16, None),  # a K step that is not a multiple of 32
        ("cpu:sapphirerapids", "float16", 32, None),
        ("cpu:icelake-server", "bfloat16", 32, None),  # AVX-512 and VNNI, no AMX
        ("cpu:icelake-server", "int8", 32, D.VNNI_INT8),
        ("cpu:sapphirerapids,-amx-int8", "int8", 64, D.VNNI_INT8),
        ("cpu:znver3", "int8", 64, None),  # AVX2: no VNNI-512
    ],
)
def test_each_gemm_calls_the_kernel_of_its_target(target, dtype, bk, expected):
    """The whole-grid GEMM and (one spare row of blocks) the block-by-block T.gemm alike."""
    funcs = [matmul(96, 80, 128, 64, 64, bk, dtype, spare_row=s) for s in ((False, True) if expected else (False,))]
    for func in funcs:
        assert calls(func, target) == ({expected} if expected else set()), (target, dtype, bk)


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
    so = tmp_path / ("refused.so" if refused else "kernels.so")
    flags = list(D.NATIVE[1]) + (["-DTC_AMX_REFUSED"] if refused else [])
    proc = subprocess.run(
        [cc, "-O2", "-fPIC", "-shared", *flags, "-x", "c", D.SOURCE, "-o", str(so)], capture_output=True, text=True
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
    fn = _kernel(tmp_path, D.BF16, refused)
    K, rows, cols, ldc = 96, 29, 21, 40
    a = RNG.uniform(-1, 1, (32, K)).astype(ml_dtypes.bfloat16)
    b = RNG.uniform(-1, 1, (K, 32)).astype(ml_dtypes.bfloat16)
    ap, bp = _panels(D.BF16, a, b)
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


@pytest.mark.parametrize("kind,refused", [("amx", False), ("amx", True), ("vnni", False)])
def test_int8_block_kernels_sum_exactly(tmp_path, kind, refused):
    kind = D.INT8 if kind == "amx" else D.VNNI_INT8
    if not refused and not all(f in HOST_FEATURES for f in kind.features):
        pytest.skip(f"the host CPU has no {kind.features}")
    fn = _kernel(tmp_path, kind, refused)
    K, rows, cols, ldc = 192, kind.mr, 17, 33
    a = RNG.integers(-128, 128, (kind.mr, K)).astype(np.int8)
    b = RNG.integers(-128, 128, (K, 32)).astype(np.int8)
    ap = np.ascontiguousarray(a.reshape(kind.mr, K // 64, 64).transpose(1, 0, 2))  # [q][i][k]
    if kind is D.VNNI_INT8:
        ap = (ap.astype(np.int16) + 128).astype(np.uint8)  # VNNI's A: plus 128, unsigned
    bp = _panels(kind, np.zeros((32, K), np.int8), b)[1]
    exact = a.astype(np.int64) @ b.astype(np.int64)
    c = np.full((rows, ldc), -5, dtype=np.int32)
    args = (ap.ctypes.data, bp.ctypes.data, c.ctypes.data, ldc, K // 64, rows - 1, cols)
    assert fn(*args, 1) == 0
    np.testing.assert_array_equal(c[: rows - 1, :cols], exact[: rows - 1, :cols])
    assert (c[:, cols:] == -5).all() and (c[rows - 1] == -5).all()  # nothing outside rows x cols
    assert fn(*args, 0) == 0
    np.testing.assert_array_equal(c[: rows - 1, :cols], 2 * exact[: rows - 1, :cols])


# ------------------------------------------------------------------ kernels on a host with the features

KIND_CASES = [  # (kind, target that takes it here, its skip mark)
    pytest.param(D.BF16, "cpu", marks=needs_amx, id="amx-bf16"),
    pytest.param(D.INT8, "cpu", marks=needs_amx, id="amx-int8"),
    pytest.param(D.VNNI_INT8, VNNI_TARGET, marks=needs_vnni, id="vnni-int8"),
]


@pytest.mark.parametrize("kind,target", KIND_CASES)
@settings(max_examples=2, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_whole_gemm_and_block_by_block_agree_bit_for_bit(kind, target, data):
    dtype = kind.operand
    bm, bn, bk = data.draw(st.sampled_from([(32, 32, 32), (64, 48, 64), (16, 64, 32)]))
    M, N, K = data.draw(st.tuples(st.integers(1, 90), st.integers(1, 70), st.integers(1, 150)))
    whole, blockwise = (matmul(M, N, K, bm, bn, bk, dtype, spare_row=spare) for spare in (False, True))
    assert calls(whole, target) == {kind} and calls(blockwise, target) == {kind}
    a, b = rand((M, K), dtype), rand((K, N), dtype)
    c_np = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.int32
    results = []
    for f in (whole, blockwise):
        c = np.full((M, N), np.nan if dtype == "bfloat16" else -7, dtype=c_np)
        tilecore.compile(f, target=target)(a, b, c)
        results.append(c)
    bits = np.uint16 if dtype == "bfloat16" else np.int32
    np.testing.assert_array_equal(results[0].view(bits), results[1].view(bits))
    exact = a.astype(np.float64) @ b.astype(np.float64)
    if dtype == "int8":
        np.testing.assert_array_equal(results[0], exact.astype(np.int64))
    else:
        np.testing.assert_allclose(results[0].astype(np.float64), exact, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("kind,target", KIND_CASES)
def test_sums_through_several_k_chunks_match_the_reference(kind, target):
    """K is several chunks of the whole GEMM (C holds the partial sums), and the block-by-block
    T.gemm accumulates into its float32 / int32 fragment: float32 summation error, or exact."""
    dtype, M, N = kind.operand, 70, 90
    K, c_dtype, bk = (700, "float32", 32) if dtype == "bfloat16" else (1300, "int32", 64)
    for f in (matmul(M, N, K, 64, 64, bk, dtype, c_dtype), matmul(M, N, K, 32, 32, 2 * bk, dtype, c_dtype, True)):
        assert calls(f, target) == {kind}
        a, b = rand((M, K), dtype), rand((K, N), dtype)
        c = np.zeros((M, N), dtype=np.float32 if dtype == "bfloat16" else np.int32)
        tilecore.compile(f, target=target)(a, b, c)
        exact = a.astype(np.float64) @ b.astype(np.float64)
        if dtype == "int8":
            np.testing.assert_array_equal(c, exact.astype(np.int64))
        else:
            np.testing.assert_allclose(c, exact, rtol=1e-4, atol=1e-4)


def test_features_the_host_hides_are_turned_off(monkeypatch):
    """A guest may hide what its CPU model has (an Emerald Rapids VM without AMX, whose kernel must
    enable it): such features count as absent, so no AMX kernel is chosen for that host."""
    from tile_cpu import target as TG

    x86 = "x86_64-unknown-linux-gnu"
    monkeypatch.setattr(TG, "_cpuinfo_flags", lambda triple: ["avx512f", "avx512_fp16", "avx512_bf16"])
    assert TG._absent_host_features("sapphirerapids", x86) == {
        "amx-tile",
        "amx-bf16",
        "amx-int8",
        "avx512vnni",
        "avxvnni",
    }
    assert TG._absent_host_features("znver3", x86) == set()
    monkeypatch.setattr(TG, "_cpuinfo_flags", lambda triple: ["amx_tile", "amx_bf16", "amx_int8", "avx512_vnni"])
    assert TG._absent_host_features("sapphirerapids", x86) == {"avx512bf16", "avx512fp16", "avxvnni"}


@pytest.mark.parametrize("kind,target", KIND_CASES)
def test_rows_from_the_counter_and_static_tasks_agree(monkeypatch, kind, target):
    """gemm_grid.DYNAMIC_ROWS schedules this path's rows too: units of one MR-row block taken from
    an atomic counter (default) or one static task per core; the sums are the same, exactly."""
    import tile_cpu.gemm_grid as gemm_grid

    monkeypatch.setenv("TILECORE_CACHE", "0")  # the knob is not part of the cache key
    dtype = kind.operand
    M, N, K = 150, 70, 300
    c_dtype, bk = ("float32", 32) if dtype == "bfloat16" else ("int32", 64)
    f = matmul(M, N, K, 64, 64, bk, dtype, c_dtype)
    a, b = rand((M, K), dtype), rand((K, N), dtype)
    results = []
    for units in (1, 0):
        monkeypatch.setattr(gemm_grid, "DYNAMIC_ROWS", units)
        kernel = tilecore.compile(f, target=target)
        assert ("tilecore_cpu_next_block" in kernel.source) == bool(units)
        c = np.zeros((M, N), dtype=np.float32 if dtype == "bfloat16" else np.int32)
        kernel(a, b, c)
        results.append(c)
    np.testing.assert_array_equal(results[0], results[1])
