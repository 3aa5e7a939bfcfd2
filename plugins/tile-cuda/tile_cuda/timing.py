"""How the profiler times CUDA kernels: CUDA events on the current stream, L2 flushed before each run.

Kernels launch asynchronously, so the host clock would time the launch, not the
kernel. Each run is bracketed by two events recorded on torch's current stream
(the stream the launcher uses); before each run a buffer twice the size of the
L2 cache is zeroed, so no run finds the previous run's data in L2 (Triton's and
TileLang's method). Peak rates are the datasheet numbers of the devices listed
in PEAKS (dense, no sparsity).
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional

from tilecore.diagnostics import TileError
from tilecore.profiler import Peak, Timer

_T = 1e12
# device name fragment -> ({dtype: dense FLOP/s of the GEMM unit}, memory bytes/s)
PEAKS: Dict[str, tuple] = {
    "H200": (
        {
            "float16": 989.4 * _T,
            "bfloat16": 989.4 * _T,
            "int8": 1978.9 * _T,
            "float32": 66.9 * _T,
            "float64": 66.9 * _T,
        },
        4.8e12,
    ),
    "H100": (
        {
            "float16": 989.4 * _T,
            "bfloat16": 989.4 * _T,
            "int8": 1978.9 * _T,
            "float32": 66.9 * _T,
            "float64": 66.9 * _T,
        },
        3.35e12,
    ),
    "A100": (
        {"float16": 312 * _T, "bfloat16": 312 * _T, "int8": 624 * _T, "float32": 19.5 * _T, "float64": 19.5 * _T},
        2.0e12,
    ),
}
FALLBACK_L2_BYTES = 128 << 20


def _torch():
    try:
        import torch
    except ImportError:
        raise TileError("timing CUDA kernels needs torch (its CUDA events and streams): pip install torch") from None
    return torch


class CudaEventTimer(Timer):
    """Each run timed by a pair of CUDA events; the L2 cache flushed before it."""

    method = "cuda events, L2 flushed"

    def __init__(self):
        self._flush = None

    def _flush_buffer(self):
        if self._flush is None:
            torch = _torch()
            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            l2 = int(getattr(props, "L2_cache_size", 0) or FALLBACK_L2_BYTES)
            self._flush = torch.empty(2 * l2 // 4, dtype=torch.int32, device="cuda")
        return self._flush

    def measure(self, run: Callable[[], None], n_warmup: int, n_repeat: int) -> List[float]:
        torch = _torch()
        flush = self._flush_buffer()
        for _ in range(n_warmup):
            run()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_repeat)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_repeat)]
        for start, end in zip(starts, ends):
            flush.zero_()
            start.record()
            run()
            end.record()
        torch.cuda.synchronize()
        return [start.elapsed_time(end) * 1e-3 for start, end in zip(starts, ends)]

    def device(self) -> str:
        torch = _torch()
        return torch.cuda.get_device_name(torch.cuda.current_device())

    def peak(self, dtype: str) -> Optional[Peak]:
        name = self.device()
        for fragment, (flops, bandwidth) in PEAKS.items():
            if fragment in name:
                return Peak(flops.get(dtype), bandwidth)
        return None
