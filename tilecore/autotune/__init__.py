"""Autotuning: `@tilecore.autotune(configs=...)` stacked on `@tilecore.jit` (TileLang's and Triton's API).

    @tilecore.autotune(configs=[{"block_M": 64, "block_N": 64}, {"block_M": 128, "block_N": 128}],
                       warmup=25, rep=100, timeout=100)
    @tilecore.jit(out_idx=[-1])
    def matmul(M, N, K, block_M=128, block_N=128): ...

    kernel = matmul(1024, 1024, 1024)   # tunes once, then loads the winner from the tuning cache
    matmul.last_report                  # every candidate: time, or why it was skipped

See tuner.py for the flow, pool.py for compile isolation, measure.py for
checking and timing, store.py for the tuning cache, ray_executor.py for Ray.
"""

import sys
import types

from .report import Candidate, TuningReport  # noqa: F401
from .tuner import AutoTuner, autotune, set_autotune_inputs  # noqa: F401


class _CallableModule(types.ModuleType):
    """`import tilecore.autotune` binds the name `tilecore.autotune` to this module, so the module
    itself must work as the decorator `tilecore.autotune(configs=...)` (TileLang's spelling)."""

    def __call__(self, *args, **kwargs):
        return autotune(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
