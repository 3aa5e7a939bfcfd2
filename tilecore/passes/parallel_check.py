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
not read the element (every iteration writing the same value is harmless), and
leaving out a variable whose axis has extent 1 (`T.Parallel(1, 8)`: one iteration).
"""

from __future__ import annotations

from typing import Dict, FrozenSet, List, Optional, Set, Tuple

import numpy as np

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
    return any(isinstance(n, N.Load) and n.buffer.name == buffer.name and n.indices == indices for n in walk(value))


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
                        f"tile, or T.atomic_add",
                        s.span,
                        func.source,
                    )
            if isinstance(s, N.Parallel):
                # an axis of extent 1 has one iteration: leaving it out of an index shares nothing
                several = {v.name for v, n in zip(s.vars, s.extents) if not (isinstance(n, int) and n == 1)}
                visit(s.body, par_vars | several, guards, lets)
            elif isinstance(s, N.If):
                inner = guards | frozenset(_var_names(s.cond, lets) & par_vars)
                visit(s.then_body, par_vars, inner, lets)
                visit(s.else_body, par_vars, inner, lets)
            elif isinstance(s, (N.For, N.While, N.Kernel)):
                visit(s.body, par_vars, guards, lets)

    visit(func.body, frozenset(), frozenset(), {})
    for stmt in _parallels(func.body):
        _check_cross_iteration(stmt, func)


# ----------------------------------------------------------------------------- cross-iteration reads

_MAX_ITERATIONS = 1 << 16  # enumerate index spaces up to this size; larger ones are not checked


def _parallels(body) -> List[N.Parallel]:
    out = []
    for s in body:
        if isinstance(s, N.Parallel):
            out.append(s)
        for name in ("body", "then_body", "else_body"):
            sub = getattr(s, name, None)
            if isinstance(sub, tuple) and not isinstance(s, N.Parallel):
                out.extend(_parallels(sub))
    return out


def _eval_index(e, env: Dict[str, np.ndarray]) -> Optional[np.ndarray]:
    """The integer value of `e` for every iteration, or None if it depends on anything else."""
    if isinstance(e, N.Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return np.asarray(e.value, dtype=np.int64)
    if isinstance(e, N.Var):
        return env.get(e.name)
    if isinstance(e, N.Cast) and e.dtype.startswith(("int", "uint")):
        return _eval_index(e.value, env)
    if isinstance(e, N.BinOp) and e.op in ("+", "-", "*", "//", "%"):
        a, b = _eval_index(e.a, env), _eval_index(e.b, env)
        if a is None or b is None:
            return None
        if e.op in ("//", "%") and np.any(b == 0):
            return None
        return {"+": np.add, "-": np.subtract, "*": np.multiply, "//": np.floor_divide, "%": np.mod}[e.op](a, b)
    return None


def _accesses(body, env, lets, guarded, out) -> None:
    """(is_store, buffer name, [index arrays] or None, stmt) for each element access in `body`."""
    lets = dict(lets)
    for s in body:
        if isinstance(s, N.Let):
            for node in walk(s.value):
                if isinstance(node, N.Load):
                    idx = [_eval_index(i, {**env, **lets}) for i in node.indices]
                    out.append((False, node.buffer.name, None if guarded or any(i is None for i in idx) else idx, s))
            value = _eval_index(s.value, {**env, **lets})
            if value is not None:
                lets[s.var.name] = value
            continue
        if isinstance(s, (N.Store, N.If, N.While, N.For)) or not hasattr(s, "body"):
            exprs = []
            if isinstance(s, N.Store):
                exprs = [s.value, *s.indices]
            elif isinstance(s, (N.If, N.While)):
                exprs = [s.cond]
            elif isinstance(s, N.For):
                exprs = [s.begin, s.extent]
            for e in exprs:
                for node in walk(e):
                    if isinstance(node, N.Load):
                        idx = [_eval_index(i, {**env, **lets}) for i in node.indices]
                        out.append(
                            (False, node.buffer.name, None if guarded or any(i is None for i in idx) else idx, s)
                        )
            if isinstance(s, N.Store):
                idx = [_eval_index(i, {**env, **lets}) for i in s.indices]
                out.append((True, s.buffer.name, None if guarded or any(i is None for i in idx) else idx, s))
        if isinstance(s, N.If):
            _accesses(s.then_body, env, lets, True, out)
            _accesses(s.else_body, env, lets, True, out)
        elif isinstance(s, N.While):  # each iteration's own trip count: its accesses are guarded
            _accesses(s.body, env, lets, True, out)
        elif isinstance(s, N.For):
            _accesses(s.body, env, lets, guarded, out)


def _check_cross_iteration(par: N.Parallel, func: N.PrimFunc) -> None:
    """Raise when an iteration provably reads an element that another iteration of `par` writes."""
    size = int(np.prod(par.extents)) if par.extents else 1
    if size > _MAX_ITERATIONS or size < 2:
        return
    grids = np.meshgrid(*[np.arange(n, dtype=np.int64) for n in par.extents], indexing="ij")
    env = {v.name: g.reshape(-1) for v, g in zip(par.vars, grids)}
    accesses: List[Tuple[bool, str, Optional[list], N.Stmt]] = []
    _accesses(par.body, env, {}, False, accesses)
    ids = np.arange(size)
    for store_flag, name, s_idx, store in accesses:
        if not store_flag or s_idx is None:
            continue
        s_arrays = [np.broadcast_to(i, (size,)) for i in s_idx]
        for load_flag, lname, l_idx, _ in accesses:
            if load_flag or lname != name or l_idx is None or len(l_idx) != len(s_idx):
                continue
            l_arrays = [np.broadcast_to(i, (size,)) for i in l_idx]
            written, read = _element_ids(s_arrays, l_arrays)
            order = np.argsort(written, kind="stable")
            pos = np.searchsorted(written[order], read)
            pos = np.clip(pos, 0, size - 1)
            hit = written[order][pos] == read
            writer = order[pos]
            other = hit & (writer != ids)
            if not other.any():
                continue
            q = int(np.argmax(other))
            p = int(writer[q])
            where = lambda k: ", ".join(f"{v.name}={int(env[v.name][k])}" for v in par.vars)  # noqa: E731
            raise TileCompileError(
                f"iteration ({where(q)}) of T.Parallel reads an element of {name} that iteration "
                f"({where(p)}) writes: T.Parallel iterations are independent, so this is a race and "
                f"backends give different results; write into another buffer (double-buffer) or use "
                f"T.serial",
                store.span,
                func.source,
            )


def _element_ids(a_arrays, b_arrays) -> Tuple[np.ndarray, np.ndarray]:
    """One int64 id per iteration for two index tuples, in one shared numbering (equal ids = same element)."""
    a_ids = np.zeros(a_arrays[0].shape, dtype=np.int64)
    b_ids = np.zeros(b_arrays[0].shape, dtype=np.int64)
    for a, b in zip(a_arrays, b_arrays):
        low = min(int(a.min()), int(b.min()))
        span = max(int(a.max()), int(b.max())) - low + 1
        a_ids = a_ids * span + (a - low)
        b_ids = b_ids * span + (b - low)
    return a_ids, b_ids
