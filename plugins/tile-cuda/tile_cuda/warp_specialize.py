"""Warp-specialized pipelines on sm_90a (compile option warp_specialize): a producer warpgroup fills the
stages of a `T.Pipelined` loop while the kernel's own warpgroups only compute.

The toolkit's pipeline (`tilecore.lowering.simt_pipeline`) has every thread issue its share of the
stage copies and meet at a block barrier once per iteration, so the warpgroups of a block run in
lockstep: in FlashAttention both run their softmax at the same time and the tensor cores idle.
Here the kernel launches one extra warpgroup (threads T .. T+127), which gives most of its
registers to the others (setmaxnreg):

    producer:       for j, for each stage copy: wait until the copy's buffer of stage j % S is
                    empty (mbarrier: every consumer warp is done with it), issue the copy as cp.async
                    and let its completion arrive on the buffer's "full" mbarrier
                    (cp.async.mbarrier.arrive.noinc)
    warpgroups:     for k: run the body; before the first statement that reads a staged buffer,
                    wait until it is full; after the last one, each warp arrives on its "empty"
                    mbarrier (attention's K is free again after the first gemm, while the
                    softmax and the second gemm still run: the producer refills it early)

Everything else the kernel does runs on the T consumer threads only; their block barriers become
the named barrier 1 over T threads. With two warpgroups and two or more gemms per iteration the
gemms also take turns ("ping-pong", named barriers 2 and 3): warpgroup w waits on barrier 2+w
before each gemm, issues it, arrives on the other's barrier and only then waits for its gemm, so
the tensor cores run one warpgroup's gemm while the other computes its softmax, and the other's
next gemm is queued behind it. The gemms go through the Gemm rule table's `issue` / `retire`
(`LoweringRule.issue`): the wgmma rule leaves its group in flight, and a rule a third party puts
first is used as it would be anywhere else. Warpgroup 1 pre-arrives once and skips its last
arrival, so every barrier generation completes.

Which loops qualify (`ws_loop`): the kernel's only pipelined loop, at the top level of the kernel,
with async stage copies (the toolkit's `pipeline_copies`), every gemm of its body on wgmma, a body
that writes no shared memory and needs no barrier (register-only copies, row reductions inside a
warp), and a trip count and copy regions that name only block indices, dynamic dimensions, the
loop variable and names bound before the loop to expressions of those (the producer recomputes
them). Other loops keep the other pipelines. With option persistent the kernel launches one block
per SM that loops over the output tiles, the ring's counters continuing across them
(`persistent.py`: plain GEMMs, and causal attention by default).

Planning is pure Python; lowering imports TVM when the rules run.
"""

from __future__ import annotations

from math import prod
from typing import List, NamedTuple, Optional, Tuple, Union

from tilecore.ir import nodes as N
from tilecore.ir.types import itemsize
from tilecore.ir.visitor import walk, walk_stmts
from tilecore.lowering.simt_barriers import shared_accesses
from tilecore.lowering.simt_layout import MmaLayout, RowLayout
from tilecore.lowering.simt_pipeline import pipeline_copies
from tilecore.plugin.rules import LoweringRule

from . import cluster as CL
from . import persistent as P
from . import tma_store
from . import ws_tile_loads as TL
from .target import has_wgmma
from .tma import PARAM_PREFIX, TMA_CLAIM, TMA_LIB, TmaCopy, tma_copy, tma_enabled
from .ws_deferred import DeferredGemm, deferred_gemm, emit_deferred_loop

WARPGROUP = 128
PRODUCER_THREADS = WARPGROUP  # a warpgroup, so that it can hand its registers over (setmaxnreg)
PRODUCER_REGISTERS = 40  # enough for the copy loops' addresses
REGISTER_FILE = 65536  # 32-bit registers per SM (sm_90)
CONSUMER_BARRIER = 1  # named barrier of the consumer threads (0 is the whole block's)
TURN_BARRIER = 2  # warpgroup w waits on TURN_BARRIER + w before each gemm (ping-pong)

WS_LIB = r"""
#ifndef TILECORE_WS_LIB
#define TILECORE_WS_LIB
namespace tc {
__device__ __forceinline__ void mbar_init(void* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(smem_addr(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ bool mbar_try_wait(u32 addr, int parity) {
  u32 done;
  asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
               "selp.u32 %0, 1, 0, p;\n}\n" : "=r"(done) : "r"(addr), "r"(parity) : "memory");
  return done != 0;
}
// wait until the phase of parity `parity` of the mbarrier has completed
__device__ __forceinline__ void mbar_wait(void* bar, int parity) {
  const u32 a = smem_addr(bar);
  while (!mbar_try_wait(a, parity)) {}
}
// one arrival per warp, after every lane's accesses (__syncwarp orders them before lane 0's release)
__device__ __forceinline__ void mbar_arrive_warp(void* bar) {
  __syncwarp();
  if ((threadIdx.x & 31) == 0)
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(smem_addr(bar)) : "memory");
}
// arrive on the mbarrier once this thread's earlier cp.async copies have landed
__device__ __forceinline__ void cp_async_arrive(void* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" :: "r"(smem_addr(bar)) : "memory");
}
// hand registers between warpgroups (the producer needs few, the consumers many)
template <int N> __device__ __forceinline__ void regs_decrease() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n"(N));
}
template <int N> __device__ __forceinline__ void regs_increase() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n"(N));
}
__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" :: "r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" :: "r"(id), "r"(threads) : "memory");
}
}  // namespace tc
#endif
"""


