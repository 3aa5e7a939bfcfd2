"""The software-pipeline skeleton for `T.Pipelined` loops with asynchronous copies.

`AsyncCopyPipeline` is a lowering rule for the "Pipelined" op that a backend with
asynchronous global -> shared copies registers (tile-cuda does, for sm_80+). It
claims a pipelined loop whose body starts stages by plain 16-byte-vectorizable
copies into shared tiles used only inside the loop; those tiles get `num_stages`
buffers, and the loop becomes: a prologue issuing stages 0..S-2, then per
iteration: wait until stage k has landed, barrier, issue stage k+S-1, run the rest
of the body on stage k. The copies are the target's "async_copy" / "async_commit"
/ "async_wait" device instructions (`simt_intrinsics`); the skeleton names none.

Planning is pure Python; lowering imports TVM when the rule runs.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict, List, Optional, Tuple

from ..ir import nodes as N
from ..ir.visitor import walk, walk_stmts
from ..plugin.rules import LoweringRule
from .simt_copy import vector_width
from .simt_plan import _stmt_exprs


class AsyncCopyPipeline(LoweringRule):
    """Multi-stage pipelines of asynchronous copies (see the module docstring).

    :param applies_to: `target -> bool`, whether this target has the async copy instructions
        (the rule declines every loop elsewhere).
    """

    name = "async_copy_pipeline"

    def __init__(self, applies_to: Callable[[object], bool] = lambda target: True):
        self.applies_to = applies_to

    def plan(self, ctx) -> None:
        """Claim the loops that can run as pipelines; multi-buffer their staged shared tiles."""
        if not self.applies_to(ctx.target):
            return
        claims = ctx.plan.claimed(self.name)
        stages: Dict[str, int] = {}
        for loop in ctx.stmts(N.For):
            if loop.kind != "pipelined":
                continue
            info = pipeline_copies(loop, ctx.kernel, ctx.plan, ctx.target)
            if info:
                claims[id(loop)] = info
                for c in info[0]:
                    name = c.dst.buffer.name
                    stages[name] = max(stages.get(name, 1), info[1])
        for name, s in stages.items():
            if s > 1:
                ctx.plan.layout[name] = dataclasses.replace(ctx.plan.layout[name], stages=s)

    def __call__(self, lowering, loop):
        info = lowering.claim(self.name, loop)
        if not info:
            return NotImplemented
        emit_pipeline(lowering, loop, *info)
        return None


def pipeline_copies(loop: N.For, kernel: N.Kernel, plan, target) -> Optional[Tuple[List[N.Copy], int]]:
    """(async copies, stages) when `loop` can run as an async-copy pipeline, else None."""
    if loop.num_stages < 2:
        return None
    body_vars = {s.var.name for s in walk_stmts(loop.body) if isinstance(s, (N.Let, N.For))}
    copies = [
        s
        for s in loop.body
        if isinstance(s, N.Copy)
        and plan.storage.get(s.src.buffer.name) == "global"
        and plan.storage.get(s.dst.buffer.name) == "smem"
        and vector_width(s, plan, target) > 1
        and not _region_uses(s.src, body_vars)
    ]
    if not copies:
        return None
    names = {c.dst.buffer.name for c in copies}
    # each staged buffer must be written only by its copy and used only inside this loop
    for s in walk_stmts(kernel.body):
        if s not in copies and any(_writes(s, n) for n in names):
            return None
    if len(names) != len(copies):
        return None
    if any(_reads_any(st, names) for st in _flatten_except(kernel.body, loop)):
        return None
    return copies, loop.num_stages


def emit_pipeline(lowering, loop: N.For, copies: List[N.Copy], S: int) -> None:
    """The prologue and steady state of an S-stage pipeline over `loop` (see the module docstring)."""
    from tvm import tirx as tx
    from tvm.tirx.script.builder import ir as B

    begin = lowering.lower(loop.begin)
    n = lowering.lower(loop.extent)
    lowering.touch((loop,))
    lowering.sync()

    def issue(k_rel):
        stage = tx.floormod(k_rel, S)
        for c in copies:
            lowering.stage[c.dst.buffer.name] = stage
        lowering.ex.bind(loop.var.name, begin + k_rel)
        with B.If(k_rel < n):
            with B.Then():
                for c in copies:
                    lowering.emit_copy_async(c)
        lowering.instruction("async_commit")

    # (An overlapped schedule that keeps the asynchronous gemm of stage k in flight while the copies
    # for k+S-2 are issued gave wrong sums on the H200 whenever the assembler did not serialize it,
    # 2026-11-29: the main loop waits for each gemm; benchmarks/results/cuda_README.md has numbers.)
    with B.unroll(0, S - 1) as s0:
        issue(s0)
    with B.serial(0, n) as k:
        lowering.instruction("async_wait", None, S - 2)
        lowering.sync()
        issue(k + (S - 1))
        for c in copies:
            lowering.stage[c.dst.buffer.name] = tx.floormod(k, S)
        lowering.ex.bind(loop.var.name, begin + k)
        lowering.pending_r, lowering.pending_w = set(), set()
        lowering.emit_body([s for s in loop.body if s not in copies])
    lowering.instruction("async_wait", None, 0)
    for c in copies:
        lowering.stage.pop(c.dst.buffer.name, None)
    lowering.sync()


def _region_uses(r: N.Region, names) -> bool:
    return any(isinstance(n, N.Var) and n.name in names for st in r.starts for n in walk(st))


def _writes(s, name) -> bool:
    if isinstance(s, (N.Copy, N.Fill)):
        return s.dst.buffer.name == name
    if isinstance(s, N.Store):
        return s.buffer.name == name
    if isinstance(s, (N.Reduce, N.Cumsum)):
        return s.dst.name == name
    if isinstance(s, N.Gemm):
        return s.c.buffer.name == name
    return False


def _reads_any(s, names) -> bool:
    if isinstance(s, N.Copy) and s.src.buffer.name in names:
        return True
    if isinstance(s, N.Gemm) and (s.a.buffer.name in names or s.b.buffer.name in names):
        return True
    if isinstance(s, (N.Reduce, N.Cumsum)) and s.src.name in names:
        return True
    return any(isinstance(n, N.Load) and n.buffer.name in names for e in _stmt_exprs(s) for n in walk(e))


def _flatten_except(body, skip):
    for s in body:
        if s is skip:
            continue
        yield s
        for name in ("body", "then_body", "else_body"):
            sub = getattr(s, name, None)
            if isinstance(sub, tuple):
                yield from _flatten_except(sub, skip)
