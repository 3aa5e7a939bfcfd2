"""tilecore: a Python-embedded tile language for accelerator kernels.

`import tilecore` is light: it never imports TVM or a backend plugin.
"""

__version__ = "0.1.0"

from .ir.version import TILE_IR_VERSION  # noqa: E402,F401


def __getattr__(name):
    # Lazy so that importing tilecore stays fast; see tilecore.runtime.api.
    if name in ("jit", "compile", "Kernel", "default_target", "lower", "trace"):
        from .runtime import api

        return getattr(api, name)
    if name == "bench":
        from .profiler import bench

        return bench
    if name in (
        "language",
        "testing",
        "plugin",
        "runtime",
        "ir",
        "interp",
        "passes",
        "frontend",
        "profiler",
        "autotune",
    ):
        import importlib

        return importlib.import_module("." + name, __name__)
    raise AttributeError(f"module 'tilecore' has no attribute {name!r}")
