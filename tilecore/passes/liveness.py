"""Buffer liveness over the kernel body.

Guarantee: for every buffer allocated inside the T.Kernel, `interval` is a
closed range of statement positions (pre-order numbering of the kernel body)
that contains every position where the buffer's contents may be needed:

* it runs from the first to the last statement that reads or writes the
  buffer (an unused buffer is live only at its Alloc);
* a use inside a loop (For, while or T.Parallel; a while's condition too) that does not also contain the
  buffer's Alloc extends the interval to the whole loop, because a value
  written in one iteration may be read in the next.

Two buffers whose intervals do not overlap may therefore share storage.
`ctx.analyses["liveness"]` holds the Liveness result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Tuple

from ..ir import nodes as N
from ..ir.visitor import walk

_BODY_FIELDS = ("body", "then_body", "else_body")


@dataclass
class Liveness:
    """Live intervals of kernel-allocated buffers, by name, in statement positions."""

    buffers: Dict[str, N.Buffer] = field(default_factory=dict)
    allocs: Dict[str, N.Alloc] = field(default_factory=dict)
    alloc_position: Dict[str, int] = field(default_factory=dict)
    interval: Dict[str, Tuple[int, int]] = field(default_factory=dict)
    num_positions: int = 0

    def overlaps(self, a: str, b: str) -> bool:
        (a0, a1), (b0, b1) = self.interval[a], self.interval[b]
        return a0 <= b1 and b0 <= a1

    def live_at(self, position: int) -> List[str]:
        return [n for n, (lo, hi) in self.interval.items() if lo <= position <= hi]


def buffers_used_by(stmt: N.Stmt) -> List[N.Buffer]:
    """Buffers a statement reads or writes itself (not in nested bodies); hints are not uses."""
    if isinstance(stmt, (N.Hint, N.Alloc)):
        return []
    found: List[N.Buffer] = []
    seen = set()
    for name in (
        "buffer",
        "src",
        "dst",
        "a",
        "b",
        "c",
        "value",
        "indices",
        "cond",
        "begin",
        "extent",
        "grid",
        "starts",
    ):
        value = getattr(stmt, name, None)
        if value is None:
            continue
        items = value if isinstance(value, tuple) else (value,)
        for item in items:
            if not hasattr(item, "__dataclass_fields__"):
                continue
            for node in walk(item):
                if isinstance(node, N.Buffer) and node.name not in seen:
                    seen.add(node.name)
                    found.append(node)
    return found


def _stmt_end(stmt: N.Stmt, position: int) -> int:
    """Position of the last statement nested in `stmt` (pre-order numbering)."""
    end = position
    for name in _BODY_FIELDS:
        for s in getattr(stmt, name, ()) or ():
            end = _stmt_end(s, end + 1)
    return end


def analyze(func: N.PrimFunc) -> Liveness:
    """Live intervals of every buffer allocated in `func`'s kernel."""
    live = Liveness()
    loops: List[Tuple[int, int]] = []
    alloc_depth: Dict[str, int] = {}
    counter = [0]

    def use(name: str, position: int) -> None:
        if name not in live.alloc_position:
            return  # a parameter: not planned here
        lo, hi = position, position
        depth = alloc_depth[name]
        if len(loops) > depth:
            lo, hi = loops[depth]
        old = live.interval.get(name)
        live.interval[name] = (lo, hi) if old is None else (min(old[0], lo), max(old[1], hi))

    def visit(body) -> None:
        for s in body:
            position = counter[0]
            counter[0] += 1
            if isinstance(s, N.Alloc):
                name = s.buffer.name
                live.buffers[name] = s.buffer
                live.allocs[name] = s
                live.alloc_position[name] = position
                alloc_depth[name] = len(loops)
                continue
            is_loop = isinstance(s, (N.For, N.While, N.Parallel))
            if isinstance(s, N.While):  # its condition is read again after every pass of the body
                loops.append((position, _stmt_end(s, position)))
            for b in buffers_used_by(s):
                use(b.name, position)
            if is_loop and not isinstance(s, N.While):
                loops.append((position, _stmt_end(s, position)))
            for name in _BODY_FIELDS:
                sub = getattr(s, name, None)
                if isinstance(sub, tuple):
                    visit(sub)
            if is_loop:
                loops.pop()

    visit(func.body)
    for name, position in live.alloc_position.items():
        live.interval.setdefault(name, (position, position))  # never used: live only at its Alloc
    live.interval = {n: live.interval[n] for n in live.alloc_position}  # program order
    live.num_positions = counter[0]
    return live


class LivenessPass:
    """Record buffer liveness in ctx.analyses["liveness"]; the function is unchanged."""

    name = "liveness"

    def __call__(self, func: N.PrimFunc, ctx) -> N.PrimFunc:
        ctx.analyses["liveness"] = analyze(func)
        return func


liveness = LivenessPass()