class WsLoop(NamedTuple):
    """What the planner recorded for a warp-specialized loop."""

    loop: N.For
    copies: List[N.Copy]
    stages: int
    pingpong: bool
    lets: List[N.Let]  # names bound before the loop that the producer evaluates again
    tma: Tuple[Optional[TmaCopy], ...] = ()  # per copy: its TMA load (option tma), None: cp.async
    deferred: Optional[DeferredGemm] = None  # the second gemm runs on into the next iteration (option defer_gemm)
    persistent: Optional[P.PersistentGrid] = None  # option persistent: the blocks loop over the tiles
    tma_store: Optional[tma_store.TmaStore] = None  # option tma_store: the epilogue's TMA stores
    multicast: Optional[CL.Multicast] = None  # option tma_multicast: clusters of two share these loads
    blocks_per_sm: int = 1  # option ws_blocks_per_sm where the register split leaves room (`_plan_blocks_per_sm`)
    tile_loads: Tuple[TmaCopy, ...] = ()  # copies before the loop the producer loads per tile (`ws_tile_loads`)


def ws_enabled(target, threads: int) -> bool:
    """Whether option warp_specialize asks for it on a target with wgmma (sm_90a): "on", or "auto"
    (the default) with two or more warpgroups (one warpgroup keeps the overlapped wgmma loop)."""
    mode = target.prop("warp_specialize", "")
    return has_wgmma(target) and (mode == "on" or mode == "auto" and threads >= 2 * WARPGROUP)


def ws_loop(func: N.PrimFunc, plan, threads: int, target) -> Optional[WsLoop]:
    """The kernel's loop that runs warp-specialized (see the module docstring), else None."""
    kernel = func.kernel
    if threads % WARPGROUP or threads + PRODUCER_THREADS > 1024:
        return None
    loops = [s for s in walk_stmts(kernel.body) if isinstance(s, N.For) and s.kind == "pipelined"]
    if len(loops) != 1 or all(s is not loops[0] for s in kernel.body):
        return None
    loop = loops[0]
    info = pipeline_copies(loop, kernel, plan, target)
    if info is None:
        return None
    copies, stages = info
    body = _body(loop, copies)
    if _readers(body, copies, plan.storage) is None:
        return None
    known = {v.name for v in kernel.block_vars} | {loop.var.name} | {v.name for v in func.dyn_vars}
    lets = []
    for s in kernel.body[: [id(t) for t in kernel.body].index(id(loop))]:
        # a name of block indices alone (causal attention's trip count): the producer recomputes it
        if isinstance(s, N.Let) and all(
            not isinstance(n, N.Load) and (not isinstance(n, N.Var) or n.name in known) for n in walk(s.value)
        ):
            lets.append(s)
            known.add(s.var.name)
    exprs = [loop.begin, loop.extent] + [st for c in copies for st in c.src.starts + c.dst.starts]
    if any(isinstance(n, N.Var) and n.name not in known for e in exprs for n in walk(e)):
        return None
    if not _barrier_free(body, plan):
        return None
    wgmma = plan.claims.get("wgmma", {})
    gemms = [s for s in walk_stmts(body) if isinstance(s, N.Gemm)]
    if not gemms or any(id(g) not in wgmma for g in gemms):
        return None
    top = {id(s) for s in body}
    pingpong = threads == 2 * WARPGROUP and len(gemms) >= 2 and all(id(g) in top for g in gemms)
    deferred = None
    if target.prop("defer_gemm", False):
        deferred = deferred_gemm(body, _readers(body, copies, plan.storage))
    return WsLoop(loop, copies, stages, pingpong, lets, deferred=deferred)


def _body(info_or_loop, copies=None):
    """The loop body without its stage copies (by identity)."""
    loop, copies = (info_or_loop.loop, info_or_loop.copies) if copies is None else (info_or_loop, copies)
    ids = {id(c) for c in copies}
    return [s for s in loop.body if id(s) not in ids]


def _readers(body, copies, storage):
    """(first, last) index of the body statements that read each copy's staged buffer; None when
    some staged buffer is not read at the body's top level."""
    out = []
    for c in copies:
        at = [i for i, s in enumerate(body) if c.dst.buffer.name in shared_accesses([s], storage)[0]]
        if not at:
            return None
        out.append((at[0], at[-1]))
    return out


