"""The profiler: work derived from the Tile IR, timing on cpu (wall clock) and npu (simulated cycles),
TileLang's `get_profiler().do_bench()` / `assert_allclose`, and clear errors."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilecore
from tilecore.diagnostics import TileError
from tilecore.profiler import BenchResult, Peak, Work, work_of

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
from gemm import matmul  # noqa: E402


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(tmp_path / "cache"))


@settings(max_examples=15, deadline=None)
@given(
    st.sampled_from([64, 96, 128, 200]),
    st.sampled_from([32, 64, 100]),
    st.sampled_from([32, 64, 96]),
    st.sampled_from([32, 64]),
    st.sampled_from(["float16", "float32"]),
)
def test_gemm_work_counts_every_tile_gemm(M, N, K, block, dtype):
    func = matmul.prim_func(M, N, K, block, block, 32, dtype=dtype)
    work = work_of(func)
    tiles = -(-M // block) * -(-N // block) * -(-K // 32)
    assert work.flops == tiles * 2 * block * block * 32  # padded tiles do the full tile's work
    item = 2 if dtype == "float16" else 4
    assert work.bytes == (M * K + K * N + M * N) * item
    assert work.dtype == dtype


def test_kernel_without_gemm_has_bytes_but_no_flops():
    sys.path.insert(0, HERE)
    import autotune_kernels

    work = work_of(autotune_kernels.vector_add.prim_func(1000, 128))
    assert work == Work(flops=None, bytes=3 * 1000 * 4, dtype="float32")


def test_cpu_bench_times_the_kernel_and_reports_rates():
    kernel = matmul(128, 128, 128, 64, 64, 32, dtype="float32")
    result = tilecore.bench(kernel, n_warmup=2, n_repeat=5)
    assert isinstance(result, BenchResult)
    assert len(result.times_ms) == 5 and result.n_warmup == 2
    assert min(result.times_ms) > 0 and result.min_ms <= result.median_ms
    assert result.method == "wall clock"
    assert result.tflops == pytest.approx(2 * 128**3 / (result.median_ms * 1e-3) / 1e12)
    assert result.flops_fraction is None  # no peak is declared for the host CPU
    assert "TFLOP/s" in result.summary() and "GB/s" in result.summary()
    median = kernel.get_profiler().do_bench(warmup=1, rep=5)
    assert median > 0


def test_npu_bench_reports_simulated_cycles_against_the_modelled_peak():
    func = matmul.prim_func(128, 128, 128, 64, 64, 32, dtype="float16")
    kernel = tilecore.compile(func, target="npu", out_idx=[-1])
    result = tilecore.bench(kernel)
    assert result.method == "simulated cycles"
    assert len(result.times_ms) == 1  # the simulator is deterministic
    from tile_npu.launcher import last_report

    assert result.median_ms == pytest.approx(last_report().cycles / 1e6)  # 1 GHz
    assert isinstance(result.peak, Peak)
    assert 0 < result.flops_fraction <= 1 and 0 < result.bytes_fraction <= 1


def test_assert_allclose_against_a_reference_program():
    kernel = matmul(64, 64, 64, 32, 32, 32, dtype="float32")
    profiler = kernel.get_profiler(seed=1)
    profiler.assert_allclose(lambda a, b: a @ b)
    with pytest.raises(AssertionError, match="differ from the reference"):
        profiler.assert_allclose(lambda a, b: a @ b + 1)


def test_dynamic_shapes_need_given_inputs():
    import tilecore.language as T

    n = T.dynamic("n")

    @T.prim_func
    def double(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 64)) as bx:
            for i in T.Parallel(64):
                B[bx * 64 + i] = A[bx * 64 + i] * 2.0

    kernel = tilecore.compile(double, target="cpu", out_idx=[-1])
    with pytest.raises(TileError, match="dynamic dimension\\(s\\) n"):
        kernel.get_profiler().do_bench()
    result = tilecore.bench(kernel, np.ones(1024, np.float32), n_warmup=1, n_repeat=3)
    assert result.work.bytes == 2 * 1024 * 4 and len(result.times_ms) == 3


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_profiler_inputs_come_in_the_asked_library(library):
    torch = pytest.importorskip("torch")
    import tilecore.language as TL

    @TL.prim_func
    def scale(A: TL.Tensor((8,), "float32"), B: TL.Tensor((8,), "float32")):
        with TL.Kernel(1) as bx:
            for i in TL.Parallel(8):
                B[i] = A[i] * 2

    kernel = tilecore.compile(scale, target="reference", out_idx=[-1], profiler_inputs=library)
    profiler = kernel.get_profiler()
    (a,) = profiler.inputs
    assert isinstance(a, torch.Tensor if library == "torch" else np.ndarray)
    profiler.assert_allclose(lambda x: x * 2)
    with pytest.raises(TileError, match="profiler_inputs"):
        tilecore.compile(scale, target="reference", profiler_inputs="jax")


def test_runs_slower_than_the_budget_are_measured_by_the_probe_runs_only():
    """A kernel whose runs take longer than warmup + rep is run 1 + 3 times (the untimed first
    run and the three that estimate its time, which are the measurements), not 8."""
    import time

    func = matmul.prim_func(64, 64, 64, 32, 32, 32, dtype="float32")
    kernel = tilecore.compile(func, target="reference", out_idx=[-1])
    calls = []

    def slow(*inputs):
        calls.append(1)
        time.sleep(0.004)
        return kernel(*inputs)

    result = kernel.get_profiler().bench(slow, warmup=1, rep=2)
    assert len(calls) == 4 and len(result.times_ms) == 3 and result.n_warmup == 0
    assert min(result.times_ms) >= 4.0
    calls.clear()
    fast = kernel.get_profiler().bench(lambda *inputs: calls.append(1), warmup=1, rep=50)
    assert len(fast.times_ms) >= 3 and fast.n_warmup >= 1  # a fast run fills the budget with more runs
    assert len(calls) == 1 + 3 + fast.n_warmup + len(fast.times_ms)
