"""How one backend measures kernel runs: the Timer, and finding a backend's Timer through its plugin.

The core knows only the host wall clock. A plugin whose hardware needs more
(device events and an L2 flush on a GPU, simulated cycles on a simulator)
returns its own Timer from the `tilecore_timer` hook; the profiler and the
autotuner never name a vendor.
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass
from typing import Callable, List, Optional


@dataclass(frozen=True)
class Peak:
    """A device's peak rates for one dtype: FLOP/s of its GEMM unit and bytes/s of its memory."""

    flops_per_s: Optional[float]
    bytes_per_s: Optional[float]


class Timer:
    """Measures runs of a kernel with the host wall clock (the default for every backend).

    Subclasses override `measure` (how one run is timed), `device` (what it ran on) and
    `peak` (the device's peak rates, for roofline fractions).
    """

    #: what the numbers are, shown next to them ("wall clock", "cuda events", "simulated cycles")
    method = "wall clock"
    #: True when every run takes exactly the same time (a simulator): one timed run is enough
    deterministic = False

    def measure(self, run: Callable[[], None], n_warmup: int, n_repeat: int) -> List[float]:
        """Call `run` n_warmup times untimed, then n_repeat times; return each run's seconds."""
        for _ in range(n_warmup):
            run()
        times = []
        clock = time.perf_counter
        for _ in range(n_repeat):
            start = clock()
            run()
            times.append(clock() - start)
        return times

    def device(self) -> str:
        """The device the runs execute on, as people name it (part of the tuning-cache key)."""
        return host_cpu_name()

    def peak(self, dtype: str) -> Optional[Peak]:
        """The device's peak rates for `dtype`, or None when unknown (no roofline fraction)."""
        return None


def host_cpu_name() -> str:
    """The host CPU's model name and logical core count, e.g. 'Intel Xeon ... (2 cores)'."""
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    model = model or platform.processor() or platform.machine()
    return f"{model} ({os.cpu_count() or 1} cores)"


def timer_for(backend) -> Timer:
    """The Timer that `backend`'s plugin provides (`tilecore_timer` hook), else the wall clock."""
    from ..plugin.manager import get_plugin_manager

    timer = get_plugin_manager().hook.tilecore_timer(backend=backend)
    return timer if timer is not None else Timer()
