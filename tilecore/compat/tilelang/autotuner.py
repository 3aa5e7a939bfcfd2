"""`tilelang.autotuner`: tilecore's autotuner (tilecore.autotune) under TileLang's module name.

Importing it without tilecore.autotune installed raises UnsupportedFeatureError.
"""
from . import optional_import

autotune = optional_import("tilecore.autotune", "autotune", "TileLang's autotuner (tilelang.autotuner)")


def __getattr__(name):
    return optional_import("tilecore.autotune", name, f"tilelang.autotuner.{name}")
