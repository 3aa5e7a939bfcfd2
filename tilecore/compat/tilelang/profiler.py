"""`tilelang.profiler`: tilecore's profiler (tilecore.profiler) under TileLang's module name.

`do_bench(fn, warmup=25, rep=100, ...)` times a callable: tilecore.profiler's own
`do_bench` when it has one, else the default backend's Timer from tilecore.profiler
(`timer_for`), with run counts chosen so the warm-up and timed runs last about
`warmup` and `rep` milliseconds, as TileLang's does. Without tilecore.profiler
installed, calling it raises UnsupportedFeatureError.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Dict, List

from . import optional_import

_FEATURE = "TileLang's profiler (tilelang.profiler.do_bench)"
_MAX_RUNS = 1000


def do_bench(
    fn,
    warmup: float = 25,
    rep: float = 100,
    _n_warmup: int = 0,
    _n_repeat: int = 0,
    quantiles=None,
    return_mode: str = "mean",
    **_ignored,
):
    """Milliseconds per call of `fn` (mean by default; `quantiles=[...]` or `return_mode=` as TileLang)."""
    import importlib

    profiler = optional_import("tilecore.profiler", "timer_for", _FEATURE) and importlib.import_module(
        "tilecore.profiler"
    )
    own = getattr(profiler, "do_bench", None)
    if own is not None:
        return own(
            fn,
            warmup=warmup,
            rep=rep,
            _n_warmup=_n_warmup,
            _n_repeat=_n_repeat,
            quantiles=quantiles,
            return_mode=return_mode,
        )
    from ...plugin.registry import resolve

    timer = profiler.timer_for(resolve(None)[0])
    start = time.perf_counter()
    fn()  # one untimed call estimates the run time (and compiles what the first call compiles)
    estimate_ms = max((time.perf_counter() - start) * 1e3, 1e-3)
    n_warmup = _n_warmup or min(_MAX_RUNS, max(1, int(warmup / estimate_ms)))
    n_repeat = _n_repeat or min(_MAX_RUNS, max(1, int(rep / estimate_ms)))
    times = [t * 1e3 for t in timer.measure(fn, n_warmup, n_repeat)]
    if quantiles is not None:
        ordered = sorted(times)
        picks = [ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in quantiles]
        return picks[0] if len(picks) == 1 else picks
    summary: Dict[str, Callable[[List[float]], Any]] = {
        "mean": statistics.fmean,
        "median": statistics.median,
        "min": min,
        "max": max,
        "all": list,
    }
    if return_mode not in summary:
        raise ValueError(f"return_mode must be one of {sorted(summary)}, got {return_mode!r}")
    return summary[return_mode](times)


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return optional_import("tilecore.profiler", name, f"tilelang.profiler.{name}")
