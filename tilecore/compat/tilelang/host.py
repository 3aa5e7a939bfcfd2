"""TileLang's host API on tilecore: `jit`, `compile`, `PassConfigKey`, `TensorSupplyType`.

Differences, each deliberate: TileLang's `target=` names a device ("auto", a backend's
name, or a device name an installed backend declares in `Backend.tilelang.targets`) and
maps to that tilecore backend; the `TILECORE_TARGET` environment variable, when set,
wins over it, so a script written for one GPU runs unchanged on another backend.
`pass_configs` keys are TileLang compiler switches: the target-neutral ones listed here
and the hardware-specific ones installed backends declare (`Backend.tilelang.pass_configs`).
tilecore's backends choose their own code generation, so every known key is accepted and
has no effect (fast math included: results stay as accurate as without it). An unknown
key is an UnsupportedFeatureError. `execution_backend`, `verbose`, `target_host`,
`compile_flags` and `debug_root_path` are accepted and ignored. Kernels compiled here
give TileLang's profiler inputs: `kernel.get_profiler()` draws torch tensors (when torch
is installed), which TileLang reference programs expect.
"""

from __future__ import annotations

import enum
import importlib.util
import os
from typing import TYPE_CHECKING, Dict, Optional, Tuple, Type

from ...diagnostics import UnsupportedFeatureError

if TYPE_CHECKING:
    from ...plugin.registry import BackendRegistry

# TileLang's target-neutral compiler switches (PassConfigKey member -> key); the
# hardware-specific ones come from the installed backends' `tilelang.pass_configs`.
NEUTRAL_PASS_CONFIGS = {
    "TL_SIMPLIFY": "tl.Simplify",
    "TL_DISABLE_BUFFER_INIT_CHECK": "tl.disable_buffer_init_check",
    "TL_DISABLE_DATA_RACE_CHECK": "tl.disable_data_race_check",
    "TL_DISABLE_PRELOWER_SEMANTIC_CHECK": "tl.disable_prelower_semantic_check",
    "TL_DISABLE_WARP_SPECIALIZED": "tl.disable_warp_specialized",
    "TL_ENABLE_FAST_MATH": "tl.enable_fast_math",
    "TL_DISABLE_FAST_MATH": "tl.disable_fast_math",
    "TL_DEVICE_COMPILE_FLAGS": "tl.device_compile_flags",
    "TL_CONFIG_INDEX_BITWIDTH": "tl.config_index_bitwidth",
    "TL_DISABLE_SAFE_MEMORY_ACCESS": "tl.disable_safe_memory_legalize",
    "TL_ENABLE_ASYNC_COPY": "tl.enable_async_copy",
    "TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE": "tl.enable_aggressive_shared_memory_merge",
    "TL_DISABLE_SHARED_MEMORY_REUSE": "tl.disable_shared_memory_reuse",
    "TL_DISABLE_THREAD_STORAGE_SYNC": "tl.disable_thread_storage_sync",
    "TL_DISABLE_LOOP_UNSWITCHING": "tl.disable_loop_unswitching",
    "TL_FORCE_LET_INLINE": "tl.force_let_inline",
    "TL_LAYOUT_VISUALIZATION_ENABLE": "tl.layout_visualization_enable",
    "TL_LAYOUT_VISUALIZATION_FORMATS": "tl.layout_visualization_formats",
    "TL_DISABLE_OUT_OF_BOUND_WARNING": "tl.disable_out_of_bound_warning",
    "TL_ENABLE_DUMP_IR": "tl.enable_dump_ir",
    "TL_DUMP_IR_DIR": "tl.dump_ir_path",
    "TIR_DISABLE_CSE": "tirx.disable_cse_tir",
    "TIR_DISABLE_VECTORIZE": "tirx.disable_vectorize",
    "TIR_MERGE_STATIC_SMEM": "tirx.merge_static_smem",
    "TIR_ENABLE_DEBUG": "tirx.enable_debug",
}


