"""Split-K for GEMM kernels whose grid is too small to fill the GPU (decode shapes such as
16 x 8192 x 8192): a Tile IR rewrite before the SIMT lowering plus the kernel rule that lowers
its reduction.

A kernel of the plain form

    with T.Kernel(gx, gy, threads=T) as (bx, by):
        <allocations>; T.clear(C_f)
        for k in T.Pipelined(KT, num_stages=S):      # stage copies global -> shared, T.gemm(.., C_f)
            ...
        <epilogue reading C_f>                         # e.g. T.copy(C_f, C[by * bM, bx * bN])

whose grid has fewer blocks than the GPU has SMs and whose K loop is long gets one more grid
dimension z of `splits` blocks; block z runs k-tiles [z * chunk, (z + 1) * chunk) (chunk =
ceil(KT / splits); tiles past KT read zeros: their copies become predicated). After the loop,
every block stores its float32 accumulator to a workspace (`PARTIALS_PARAM`, one slot per tile
and split, thread-major so that the stores are coalesced), fences, and thread 0 counts the
arrival on the tile's counter (`COUNTERS_PARAM`). The last block to arrive resets the counter to
0, sums the slots in split order 0, 1, ... (so the result never depends on which block came
last) into its accumulator and runs the kernel's own epilogue; the other blocks skip it. The
launcher allocates both workspaces per device and grid (zeroed once) and passes them as
pointer parameters (`meta["split_k"]`).

Auto (option split_k=None): splits when the grid has at most half as many blocks as
`SM_COUNT[sm]` and the loop has at least MIN_KTILES_TO_SPLIT k-tiles (shorter loops, such as the
tests' 12-k-tile GEMMs that refill every pipeline stage, keep their code): as many splits as
bring the grid to at most TARGET_WAVES x the SM count (rounded down to a count that divides the
k-tiles where one is within half of it), at most MAX_SPLITS and with at least
MIN_KTILES_PER_SPLIT k-tiles each. On the H200 (benchmarks/results/h200-session11-splitk):
16 x 8192 x 8192 with 64 blocks of 16 x 128 went from 0.86x to 1.0x cuBLAS with 4 splits (8:
0.83x, 16: 0.61x), while a grid of 128 blocks (about one per SM) was fastest unsplit (1.11x;
2 splits 1.04x, 4 splits 0.99x).
split_k=0 or 1: off (the code of before, byte for byte); split_k=n >= 2: n splits (clamped to
the k-tile count) wherever the kernel qualifies, whatever its grid. Kernels whose loop warp
specialization takes (blocks of two or more warpgroups on sm_90a) keep that schedule.

A kernel keeps its code by the first failing rule of `SPLIT_K_RULES`; the plan's notes say which.
Pure Python (no TVM) except `SplitKKernel.__call__`.
"""

from __future__ import annotations

import dataclasses
from math import prod
from typing import Callable, List, NamedTuple, Optional, Sequence, Tuple, Union

from tilecore.ir import nodes as N
from tilecore.ir.visitor import substitute, walk, walk_stmts
from tilecore.lowering.simt_plan import whole_region
from tilecore.plugin.rules import LoweringRule

PARTIALS_PARAM = "tc_splitk_partials"  # float32 [tiles x splits x floats per block]
COUNTERS_PARAM = "tc_splitk_counters"  # int32 [tiles], 0 between launches
WORKSPACE_PARAMS = (PARTIALS_PARAM, COUNTERS_PARAM)
SPLIT_VAR = "tc_splitk_z"  # the block index of the split
HINT = "split_k"  # the Hint that marks the end of the split loop (read by SplitKKernel)
CLAIM = "split_k"

# SMs of the usual part of each architecture (the auto choice is made at compile time, without
# a GPU): A100 108, RTX 30 84, L4/RTX 40 58-128 (128), H100/H200 SXM 132, B200 148
SM_COUNT = {80: 108, 86: 84, 89: 128, 90: 132, 100: 148, 120: 170}
DEFAULT_SM_COUNT = 132
TARGET_WAVES = 2
MIN_KTILES_PER_SPLIT = 8  # each split's pipeline still runs long enough to pay for its prologue
MIN_KTILES_TO_SPLIT = 32
MAX_SPLITS = 16


