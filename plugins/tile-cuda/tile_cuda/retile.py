"""Whole-grid GEMMs re-tiled to the blocks tile-cuda runs fastest on sm_90a (option retile_gemm).

TileLang's quickstart GEMM (`examples/gemm.py`: 128x128x32 blocks of 128 threads, 3 stages) gives
every block one warpgroup and reads a 128-row panel of A and a 128-column panel of B from L2 per
128x128 outputs. On the H100 that kernel ran at 0.64-0.77x cuBLAS at 8192^3 (L2-bound without
warp specialization, latency-bound on its one consumer warpgroup with it, TMA multicast or not:
benchmarks/results/h100-session14, gpu-session17), while the same GEMM written with 128x256x64
blocks of 256 threads (a producer warpgroup feeding two consumer warpgroups) ran at 0.86-1.03x.

When a kernel's grid computes exactly C = A @ B (`tilecore.lowering.whole_gemm.match`, the
match tile-cpu uses to lower such kernels as one cache-blocked GEMM), its tiling is not
observable in the result: each element of C still sums its products in ascending k from 0 in
float32, on the same wgmma k16 steps, and is rounded to C's dtype once. So the kernel is
rebuilt with `PREFERRED` blocks before it is lowered: the user's statements (and their source
spans) with new tile shapes, grid, thread count and pipeline depth; copies are predicated where
the new tiles do not divide the matrices (reads past them give zeros, writes are dropped). The
kernel's block-order hints (T.use_swizzle) are kept.

Only kernels whose A and B tiles are in shared memory (as the preferred tiles were measured) and
whose operands are float16 or bfloat16 with float32 sums are rebuilt. Option retile_gemm:
"auto" (default): when the kernel's blocks are smaller than the preferred ones, the preferred
grid fills at least one wave of the GPU's SMs, pads C at most PAD_SLACK more than the kernel's
own tiles do,
and A's and B's rows are 16-byte aligned (TMA); True: wherever the kernel matches and its tiles
differ from the preferred ones; False: the kernel's own tiles.
The plan's notes say what was done, or the first reason it was not.

Pure Python: importing this does not import TVM.
"""

from __future__ import annotations

import dataclasses
from math import prod
from typing import Dict, List, NamedTuple, Optional, Tuple, Union

from tilecore.ir import nodes as N
from tilecore.ir.types import itemsize
from tilecore.lowering.whole_gemm import WholeGemm, loop_parts, match

from .split_k import DEFAULT_SM_COUNT, SM_COUNT


class Tiles(NamedTuple):
    """A GEMM block's tiling: bm x bn outputs, bk deep K steps, pipeline stages, threads."""

    bm: int
    bn: int
    bk: int
    stages: int
    threads: int

    def __str__(self) -> str:
        return f"{self.bm}x{self.bn}x{self.bk}, {self.threads} threads, {self.stages} stages"


# per operand dtype (float32 accumulation): issue 12's best config, 0.94-1.03x cuBLAS at 4096^3 and
# 0.85-0.97x at 8192^3 on the H100s of sessions 14, 17 and 18, 0.88-1.0x on the H200 (sessions 11-12)
PREFERRED: Dict[str, Tiles] = {
    "float16": Tiles(128, 256, 64, 3, 256),
    "bfloat16": Tiles(128, 256, 64, 3, 256),
}
TMA_ALIGN = 16  # bytes: a TMA tensor map's row stride must be a multiple of this
# "auto" accepts preferred tiles that pad C by up to this fraction more than the kernel's own: the
# quickstart's own tiles ran 18-35% slower than the preferred ones on the H100 (session 18)
PAD_SLACK = 1 / 16


def retile_mode(value) -> str:
    """Option retile_gemm: False/None -> "" (off), True -> "on", "auto" -> "auto"."""
    from .target import off_on_auto

    return off_on_auto("retile_gemm", value)


