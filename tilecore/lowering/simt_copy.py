"""Which tile copies may move whole vectors: contiguity, alignment and the target's vector limits.

Pure Python (no TVM): the planner's rules (a pipeline rule deciding which copies it
can make asynchronous) and the lowering ask the same questions.
"""

from __future__ import annotations

from math import gcd

from ..ir import nodes as N
from ..ir.types import itemsize

VECTOR_BYTES = 16  # one vector access moves at most 16 bytes


def divisible(e: N.Expr, v: int) -> bool:
    """Conservative proof that integer expression `e` is a multiple of `v`."""
    if isinstance(e, N.Const):
        return int(e.value) % v == 0
    if isinstance(e, N.BinOp):
        if e.op in ("+", "-"):
            return divisible(e.a, v) and divisible(e.b, v)
        if e.op == "*":
            for x, y in ((e.a, e.b), (e.b, e.a)):
                if isinstance(x, N.Const) and int(x.value) % v == 0:
                    return True
                if isinstance(x, N.Const) and int(x.value) != 0 and divisible(y, v // gcd(v, int(x.value))):
                    return True
            return divisible(e.a, v) or divisible(e.b, v)
    return v == 1


def contiguous_run(r: N.Region, vec: int, plan) -> bool:
    """Whether `vec` consecutive elements along the region's last dim are contiguous and aligned."""
    st = plan.storage[r.buffer.name]
    if st == "smem":
        lay = plan.layout[r.buffer.name]
        # a swizzle moves whole 16-byte chunks: an aligned run inside one chunk stays contiguous
        within_chunk = VECTOR_BYTES % (vec * lay.elem_bytes) == 0
        return (
            (not lay.swizzle or within_chunk)
            and r.extents[-1] % vec == 0
            and divisible(r.starts[-1], vec)
            and lay.row_elems % vec == 0
        )
    if st != "global":
        return False
    last = r.buffer.shape[-1]
    return (
        r.extents[-1] > 1
        and r.extents[-1] % vec == 0
        and isinstance(last, int)
        and last % vec == 0
        and divisible(r.starts[-1], vec)
    )


def _width_16_bytes(c: N.Copy, plan) -> int:
    """Elements per 16-byte access when both sides allow it (contiguity, alignment), else 1."""
    src, dst = c.src, c.dst
    if src.buffer.dtype != dst.buffer.dtype:
        return 1
    eb = itemsize(src.buffer.dtype)
    v = VECTOR_BYTES // eb
    if eb > VECTOR_BYTES or v < 2:
        return 1
    for r in (src, dst):
        st = plan.storage[r.buffer.name]
        if st not in ("global", "smem"):
            return 1
        if r.extents[-1] % v or r.extents[-1] == 1:
            return 1
        last = r.buffer.shape[-1]
        if not isinstance(last, int) or last % v:
            return 1
        if not divisible(r.starts[-1], v):
            return 1
        if st == "smem":
            lay = plan.layout[r.buffer.name]
            if lay.numel % v:
                return 1
    if src.squeezed_shape()[-1:] != dst.squeezed_shape()[-1:]:
        return 1
    return v


def vector_width(c: N.Copy, plan, target) -> int:
    """Elements per vector access of copy `c` on `target` (1: element by element).

    16 bytes when both regions are contiguous and aligned, capped at the target's
    `max_vector_lanes`; bool tiles stored in another dtype and elements wider than
    `max_vector_element_bytes` stay scalar.
    """
    dtypes = (c.src.buffer.dtype, c.dst.buffer.dtype)
    if "bool" in dtypes and target.bool_storage != "bool":
        return 1
    if max(itemsize(d) for d in dtypes) > target.max_vector_element_bytes:
        return 1
    v = _width_16_bytes(c, plan)
    while v > target.max_vector_lanes:
        v //= 2
    return v