def _barrier_free(body, plan) -> bool:
    """Whether lowering `body` emits no block barrier: it writes no shared memory, copies only
    between register fragments of one layout, and reduces only rows held inside a warp."""
    if shared_accesses(body, plan.storage)[1]:
        return False
    storage, layout = plan.storage, plan.layout
    for s in walk_stmts(body):
        if isinstance(s, N.Copy) and not (
            storage.get(s.src.buffer.name) == storage.get(s.dst.buffer.name) == "reg"
            and layout.get(s.src.buffer.name) == layout.get(s.dst.buffer.name)
        ):
            return False
        if isinstance(s, N.Reduce):
            src_l = layout.get(s.src.name)
            if not (
                storage.get(s.src.name) == "reg"
                and isinstance(src_l, MmaLayout)
                and src_l.wn == 1
                and s.dim == 1
                and isinstance(layout.get(s.dst.name), RowLayout)
            ):
                return False
        if isinstance(s, (N.Cumsum, N.Atomic, N.Print)):
            return False
    return True


class WarpSpecializedPipeline(LoweringRule):
    """The consumer side of a warp-specialized loop (plans the kernel; see the module docstring)."""

    name = "warp_specialized"

    def plan(self, ctx) -> None:
        """Claim the loop that runs warp-specialized; give the module the mbarrier helpers."""
        found = ws_loop(ctx.func, ctx.plan, ctx.threads, ctx.target) if ws_enabled(ctx.target, ctx.threads) else None
        if found is None:
            if ctx.func.kernel is not None:
                for what, on in (
                    ("persistent", ctx.target.prop("persistent", "")),
                    ("TMA store", ctx.target.prop("tma_store", "") == "on"),  # (auto: silent)
                ):
                    if on:
                        ctx.plan.notes.append(f"{what}: no: the kernel does not run warp-specialized")
            return
        if tma_enabled(ctx.target):
            found = found._replace(tma=plan_tma(ctx.plan, ctx.target, found.copies))
        found = _plan_schedule_options(ctx, found)
        found = _plan_multicast(ctx, found)
        found = _plan_blocks_per_sm(ctx, found)
        ctx.plan.claimed(self.name)[id(found.loop)] = found
        ctx.plan.device_sources.append(WS_LIB)
        if any(found.tma) or found.tma_store:
            ctx.plan.device_sources.append(TMA_LIB)
        if found.multicast:
            ctx.plan.device_sources.append(CL.CLUSTER_LIB)
        if found.tma_store:
            tma_store.claim(ctx.plan, found.tma_store)
        ctx.plan.notes.append(
            f"warp-specialized pipeline: {found.stages} stages, producer warpgroup"
            + (", ping-pong gemms" if found.pingpong else "")
            + (", second gemm deferred into the next iteration" if found.deferred else "")
        )

    def __call__(self, lowering, loop):
        info = lowering.claim(self.name, loop)
        state = getattr(lowering, "warp_specialized", None)
        if not info or state is None:
            return NotImplemented
        # the deferred schedule issues and retires wgmma groups itself: a Gemm rule a third party put
        # ahead of wgmma gets the gemms through the plain consumer loop's rule-table calls instead
        first = lowering.rules.get("Gemm")
        deferred = info.deferred and getattr(first, "name", None) == "wgmma"
        # only TMA writes the shared memory the loop's wgmma reads (the body writes none, see
        # _barrier_free; what was written before the loop is fenced before its barrier): no proxy
        # fence per gemm, as in CUTLASS's warp-specialized main loops
        lowering.smem_written_by_tma_only = bool(info.tma) and all(info.tma)
        try:
            (emit_deferred_loop if deferred else emit_consumer_loop)(lowering, info, state)
        finally:
            lowering.smem_written_by_tma_only = False
        if info.tile_loads and getattr(lowering, "ws_tile_ordinal", None) is not None:
            TL.release_tile_loads(lowering, info, state)
        return None


