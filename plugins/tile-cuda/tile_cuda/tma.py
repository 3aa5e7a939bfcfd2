"""TMA loads on sm_90a (compile option tma): the stage copies of a warp-specialized `T.Pipelined` loop
as `cp.async.bulk.tensor` issued by one producer thread, instead of every producer thread's cp.async.

A copy global -> shared qualifies when every rule of TMA_RULES holds (the first that fails is the
reason it keeps cp.async, recorded in the plan's notes). Then:

* the launcher builds a tensor map (CUtensorMap, 128 bytes) per copy and call with the driver's
  `cuTensorMapEncodeTiled` over the whole global tensor (`TensorMapSpec`: dims, byte strides of the
  contiguous array, box, swizzle, element type) and passes it as a `const __grid_constant__` kernel
  parameter (`plan.extra_params`; the source's parameter is retyped by `retype_parameters`);
* the producer's elected thread announces the copy's bytes on the stage's "full" mbarrier
  (`mbarrier.arrive.expect_tx`) and issues one TMA instruction per box (`Box`); the transfer
  completes the barrier's transaction count, so the consumers' wait is unchanged;
* out-of-bounds elements of a partial tile are filled with zeros by TMA, the copy semantics.

The boxes write exactly the bytes the cp.async path writes (`SharedLayout.offset2d`): TMA's
swizzle modes XOR 16-byte chunk bits [4, 4+B) of the shared address with bits [7, 7+B), the same
XOR as the wgmma canonical layouts (32/64/128-byte rows), so a swizzled tile whose rows are
W = 32, 64 or 128 bytes is one box of W-byte rows, a blocked tile (128-byte column blocks) one box
per column block, and a tile whose rows are permuted for two m64 row blocks (`row_blocks`) one
box per 16 rows. `smem_image` is that placement in Python, which the tests compare element by
element with the layout.

Pure Python: importing this does not import TVM.
"""

from __future__ import annotations

from math import prod
from typing import Any, Callable, List, NamedTuple, Optional, Sequence, Tuple, Union

from tilecore.ir import nodes as N
from tilecore.ir.types import itemsize
from tilecore.lowering.simt_layout import SharedLayout

MAX_RANK = 5
MAX_BOX = 256  # elements per box dimension
SWIZZLE = {0: 0, 32: 1, 64: 2, 128: 3}  # row bytes of a swizzled box -> CUtensorMapSwizzle
# CUtensorMapDataType: zero fill is all-zero bits, so any type of the element's size copies exactly
DATA_TYPES = {
    "float16": 6,
    "bfloat16": 9,
    "float32": 7,
    "float64": 8,
    "int8": 0,
    "uint8": 0,
    "int16": 1,
    "int32": 3,
    "int64": 5,
}
L2_PROMOTION_128B = 2
PARAM_PREFIX = "tc_tmap"
TMA_CLAIM = "tma"  # plan.claims[TMA_CLAIM]: id(copy) -> its TmaCopy


class Box(NamedTuple):
    """One TMA instruction of a copy: the tile's (row, column) it starts at and the element offset
    in the shared tile (stage 0) it writes to."""

    row: int
    col: int
    smem_elem: int


class TmaLayout(NamedTuple):
    """How a shared tile is written by TMA: box rows and columns, swizzle span in bytes (0 = none)
    and the boxes."""

    box_rows: int
    box_cols: int
    swizzle_bytes: int
    boxes: Tuple[Box, ...]


class TensorMapSpec(NamedTuple):
    """What the launcher needs to encode a copy's tensor map (all innermost dimension first, as
    cuTensorMapEncodeTiled takes them): the kernel parameter, the tensor argument, element type and
    size, dims (ints, or names of dynamic dimensions), box, swizzle."""

    param: str
    array: str
    data_type: int
    elem_bytes: int
    dims: Tuple[Union[int, str], ...]
    box: Tuple[int, ...]
    swizzle: int


class TmaCopy(NamedTuple):
    """A copy that runs on TMA: the copy, its tensor map, its boxes, the tensor's row and column axes
    (Tile IR order) and the bytes one stage receives."""

    copy: N.Copy
    spec: TensorMapSpec
    layout: TmaLayout
    row_axis: int
    col_axis: int
    bytes: int


# ------------------------------------------------------------------------------ the layout


