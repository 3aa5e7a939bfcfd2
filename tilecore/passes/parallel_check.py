"""Read-modify-writes that several iterations of one T.Parallel make to the same element.

`T.Parallel` iterations are independent (DESIGN.md), so

    for i in T.Parallel(8):
        total = total + A[i]          # total: T.alloc_var

is a race: the reference interpreter evaluates the body once over all `i` (last
write wins, 7 for A = 0..7), a CPU backend that runs the iterations in order
gives 28, a GPU something else. It is the classic mistake of reading
T.Parallel as a plain loop, and it silently gives backend-dependent answers,
so it is a compile error: the store's indices leave out some parallel
variables (so several iterations hit one element) and its value reads that
same element. A store guarded by an `if` on a left-out variable
(`if j == 0: r[i] = r[i] + ...`) is accepted, as are stores of values that do
not read the element (every iteration writing the same value is harmless).
"""
from __future__ import annotations

from typing import Dict, FrozenSet, Set

from ..diagnostics import TileCompileError
from ..ir import nodes as N
from ..ir.visitor import walk


def _var_names(expr, lets: Dict[str, FrozenSet[str]]) -> Set[str]:
    """Names of the variables `expr` depends on, looking through Let-bound names."""
    names: Set[str] = set()
    for node in walk(expr):
        if isinstance(node, N.Var):
            names.add(node.name)
            names |= lets.get(node.name, frozenset())
    return names


def _reads_element(value: N.Expr, buffer: N.Buffer, indices) -> bool:
    return any(isinstance(n, N.Load) and n.buffer.name == buffer.name and n.indices == indices
               for n in walk(value))


def check_parallel_races(func: N.PrimFunc) -> None:
    """Raise TileCompileError at a read-modify-write that several T.Parallel iterations share."""

    def visit(body, par_vars: FrozenSet[str], guards: FrozenSet[str], lets: Dict[str, FrozenSet[str]]):
        lets = dict(lets)
        for s in body:
            if isinstance(s, N.Let):
                lets[s.var.name] = frozenset(_var_names(s.value, lets))
            elif isinstance(s, N.Store) and par_vars:
                used = set()
                for index in s.indices:
                    used |= _var_names(index, lets)
                missing = par_vars - used - guards
                if missing and _reads_element(s.value, s.buffer, s.indices):
                    names = ", ".join(sorted(missing))
                    raise TileCompileError(
                        f"{s.buffer.name} is read and written at the same place by several iterations "
                        f"of T.Parallel (its index does not depend on {names}); T.Parallel iterations "
                        f"are independent, so this accumulation is a race and backends give "
                        f"different results: use T.serial for a sequential loop, T.reduce_sum on a "
                        f"tile, or T.atomic_add", s.span, func.source)
            if isinstance(s, N.Parallel):
                visit(s.body, par_vars | {v.name for v in s.vars}, guards, lets)
            elif isinstance(s, N.If):
                inner = guards | frozenset(_var_names(s.cond, lets) & par_vars)
                visit(s.then_body, par_vars, inner, lets)
                visit(s.else_body, par_vars, inner, lets)
            elif isinstance(s, (N.For, N.Kernel)):
                visit(s.body, par_vars, guards, lets)

    visit(func.body, frozenset(), frozenset(), {})
