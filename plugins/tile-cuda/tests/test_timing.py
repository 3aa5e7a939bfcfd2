"""tile-cuda's Timer for the profiler: CUDA events with an L2 flush, the device's peak rates.

The hook is checked here; timing itself needs a GPU (marked `gpu`, run on the H200)."""

from __future__ import annotations

import os
import sys

import pytest

import tilecore
from tilecore.profiler import timer_for

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples")


def test_the_profiler_times_cuda_kernels_with_events():
    from tile_cuda.timing import CudaEventTimer
    from tilecore.runtime.api import resolve_target

    backend, _ = resolve_target("cuda")
    timer = timer_for(backend)
    assert isinstance(timer, CudaEventTimer)
    assert timer.method == "cuda events, L2 flushed" and not timer.deterministic


@pytest.mark.gpu
def test_gemm_bench_and_autotune_on_the_gpu(tmp_path, monkeypatch):
    # a fresh tuning store: with an earlier run's winner stored, autotune reuses it and its report
    # lists that one candidate (this test failed that way on the H200 in session 12, H100 session 14)
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(tmp_path / "cache"))
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    sys.path.insert(0, EXAMPLES)
    from gemm import matmul

    kernel = matmul(2048, 2048, 2048, 128, 128, 32, dtype="float16")
    result = tilecore.bench(kernel, n_warmup=5, n_repeat=20)
    assert result.method == "cuda events, L2 flushed" and len(result.times_ms) == 20
    assert result.device == torch.cuda.get_device_name()
    assert result.tflops > 1
    if result.peak is not None:
        assert 0 < result.flops_fraction < 1 and 0 < result.bytes_fraction < 1

    tuned = tilecore.autotune(
        configs=[{"block_M": 64, "block_N": 64}, {"block_M": 128, "block_N": 128}],
        warmup=5,
        rep=20,
        ref_prog=lambda a, b: (a.float() @ b.float()).half(),
    )(matmul)
    kernel = tuned(1024, 1024, 1024)
    report = tuned.last_report
    assert [c.status for c in report.candidates] == ["ok", "ok"] and report.method.startswith("cuda events")
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    b = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(kernel(a, b).float(), a.float() @ b.float(), rtol=1e-2, atol=1e-1)
