"""Refuse kernels that use what the chosen backend does not declare.

Guarantee: after this pass, every feature of `features_used(func)` is in
`backend.capabilities.features` (dtype features `dtype:X` are also satisfied
by X in `capabilities.dtypes`), every T.gemm's (input dtype, accumulator
dtype) pair is in `capabilities.gemm_dtypes` when the backend lists any, and
`threads=` is within `capabilities.max_threads`. Otherwise it raises
UnsupportedFeatureError(backend, feature, span, source) at the first use in
the source ("backend cpu does not support T.cumsum"); the error's
`feature_key` is the vocabulary name ("cumsum"). Without a backend in the
context the pass does nothing.

Runs after bounds analysis: a copy proven in bounds does not need the
"partial_tiles" feature.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

from ..diagnostics import TileCompileError, UnsupportedFeatureError
from ..ir import nodes as N
from ..ir.types import is_fp8
from ..ir.visitor import walk_stmts

# vocabulary name -> what the error message calls it
FEATURE_LABELS: Dict[str, str] = {
    "copy": "T.copy",
    "partial_tiles": "tile copies that are not proven in bounds (partial tiles)",
    "fill": "T.fill / T.clear",
    "parallel": "T.Parallel",
    "serial": "serial loops",
    "unroll": "T.unroll",
    "pipelined": "T.Pipelined",
    "gemm": "T.gemm",
    "gemm_transpose": "T.gemm with transpose_A / transpose_B",
    "reduce": "T.reduce_* (reductions)",
    "cumsum": "T.cumsum",
    "atomic": "T.atomic_add / atomic_max / atomic_min",
    "runtime_if": "`if` on run-time values",
    "select": "T.if_then_else",
    "math": "math intrinsics (T.exp, T.log, ...)",
    "alloc_var": "T.alloc_var",
    "dynamic_shape": "T.dynamic (dynamic shapes)",
    "print": "T.print",
    "multi_block": "grids of more than one block",
    "while_loop": "`while` loops",
    "parallel_while": "`while` loops inside T.Parallel (a per-thread `while` whose condition depends on the thread)",
}


def feature_label(feature: str) -> str:
    """A human description of a feature name for error messages."""
    if feature.startswith("dtype:"):
        dtype = feature[len("dtype:") :]
        return f"the fp8 dtype {dtype}" if is_fp8(dtype) else f"dtype {dtype}"
    return FEATURE_LABELS.get(feature, feature)


def _order(span: N.Span) -> Tuple[int, int]:
    # spans without a line sort last: a located culprit is more useful
    return (span.line if span.line > 0 else 1 << 30, span.col)


def _supported(feature: str, caps) -> bool:
    if feature in caps.features:
        return True
    if feature.startswith("dtype:"):
        return feature[len("dtype:") :] in caps.dtypes
    return False


def first_unsupported(func: N.PrimFunc, backend) -> Optional[Tuple[str, str, N.Span]]:
    """(feature key, label, span) of the first unsupported use, or None."""
    from ..language.features import features_used

    caps = backend.capabilities
    problems = []
    for feature, span in features_used(func).items():
        if not _supported(feature, caps):
            problems.append((_order(span), feature, feature_label(feature), span))
    if caps.gemm_dtypes:
        for s in walk_stmts(func.body):
            if isinstance(s, N.Gemm):
                pair = (s.a.buffer.dtype, s.c.buffer.dtype)
                if pair not in caps.gemm_dtypes:
                    problems.append(
                        (
                            _order(s.span),
                            "gemm_dtype",
                            f"T.gemm with {pair[0]} inputs and a {pair[1]} accumulator",
                            s.span,
                        )
                    )
    if not problems:
        return None
    _, key, label, span = min(problems, key=lambda p: p[0])
    return key, label, span


class CheckFeaturesPass:
    """Raise UnsupportedFeatureError at the first feature the backend lacks."""

    name = "check_features"

    def __call__(self, func: N.PrimFunc, ctx) -> N.PrimFunc:
        backend = getattr(ctx, "backend", None)
        if backend is None:
            return func
        source = ctx.source or func.source
        found = first_unsupported(func, backend)
        if found is not None:
            key, label, span = found
            err = UnsupportedFeatureError(backend.name, label, span, source)
            err.feature_key = key
            raise err
        max_threads = backend.capabilities.max_threads
        if max_threads is not None:
            for s in walk_stmts(func.body):
                if isinstance(s, N.Kernel):
                    total = 1
                    for t in s.threads:
                        total *= t
                    if total > max_threads:
                        raise TileCompileError(
                            f"threads={total} exceeds the {max_threads} threads per "
                            f"block that backend {backend.name} supports",
                            s.span,
                            source,
                        )
        return func


check_features = CheckFeaturesPass()
