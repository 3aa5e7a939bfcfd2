"""Tile-operation operands: whole buffers, start points and slices -> Regions.

The rules (TileLang-compatible):

* a bare buffer `A` is the whole buffer;
* a slice form `A[a:b, i, :]` (at least one slice) has explicit extents:
  `b - a` (it must simplify to a constant), 1 for a single index `i`, and the
  full dimension for `:`;
* a start point `A[i, j]` (no slice) takes its extents from the other operand,
  right-aligned: when the start point has more dimensions, the other side's
  extents are padded with leading 1s (so `T.copy(A[b, i, 0], S)` with `S` of
  shape (64, 32) copies `A[b, i:i+64, 0:32]`); when it has fewer, leading unit
  extents of the other side are dropped. This is TileLang's rule, and it means
  a start point only extends its *last* dimensions: for a (batch, seq, heads,
  dim) tensor, `K[b, s, h, 0]` with a (64, D) tile takes 64 *heads*; write the
  sequence slice explicitly instead: `K[b, s:s + 64, h, :]`;
* two regions are compatible when their shapes agree after removing unit
  dimensions ("squeezed"), and both sides cannot be start points.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from ..ir import nodes as N


class RegionError(ValueError):
    """Operands whose regions do not fit together."""


@dataclass(frozen=True)
class RegionArg:
    """A parsed operand: extents None for a start point."""

    buffer: N.Buffer
    starts: Tuple[N.Expr, ...]
    extents: Optional[Tuple[int, ...]]
    span: N.Span

    @property
    def is_start_point(self) -> bool:
        return self.extents is None

    def with_extents(self, extents: Tuple[int, ...]) -> N.Region:
        return N.Region(self.buffer, self.starts, tuple(extents), self.span)

    def region(self) -> N.Region:
        if self.extents is None:
            raise RegionError(f"the start point {self.buffer.name}[...] has no extents of its own")
        return self.with_extents(self.extents)


def fit_extents(extents: Tuple[int, ...], rank: int) -> Tuple[int, ...]:
    """The other side's `extents` right-aligned to a start point of `rank` dimensions."""
    extents = tuple(extents)
    if len(extents) <= rank:
        return (1,) * (rank - len(extents)) + extents
    while len(extents) > rank and extents[0] == 1:
        extents = extents[1:]
    if len(extents) > rank:
        raise RegionError(f"a start point with {rank} index(es) cannot take the extents {extents}")
    return extents


def squeezed(extents) -> Tuple[int, ...]:
    return tuple(e for e in extents if e != 1)


def pair(a: RegionArg, b: RegionArg, what: str, names=("source", "destination")) -> Tuple[N.Region, N.Region]:
    """Resolve two operands that must cover the same tile (copy, atomic tile form)."""
    ext_a, ext_b = a.extents, b.extents
    if ext_a is None:
        if ext_b is None:
            raise RegionError(
                f"{what}: both operands are start points, so the extent is unknown; "
                "give one side as a whole buffer or with slices (A[i:i+64, :])"
            )
        ext_a = fit_extents(ext_b, len(a.starts))
    elif ext_b is None:
        ext_b = fit_extents(ext_a, len(b.starts))
    a = RegionArg(a.buffer, a.starts, ext_a, a.span)
    b = RegionArg(b.buffer, b.starts, ext_b, b.span)
    if squeezed(ext_a) != squeezed(ext_b):
        raise RegionError(
            f"{what} shape mismatch: {names[0]} {describe(a)} vs {names[1]} {describe(b)} (unit dimensions ignored)"
        )
    return a.with_extents(ext_a), b.with_extents(ext_b)


def describe(arg: RegionArg) -> str:
    """`A has shape (4,)` for a whole buffer; `A[0:5] has shape (5,)` for a part of one."""
    extents = arg.extents or ()  # a start point (no extents) is described by its starts
    shape = "(" + ", ".join(str(e) for e in extents) + ("," if len(extents) == 1 else "") + ")"
    whole = tuple(extents) == tuple(arg.buffer.shape) and all(
        isinstance(s, N.Const) and s.value == 0 for s in arg.starts
    )
    if whole:
        return f"{arg.buffer.name} has shape {shape}"
    from ..ir.printer import expr_to_source

    items = []
    for start, extent in zip(arg.starts, extents):
        text = expr_to_source(start)
        if extent == 1:
            items.append(text)
        elif isinstance(start, N.Const):
            items.append(f"{start.value}:{start.value + extent}")
        else:
            items.append(f"{text}:{text} + {extent}")
    return f"{arg.buffer.name}[{', '.join(items)}] has shape {shape}"
