"""Running MSL kernels on macOS through torch's MPS shader compiler (torch.mps.compile_shader).

Written against torch's documented API; it has not run here (no Apple GPU on the
development machine) -- see the README. Elsewhere it raises a clear error at launch.
"""

from __future__ import annotations

import sys
from typing import List

from tilecore.diagnostics import TileRuntimeError


def _grid_fn(exprs: List[str]):
    from tilecore.lowering.launch_grid import grid_function

    return grid_function(exprs)


def device_present() -> bool:
    """Whether a Metal GPU can run kernels here (macOS with torch's MPS backend)."""
    if sys.platform != "darwin":
        return False
    try:
        import torch

        return bool(torch.backends.mps.is_available())
    except Exception:
        return False


class MetalKernelLauncher:
    """`launch(args, bindings)` for one MSL kernel (see tilecore_launcher)."""

    def __init__(self, artifact):
        meta = artifact.meta
        self.source = artifact.source
        self.entry = meta["kernel_symbol"]
        self.param_names = meta["params"]
        self.bound = meta["bound_params"]  # tensors in [[buffer(i)]] order (unused ones left out)
        self.scalars = meta["scalar_params"]
        self.threads = int(meta["threads"])
        self.grid = _grid_fn(meta["grid_py"])
        self.library = None

    def __call__(self, args, bindings):
        if sys.platform != "darwin":
            raise TileRuntimeError(
                f"the metal backend generated MSL for {self.entry!r}, but running it needs "
                f"macOS with an Apple GPU (this is {sys.platform})"
            )
        if not device_present():
            raise TileRuntimeError(
                "no Metal device: torch.backends.mps.is_available() is False "
                "(install torch with MPS support on an Apple-silicon Mac)"
            )
        if self.scalars:
            raise TileRuntimeError(
                f"kernel {self.entry!r} takes dynamic dimensions {self.scalars}; the metal "
                f"launcher supports static shapes only"
            )
        import torch

        for name, a in zip(self.param_names, args):
            if not (isinstance(a, torch.Tensor) and a.device.type == "mps"):
                raise TileRuntimeError(f"argument {name!r} must be a torch tensor on the 'mps' device")
            if not a.is_contiguous():
                raise TileRuntimeError(f"argument {name!r} is not contiguous; pass .contiguous()")
        if self.library is None:
            self.library = torch.mps.compile_shader(self.source)
        gx, *rest = self.grid(bindings)
        gy = rest[0] if rest else 1
        gz = rest[1] if len(rest) > 1 else 1
        if gx <= 0 or gy <= 0 or gz <= 0:
            return None
        kernel = getattr(self.library, self.entry)
        by_name = dict(zip(self.param_names, args))
        kernel(*[by_name[n] for n in self.bound], threads=[gx * self.threads, gy, gz], group_size=[self.threads, 1, 1])
        return None
