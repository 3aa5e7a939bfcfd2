"""How tiles are spread over the threads of a block (SIMT targets).

Pure Python (no TVM): the lowering in `simt.py` turns these into index arithmetic.

* `MmaLayout` -- a 2-D fragment in the m16n8 accumulator layout of warp-level matrix
  units (lane l of a 32-lane warp owns rows l/4 and l/4+8 of each 16x8 atom, columns
  2(l%4) and 2(l%4)+1), warps tiled `wm x wn` over the block tile.
* `RowLayout` -- a vector indexed by the rows of an `MmaLayout` tile, replicated in
  every thread that owns a piece of that row (what a row reduction produces).
* `StridedLayout` -- any fragment: its row-major elements in chunks of `vec`
  contiguous elements, chunk c owned by thread c % threads.
* `SharedLayout` -- a shared-memory tile: row-major, optionally XOR-swizzled in
  16-byte chunks (bank-conflict free for 8x8 matrix loads and 16-byte copies),
  optionally multi-buffered (`stages`) for software pipelines, optionally split into
  128-byte column blocks (`blocked`: how descriptor-addressed matrix operands are stored).

A backend with another warp width or matrix unit adds its own layout classes with
the same `local_size` / `iter_space` / `coords` methods.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Tuple


@dataclass(frozen=True)
class MmaLayout:
    """Accumulator layout of m16n8 MMA tiles; element (i, j) of an (M, N) tile."""

    M: int
    N: int
    wm: int
    wn: int

    @property
    def MI(self) -> int:
        return self.M // self.wm // 16

    @property
    def NI(self) -> int:
        return self.N // self.wn // 8

    @property
    def local_size(self) -> int:
        return self.MI * self.NI * 4

    def iter_space(self):
        """Extents of the per-thread iteration (mi, ni, h, c): all compile-time constants."""
        return (self.MI, self.NI, 2, 2)

    def coords(self, t, it):
        """Tile coordinates (i, j) and the register index of iteration `it` of thread t."""
        mi, ni, h, c = it
        lane, warp = t % 32, t // 32
        i = (warp // self.wn) * (self.M // self.wm) + mi * 16 + lane // 4 + h * 8
        j = (warp % self.wn) * (self.N // self.wn) + ni * 8 + (lane % 4) * 2 + c
        local = ((mi * self.NI + ni) * 2 + h) * 2 + c
        return (i, j), local

    def row_local(self, it):
        mi, _ni, h, _c = it
        return mi * 2 + h

    @staticmethod
    def choose(M: int, N: int, warps: int, policy: str = "square", prefer_rows: bool = False):
        """Pick the warp grid (wm, wn) for an (M, N) tile, or None if MMA tiles do not fit."""
        options = []
        for wm in range(1, warps + 1):
            if warps % wm:
                continue
            wn = warps // wm
            if M % (16 * wm) or N % (8 * wn):
                continue
            options.append((wm, wn))
        if not options:
            return None

        def score(o):
            wm, wn = o
            WM, WN = M // wm, N // wn
            even_ni = (WN // 8) % 2 == 0
            if policy == "full_row" or prefer_rows:
                return (wn, not even_ni, abs(WM - WN))
            if policy == "full_col":
                return (wm, not even_ni, abs(WM - WN))
            return (not even_ni, abs(WM - WN), -wm)

        wm, wn = min(options, key=score)
        return MmaLayout(M, N, wm, wn)


@dataclass(frozen=True)
class RowLayout:
    """A length-M vector over the rows of MmaLayout(M, *, wm, wn); shape (M,) or (M, 1)."""

    M: int
    wm: int
    wn: int
    ndim: int = 1

    @property
    def MI(self) -> int:
        return self.M // self.wm // 16

    @property
    def local_size(self) -> int:
        return self.MI * 2

    def iter_space(self):
        return (self.MI, 2)

    def coords(self, t, it):
        mi, h = it
        lane, warp = t % 32, t // 32
        i = (warp // self.wn) * (self.M // self.wm) + mi * 16 + lane // 4 + h * 8
        idx = (i,) if self.ndim == 1 else (i, 0)
        return idx, mi * 2 + h

    def matches(self, mma: MmaLayout) -> bool:
        return (self.M, self.wm, self.wn) == (mma.M, mma.wm, mma.wn)

    def primary(self, t):
        """The one replica that performs side effects (stores to other memory, atomics)."""
        lane, warp = t % 32, t // 32
        return (lane % 4 == 0), (warp % self.wn == 0)


@dataclass(frozen=True)
class StridedLayout:
    """Row-major chunks of `vec` elements, chunk c owned by thread c % threads."""

    shape: Tuple[int, ...]
    threads: int
    vec: int

    @property
    def numel(self) -> int:
        return prod(self.shape)

    @property
    def chunks(self) -> int:
        return self.numel // self.vec

    @property
    def per_thread(self) -> int:
        return -(-self.chunks // self.threads)

    @property
    def local_size(self) -> int:
        return self.per_thread * self.vec

    @property
    def exact(self) -> bool:
        """Every thread owns the same number of chunks (no guard needed)."""
        return self.chunks % self.threads == 0

    @staticmethod
    def for_shape(shape, threads: int, spread: bool = False) -> "StridedLayout":
        """The widest chunks (up to 8) that divide the last extent; with `spread`, no wider than
        leaves every thread a chunk where the tile has that many elements (a local tile with one
        element per thread, as per-thread code makes, then runs on all threads)."""
        last = shape[-1] if shape else 1
        vecs = [v for v in (8, 4, 2, 1) if last % v == 0]
        if spread:
            vecs = [v for v in vecs if prod(shape) // v >= threads] or vecs[-1:]
        return StridedLayout(tuple(shape), threads, vecs[0])


@dataclass(frozen=True)
class SharedLayout:
    """A shared tile: shape, element size, swizzle, and pipeline stages."""

    shape: Tuple[int, ...]
    elem_bytes: int
    swizzle: bool = False
    stages: int = 1
    blocked: bool = False  # rows wider than 128 bytes stored as 128-byte column blocks
    # > 1: rows permuted within slabs of 64 x row_blocks rows (see physical_row), for a backend whose
    # matrix instruction reads 64 evenly spaced rows where each of 4 warps owns 16 x row_blocks rows
    row_blocks: int = 1

    @property
    def numel(self) -> int:
        return prod(self.shape)

    @property
    def row_elems(self) -> int:
        return self.shape[-1] if self.shape else 1

    @staticmethod
    def can_swizzle(shape, elem_bytes: int) -> bool:
        if len(shape) != 2:
            return False
        row_bytes = shape[-1] * elem_bytes
        return row_bytes in (32, 64) or row_bytes % 128 == 0

    @property
    def block_elems(self) -> int:
        """Elements per row of one column block (blocked tiles)."""
        return 128 // self.elem_bytes

    def offset2d(self, row, col, floordiv, floormod, xor):
        """Element offset of (row, col) in a swizzled 2-D tile. The operators are passed in so that
        the same formula serves TIR expressions (the lowering) and Python ints (tests)."""
        v = 16 // self.elem_bytes
        row = self.physical_row(row, floordiv, floormod)
        if self.blocked:
            e = self.block_elems
            within = floormod(col, e)
            return (
                floordiv(col, e) * (self.shape[0] * e)
                + row * e
                + xor(floordiv(within, v), floormod(row, 8)) * v
                + floormod(col, v)
            )
        return row * self.row_elems + xor(floordiv(col, v), self.xor_term(row)) * v + floormod(col, v)

    def physical_row(self, row, floordiv, floormod):
        """Where tile row `row` is stored. With row_blocks = R > 1, a slab of 64R rows (4 warps of
        16R rows each) holds warp w's rows 16Rw + 16i + k (i < R, k < 16) at 64i + 16w + k: a
        64-row matrix instruction reading rows 64i.. of the slab then gives each warp its rows
        16i.., i.e. the MmaLayout(M, N, warps, 1) fragment."""
        R = self.row_blocks
        if R == 1:
            return row
        slab, within = floordiv(row, 64 * R), floormod(row, 64 * R)
        warp, rest = floordiv(within, 16 * R), floormod(within, 16 * R)
        return slab * (64 * R) + floordiv(rest, 16) * 64 + warp * 16 + floormod(rest, 16)

    def xor_term(self, row):
        """The chunk XOR for `row` (an int or an expression supporting // % &)."""
        row_bytes = self.row_elems * self.elem_bytes
        if row_bytes % 128 == 0:
            return row % 8
        if row_bytes == 64:
            return (row // 2) % 4
        if row_bytes == 32:
            return (row // 4) % 2
        return 0


@dataclass(frozen=True)
class StridedRowLayout:
    """Per-row values of a StridedLayout (R, N) tile (what a row reduction of it produces).

    With G = N / vec chunks per row and P threads (G % P == 0 or P % G == 0), row r is spread over
    a group of min(G, P) consecutive threads; each of them holds the row's value (replicated).
    """

    rows: int
    G: int
    threads: int
    ndim: int = 1

    @property
    def q(self) -> int:
        return max(1, self.G // self.threads)

    @property
    def group(self) -> int:
        return min(self.G, self.threads)

    @property
    def chunk_iters(self) -> int:
        return -(-(self.rows * self.G) // self.threads)

    @property
    def local_size(self) -> int:
        return -(-self.chunk_iters // self.q)

    @staticmethod
    def of(parent: "StridedLayout", ndim: int = 1):
        if len(parent.shape) != 2:
            return None
        R, N = parent.shape
        G = N // parent.vec
        P = parent.threads
        if not (G % P == 0 or P % G == 0):
            return None
        return StridedRowLayout(R, G, P, ndim)

    def matches(self, parent: "StridedLayout") -> bool:
        other = StridedRowLayout.of(parent, self.ndim)
        return other is not None and (other.rows, other.G, other.threads) == (self.rows, self.G, self.threads)

    def row_of(self, t, r_local):
        if self.G >= self.threads:
            return r_local
        return t // self.G + (self.threads // self.G) * r_local
