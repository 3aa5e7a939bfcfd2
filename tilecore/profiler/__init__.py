"""The profiler: time a compiled kernel on its device and relate the time to the device's peak.

`kernel.get_profiler().do_bench()` (TileLang's spelling) returns the median time
in milliseconds; `tilecore.bench(kernel, *args)` returns a BenchResult (median,
interquartile spread, TFLOP/s and GB/s from the Tile IR's work, and the fraction
of the device's peak when the backend's Timer states it); `tile bench` prints it.
How runs are timed is the backend's business (`tilecore_timer` hook, timer.py).
"""
from .bench import BenchResult, Profiler, bench, compare_outputs, outputs_of, random_inputs  # noqa: F401
from .timer import Peak, Timer, host_cpu_name, timer_for  # noqa: F401
from .work import Work, work_of  # noqa: F401
