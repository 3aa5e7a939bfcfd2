"""A tilecore plugin that makes the cpu backend fail on purpose, for the autotuner's tests.

It adds a real pass to the cpu pipeline that looks at the kernel's name:
`crash_*` aborts the compiling process (as a compiler segfault would), `hang_*`
never returns, `miscompile_*` turns every `+` in element stores into `-` (a
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


class _PlusToMinus(Transformer):
    """Stored values `a + b` become `a - b` (indices are left alone)."""

    def visit_Store(self, node):
        value = node.value
        if isinstance(value, N.BinOp) and value.op == "+":
            return dataclasses.replace(node, value=dataclasses.replace(value, op="-"))
        return node


def fault_pass(func: N.PrimFunc, ctx) -> N.PrimFunc:
    """Crash, hang or miscompile according to the kernel's name; other kernels pass through."""
    if func.name.startswith("crash_"):
        os.abort()
    if func.name.startswith("hang_"):
        while True:
            time.sleep(1)
    if func.name.startswith("miscompile_"):
        return _PlusToMinus()(func)
    return func


fault_pass.name = "autotune_faults"


@hookimpl
def tilecore_passes(backend, pipeline):
    if backend.name == "cpu":
        pipeline.insert("before_codegen", fault_pass)
