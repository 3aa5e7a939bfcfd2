"""The tilecore backend "cuda": Tile IR -> TVM TIR (the SIMT toolkit) -> CUDA C++ -> cubin.

The tensor-core GEMMs (wgmma, mma.sync with ldmatrix), cp.async pipelines, printf,
fast math and every device helper are this plugin's lowering rules (`rules.py`,
`gemm_rules.py`) and intrinsic table (`intrinsics.py`), registered through the
hooks `tilecore_lowering_rules` / `tilecore_intrinsics` as a third party would.

Registered through the entry point `cuda = "tile_cuda.plugin"` (group "tilecore").
Neither TVM nor torch is imported when the plugin registers; TVM is imported by
codegen only, and a cached kernel launches without it.
"""

from __future__ import annotations

from typing import Any, Dict

from tilecore.plugin import Option, hookimpl
from tilecore.plugin.backend import Artifact, Backend, Capabilities, ToolchainStatus, tvm_fingerprint

from . import __version__, toolchain
from .target import (
    DEFAULT_DEFER_GEMM,
    DEFAULT_OVERLAP,
    DEFAULT_TILE_LOADS,
    DEFAULT_WARP_SPECIALIZE,
    GEMM_BLOCK_PANEL,
    HEAVY_FIRST_GROUP_BLOCKS,
    OVERLAP_SCHEDULES,
)
from .tilelang_names import TILELANG_NAMES

NAME = "cuda"
PRIORITY = 100  # preferred over cpu where a GPU is present
ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100a", "sm_120")


def toolchain_status() -> ToolchainStatus:
    """nvcc / NVRTC and their versions, TVM, and the GPU with its compute capability."""
    nvcc = toolchain.find_nvcc()
    nvrtc = toolchain.find_nvrtc()
    gpu = toolchain.gpu_info()
    details = [
        ("nvcc", f"{nvcc} (CUDA {toolchain.nvcc_version()})" if nvcc else "not found"),
        ("nvrtc", nvrtc or "not found"),
    ]
    # the GPU is named even without TVM: a host that runs prebuilt kernels (conformance bundles)
    # needs only the driver, and its certificate must say which GPU ran them
    device = None
    if gpu:
        name, major, minor, drv = gpu
        device = f"{name} (sm_{major}{minor}, driver CUDA {drv // 1000}.{drv % 1000 // 10})"
        details.append(("gpu", device))
    else:
        details.append(("gpu", "none present (kernels compile; running needs an NVIDIA GPU)"))
    try:
        import importlib.metadata as md

        details.append(("apache-tvm", md.version("apache-tvm")))
    except Exception:
        return ToolchainStatus(
            ok=False,
            summary="apache-tvm is not installed (compiling needs it; prebuilt kernels run without it)",
            details=tuple(details),
            device=device,
            fix="pip install 'apache-tvm>=0.27,<0.28'",
        )
    if not nvcc and not nvrtc:
        return ToolchainStatus(
            ok=False,
            summary="no CUDA compiler: neither nvcc nor NVRTC was found",
            details=tuple(details),
            device=device,
            fix=toolchain.NVCC_FIX,
        )
    comp = f"nvcc {toolchain.nvcc_version()}" if nvcc else "NVRTC"
    summary = f"{comp}; " + (f"GPU {device}" if device else "no GPU (compile only)")
    return ToolchainStatus(ok=True, summary=summary, details=tuple(details), device=device)


def _code_version() -> str:
    """The package version plus a digest of the code generator's sources, so that on-disk cached
    kernels are rebuilt whenever the lowering changes (not only on a release)."""
    import hashlib
    import os

    import tilecore.lowering as lowering

    h = hashlib.sha256()
    here = os.path.dirname(os.path.abspath(__file__))
    low = os.path.dirname(os.path.abspath(lowering.__file__))
    files = [os.path.join(here, f) for f in sorted(os.listdir(here)) if f.endswith(".py") and f != "launcher.py"]
    files += [
        os.path.join(low, f)
        for f in sorted(os.listdir(low))
        if f.endswith(".py") and (f.startswith("simt") or f in ("target.py", "tir_expr.py", "intrinsics.py", "fp8.py"))
    ]
    for f in files:
        try:
            with open(f, "rb") as fh:
                h.update(fh.read())
        except OSError:
            pass
    return f"{__version__}+{h.hexdigest()[:12]}"