class SplitKLoop(NamedTuple):
    """A kernel of the plain form: its parts and facts."""

    kernel: N.Kernel
    loop_index: int  # position of the pipelined loop in the kernel body
    loop: N.For
    accumulator: N.Buffer
    ktiles: int
    blocks: int


class SplitKInfo(NamedTuple):
    """What SplitKKernel lowers: the accumulator, the split count and each split's k-tiles."""

    accumulator: str
    splits: int
    chunk: int


def _top(k: N.Kernel) -> Tuple[N.Stmt, ...]:
    return tuple(k.body)


def _loops(k: N.Kernel) -> List[int]:
    return [i for i, s in enumerate(k.body) if isinstance(s, N.For) and s.kind == "pipelined"]


def _gemms(loop: N.For) -> List[N.Gemm]:
    return [s for s in loop.body if isinstance(s, N.Gemm)]


def _static(e) -> Optional[int]:
    return e.value if isinstance(e, N.Const) and isinstance(e.value, int) else None


def _prefix_ok(k: N.Kernel, i: int, acc: N.Buffer) -> bool:
    """Before the loop: allocations, hints and the accumulator's clear, nothing else."""
    cleared = False
    for s in k.body[:i]:
        if isinstance(s, N.Fill) and s.dst.buffer.name == acc.name:
            cleared = whole_region(s.dst) and isinstance(s.value, N.Const) and s.value.value == 0
        elif not isinstance(s, (N.Alloc, N.Hint)):
            return False
    return cleared


def _body_ok(loop: N.For, acc: N.Buffer) -> bool:
    """The loop body: copies global -> shared and gemms of shared tiles into the accumulator."""
    for s in loop.body:
        if isinstance(s, N.Copy):
            if s.src.buffer.scope != "global" or s.dst.buffer.scope != "shared":
                return False
        elif isinstance(s, N.Gemm):
            if s.c.buffer.name != acc.name or s.clear_accum or s.a.buffer.scope != "shared":
                return False
        else:
            return False
    return True


def _epilogue_ok(k: N.Kernel) -> bool:
    """After the loop: no statement names a tile the loop fills (each split's last stage differs)."""
    filled = {s.dst.buffer.name for s in _loop(k).body if isinstance(s, N.Copy)}
    after = k.body[_loops(k)[0] + 1 :]
    return not any(isinstance(n, N.Buffer) and n.name in filled for s in after for n in walk(s))


def _grid_blocks(k: N.Kernel) -> Optional[int]:
    sizes = [_static(g) for g in k.grid]
    return None if any(s is None for s in sizes) else prod(sizes)  # type: ignore[arg-type]


def _loop(k: N.Kernel) -> N.For:
    """The kernel's one top-level pipelined loop (after the rule that checks there is one)."""
    loop = k.body[_loops(k)[0]]
    assert isinstance(loop, N.For)
    return loop


def _acc(k: N.Kernel) -> N.Buffer:
    return _gemms(_loop(k))[0].c.buffer


_Check = Callable[[N.Kernel], bool]
# the plain form (the module docstring), shared with the persistent schedule (`persistent.py`)
PLAIN_GEMM_RULES: Tuple[Tuple[str, _Check], ...] = (
    ("the grid size is not known at compile time", lambda k: _grid_blocks(k) is not None),
    ("the kernel has no T.Pipelined loop at its top level, or more than one", lambda k: len(_loops(k)) == 1),
    ("the loop's trip count is not a compile-time constant", lambda k: _static(_loop(k).extent) is not None),
    ("the loop does not start at 0", lambda k: _static(_loop(k).begin) == 0),
    ("the loop has no T.gemm, or more than one", lambda k: len(_gemms(_loop(k))) == 1),
    ("the accumulator is not a float32 fragment", lambda k: _acc(k).scope == "fragment" and _acc(k).dtype == "float32"),
    (
        "the loop body is not stage copies global -> shared and one gemm of shared tiles into the accumulator",
        lambda k: _body_ok(_loop(k), _acc(k)),
    ),
    (
        "the accumulator is not cleared right before the loop, or other statements precede the loop",
        lambda k: _prefix_ok(k, _loops(k)[0], _acc(k)),
    ),
    ("the statements after the loop use a tile the loop fills", _epilogue_ok),
)
# the first failing rule is why a kernel keeps its code (plan notes)
SPLIT_K_RULES: Tuple[Tuple[str, _Check], ...] = (
    (("the grid has three dimensions already", lambda k: len(k.grid) <= 2),)
    + PLAIN_GEMM_RULES
    + (
        (
            "the block index names are reused",
            lambda k: SPLIT_VAR not in {v.name for v in walk(k) if isinstance(v, N.Var)},
        ),
    )
)


