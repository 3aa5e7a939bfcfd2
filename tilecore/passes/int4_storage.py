"""int4 storage: the checks every target makes, then int4 written out as int8 for the backends.

int4 (docs/semantics.md "int4") is a storage format: a global int4 tensor is passed packed two
values per int8 byte along its last dimension (value k of a row in the low nibble of byte
k // 2 when k is even, in the high nibble when k is odd, two's complement), and a tile holds one
value per element. Arithmetic never happens in int4 (an int4 operand counts as int8).

Checks, on every target (the reference interpreter's included), each an error at the user's line:
* an int4 tensor parameter has a static, even last dimension (the packed array halves it);
* nothing writes an int4 tensor (a copy, store, fill or atomic into one): two values share a
  byte, so two threads would write one byte; T.print of a whole int4 tensor is refused too;
* T.reduce_* and T.cumsum write no int4 tile (the rewrite has no place to wrap their results
  into four bits), and tile operations other than T.copy do not read an int4 tensor directly.

Rewrite, for every backend except one that interprets int4 itself (the reference replaces this
pass with `Int4StoragePass(rewrite=False)`), so that backends only ever see int8:
* an int4 tensor parameter becomes the int8 tensor the caller passes, of shape (..., last / 2);
* an int4 tile (shared, fragment, local, var) becomes an int8 tile holding one value a
  element, and int4 names (Let) int8 ones;
* a read of an int4 tensor element becomes the nibble unpack `((byte >> 4 * (k % 2)) & 15 ^ 8) - 8`
  of byte k // 2, and a T.copy out of an int4 tensor becomes an element loop (T.Parallel over
  the destination tile) of such reads, an element outside the tensor reading as 0;
* a value converted into int4 (a store, fill or copy into an int4 tile from another dtype, or
  T.cast(x, "int4")) keeps the low four bits of its int32 conversion: `((x & 15) ^ 8) - 8`;
  a value that is already int4 is stored as it is.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Tuple

from ..diagnostics import TileCompileError, UnsupportedFeatureError
from ..frontend import exprs as E
from ..ir import nodes as N
from ..ir.types import INT4, is_int4, storage_of
from ..ir.visitor import Transformer, walk, walk_stmts
from .init_check import buffers_written

STORAGE = "int8"  # what an int4 value is held in after the rewrite


class Int4StoragePass:
    """Check int4 uses; with `rewrite`, turn int4 tensors and tiles into int8 ones."""

    name = "int4_storage"

    def __init__(self, rewrite: bool = True):
        self.rewrite = rewrite

    def __call__(self, func: N.PrimFunc, ctx) -> N.PrimFunc:
        if not _uses_int4(func):
            return func
        source = ctx.source or func.source
        check(func, source)
        if not self.rewrite:
            return func
        out = _Rewrite(func).visit(func)
        return dataclasses.replace(out, source=func.source)


int4_storage = Int4StoragePass()


def _uses_int4(func: N.PrimFunc) -> bool:
    """Whether an int4 tensor, tile, name or value (`T.cast(x, "int4")`) occurs in `func`."""
    return any(is_int4(getattr(node, "dtype", "")) for node in walk(func))


def _unsupported(what: str, span: N.Span, source: str) -> UnsupportedFeatureError:
    err = UnsupportedFeatureError("tilecore", what, span, source)
    err.feature_key = "dtype:int4"
    return err


def check(func: N.PrimFunc, source: str) -> None:
    """Raise at the first int4 use the language refuses (see the module docstring)."""
    for p in func.params:
        if not is_int4(p.dtype):
            continue
        last = p.shape[-1] if p.shape else None
        if not isinstance(last, int):
            raise _unsupported(
                f"the int4 tensor {p.name!r} with a {'dynamic' if p.shape else 'missing'} last dimension "
                "(int4 tensors are passed packed two per byte along a static, even last dimension)",
                p.span,
                source,
            )
        if last % 2:
            raise TileCompileError(
                f"the int4 tensor {p.name!r} has an odd last dimension ({last}); int4 tensors are passed "
                "as int8 arrays holding two values a byte along the last dimension, so it must be even",
                p.span,
                source,
            )
    tensors = {p.name for p in func.params if is_int4(p.dtype)}
    for s in walk_stmts(func.body):
        written = next((b for b in buffers_written(s) if b.name in tensors), None)
        if written is not None:
            raise _unsupported(
                f"writing the int4 tensor {written.name!r} (two int4 values share a byte, so threads "
                "would write one byte together); write an int8 tensor and pack it on the host",
                s.span,
                source,
            )
        read = _tile_operand(s, tensors)
        if read is not None:
            raise _unsupported(
                f"{read} on the int4 tensor directly (copy it into a tile with T.copy first)", s.span, source
            )
        if isinstance(s, (N.Reduce, N.Cumsum)) and is_int4(s.dst.dtype):
            what = "T.cumsum" if isinstance(s, N.Cumsum) else f"T.reduce_{s.kind}"
            raise _unsupported(f"{what} into the int4 tile {s.dst.name!r}", s.span, source)


def _tile_operand(s: N.Stmt, tensors) -> "str | None":
    """What `s` is, when it reads one of the int4 `tensors` as a whole tile other than by T.copy."""
    if isinstance(s, N.Gemm) and {s.a.buffer.name, s.b.buffer.name} & tensors:
        return "T.gemm"
    if isinstance(s, (N.Reduce, N.Cumsum)) and s.src.name in tensors:
        return "T.cumsum" if isinstance(s, N.Cumsum) else f"T.reduce_{s.kind}"
    if isinstance(s, N.Atomic) and isinstance(s.value, N.Region) and s.value.buffer.name in tensors:
        return f"T.atomic_{s.kind} of a tile"
    if isinstance(s, N.Print) and isinstance(s.value, N.Buffer) and s.value.name in tensors:
        return "T.print of a whole tensor"
    return None


def _binary(op: str, a, b, span: N.Span) -> N.Expr:
    return E.binary(op, a, b, span)


def unpack(packed: N.Buffer, indices: Tuple[N.Expr, ...], span: N.Span) -> N.Expr:
    """Value `indices` of the int4 tensor stored packed in `packed` (int8), as an int8 expression."""
    *lead, k = indices
    byte = N.Cast(N.Load(packed, tuple(lead) + (_binary("//", k, 2, span),), STORAGE, span), "int32", span)
    shift = E.cast_to(_binary("*", _binary("%", k, 2, span), 4, span), "int32")
    nibble = N.Cast(_binary("&", _binary(">>", byte, shift, span), 15, span), STORAGE, span)
    return _sign_extended(nibble, span)


def _sign_extended(nibble: N.Expr, span: N.Span) -> N.Expr:
    """The int4 value of `nibble` (an int8 in 0..15): (nibble ^ 8) - 8, computed in int8, where it
    cannot overflow (in int32 a backend that guards against signed overflow widens it)."""
    return _binary("-", _binary("^", nibble, 8, span), 8, span)


def wrap(value: N.Expr, span: N.Span) -> N.Expr:
    """`value` converted to int4, as an int8 expression: the low four bits of its int32 value."""
    if isinstance(value, N.Const) and not isinstance(value.value, float):
        return N.Const(((int(value.value) + 8) % 16) - 8, STORAGE, span)
    wide = E.cast_to(value, "int32")
    return _sign_extended(N.Cast(_binary("&", wide, 15, span), STORAGE, span), span)


class _Rewrite(Transformer):
    """int4 tensors, tiles, names and values -> int8 ones (see the module docstring)."""

    def __init__(self, func: N.PrimFunc):
        self.tensors: Dict[str, N.Buffer] = {p.name: p for p in func.params if is_int4(p.dtype)}
        self.tiles = {
            s.buffer.name for s in walk_stmts(func.body) if isinstance(s, N.Alloc) and is_int4(s.buffer.dtype)
        }
        self.counter = 0

    def fresh(self) -> str:
        self.counter += 1
        return f"i4_{self.counter}"

    # -- values that are int4 before the rewrite are stored as they are; others are wrapped

    def visit(self, node):
        if isinstance(node, N.Store) and node.buffer.name in self.tiles:
            value = self.visit(node.value)
            kept = value if is_int4(node.value.dtype) else wrap(value, node.span)
            return N.Store(self.visit(node.buffer), tuple(self.visit(i) for i in node.indices), kept, node.span)
        if isinstance(node, N.Fill) and node.dst.buffer.name in self.tiles:
            value = self.visit(node.value)
            kept = value if is_int4(node.value.dtype) else wrap(value, node.span)
            return N.Fill(self.visit(node.dst), kept, node.span)
        if isinstance(node, N.Cast) and is_int4(node.dtype):
            value = self.visit(node.value)
            return value if is_int4(node.value.dtype) else wrap(value, node.span)
        if isinstance(node, N.Copy):
            return self.copy(node)
        return super().visit(node)

    def visit_Buffer(self, b: N.Buffer):  # noqa: N802
        if b.name in self.tensors:
            dtype, shape = storage_of(b.dtype, b.shape)
            return dataclasses.replace(b, dtype=dtype, shape=shape)
        if is_int4(b.dtype):
            return dataclasses.replace(b, dtype=STORAGE)
        return b

    def visit_Var(self, v: N.Var):  # noqa: N802
        return dataclasses.replace(v, dtype=STORAGE) if is_int4(v.dtype) else v

    def visit_Const(self, c: N.Const):  # noqa: N802
        return wrap(c, c.span) if is_int4(c.dtype) else c

    def visit_Load(self, e: N.Load):  # noqa: N802
        dtype = STORAGE if is_int4(e.dtype) else e.dtype
        if e.buffer.name in self.tensors:
            return E.cast_to(unpack(e.buffer, e.indices, e.span), dtype)
        return dataclasses.replace(e, dtype=dtype) if dtype != e.dtype else e

    # -- copies

    def copy(self, s: N.Copy) -> N.Stmt:
        from_tensor = s.src.buffer.name in self.tensors
        into_tile = s.dst.buffer.name in self.tiles and not is_int4(s.src.buffer.dtype)
        src, dst = self.visit(s.src), self.visit(s.dst)
        if not (from_tensor or into_tile):
            return dataclasses.replace(s, src=src, dst=dst)
        return self.element_copy(s, src, dst, from_tensor, into_tile)

    def element_copy(self, s: N.Copy, src: N.Region, dst: N.Region, from_tensor: bool, into_tile: bool) -> N.Stmt:
        """`s` as T.Parallel over the destination tile: `dst[d + i] = value(src[s + i])`, the regions'
        non-unit extents paired in order (the type checker made them agree); an element outside a
        global tensor reads as 0 and is not written, as in a tile copy."""
        span = s.span
        src_dims = [d for d, e in enumerate(src.extents) if e != 1] or [len(src.extents) - 1]
        dst_dims = [d for d, e in enumerate(dst.extents) if e != 1] or [len(dst.extents) - 1]
        loop = [N.Var(self.fresh(), "int32", span) for _ in dst_dims]

        def at(region: N.Region, dims: List[int]) -> Tuple[N.Expr, ...]:
            starts = list(region.starts)
            for v, d in zip(loop, dims):
                starts[d] = _binary("+", starts[d], v, span)
            return tuple(starts)

        def inside(shape, index) -> N.Expr:
            conds = [_binary("<", i, E.index_expr(n, span), span) for i, n in zip(index, shape)]
            conds += [_binary(">=", i, 0, span) for i in index]
            out = conds[0]
            for c in conds[1:]:
                out = _binary("and", out, c, span)
            return out

        si, di = at(src, src_dims), at(dst, dst_dims)
        value: N.Expr
        if from_tensor:  # the logical (int4) shape bounds the reads, not the packed one
            value = unpack(src.buffer, si, span)
            shape = self.tensors[s.src.buffer.name].shape
        else:
            value = N.Load(src.buffer, si, src.buffer.dtype, span)
            shape = src.buffer.shape
        value = wrap(value, span) if into_tile else E.cast_to(value, dst.buffer.dtype)
        body: N.Stmt = N.Store(dst.buffer, di, value, span)
        if src.buffer.scope == "global":
            zero = N.Store(dst.buffer, di, E.const(0, dst.buffer.dtype, span), span)
            body = N.If(inside(shape, si), (body,), (zero,), span)
        if dst.buffer.scope == "global":
            body = N.If(inside(dst.buffer.shape, di), (body,), (), span)
        return N.Parallel(tuple(loop), tuple(dst.extents[d] for d in dst_dims), (body,), span)


__all__ = ["INT4", "Int4StoragePass", "check", "int4_storage", "unpack", "wrap"]
