"""Fragments that take their extent from the T.Parallel loops that index them.

Guarantee (docs/semantics.md, "Fragments indexed by their loop"): a fragment whose every
use is an element access `frag[i, j]` indexed by exactly the variables of the innermost
enclosing `T.Parallel(M, N)` holds, per dimension, the larger of its declared extent and
the extents of those loops. Such a fragment takes its layout from the loop in TileLang
(every iteration owns the element it indexes), so `f = T.alloc_fragment([heads])` filled
and read by `for i in T.Parallel(block_M)` keeps block_M values even when heads < block_M.
Any other use (a tile operation, another index expression, an access outside a parallel
loop) leaves the fragment as declared, and an out-of-range index stays an error.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Tuple

from ..ir import nodes as N
from ..ir.visitor import Transformer, _child_fields, _is_node, walk

Loop = Optional[Tuple[Tuple[str, ...], Tuple[int, ...]]]  # (variable names, extents) of a T.Parallel


class _Uses:
    """Per fragment: the parallel-loop extents of its loop-indexed accesses, or None (other uses)."""

    def __init__(self) -> None:
        self.extents: Dict[N.Buffer, Optional[List[Tuple[int, ...]]]] = {}

    def scan(self, body: N.Body, loop: Loop) -> None:
        for stmt in body:
            inner = ((tuple(v.name for v in stmt.vars), tuple(stmt.extents))) if isinstance(stmt, N.Parallel) else loop
            if isinstance(stmt, N.Store):
                self._access(stmt.buffer, stmt.indices, loop)
            for name in _child_fields(type(stmt)):
                value = getattr(stmt, name)
                if isinstance(value, tuple) and value and isinstance(value[0], N.Stmt):
                    self.scan(value, inner)
                elif not (isinstance(stmt, N.Store) and name == "buffer"):
                    self._expressions(value, loop, alloc=isinstance(stmt, N.Alloc))

    def _expressions(self, value: object, loop: Loop, alloc: bool) -> None:
        loaded: Dict[N.Buffer, int] = {}  # a Load's buffer is walked right after the Load
        roots = [v for v in (value if isinstance(value, tuple) else (value,)) if _is_node(v)]
        for node in (n for root in roots for n in walk(root)):
            if isinstance(node, N.Load):
                self._access(node.buffer, node.indices, loop)
                loaded[node.buffer] = loaded.get(node.buffer, 0) + 1
            elif isinstance(node, N.Buffer) and node.scope == "fragment" and not alloc:
                if loaded.get(node, 0):
                    loaded[node] -= 1
                else:
                    self.extents[node] = None  # named by a tile operation or a region

    def _access(self, buffer: N.Buffer, indices: Tuple[N.Expr, ...], loop: Loop) -> None:
        if buffer.scope != "fragment" or self.extents.get(buffer, []) is None:
            return
        names = tuple(i.name if isinstance(i, N.Var) else None for i in indices)
        if loop is None or names != loop[0] or len(names) != len(buffer.shape):
            self.extents[buffer] = None
        else:
            self.extents.setdefault(buffer, []).append(loop[1])  # type: ignore[union-attr]


def fragment_extents(func: N.PrimFunc, ctx: object) -> N.PrimFunc:
    """Widen loop-indexed fragments to their loops' extents (see the module docstring)."""
    uses = _Uses()
    uses.scan(func.body, None)
    grown: Dict[N.Buffer, Tuple[int, ...]] = {}
    for buffer, loops in uses.extents.items():
        declared = [d for d in buffer.shape if isinstance(d, int)]
        if not loops or len(declared) != len(buffer.shape):
            continue
        shape = tuple(max([d] + [ext[k] for ext in loops]) for k, d in enumerate(declared))
        if shape != buffer.shape:
            grown[buffer] = shape
    if not grown:
        return func

    class _Grow(Transformer):
        def visit_Buffer(self, b: N.Buffer) -> N.Buffer:
            return dataclasses.replace(b, shape=grown[b]) if b in grown else b

    return dataclasses.replace(func, body=_Grow().visit_body(func.body))
