"""tilecore plugin hooks of the reference NPU backend (entry point `npu = "tile_npu.plugin"`)."""

from __future__ import annotations

import dataclasses

from tilecore.plugin import Option, hookimpl
from tilecore.plugin.backend import Artifact, Backend, Capabilities, ToolchainStatus

from . import __version__
from .arch import DEFAULT_CONFIG, FP8_DTYPES, MATRIX_FORMATS, VECTOR_DTYPES, NPUConfig

NAME = "npu"

# What the hardware model lacks, and therefore what the backend does not declare:
#   dtype:float64, dtype:int64 -- the vector engine has 32-bit lanes and the matrix
#   engine no 64-bit formats; emulating them would not be this NPU.
UNSUPPORTED = {
    "dtype:float64": "the vector engine's lanes are 32 bits wide; there is no fp64 datapath",
    "dtype:int64": "the vector engine's lanes are 32 bits wide; there is no 64-bit integer datapath",
}


def _build_id() -> str:
    """Version plus a hash of the compiler's sources, so an edited checkout never reuses stale cache."""
    import hashlib
    import pathlib

    h = hashlib.sha256()
    here = pathlib.Path(__file__).parent
    for f in sorted(here.rglob("*.py")):  # the codegen package included
        h.update(str(f.relative_to(here)).encode())
        h.update(f.read_bytes())
    return f"{__version__}+{h.hexdigest()[:10]}"


def gemm_dtype_pairs() -> frozenset:
    """(input dtype, accumulator dtype) pairs of the matrix engine."""
    return frozenset((a, c) for a, (accs, _) in MATRIX_FORMATS.items() for c in accs)


def make_backend() -> Backend:
    """The Backend declaration of the NPU."""
    from tilecore.ir.version import TILE_IR_VERSION
    from tilecore.language.features import ALL_FEATURES

    cfg = DEFAULT_CONFIG
    return Backend(
        name=NAME,
        targets=(NAME,),
        ir_versions=(TILE_IR_VERSION,),
        capabilities=Capabilities(
            features=frozenset(ALL_FEATURES | {"while_loop", "parallel_while"}) - frozenset(UNSUPPORTED),
            # int4: the core pass int4_storage hands the NPU packed int8 tensors and int8 tiles
            dtypes=frozenset(VECTOR_DTYPES) | {"int4"},
            gemm_dtypes=gemm_dtype_pairs(),
            max_shared_memory=cfg.scratchpad_bytes,
            max_fragment_memory=cfg.scratchpad_bytes,
            max_threads=None,
            warp_size=1,
            vector_bytes=cfg.vector_lanes * 4,
            memory_space="cpu",  # the simulator's DRAM is host memory
            tiers=("execute",),
        ),
        toolchain_status=toolchain_status,
        device_present=lambda: True,
        distribution="tile-npu",
        version=_build_id(),
        priority=-100,  # a simulator: never the default over real hardware
        description="reference NPU: own ISA and compiler, cycle-approximate simulator",
        options=tuple(
            Option(f.name, type(f.default), f.default, "NPUConfig." + f.name) for f in dataclasses.fields(NPUConfig)
        ),
    )


def toolchain_status() -> ToolchainStatus:
    import numpy as np

    cfg = DEFAULT_CONFIG
    return ToolchainStatus(
        ok=True,
        summary=f"built-in compiler and simulator (numpy {np.__version__})",
        details=(
            ("cores", str(cfg.cores)),
            ("scratchpad", f"{cfg.scratchpad_bytes // 1024} KiB/core"),
            ("matrix engine", f"{cfg.matrix_tile}x{cfg.matrix_tile}x{cfg.matrix_tile}"),
            ("vector engine", f"{cfg.vector_lanes} lanes"),
        ),
        device=f"simulated NPU ({cfg.cores} cores)",
    )


@hookimpl
def tilecore_register_backends(register):
    """Declare the `npu` backend."""
    register(make_backend())


@hookimpl
def tilecore_lowering_rules(backend, rules):
    """Default lowering of each tile op (a method of tile_npu.compiler.Codegen); others may override."""
    if backend.name != NAME:
        return
    from .compiler import default_rules

    for name, rule in default_rules().items():
        rules.setdefault(name, rule)


@hookimpl
def tilecore_intrinsics(backend, table):
    """Math functions of the vector engine / scalar unit, per dtype."""
    if backend.name != NAME:
        return
    from tilecore.ir.nodes import MATH_FUNCS

    for f in MATH_FUNCS:
        for dt in VECTOR_DTYPES:
            if dt != "bool" and dt not in FP8_DTYPES:  # (math on fp8 values is computed in float32)
                table.setdefault((f, dt), f"vun.{f}")


def _collect_rules(backend):
    from tilecore.plugin.manager import get_plugin_manager

    from .compiler import default_rules

    rules: dict = {}
    try:
        get_plugin_manager().hook.tilecore_lowering_rules(backend=backend, rules=rules)
    except Exception:  # noqa: BLE001 - a broken third-party rule set must not hide ours
        rules = {}
    for name, rule in default_rules().items():
        rules.setdefault(name, rule)
    return rules


@hookimpl
def tilecore_codegen(backend, module, options):
    """Compile the Tile IR to an NPU object; the artifact's source is its assembly."""
    if backend.name != NAME:
        return None
    from .compiler import Codegen
    from .isa import disassemble

    cfg = DEFAULT_CONFIG.with_options(options)
    cg = Codegen(module.func, module.analyses, cfg, rules=_collect_rules(backend))
    prog = cg.run()
    return Artifact(
        backend=NAME,
        target=module.target,
        entry=module.func.name,
        source=disassemble(prog),
        blobs={"program": prog.to_bytes()},
        meta={
            "config": dataclasses.asdict(cfg),
            "dyn_vars": [v.name for v in module.func.dyn_vars],
            "instructions": len(prog.instrs),
            "scratchpad_bytes_used": max((s.base + s.nbytes for s in prog.segments), default=0),
        },
    )


@hookimpl
def tilecore_launcher(backend, artifact):
    """A callable running the artifact on the simulator (`.last_report`: cycles per launch)."""
    if backend.name != NAME:
        return None
    from .launcher import NPULauncher

    return NPULauncher(artifact.blobs["program"], artifact.meta.get("config"), artifact.meta.get("dyn_vars", ()))


@hookimpl
def tilecore_timer(backend):
    """The profiler times NPU kernels in simulated cycles (see timing.py)."""
    if backend.name != NAME:
        return None
    from .timing import SimulatedCyclesTimer

    return SimulatedCyclesTimer()
