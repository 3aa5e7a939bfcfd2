"""Prim_funcs with several `T.Kernel` blocks and `T.alloc_global` scratch (TileLang's split
kernels, e.g. flash decoding): compiled stage by stage, launched one after the other.

Passes and backends see one Kernel at a time (`PrimFunc.split_stages`): each stage is an
ordinary single-Kernel PrimFunc taking the function's parameters and then its scratch
buffers. The Kernel returned to the user has the whole function as its IR and a launcher
that allocates the scratch buffers for the call and runs the stages in order, so a stage
sees every global write of the stages before it (semantics.md, "Several kernels").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Sequence

import numpy as np

from ..diagnostics import TileCompileError
from ..ir import nodes as N
from ..plugin.backend import Artifact
from . import arrays

if TYPE_CHECKING:
    from .kernel import Kernel

# `launch(args, bindings)`, as a backend's tilecore_launcher returns it.
Launch = Callable[[List[Any], Dict[str, int]], None]


def check_scratch(func: N.PrimFunc) -> None:
    """Scratch buffers need static shapes (they are allocated per call, before any binding)."""
    for buf in func.scratch:
        if not all(isinstance(d, int) for d in buf.shape):
            raise TileCompileError(
                f"T.alloc_global {buf.name!r} needs a static shape, got {buf.shape}", buf.span, func.source
            )


def stage_artifact(func: N.PrimFunc, stages: Sequence[Kernel]) -> Artifact:
    """One Artifact describing the stage kernels (their sources, in launch order)."""
    first = stages[0].artifact
    source = "\n\n".join(f"// ---- stage {k}: {s.name}\n{s.artifact.source}" for k, s in enumerate(stages))
    return Artifact(first.backend, first.target, func.name, source, meta={"stages": [s.artifact.entry for s in stages]})


def _scratch_allocator(buf: N.Buffer, like: Any) -> Callable[[], Any]:
    """Allocate `buf` where `like` (the first argument) lives. On the host, floats start as
    NaN so that reading scratch no stage wrote shows up (semantics.md: undefined)."""
    shape = tuple(d for d in buf.shape if isinstance(d, int))  # static: check_scratch
    if isinstance(like, np.ndarray) or like is None:
        dtype = arrays.numpy_dtype(buf.dtype)
        fill = np.nan if np.issubdtype(dtype, np.floating) or buf.dtype == "bfloat16" else 0
        return lambda: np.full(shape, fill, dtype)
    info = arrays.describe(like)
    return arrays.allocator(info, shape, buf.dtype, info.memory_space, zeroed=True)


def stage_launcher(func: N.PrimFunc, stages: Sequence[Kernel]) -> Callable[[], Launch]:
    """The launcher factory of the whole function: scratch per call, then each stage's launch."""
    scratch = func.scratch

    def make() -> Launch:
        launches = [s._launcher() for s in stages]

        def launch(args: List[Any], bindings: Dict[str, int]) -> None:
            like = args[0] if args else None
            full = list(args) + [_scratch_allocator(buf, like)() for buf in scratch]
            for run in launches:
                run(list(full), dict(bindings))

        return launch

    return make
