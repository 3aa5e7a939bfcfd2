"""Guarded tile reads and writes: the out-of-bounds rules of tile operations.

A tile read outside a buffer gives zeros for the missing elements; a tile
write outside a buffer drops them (DESIGN.md "Out-of-bounds"). In-bounds tiles
(the common case) are plain numpy views, so nothing is copied.
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

import numpy as np


def _in_bounds(starts: Sequence[int], extents: Sequence[int], shape: Sequence[int]) -> bool:
    for s, e, n in zip(starts, extents, shape):
        if s < 0 or s + e > n:
            return False
    return True


def _overlap(starts, extents, shape) -> Optional[Tuple[tuple, tuple]]:
    """(slices into the tile, slices into the buffer) of the part inside the buffer, or None."""
    tile, buf = [], []
    for s, e, n in zip(starts, extents, shape):
        lo, hi = max(s, 0), min(s + e, n)
        if hi <= lo:
            return None
        tile.append(slice(lo - s, hi - s))
        buf.append(slice(lo, hi))
    return tuple(tile), tuple(buf)


def read_tile(arr: np.ndarray, starts: Sequence[int], extents: Sequence[int]) -> np.ndarray:
    """The tile of `arr` at `starts` with `extents`; elements outside `arr` read as 0."""
    if _in_bounds(starts, extents, arr.shape):
        return arr[tuple(slice(s, s + e) for s, e in zip(starts, extents))]
    out = np.zeros(tuple(extents), dtype=arr.dtype)
    part = _overlap(starts, extents, arr.shape)
    if part is not None:
        out[part[0]] = arr[part[1]]
    return out


def tile_view(arr: np.ndarray, starts: Sequence[int], extents: Sequence[int]):
    """(view of the in-bounds part of the tile, slices of the tile it covers) or None when empty."""
    if _in_bounds(starts, extents, arr.shape):
        return arr[tuple(slice(s, s + e) for s, e in zip(starts, extents))], None
    part = _overlap(starts, extents, arr.shape)
    if part is None:
        return None
    return arr[part[1]], part[0]


def write_tile(arr: np.ndarray, starts: Sequence[int], extents: Sequence[int], values) -> None:
    """Store `values` (shaped `extents`, or broadcastable) into the tile; outside elements are dropped."""
    if _in_bounds(starts, extents, arr.shape):
        arr[tuple(slice(s, s + e) for s, e in zip(starts, extents))] = values
        return
    part = _overlap(starts, extents, arr.shape)
    if part is None:
        return
    values = np.asarray(values)
    if values.ndim:
        values = np.broadcast_to(values, tuple(extents))[part[0]]
    arr[part[1]] = values
