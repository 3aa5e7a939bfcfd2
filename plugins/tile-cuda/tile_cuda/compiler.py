"""Tile IR -> CUDA C++ (TVM's CUDA codegen) -> cubin (nvcc, or NVRTC when nvcc is absent)."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time
from typing import Any, Dict, List, Tuple

from tilecore.diagnostics import TileCompileError

from . import cluster, retile, split_k, tma, toolchain
from .ptx_fixes import apply_ptx_rewrites

NVCC_FLAGS = [
    "-O3",
    "-std=c++17",
    "-w",
    "--expt-relaxed-constexpr",
    "-U__CUDA_NO_HALF_OPERATORS__",
    "-U__CUDA_NO_HALF_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT16_OPERATORS__",
    "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT162_OPERATORS__",
    "-U__CUDA_NO_BFLOAT162_CONVERSIONS__",
]


def default_tables():
    """(rules, intrinsics) of the installed plugins for the backend "cuda"."""
    from tilecore.plugin.registry import get_registry
    from tilecore.plugin.rules import collect_lowering_tables

    backend, _ = get_registry().resolve("cuda")
    return collect_lowering_tables(backend)


def generate_source(func, arch: str, options: Dict[str, Any], tables=None):
    """Lower `func` with the rule and intrinsic `tables` (default: those the installed plugins
    contribute) and return (CUDA source, kernel symbol, param order, LoweredKernel)."""
    import tvm

    from tilecore.lowering.simt import lower_kernel, register_simt_pipeline

    from .fp8_gemm import widen_fp8_gemm_operands
    from .target import cuda_target

    rules, intrinsics = tables if tables is not None else default_tables()
    target = cuda_target(arch, options)
    func = widen_fp8_gemm_operands(func)  # fp8 gemms on the float16 tensor-core paths
    func, retile_notes = retile.rewrite_for_target(func, target)  # before split-K: it sees the new grid
    func, split_notes = split_k.rewrite_for_target(func, target, rules)
    lk = lower_kernel(func, target, rules, intrinsics, options)
    lk.notes[:0] = retile_notes + split_notes
    try:
        mod = tvm.IRModule({func.name: lk.prim_func})
        # the lowering plans shared memory itself (one pool with explicit views): no storage rewrite
        with tvm.transform.PassContext(config={"tirx.disable_storage_rewrite": True}):
            lib = tvm.compile(mod, target={"kind": "cuda", "arch": arch}, tir_pipeline=register_simt_pipeline())
        dev = [m for m in lib.mod.imports if m.kind == "cuda"]
        src = dev[0].inspect_source()
    except TileCompileError:
        raise
    except Exception as err:
        msg = str(err).strip().splitlines()
        raise TileCompileError(
            f"backend cuda could not generate code for kernel {func.name!r}: {msg[-1] if msg else type(err).__name__}",
            func.span,
            func.source,
        ) from err
    src = keep_first_copy(src, lk.device_lib)
    if not lk.noalias:  # threads pass values through a tensor: no __restrict__ (tilecore.lowering.param_aliasing)
        src = drop_restrict(src)
    if lk.plan.shared_alignment and lk.plan.shared_alignment > 128:
        # wgmma's swizzled operand tiles sit at 1024-byte aligned pool offsets: align the pool too
        src = re.sub(
            r"extern __shared__ __align__\(\d+\) uchar smem_pool_ptr\[\]",
            f"extern __shared__ __align__({lk.plan.shared_alignment}) uchar smem_pool_ptr[]",
            src,
        )
    blocks = max((info.blocks_per_sm for info in lk.plan.claims.get("warp_specialized", {}).values()), default=1)
    if blocks > 1:
        # the register split of `warp_specialize.register_split` holds only if ptxas plans for it
        src = re.sub(r"__launch_bounds__\((\d+)\)", rf"__launch_bounds__(\1, {blocks})", src, count=1)
    if any(info.multicast for info in lk.plan.claims.get("warp_specialized", {}).values()):
        # TMA multicast (`cluster.py`): the blocks launch in clusters of two along x
        src = src.replace('extern "C" __global__ void ', f'extern "C" __global__ void {cluster.CLUSTER_DIMS} ', 1)
    entry, params = parse_kernel_signature(src)
    maps = [name for kind, name in params if name in lk.plan.extra_params and name.startswith(tma.PARAM_PREFIX)]
    if maps:  # TMA tensor maps: passed by value (`tma.retype_parameters`)
        src = tma.retype_parameters(src, maps)
        entry, params = parse_kernel_signature(src)
    # split-K workspaces: pointers the launcher owns (`split_k.workspace_meta`)
    params = [("workspace", name) if name in split_k.WORKSPACE_PARAMS else (kind, name) for kind, name in params]
    return src, entry, params, lk


def drop_restrict(src: str) -> str:
    """`src` with `__restrict__` removed from the __global__ kernel's declaration and definition
    (TVM's CUDA code generator prints it on every pointer parameter of a device function)."""
    return re.sub(
        r'^(extern "C" __global__ .*)$',
        lambda m: m.group(1).replace(" __restrict__", ""),
        src,
        flags=re.MULTILINE,
    )


def keep_first_copy(src: str, block: str) -> str:
    """`src` with every copy of `block` after the first removed. TVM's codegen writes a helper
    source once per call site; the copies are guarded, but nvcc still reads them (about 10% of a
    kernel's compile time, most of the stored source)."""
    if not block:
        return src
    first = src.find(block)
    if first < 0:
        return src
    end = first + len(block)
    return src[:end] + src[end:].replace(block, "")


_SIG = re.compile(
    r'extern "C" __global__ void (?:__cluster_dims__\([\d, ]+\) )?'
    r"(?:__launch_bounds__\(\d+(?:, \d+)?\) )?(\w+)\(([^)]*)\)\s*\{"
)


def parse_kernel_signature(src: str) -> Tuple[str, List[Tuple[str, str]]]:
    """The __global__ kernel's name and its parameters as (kind, name): kind "ptr", "tmap" (a TMA
    tensor map passed by value) or a C type."""
    m = _SIG.search(src)
    if not m:
        raise RuntimeError("generated CUDA source has no __global__ kernel")
    params = []
    for p in m.group(2).split(","):
        p = p.strip()
        if not p:
            continue
        name = p.split()[-1]
        if "TensorMap" in p:
            params.append(("tmap", name))
        elif "*" in p:
            params.append(("ptr", name[:-4] if name.endswith("_ptr") else name))
        else:
            params.append((" ".join(p.split()[:-1]), name))
    return m.group(1), params


def compile_cubin(src: str, arch: str) -> Tuple[bytes, str, float]:
    """Compile CUDA source to a cubin for `arch`; returns (cubin, compiler description, seconds).

    In two steps, source -> PTX -> cubin, with `ptx_fixes.PTX_REWRITES` applied in between (work-
    arounds of ptxas faults). Without nvcc, NVRTC makes the PTX and, where a rewrite applied, the
    driver assembles the rewritten PTX when the module is loaded (NVRTC has no PTX input)."""
    t0 = time.perf_counter()
    nvcc = toolchain.find_nvcc()
    if nvcc:
        with tempfile.TemporaryDirectory(prefix="tile_cuda_") as d:
            ptx, _ = apply_ptx_rewrites(_nvcc_ptx(nvcc, src, arch, d))
            ptx_file, out = os.path.join(d, "fixed.ptx"), os.path.join(d, "kernel.cubin")
            with open(ptx_file, "w") as f:
                f.write(ptx)
            # nvcc hands a .ptx input to ptxas exactly as it does its own PTX (`nvcc -dryrun`)
            cmd = [nvcc, "-cubin", "-gencode", f"arch=compute_{arch[3:]},code={arch}", "-w", "-o", out, ptx_file]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError("ptxas failed:\n" + _errors_only(proc.stderr))
            with open(out, "rb") as f:
                blob = f.read()
        return blob, f"nvcc {toolchain.nvcc_version()}", time.perf_counter() - t0
    if toolchain.find_nvrtc():
        from tvm.support import nvcc as tvm_nvcc

        ptx, applied = apply_ptx_rewrites(
            bytes(tvm_nvcc.compile_cuda(src, target_format="ptx", arch=arch, compiler="nvrtc")).decode().rstrip("\x00")
        )
        if applied:  # cuModuleLoadData takes PTX text too (NUL-terminated)
            return ptx.encode() + b"\0", f"nvrtc (PTX: {', '.join(applied)})", time.perf_counter() - t0
        blob = tvm_nvcc.compile_cuda(src, target_format="cubin", arch=arch, compiler="nvrtc")
        return bytes(blob), "nvrtc", time.perf_counter() - t0
    raise TileCompileError(
        f"no CUDA compiler found: neither nvcc nor NVRTC. Fix: {toolchain.NVCC_FIX}  or  {toolchain.NVRTC_FIX}"
    )


def _nvcc_ptx(nvcc: str, src: str, arch: str, folder: str) -> str:
    """nvcc's PTX of the CUDA source `src` for `arch` ("sm_90a"), written and read in `folder`."""
    cu, out = os.path.join(folder, "kernel.cu"), os.path.join(folder, "kernel.ptx")
    with open(cu, "w") as f:
        f.write(src)
    proc = subprocess.run(
        [nvcc, "-ptx", f"-arch=compute_{arch[3:]}", *NVCC_FLAGS, "-o", out, cu], capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise RuntimeError("nvcc failed:\n" + _errors_only(proc.stderr))
    with open(out) as f:
        return f.read()


def _errors_only(stderr: str) -> str:
    """The error lines of nvcc's output (with the two lines that follow each), at most 3000 chars."""
    lines = stderr.splitlines()
    keep = []
    for i, line in enumerate(lines):
        if "error" in line or "fatal" in line:  # ptxas states its reason on a "fatal" line
            keep.extend(lines[i : i + 3])
    return ("\n".join(keep) or stderr)[-3000:]


def compile_ptx(src: str, arch: str) -> str:
    """The PTX that compile_cubin assembles for the kernel (nvcc's, rewritten by `ptx_fixes`),
    for inspection and tests."""
    nvcc = toolchain.find_nvcc()
    if nvcc is None:
        raise RuntimeError(f"no nvcc found. Fix: {toolchain.NVCC_FIX}")
    with tempfile.TemporaryDirectory(prefix="tile_cuda_") as d:
        return apply_ptx_rewrites(_nvcc_ptx(nvcc, src, arch, d))[0]
