"""`tilelang.profiler`: tilecore's profiler (tilecore.profiler) under TileLang's module name.

Without tilecore.profiler installed, `do_bench` raises UnsupportedFeatureError when called.
"""
from . import deferred, optional_import

do_bench = deferred("tilecore.profiler", "do_bench", "TileLang's profiler (tilelang.profiler.do_bench)")


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return optional_import("tilecore.profiler", name, f"tilelang.profiler.{name}")
