"""Does a kernel write every element of an output? (Then the Kernel allocates it without zero-filling.)

The Kernel allocates `out_idx` outputs zero-filled, so that elements a kernel leaves unwritten are
the same on every backend. That costs a full pass over the output; where this analysis proves that
every element is written, whatever the data, the pass is skipped.

The proof is conservative: it looks for one copy, fill or store into the output that runs
unconditionally (inside the kernel, serial loops from 0 and parallel loops only, no `if`) and whose
index set covers the whole output for the call's sizes: in each dimension the start is a sum of
loop and block variables with positive coefficients, and those terms together with the copy's
extent leave no gap (`bx * 128 + r` with r < 128 and 128 * blocks >= M; partial tiles are clipped
by the copy, so overshooting is fine). An output the kernel also reads, accumulates into (gemm,
reduce with its destination kept, atomics) or prints keeps the zero fill, as its initial value is
then observable.
"""

from __future__ import annotations

import operator
from typing import Callable, Dict, Iterator, Mapping, Optional, Tuple

from ..frontend.affine import linear
from ..ir import nodes as N
from ..ir.visitor import walk, walk_stmts

_ARITH: Dict[str, Callable[[int, int], int]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "//": operator.floordiv,
    "%": operator.mod,
    "min": min,
    "max": max,
}


def writes_every_element(func: N.PrimFunc, output: N.Buffer, bindings: Mapping[str, int]) -> bool:
    """True when every element of parameter `output` is written by any run of `func` with the
    dynamic sizes `bindings`, and its initial contents are never observed (see the module text)."""
    if _observes(func, output.name):
        return False
    sizes = [_value(s, bindings) if isinstance(s, N.Expr) else int(s) for s in output.shape]
    if any(s is None for s in sizes):
        return False
    if any(s == 0 for s in sizes):
        return True  # nothing to write
    return any(
        _covers(starts, extents, loops, sizes)
        for starts, extents, loops in _unconditional_writes(func.body, output.name, {}, bindings)
    )


def _value(e: N.Expr, bindings: Mapping[str, int]) -> Optional[int]:
    """An integer expression's value for `bindings`, or None."""
    if isinstance(e, N.Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value
    if isinstance(e, N.Var):
        return bindings.get(e.name)
    if isinstance(e, N.Cast):
        return _value(e.value, bindings)
    if isinstance(e, N.BinOp) and e.op in _ARITH:
        a, b = _value(e.a, bindings), _value(e.b, bindings)
        if a is None or b is None or (e.op in ("//", "%") and b == 0):
            return None
        return _ARITH[e.op](a, b)
    return None


def _observes(func: N.PrimFunc, name: str) -> bool:
    """Whether `func` reads buffer `name` or updates it in place (its initial value matters)."""
    for stmt in walk_stmts(func.body):
        if isinstance(stmt, N.Copy) and stmt.src.buffer.name == name:
            return True
        if isinstance(stmt, N.Gemm) and name in (stmt.a.buffer.name, stmt.b.buffer.name, stmt.c.buffer.name):
            return True
        if isinstance(stmt, (N.Reduce, N.Cumsum)) and name in (stmt.src.name, stmt.dst.name):
            return True
        if isinstance(stmt, N.Atomic) and stmt.dst.buffer.name == name:
            return True
        if isinstance(stmt, N.Print) and isinstance(stmt.value, N.Buffer) and stmt.value.name == name:
            return True
    return any(isinstance(node, N.Load) and node.buffer.name == name for stmt in func.body for node in walk(stmt))


def _unconditional_writes(
    body, name: str, loops: Dict[N.Expr, int], bindings: Mapping[str, int]
) -> Iterator[Tuple[tuple, tuple, Dict[N.Expr, int]]]:
    """(starts, extents, {loop variable: trip count}) of each write to `name` that every run reaches."""
    for stmt in body:
        if isinstance(stmt, (N.Copy, N.Fill)) and stmt.dst.buffer.name == name:
            yield stmt.dst.starts, stmt.dst.extents, loops
        elif isinstance(stmt, N.Store) and stmt.buffer.name == name:
            yield stmt.indices, (1,) * len(stmt.indices), loops
        elif isinstance(stmt, N.Kernel):
            grid = [_value(g, bindings) for g in stmt.grid]
            extents = [n for n in grid if n is not None]
            if len(extents) == len(grid):
                yield from _unconditional_writes(
                    stmt.body, name, {**loops, **dict(zip(stmt.block_vars, extents))}, bindings
                )
        elif isinstance(stmt, N.For):
            begin, extent = _value(stmt.begin, bindings), _value(stmt.extent, bindings)
            if begin == 0 and extent is not None:
                yield from _unconditional_writes(stmt.body, name, {**loops, stmt.var: extent}, bindings)
        elif isinstance(stmt, N.Parallel):
            yield from _unconditional_writes(stmt.body, name, {**loops, **dict(zip(stmt.vars, stmt.extents))}, bindings)


def _covers(starts, extents, loops: Dict[N.Expr, int], sizes) -> bool:
    """Whether {starts + offsets : loop variables in range, 0 <= offsets < extents} holds every index
    below `sizes`, each loop variable used in one dimension at most."""
    used: set[N.Expr] = set()
    for start, extent, size in zip(starts, extents, sizes):
        terms, constant = linear(start)
        if constant != 0 or any(atom not in loops or coeff <= 0 or atom in used for atom, coeff in terms.items()):
            return False
        used.update(terms)
        # the covered prefix [0, reach) grows by each term, smallest stride first, while no gap opens
        reach = int(extent)
        for coeff, trips in sorted((coeff, loops[atom]) for atom, coeff in terms.items()):
            if trips <= 0:
                return False
            if coeff > reach:
                return False
            reach += coeff * (trips - 1)
        if reach < size:
            return False
    return True