def make_backend() -> Backend:
    """The Backend declaration of tile-cuda."""
    from tilecore.ir.types import FP8_DTYPES
    from tilecore.ir.version import TILE_IR_VERSION
    from tilecore.language.features import ALL_FEATURES

    # fp8: held as uint8 bits with exact conversions by the shared SIMT lowering (tilecore.lowering.fp8);
    # int4: the core pass int4_storage hands this backend packed int8 tensors and int8 tiles
    dtypes = frozenset(
        {"float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool", "int4"}
        | set(FP8_DTYPES)
    )
    gemm = set()
    for a in ("float16", "bfloat16"):
        gemm |= {(a, "float32"), (a, a)}
    gemm |= {("float32", "float32"), ("float64", "float64"), ("int8", "int32")}
    gemm |= {(a, acc) for a in FP8_DTYPES for acc in ("float32", "float64")}  # (the portable dot product)
    return Backend(
        name=NAME,
        targets=(NAME,) + tuple(f"{NAME}:{a}" for a in ARCHS),
        ir_versions=(TILE_IR_VERSION,),
        capabilities=Capabilities(
            features=frozenset(ALL_FEATURES | {"while_loop", "parallel_while"}),  # while: the shared SIMT lowering
            dtypes=dtypes,
            gemm_dtypes=frozenset(gemm),
            max_shared_memory=227 * 1024,
            max_fragment_memory=255 * 4 * 1024,
            max_threads=1024,
            warp_size=32,
            vector_bytes=16,
            memory_space="cuda",
            tiers=("execute", "compile") if toolchain.device_present() else ("compile",),
        ),
        toolchain_status=toolchain_status,
        device_present=toolchain.device_present,
        distribution="tile-cuda",
        version=_code_version(),
        priority=PRIORITY,
        description="NVIDIA GPUs through TVM's CUDA codegen and nvcc/NVRTC; mma.sync tensor cores, cp.async pipelines",
        options=(
            Option("wgmma", bool, True, "use wgmma tensor-core GEMMs on sm_90a"),
            Option(
                "wgmma_overlap",
                object,
                DEFAULT_OVERLAP,
                'the overlapped wgmma main loop on sm_90a: False off, "slack" (or True) or "release"',
                choices=(False, True) + OVERLAP_SCHEDULES,
            ),
            Option(
                "gemm_block_panel",
                int,
                GEMM_BLOCK_PANEL,
                "kernels with a gemm and a 2-D grid visit blocks "
                "in panels of this many block rows (L2 reuse) unless T.use_swizzle says otherwise; 0: "
                "launch order",
            ),
            Option(
                "heavy_first_group_blocks",
                int,
                HEAVY_FIRST_GROUP_BLOCKS,
                "kernels whose loop trip count grows with a block index (causal attention) launch "
                "their longest blocks first, in groups of about this many blocks; 0: within each "
                "tuple of the other block indices alone",
            ),
            Option(
                "fast_math",
                bool,
                False,
                "fast approximate exp/exp2/log (__expf, ex2.approx, __logf); "
                "off by default: the accurate expf/exp2f/logf meet the conformance ULP table",
                declares=("fast_math",),  # conformance holds it to the fast-math table
            ),
            Option(
                "warp_specialize",
                bool,
                DEFAULT_WARP_SPECIALIZE,
                "sm_90a: a producer warpgroup "
                "fills the stages of the T.Pipelined loop (mbarriers) and two warpgroups take turns at "
                "their gemms (ping-pong); None (default): blocks of two or more warpgroups, True: every "
                "block, False: off",
                optional=True,
            ),
            Option(
                "tma",
                bool,
                True,
                "sm_90a: the stage copies of a warp-specialized T.Pipelined loop as TMA loads "
                "(cp.async.bulk.tensor, one producer thread, tensor maps built per call) where "
                "eligible (tile_cuda/tma.py's TMA_RULES), else cp.async; False: cp.async always",
            ),
            Option(
                "defer_gemm",
                bool,
                DEFAULT_DEFER_GEMM,
                "sm_90a: in a warp-specialized loop with two gemms (attention), the second gemm of "
                "iteration k runs on while iteration k+1's first gemm and softmax are computed "
                "(tile_cuda/ws_deferred.py)",
            ),
            Option(
                "ws_blocks_per_sm",
                int,
                1,
                "sm_90a: warp-specialized blocks planned to share one SM (1 or 2): the launch bounds "
                "ask the compiler for that many blocks and setmaxnreg splits 1/n of the register file "
                "(a one-warpgroup consumer, TileLang's 128-thread GEMM, then leaves room for a second "
                "block whose gemm runs while the first waits); not measured yet, so 1 by default",
            ),
            Option(
                "tma_multicast",
                bool,
                False,
                "sm_90a: a warp-specialized kernel whose neighbouring blocks read one stage tile alike "
                "(the rows of A, or the columns of B) launches in clusters of two blocks, each loading "
                "half of that tile into both with TMA multicast, so it leaves L2 once "
                "(tile_cuda/cluster.py); off by default: correct, and on the H100 as fast as the build without "
                "clusters, not faster (session 17)",
            ),
            Option(
                "retile_gemm",
                object,
                "auto",
                "sm_90a: a kernel whose grid is one whole GEMM (examples/gemm.py's matmul: clear, one K loop "
                "of two tile copies and a gemm, the accumulator copied out) is rebuilt with the tiles "
                "tile-cuda runs fastest (128x256x64, 256 threads, 3 stages for float16/bfloat16), which "
                "changes no result (tile_cuda/retile.py); 'auto' (default): when its own blocks are "
                "smaller and the new grid fills the GPU, True: wherever it matches, False: the kernel's tiles",
                choices=(False, True, "auto"),
            ),
            Option(
                "split_k",
                int,
                None,
                "split the K loop of a plain GEMM kernel over one more grid dimension, partial sums "
                "reduced in split order by the last block of each tile (tile_cuda/split_k.py); None "
                "(default): when the grid has at most half as many blocks as the GPU has SMs and K "
                "is long, 0 or 1: off, n: n splits",
                optional=True,
            ),
            Option(
                "persistent",
                object,
                "auto",
                "sm_90a: a warp-specialized kernel launches one block per SM, each looping over "
                "output tiles (the kernel's block order), its producer loading the next tile during "
                'the epilogue (tile_cuda/persistent.py); "auto" (default): a plain GEMM when it has more '
                "than one and at most 4 waves of tiles and a TMA-store epilogue (measured faster there on "
                "the H100; slower with many more), another kernel (attention) with more than one wave of "
                "tiles when its trip count grows with a block index (causal: tiles in snake order) or its "
                "producer loads a copy per tile (option tile_loads), "
                "True: wherever the kernel qualifies, False: one block per tile",
                choices=(False, True, "auto"),
            ),
            Option(
                "tile_loads",
                object,
                DEFAULT_TILE_LOADS,
                "sm_90a: in a persistent kernel other than the plain GEMM, a copy before the loop into a "
                "shared tile only the loop reads (attention's Q) is loaded per tile by the producer with "
                'TMA while the consumers finish the previous tile (tile_cuda/ws_tile_loads.py); "auto" '
                "(default): where the tiles' trip counts are equal (non-causal attention, which "
                "persistent='auto' then launches persistent), True: also in causal snake rounds, False: off",
                choices=(False, True, "auto"),
            ),
            Option(
                "tma_store",
                bool,
                None,
                "sm_90a: the epilogue of a warp-specialized plain GEMM writes the accumulator into a "
                "swizzled shared staging tile and stores it with TMA (cp.async.bulk.tensor shared -> "
                "global), not waiting for the stores (tile_cuda/tma_store.py); None (default): when the "
                "block has two or more consumer warpgroups (measured faster there: 4096^3 on the H200, "
                "8192^3 on the H100), True: every eligible epilogue, False: global stores",
                optional=True,
            ),
            Option(
                "staging_swizzle",
                bool,
                True,
                "a shared tile that only stages an MMA accumulator on its way to global memory "
                "(attention's O_shared) takes the swizzled layout, so the fragment's column pairs are "
                "stored as 4-byte vectors without bank conflicts (tile_cuda/staging_tiles.py)",
            ),
        ),
        toolchain_fingerprint=lambda: tvm_fingerprint() + ";" + toolchain.compiler_fingerprint(),
        tilelang=TILELANG_NAMES,
    )


