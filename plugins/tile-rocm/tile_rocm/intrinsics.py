"""tile-rocm's intrinsic table: float64 math through OCML, the workgroup barrier with LDS
fences, and atomics through the helper library `device_lib` (linked by `compiler.build`).

Imports TVM: used by codegen only.
"""

from __future__ import annotations

from typing import Dict

from tvm import tirx as tx
from tvm.tirx.script.builder import ir as B

from tilecore.lowering.intrinsics import contextual

from .device_lib import ATOMIC_TYPES, helper_name
from .rocm_math import rocm_table


@contextual
def workgroup_barrier(lowering, args):
    """`tc_barrier`: s_barrier between release and acquire fences, as HIP's __syncthreads."""
    B.evaluate(tx.call_extern("void", "tc_barrier"))


def _atomic(kind):
    @contextual
    def atomic(lowering, args):
        buf, idx, value = args
        storage = lowering.plan.storage[buf.name]
        if storage not in ("global", "smem"):
            raise lowering.unsupported(f"T.atomic_{kind} on {buf.dtype} {storage} memory")
        name = helper_name(kind, buf.dtype, "global" if storage == "global" else "shared")
        B.evaluate(tx.call_extern("void", name, lowering.addr(buf, idx), value))

    atomic.__doc__ = f"atomic {kind} through the `{helper_name(kind, '<dtype>', '<space>')}` helpers"
    return atomic


def rocm_intrinsics() -> Dict:
    """Every entry tile-rocm contributes (added with setdefault: a third party's entry wins)."""
    table: Dict = dict(rocm_table())
    table[("barrier", None)] = workgroup_barrier
    for dtype in ATOMIC_TYPES:
        for kind in ("add", "max", "min"):
            table[(f"atomic_{kind}", dtype)] = _atomic(kind)
    return table
