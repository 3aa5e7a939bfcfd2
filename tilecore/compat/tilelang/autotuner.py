"""`tilelang.autotuner`: tilecore's autotuner (tilecore.autotune) under TileLang's module name.

Without tilecore.autotune installed, `@autotune(...)` still decorates (so a file that
defines tuned variants imports), and calling the decorated function raises
UnsupportedFeatureError naming the autotuner.
"""
from . import deferred, optional_import

_FEATURE = "TileLang's autotuner (tilelang.autotune)"


def autotune(*args, **kwargs):
    """`@autotune(configs=..., warmup=..., rep=...)` through tilecore.autotune."""
    real = deferred("tilecore.autotune", "autotune", _FEATURE)
    if not getattr(real, "unavailable", False):
        return real(*args, **kwargs)
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return _unavailable_wrapper(args[0], real)
    return lambda func: _unavailable_wrapper(func, real)


def _unavailable_wrapper(func, raiser):
    import functools

    @functools.wraps(func)
    def tuned(*args, **kwargs):
        raiser()
    tuned.compile = raiser
    return tuned


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return optional_import("tilecore.autotune", name, f"tilelang.autotuner.{name}")
