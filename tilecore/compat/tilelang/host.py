"""TileLang's host API on tilecore: `jit`, `compile`, `PassConfigKey`, `TensorSupplyType`.

Differences, each deliberate: TileLang's `target=` names a device ("auto", "cuda",
"hip", "cpu", ...) and maps to the tilecore backend of that device; the
`TILECORE_TARGET` environment variable, when set, wins over it, so a script written
for one GPU runs unchanged on another backend. `pass_configs` keys are TileLang
compiler switches (fast math, TMA, warp specialization, register budgets, debug
dumps); tilecore's backends choose their own code generation, so every known key is
accepted and has no effect (fast math included: results stay as accurate as without
it). An unknown key is an UnsupportedFeatureError. `execution_backend`, `verbose`,
`target_host`, `compile_flags` and `debug_root_path` are accepted and ignored.
"""
from __future__ import annotations

import enum
import os
from typing import Optional

from ...diagnostics import UnsupportedFeatureError


class PassConfigKey(str, enum.Enum):
    """TileLang's compiler switches (`pass_configs={PassConfigKey.X: value}`): no effect here."""

    TL_SIMPLIFY = "tl.Simplify"
    TL_DISABLE_BUFFER_INIT_CHECK = "tl.disable_buffer_init_check"
    TL_DISABLE_DATA_RACE_CHECK = "tl.disable_data_race_check"
    TL_DISABLE_PRELOWER_SEMANTIC_CHECK = "tl.disable_prelower_semantic_check"
    TL_DISABLE_WARP_SPECIALIZED = "tl.disable_warp_specialized"
    TL_ENABLE_FAST_MATH = "tl.enable_fast_math"
    TL_DISABLE_FAST_MATH = "tl.disable_fast_math"
    TL_PTXAS_REGISTER_USAGE_LEVEL = "tl.ptxas_register_usage_level"
    TL_ENABLE_PTXAS_VERBOSE_OUTPUT = "tl.enable_ptxas_verbose_output"
    TL_DEVICE_COMPILE_FLAGS = "tl.device_compile_flags"
    TL_CONFIG_INDEX_BITWIDTH = "tl.config_index_bitwidth"
    TL_DISABLE_TMA_LOWER = "tl.disable_tma_lower"
    TL_DISABLE_SAFE_MEMORY_ACCESS = "tl.disable_safe_memory_legalize"
    TL_ENABLE_ASYNC_COPY = "tl.enable_async_copy"
    TL_DISABLE_WGMMA = "tl.disable_wgmma"
    TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE = "tl.enable_aggressive_shared_memory_merge"
    TL_DISABLE_SHARED_MEMORY_REUSE = "tl.disable_shared_memory_reuse"
    TL_DISABLE_THREAD_STORAGE_SYNC = "tl.disable_thread_storage_sync"
    TL_DISABLE_LOOP_UNSWITCHING = "tl.disable_loop_unswitching"
    TL_FORCE_LET_INLINE = "tl.force_let_inline"
    TL_LAYOUT_VISUALIZATION_ENABLE = "tl.layout_visualization_enable"
    TL_LAYOUT_VISUALIZATION_FORMATS = "tl.layout_visualization_formats"
    TL_DISABLE_OUT_OF_BOUND_WARNING = "tl.disable_out_of_bound_warning"
    TL_ENABLE_DUMP_IR = "tl.enable_dump_ir"
    TL_DUMP_IR_DIR = "tl.dump_ir_path"
    TIR_DISABLE_CSE = "tirx.disable_cse_tir"
    TIR_DISABLE_VECTORIZE = "tirx.disable_vectorize"
    TIR_MERGE_STATIC_SMEM = "tirx.merge_static_smem"
    TIR_ENABLE_DEBUG = "tirx.enable_debug"
    CUDA_KERNELS_OUTPUT_DIR = "cuda.kernels_output_dir"


class TensorSupplyType(enum.Enum):
    """How TileLang's profiler fills the inputs it makes (for `kernel.get_profiler(...)`)."""

    Integer = 1
    Uniform = 2
    Normal = 3
    Randn = 4
    Zero = 5
    One = 6
    Auto = 7


_TARGETS = {"auto": None, "cuda": "cuda", "hip": "rocm", "rocm": "rocm", "metal": "metal",
            "cpu": "cpu", "c": "cpu", "llvm": "cpu", "npu": "npu", "reference": "reference"}


def map_target(target) -> Optional[str]:
    """The tilecore target for TileLang's `target=` (TILECORE_TARGET, when set, wins)."""
    if os.environ.get("TILECORE_TARGET"):
        return os.environ["TILECORE_TARGET"]
    if target is None:
        return None
    text = str(target.get("kind") if isinstance(target, dict) else target).strip()
    name, _, variant = text.partition(" ")[0].partition(":")
    if name not in _TARGETS:
        return text  # a tilecore target name ("cuda:sm_90a") passes through
    mapped = _TARGETS[name]
    return f"{mapped}:{variant}" if mapped and variant else mapped


def check_pass_configs(pass_configs) -> None:
    """Accept TileLang's known compiler switches; name an unknown one."""
    known = {k.value for k in PassConfigKey}
    for key in (pass_configs or {}):
        value = key.value if isinstance(key, PassConfigKey) else str(key)
        if value not in known:
            raise UnsupportedFeatureError("tilecore", f"the TileLang pass config {value!r}")


_IGNORED = ("execution_backend", "verbose", "target_host", "compile_flags", "debug_root_path")


def _options(kwargs):
    check_pass_configs(kwargs.pop("pass_configs", None))
    for name in _IGNORED:
        kwargs.pop(name, None)
    return kwargs


def jit(func=None, *, out_idx=None, target="auto", **kwargs):
    """`@tilelang.jit` / `@tilelang.jit(out_idx=..., target=..., pass_configs=...)` on tilecore."""
    from ...runtime.api import jit as tile_jit

    options = _options(dict(kwargs))
    decorate = tile_jit(out_idx=out_idx, target=map_target(target), **options)
    return decorate(func) if func is not None else decorate


def compile(func, out_idx=None, target="auto", **kwargs):  # noqa: A001  (TileLang's name)
    """`tilelang.compile(prim_func, out_idx=..., target=..., pass_configs=...)` on tilecore."""
    from ...runtime.api import compile as tile_compile

    return tile_compile(func, target=map_target(target), out_idx=out_idx, **_options(dict(kwargs)))
