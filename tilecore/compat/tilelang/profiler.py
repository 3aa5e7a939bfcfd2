"""`tilelang.profiler`: tilecore's profiler (tilecore.profiler) under TileLang's module name.

Importing it without tilecore.profiler installed raises UnsupportedFeatureError.
"""
from . import optional_import

do_bench = optional_import("tilecore.profiler", "do_bench", "TileLang's profiler (tilelang.profiler.do_bench)")


def __getattr__(name):
    return optional_import("tilecore.profiler", name, f"tilelang.profiler.{name}")
