"""Device instructions of the SIMT toolkit, in their portable form (TVM builtins).

The portable lowering (`simt.py`) never spells a vendor's instruction: it asks the
intrinsic table for these entries, keyed (name, dtype) like the math functions
(dtype None where the instruction has none). A plugin replaces any of them through
`tilecore_intrinsics` (e.g. a CUDA warp shuffle, an AMD barrier with LDS fences),
or adds those that have no portable form ("async_copy", "async_commit",
"async_wait": what a pipeline rule needs).

Every entry is called as `impl(lowering, args)`, `lowering` being the
`SimtLowering` and `args` a list:

| name | dtype | args | result |
|---|---|---|---|
| shuffle_xor | value's | [value, mask] | value of lane (lane ^ mask) in the warp |
| barrier | None | [] | emits a block-wide barrier |
| vector_copy | None | [dst, src or None, lanes] | emits one vector copy (None: zero fill); dst/src: |
|  |  |  | BufferLoads of the first element |
| async_copy | None | [dst, src, in_bounds, lanes] | emits an asynchronous copy (zero fill when not in_bounds) |
| async_commit | None | [] | emits: close the group of async copies issued so far |
| async_wait | None | [pending] | emits: wait until at most `pending` groups are in flight |
| atomic_add / _max / _min | element's | [buffer, indices, value] | emits one atomic read-modify-write |

Imports TVM: use it from backend code only.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

from tvm import tirx as tx
from tvm.tirx import op as top
from tvm.tirx.script.builder import ir as B

from .intrinsics import contextual, dtype_of
from .tir_expr import cast_to, tir_const

DEVICE_INSTRUCTIONS = (
    "shuffle_xor",
    "barrier",
    "vector_copy",
    "async_copy",
    "async_commit",
    "async_wait",
    "atomic_add",
    "atomic_max",
    "atomic_min",
)


@contextual
def warp_shuffle_xor(lowering, args):
    """TVM's warp shuffle (32-bit lanes; wider and narrower values are split or widened)."""
    value, mask = args
    ws = lowering.target.warp_size
    src = tx.bitwise_xor(tx.floormod(lowering.thread, ws), cast_to(mask, "int32"))

    def shfl32(v):
        return tx.call_intrin(
            dtype_of(v),
            "tirx.tvm_warp_shuffle",
            tx.const(0, "int32"),
            v,
            src,
            tir_const(ws, "int32"),
            tir_const(ws, "int32"),
        )

    dt = dtype_of(value)
    if dt in ("float32", "int32", "uint32"):
        return shfl32(value)
    if dt in ("float64", "int64"):
        bits = tx.reinterpret("int64", value) if dt == "float64" else value
        lo = shfl32(tx.Cast("int32", bits))
        hi = shfl32(tx.Cast("int32", tx.shift_right(bits, tir_const(32, "int64"))))
        joined = tx.bitwise_or(
            tx.shift_left(tx.Cast("int64", hi), tir_const(32, "int64")),
            tx.bitwise_and(tx.Cast("int64", lo), tir_const(0xFFFFFFFF, "int64")),
        )
        return tx.reinterpret("float64", joined) if dt == "float64" else joined
    wide = "float32" if dt in ("float16", "bfloat16") else "int32"
    return cast_to(shfl32(cast_to(value, wide)), dt)


@contextual
def storage_barrier(lowering, args):
    """TVM's shared-memory barrier."""
    B.evaluate(top.tvm_storage_sync("shared"))


@contextual
def ramp_vector_copy(lowering, args):
    """A TIR vector load/store (a Ramp over the last index); a Broadcast zero for a fill."""
    dst, src, lanes = args
    one = tir_const(1, "int32")

    def widen(load):
        idx = list(load.indices)
        idx[-1] = tx.Ramp(idx[-1], one, lanes)
        return load.source, idx

    dbuf, didx = widen(dst)
    if src is None:
        value = tx.Broadcast(tir_const(0, str(dbuf.dtype)), lanes)
    else:
        sbuf, sidx = widen(src)
        value = tx.BufferLoad(sbuf, sidx)
    B.buffer_store(dbuf, value, didx)


@contextual
def tvm_atomic_add(lowering, args):
    """TVM's atomic add (the GPU codegens emit it for 32-bit values)."""
    buf, idx, value = args
    B.evaluate(tx.call_intrin(buf.dtype, "tirx.atomic_add", lowering.addr(buf, idx), value))


def portable_device_table() -> Dict[Tuple[str, Optional[str]], Callable[..., Any]]:
    """The portable device instructions (see the module docstring)."""
    table: Dict[Tuple[str, Optional[str]], Callable[..., Any]] = {
        ("barrier", None): storage_barrier,
        ("vector_copy", None): ramp_vector_copy,
    }
    for dt in ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint32"):
        table[("shuffle_xor", dt)] = warp_shuffle_xor
    for dt in ("float32", "int32"):
        table[("atomic_add", dt)] = tvm_atomic_add
    return table
