"""tile-cuda's intrinsic table: fast math and the device instructions of the SIMT toolkit.

The toolkit's portable lowering asks for device instructions by name
(`tilecore.lowering.simt_intrinsics`); on CUDA they are calls into the helper
library `device_lib.CUDA_DEVICE_LIB` (namespace `tc`), which TVM emits with the
call (`cuda_func_call`): warp shuffles, 16-byte copies, cp.async, atomics for
every dtype, the async-proxy fence of wgmma kernels, and ex2.approx.

Imports TVM: used by codegen only.
"""

from __future__ import annotations

from typing import Dict

from tvm import tirx as tx
from tvm.tirx.script.builder import ir as B

from tilecore.lowering.intrinsics import contextual, default_table

# Tile IR dtype -> its C++ spelling in CUDA source
CXX_TYPES = {
    "float16": "half",
    "bfloat16": "__nv_bfloat16",
    "int8": "signed char",
    "float32": "float",
    "float64": "double",
    "int32": "int",
    "int64": "int64_t",
    "int16": "int16_t",
    "uint8": "uint8_t",
    "bool": "bool",
}
ATOMIC_OPS = {"add": 0, "max": 1, "min": 2}  # the Op template argument of tc::atomic


def helper_call(lowering, name, *args, ret="void"):
    """A call into the kernel's helper library (tc::...); the call carries the library source."""
    lowering.lib_used = True
    return _func_call(name, args, lowering.device_lib, ret)


def _func_call(name, args, source, ret):
    if hasattr(tx, "cuda_func_call"):
        return tx.cuda_func_call(name, *args, source_code=source, return_type=ret)
    from tvm.backend.cuda import op as cop

    return cop.cuda_func_call(name, *args, source_code=source, return_type=ret)


def _address(load):
    return tx.address_of(load)


@contextual
def shuffle_xor(lowering, args):
    """__shfl_xor_sync over the full warp (16-bit values as their bits)."""
    value, mask = args
    dt = str(value.ty.dtype)
    return helper_call(lowering, f"tc::shfl_xor<{CXX_TYPES[dt]}>", value, mask, ret=dt)


@contextual
def copy16(lowering, args):
    """A 16-byte vector copy (uint4), or a 16-byte zero fill when there is no source."""
    dst, src, _lanes = args
    if src is None:
        B.evaluate(helper_call(lowering, "tc::zero16", _address(dst)))
    else:
        B.evaluate(helper_call(lowering, "tc::copy16", _address(dst), _address(src)))


@contextual
def cp_async16(lowering, args):
    """cp.async.cg of 16 bytes global -> shared; src-size 0 (zero fill) when not in bounds."""
    dst, src, in_bounds, _lanes = args
    B.evaluate(helper_call(lowering, "tc::cp_async16", _address(dst), _address(src), in_bounds))


@contextual
def cp_async_commit(lowering, args):
    """cp.async.commit_group."""
    B.evaluate(helper_call(lowering, "tc::cp_async_commit"))


@contextual
def cp_async_wait(lowering, args):
    """cp.async.wait_group N."""
    B.evaluate(helper_call(lowering, f"tc::cp_async_wait<{int(args[0])}>"))


@contextual
def async_proxy_fence(lowering, args):
    """fence.proxy.async.shared::cta: shared writes reach wgmma's async proxy before a barrier."""
    B.evaluate(helper_call(lowering, "tc::fence_async_smem"))


def _atomic(kind):
    @contextual
    def atomic(lowering, args):
        buf, idx, value = args
        op = f"tc::atomic<{ATOMIC_OPS[kind]}, {CXX_TYPES[buf.dtype]}>"
        B.evaluate(helper_call(lowering, op, lowering.addr(buf, idx), value))

    atomic.__doc__ = f"atomic {kind} for every dtype (16-bit and 8-bit ones by a CAS loop)"
    return atomic


def _fast(name, extern):
    portable = default_table()[(name, "float32")]

    @contextual
    def fast(lowering, args):
        if not lowering.target.prop("fast_math", False):
            return portable(args)
        return tx.call_pure_extern("float32", extern, args[0])

    fast.__doc__ = f"{extern} under the compile option fast_math=True; by default TVM's accurate {name}"
    return fast


@contextual
def fast_exp2(lowering, args):
    """ex2.approx.ftz.f32 under fast_math=True (default: exp2f). A helper-library call (not an extern name): the call
    carries the kernel's helper source, so a kernel whose only helper is exp2 still gets `tc`."""
    if not lowering.target.prop("fast_math", False):
        return default_table()[("exp2", "float32")](args)
    return _func_call("tc::fast_exp2", (args[0],), lowering.device_lib, "float32")


def _nan_minmax(op):
    @contextual
    def minmax(lowering, args):
        if lowering.target.prop("sm", 0) < 80:  # max.NaN is PTX ISA 7.0, sm_80
            from tilecore.lowering.tir_expr import nan_max, nan_min

            return (nan_max if op == "max" else nan_min)(*args)
        return helper_call(lowering, f"tc::{op}_nan", *args, ret="float32")

    minmax.__doc__ = f"{op} of two float32 values, NaN if either is NaN: {op}.NaN.f32 (sm_80+)"
    return minmax


def cuda_intrinsics() -> Dict:
    """Every entry tile-cuda contributes (added with setdefault: a third party's entry wins)."""
    table: Dict = {
        ("exp", "float32"): _fast("exp", "__expf"),
        ("log", "float32"): _fast("log", "__logf"),
        ("exp2", "float32"): fast_exp2,
        ("vector_copy", None): copy16,
        ("async_copy", None): cp_async16,
        ("async_commit", None): cp_async_commit,
        ("async_wait", None): cp_async_wait,
        ("async_proxy_fence", None): async_proxy_fence,
        ("nan_max", "float32"): _nan_minmax("max"),
        ("nan_min", "float32"): _nan_minmax("min"),
    }
    for dt in CXX_TYPES:
        table[("shuffle_xor", dt)] = shuffle_xor
        for kind in ATOMIC_OPS:
            table[(f"atomic_{kind}", dt)] = _atomic(kind)
    return table
