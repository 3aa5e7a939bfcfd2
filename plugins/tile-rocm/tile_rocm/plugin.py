"""The tilecore backend "rocm": Tile IR -> TVM TIR (the SIMT toolkit) -> AMDGPU code object.

MFMA gemms and their row reductions (`mfma.py`), float64 math through OCML, the LDS-fenced
barrier and atomics (`intrinsics.py`, `device_lib.py`) are this plugin's lowering rules and
intrinsic table, registered through `tilecore_lowering_rules` / `tilecore_intrinsics`.

Registered through the entry point `rocm = "tile_rocm.plugin"` (group "tilecore").
Neither TVM nor torch is imported when the plugin registers; TVM is imported by
codegen only, and the launcher needs only the HIP runtime.
"""

from __future__ import annotations

from typing import Any, Dict

from tilecore.plugin import TileLangNames, hookimpl
from tilecore.plugin.backend import Artifact, Backend, Capabilities, ToolchainStatus, files_fingerprint, tvm_fingerprint

from . import __version__, toolchain

NAME = "rocm"
PRIORITY = 90  # preferred over cpu where an AMD GPU is present


def toolchain_status() -> ToolchainStatus:
    """ld.lld, the ROCm device bitcode, TVM, and the HIP runtime / GPU."""
    lld = toolchain.find_lld()
    root = toolchain.find_rocm_path()
    details = [("ld.lld", lld or "not found"), ("device libs", f"{root}/amdgcn/bitcode" if root else "not found")]
    # the GPU is named even without TVM: a host that runs prebuilt kernels (conformance bundles)
    # needs only the HIP runtime, and its certificate must say which GPU ran them
    gpu = toolchain.gpu_info()
    hip = toolchain.libhip()
    details.append(("HIP runtime", "found" if hip else "not found (needed only to run kernels)"))
    details.append(("gpu", gpu or "none present (kernels compile; running needs an AMD GPU)"))
    try:
        import importlib.metadata as md

        details.append(("apache-tvm", md.version("apache-tvm")))
    except Exception:
        return ToolchainStatus(
            ok=False,
            summary="apache-tvm is not installed (compiling needs it; prebuilt kernels run without it)",
            details=tuple(details),
            device=gpu,
            fix="pip install 'apache-tvm>=0.27,<0.28'",
        )
    missing, packages = [], []
    if not lld:
        missing.append(f"ld.lld (LLVM {toolchain.LLVM_MAJOR})")
        packages.append(f"lld-{toolchain.LLVM_MAJOR}")
    if not root:
        missing.append("ROCm device bitcode (amdgcn/bitcode)")
        packages.append("rocm-device-libs")
    if missing:
        fix = "apt-get install " + " ".join(packages) + "  (on a ROCm host: install ROCm and set ROCM_PATH)"
        return ToolchainStatus(
            ok=False, summary="missing " + " and ".join(missing), details=tuple(details), device=gpu, fix=fix
        )
    summary = f"ld.lld + device libs in {root}; " + (f"GPU {gpu}" if gpu else "no AMD GPU (compile only)")
    return ToolchainStatus(ok=True, summary=summary, details=tuple(details), device=gpu)


