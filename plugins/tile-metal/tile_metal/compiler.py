"""Tile IR -> TVM TIR (shared SIMT lowering, simdgroup matrices) -> Metal Shading Language."""
from __future__ import annotations

import re
import time
from typing import Any, Dict, List, Tuple

from tilecore.diagnostics import TileCompileError

MAX_THREADS = 1024                 # threads per threadgroup on Apple GPUs
MAX_THREADGROUP_MEMORY = 32 * 1024  # bytes of threadgroup memory per threadgroup


def simt_target(options: Dict[str, Any]):
    from tilecore.lowering.simt import SimtTarget

    return SimtTarget(kind="metal", arch="apple", warp_size=32, has_mma=False, has_cp_async=False,
                      device_lib="", fast_math=False, max_shared_memory=MAX_THREADGROUP_MEMORY,
                      shared_scope="shared")


def generate(func, options: Dict[str, Any]):
    """(MSL source, LoweredKernel, seconds) for `func`."""
    import tvm

    from tilecore.lowering.simdgroup_gemm import MetalSimtLowering
    from tilecore.lowering.simt import register_simt_pipeline

    t0 = time.perf_counter()
    lk = MetalSimtLowering(func, simt_target(options), options).build()
    try:
        lib = tvm.compile(tvm.IRModule({func.name: lk.prim_func}),
                          target={"kind": "metal", "max_num_threads": MAX_THREADS, "thread_warp_size": 32},
                          tir_pipeline=register_simt_pipeline())
    except TileCompileError:
        raise
    except Exception as err:
        msg = str(err).strip().splitlines()
        raise TileCompileError(f"backend metal could not generate code for kernel {func.name!r}: "
                               f"{msg[-1] if msg else type(err).__name__}", func.span, func.source) from err
    dev = [m for m in lib.mod.imports if m.kind == "metal"][0]
    return with_device_lib(str(dev.inspect_source())), lk, time.perf_counter() - t0


def with_device_lib(src: str) -> str:
    """Insert the tc_atomic_* helpers when the kernel calls them."""
    from tilecore.lowering.simdgroup_gemm import METAL_DEVICE_LIB

    marker = "using namespace metal;\n"
    if "tc_atomic_" not in src or marker not in src:
        return src
    return src.replace(marker, marker + METAL_DEVICE_LIB, 1)


_KERNEL = re.compile(r"kernel void (\w+)\((.*?)\)\s*\{", re.S)
_BUFFER = re.compile(r"(device|constant)\s+([\w ]+?)\*?\s*(\w+)\s*\[\[\s*buffer\((\d+)\)\s*\]\]")


def kernels(src: str) -> List[Tuple[str, str]]:
    """(name, parameter text) of every `kernel void` in the MSL source."""
    return _KERNEL.findall(src)


def tensor_param(binding: str) -> str:
    """The Tile IR tensor behind a buffer binding ("A_ptr" -> "A")."""
    return binding[:-4] if binding.endswith("_ptr") else binding


def bound_tensors(src: str) -> List[str]:
    """Tensor parameters in buffer-binding order. TVM leaves out tensors the kernel never
    touches, so this can be a subset of the function's parameters."""
    (_name, params), = kernels(src)
    return [tensor_param(b[2]) for b in sorted(buffer_bindings(params), key=lambda b: b[3])]


def buffer_bindings(params: str) -> List[Tuple[str, str, str, int]]:
    """(address space, type, name, buffer index) of a kernel's [[buffer(n)]] parameters."""
    return [(a, t.strip(), n, int(i)) for a, t, n, i in _BUFFER.findall(params)]


_TG = re.compile(r"threadgroup\s+(\w+)\s+(\w+)\[(\d+)\];")
_SIZES = {"float": 4, "half": 2, "bfloat": 2, "int": 4, "uint": 4, "char": 1, "uchar": 1, "short": 2,
          "ushort": 2, "long": 8, "ulong": 8, "bool": 1, "double": 8}


def threadgroup_memory(src: str) -> int:
    """Bytes of threadgroup memory the MSL source declares."""
    return sum(_SIZES.get(t, 4) * int(n) for t, _, n in _TG.findall(src))


def check(src: str, threads: int, param_names: List[str]) -> List[str]:
    """Structural checks of generated MSL; returns the problems found (empty when it is sound)."""
    problems = []
    ks = kernels(src)
    if len(ks) != 1:
        problems.append(f"expected one kernel, found {len(ks)}")
        return problems
    name, params = ks[0]
    binds = buffer_bindings(params)
    idx = [b[3] for b in binds]
    if idx != list(range(len(idx))):
        problems.append(f"buffer bindings are not 0..n-1 in order: {idx}")
    for space, _ty, name, _i in binds:
        if space != "device" or tensor_param(name) not in param_names:
            problems.append(f"buffer binding {name!r} ({space}) is not a tensor parameter of the kernel")
    if threads > MAX_THREADS:
        problems.append(f"threads={threads} exceeds {MAX_THREADS} per threadgroup")
    tg = threadgroup_memory(src)
    if tg > MAX_THREADGROUP_MEMORY:
        problems.append(f"{tg} bytes of threadgroup memory exceed {MAX_THREADGROUP_MEMORY}")
    if "double" in src:
        problems.append("Metal has no double precision")
    return problems
