"""The tilecore backend "metal": Tile IR -> TVM TIR (the SIMT toolkit) -> Metal Shading Language.

`T.gemm` on simdgroup matrices and the MSL atomics (`simdgroup.py`) are this plugin's
lowering rule and intrinsic table, registered through `tilecore_lowering_rules` /
`tilecore_intrinsics`.

Registered through the entry point `metal = "tile_metal.plugin"` (group "tilecore").
TVM is imported by codegen only. Here (Linux, no Apple GPU) the backend is
certified at the compile (source) tier: MSL is generated and structurally checked.
"""

from __future__ import annotations

import sys
from typing import Any, Dict

from tilecore.plugin import hookimpl
from tilecore.plugin.backend import Artifact, Backend, Capabilities, ToolchainStatus, tvm_fingerprint

from . import __version__
from .launcher import device_present

NAME = "metal"
PRIORITY = 80


def toolchain_status() -> ToolchainStatus:
    """TVM's Metal codegen (always present with apache-tvm) and, on macOS, the Metal device."""
    # the device is named even without TVM: a host that runs prebuilt kernels needs no compiler
    dev = "Apple GPU (torch MPS)" if device_present() else None
    details = [("platform", sys.platform)]
    details.append(("gpu", dev or "none (MSL is generated and checked; running needs macOS with an Apple GPU)"))
    try:
        import importlib.metadata as md

        details.append(("apache-tvm", md.version("apache-tvm")))
    except Exception:
        return ToolchainStatus(
            ok=False,
            summary="apache-tvm is not installed (compiling needs it)",
            details=tuple(details),
            device=dev,
            fix="pip install 'apache-tvm>=0.27,<0.28'",
        )
    summary = "TVM Metal codegen; " + (f"GPU {dev}" if dev else "no Metal device (source only)")
    return ToolchainStatus(ok=True, summary=summary, details=tuple(details), device=dev)


def make_backend() -> Backend:
    """The Backend declaration of tile-metal."""
    from tilecore.ir.version import TILE_IR_VERSION
    from tilecore.language.features import ALL_FEATURES

    # Metal has no float64; int64 arithmetic exists in MSL. No fp8: the shared SIMT lowering
    # rounds an int32 / int64 into fp8 through float64 (exactly once), which MSL cannot spell
    # (conformance 0.3.0, seed 28282: "Cannot convert type float64 to Metal type")
    dtypes = frozenset({"float16", "bfloat16", "float32", "int8", "int16", "int32", "int64", "uint8", "bool"})
    opt_in = {"while_loop", "parallel_while"}  # through the shared SIMT lowering
    features = frozenset(f for f in ALL_FEATURES if f not in ("print", "dtype:float64")) | opt_in
    gemm = {
        ("float16", "float32"),
        ("float16", "float16"),
        ("float32", "float32"),
        ("bfloat16", "float32"),
        ("bfloat16", "bfloat16"),
        ("int8", "int32"),
    }
    return Backend(
        name=NAME,
        targets=(NAME,),
        ir_versions=(TILE_IR_VERSION,),
        capabilities=Capabilities(
            features=features,
            dtypes=dtypes,
            gemm_dtypes=frozenset(gemm),
            max_shared_memory=32 * 1024,
            max_fragment_memory=64 * 1024,
            max_threads=1024,
            warp_size=32,
            vector_bytes=16,
            memory_space="metal",
            tiers=("execute", "compile") if device_present() else ("compile",),
        ),
        toolchain_status=toolchain_status,
        device_present=device_present,
        distribution="tile-metal",
        version=__version__,
        priority=PRIORITY,
        description="Apple GPUs through TVM's Metal Shading Language codegen; simdgroup_matrix gemm",
        toolchain_fingerprint=tvm_fingerprint,
    )


@hookimpl
def tilecore_register_backends(register):
    """Declare the backend "metal"."""
    register(make_backend())


@hookimpl
def tilecore_lowering_rules(backend, rules):
    """tile-metal's rule: T.gemm on simdgroup matrices (also the fills and copies of the
    accumulators it holds in simdgroup registers)."""
    if backend.name != NAME:
        return
    from .simdgroup import SimdgroupGemm

    rule = SimdgroupGemm()
    for op in ("Gemm", "Fill", "Copy"):
        rules.add(op, rule)


@hookimpl
def tilecore_intrinsics(backend, table):
    """tile-metal's atomics (helpers that the codegen prepends to the MSL)."""
    if backend.name != NAME:
        return
    from .simdgroup import metal_intrinsics

    for key, impl in metal_intrinsics().items():
        table.setdefault(key, impl)


def _grid_py(expr) -> str:
    """A Tile IR grid expression as Python source over the bindings dict `b`."""
    from tilecore.lowering.launch_grid import grid_expr_source

    return grid_expr_source(expr)


@hookimpl
def tilecore_codegen(backend, module, options):
    """Lower and generate MSL with TVM; the source is structurally checked before it is returned."""
    if backend.name != NAME:
        return None
    from tilecore.diagnostics import TileCompileError
    from tilecore.plugin.rules import collect_lowering_tables

    from . import compiler

    func = module.func
    src, lk, secs = compiler.generate(func, dict(options or {}), collect_lowering_tables(backend))
    params = [p.name for p in func.params]
    problems = compiler.check(src, lk.threads, params)
    if problems:
        raise TileCompileError(
            f"backend metal generated unsound MSL for {func.name!r}: " + "; ".join(problems), func.span, func.source
        )
    name = compiler.kernels(src)[0][0]
    meta: Dict[str, Any] = {
        "kernel_symbol": name,
        "params": params,
        "bound_params": compiler.bound_tensors(src),
        "scalar_params": [v.name for v in func.dyn_vars],
        "threads": lk.threads,
        "threadgroup_memory": compiler.threadgroup_memory(src),
        "grid_py": [_grid_py(g) for g in lk.grid],
        "compile_seconds": round(secs, 3),
        "simdgroup_matrix": "simdgroup_multiply_accumulate" in src,
        "storage": dict(lk.plan.storage),
        "notes": lk.notes,
    }
    return Artifact(backend=NAME, target=NAME, entry=func.name, source=src, meta=meta)


@hookimpl
def tilecore_launcher(backend, artifact):
    """A `launch(args, bindings)` through torch MPS on macOS; a clear error elsewhere."""
    if backend.name != NAME:
        return None
    from .launcher import MetalKernelLauncher

    return MetalKernelLauncher(artifact)