def _plan_schedule_options(ctx, found: WsLoop) -> WsLoop:
    """`found` with the epilogue's TMA stores (option tma_store) and the persistent grid (option
    persistent; "auto" wants the TMA-store epilogue) where the kernel qualifies; the plan's notes
    say what was chosen and why not."""
    store_mode = ctx.target.prop("tma_store", "")
    if store_mode:
        param = f"{PARAM_PREFIX}{len(found.copies)}"
        auto = store_mode == "auto"
        store = tma_store.plan_tma_store(ctx.func.kernel, found.loop, ctx.plan, param, auto, ctx.threads)
        if not tma_enabled(ctx.target):
            store = "option tma is off"
        if isinstance(store, str):
            if store_mode == "on" or store not in (tma_store.NOT_PLAIN, "option tma is off"):  # (auto: quiet)
                ctx.plan.notes.append(f"TMA store: no: {store}")
        else:
            found = found._replace(tma_store=store)
            ctx.plan.notes.append(f"TMA store: the epilogue through a {store.bytes}-byte staging tile")
    mode = ctx.target.prop("persistent", "")
    if mode:
        kernel, sm = ctx.func.kernel, ctx.target.prop("sm", 0)
        loads = ctx.target.prop("tile_loads", "")
        grid = P.choose_persistent(
            kernel, found.loop, found.pingpong, sm, mode, found.tma_store is not None, even_trips=bool(loads)
        )
        if not isinstance(grid, str):
            tile_loads: Tuple[TmaCopy, ...] = ()
            # "auto": per-tile loads where the tiles' trip counts are equal (measured faster there,
            # neutral to slower for causal attention's snake rounds)
            if grid.ktiles is None and found.tma and all(found.tma) and (loads == "on" or not grid.snake):
                func = ctx.func
                known = {v.name for v in func.kernel.block_vars} | {v.name for v in func.dyn_vars}
                known |= {let.var.name for let in found.lets}
                tile_loads = TL.plan_tile_loads(ctx, found, known)
            if mode == "auto" and grid.ktiles is None and not grid.snake and not tile_loads:
                grid = "no per-tile loads (auto: a loop of equal trip counts only with them, option tile_loads)"
            else:
                found = found._replace(persistent=grid, tile_loads=tile_loads)
        if isinstance(grid, str):
            ctx.plan.notes.append(f"persistent: no: {grid}")
        else:
            ctx.plan.notes.append(P.describe(grid, mode))
    return found


REGISTER_MARGIN = 48  # consumer registers beyond the fragments: addresses, indices, softmax temporaries