class TensorSupplyType(enum.Enum):
    """How TileLang's profiler fills the inputs it makes (for `kernel.get_profiler(...)`)."""

    Integer = 1
    Uniform = 2
    Normal = 3
    Randn = 4
    Zero = 5
    One = 6
    Auto = 7


def _installed_backends():
    """The installed backends, by name (sorted: which of two claims on a name wins is stable)."""
    from ...plugin.registry import get_registry

    return dict(sorted(get_registry().backends.items()))


def target_aliases() -> Dict[str, str]:
    """TileLang device names -> tilecore backend names: each installed backend's own name and
    the names it declares in `Backend.tilelang.targets` (a backend's own name is never taken)."""
    backends = _installed_backends()
    aliases = {name: name for name in backends}
    for name, backend in backends.items():
        for alias in backend.tilelang.targets:
            aliases.setdefault(alias, name)
    return aliases


def map_target(target) -> Optional[str]:
    """The tilecore target for TileLang's `target=` (TILECORE_TARGET, when set, wins).

    "auto" is the default target (None); a device name an installed backend declares maps
    to it, keeping a ":variant"; anything else passes through as a tilecore target name, so
    an unknown one is reported by the registry when the kernel compiles.
    """
    if os.environ.get("TILECORE_TARGET"):
        return os.environ["TILECORE_TARGET"]
    if target is None:
        return None
    text = str(target.get("kind") if isinstance(target, dict) else target).strip()
    name, _, variant = text.partition(" ")[0].partition(":")
    if name == "auto":
        return None
    mapped = target_aliases().get(name)
    if mapped is None:
        return text  # a tilecore target name ("name:variant") passes through
    return f"{mapped}:{variant}" if variant else mapped


def pass_config_keys() -> Dict[str, str]:
    """Every known TileLang switch (PassConfigKey member -> key): the target-neutral ones and
    those the installed backends declare in `Backend.tilelang.pass_configs`."""
    keys = dict(NEUTRAL_PASS_CONFIGS)
    for backend in _installed_backends().values():
        for member, key in backend.tilelang.pass_configs.items():
            keys.setdefault(member, key)
    return keys


# (the registry it was built from, the enum)
_pass_config_enum: Tuple[Optional[BackendRegistry], Optional[Type[enum.Enum]]] = (None, None)


def pass_config_enum():
    """`tilelang.PassConfigKey`: a str Enum of `pass_config_keys()`, rebuilt when the set of
    installed plugins changes (a plugin registered at run time adds its members)."""
    global _pass_config_enum
    from ...plugin.registry import get_registry

    registry = get_registry()
    if _pass_config_enum[0] is not registry:
        members = pass_config_keys()
        # the members are the installed plugins' switches: mypy reads only literal member lists
        made = enum.Enum(  # type: ignore[misc]
            "PassConfigKey",
            members,
            type=str,
            module=__name__,
            qualname="PassConfigKey",
        )
        made.__doc__ = "TileLang's compiler switches (`pass_configs={PassConfigKey.X: value}`): no effect here."
        _pass_config_enum = (registry, made)
    return _pass_config_enum[1]


def check_pass_configs(pass_configs) -> None:
    """Accept TileLang's known compiler switches; name an unknown one."""
    known = set(pass_config_keys().values())
    for key in pass_configs or {}:
        value = key.value if isinstance(key, enum.Enum) else str(key)
        if value not in known:
            raise UnsupportedFeatureError(
                "tilecore",
                f"the TileLang pass config {value!r} (neither a target-neutral TileLang switch "
                "nor one an installed backend declares; `tile backends` lists the installed backends)",
            )


def __getattr__(name):
    if name == "PassConfigKey":
        return pass_config_enum()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_IGNORED = ("execution_backend", "verbose", "target_host", "compile_flags", "debug_root_path")


def _options(kwargs):
    check_pass_configs(kwargs.pop("pass_configs", None))
    for name in _IGNORED:
        kwargs.pop(name, None)
    if importlib.util.find_spec("torch") is not None:
        # TileLang's profiler hands the reference program torch tensors (`Q.size(-1)`, ...)
        kwargs.setdefault("profiler_inputs", "torch")
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
