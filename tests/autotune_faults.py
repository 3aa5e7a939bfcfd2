"""A tilecore plugin that makes the cpu backend fail on purpose, for the autotuner's tests.

It adds a real pass to the cpu pipeline that looks at the kernel's name:
`crash_*` aborts the compiling process (as a compiler segfault would), `hang_*`
never returns, `miscompile_*` negates every value an element store writes (a
wrong kernel that the reference interpreter, which does not run backend
passes, exposes). The autotuner's workers register it by module name, as they
do every plugin registered with `tilecore.plugin.manager.register_plugin`.
"""

from __future__ import annotations

import dataclasses
import os
import time

from tilecore.ir import nodes as N
from tilecore.ir.visitor import Transformer
from tilecore.plugin import hookimpl


class _NegateStores(Transformer):
    """Every element store writes the negated value."""

    def visit_Store(self, node):
        value = node.value
        return dataclasses.replace(node, value=N.UnaryOp("neg", value, value.dtype, value.span))


def fault_pass(func: N.PrimFunc, ctx) -> N.PrimFunc:
    """Crash, hang or miscompile according to the kernel's name; other kernels pass through."""
    if func.name.startswith("crash_"):
        os.abort()
    if func.name.startswith("hang_"):
        while True:
            time.sleep(1)
    if func.name.startswith("miscompile_"):
        return _NegateStores()(func)
    return func


fault_pass.name = "autotune_faults"


@hookimpl
def tilecore_passes(backend, pipeline):
    if backend.name == "cpu":
        pipeline.insert("before_codegen", fault_pass)