def plain_gemm(k: N.Kernel, rules=SPLIT_K_RULES) -> Union[SplitKLoop, str]:
    """The kernel's plain-form parts, or the first of `rules` (PLAIN_GEMM_RULES and more) it fails."""
    for reason, holds in rules:
        if not holds(k):
            return reason
    loop = _loop(k)
    return SplitKLoop(k, _loops(k)[0], loop, _acc(k), loop.extent.value, _grid_blocks(k))  # type: ignore[attr-defined,arg-type]


def choose_splits(blocks: int, ktiles: int, sm: int, option: Optional[int]) -> Tuple[int, str]:
    """(splits, why): the split count for a grid of `blocks` and a loop of `ktiles` (1: no split)."""
    if option is not None:
        if option <= 1:
            return 1, "option split_k is off"
        return max(1, min(option, ktiles)), f"option split_k={option}"
    sms = SM_COUNT.get(sm, DEFAULT_SM_COUNT)
    if blocks < 1:
        return 1, "the grid is empty"
    if 2 * blocks > sms:
        return 1, f"the grid of {blocks} blocks fills more than half of the {sms} SMs"
    if ktiles < MIN_KTILES_TO_SPLIT:
        return 1, f"the loop has {ktiles} k-tiles (fewer than {MIN_KTILES_TO_SPLIT})"
    want = min(TARGET_WAVES * sms // blocks, ktiles // MIN_KTILES_PER_SPLIT, MAX_SPLITS)
    # never more than wanted: the largest count down to half of it that divides the k-tiles (no
    # split reads past K), else the wanted one
    exact = [n for n in range(want, want // 2, -1) if ktiles % n == 0]
    return max(2, exact[0] if exact else want), f"a grid of {blocks} blocks on {sms} SMs"


def _split_loop(loop: N.For, z: N.Var, chunk: int, exact: bool) -> N.For:
    """The loop over one split's k-tiles: k -> z * chunk + k; copies predicated unless the splits
    cover the k-tiles exactly (then every tile index stays below the old trip count)."""
    k = loop.var
    kk = N.BinOp("+", N.BinOp("*", z, N.Const(chunk, k.dtype), k.dtype), k, k.dtype)
    body = []
    for s in loop.body:
        s = substitute(s, {k.name: kk})
        if isinstance(s, N.Copy) and not exact:
            s = dataclasses.replace(s, predicated=True)
        body.append(s)
    return dataclasses.replace(loop, extent=N.Const(chunk, loop.extent.dtype), body=tuple(body))


def _plan_accepts(accumulator: str) -> str:
    return ""


def split_k_rewrite(
    func: N.PrimFunc, sm: int, option: Optional[int], plan_refuses: Callable[[str], str] = _plan_accepts
):
    """(func, notes): `func` with its plain GEMM split over K when the rules and the choice say so
    (the module docstring), else `func` itself. `plan_refuses(accumulator)` is why the kernel's plan
    keeps it whole (another rule's schedule takes the loop, the accumulator is not in registers),
    or ""."""
    k = func.kernel
    if k is None:
        return func, []
    if option is not None and option <= 1:
        return func, []
    found = plain_gemm(k)
    if isinstance(found, str):
        return func, [f"split-K: no: {found}"]
    splits, why = choose_splits(found.blocks, found.ktiles, sm, option)
    if splits <= 1:
        return func, [f"split-K: no: {why}"]
    refused = plan_refuses(found.accumulator.name)
    if refused:
        return func, [f"split-K: no: {refused}"]
    chunk = -(-found.ktiles // splits)
    splits = -(-found.ktiles // chunk)  # no split without k-tiles
    z = N.Var(SPLIT_VAR, "int32")
    loop = _split_loop(found.loop, z, chunk, exact=chunk * splits == found.ktiles)
    hint = N.Hint(HINT, (found.accumulator,), (("splits", splits), ("chunk", chunk)), found.loop.span)
    body = _top(k)
    i = found.loop_index
    kernel = dataclasses.replace(
        k,
        grid=tuple(k.grid) + (N.Const(splits, "int32"),),
        block_vars=tuple(k.block_vars) + (z,),
        body=body[:i] + (loop, hint) + body[i + 1 :],
    )
    new = dataclasses.replace(func, body=tuple(kernel if s is k else s for s in func.body))
    note = f"split-K: {splits} splits of {chunk} k-tiles ({why})"
    return new, [note]


def _split_hint(kernel: N.Kernel) -> Optional[N.Hint]:
    return next((s for s in kernel.body if isinstance(s, N.Hint) and s.kind == HINT), None)


SPLITK_LIB = r"""
#ifndef TILECORE_SPLITK_LIB
#define TILECORE_SPLITK_LIB
namespace tc {
// Split-K partial sums (tile_cuda/split_k.py): slots in L2 (st.cg / ld.cg), never a stale L1 line.
__device__ __forceinline__ void splitk_store(void* base, long long i, float v) {
  __stcg(static_cast<float*>(base) + i, v);
}
__device__ __forceinline__ float splitk_load(void* base, long long i) {
  return __ldcg(static_cast<const float*>(base) + i);
}
// Every thread's stores are fenced before thread 0 counts the block's arrival on the tile's
// counter (after the block barrier that precedes this call); the last of `splits` arrivals resets
// the counter for the next launch. Returns, in every thread, whether this block came last.
__device__ __forceinline__ int splitk_arrive(void* counters, int tile, int splits) {
  int last = 0;
  if (threadIdx.x == 0) {
    int* c = static_cast<int*>(counters) + tile;
    last = atomicAdd(c, 1) == splits - 1;
    if (last) atomicExch(c, 0);
  }
  last = __syncthreads_or(last);
  if (last) __threadfence();  // the other splits' slots are read after their fences
  return last;
}
__device__ __forceinline__ void splitk_fence() { __threadfence(); }
}  // namespace tc
#endif
"""


class SplitKKernel(LoweringRule):
    """The kernel of a split-K rewrite (`split_k_rewrite`): the body up to the split loop, the
    ordered reduction through the workspace, then the epilogue in the last block of each tile."""

    name = "split_k_kernel"

    def plan(self, ctx) -> None:
        """Claim a kernel that carries the split-K hint: two workspace parameters and the helpers."""
        hint = _split_hint(ctx.kernel)
        if hint is None:
            return
        acc = hint.buffers[0].name
        if ctx.plan.storage.get(acc) != "reg":
            raise ValueError(f"split-K: accumulator {acc} is not in registers (storage {ctx.plan.storage.get(acc)})")
        params = dict(hint.params)
        ctx.plan.claimed(CLAIM)[id(ctx.kernel)] = SplitKInfo(acc, int(params["splits"]), int(params["chunk"]))
        ctx.plan.extra_params.extend([PARTIALS_PARAM, COUNTERS_PARAM])
        ctx.plan.device_sources.append(SPLITK_LIB)

    def __call__(self, lowering, kernel):
        info = lowering.claim(CLAIM, kernel)
        if info is None:
            return NotImplemented
        from tvm.tirx.script.builder import ir as B

        frames = lowering.launch(kernel, lowering.threads)
        # the block order of the tiles (z = the split stays outermost)
        lowering.rasterize(dataclasses.replace(kernel, grid=kernel.grid[:-1], block_vars=kernel.block_vars[:-1]))
        lowering.alloc_all()
        hint = _split_hint(kernel)
        at = next(i for i, s in enumerate(kernel.body) if s is hint)
        lowering.emit_body(kernel.body[:at])
        last = emit_split_reduction(lowering, kernel, info)
        with B.If(last):
            with B.Then():
                lowering.emit_body(kernel.body[at + 1 :])
        for fr in reversed(frames):
            fr.__exit__(None, None, None)
        return None


def emit_split_reduction(lowering, kernel: N.Kernel, info: SplitKInfo):
    """Store this block's accumulator to its slot, count the arrival; the last block of the tile
    sums the slots in split order into the accumulator. Returns the TIR condition "last block"."""
    from tvm import tirx as tx
    from tvm.tirx.script.builder import ir as B

    from .intrinsics import helper_call

    acc = lowering.views[info.accumulator]
    n = int(acc.shape[0])
    threads = lowering.launch_threads
    ex = lowering.ex.variables
    names = [v.name for v in kernel.block_vars]
    tile = ex[names[0]]
    if len(names) == 3:
        tile = ex[names[1]] * lowering.lower(kernel.grid[0]) + tile
    tile = B.Bind(tile)
    z = ex[SPLIT_VAR]
    ws, counters = lowering.param_vars[PARTIALS_PARAM], lowering.param_vars[COUNTERS_PARAM]
    slot_floats = n * threads

    def slot(split, j):
        base = tx.Cast("int64", tile * info.splits + split) * slot_floats
        return base + tx.Cast("int64", j * threads + lowering.thread)

    with B.unroll(0, n) as j:
        B.evaluate(helper_call(lowering, "tc::splitk_store", ws, slot(z, j), tx.BufferLoad(acc, [j])))
    B.evaluate(helper_call(lowering, "tc::splitk_fence"))
    lowering.sync()
    last = B.Bind(helper_call(lowering, "tc::splitk_arrive", counters, tile, info.splits, ret="int32"))
    with B.If(last != 0):
        with B.Then():
            with B.unroll(0, n) as j:
                B.buffer_store(acc, helper_call(lowering, "tc::splitk_load", ws, slot(0, j), ret="float32"), [j])
            with B.serial(1, info.splits) as s:
                with B.unroll(0, n) as j:
                    part = helper_call(lowering, "tc::splitk_load", ws, slot(s, j), ret="float32")
                    B.buffer_store(acc, tx.BufferLoad(acc, [j]) + part, [j])
    return last != 0


def workspace_meta(plan) -> Optional[dict]:
    """meta["split_k"] for the launcher: the split count and the float32 slots per block, or None."""
    claims = plan.claims.get(CLAIM)
    if not claims:
        return None
    (info,) = claims.values()
    return {"splits": info.splits, "block_floats": plan.layout[info.accumulator].local_size * plan.threads}


def workspace_bytes(meta: dict, grid: Sequence[int]) -> Tuple[int, int]:
    """(partials, counters) bytes of a launch of `grid` (the split is its last dimension)."""
    dims = [g for g in grid]
    tiles = prod(dims) // meta["splits"]
    return tiles * meta["splits"] * meta["block_floats"] * 4, tiles * 4


def rewrite_for_target(func: N.PrimFunc, target, rules):
    """(func, notes): `split_k_rewrite` under the target's option split_k and SM count; a kernel
    whose loop warp specialization takes keeps it (that schedule has no split-K epilogue yet), as
    does one whose accumulator the plan demotes to shared memory."""
    option = target.prop("split_k", None)
    if func.kernel is None or (option is not None and option <= 1):
        return func, []
    if not any(isinstance(s, N.Gemm) for s in walk_stmts(func.body)):
        return func, []

    def plan_refuses(accumulator: str) -> str:
        from tilecore.lowering.simt_plan import plan_for_target

        k = func.kernel
        plan = plan_for_target(func, prod(k.threads) if k.threads else 128, target, rules.all_rules())
        if plan.claims.get("warp_specialized"):
            return "the kernel keeps the warp-specialized pipeline"
        if plan.storage.get(accumulator) != "reg":
            return f"the accumulator is not held in registers (storage {plan.storage.get(accumulator)!r})"
        return ""

    return split_k_rewrite(func, target.prop("sm", 0), option, plan_refuses)
