"""The deferred second gemm of a warp-specialized loop (option defer_gemm, sm_90a): FlashAttention-3's
intra-warpgroup overlap, derived from the user's loop body.

A warp-specialized loop (`warp_specialize`) whose body has two gemms G1 and G2, where G2
accumulates into a buffer nothing else of the iteration needs before the next iteration (attention:
S = Q K^T, softmax, O += P V), runs each warpgroup's iteration k as

    pre(k); issue G1(k); issue G2(k-1); wait for G1(k)       (wgmma groups retire in order: G2 runs on)
    early(k)                                                 (softmax of k, on the CUDA cores, while
                                                              the tensor cores run G2(k-1))
    wait for G2(k-1); late(k); post(k)

with G1(0) and its statements peeled before the loop and G2(n-1) after it. pre / post are the
statements before G1 / after G2; the statements between them split into `late`, those that touch
G2's accumulator, write G2's A operand (or conflict with an earlier late one), and `early`, the
rest, which move above the late ones (attention: the row maxima, the scale and exp2 of the scores
are early; rescaling O and the cast of P are late).

Why it is correct. Moving an early statement above a late one it does not conflict with (no buffer
one writes and the other touches) keeps every value; the post statements run before G2 of the same
iteration, which is allowed because they neither touch G2's accumulator nor write its operands (a
condition). While G2(k-1) runs, nothing reads or writes its accumulator and nothing writes its A
registers: pre, G1 and early(k) touch neither (conditions). A staged buffer G2 reads (V) is read by
nothing else: it is awaited (stage k-1) before G2(k-1) is issued and released after G2(k-1) has
retired; the other staged buffers are released once their last reader of iteration k has run,
G1(k) counting as run once `wgmma.wait_group 1` after G2(k-1)'s issue retired it.

With two warpgroups taking turns (ping-pong), the turn passes right after G1(k) and G2(k-1) are
issued and before any wait: ptxas keeps `bar.arrive` above a `wgmma.wait_group`, but sinks it below
register-only work that follows it (measured: with the arrive after the wait, the softmax ran before
it and the other warpgroup waited for its turn, 0.73x against 0.81x of cuDNN without deferral).

Pure Python planning; lowering imports TVM when the consumer loop is emitted.
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Sequence, Set

from tilecore.ir import nodes as N
from tilecore.lowering.simt_barriers import buffer_accesses

from . import persistent as P


class DeferredGemm(NamedTuple):
    """Where the two gemms sit in the loop body (without its stage copies) and the order of the
    statements between them: `early` then `late` (body indices, each list in source order)."""

    first: int
    second: int
    early: List[int]
    late: List[int]

    def order(self, n_stmts: int) -> List[int]:
        """Body indices of an iteration's statements other than G2, in the order they run."""
        return list(range(self.first + 1)) + self.early + self.late + list(range(self.second + 1, n_stmts))


def deferred_gemm(body: Sequence[N.Stmt], readers) -> Optional[DeferredGemm]:
    """The deferral of `body` (the loop body without its stage copies; `readers` as
    `warp_specialize._readers`), or None when the body does not have the form the module docstring
    names: exactly two top-level gemms, nothing else reading or writing G2's accumulator or
    writing its A operand outside the late statements, no names bound in the body, and each
    staged buffer read either by G2 alone or not by G2."""
    gemms = [i for i, s in enumerate(body) if isinstance(s, N.Gemm)]
    if len(gemms) != 2 or any(isinstance(s, N.Let) for s in body):
        return None
    a, b = gemms
    g1, g2 = body[a], body[b]
    assert isinstance(g1, N.Gemm) and isinstance(g2, N.Gemm)
    acc, operand = g2.c.buffer.name, g2.a.buffer.name
    if g1.c.buffer.name == acc or _touches(g1, acc, operand):
        return None
    if any(_touches(body[i], acc, operand) for i in list(range(a)) + list(range(b + 1, len(body)))):
        return None
    if any(first <= b <= last and (first, last) != (b, b) for first, last in readers):
        return None
    early: List[int] = []
    late: List[int] = []
    late_r: Set[str] = set()
    late_w: Set[str] = set()
    for i in range(a + 1, b):
        r, w = buffer_accesses([body[i]])
        if _touches(body[i], acc, operand) or (r | w) & late_w or w & late_r:
            late.append(i)
            late_r |= r
            late_w |= w
        else:
            early.append(i)
    if not early:
        return None  # nothing to overlap with G2
    return DeferredGemm(a, b, early, late)


def _touches(stmt: N.Stmt, acc: str, operand: str) -> bool:
    """Whether `stmt` reads or writes G2's accumulator `acc` or writes its A operand."""
    r, w = buffer_accesses([stmt])
    return acc in r or acc in w or operand in w


