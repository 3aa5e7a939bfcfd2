"""`tilelang.autotuner`: tilecore's autotuner (tilecore.autotune) under TileLang's module name.

Without tilecore.autotune installed, `@autotune(...)` still decorates (so a file that
defines tuned variants imports), and calling the decorated function raises
UnsupportedFeatureError naming the autotuner.
"""
from ...diagnostics import UnsupportedFeatureError
from . import deferred, optional_import

_FEATURE = "TileLang's autotuner (tilelang.autotune)"


def autotune(*args, **kwargs):
    """`@autotune(configs=..., warmup=..., rep=...)` through tilecore.autotune."""
    real = deferred("tilecore.autotune", "autotune", _FEATURE)
    if not getattr(real, "unavailable", False):
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return real(args[0])
        configs = kwargs.get("configs")
        if args or not isinstance(configs, (list, tuple)) or not configs:
            return real(*args, **kwargs)  # configs made by a function: tilecore.autotune's own rules
        return lambda func: _GivenValuesNarrowTuning(real, kwargs, func)
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return _unavailable_wrapper(args[0], real)
    return lambda func: _unavailable_wrapper(func, real)


class _GivenValuesNarrowTuning:
    """TileLang's rule for tuned parameters a call passes itself: a call giving every tuned
    parameter runs that configuration without tuning; one giving some of them tunes the others
    over the configs that agree with the given values (tilecore.autotune does the tuning)."""

    def __init__(self, real, options, func):
        self._real, self._options, self._func = real, options, func
        self._configs = [dict(c) for c in options["configs"]]
        self._keys = frozenset(k for c in self._configs for k in c)
        self._tuned = {}  # given (name, value) pairs -> the tuned function for the rest
        self._full = self._narrowed(())
        self._last = self._full  # the tuned function of the latest call (its report, ...)

    def _narrowed(self, given):
        if given not in self._tuned:
            fixed = dict(given)
            rest = []
            for c in self._configs:
                if all(c.get(k, v) == v for k, v in fixed.items()):
                    left = {k: v for k, v in c.items() if k not in fixed}
                    if left not in rest:
                        rest.append(left)
            options = dict(self._options, configs=rest)
            self._tuned[given] = self._real(**options)(self._func) if rest and rest != [{}] else None
        return self._tuned[given]

    def __call__(self, *args, **kwargs):
        given = tuple(sorted((k, kwargs[k]) for k in self._keys if k in kwargs))
        tuned = self._narrowed(given) if given else self._full
        if tuned is None:  # every tuned parameter given, or no config agrees: run as called
            return self._func(*args, **kwargs)
        self._last = tuned
        return tuned(*args, **kwargs)

    def compile(self, *args, **kwargs):
        """TileLang's `tuned.compile(**values)` of an eager-style kernel: with every tuned
        parameter given, that configuration's Kernel (the function's own `.compile`); tuning
        the others through `.compile` is an UnsupportedFeatureError."""
        missing = sorted(self._keys - set(kwargs))
        if missing:
            raise UnsupportedFeatureError(
                "tilecore", f"tuning {getattr(self._func, '__name__', 'a kernel')}.compile(...) over "
                f"{', '.join(missing)} (give every tuned parameter to .compile, or call the tuned "
                "factory-style function)")
        own = getattr(self._func, "compile", None)
        if own is None:
            raise UnsupportedFeatureError("tilecore", f"{getattr(self._func, '__name__', 'this')} has no "
                                          ".compile: it is not an eager-style @tilelang.jit kernel")
        return own(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._last, name)


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
