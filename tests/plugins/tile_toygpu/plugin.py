"""The backend "toygpu": Tile IR -> the SIMT lowering toolkit with toygpu's rules -> GPU C source.

A vendor's view of the toolkit: the plugin fills in a `TargetDescription`, adds one
Gemm rule and one math intrinsic through the hooks, and lets the toolkit's portable
lowering do everything else. TVM's CUDA C emitter writes the source (toygpu speaks
a CUDA C dialect); there is no toygpu device, so the backend certifies at the
compile tier: a kernel passes when its source is generated and structurally sound.
"""

from __future__ import annotations

import re

from tilecore.plugin import hookimpl
from tilecore.plugin.backend import Artifact, Backend, Capabilities, ToolchainStatus

from . import __version__

NAME = "toygpu"
DTYPES = ("float16", "bfloat16", "float32", "int8", "int32")


def toolchain_status() -> ToolchainStatus:
    """TVM is toygpu's whole toolchain."""
    try:
        import importlib.metadata as md

        version = md.version("apache-tvm")
    except Exception:
        return ToolchainStatus(
            ok=False, summary="apache-tvm is not installed", fix="pip install 'apache-tvm>=0.27,<0.28'"
        )
    return ToolchainStatus(
        ok=True, summary=f"TVM {version} (source only; no toygpu device)", details=(("apache-tvm", version),)
    )


def make_backend() -> Backend:
    """toygpu: 32-thread warps, 48 KB of shared memory, no atomics or printf, compile tier."""
    from tilecore.ir.version import TILE_IR_VERSION
    from tilecore.language.features import ALL_FEATURES

    features = frozenset(f for f in ALL_FEATURES if not f.startswith("dtype:") and f not in ("print", "atomic"))
    return Backend(
        name=NAME,
        targets=(NAME,),
        ir_versions=(TILE_IR_VERSION,),
        capabilities=Capabilities(
            features=features | {f"dtype:{d}" for d in DTYPES},
            dtypes=frozenset(DTYPES),
            gemm_dtypes=frozenset({("float16", "float32"), ("bfloat16", "float32"), ("float32", "float32")}),
            max_shared_memory=48 * 1024,
            max_fragment_memory=64 * 1024,
            max_threads=1024,
            warp_size=32,
            vector_bytes=16,
            memory_space="toygpu",
            tiers=("compile",),
        ),
        toolchain_status=toolchain_status,
        distribution="tile-toygpu",
        version=__version__,
        description="a toy SIMT GPU on tilecore's lowering toolkit (test plugin)",
    )


def target_description():
    """toygpu's `TargetDescription`: one static shared allocation per tile, bool tiles in int8."""
    from tilecore.lowering.target import TargetDescription

    return TargetDescription(
        name=NAME,
        arch="toy1",
        tvm_target={"kind": "cuda", "arch": "sm_80"},
        warp_size=32,
        max_shared_memory=48 * 1024,
        shared_scope="shared",
        shared_pool=False,
        max_vector_lanes=4,
        max_vector_element_bytes=4,
        bool_storage="int8",
    )


@hookimpl
def tilecore_register_backends(register):
    """Declare the backend "toygpu"."""
    register(make_backend())


@hookimpl
def tilecore_lowering_rules(backend, rules):
    """toygpu's Gemm rule (in front of the toolkit's portable gemm)."""
    if backend.name != NAME:
        return
    from .rules import OuterProductGemm

    rules.add("Gemm", OuterProductGemm())


@hookimpl
def tilecore_intrinsics(backend, table):
    """toygpu's tanh (float32) from exp."""
    if backend.name != NAME:
        return
    from .rules import toy_tanh

    table.setdefault(("tanh", "float32"), toy_tanh)


@hookimpl
def tilecore_codegen(backend, module, options):
    """Lower with the toolkit and emit GPU C source; the source must declare exactly one kernel."""
    if backend.name != NAME:
        return None
    import tvm

    from tilecore.diagnostics import TileCompileError
    from tilecore.lowering.launch_grid import grid_expr_source
    from tilecore.lowering.simt import lower_kernel, register_simt_pipeline
    from tilecore.plugin.rules import collect_lowering_tables

    func = module.func
    rules, intrinsics = collect_lowering_tables(backend)
    target = target_description()
    lk = lower_kernel(func, target, rules, intrinsics, options)
    try:
        lib = tvm.compile(
            tvm.IRModule({func.name: lk.prim_func}),
            target=dict(target.tvm_target),
            tir_pipeline=register_simt_pipeline(),
        )
        src = [m for m in lib.mod.imports if m.kind == "cuda"][0].inspect_source()
    except Exception as err:
        msg = str(err).strip().splitlines()
        raise TileCompileError(
            f"backend toygpu could not generate code for kernel {func.name!r}: "
            f"{msg[-1] if msg else type(err).__name__}",
            func.span,
            func.source,
        ) from err
    kernels = set(re.findall(r"__global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(", src))
    if len(kernels) != 1:
        raise TileCompileError(
            f"backend toygpu generated {len(kernels)} kernels for {func.name!r}", func.span, func.source
        )
    meta = {
        "threads": lk.threads,
        "grid_py": [grid_expr_source(g) for g in lk.grid],
        "notes": lk.notes,
        "rules": lk.rules,
        "storage": dict(lk.plan.storage),
    }
    return Artifact(backend=NAME, target=NAME, entry=func.name, source=src, meta=meta)


@hookimpl
def tilecore_launcher(backend, artifact):
    """toygpu has no device: running a kernel is a clear error."""
    if backend.name != NAME:
        return None
    from tilecore.diagnostics import TileRuntimeError

    def launch(args, bindings):
        raise TileRuntimeError("toygpu is a compile-tier backend: there is no toygpu device to run on")

    return launch