@hookimpl
def tilecore_register_backends(register):
    """Declare the backend "cuda"."""
    register(make_backend())


@hookimpl
def tilecore_lowering_rules(backend, rules):
    """tile-cuda's rules: wgmma and mma.sync gemms, cp.async pipelines, printf (see `rules.py`)."""
    if backend.name != NAME:
        return
    from .rules import add_cuda_rules

    add_cuda_rules(rules)


@hookimpl
def tilecore_intrinsics(backend, table):
    """CUDA math (fast __expf/__logf/ex2.approx for float32) and the device instructions of the
    SIMT toolkit as calls into tile-cuda's helper library (see `intrinsics.py`)."""
    if backend.name != NAME:
        return
    from .intrinsics import cuda_intrinsics

    for key, impl in cuda_intrinsics().items():
        table.setdefault(key, impl)


def kernel_layout_rule(stmt, layouts, ctx):
    """Layout rule for the core fixpoint engine, on the whole T.Kernel: the thread layouts the
    SIMT plan chooses with tile-cuda's rules (MMA accumulator, row vectors, strided tiles; shared
    memory for demoted fragments). Deterministic, so the engine converges in one sweep."""
    from tilecore.ir import nodes as N

    from .rules import cuda_plan

    try:
        arch = toolchain.parse_target(getattr(ctx, "target", None) or NAME)
    except ValueError:
        arch = "sm_80"
    plan = cuda_plan(N.PrimFunc("kernel", (), (stmt,)), arch)
    return {
        name: plan.layout[name]
        for name, where in plan.storage.items()
        if where in ("reg", "smem") and name in plan.layout
    }


