"""How the profiler times NPU kernels: the simulator's cycle count, not the host's wall clock.

The simulator is cycle-approximate and deterministic, so one run gives the time;
the host time it takes to simulate says nothing about the modelled hardware.
"""

from __future__ import annotations

from typing import Callable, List, Optional

from tilecore.profiler import Peak, Timer

from .arch import DEFAULT_CONFIG, MATRIX_FORMATS
from .launcher import last_report


class SimulatedCyclesTimer(Timer):
    """Each run's time is its simulated cycles at the modelled clock."""

    method = "simulated cycles"
    deterministic = True

    def measure(self, run: Callable[[], None], n_warmup: int, n_repeat: int) -> List[float]:
        times = []
        for _ in range(n_repeat):
            run()
            report = last_report()
            if report is None:
                raise RuntimeError("the NPU simulator recorded no launch for this run")
            times.append(report.cycles / (report.clock_ghz * 1e9))
        return times

    def device(self) -> str:
        cfg = DEFAULT_CONFIG
        return f"reference NPU simulator ({cfg.cores} cores at {cfg.clock_ghz} GHz)"

    def peak(self, dtype: str) -> Optional[Peak]:
        """Matrix-engine FLOP/s (one 16x16x16 step per `cycles` per core) and DMA bytes/s."""
        cfg = DEFAULT_CONFIG
        clock = cfg.clock_ghz * 1e9
        flops = None
        if dtype in MATRIX_FORMATS:
            step_cycles = MATRIX_FORMATS[dtype][1]
            flops = 2 * cfg.matrix_tile**3 / step_cycles * cfg.cores * clock
        return Peak(flops, cfg.dma_bytes_per_cycle * cfg.cores * clock)