def emit_deferred_loop(lowering, info, barriers) -> None:
    """The warpgroups' loop of a warp-specialized loop with a deferred second gemm (`info.deferred`;
    the schedule of the module docstring), the gemm pair taking turns between the two warpgroups
    when `info.pingpong` (one turn per iteration, one for the peeled G1(0) and one for G2(n-1))."""
    from tvm import tirx as tx
    from tvm.tirx.script.builder import ir as B

    from . import warp_specialize as ws
    from .gemm_rules import emit_wgmma, emit_wgmma_retire

    loop, S, T, plan = info.loop, info.stages, lowering.threads, info.deferred
    body = ws._body(info)
    readers = ws._readers(body, info.copies, lowering.plan.storage)
    C, g1, g2 = len(info.copies), body[plan.first], body[plan.second]
    order = plan.order(len(body))
    # per copy: (position in `order` before which it is awaited, position after which it is
    # released), or None for the copies G2 alone reads
    spans = [
        None
        if f == plan.second
        else (
            min(order.index(i) for i in range(f, l + 1) if i in order),
            max(order.index(i) for i in range(f, l + 1) if i in order),
        )
        for f, l in readers
    ]
    g2_copies = [ci for ci, sp in enumerate(spans) if sp is None]
    begin, n = lowering.lower(loop.begin), lowering.lower(loop.extent)
    lowering.touch((loop,))
    lowering.sync()
    wg = tx.floordiv(lowering.thread, ws.WARPGROUP)
    threads = tx.IntImm("int32", T)
    base = getattr(lowering, "ws_iteration_base", None)  # a persistent block's tile: where the ring is

    def ring(k):
        """The ring iteration of the loop's iteration k."""
        return k if base is None else base + k

    def at(k):
        for c in info.copies:
            lowering.stage[c.dst.buffer.name] = tx.floormod(ring(k), S)
        lowering.ex.bind(loop.var.name, begin + k)

    def full(ci, k):
        ws._call(
            lowering,
            "tc::mbar_wait",
            ws._full(barriers, C, S, ci, tx.floormod(ring(k), S)),
            tx.floormod(tx.floordiv(ring(k), S), 2),
        )

    def empty(ci, k):
        ws.release_stage(lowering, info, barriers, ci, tx.floormod(ring(k), S))

    def turn():
        if info.pingpong:
            ws._call(lowering, "tc::named_sync", ws.TURN_BARRIER + wg, threads)

    def pass_turn(last):
        if info.pingpong:
            ws._pass_turn(lowering, wg, threads, last=last, more=False)

    def run(k, positions):
        """The statements of iteration k at `positions` of `order` (G1 is not among them), each
        staged buffer awaited before its first reader and released after its last."""
        at(k)
        for p in positions:
            for ci, sp in enumerate(spans):
                if sp is not None and sp[0] == p:
                    full(ci, k)
            lowering.emit_stmt(body[order[p]])
            for ci, sp in enumerate(spans):
                if sp is not None and sp[1] == p:
                    empty(ci, k)

    def await_g1(k):
        """Await the staged buffers of iteration k that G1 reads first."""
        at(k)
        for ci, sp in enumerate(spans):
            if sp is not None and order[sp[0]] == plan.first:
                full(ci, k)

    def issue_g1(k):
        """Issue G1 of iteration k, leaving it in flight."""
        at(k)
        lowering.before_tile_op(g1)
        emit_wgmma(lowering, g1, pending=1)

    def await_g2(k):
        at(k)
        for ci in g2_copies:
            full(ci, k)

    def issue_g2(k, pending):
        """Issue G2 of iteration k (its staged buffers awaited), leaving `pending` groups in flight."""
        at(k)
        lowering.before_tile_op(g2)
        emit_wgmma(lowering, g2, pending=pending)

    def released_with_g1(k):
        """Release the staged buffers whose last reader is G1 (G1(k) has retired)."""
        for ci, sp in enumerate(spans):
            if sp is not None and order[sp[1]] == plan.first:
                empty(ci, k)

    at_g1 = order.index(plan.first)
    head, tail = range(at_g1), range(at_g1 + 1, len(order))
    n_early = len(plan.early)
    saved_barrier = lowering.intrinsics[("barrier", None)]
    lowering.intrinsics[("barrier", None)] = ws._no_barrier(lowering, loop)
    with B.If(n > 0):
        with B.Then():
            if info.pingpong:
                with B.If(wg == 1):
                    with B.Then():  # warpgroup 0 takes the first turn
                        ws._call(lowering, "tc::named_arrive", tx.IntImm("int32", ws.TURN_BARRIER), threads)
            lowering.pending_r, lowering.pending_w = set(), set()
            run(0, head)
            await_g1(0)
            turn()
            issue_g1(0)
            pass_turn(last=False)
            emit_wgmma_retire(lowering, g1)
            released_with_g1(0)
            run(0, tail)
    with B.serial(1, n) as k:
        lowering.pending_r, lowering.pending_w = set(), set()
        run(k, head)
        await_g1(k)
        await_g2(k - 1)  # before the turn: do not hold it while the stages land
        turn()
        issue_g1(k)
        issue_g2(k - 1, pending=2)
        pass_turn(last=False)  # before any wait: the other warpgroup's gemms queue behind these
        emit_wgmma_retire(lowering, g1, pending=1)  # G1(k) (groups retire in order); G2(k-1) runs on
        released_with_g1(k)
        run(k, tail[:n_early])
        emit_wgmma_retire(lowering, g2)
        for ci in g2_copies:
            empty(ci, k - 1)
        run(k, tail[n_early:])
    with B.If(n > 0):
        with B.Then():
            lowering.pending_r, lowering.pending_w = set(), set()
            await_g2(n - 1)
            turn()
            issue_g2(n - 1, pending=1)
            pass_turn(last=True)
            emit_wgmma_retire(lowering, g2)
            for ci in g2_copies:
                empty(ci, n - 1)
    lowering.intrinsics[("barrier", None)] = saved_barrier
    for c in info.copies:
        lowering.stage.pop(c.dst.buffer.name, None)
    P.advance_ring(lowering, n)
    lowering.sync()
