"""`tilelang.autotuner`: tilecore's autotuner (tilecore.autotune) under TileLang's module name.

Without tilecore.autotune installed, `@autotune(...)` still decorates (so a file that
defines tuned variants imports), and calling the decorated function raises
UnsupportedFeatureError naming the autotuner.
"""

from typing import Any, Callable, Protocol, cast

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
        self._eager_tuners = {}  # (given pairs, value names) -> tuner of an eager kernel's factory
        self._full = self._narrowed(())
        self._last = self._full if self._full is not None else func  # the latest call's tuner (its report, ...)

    def _agreeing(self, given):
        """The configs that agree with the given (name, value) pairs, without those names."""
        fixed = dict(given)
        rest = []
        for c in self._configs:
            if all(c.get(k, v) == v for k, v in fixed.items()):
                left = {k: v for k, v in c.items() if k not in fixed}
                if left not in rest:
                    rest.append(left)
        return rest

    def _narrowed(self, given):
        if given not in self._tuned:
            rest = self._agreeing(given)
            options = dict(self._options, configs=rest)
            eager = hasattr(self._func, "as_factory")  # tuned per call, over its sizes (_eager_kernel)
            self._tuned[given] = self._real(**options)(self._func) if rest and rest != [{}] and not eager else None
        return self._tuned[given]

    def _eager_kernel(self, values, given):
        """The tuned Kernel of an eager-style kernel for `values` (its Python parameters and T.const
        sizes): the tuned parameters not given are chosen by tilecore.autotune."""
        rest = self._agreeing(given)
        if not rest or rest == [{}]:
            return None
        tuned = {k for c in rest for k in c}
        fixed = {k: v for k, v in values.items() if k not in tuned}
        names = tuple(fixed) + tuple(sorted(tuned))
        key = (given, names)
        if key not in self._eager_tuners:
            factory = self._func.as_factory(names, {**fixed, **rest[0]})
            self._eager_tuners[key] = self._real(**dict(self._options, configs=rest))(factory)
        self._last = self._eager_tuners[key]
        return self._last(**fixed)

    def __call__(self, *args, **kwargs):
        if hasattr(self._func, "bind_call"):  # an eager-style kernel called with its arrays
            named = self._func.signature.bind_partial(*args, **kwargs).arguments
            given = tuple(sorted((k, named[k]) for k in self._keys if k in named))
            values, tensors = self._func.bind_call(args, kwargs, leave_out=self._keys)
            kernel = self._eager_kernel(values, given)
            if kernel is None:
                return self._func(*args, **kwargs)
            return kernel(*self._func.in_order(tensors))
        given = tuple(sorted((k, kwargs[k]) for k in self._keys if k in kwargs))
        tuned = self._narrowed(given) if given else self._full
        if tuned is None:  # every tuned parameter given, or no config agrees: run as called
            return self._func(*args, **kwargs)
        self._last = tuned
        return tuned(*args, **kwargs)

    def compile(self, **values):
        """TileLang's `tuned.compile(**values)` of an eager-style kernel (Python parameters and
        T.const sizes by name): with every tuned parameter given, that configuration's Kernel;
        otherwise the others are tuned first."""
        if not hasattr(self._func, "as_factory"):
            raise UnsupportedFeatureError(
                "tilecore",
                f"{getattr(self._func, '__name__', 'this')} has no "
                ".compile: it is not an eager-style @tilelang.jit kernel",
            )
        given = tuple(sorted((k, values[k]) for k in self._keys if k in values))
        py, _ = self._func._split(values)  # defaults of the Python parameters filled in
        kernel = self._eager_kernel({**py, **values}, given) if len(given) < len(self._keys) else None
        return kernel if kernel is not None else self._func.compile(**values)

    def __getattr__(self, name):
        return getattr(self._last, name)


class _Tuned(Protocol):
    """A tuned kernel whose autotuner is not installed: calling or compiling it raises."""

    compile: Callable[..., Any]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Raise UnsupportedFeatureError."""


def _unavailable_wrapper(func, raiser):
    import functools

    @functools.wraps(func)
    def tuned(*args, **kwargs):
        raiser()

    stand_in = cast(_Tuned, tuned)
    stand_in.compile = raiser
    return stand_in


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return optional_import("tilecore.autotune", name, f"tilelang.autotuner.{name}")
