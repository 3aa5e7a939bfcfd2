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
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return real(args[0])
        decorate = real(*args, **kwargs)
        configs = kwargs.get("configs")
        keys = frozenset(configs[0]) if isinstance(configs, (list, tuple)) and configs else frozenset()
        return lambda func: _GivenConfigSkipsTuning(decorate(func), func, keys)
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return _unavailable_wrapper(args[0], real)
    return lambda func: _unavailable_wrapper(func, real)


class _GivenConfigSkipsTuning:
    """TileLang's rule: a call that passes every tuned parameter runs that configuration
    without tuning; other calls tune (tilecore.autotune)."""

    def __init__(self, tuned, func, keys):
        self._tuned, self._func, self._keys = tuned, func, keys

    def __call__(self, *args, **kwargs):
        if self._keys and self._keys <= kwargs.keys():
            return self._func(*args, **kwargs)
        return self._tuned(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._tuned, name)


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
