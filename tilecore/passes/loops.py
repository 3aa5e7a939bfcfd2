"""Loop and pipeline analysis (an analysis only: the function is unchanged).

Guarantees, for every sequential loop (For) of the kernel, in program order,
`ctx.analyses["loops"]` holds a LoopInfo with:

* its kind, nesting depth, constant trip count (None when it depends on
  run-time or dynamic values) and `num_stages`;
* `stage_buffers`: the block-local buffers that the loop body fills by a T.copy
  from a global tensor at the top level of the body before any statement of
  the body reads them. Each iteration overwrites them completely before use,
  so no value flows between iterations through them: a backend may give each
  pipeline stage its own copy (multi-buffering) without changing results;
* `pipelined`: kind "pipelined", num_stages > 1 and at least one stage buffer,
  i.e. there is something to overlap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

from ..ir import nodes as N
from ..ir.visitor import walk, walk_stmts
from .liveness import buffers_used_by
from .simplify import as_int


@dataclass(frozen=True)
class LoopInfo:
    var: str
    kind: str
    span: N.Span
    depth: int
    trip_count: Optional[int]
    num_stages: int
    stage_buffers: Tuple[str, ...]

    @property
    def pipelined(self) -> bool:
        return self.kind == "pipelined" and self.num_stages > 1 and bool(self.stage_buffers)


def _own_loads(s: N.Stmt) -> set[str]:
    """Buffers loaded by the expressions of `s` itself (not its nested bodies)."""
    names: set[str] = set()
    for name in ("indices", "value", "cond", "begin", "extent", "src", "dst", "a", "b", "c"):
        value = getattr(s, name, None)
        for item in value if isinstance(value, tuple) else (value,):
            if hasattr(item, "__dataclass_fields__"):
                names.update(n.buffer.name for n in walk(item) if isinstance(n, N.Load))
    return names


def _reads(stmt: N.Stmt) -> set:
    """Names of buffers `stmt` (or anything nested in it) may read (conservative)."""
    names = set()
    for s in walk_stmts((stmt,)):
        used = {b.name for b in buffers_used_by(s)}
        if isinstance(s, (N.Copy, N.Fill)):
            used.discard(s.dst.buffer.name)  # pure writes
        elif isinstance(s, N.Store):
            used.discard(s.buffer.name)
        names |= used | _own_loads(s)  # an index or value that loads the target still reads it
    return names


def _full_cover(r: N.Region) -> bool:
    return all(isinstance(s, N.Const) and s.value == 0 for s in r.starts) and tuple(r.extents) == tuple(r.buffer.shape)


def _stage_buffers(body) -> Tuple[str, ...]:
    read_so_far = set()
    stages = []
    for s in body:
        if (
            isinstance(s, N.Copy)
            and s.src.buffer.scope == "global"
            and s.dst.buffer.scope != "global"
            and _full_cover(s.dst)
            and s.dst.buffer.name not in read_so_far
        ):
            stages.append(s.dst.buffer.name)
        read_so_far |= _reads(s)
    return tuple(n for n in dict.fromkeys(stages))


def analyze(func: N.PrimFunc) -> List[LoopInfo]:
    """LoopInfo for every For in `func`, in program order."""
    out: List[LoopInfo] = []

    def visit(body, depth):
        for s in body:
            if isinstance(s, N.For):
                out.append(
                    LoopInfo(s.var.name, s.kind, s.span, depth, as_int(s.extent), s.num_stages, _stage_buffers(s.body))
                )
                visit(s.body, depth + 1)
                continue
            for field in ("body", "then_body", "else_body"):
                sub = getattr(s, field, None)
                if isinstance(sub, tuple):
                    visit(sub, depth)

    visit(func.body, 0)
    return out


class LoopsPass:
    """Record loop and pipeline facts in ctx.analyses["loops"]."""

    name = "loops"

    def __call__(self, func: N.PrimFunc, ctx) -> N.PrimFunc:
        ctx.analyses["loops"] = analyze(func)
        return func


loops = LoopsPass()