@hookimpl
def tilecore_layout_rules(backend, rules):
    """Contribute the SIMT plan to the core layout-inference engine (analyses["layout"])."""
    if backend.name != NAME:
        return
    rules["Kernel"] = kernel_layout_rule


def _grid_py(expr) -> str:
    """A Tile IR grid expression as Python source over the bindings dict `b`."""
    from tilecore.lowering.launch_grid import grid_expr_source

    return grid_expr_source(expr)


@hookimpl
def tilecore_codegen(backend, module, options):
    """Lower, generate CUDA C++ with TVM, compile to a cubin; the Artifact holds source and cubin."""
    if backend.name != NAME:
        return None
    from tilecore.diagnostics import TileCompileError
    from tilecore.plugin.rules import collect_lowering_tables

    from .compiler import compile_cubin, generate_source
    from .split_k import workspace_meta
    from .tma import tensor_map_meta

    func = module.func
    options = dict(options or {})
    try:
        arch = toolchain.parse_target(module.target or options.get("target") or NAME)
    except ValueError as err:
        raise TileCompileError(str(err), func.span, func.source) from err
    src, entry, kparams, lk = generate_source(func, arch, options, tables=collect_lowering_tables(backend))
    try:
        cubin, compiler_desc, secs = compile_cubin(src, arch)
    except TileCompileError:
        raise
    except Exception as err:
        raise TileCompileError(
            f"backend cuda: the CUDA compiler rejected the generated code for {func.name!r}: {str(err)[-1500:]}",
            func.span,
            func.source,
        ) from err
    meta: Dict[str, Any] = {
        "arch": arch,
        "kernel_symbol": entry,
        "kernel_params": kparams,
        "params": [p.name for p in func.params],
        "threads": lk.threads,
        "dyn_smem_bytes": lk.dyn_smem_bytes,
        "grid_py": [_grid_py(g) for g in lk.grid],
        "compiler": compiler_desc,
        "compile_seconds": round(secs, 3),
        "storage": dict(lk.plan.storage),
        "notes": lk.notes,
        "rules": lk.rules,
        "tensor_maps": tensor_map_meta(lk.plan, kparams),
    }
    split = workspace_meta(lk.plan)
    if split:
        meta["split_k"] = split
    return Artifact(
        backend=NAME, target=f"{NAME}:{arch}", entry=func.name, source=src, blobs={"cubin": cubin}, meta=meta
    )


@hookimpl
def tilecore_launcher(backend, artifact):
    """A `launch(args, bindings)` that runs the cubin with cuLaunchKernel on the current stream;
    `launch.specialize` gives the Kernel a per-signature run that only reads pointers and stream."""
    if backend.name != NAME:
        return None
    from .launcher import CudaKernelLauncher

    return CudaKernelLauncher(artifact)


@hookimpl
def tilecore_timer(backend):
    """The profiler times CUDA kernels with CUDA events and an L2 flush (see timing.py)."""
    if backend.name != NAME:
        return None
    from .timing import CudaEventTimer

    return CudaEventTimer()
