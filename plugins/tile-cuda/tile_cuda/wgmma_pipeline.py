"""The overlapped wgmma main loop (compile option wgmma_overlap, sm_90a; schedule "release" by default).

The toolkit's cp.async pipeline (`tilecore.lowering.simt_pipeline`) waits for each gemm's wgmma
group before the next iteration, so the tensor cores idle while a warpgroup crosses the barrier and
issues the next copies. `WgmmaOverlapPipeline` takes a `T.Pipelined` loop with a static trip count
whose body is only the stage copies and one wgmma gemm with A in shared memory, and keeps one wgmma
group in flight. Two schedules (the option's value):

"slack" (option True; S >= 3 stages), one barrier per k-step:
    prologue:    issue stages 0 .. S-3                       (prefetch distance S-2, not S-1)
    iteration k: cp.async wait until stage k has landed; fence.proxy.async; barrier
                 wgmma on stage k, commit, wgmma.wait_group 1 (retires gemm k-1, gemm k runs on)
                 issue the copies for k+S-2 into stage (k+S-2) % S = (k-2) % S
"release" (S >= 2 stages), two barriers per k-step:
    prologue:    issue stages 0 .. S-2                       (prefetch distance S-1, as the plain loop)
    iteration k: as above up to wgmma.wait_group 1; barrier
                 issue the copies for k+S-1 into stage (k+S-1) % S = (k-1) % S
Both: the last k-step is an iteration with wgmma.wait_group 0 and no copies; then cp.async wait 0,
barrier.

Why the stage reuse is safe. "slack": the copies issued in iteration k overwrite the stage gemm k-2
read. Every warpgroup retired gemm k-2 with its `wait_group 1` in iteration k-1, before it reached
iteration k's first barrier, and every copy of iteration k is issued after that barrier. The stages
that gemms k-1 and k (possibly still in flight) read, (k-1) % S and k % S, and the stages of the
copies in flight, (k+1) % S .. (k+S-3) % S, are all distinct from (k-2) % S for S >= 3. "release":
the copies overwrite the stage gemm k-1 read; every warpgroup retired gemm k-1 (`wait_group 1` after
issuing gemm k) before the second barrier, and the copies follow it; only gemm k (stage k % S) can
still run. In both, the stage gemm k reads landed before the first barrier: `ahead` copy groups
were committed before iteration 0 and one per iteration, so waiting until at most ahead-1 are
pending completes the group of stage k.

Why the last k-step is peeled: with the final `wgmma.wait_group 0` after the loop, ptxas (CUDA
13.0) scheduled the epilogue's accumulator reads above it, into the still-running last group (the
wrong sums of 2026-11-29; benchmarks/results/h200-session5/).

Pure Python planning; lowering imports TVM when the rule runs.
"""

from __future__ import annotations

from typing import List

from tilecore.ir import nodes as N
from tilecore.lowering.simt_pipeline import AsyncCopyPipeline

from .target import has_wgmma


def overlap_enabled(target) -> bool:
    """Whether the overlapped wgmma main loop is on: sm_90a with wgmma and option wgmma_overlap."""
    return has_wgmma(target) and bool(target.prop("wgmma_overlap", ""))


def min_stages(schedule: str) -> int:
    """Pipeline stages the schedule needs: one of slack for "slack", none for "release"."""
    return 3 if schedule == "slack" else 2


class WgmmaOverlapPipeline(AsyncCopyPipeline):
    """A pipelined loop of stage copies + one shared-A wgmma gemm with that gemm kept in flight
    across iterations (see the module docstring). Other loops go to the plain async-copy pipeline."""

    name = "wgmma_overlap_pipeline"

    def __init__(self):
        super().__init__(applies_to=overlap_enabled)

    def plan(self, ctx) -> None:
        """Claim (and multi-buffer, as the async-copy pipeline does) the loops that qualify."""
        super().plan(ctx)
        claims = ctx.plan.claims.get(self.name, {})
        wgmma_gemms = ctx.plan.claims.get("wgmma", {})
        for loop in ctx.stmts(N.For):
            info = claims.get(id(loop))
            if info is None:
                continue
            gemm = overlapped_gemm(loop, info[0], wgmma_gemms, ctx.plan.storage)
            # a static trip count: with a dynamic one the peeled last k-step sits under an `if`, and
            # ptxas serializes every wgmma of the kernel (C7514) for the path that skips it
            if (
                gemm is None
                or info[1] < min_stages(ctx.target.prop("wgmma_overlap"))
                or not isinstance(loop.extent, N.Const)
            ):
                del claims[id(loop)]

    def __call__(self, lowering, loop):
        info = lowering.claim(self.name, loop)
        if not info:
            return NotImplemented
        copies, stages = info
        gemm = overlapped_gemm(loop, copies, lowering.plan.claims.get("wgmma", {}), lowering.plan.storage)
        emit_overlapped_loop(lowering, loop, copies, stages, gemm, lowering.target.prop("wgmma_overlap"))
        return None


def overlapped_gemm(loop: N.For, copies: List[N.Copy], wgmma_gemms, storage):
    """The one gemm of `loop` besides its stage copies when it runs on wgmma from shared A and B
    (and does not clear its accumulator per iteration), else None."""
    rest = [s for s in loop.body if s not in copies]
    if len(rest) != 1 or not isinstance(rest[0], N.Gemm):
        return None
    g = rest[0]
    if id(g) not in wgmma_gemms or storage.get(g.a.buffer.name) != "smem" or g.clear_accum:
        return None
    return g


def emit_overlapped_loop(lowering, loop: N.For, copies: List[N.Copy], S: int, gemm: N.Gemm, schedule: str) -> None:
    """The prologue, steady state and last k-step of the overlapped loop (see the module docstring);
    the loop's trip count is a constant."""
    from tvm import tirx as tx
    from tvm.tirx.script.builder import ir as B

    begin = lowering.lower(loop.begin)
    n = lowering.lower(loop.extent)
    release = schedule == "release"
    ahead = S - 1 if release else S - 2
    lowering.touch((loop,))
    lowering.sync()

    def at_stage(k_rel):
        for c in copies:
            lowering.stage[c.dst.buffer.name] = tx.floormod(k_rel, S)
        lowering.ex.bind(loop.var.name, begin + k_rel)

    def issue(k_rel):
        at_stage(k_rel)
        with B.If(k_rel < n):
            with B.Then():
                for c in copies:
                    lowering.emit_copy_async(c)
        lowering.instruction("async_commit")

    def step(k_rel, pending):
        lowering.instruction("async_wait", None, ahead - 1)
        lowering.sync()
        at_stage(k_rel)
        # through the Gemm rules (the wgmma rule leaves `pending` groups in flight; a rule that
        # completes the gemm at once is also correct here, only not overlapped)
        lowering.issue_rules("Gemm", gemm, in_flight=pending)
        if pending:
            if release:
                lowering.sync()  # every warpgroup has retired gemm k-1: its stage is free
            issue(k_rel + ahead)
        lowering.pending_r, lowering.pending_w = set(), set()

    with B.unroll(0, ahead) as s0:
        issue(s0)
    with B.serial(0, n - 1) as k:
        step(k, 1)
    # the last k-step retires every group in straight-line code (module docstring; checked by
    # tests/test_wgmma.py::test_overlapped_loop_reads_accumulators_after_the_last_wait)
    if n.value > 0:  # a static trip count (plan)
        step(n - 1, 0)
    lowering.instruction("async_wait", None, 0)
    for c in copies:
        lowering.stage.pop(c.dst.buffer.name, None)
    lowering.sync()