def tma_layout(lay: SharedLayout) -> Optional[TmaLayout]:
    """The boxes that write shared layout `lay` (a 2-D tile) exactly, or None when TMA cannot."""
    if len(lay.shape) != 2:
        return None
    rows, cols = lay.shape
    eb = lay.elem_bytes
    row_bytes = cols * eb
    if not lay.swizzle:
        if lay.row_blocks != 1 or lay.blocked or row_bytes % 16 or cols > MAX_BOX:
            return None
        box_rows = min(rows, MAX_BOX)
        if rows % box_rows:
            return None
        boxes = tuple(Box(r, 0, r * cols) for r in range(0, rows, box_rows))
        return TmaLayout(box_rows, cols, 0, boxes)
    width = min(row_bytes, 128)
    if width not in (32, 64, 128) or row_bytes % width or rows % 8:
        return None
    if row_bytes > 128 and not lay.blocked:
        return None  # rows wider than the swizzle span without column blocks: no box writes them
    box_cols = width // eb
    if lay.row_blocks > 1:
        R = lay.row_blocks
        if rows % (64 * R):
            return None
        unit = lambda a, b: a // b  # noqa: E731
        groups: List[Box] = []
        for r in range(0, rows, 16):  # each 16-row group lands contiguously at its physical row
            phys = lay.physical_row(r, unit, lambda a, b: a % b)
            groups += [Box(r, c, _block_offset(lay, phys, c)) for c in range(0, cols, box_cols)]
        return TmaLayout(16, box_cols, width, tuple(groups))
    box_rows = min(rows, MAX_BOX)
    if rows % box_rows:
        return None
    spans = [Box(r, c, _block_offset(lay, r, c)) for c in range(0, cols, box_cols) for r in range(0, rows, box_rows)]
    return TmaLayout(box_rows, box_cols, width, tuple(spans))


