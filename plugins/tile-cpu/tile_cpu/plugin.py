"""The tilecore backend "cpu": Tile IR -> TVM TIR -> LLVM for the host CPU.

Registered through the entry point `cpu = "tile_cpu.plugin"` in the group
"tilecore". TVM is imported only inside codegen, the launcher and
toolchain_status, never when the plugin registers.
"""

from __future__ import annotations

import shutil
from typing import Any, Dict

from tilecore.plugin import Option, TileLangNames, hookimpl
from tilecore.plugin.backend import Artifact, Backend, Capabilities, ToolchainStatus, host_memory_bytes

from . import __version__

NAME = "cpu"
# named CPUs for cross-compilation; any other `cpu:<mcpu>[,+feat,-feat]` LLVM knows works too
CROSS_TARGETS = ("cpu:znver3", "cpu:sapphirerapids", "cpu:neoverse-v2")
PRIORITY = 0  # the default where no accelerator backend has a device
OPTIONS = (Option("source", str, "llvm", "what kernel.source shows", choices=("llvm", "asm")),)
# Per-block shared + fragment storage is allocated on the worker's stack or heap for every block;
# beyond this a kernel is almost surely a mistake (and would exhaust memory with many threads).
MAX_BLOCK_MEMORY = 256 << 20


def _gemm_dtype_pairs() -> frozenset:
    pairs = set()
    for a in ("float16", "bfloat16", "float32", "float64"):
        for acc in {a, "float32", "float64"}:
            pairs.add((a, acc))
    for a in ("int8", "uint8", "int16", "int32"):
        pairs.add((a, "int32"))
        pairs.add((a, "int64"))
    pairs.add(("int64", "int64"))
    for a in ("float8_e4m3fn", "float8_e5m2"):  # products of fp8 values are exact in float32
        pairs.update({(a, "float32"), (a, "float64")})
    return frozenset(pairs)


def host_fingerprint() -> str:
    """A short hash of the host CPU's model and features, without importing TVM.

    Kernels are compiled for the host CPU (`mcpu`); the fingerprint is part of
    the backend version and hence of the cache key, so a cache shared between
    machines never hands one CPU's code to another.
    """
    import hashlib
    import platform

    text = platform.machine() + platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("model name", "flags", "Features", "CPU part")):
                    text += line
                if line.strip() == "":
                    break  # the first processor describes them all
    except OSError:
        pass
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def toolchain_status() -> ToolchainStatus:
    """TVM, LLVM version and target triple, and the C compiler that links kernels."""
    try:
        from .build import compiler, host_info

        info = host_info()
    except Exception as err:  # TVM missing or broken
        return ToolchainStatus(
            ok=False,
            summary=f"apache-tvm is not usable: {err}",
            device="host CPU",  # prebuilt kernels still run here
            fix="pip install 'apache-tvm>=0.27,<0.28'",
        )
    cc = compiler()
    details = (
        ("tvm", info["tvm"]),
        ("llvm", info["llvm"]),
        ("target triple", info["triple"]),
        ("cpu", info["cpu"]),
        ("vector bits", str(info["vector_bits"])),
        ("linker", cc or "missing"),
    )
    summary = f"TVM {info['tvm']}, LLVM {info['llvm']}, {info['triple']} ({info['cpu']})"
    if cc is None:
        return ToolchainStatus(
            ok=False,
            summary=summary + "; no C compiler to link kernels",
            details=details,
            device="host CPU",
            fix="install a C compiler (apt-get install gcc)",
        )
    return ToolchainStatus(ok=True, summary=summary, details=details, device="host CPU")


def toolchain_fingerprint() -> str:
    """TVM's libraries (LLVM is linked into libtvm) and the C compiler that links kernels."""
    from tilecore.plugin.backend import files_fingerprint, tvm_fingerprint

    from .build import compiler

    return tvm_fingerprint() + ";" + files_fingerprint([compiler() or "no C compiler"])


def make_backend() -> Backend:
    """The Backend declaration of tile-cpu."""
    from tilecore.ir.types import DTYPES
    from tilecore.ir.version import TILE_IR_VERSION
    from tilecore.language.features import ALL_FEATURES

    return Backend(
        name=NAME,
        targets=(NAME,) + CROSS_TARGETS,
        ir_versions=(TILE_IR_VERSION,),
        capabilities=Capabilities(
            features=frozenset(ALL_FEATURES | {"while_loop", "parallel_while"}),
            dtypes=frozenset(DTYPES),
            gemm_dtypes=_gemm_dtype_pairs(),
            max_shared_memory=MAX_BLOCK_MEMORY,  # per-block storage lives in ordinary memory
            max_fragment_memory=MAX_BLOCK_MEMORY,
            max_threads=None,
            warp_size=1,
            vector_bytes=64,
            memory_space="cpu",
            tiers=("execute",),
            # host memory; flat offsets of tensors past 2^31 elements are int64 (TirLowering.shape_of)
            max_tensor_bytes=host_memory_bytes(),
        ),
        toolchain_status=toolchain_status,
        device_present=lambda: shutil.which("cc") is not None or shutil.which("gcc") is not None,
        distribution="tile-cpu",
        version=f"{__version__}+host.{host_fingerprint()}",
        priority=PRIORITY,
        description="host CPU through TVM's LLVM code generator; blocks run on TVM's thread pool",
        options=OPTIONS,
        toolchain_fingerprint=toolchain_fingerprint,
        tilelang=TileLangNames(targets=("c", "llvm")),  # TileLang's host targets mean this backend
    )


