"""Tile IR -> TVM TIR (the SIMT toolkit with tile-rocm's rules) -> AMDGPU code object (TVM's ROCm
target + ld.lld)."""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from typing import TYPE_CHECKING, Any, Dict, List, Tuple, Union

if TYPE_CHECKING:
    import subprocess

from tilecore.diagnostics import TileCompileError

from . import toolchain
from .target import tvm_target

_lock = threading.Lock()
_captured: List[bytes] = []


def _install_link_capture():
    """Wrap TVM's ROCm link callback so the linked code object (hsaco) can be kept in the artifact,
    and add the atomics helper library to the bitcode TVM links into every kernel."""
    import tvm_ffi
    from tvm.support import rocm as tvm_rocm

    def link(obj_bin):
        code_object = tvm_rocm.callback_rocm_link(obj_bin)
        _captured.append(bytes(code_object))
        return code_object

    tvm_ffi.register_global_func("tvm_callback_rocm_link", link, override=True)

    def bitcode(rocdl_dir=None):
        from .device_lib import library_path

        return list(tvm_rocm.callback_rocm_bitcode_path(rocdl_dir)) + [library_path()]

    tvm_ffi.register_global_func("tvm_callback_rocm_bitcode_path", bitcode, override=True)


# TVM's device queries that cannot succeed on a machine without an AMD GPU
_HARMLESS = ("Unable to detect ROCm version", "Cannot get maximum number of threads for AMD codegen")
_FILTER_CODE = """
import sys
harmless = [h.encode() for h in sys.argv[1:]]
for line in sys.stdin.buffer:
    if not any(h in line for h in harmless):
        sys.stderr.buffer.write(line)
        sys.stderr.buffer.flush()
"""
_filter: Union["subprocess.Popen[bytes]", bool, None] = None  # None: not started; False: unavailable


def _stderr_filter_fd():
    """Write end of a pipe into a small filter process that passes on everything native code
    writes to stderr except the harmless warnings. Being a separate process, it still delivers
    a message that LLVM prints right before it ends this process (fatal errors)."""
    global _filter
    if _filter is None:
        import subprocess
        import sys

        try:
            _filter = (
                subprocess.Popen(
                    [sys.executable, "-c", _FILTER_CODE, *_HARMLESS], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL
                )
                if sys.executable
                else False
            )
        except (OSError, ValueError, TypeError):
            _filter = False
    if isinstance(_filter, bool) or _filter is None or _filter.stdin is None:
        return None
    return _filter.stdin.fileno()


@contextlib.contextmanager
def _quiet_native_stderr():
    """Hide TVM's harmless C++ warnings ("Unable to detect ROCm version", ...) during a build;
    TILECORE_ROCM_VERBOSE=1 shows everything unfiltered."""
    if os.environ.get("TILECORE_ROCM_VERBOSE"):
        yield
        return
    target = _stderr_filter_fd()
    if target is None:
        yield
        return
    saved = os.dup(2)
    os.dup2(target, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def default_tables():
    """(rules, intrinsics) of the installed plugins for the backend "rocm"."""
    from tilecore.plugin.registry import get_registry
    from tilecore.plugin.rules import collect_lowering_tables

    backend, _ = get_registry().resolve("rocm")
    return collect_lowering_tables(backend)


def lower(func, arch: str, options: Dict[str, Any], tables=None):
    """The LoweredKernel (TIR PrimFunc, launch shape, plan) of `func` for `arch`, with the rule and
    intrinsic `tables` (default: those the installed plugins contribute)."""
    from tilecore.lowering.simt import lower_kernel

    from .target import rocm_target

    rules, intrinsics = tables if tables is not None else default_tables()
    return lower_kernel(func, rocm_target(arch, options), rules, intrinsics, options)


def build(func, arch: str, options: Dict[str, Any], tables=None):
    """Compile `func`; returns (code object bytes, AMDGPU assembly, LLVM IR, LoweredKernel, seconds)."""
    import tvm

    from tilecore.lowering.simt import register_simt_pipeline

    t0 = time.perf_counter()
    if toolchain.configure_environment() is None:
        raise TileCompileError(
            f"backend rocm: the ROCm device libraries were not found. Fix: {toolchain.BITCODE_FIX}",
            func.span,
            func.source,
        )
    if toolchain.find_lld() is None:
        raise TileCompileError(
            f"backend rocm: ld.lld (LLVM {toolchain.LLVM_MAJOR}) was not found. Fix: {toolchain.LLD_FIX}",
            func.span,
            func.source,
        )
    lk = lower(func, arch, options, tables)
    with _lock:
        _install_link_capture()
        _captured.clear()
        try:
            with _quiet_native_stderr():
                lib = tvm.compile(
                    tvm.IRModule({func.name: lk.prim_func}),
                    target=tvm_target(arch),
                    tir_pipeline=register_simt_pipeline(),
                )
        except TileCompileError:
            raise
        except Exception as err:
            msg = str(err).strip().splitlines()
            raise TileCompileError(
                f"backend rocm could not generate code for kernel {func.name!r} "
                f"({arch}): {msg[-1] if msg else type(err).__name__}",
                func.span,
                func.source,
            ) from err
        if len(_captured) != 1:
            raise TileCompileError(
                f"backend rocm: expected one code object from TVM, got {len(_captured)}", func.span, func.source
            )
        code_object = _captured[0]
    dev = [m for m in lib.mod.imports if m.kind == "hip"][0]
    asm = str(dev.inspect_source("asm"))
    ll = str(dev.inspect_source())
    return code_object, asm, ll, lk, time.perf_counter() - t0


_KERNEL = re.compile(r"^\s*\.globl\s+(\w+)", re.M)
_ARG = re.compile(r"\.name:\s+(\S+)\s*\n\s*\.offset:\s+(\d+)\s*\n\s*\.size:\s+(\d+)\s*\n\s*\.value_kind:\s+(\w+)")


def kernel_symbol(asm: str) -> str:
    m = _KERNEL.search(asm)
    if not m:
        raise RuntimeError("the AMDGPU assembly has no kernel symbol")
    return m.group(1)


def kernarg_segment_size(asm: str) -> int:
    """Bytes of the kernel argument segment (includes any hidden arguments) from the metadata."""
    m = re.search(r"\.kernarg_segment_size:\s+(\d+)", asm)
    if not m:
        raise RuntimeError("the AMDGPU metadata has no .kernarg_segment_size")
    return int(m.group(1))


def kernel_args(asm: str) -> List[Tuple[str, str, int, int]]:
    """(name, kind "ptr"/"int32"/"int64", offset, size) of each kernel argument, from the code object metadata."""
    out = []
    for name, off, size, kind in _ARG.findall(asm):
        if kind == "global_buffer":
            out.append((name, "ptr", int(off), int(size)))
        elif kind == "by_value":
            out.append((name, "int64" if size == "8" else "int32", int(off), int(size)))
    return out
