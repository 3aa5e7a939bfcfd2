"""GEMM operands read from global tensors directly instead of through their staging tiles.

A GEMM main loop as TileLang users write it copies the A and B tiles of each K
step into shared buffers and multiplies those. On a CPU the staging copy is one
more pass over the data: the GEMM lowering packs its operands anyway (or reads
them where they are, tile_cpu.gemm). So when a block-local buffer is written by
exactly one T.copy from a global tensor (proven in bounds, same dtype, the whole
buffer) and read by exactly one T.gemm later in the same body, with nothing in
between that touches the tensor, the gemm takes the copy's source region and the
copy is dropped: for B (always packed from a tensor), and for A where it is packed
anyway (converted to the accumulator dtype). An A tile already in the accumulator
dtype keeps its staging copy: the micro-kernel reads it in place, and the rows of
a large tensor, a power of two apart, would collide in L1 where the tile's do not.
Results are the same: the gemm reads the values the copy would have stored.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import List, Optional, Set

from tilecore.ir import nodes as N
from tilecore.ir.visitor import walk, walk_stmts
from tilecore.lowering.tir_stmt import accum_dtype

_BODIES = ("body", "then_body", "else_body")


def buffer_mentions(body: N.Body) -> Counter:
    """How many statements (nested ones included, allocations not) mention each buffer, by name."""
    counts: Counter = Counter()
    for st in walk_stmts(body):
        if not isinstance(st, N.Alloc):
            counts.update(_own_buffers(st))
    return counts


def _own_buffers(st: N.Stmt) -> Set[str]:
    """Names of the buffers a statement mentions outside its nested bodies."""
    names: Set[str] = set()
    if not dataclasses.is_dataclass(st):  # every statement class is one
        return names
    for field in dataclasses.fields(st):
        if field.name in _BODIES or field.name == "span":
            continue
        value = getattr(st, field.name)
        for item in value if isinstance(value, tuple) else (value,):
            if dataclasses.is_dataclass(item) and not isinstance(item, type):
                names.update(n.name for n in walk(item) if isinstance(n, N.Buffer))
    return names


def _whole(region: N.Region) -> bool:
    """Whether the region is its whole buffer (starts 0, extents the shape)."""
    shape = region.buffer.static_shape()
    return (
        shape is not None
        and tuple(region.extents) == tuple(shape)
        and all(isinstance(s, N.Const) and int(s.value) == 0 for s in region.starts)
    )


def _staged(copy: N.Stmt, mentions: Counter) -> Optional[N.Buffer]:
    """The staging buffer a copy fills, if it is a candidate (see the module docstring)."""
    if not isinstance(copy, N.Copy) or copy.predicated:
        return None
    src, dst = copy.src, copy.dst
    if src.buffer.scope != "global" or dst.buffer.scope == "global" or src.buffer.dtype != dst.buffer.dtype:
        return None
    if not _whole(dst) or mentions[dst.buffer.name] != 2:
        return None
    if src.squeezed_shape() != dst.squeezed_shape() or src.matrix_shape() != dst.matrix_shape():
        return None  # the gemm would multiply over other axes of the source region
    return dst.buffer


def fuse_operand_copies(body: N.Body, mentions: Counter) -> N.Body:
    """`body` with staged GEMM operands read from their global source (see the module docstring)."""
    out: List[Optional[N.Stmt]] = list(body)
    for i, copy in enumerate(body):
        staged = _staged(copy, mentions)
        if staged is None or not isinstance(copy, N.Copy):  # _staged takes only copies
            continue
        for j in range(i + 1, len(out)):
            st = out[j]
            if isinstance(st, N.Gemm) and staged.name in (st.a.buffer.name, st.b.buffer.name):
                operand = "a" if st.a.buffer.name == staged.name else "b"
                if getattr(st, operand).buffer.name == st.c.buffer.name or not _whole(getattr(st, operand)):
                    break
                if operand == "a" and accum_dtype(st.c.buffer.dtype) == staged.dtype:
                    break  # A read in place: the staged tile's short rows share L1, a tensor's may not
                out[j] = dataclasses.replace(st, a=copy.src) if operand == "a" else dataclasses.replace(st, b=copy.src)
                out[i] = None
                break
            if st is not None and copy.src.buffer.name in _all_buffers(st):
                break  # something between might write the tensor: keep the copy
    return tuple(st for st in out if st is not None)


def _all_buffers(st: N.Stmt) -> set:
    names = set()
    for inner in walk_stmts((st,)):
        names.update(_own_buffers(inner))
    return names