@hookimpl
def tilecore_register_backends(register):
    """Declare the backend "cpu"."""
    register(make_backend())


@hookimpl
def tilecore_intrinsics(backend, table):
    """The CPU's math table: TVM's ops, with vectorizable float32 exp/exp2/tanh/sigmoid."""
    if backend.name != NAME:
        return
    from tilecore.lowering.intrinsics import default_table, vectorizable_table

    # setdefault: an entry another plugin put there wins, whichever hook runs first
    for key, impl in vectorizable_table().items():
        table.setdefault(key, impl)
    for key, impl in _libm_tanh_table().items():
        table.setdefault(key, impl)
    for key, impl in default_table().items():
        table.setdefault(key, impl)


def _libm_tanh_table() -> Dict:
    """tanh for float64, float16 and bfloat16 through the C library's tanh / tanhf.

    TVM's own tanh, (1 - e^-2x) / (1 + e^-2x), cancels near 0: absolute rather
    than relative accuracy (tanh(1e-8) came out 0 in bfloat16 and hundreds of
    ulp off in float64 in the conformance math sweeps). float32 has its own
    vectorizable entry.
    """
    from tvm import tirx as tx

    def narrow(dtype):
        return lambda args: tx.Cast(dtype, tx.call_pure_extern("float32", "tanhf", tx.Cast("float32", args[0])))

    return {
        ("tanh", "float64"): "extern:tanh",
        ("tanh", "float16"): narrow("float16"),
        ("tanh", "bfloat16"): narrow("bfloat16"),
    }


def _collect(hook_name: str, backend) -> Dict:
    """Run a dict-filling hook of every plugin for `backend` (third parties may override)."""
    from tilecore.plugin import get_plugin_manager

    out: Dict = {}
    what = f"for backend {backend.name!r}"
    if hook_name == "tilecore_intrinsics":
        get_plugin_manager().call(hook_name, what=what, backend=backend, table=out)
    else:
        get_plugin_manager().call(hook_name, what=what, backend=backend, rules=out)
    return out


@hookimpl
def tilecore_codegen(backend, module, options):
    """Lower, compile with LLVM, and package the shared library into an Artifact."""
    if backend.name != NAME:
        return None
    from tilecore.diagnostics import TileCompileError
    from tilecore.lowering.intrinsics import IntrinsicTable

    from .build import build_shared_library, target_info
    from .lower import CpuLowering
    from .target import CpuTargetError

    func = module.func
    try:
        info = target_info(module.target)
    except CpuTargetError as err:
        raise TileCompileError(str(err), func.span, func.source) from None
    table = IntrinsicTable(_collect("tilecore_intrinsics", backend))
    rules = _collect("tilecore_lowering_rules", backend)
    lowering = CpuLowering(
        func,
        table,
        vector_bits=info["vector_bits"],
        rules=rules,
        vector_regs=info["vector_regs"],
        caches=info["caches"],
        arch=info["arch"],
        features=info["features"],
    )
    prim = lowering.lower_function()
    try:
        blob, llvm_ir, asm = build_shared_library(
            prim, func.name, info, with_support=lowering.needs_support, natives=sorted(lowering.native)
        )
    except TileCompileError:
        raise
    except Exception as err:
        # never let a TVM traceback reach the user: name the kernel and the stage
        raise TileCompileError(
            f"backend cpu failed to compile kernel {func.name!r}: "
            f"{str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__}",
            func.span,
            func.source,
        ) from err
    show = options.get("source", "llvm")
    meta: Dict[str, Any] = {
        "host": dict(info),
        "params": [p.name for p in func.params],
        "scalars": list(func.scalar_names),
        "checks": lowering.checks,
        "user_source": func.source,
    }
    return Artifact(
        backend=NAME,
        target=module.target,
        entry=func.name,
        source=asm if show == "asm" else llvm_ir,
        blobs={"kernel.so": blob} if blob is not None else {},
        meta=meta,
    )


def _compile_only_launch(artifact):
    """A launch that explains why a cross-compiled kernel does not run on this host."""
    from tilecore.diagnostics import TileRuntimeError

    from .runtime import as_cpu_launch

    info = artifact.meta.get("host", {})

    def launch(args, bindings=None):
        raise TileRuntimeError(
            f"kernel {artifact.entry!r} was compiled for {artifact.target} ({info.get('cpu')}, "
            f"{info.get('triple')}), which this host cannot run; its code is in "
            f"kernel.source (compile with source='asm' for assembly)"
        )

    return as_cpu_launch(launch, None, None)


@hookimpl
def tilecore_launcher(backend, artifact):
    """Load the shared library (once per content) and return `launch(args, bindings)`.

    The library is called through the tvm-ffi C ABI with ctypes (tile_cpu.native),
    so running a cached kernel never imports TVM; TVM's own loader is the fallback
    when that path cannot be used (TILE_CPU_LAUNCH=tvm forces it).
    """
    if backend.name != NAME:
        return None
    from . import native
    from .build import library_file, load_library
    from .runtime import make_launch

    blob = artifact.blobs.get("kernel.so")  # from a cache entry whose keyed digest was checked
    if blob is None:  # compiled for another CPU (cross-compilation): code to inspect, not to run
        return _compile_only_launch(artifact)
    params = artifact.meta.get("params") or []
    caller = native.load(
        library_file(blob), artifact.entry, len(params), with_error=artifact.meta.get("checks") is not None
    )
    return make_launch(artifact, native=caller, tvm_function=lambda: load_library(blob)[artifact.entry])