def _padded(extent: int, tile: int) -> int:
    return -(-extent // tile) * tile


def kernel_tiles(kernel: N.Kernel, found: WholeGemm) -> Tiles:
    """The tiling a matched kernel uses now."""
    loop = _loop_of(kernel)
    return Tiles(found.bm, found.bn, found.bk, loop.num_stages, prod(kernel.threads))


def choose_tiles(kernel: N.Kernel, found: WholeGemm, sm: int, mode: str) -> Union[Tiles, str]:
    """The tiles to rebuild a matched `kernel` with, or why it keeps its own."""
    preferred = PREFERRED.get(found.a.dtype)
    if preferred is None or found.b.dtype != found.a.dtype or found.acc != "float32":
        return f"no preferred tiles for {found.a.dtype} x {found.b.dtype} -> {found.acc}"
    loop = _loop_of(kernel)
    parts = loop_parts(loop)
    if parts is None or any(copy.dst.buffer.scope != "shared" for copy in parts[:2]):
        return "its A and B tiles are not both in shared memory (the preferred tiles are)"
    own = kernel_tiles(kernel, found)
    if own == preferred:
        return "the kernel's tiles are the preferred ones"
    if mode == "on":
        return preferred
    if own.bm * own.bn >= preferred.bm * preferred.bn:
        return f"its {own.bm}x{own.bn} blocks are not smaller than {preferred.bm}x{preferred.bn}"
    sms = SM_COUNT.get(sm, DEFAULT_SM_COUNT)
    blocks = -(-found.M // preferred.bm) * -(-found.N // preferred.bn)
    if blocks < sms:
        return f"{blocks} blocks of {preferred.bm}x{preferred.bn} would not fill the {sms} SMs"
    ours = _padded(found.M, own.bm) * _padded(found.N, own.bn)
    if _padded(found.M, preferred.bm) * _padded(found.N, preferred.bn) > ours * (1 + PAD_SLACK):
        return f"{preferred.bm}x{preferred.bn} blocks would pad C much more than the kernel's own"
    row_bytes = {found.a.name: found.K * itemsize(found.a.dtype), found.b.name: found.N * itemsize(found.b.dtype)}
    for name, nbytes in row_bytes.items():
        if nbytes % TMA_ALIGN:
            return f"{name}'s rows ({nbytes} bytes) are not {TMA_ALIGN}-byte aligned for TMA"
    return preferred


def _times(var: N.Var, n: int) -> N.Expr:
    return N.BinOp("*", var, N.Const(n, var.dtype), var.dtype)


def _all_of(buf: N.Buffer, span) -> N.Region:
    shape = buf.static_dims()
    return N.Region(buf, tuple(N.Const(0, "int32") for _ in shape), shape, span)


def _loop_of(kernel: N.Kernel) -> N.For:
    """The K loop of a matched kernel (`match` found exactly one)."""
    return next(st for st in kernel.body if isinstance(st, N.For))


def retile(kernel: N.Kernel, found: WholeGemm, tiles: Tiles) -> N.Kernel:
    """`kernel` (a match of `found`) with `tiles`: same statements and spans, new tile shapes."""
    bm, bn, bk = tiles.bm, tiles.bn, tiles.bk
    loop = _loop_of(kernel)
    parts = loop_parts(loop)
    assert parts is not None  # `found` is the kernel's match
    copy_a, copy_b, gemm = parts
    a_s = dataclasses.replace(copy_a.dst.buffer, shape=(bm, bk))
    b_s = dataclasses.replace(copy_b.dst.buffer, shape=(bk, bn))
    c_f = dataclasses.replace(gemm.c.buffer, shape=(bm, bn))
    new_buf = {a_s.name: a_s, b_s.name: b_s, c_f.name: c_f}
    var = {v.name: v for v in kernel.block_vars}
    row, col, k = var[found.row], var[found.col], loop.var
    M, Nn, K = found.M, found.N, found.K

    def copy_in(st: N.Copy, buf: N.Buffer, starts, ragged: bool) -> N.Copy:
        src = N.Region(st.src.buffer, starts, buf.static_dims(), st.src.span)
        return dataclasses.replace(st, src=src, dst=_all_of(buf, st.dst.span), predicated=ragged)

    a_in = copy_in(copy_a, a_s, (_times(row, bm), _times(k, bk)), bool(M % bm or K % bk))
    b_in = copy_in(copy_b, b_s, (_times(k, bk), _times(col, bn)), bool(K % bk or Nn % bn))
    gemm = dataclasses.replace(
        gemm, a=_all_of(a_s, gemm.a.span), b=_all_of(b_s, gemm.b.span), c=_all_of(c_f, gemm.c.span)
    )
    order = (a_in, b_in) if loop.body[0] is copy_a else (b_in, a_in)
    new_loop = dataclasses.replace(
        loop,
        extent=N.Const(-(-K // bk), loop.extent.dtype),
        kind="pipelined",
        num_stages=tiles.stages,
        body=order + (gemm,),
    )
    body: List[N.Stmt] = []
    for st in kernel.body:
        if isinstance(st, N.Alloc):
            st = dataclasses.replace(st, buffer=new_buf[st.buffer.name])
        elif isinstance(st, N.Fill):
            st = dataclasses.replace(st, dst=_all_of(c_f, st.dst.span))
        elif st is loop:
            st = new_loop
        elif isinstance(st, N.Copy):  # the accumulator copied out
            dst = N.Region(st.dst.buffer, (_times(row, bm), _times(col, bn)), (bm, bn), st.dst.span)
            st = dataclasses.replace(st, src=_all_of(c_f, st.src.span), dst=dst, predicated=bool(M % bm or Nn % bn))
        body.append(st)
    sizes = {found.row: -(-M // bm), found.col: -(-Nn // bn)}
    grid = tuple(N.Const(sizes[v.name], "int32") for v in kernel.block_vars)
    return dataclasses.replace(kernel, grid=grid, threads=(tiles.threads,), body=tuple(body))


def retile_rewrite(func: N.PrimFunc, sm: int, wgmma: bool, mode: str) -> Tuple[N.PrimFunc, List[str]]:
    """(func, notes): `func` with its whole-grid GEMM rebuilt with the preferred tiles when
    `mode` and `choose_tiles` say so (the module docstring), else `func` itself."""
    k = func.kernel
    if not mode or k is None:
        return func, []
    found: Optional[WholeGemm] = match(k)
    if found is None:
        return func, []
    if not wgmma:
        return func, ["re-tile: no: the target has no wgmma (sm_90a)"]
    tiles = choose_tiles(k, found, sm, mode)
    if isinstance(tiles, str):
        return func, [f"re-tile: no: {tiles}"]
    own = kernel_tiles(k, found)
    new = dataclasses.replace(func, body=tuple(retile(k, found, tiles) if s is k else s for s in func.body))
    option = "'auto'" if mode == "auto" else "True"
    note = (
        f"re-tile: the grid is one whole {found.M}x{found.N}x{found.K} GEMM; its blocks of {own} run as {tiles} "
        f"(option retile_gemm={option}; False keeps the kernel's tiles)"
    )
    return new, [note]


def rewrite_for_target(func: N.PrimFunc, target) -> Tuple[N.PrimFunc, List[str]]:
    """`retile_rewrite` under the target's option retile_gemm, SM count and wgmma."""
    from .target import has_wgmma

    return retile_rewrite(func, target.prop("sm", 0), has_wgmma(target), target.prop("retile_gemm", ""))
