"""The profiler: time a compiled kernel on its device and relate the time to the device's peak.

`kernel.get_profiler().do_bench()` (TileLang's spelling) returns the median time
in milliseconds; `tilecore.bench(kernel, *args)` returns a BenchResult (median,
interquartile spread, TFLOP/s and GB/s from the Tile IR's work, and the fraction
of the device's peak when the backend's Timer states it); `tile bench` prints it.
How runs are timed is the backend's business (`tilecore_timer` hook, timer.py).
"""

from .timer import Peak, Timer, host_cpu_name, timer_for  # noqa: F401

_LAZY = {
    name: "profiler" for name in ("BenchResult", "Profiler", "bench", "compare_outputs", "outputs_of", "random_inputs")
}
_LAZY.update(Work="work", work_of="work")


def __getattr__(name):
    # Lazy: loading a tuned kernel from the caches needs only the Timer (for the device's name).
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'tilecore.profiler' has no attribute {name!r}")
