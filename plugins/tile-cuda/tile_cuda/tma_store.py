"""The epilogue of a warp-specialized plain GEMM through shared memory and TMA stores on sm_90a
(compile option tma_store).

The plain epilogue `T.copy(C_f, C[by * bM, bx * bN])` stores each thread's accumulator pairs
straight to global memory: 4-byte stores, each warp instruction touching 8 rows. Here the
consumers instead

    wait until the previous tile's TMA stores have read the staging tile (issuing thread), barrier;
    write their accumulator pairs, converted, into a shared staging tile laid out as TMA's 128-byte
    swizzle (16-byte chunk c of row r at chunk c ^ (r % 8): the 8 rows a warp instruction writes
    fall in 8 distinct chunks, no bank conflicts), one 128-byte column block after the other;
    fence the writes to the async proxy, barrier; one thread issues a TMA store per column block
    (`cp.async.bulk.tensor` shared -> global, bulk group) and commits

and go on without waiting for the stores: with option persistent the next tile's main loop runs
while they drain. TMA clips the boxes at the tensor's bounds, so partial tiles store only what
is inside. The staging tile sits in the kernel's shared pool after the mbarriers, 1024-byte
aligned (`reserve_staging`); the tensor map of C is one more `const __grid_constant__` kernel
parameter, encoded by the launcher like the loads' (`tma.TensorMapSpec`, swizzle 128B).

Which epilogues (`TMA_STORE_RULES`, first failing rule in the plan's notes): the plain GEMM form
(`split_k.PLAIN_GEMM_RULES`) whose warp-specialized loop is the plain loop, an epilogue of exactly
one copy of the whole float32 accumulator (MMA layout, registers) into a 2-D float16 / bfloat16
tensor with 16-byte row pitches, a tile of whole 128-byte column blocks and at most 256 rows.
A kernel whose shared memory has no room for the staging tile keeps the plain epilogue (a note).
Option tma_store: None (default, "auto": eligible epilogues in blocks of two or more consumer
warpgroups, where it measured faster), True (every eligible epilogue), False (off).

Planning is pure Python; the lowering imports TVM.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional, Tuple, Union

from tilecore.ir import nodes as N
from tilecore.ir.types import itemsize
from tilecore.lowering.simt_layout import MmaLayout
from tilecore.plugin.rules import LoweringRule

from .split_k import PLAIN_GEMM_RULES, plain_gemm
from .tma import DATA_TYPES, SWIZZLE, TensorMapSpec, _strides_ok

STORE_CLAIM = "tma_store"
# option tma_store=None (auto) at every K: on the H200 (session 12, benchmarks/results/h200-session12-
# persist, 128x256x64 / 3 stages, one run) the TMA-store epilogue was faster at 4096^3 fp16 / bf16
# and 4000^3 (0.959x / 0.945x / 0.938x cuBLAS against 0.848x / 0.898x / 0.785x) and measured slower
# at 8192^3 (0.871x against 0.931x), so auto stopped at K = 4096 until session 19's H100, power-capped
# under sustained load (benchmarks/results/gpu-session19): at 8192^3 fp16 5% faster in 2.5 s of
# back-to-back calls (1.67 ms against 1.75 ms; cuBLAS 1.60-1.66 ms) and in a single launch after idling
AUTO_MIN_THREADS = 256  # auto: blocks of two consumer warpgroups, the configuration measured
BLOCK_BYTES = 128  # a column block: the 128-byte swizzle span, one TMA box
STAGING_ALIGN = 1024  # the 128-byte swizzle repeats every 8 rows of 128 bytes
MAX_BOX_ROWS = 256
DTYPES = ("float16", "bfloat16")


class TmaStore(NamedTuple):
    """An epilogue that runs on TMA stores: the copy, its tensor map, the tile and its dtype.
    (`tma.tensor_map_meta` lists the `spec` of every claim that has one.)"""

    copy: N.Copy
    spec: TensorMapSpec
    rows: int
    cols: int
    dtype: str

    @property
    def block_cols(self) -> int:
        return BLOCK_BYTES // itemsize(self.dtype)

    @property
    def bytes(self) -> int:
        return self.rows * self.cols * itemsize(self.dtype)


class _Facts(NamedTuple):
    kernel: N.Kernel
    loop: N.For  # the warp-specialized loop
    plan: Any  # the KernelPlan


def _epilogue(f: _Facts) -> Tuple[N.Stmt, ...]:
    body = tuple(f.kernel.body)
    return body[[id(s) for s in body].index(id(f.loop)) + 1 :]


def _copy(f: _Facts) -> N.Copy:
    (c,) = _epilogue(f)
    assert isinstance(c, N.Copy)
    return c


def _plain(f: _Facts) -> bool:
    found = plain_gemm(f.kernel, PLAIN_GEMM_RULES)
    return not isinstance(found, str) and found.loop is f.loop


def _one_copy_of_the_accumulator(f: _Facts) -> bool:
    after = _epilogue(f)
    if len(after) != 1 or not isinstance(after[0], N.Copy):
        return False
    c = after[0]
    acc = next(s.c.buffer for s in f.loop.body if isinstance(s, N.Gemm))
    whole = tuple(c.src.extents) == tuple(acc.shape) and all(_is_zero(s) for s in c.src.starts)
    return c.src.buffer.name == acc.name and whole and c.dst.buffer.scope == "global"


def _is_zero(e) -> bool:
    return isinstance(e, N.Const) and e.value == 0


def _shape(c: N.Copy) -> Tuple[int, int]:
    shape = c.src.buffer.static_shape()
    assert shape is not None and len(shape) == 2  # a 2-D fragment (the rules before)
    return shape[0], shape[1]


def _tile_ok(f: _Facts) -> bool:
    c = _copy(f)
    rows, cols = _shape(c)
    return (
        tuple(c.dst.extents) == (rows, cols)
        and (cols * itemsize(c.dst.buffer.dtype)) % BLOCK_BYTES == 0
        and rows <= MAX_BOX_ROWS
        and rows % 8 == 0
    )


_Check = Callable[[_Facts], bool]
NOT_PLAIN = "the kernel is not the plain GEMM form"
# the first failing rule is why the epilogue keeps its global stores (plan notes)
TMA_STORE_RULES: Tuple[Tuple[str, _Check], ...] = (
    (NOT_PLAIN, _plain),
    ("the epilogue is not one copy of the whole accumulator into a global tensor", _one_copy_of_the_accumulator),
    (
        "the accumulator is not a float32 MMA fragment in registers",
        lambda f: (
            isinstance(f.plan.layout.get(_copy(f).src.buffer.name), MmaLayout)
            and f.plan.storage.get(_copy(f).src.buffer.name) == "reg"
        ),
    ),
    ("the output is not a float16 or bfloat16 tensor", lambda f: _copy(f).dst.buffer.dtype in DTYPES),
    ("the output is not a 2-D tensor", lambda f: _copy(f).dst.buffer.ndim == 2),
    ("a row pitch of the output is not a multiple of 16 bytes", lambda f: _strides_ok(_copy(f).dst.buffer)),
    (
        f"the tile is not whole {BLOCK_BYTES}-byte column blocks of at most {MAX_BOX_ROWS} rows (a multiple of 8)",
        _tile_ok,
    ),
)


def plan_tma_store(
    kernel: N.Kernel, loop: N.For, plan, param: str, auto: bool = False, threads: int = AUTO_MIN_THREADS
) -> Union[TmaStore, str]:
    """The TmaStore of the kernel's epilogue (tensor map parameter `param`), or why not; `auto`
    (option tma_store=None) also needs blocks of at least AUTO_MIN_THREADS consumer `threads`."""
    facts = _Facts(kernel, loop, plan)
    for reason, holds in TMA_STORE_RULES:
        if not holds(facts):
            return reason
    if auto and threads < AUTO_MIN_THREADS:
        return f"{threads} consumer threads (auto: at least {AUTO_MIN_THREADS}; option tma_store=True forces it)"
    c = _copy(facts)
    buf = c.dst.buffer
    rows, cols = _shape(c)
    spec = TensorMapSpec(
        param,
        buf.name,
        DATA_TYPES[buf.dtype],
        itemsize(buf.dtype),
        tuple(s if isinstance(s, int) else s.name for s in reversed(buf.shape)),
        (BLOCK_BYTES // itemsize(buf.dtype), rows),
        SWIZZLE[BLOCK_BYTES],
    )
    return TmaStore(c, spec, rows, cols, buf.dtype)


def claim(plan, store: TmaStore) -> None:
    """Record the store for the lowering and its tensor map for the launcher (`plan.extra_params`)."""
    plan.claimed(STORE_CLAIM)[id(store.copy)] = store
    plan.extra_params.append(store.spec.param)
    plan.device_sources.append(TMA_STORE_LIB)


def staging_offset(tail_off: int, tail_bytes: int) -> int:
    """Byte offset of the staging tile: after `tail_bytes` at `tail_off`, STAGING_ALIGN aligned."""
    return -(-(tail_off + tail_bytes) // STAGING_ALIGN) * STAGING_ALIGN


def staging_element(store: TmaStore, i, j, xor):
    """Element offset in the staging tile of (i, j): column block j // block_cols (rows x
    block_cols each), row i of 128 bytes, its 16-byte chunk swizzled with i % 8 (TMA's 128B mode).
    Ints or TIR expressions, as i and j are; `xor` the bitwise operator on them."""
    bc = store.block_cols
    per_chunk = 16 // itemsize(store.dtype)
    w = j % bc
    return (j // bc) * (store.rows * bc) + i * bc + xor(w // per_chunk, i % 8) * per_chunk + w % per_chunk


TMA_STORE_LIB = r"""
#ifndef TILECORE_TMA_STORE_LIB
#define TILECORE_TMA_STORE_LIB
namespace tc {
// TMA stores of the GEMM epilogue (tile_cuda/tma_store.py)
__device__ __forceinline__ void st_shared_pair(half* p, float a, float b) {
  *reinterpret_cast<__half2*>(p) = __floats2half2_rn(a, b);
}
__device__ __forceinline__ void st_shared_pair(nv_bfloat16* p, float a, float b) {
  *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(a, b);
}
// this thread's generic-proxy writes to shared memory become visible to TMA (the async proxy)
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// one box of shared memory at src to the tensor at coordinates (c0 innermost, c1), in a bulk group
__device__ __forceinline__ void tma_store_2d(const void* map, void* src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n"
               :: "l"(reinterpret_cast<unsigned long long>(map)), "r"(smem_addr(src)), "r"(c0), "r"(c1)
               : "memory");
}
__device__ __forceinline__ void tma_store_2d(const TensorMap& map, void* src, int c0, int c1) {
  tma_store_2d(static_cast<const void*>(&map), src, c0, c1);
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// this thread's committed stores have read their shared memory (it may be written again)
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
}  // namespace tc
#endif
"""


def reserve_staging(lowering, store: Optional[TmaStore], mbarrier_bytes: int) -> Optional[int]:
    """Reserve the staging tile after the mbarriers (`lowering.shared_tail`); its byte offset in
    the pool, or None (no store, or no room: the epilogue keeps its global stores, with a note)."""
    lowering.shared_tail = mbarrier_bytes
    if store is None:
        return None
    tiles = lowering.shared_tiles()
    lowering.shared_offsets(tiles)  # sets tail_off
    at = staging_offset(lowering.tail_off, mbarrier_bytes)
    lowering.shared_tail = at + store.bytes - lowering.tail_off
    if lowering.shared_offsets(tiles)[1] <= lowering.target.max_shared_memory:
        return at
    lowering.shared_tail = mbarrier_bytes
    lowering.plan.notes.append(f"TMA store: no: no room for the {store.bytes}-byte staging tile")
    return None


class TmaStoreEpilogue(LoweringRule):
    """The Copy rule of a claimed epilogue (`plan_tma_store`) once the kernel reserved its staging
    tile (`lowering.tma_store_staging`): see the module docstring."""

    name = "tma_store_epilogue"

    def __call__(self, lowering, c):
        store = lowering.claim(STORE_CLAIM, c)
        staging = getattr(lowering, "tma_store_staging", None)
        if store is None or staging is None:
            return NotImplemented
        emit_store(lowering, store, staging)
        return None


def _call(lowering, name, *args):
    from tvm.tirx.script.builder import ir as B

    from .intrinsics import helper_call

    B.evaluate(helper_call(lowering, name, *args))


def emit_store(lowering, store: TmaStore, staging) -> None:
    """Accumulator -> staging tile -> TMA stores, issued by consumer thread 0 (module docstring)."""
    from tvm import tirx as tx
    from tvm.tirx.script.builder import ir as B

    from tilecore.lowering.tir_expr import cast_to

    acc = store.copy.src.buffer
    lay = lowering.plan.layout[acc.name]
    regs = lowering.views[acc.name]
    first = lowering.thread == 0
    with B.If(first):
        with B.Then():  # the previous tile's stores have read the staging tile
            _call(lowering, "tc::bulk_wait_read")
    lowering.sync()
    ext = lay.iter_space()
    frames = [B.unroll(0, e) for e in ext[:-1]]
    its = [f.__enter__() for f in frames]
    (i, j), local = lay.coords(lowering.thread, its + [0])  # the pair (i, j), (i, j + 1)
    at = tx.address_of(tx.BufferLoad(staging, [staging_element(store, i, j, tx.bitwise_xor)]))
    _call(lowering, "tc::st_shared_pair", at, tx.BufferLoad(regs, [local]), tx.BufferLoad(regs, [local + 1]))
    for f in reversed(frames):
        f.__exit__(None, None, None)
    _call(lowering, "tc::fence_proxy_async_shared")
    lowering.sync()
    row0, col0 = (lowering.lower(s) for s in store.copy.dst.starts)
    bc = store.block_cols
    with B.If(first):
        with B.Then():
            for b in range(store.cols // bc):
                src = tx.address_of(tx.BufferLoad(staging, [b * store.rows * bc]))
                coords = [cast_to(col0 + b * bc, "int32"), cast_to(row0, "int32")]
                _call(lowering, "tc::tma_store_2d", lowering.param_vars[store.spec.param], src, *coords)
            _call(lowering, "tc::bulk_commit")


def emit_drain(lowering) -> None:
    """At the end of the consumers' code: thread 0 waits until its last stores have read the
    staging tile (shared memory must outlive the reads)."""
    from tvm.tirx.script.builder import ir as B

    with B.If(lowering.thread == 0):
        with B.Then():
            _call(lowering, "tc::bulk_wait_read")
