"""The launcher: loads an NPU object into the simulator and runs it on the caller's arrays."""

from __future__ import annotations

import threading
from typing import Optional

import numpy as np

from tilecore.diagnostics import TileRuntimeError
from tilecore.interp.dtypes import tile_dtype

from .arch import NPUConfig
from .isa import Program
from .simulator import LaunchReport, Simulator

_last_report: Optional[LaunchReport] = None


def tile_dtype_of(arr: np.ndarray) -> str:
    """The tile dtype name of a numpy array."""
    return tile_dtype(arr.dtype)


def _as_numpy(a):
    if isinstance(a, np.ndarray):
        return a
    from tilecore.runtime.arrays import as_numpy

    return as_numpy(a)


class NPULauncher:
    """`launch(args, bindings)` runs the program; `last_report` holds the launch's cycle report."""

    def __init__(self, blob: bytes, config: Optional[dict] = None, dyn_vars=()):
        try:
            self.program = Program.from_bytes(blob)
        except ValueError as e:
            raise TileRuntimeError(f"npu: cannot load the program: {e}") from None
        self.config = NPUConfig(**config) if config else NPUConfig()
        self.dyn_vars = tuple(dyn_vars) or tuple(self.program.debug.get("dyn_vars", ()))
        self.simulator = Simulator(self.program, self.config)
        self.last_report: Optional[LaunchReport] = None
        self._lock = threading.Lock()  # one simulated device: launches run one at a time

    def __call__(self, args, bindings=None):
        global _last_report
        bindings = bindings or {}
        arrays = [_as_numpy(a) for a in args]
        try:
            dyn = [int(bindings[name]) for name in self.dyn_vars]
        except KeyError as e:
            raise TileRuntimeError(f"npu: no value for the dynamic dimension {e.args[0]}") from None
        with self._lock:
            report = self.simulator.run(arrays, dyn)
        self.last_report = report
        _last_report = report
        return None


def last_report() -> Optional[LaunchReport]:
    """The cycle report of the most recent NPU launch in this process (None before any)."""
    return _last_report
