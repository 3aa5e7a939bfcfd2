"""TileLang's host-side names on tilecore: a TileLang file runs after changing its imports only.

    import tilecore.compat.tilelang as tilelang
    import tilecore.compat.tilelang.language as T      # the same object as tilecore.language

`jit`, `compile`, `cdiv`, `PassConfigKey`, `testing`, `layout`, `language` do what
TileLang's do (on tilecore's backends); `autotune`, `autotuner` and `profiler` come
from tilecore's own autotuner and profiler when installed, and otherwise raise
UnsupportedFeatureError naming the feature. Names TileLang has and tilecore does not
are not defined (an AttributeError), never silent stand-ins.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol, cast

from ...diagnostics import UnsupportedFeatureError
from ...language import ceildiv as cdiv  # noqa: F401  (Python ints at once; kernel values in a kernel)
from . import language  # noqa: F401  (tilecore.language itself)
from .host import TensorSupplyType, compile, jit, map_target  # noqa: F401,A004

_LAZY = {
    "AutoTuner": ("tilecore.autotune", "AutoTuner", "TileLang's autotuner (tilelang.autotuner.AutoTuner)"),
}
_SUBMODULES = ("testing", "layout", "autotuner", "profiler", "math", "utils")


def __getattr__(name):
    if name == "PassConfigKey":  # built from the installed backends' declarations (host.pass_config_enum)
        from .host import pass_config_enum

        return pass_config_enum()
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name == "autotune":
        return importlib.import_module(f"{__name__}.autotuner").autotune
    if name in _LAZY:
        module, attr, feature = _LAZY[name]
        return optional_import(module, attr, feature)
    if name == "JITKernel":
        from ...runtime.kernel import Kernel

        return Kernel
    raise AttributeError(
        f"module 'tilelang' (tilecore.compat.tilelang) has no attribute {name!r}: "
        "tilecore does not provide this part of TileLang"
    )


class _Unavailable(Protocol):
    """What `deferred` returns for a component that is not installed."""

    unavailable: bool  # True: calling it raises UnsupportedFeatureError

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Raise UnsupportedFeatureError."""


def deferred(module: str, attr: str, feature: str):
    """`module.attr` when that tilecore component is installed, else a function that raises
    UnsupportedFeatureError naming `feature` when it is called (so a file that imports the name
    but does not use it still runs)."""
    try:
        return optional_import(module, attr, feature)
    except UnsupportedFeatureError as err:
        reason = err

    def unavailable(*args, **kwargs):
        raise reason

    unavailable.__name__ = attr
    stand_in = cast(_Unavailable, unavailable)
    stand_in.unavailable = True
    stand_in.__doc__ = f"Unavailable: {reason.message}"
    return stand_in


def optional_import(module: str, attr: str, feature: str):
    """`module.attr` from another tilecore component, or UnsupportedFeatureError naming `feature`."""
    try:
        mod = importlib.import_module(module)
    except ImportError:
        raise UnsupportedFeatureError("tilecore", f"{feature}: {module} is not installed") from None
    try:
        return getattr(mod, attr)
    except AttributeError:
        raise UnsupportedFeatureError("tilecore", f"{feature}: {module} has no {attr}") from None


__all__ = [
    "jit",
    "compile",
    "cdiv",
    "PassConfigKey",
    "TensorSupplyType",
    "language",
    "map_target",
    *_SUBMODULES,
    *_LAZY,
]