def fragment_registers(plan, threads: int) -> int:
    """32-bit registers per consumer thread that the kernel's register fragments hold."""
    words = 0
    for name, where in plan.storage.items():
        buf = plan.buffers.get(name)
        if where == "reg" and buf is not None:
            words += -(-prod(buf.static_dims()) * itemsize(buf.dtype) // 4)
    return -(-words // threads)


def _plan_blocks_per_sm(ctx, found: WsLoop) -> WsLoop:
    """`found` planned for option ws_blocks_per_sm's blocks per SM when the register split leaves
    each consumer thread its fragments plus REGISTER_MARGIN; else one block per SM and a note (two
    consumer warpgroups of a 128x256 fp32 accumulator need 128 registers each for it alone, and
    ptxas refuses the kernel at 104)."""
    blocks = ctx.target.prop("ws_blocks_per_sm", 1)
    if blocks == 1:
        return found
    need = fragment_registers(ctx.plan, ctx.threads) + REGISTER_MARGIN
    have = register_split(ctx.threads, blocks)[0]
    if need > have:
        ctx.plan.notes.append(
            f"ws_blocks_per_sm={blocks}: no: the register fragments and working registers need about {need} "
            f"registers per consumer thread, {blocks} blocks per SM leave {have}; one block per SM"
        )
        return found
    return found._replace(blocks_per_sm=blocks)


def _plan_multicast(ctx, found: WsLoop) -> WsLoop:
    """`found` with its cluster launch (option tma_multicast, `cluster.py`) where the kernel
    qualifies; the multicast loads' halved tensor maps replace their TMA claims."""
    if not CL.multicast_enabled(ctx.target) or not any(found.tma):
        return found
    planned: Union[Tuple[CL.Multicast, Tuple[Optional[TmaCopy], ...]], str] = "the kernel is persistent"
    if found.persistent is None:
        planned = CL.plan_multicast(ctx.func.kernel, found.loop, found.copies, found.tma, ctx.target)
    if isinstance(planned, str):
        ctx.plan.notes.append(f"TMA multicast: no: {planned}")
        return found
    multicast, loads = planned
    for i in multicast.copies:
        ctx.plan.claimed(TMA_CLAIM)[id(found.copies[i])] = loads[i]
    ctx.plan.notes.append(CL.describe(multicast, found.copies))
    return found._replace(tma=loads, multicast=multicast)


def plan_tma(plan, target, copies) -> Tuple[Optional[TmaCopy], ...]:
    """Each stage copy's TMA load, or None (it keeps cp.async; the plan's notes say why); the
    tensor maps become kernel parameters (`plan.extra_params`)."""
    out: List[Optional[TmaCopy]] = []
    for i, c in enumerate(copies):
        found = tma_copy(c, plan, target, f"{PARAM_PREFIX}{i}")
        if isinstance(found, str):
            plan.notes.append(f"copy into {c.dst.buffer.name} keeps cp.async: {found}")
            out.append(None)
        else:
            plan.notes.append(f"copy into {c.dst.buffer.name}: TMA, {len(found.layout.boxes)} boxes")
            plan.extra_params.append(found.spec.param)
            plan.claimed(TMA_CLAIM)[id(c)] = found
            out.append(found)
    return tuple(out)


class WarpSpecializedKernel(LoweringRule):
    """The kernel of a warp-specialized loop: T consumer threads plus the producer warpgroup."""

    name = "warp_specialized_kernel"

    def __call__(self, lowering, kernel):
        claims = lowering.plan.claims.get(WarpSpecializedPipeline.name)
        if not claims or not lowering.target.shared_pool:
            return NotImplemented
        (info,) = claims.values()
        mbarriers = 8 * 2 * (len(info.copies) * info.stages + len(info.tile_loads))
        lowering.tma_store_at = tma_store.reserve_staging(lowering, info.tma_store, mbarriers)
        if lowering.shared_offsets(lowering.shared_tiles())[1] > lowering.target.max_shared_memory:
            lowering.shared_tail = 0  # no room for the mbarriers: the other pipelines take the loop
            return NotImplemented
        emit_ws_kernel(lowering, kernel, info)
        return None


def _call(lowering, name, *args):
    from tvm.tirx.script.builder import ir as B

    from .intrinsics import helper_call

    B.evaluate(helper_call(lowering, name, *args))


def _full(barriers, C, S, c, stage):
    """The mbarrier of copy c's stage buffer `stage` that the producer's copies arrive on."""
    from tvm import tirx as tx

    return tx.address_of(tx.BufferLoad(barriers, [c * S + stage]))


def _empty(barriers, C, S, c, stage):
    """The mbarrier of copy c's stage buffer `stage` that each consumer warp arrives on once it
    has read the buffer for the last time in an iteration."""
    from tvm import tirx as tx

    return tx.address_of(tx.BufferLoad(barriers, [(C + c) * S + stage]))


def emit_ws_kernel(lowering, kernel: N.Kernel, info: WsLoop) -> None:
    """Launch T + one producer warpgroup; initialize the stage mbarriers; consumers run the kernel body (block
    barriers as named barrier CONSUMER_BARRIER), the producer warpgroup the stage copies. Persistent
    (`info.persistent`): both run the body, resp. the copies, once per tile of the block
    (`persistent.emit_tiles`), the ring's iteration counter continuing across tiles."""
    from tvm import tirx as tx
    from tvm.tirx.script.builder import ir as B

    T, S = lowering.threads, info.stages
    if info.persistent is None:
        frames = lowering.launch(kernel, T + PRODUCER_THREADS)
        lowering.rasterize(kernel)
    else:
        frames = lowering.launch(P.launch_kernel(kernel, info.persistent), T + PRODUCER_THREADS)
    lowering.alloc_all()
    C = len(info.copies)
    # in the dynamic pool, after the tiles (shared_tail): see _full and _empty
    barriers = B.decl_buffer(
        (2 * C * S + 2 * len(info.tile_loads),),
        "uint64",
        data=lowering.pool.data,
        elem_offset=lowering.tail_off // 8,
        scope=lowering.target.shared_scope,
    )
    lowering.warp_specialized = barriers
    store, at = info.tma_store, getattr(lowering, "tma_store_at", None)
    if store is not None and at is not None:  # the epilogue's staging tile (`tma_store`)
        lowering.tma_store_staging = B.decl_buffer(
            (store.rows * store.cols,),
            lowering.storage_dtype(store.dtype),
            data=lowering.pool.data,
            elem_offset=at // (store.bytes // (store.rows * store.cols)),
            scope=lowering.target.shared_scope,
        )
    with B.If(lowering.thread == 0):
        with B.Then():
            for c in range(C):
                # a TMA copy's full barrier waits for one arrival (with its bytes), cp.async's for every thread
                arrivals = 1 if info.tma and info.tma[c] else PRODUCER_THREADS
                # a multicast stage is empty once the consumer warps of every block of the cluster read it
                releases = T // 32 * (CL.CLUSTER if _multicast(info, c) else 1)
                for s in range(S):
                    _call(lowering, "tc::mbar_init", _full(barriers, C, S, c, s), tx.IntImm("int32", arrivals))
                    _call(lowering, "tc::mbar_init", _empty(barriers, C, S, c, s), tx.IntImm("int32", releases))
            for i in range(len(info.tile_loads)):  # one TMA arrival; every consumer warp releases
                _call(lowering, "tc::mbar_init", TL.full_barrier(barriers, info, i), tx.IntImm("int32", 1))
                _call(lowering, "tc::mbar_init", TL.empty_barrier(barriers, info, i), tx.IntImm("int32", T // 32))
            if any(info.tma):
                _call(lowering, "tc::fence_mbar_init")
    lowering.instruction("barrier")  # the whole block, producer included
    if info.multicast:  # the other block's loads and arrivals may target this block's mbarriers now
        _call(lowering, "tc::cluster_sync")
    whole_block = lowering.intrinsics[("barrier", None)]
    consumer_regs, launch_regs = register_split(T, info.blocks_per_sm)
    with B.If(lowering.thread < T):
        with B.Then():
            if consumer_regs > launch_regs:
                _call(lowering, f"tc::regs_increase<{consumer_regs}>")
            lowering.intrinsics[("barrier", None)] = lambda args: _call(
                lowering, "tc::named_sync", tx.IntImm("int32", CONSUMER_BARRIER), tx.IntImm("int32", T)
            )
            if info.persistent is None:
                lowering.emit_body(kernel.body)
            else:
                P.emit_tiles(
                    lowering, kernel, info.persistent, lambda base: _emit_tile_body(lowering, kernel, info, base)
                )
            if getattr(lowering, "tma_store_staging", None) is not None:
                tma_store.emit_drain(lowering)
        with B.Else():
            if consumer_regs > launch_regs:
                _call(lowering, f"tc::regs_decrease<{PRODUCER_REGISTERS}>")
            lowering.intrinsics[("barrier", None)] = whole_block
            emit_producer(lowering, info, barriers)
    for fr in reversed(frames):
        fr.__exit__(None, None, None)


def _emit_tile_body(lowering, kernel: N.Kernel, info: WsLoop, base) -> None:
    """The consumers' body for one tile of a persistent block: the ring's iterations start at `base`.
    A kernel of the general form (`persistent.LOOP_RULES`) first meets at the consumer barrier: its
    shared tiles' last uses in the previous tile are over before this tile writes them (the
    barrier placement sees one tile's body, not the loop around it)."""
    assert info.persistent is not None
    if info.persistent.ktiles is None:
        lowering.sync()
    lowering.ws_iteration_base = base
    try:
        lowering.emit_body(kernel.body)
    finally:
        lowering.ws_iteration_base = None


def register_split(consumer_threads: int, blocks_per_sm: int = 1):
    """(registers per consumer thread after setmaxnreg, registers per thread at launch): the
    launch gives every thread of the T + 128 an equal share of 1/blocks_per_sm of the register
    file; the producer keeps PRODUCER_REGISTERS and the consumers share the rest (a multiple of 8,
    at most 240)."""
    budget = REGISTER_FILE // blocks_per_sm
    per_thread_launch = budget // (consumer_threads + PRODUCER_THREADS) // 8 * 8
    spare = budget // WARPGROUP - PRODUCER_REGISTERS
    consumer = min(240, spare // (consumer_threads // WARPGROUP) // 8 * 8)
    return consumer, min(per_thread_launch, 255)


def emit_producer(lowering, info: WsLoop, barriers) -> None:
    """The producer warpgroup: for each iteration j and each copy, wait until the copy's buffer of
    stage j % S is empty, issue the copy, let its completion arrive on the buffer's "full" mbarrier.
    TMA copies (`info.tma`) are issued by the warpgroup's first thread alone; when every copy is
    one, the other threads have nothing to do."""
    from tvm import tirx as tx
    from tvm.tirx.script.builder import ir as B

    loop, S = info.loop, info.stages
    saved = lowering.t, lowering.threads
    lowering.t, lowering.threads = lowering.t - saved[1], PRODUCER_THREADS  # the copies' thread map
    C = len(info.copies)
    tma = info.tma or (None,) * C
    elected = lowering.t == 0

    def bounds():
        for let in info.lets:
            lowering.ex.bind_let(let, B.Bind(lowering.lower(let.value)))
        return lowering.lower(loop.begin), lowering.lower(loop.extent)

    try:
        span = bounds() if info.persistent is None else None

        def copies():
            if info.persistent is None:
                tile_copies(span, None)
            else:  # each tile of the block; the ring's counter continues
                P.emit_tiles(lowering, lowering.kernel, info.persistent, tile)

        def tile(base):
            span = bounds()
            if info.tile_loads:  # (every copy is TMA: this runs on the elected thread)
                TL.issue_tile_loads(lowering, info, barriers, lowering.ws_tile_ordinal)
            tile_copies(span, base)

        def tile_copies(span, base):
            begin, n = span
            with B.serial(0, n) as j:
                g = j if base is None else base + j  # the ring's iteration
                stage = tx.floormod(g, S)
                for c in info.copies:
                    lowering.stage[c.dst.buffer.name] = stage
                lowering.ex.bind(loop.var.name, begin + j)
                for ci, c in enumerate(info.copies):
                    if tma[ci] is not None:
                        if all(tma):  # the whole loop already runs on the elected thread
                            _issue_tma(lowering, info, barriers, ci, g)
                            continue
                        with B.If(elected):
                            with B.Then():
                                _issue_tma(lowering, info, barriers, ci, g)
                        continue
                    with B.If(g >= S):
                        with B.Then():  # the buffer's previous use (phase g/S - 1) is over
                            _call(
                                lowering,
                                "tc::mbar_wait",
                                _empty(barriers, C, S, ci, stage),
                                tx.floormod(tx.floordiv(g, S) + 1, 2),
                            )
                    lowering.emit_copy_async(c)
                    # arrives once every earlier cp.async of the thread has landed (this copy's included)
                    _call(lowering, "tc::cp_async_arrive", _full(barriers, C, S, ci, stage))
            P.advance_ring(lowering, n)  # (a persistent tile of the general form: the ring's counter)

        if any(tma):
            with B.If(elected):
                with B.Then():
                    for t in tma:
                        if t is not None:
                            _call(lowering, "tc::tma_prefetch", lowering.param_vars[t.spec.param])
                    if all(tma):
                        copies()
        if not all(tma):
            copies()
            lowering.instruction("async_commit")
            lowering.instruction("async_wait", None, 0)
        if info.multicast is not None and span is not None:  # (never persistent) after every load
            with B.If(elected):
                with B.Then():
                    _multicast_tail(lowering, info, barriers, info.multicast, span[1])
    finally:
        lowering.t, lowering.threads = saved
        for c in info.copies:
            lowering.stage.pop(c.dst.buffer.name, None)


def _multicast_tail(lowering, info: WsLoop, barriers, multicast: CL.Multicast, n) -> None:
    """After the last of the n iterations, wait until every multicast stage is empty, as CUTLASS's
    producer tail does: then the consumer warps of both blocks have made their last arrival on
    this block's barriers, and the block may exit (the stage loads into it were awaited by its
    own consumers). This replaces a cluster barrier at the end, whose release (a MEMBAR.ALL.GPU
    behind the epilogue's stores) held every block's exit."""
    from tvm.tirx.script.builder import ir as B

    C, S = len(info.copies), info.stages
    with B.serial(0, S) as t:
        for ci in multicast.copies:
            _wait_empty(lowering, barriers, C, S, ci, n + t)


def _multicast(info: WsLoop, ci: int) -> bool:
    """Whether stage copy ci is loaded for both blocks of a cluster (option tma_multicast)."""
    return info.multicast is not None and ci in info.multicast.copies


def _issue_tma(lowering, info: WsLoop, barriers, ci, j) -> None:
    """Copy ci (a TMA load) into stage j % S (j: the ring's iteration) by its elected thread: wait
    until the buffer is empty, announce the stage's bytes on its full mbarrier, issue one TMA load
    per box (coordinates innermost first; TMA fills the elements outside the tensor with zeros).
    A multicast copy loads this block's half of each box (rows rank * half ..) into both blocks
    of the cluster; the other block's half completes on this block's full mbarrier."""
    from tvm import tirx as tx

    t, C, S = info.tma[ci], len(info.copies), info.stages
    assert t is not None
    multicast = _multicast(info, ci)
    stage = tx.floormod(j, S)
    _wait_empty(lowering, barriers, C, S, ci, j)
    _call(lowering, "tc::mbar_expect_tx", _full(barriers, C, S, ci, stage), tx.IntImm("int32", t.bytes))
    rank = _helper_value(lowering, "tc::cluster_rank") if multicast else None
    issue_tma_boxes(lowering, t, stage, _full(barriers, C, S, ci, stage), rank)


def issue_tma_boxes(lowering, t: TmaCopy, stage, bar, rank=None) -> None:
    """One TMA load per box of `t` into its buffer's stage `stage`, completing on mbarrier `bar`
    (coordinates innermost first; TMA fills the elements outside the tensor with zeros). With a
    cluster `rank` (multicast): this block's half of each box, into both blocks of the cluster."""
    from tvm import tirx as tx

    from tilecore.lowering.tir_expr import cast_to

    starts = [lowering.lower(st) for st in t.copy.src.starts]
    dst = t.copy.dst.buffer
    view, numel = lowering.views[dst.name], lowering.plan.layout[dst.name].numel
    for box in t.layout.boxes:
        row, elem = box.row, box.smem_elem
        if rank is not None:  # this block's half of the box
            row, elem = CL.rank_box(box, rank, t.layout.box_rows, t.layout.box_cols)
        coords = list(starts)
        coords[t.row_axis] = coords[t.row_axis] + row
        coords[t.col_axis] = coords[t.col_axis] + box.col
        coords = [cast_to(c, "int32") for c in reversed(coords)]
        at = tx.address_of(tx.BufferLoad(view, [stage * numel + elem]))
        map_ = lowering.param_vars[t.spec.param]
        if rank is not None:
            mask = tx.IntImm("int32", (1 << CL.CLUSTER) - 1)
            _call(lowering, f"tc::tma_load_multicast<{len(coords)}>", at, map_, bar, mask, *coords)
        else:
            _call(lowering, f"tc::tma_load<{len(coords)}>", at, map_, bar, *coords)


def _helper_value(lowering, name):
    """The value of helper `name` (an int), bound to a name once."""
    from tvm.tirx.script.builder import ir as B

    from .intrinsics import helper_call

    return B.Bind(helper_call(lowering, name, ret="int32"))


def _wait_empty(lowering, barriers, C, S, ci, j) -> None:
    """Wait until copy ci's buffer of stage j % S is empty (its previous use, phase j / S - 1, is
    over); a multicast copy's barrier counts both blocks' consumers, so this covers the cluster
    (a CTA-scope wait, as CUTLASS's: a cluster-scope acquire adds an L1 invalidation per wait)."""
    from tvm import tirx as tx
    from tvm.tirx.script.builder import ir as B

    with B.If(j >= S):
        with B.Then():
            _call(
                lowering,
                "tc::mbar_wait",
                _empty(barriers, C, S, ci, tx.floormod(j, S)),
                tx.floormod(tx.floordiv(j, S) + 1, 2),
            )


def release_stage(lowering, info: WsLoop, barriers, ci, stage) -> None:
    """This consumer warp is done with copy ci's buffer of `stage` for this iteration: it arrives
    on the buffer's empty mbarrier (a multicast copy's in every block of the cluster)."""
    C, S = len(info.copies), info.stages
    helper = "tc::mbar_arrive_warp_cluster" if _multicast(info, ci) else "tc::mbar_arrive_warp"
    _call(lowering, helper, _empty(barriers, C, S, ci, stage))


def emit_consumer_loop(lowering, info: WsLoop, barriers) -> None:
    """The warpgroups' loop: each staged buffer is awaited before its first reader and released
    after its last one (attention's K before the first gemm and free after it, V for the second),
    the gemms taking turns when ping-pong."""
    from tvm import tirx as tx
    from tvm.tirx.script.builder import ir as B

    loop, S, T = info.loop, info.stages, lowering.threads
    body = _body(info)
    readers = _readers(body, info.copies, lowering.plan.storage)
    C = len(info.copies)
    gemms = [i for i, s in enumerate(body) if isinstance(s, N.Gemm)] if info.pingpong else []
    begin, n = lowering.lower(loop.begin), lowering.lower(loop.extent)
    lowering.touch((loop,))
    lowering.sync()
    wg = tx.floordiv(lowering.thread, WARPGROUP)
    threads = tx.IntImm("int32", T)
    if gemms:
        with B.If(tx.And(wg == 1, n > 0)):
            with B.Then():  # warpgroup 0 takes the first turn
                _call(lowering, "tc::named_arrive", tx.IntImm("int32", TURN_BARRIER), threads)
    consumer_barrier = lowering.intrinsics[("barrier", None)]
    lowering.intrinsics[("barrier", None)] = _no_barrier(lowering, loop)
    base = getattr(lowering, "ws_iteration_base", None)  # a persistent block's tile: where the ring is
    with B.serial(0, n) as k:
        g = k if base is None else base + k  # the ring's iteration
        stage = tx.floormod(g, S)
        parity = tx.floormod(tx.floordiv(g, S), 2)
        for c in info.copies:
            lowering.stage[c.dst.buffer.name] = stage
        lowering.ex.bind(loop.var.name, begin + k)
        lowering.pending_r, lowering.pending_w = set(), set()
        for i, s in enumerate(body):
            for ci, (first, _last) in enumerate(readers):
                if first == i:  # the copy's buffer of this stage has landed
                    _call(lowering, "tc::mbar_wait", _full(barriers, C, S, ci, stage), parity)
            if i in gemms:  # this warpgroup's turn: issue the gemm, pass the turn, then wait for it
                lowering.before_tile_op(s)
                _call(lowering, "tc::named_sync", TURN_BARRIER + wg, threads)
                retire = lowering.issue_rules("Gemm", s, in_flight=1)
                _pass_turn(lowering, wg, threads, last=(i == gemms[-1]), more=k + 1 < n)
                retire()
            else:
                lowering.emit_stmt(s)
            for ci, (_first, last) in enumerate(readers):
                if last == i:  # this warp is done with the buffer for this iteration
                    release_stage(lowering, info, barriers, ci, stage)
    lowering.intrinsics[("barrier", None)] = consumer_barrier
    for c in info.copies:
        lowering.stage.pop(c.dst.buffer.name, None)
    P.advance_ring(lowering, n)
    lowering.sync()


def _pass_turn(lowering, wg, threads, last: bool, more) -> None:
    """Arrive on the other warpgroup's turn barrier; warpgroup 1 skips its very last arrival
    (it pre-arrived once, so the counts match and no barrier is left half-arrived)."""
    from tvm import tirx as tx
    from tvm.tirx.script.builder import ir as B

    def arrive():
        _call(lowering, "tc::named_arrive", TURN_BARRIER + 1 - wg, threads)

    if not last:
        arrive()
        return
    with B.If(tx.Or(wg == 0, more)):
        with B.Then():
            arrive()


def _no_barrier(lowering, loop):
    def refuse(args):
        raise lowering.err(
            "internal: the warp-specialized loop body asked for a block barrier (compile with warp_specialize=False)",
            loop,
        )

    return refuse
