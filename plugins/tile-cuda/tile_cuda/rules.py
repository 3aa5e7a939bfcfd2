"""tile-cuda's lowering rules, in the order they are tried (the toolkit's portable lowering last).

    Gemm       wgmma (sm_90a) -> mma_sync (sm_80+) -> portable
    Kernel     warp_specialized_kernel (sm_90a, option warp_specialize; persistent: option persistent,
               `persistent.py`) -> split_k_kernel (the kernels
               `split_k.split_k_rewrite` split over K, option split_k) -> portable
    Pipelined  warp_specialized (sm_90a, option warp_specialize) -> wgmma_overlap_pipeline (sm_90a,
               option wgmma_overlap) -> async_copy_pipeline (cp.async, sm_80+) -> portable (a serial loop)
    Copy       tma_store_epilogue (sm_90a, option tma_store: a warp-specialized GEMM's epilogue) ->
               ws_tile_load_wait (a persistent kernel's per-tile copy the producer loads,
               `ws_tile_loads.py`) -> swizzled_staging (plans the swizzled layout of an epilogue's
               staging tile, `staging_tiles.py`; emits nothing) -> portable
    Print      printf -> portable (refused)

`add_cuda_rules(rules)` is what the plugin's `tilecore_lowering_rules` hook runs;
a third party adds its own rules for "cuda" the same way (a higher priority puts
them first).
"""

from __future__ import annotations

from math import prod

from tilecore.ir import nodes as N
from tilecore.plugin.rules import LoweringRule

from .target import has_mma_sync


class PrintfRule(LoweringRule):
    """`T.print` as device printf from thread 0 of every block, prefixed with the block index."""

    name = "printf"

    def __call__(self, lowering, p: N.Print):
        from tvm.tirx.script.builder import ir as B

        from tilecore.ir.types import is_float
        from tilecore.lowering.simt_threads import unflatten
        from tilecore.lowering.tir_expr import cast_to

        prefix = (p.msg + ": ") if p.msg else ""
        blk = [lowering.ex.variables[v.name] for v in lowering.kernel.block_vars]
        bfmt = "[" + ",".join(["%d"] * len(blk)) + "] " if blk else ""

        def fmt_val(e, dtype):
            if is_float(dtype):
                return "%g", cast_to(e, "float64")
            if dtype == "int64":
                return "%lld", e
            return "%d", cast_to(e, "int32")

        with B.If(lowering.thread == 0):
            with B.Then():
                if isinstance(p.value, N.Expr):
                    f, v = fmt_val(lowering.lower(p.value), p.value.dtype)
                    B.evaluate(_printf(bfmt + prefix + f + "\n", *blk, v))
                else:
                    buf = p.value
                    shape = buf.static_shape() or (1,)
                    with B.serial(0, prod(shape)) as e:
                        stored = lowering.element(buf, unflatten(e, shape))
                        f, v = fmt_val(lowering.value_of(buf, stored), buf.dtype)  # (fp8 decoded)
                        B.evaluate(_printf(bfmt + prefix + buf.name + "[%d] = " + f + "\n", *blk, e, v))
        return None


def _printf(fmt, *args):
    from tvm import tirx as tx

    if hasattr(tx, "cuda_printf"):
        return tx.cuda_printf(fmt, *args)
    from tvm.backend.cuda import op as cop

    return cop.cuda_printf(fmt, *args)


def add_cuda_rules(rules) -> None:
    """Add tile-cuda's rules to a `tilecore.plugin.rules.RuleTable`."""
    from tilecore.lowering.simt_pipeline import AsyncCopyPipeline

    from .gemm_rules import MmaSyncGemm, WgmmaGemm
    from .split_k import SplitKKernel
    from .staging_tiles import SwizzledStaging
    from .tma_store import TmaStoreEpilogue
    from .warp_specialize import WarpSpecializedKernel, WarpSpecializedPipeline
    from .wgmma_pipeline import WgmmaOverlapPipeline
    from .ws_tile_loads import TileLoadWait

    rules.add("Kernel", WarpSpecializedKernel())
    rules.add("Kernel", SplitKKernel())
    rules.add("Gemm", WgmmaGemm())
    rules.add("Gemm", MmaSyncGemm())
    rules.add("Pipelined", WarpSpecializedPipeline())
    rules.add("Pipelined", WgmmaOverlapPipeline())
    rules.add("Pipelined", AsyncCopyPipeline(applies_to=has_mma_sync))
    rules.add("Copy", TmaStoreEpilogue())
    rules.add("Copy", TileLoadWait())
    rules.add("Copy", SwizzledStaging())
    rules.add("Print", PrintfRule())


def cuda_plan(func: N.PrimFunc, arch: str, options=None):
    """The SIMT plan of `func` on `arch` with tile-cuda's rules (pure Python, no TVM): the storage
    and layouts the lowering will use and what each rule claimed (`plan.claims`)."""
    from tilecore.lowering.simt_plan import plan_for_target
    from tilecore.plugin.rules import RuleTable

    from .target import cuda_target

    rules = RuleTable()
    add_cuda_rules(rules)
    kernel = func.kernel
    threads = prod(kernel.threads) if kernel.threads else 128
    return plan_for_target(func, threads, cuda_target(arch, dict(options or {})), rules.all_rules())