def make_backend() -> Backend:
    """The Backend declaration of tile-rocm."""
    from tilecore.ir.types import FP8_DTYPES
    from tilecore.ir.version import TILE_IR_VERSION
    from tilecore.language.features import ALL_FEATURES

    # fp8: held as uint8 bits with exact conversions by the shared SIMT lowering (tilecore.lowering.fp8)
    dtypes = frozenset(
        {"float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"}
        | set(FP8_DTYPES)
    )
    gemm = set()
    for a in ("float16", "bfloat16"):
        gemm |= {(a, "float32"), (a, a)}
    gemm |= {("float32", "float32"), ("float64", "float64"), ("int8", "int32")}
    # no fp8 gemm: the portable dot product over decoded fp8 operands takes LLVM's AMDGPU backend minutes
    # to compile for a 64x64 tile (every k step unrolled); fp8 gemms get a clear unsupported error
    return Backend(
        name=NAME,
        targets=(NAME,) + tuple(f"{NAME}:{a}" for a in toolchain.ARCHS),
        ir_versions=(TILE_IR_VERSION,),
        capabilities=Capabilities(
            # while: the shared SIMT lowering
            features=frozenset(ALL_FEATURES - {"print"} | {"while_loop", "parallel_while"}),
            dtypes=dtypes,
            gemm_dtypes=frozenset(gemm),
            max_shared_memory=64 * 1024,
            max_fragment_memory=256 * 4 * 1024,  # 256 VGPRs of 4 bytes for up to 1024 threads
            max_threads=1024,
            warp_size=64,
            vector_bytes=16,
            memory_space="rocm",
            tiers=("execute", "compile") if toolchain.device_present() else ("compile",),
        ),
        toolchain_status=toolchain_status,
        device_present=toolchain.device_present,
        distribution="tile-rocm",
        version=__version__,
        priority=PRIORITY,
        description="AMD GPUs through TVM's LLVM AMDGPU codegen (MFMA on gfx90a/gfx942/gfx950), HIP runtime",
        toolchain_fingerprint=lambda: (
            tvm_fingerprint() + ";" + files_fingerprint([toolchain.find_lld() or "", toolchain.find_rocm_path() or ""])
        ),
        tilelang=TileLangNames(targets=("hip",)),  # TileLang's `target="hip"` means this backend
    )


@hookimpl
def tilecore_register_backends(register):
    """Declare the backend "rocm"."""
    register(make_backend())


@hookimpl
def tilecore_lowering_rules(backend, rules):
    """tile-rocm's rules: MFMA gemms, then row reductions of MFMA tiles."""
    if backend.name != NAME:
        return
    from .mfma import MfmaGemm, MfmaRowReduce

    rules.add("Gemm", MfmaGemm())
    rules.add("Reduce", MfmaRowReduce())


@hookimpl
def tilecore_intrinsics(backend, table):
    """ROCm math (TVM's ops on the device libraries, float64 through __ocml_*_f64), the
    workgroup barrier and atomics through tile-rocm's helper library."""
    if backend.name != NAME:
        return
    from .intrinsics import rocm_intrinsics

    for key, impl in rocm_intrinsics().items():
        table.setdefault(key, impl)


def _grid_py(expr) -> str:
    """A Tile IR grid expression as Python source over the bindings dict `b`."""
    from tilecore.lowering.launch_grid import grid_expr_source

    return grid_expr_source(expr)


@hookimpl
def tilecore_codegen(backend, module, options):
    """Lower, build the AMDGPU code object with TVM; the Artifact holds assembly and the hsaco."""
    if backend.name != NAME:
        return None
    from tilecore.diagnostics import TileCompileError
    from tilecore.plugin.rules import collect_lowering_tables

    from . import compiler

    func = module.func
    options = dict(options or {})
    try:
        arch = toolchain.parse_target(module.target or options.get("target") or NAME)
    except ValueError as err:
        raise TileCompileError(str(err), func.span, func.source) from err
    code_object, asm, ll, lk, secs = compiler.build(func, arch, options, collect_lowering_tables(backend))
    args = compiler.kernel_args(asm)
    meta: Dict[str, Any] = {
        "arch": arch,
        "kernel_symbol": compiler.kernel_symbol(asm),
        "kernel_args": args,
        "kernarg_size": compiler.kernarg_segment_size(asm),
        "params": [p.name for p in func.params],
        "threads": lk.threads,
        "lds_bytes": lk.dyn_smem_bytes,
        "dyn_lds_bytes": 0,
        "grid_py": [_grid_py(g) for g in lk.grid],
        "wave_size": toolchain.wave_size(arch),
        "compile_seconds": round(secs, 3),
        "storage": dict(lk.plan.storage),
        "notes": lk.notes,
    }
    return Artifact(
        backend=NAME,
        target=f"{NAME}:{arch}",
        entry=func.name,
        source=asm,
        blobs={"hsaco": code_object, "llvm_ir": ll.encode()},
        meta=meta,
    )


@hookimpl
def tilecore_launcher(backend, artifact):
    """A `launch(args, bindings)` through the HIP runtime; raises a clear error where no AMD GPU is."""
    if backend.name != NAME:
        return None
    from .launcher import RocmKernelLauncher

    return RocmKernelLauncher(artifact)
