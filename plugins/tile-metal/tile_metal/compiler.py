"""Tile IR -> TVM TIR (the SIMT toolkit with tile-metal's rules) -> Metal Shading Language."""

from __future__ import annotations

import re
import time
from typing import Any, Dict, List, Tuple

from tilecore.diagnostics import TileCompileError

MAX_THREADS = 1024  # threads per threadgroup on Apple GPUs
MAX_THREADGROUP_MEMORY = 32 * 1024  # bytes of threadgroup memory per threadgroup


def metal_target(options: Dict[str, Any]):
    """The `TargetDescription` of an Apple GPU: simdgroups of 32, 32 KB of threadgroup memory as
    one static allocation per tile (TVM's Metal codegen sizes a pool in elements of the view type),
    MSL vectors of at most 4 lanes of at most 4 bytes, no bool vectors (bool tiles in int8)."""
    from tilecore.lowering.target import TargetDescription

    return TargetDescription(
        name="metal",
        arch="apple",
        tvm_target=TVM_TARGET,
        warp_size=32,
        max_shared_memory=MAX_THREADGROUP_MEMORY,
        shared_scope="shared",
        shared_pool=False,
        max_vector_lanes=4,
        max_vector_element_bytes=4,
        register_vector_lanes=4,
        bool_storage="int8",
        bool_vectors=False,
        bfloat16_computed_in_float32=True,  # TVM legalizes bfloat16 for Metal
    )


TVM_TARGET = {"kind": "metal", "max_num_threads": MAX_THREADS, "thread_warp_size": 32}


def default_tables():
    """(rules, intrinsics) of the installed plugins for the backend "metal"."""
    from tilecore.plugin.registry import get_registry
    from tilecore.plugin.rules import collect_lowering_tables

    backend, _ = get_registry().resolve("metal")
    return collect_lowering_tables(backend)


def generate(func, options: Dict[str, Any], tables=None):
    """(MSL source, LoweredKernel, seconds) for `func`, lowered with the rule and intrinsic
    `tables` (default: those the installed plugins contribute)."""
    import tvm

    from tilecore.lowering.simt import lower_kernel, register_simt_pipeline

    t0 = time.perf_counter()
    rules, intrinsics = tables if tables is not None else default_tables()
    lk = lower_kernel(func, metal_target(options), rules, intrinsics, options)
    try:
        lib = tvm.compile(
            tvm.IRModule({func.name: lk.prim_func}), target=dict(TVM_TARGET), tir_pipeline=register_simt_pipeline()
        )
    except TileCompileError:
        raise
    except Exception as err:
        msg = str(err).strip().splitlines()
        raise TileCompileError(
            f"backend metal could not generate code for kernel {func.name!r}: {msg[-1] if msg else type(err).__name__}",
            func.span,
            func.source,
        ) from err
    dev = [m for m in lib.mod.imports if m.kind == "metal"][0]
    return with_device_lib(str(dev.inspect_source())), lk, time.perf_counter() - t0


def with_device_lib(src: str) -> str:
    """Insert the tc_atomic_* helpers when the kernel calls them."""
    from .simdgroup import METAL_DEVICE_LIB

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
    ((_name, params),) = kernels(src)
    return [tensor_param(b[2]) for b in sorted(buffer_bindings(params), key=lambda b: b[3])]


def buffer_bindings(params: str) -> List[Tuple[str, str, str, int]]:
    """(address space, type, name, buffer index) of a kernel's [[buffer(n)]] parameters."""
    return [(a, t.strip(), n, int(i)) for a, t, n, i in _BUFFER.findall(params)]


_TG = re.compile(r"threadgroup\s+(\w+)\s+(\w+)\[(\d+)\];")
_SIZES = {
    "float": 4,
    "half": 2,
    "bfloat": 2,
    "int": 4,
    "uint": 4,
    "char": 1,
    "uchar": 1,
    "short": 2,
    "ushort": 2,
    "long": 8,
    "ulong": 8,
    "bool": 1,
    "double": 8,
}


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