def _block_offset(lay: SharedLayout, phys_row: int, col: int) -> int:
    """Element offset of physical row `phys_row`, column `col` (a column-block start) before swizzle."""
    if lay.blocked:
        e = lay.block_elems
        return (col // e) * lay.shape[0] * e + phys_row * e
    return phys_row * lay.row_elems + col


def smem_image(lay: SharedLayout, tl: TmaLayout) -> dict:
    """{(row, col): byte offset} where TMA puts each element of the tile: each box is written
    densely (rows of box_cols elements) from its offset, then the swizzle XORs address bits
    [4, 4+B) with bits [7, 7+B) (the tile base being aligned to the swizzle's repeat)."""
    eb = lay.elem_bytes
    mask = tl.swizzle_bytes // 16 - 1 if tl.swizzle_bytes else 0
    out = {}
    for b in tl.boxes:
        for r in range(tl.box_rows):
            for c in range(tl.box_cols):
                a = b.smem_elem * eb + (r * tl.box_cols + c) * eb
                out[(b.row + r, b.col + c)] = a ^ (((a >> 7) & mask) << 4)
    return out


# ------------------------------------------------------------------------------ which copies


class _Facts(NamedTuple):
    copy: N.Copy
    plan: Any  # the KernelPlan
    target: Any  # the TargetDescription
    src: N.Region
    dst: N.Region


def _nonunit(r: N.Region) -> List[int]:
    return [i for i, e in enumerate(r.extents) if e != 1]


def _strides_ok(buf: N.Buffer) -> bool:
    """Every stride but the innermost of the contiguous tensor (bytes) is a multiple of 16: the
    static factors of each must be, whatever the dynamic dimensions are."""
    eb = itemsize(buf.dtype)
    for d in range(1, buf.ndim):
        static = prod(int(s) for s in buf.shape[d:] if isinstance(s, int))
        if static * eb % 16:
            return False
    return True


def _layout(f: _Facts) -> Optional[TmaLayout]:
    lay = f.plan.layout.get(f.dst.buffer.name)
    return tma_layout(lay) if isinstance(lay, SharedLayout) else None


def _aligned(f: _Facts) -> bool:
    """The tile base and every stage start at the swizzle's repeat (TMA swizzles by address)."""
    tl, lay = _layout(f), f.plan.layout[f.dst.buffer.name]
    if tl is None:
        return False
    need = 8 * tl.swizzle_bytes if tl.swizzle_bytes else 128
    align = f.plan.shared_alignment or f.target.shared_alignment
    return align % need == 0 and lay.numel * lay.elem_bytes % need == 0


# The rules in order: (why a copy keeps cp.async, the condition TMA needs). `tma_copy` applies them.
TMA_RULES: Tuple[Tuple[str, Callable[[_Facts], bool]], ...] = (
    ("the source is not a global tensor", lambda f: f.plan.storage.get(f.src.buffer.name) == "global"),
    ("the destination is not a shared tile", lambda f: f.plan.storage.get(f.dst.buffer.name) == "smem"),
    (f"the tensor has more than {MAX_RANK} dimensions", lambda f: f.src.buffer.ndim <= MAX_RANK),
    ("TMA has no element type of this dtype", lambda f: f.src.buffer.dtype in DATA_TYPES),
    ("source and destination dtypes differ", lambda f: f.src.buffer.dtype == f.dst.buffer.dtype),
    (
        "the destination is not a whole 2-D shared tile",
        lambda f: (
            len(f.dst.buffer.shape) == 2
            and tuple(f.dst.extents) == tuple(f.dst.buffer.shape)
            and all(isinstance(s, N.Const) and s.value == 0 for s in f.dst.starts)
        ),
    ),
    (
        "the tile's rows are not the tensor's innermost dimension (a transposed or strided view)",
        lambda f: (
            len(_nonunit(f.src)) == 2
            and _nonunit(f.src)[1] == f.src.buffer.ndim - 1
            and tuple(f.src.squeezed_shape()) == tuple(f.dst.buffer.shape)
        ),
    ),
    ("a row pitch of the tensor is not a multiple of 16 bytes", lambda f: _strides_ok(f.src.buffer)),
    ("no TMA box layout writes the tile's shared layout", lambda f: _layout(f) is not None),
    ("the shared tile is not aligned to the swizzle's repeat", _aligned),
)


def tma_copy(c: N.Copy, plan, target, param: str) -> Union[TmaCopy, str]:
    """The TmaCopy of copy `c` (its tensor map passed as kernel parameter `param`), or the reason
    (the first rule of TMA_RULES that fails) why it keeps cp.async."""
    facts = _Facts(c, plan, target, c.src, c.dst)
    for reason, holds in TMA_RULES:
        if not holds(facts):
            return reason
    tl = _layout(facts)
    assert tl is not None
    src = c.src
    buf = src.buffer
    row_axis, col_axis = _nonunit(src)
    box = [1] * buf.ndim
    box[row_axis], box[col_axis] = tl.box_rows, tl.box_cols
    dims = tuple(s if isinstance(s, int) else s.name for s in reversed(buf.shape))
    spec = TensorMapSpec(
        param,
        buf.name,
        DATA_TYPES[buf.dtype],
        itemsize(buf.dtype),
        dims,
        tuple(reversed(box)),
        SWIZZLE[tl.swizzle_bytes],
    )
    nbytes = prod(c.dst.buffer.static_dims()) * itemsize(buf.dtype)
    return TmaCopy(c, spec, tl, row_axis, col_axis, nbytes)


def tma_enabled(target) -> bool:
    """Option tma (default on) on a target with TMA (sm_90 and newer)."""
    return target.prop("tma", True) and target.prop("sm", 0) >= 90


# ------------------------------------------------------------------------------ host side


def encode_arguments(spec: TensorMapSpec, bindings) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
    """(globalDim, globalStrides in bytes) of `spec`'s tensor for the dynamic sizes `bindings`: the
    tensor is contiguous (the launcher checks), so each stride is the product of the inner dims."""
    dims = tuple(int(d) if isinstance(d, int) else int(bindings[d]) for d in spec.dims)
    strides, acc = [], spec.elem_bytes
    for d in dims[:-1]:
        acc *= d
        strides.append(acc)
    return dims, tuple(strides)


def tensor_map_meta(plan, kernel_params: Sequence[Tuple[str, str]]) -> List[list]:
    """The artifact's meta["tensor_maps"]: the TensorMapSpecs (as lists) of the claims that carry
    one (`spec`: the TMA loads, the epilogue's TMA stores) whose tensor map is a parameter of the
    generated kernel."""
    present = {name for kind, name in kernel_params if kind == "tmap"}
    specs = [getattr(t, "spec", None) for claims in plan.claims.values() for t in claims.values()]
    found = [s for s in specs if isinstance(s, TensorMapSpec) and s.param in present]
    return [[s.param, s.array, s.data_type, s.elem_bytes, list(s.dims), list(s.box), s.swizzle] for s in found]


def specs_of(meta_maps: Sequence[Sequence]) -> List[TensorMapSpec]:
    """TensorMapSpecs from an artifact's meta["tensor_maps"] (lists, as stored)."""
    return [TensorMapSpec(p, a, int(t), int(e), tuple(d), tuple(b), int(s)) for p, a, t, e, d, b, s in meta_maps]


# ------------------------------------------------------------------------------ C++ side

TMA_LIB = r"""
#ifndef TILECORE_TMA_LIB
#define TILECORE_TMA_LIB
namespace tc {
// A CUtensorMap (driver API, 128 bytes) as a kernel parameter: `const __grid_constant__`, so its
// address is the parameter's own (TMA reads the map through it). The helpers also take the map as
// the `void*` handle that TVM's own compile of the module sees before `retype_parameters`.
struct alignas(64) TensorMap { unsigned long long words[16]; };
__device__ __forceinline__ void tma_prefetch(const void* map) {
  asm volatile("prefetch.tensormap [%0];\n" :: "l"(reinterpret_cast<unsigned long long>(map)) : "memory");
}
__device__ __forceinline__ void tma_prefetch(const TensorMap& map) { tma_prefetch(static_cast<const void*>(&map)); }
// make the mbarriers' initialization visible to the async proxy (TMA completes on them)
__device__ __forceinline__ void fence_mbar_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// arrive once and expect `bytes` of transactions (the TMA copies' completion) in this phase
__device__ __forceinline__ void mbar_expect_tx(void* bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
               :: "r"(smem_addr(bar)), "r"(bytes) : "memory");
}
// one box of the tensor at coordinates c0 (innermost) .. into shared memory at dst, completing on bar
#define TC_TMA_LOAD ".shared::cluster.global.tile.mbarrier::complete_tx::bytes"
template <int RANK>
__device__ __forceinline__ void tma_load(void* dst, const void* map, void* bar, int c0, int c1 = 0, int c2 = 0,
                                         int c3 = 0, int c4 = 0) {
  const u32 d = smem_addr(dst), b = smem_addr(bar);
  const unsigned long long m = reinterpret_cast<unsigned long long>(map);
  if constexpr (RANK == 1)
    asm volatile("cp.async.bulk.tensor.1d" TC_TMA_LOAD " [%0], [%1, {%3}], [%2];\n"
                 :: "r"(d), "l"(m), "r"(b), "r"(c0) : "memory");
  else if constexpr (RANK == 2)
    asm volatile("cp.async.bulk.tensor.2d" TC_TMA_LOAD " [%0], [%1, {%3, %4}], [%2];\n"
                 :: "r"(d), "l"(m), "r"(b), "r"(c0), "r"(c1) : "memory");
  else if constexpr (RANK == 3)
    asm volatile("cp.async.bulk.tensor.3d" TC_TMA_LOAD " [%0], [%1, {%3, %4, %5}], [%2];\n"
                 :: "r"(d), "l"(m), "r"(b), "r"(c0), "r"(c1), "r"(c2) : "memory");
  else if constexpr (RANK == 4)
    asm volatile("cp.async.bulk.tensor.4d" TC_TMA_LOAD " [%0], [%1, {%3, %4, %5, %6}], [%2];\n"
                 :: "r"(d), "l"(m), "r"(b), "r"(c0), "r"(c1), "r"(c2), "r"(c3) : "memory");
  else
    asm volatile("cp.async.bulk.tensor.5d" TC_TMA_LOAD " [%0], [%1, {%3, %4, %5, %6, %7}], [%2];\n"
                 :: "r"(d), "l"(m), "r"(b), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4) : "memory");
}
template <int RANK>
__device__ __forceinline__ void tma_load(void* dst, const TensorMap& map, void* bar, int c0, int c1 = 0, int c2 = 0,
                                         int c3 = 0, int c4 = 0) {
  tma_load<RANK>(dst, static_cast<const void*>(&map), bar, c0, c1, c2, c3, c4);
}
}  // namespace tc
#endif
"""


def retype_parameters(src: str, params: Sequence[str]) -> str:
    """The generated source with each tensor-map parameter (a `void*` handle in TIR) declared as
    the `const __grid_constant__ tc::TensorMap` that the launcher passes by value."""
    import re

    for p in params:
        src, n = re.subn(rf"void\*\s*(?:__restrict__\s*)?{p}\b", f"const __grid_constant__ tc::TensorMap {p}", src)
        if not n:  # the declaration and the definition of the kernel carry it
            raise RuntimeError(f"tensor map parameter {p} not found in the kernel signature")
    return src
