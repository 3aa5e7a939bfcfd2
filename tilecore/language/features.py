"""The feature vocabulary: what a kernel uses and what a backend declares.

Backends declare a set of these names in their capabilities; the core refuses
a kernel that uses an undeclared one ("backend X does not support Y", at the
user's line), and the conformance suite generates programs only for declared
features and reports the rest as unsupported.
"""

from __future__ import annotations

from typing import Dict

from ..ir import nodes as N
from ..ir.types import DTYPES, is_fp8
from ..ir.visitor import walk

# name -> one-line meaning (shown by `tile backends --verbose` and in reports)
FEATURES: Dict[str, str] = {
    "copy": "T.copy between global, shared, fragment and local tiles",
    "partial_tiles": "tile copies whose bounds are not proven (predicated edges)",
    "fill": "T.fill / T.clear",
    "parallel": "T.Parallel element loops",
    "serial": "sequential loops (range, T.serial)",
    "unroll": "T.unroll loops",
    "pipelined": "T.Pipelined loops",
    "gemm": "T.gemm without transposes",
    "gemm_transpose": "T.gemm with transpose_A / transpose_B",
    "reduce": "T.reduce_sum/max/min/abssum/absmax",
    "cumsum": "T.cumsum",
    "atomic": "T.atomic_add/max/min",
    "while_loop": "`while` loops on run-time conditions",
    "parallel_while": "`while` loops inside T.Parallel (each iteration runs its own loop): per-thread "
    "`while` loops whose condition depends on the thread",
    "runtime_if": "if on run-time values",
    "select": "T.if_then_else",
    "math": "math intrinsics (exp, log, sqrt, tanh, ...)",
    "alloc_var": "T.alloc_var scalars",
    "dynamic_shape": "T.dynamic symbolic dimensions",
    "print": "T.print",
    "multi_block": "grids of more than one block",
}
FEATURES.update({f"dtype:{d}": f"tensors and arithmetic in {d}" for d in DTYPES})

# Opt-in features, outside ALL_FEATURES, so a plugin that declares "every feature" does not claim
# them by accident: `while` loops (a backend lists "while_loop" in its features, and "parallel_while"
# for those inside T.Parallel, per-thread code's thread-dependent ones) and fp8 (a
# backend lists the fp8 dtypes in `Capabilities.dtypes`)
OPT_IN_FEATURES = frozenset({"while_loop", "parallel_while"} | {f"dtype:{d}" for d in DTYPES if is_fp8(d)})
ALL_FEATURES = frozenset(FEATURES) - OPT_IN_FEATURES


def declared_features(capabilities) -> frozenset:
    """What a backend's capabilities declare: its `features`, plus `dtype:X` for each opt-in (fp8)
    dtype X its `dtypes` list (that is how a backend declares fp8, see OPT_IN_FEATURES)."""
    implied = {f"dtype:{d}" for d in capabilities.dtypes if f"dtype:{d}" in OPT_IN_FEATURES}
    return frozenset(capabilities.features) | implied


def features_used(func: N.PrimFunc) -> Dict[str, N.Span]:
    """Map each feature `func` uses to the span of its first use."""
    used: Dict[str, N.Span] = {}

    def add(name, span):
        used.setdefault(name, span)

    if func.dyn_vars:
        add("dynamic_shape", func.dyn_vars[0].span if func.dyn_vars[0].span.line else func.span)
    for node in walk(func):
        span = getattr(node, "span", func.span)
        dtype = getattr(node, "dtype", None)
        if isinstance(dtype, str) and dtype in DTYPES:
            add(f"dtype:{dtype}", span)
        if isinstance(node, N.Copy):
            add("copy", span)
            if node.predicated:
                add("partial_tiles", span)
        elif isinstance(node, N.Fill):
            add("fill", span)
        elif isinstance(node, N.Parallel):
            add("parallel", span)
        elif isinstance(node, N.For):
            add({"serial": "serial", "unroll": "unroll", "pipelined": "pipelined"}[node.kind], span)
        elif isinstance(node, N.Gemm):
            add("gemm", span)
            if node.transpose_a or node.transpose_b:
                add("gemm_transpose", span)
        elif isinstance(node, N.Reduce):
            add("reduce", span)
        elif isinstance(node, N.Cumsum):
            add("cumsum", span)
        elif isinstance(node, N.Atomic):
            add("atomic", span)
        elif isinstance(node, N.While):
            add("while_loop", span)
        elif isinstance(node, N.If):
            add("runtime_if", span)
        elif isinstance(node, N.Select):
            add("select", span)
        elif isinstance(node, N.Call):
            add("math", span)
        elif isinstance(node, N.Alloc) and node.buffer.scope == "var":
            add("alloc_var", span)
        elif isinstance(node, N.Print):
            add("print", span)
        elif isinstance(node, N.Kernel):
            if not all(isinstance(g, N.Const) and g.value == 1 for g in node.grid):
                add("multi_block", span)
    for span in _parallel_whiles(func.body, False):
        add("parallel_while", span)
        break
    return used


def _parallel_whiles(body, inside: bool):
    """Spans of the `while` loops inside a T.Parallel body, in program order."""
    for s in body:
        if isinstance(s, N.While) and inside:
            yield s.span
        for name in ("body", "then_body", "else_body"):
            sub = getattr(s, name, None)
            if isinstance(sub, tuple):
                yield from _parallel_whiles(sub, inside or isinstance(s, N.Parallel))
