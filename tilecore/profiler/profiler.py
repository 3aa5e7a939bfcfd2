"""Timing a compiled kernel: `kernel.get_profiler().do_bench()` and `tilecore.bench(kernel, *args)`.

A run is one call of the Kernel (output allocation included, as a user calls it).
Runs are timed by the backend's Timer (see timer.py). As in Triton and TileLang,
`warmup` and `rep` are time budgets in milliseconds, turned into run counts
from the time of one run; `n_warmup` / `n_repeat` give the counts directly. A run
slower than the budgets is not repeated beyond the runs that measured it (see run_counts).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..diagnostics import TileError
from ..ir import nodes as N
from .timer import Peak, Timer, timer_for
from .work import Work, work_of

MIN_REPEAT = 3  # the fewest timed runs with a median and a spread (unless the timer is exact)
MAX_RUNS = 10_000


@dataclass
class BenchResult:
    """The timings of one kernel on one device, and the rates they imply.

    times_ms: every timed run; spread_pct: the interquartile range as a
    percentage of the median. tflops / gbps use the Work derived from the
    Tile IR; the *_fraction fields divide them by the device's peak (None when
    the backend's Timer states no peak).
    """

    kernel: str
    target: str
    device: str
    method: str
    times_ms: List[float]
    n_warmup: int
    work: Work
    peak: Optional[Peak] = None
    extra: Dict[str, Any] = field(default_factory=dict)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.times_ms)

    @property
    def min_ms(self) -> float:
        return min(self.times_ms)

    @property
    def spread_pct(self) -> float:
        if len(self.times_ms) < 2 or self.median_ms == 0:
            return 0.0
        q1, _, q3 = statistics.quantiles(self.times_ms, n=4, method="inclusive")
        return 100.0 * (q3 - q1) / self.median_ms

    @property
    def tflops(self) -> Optional[float]:
        if self.work.flops is None or self.median_ms <= 0:
            return None
        return self.work.flops / (self.median_ms * 1e-3) / 1e12

    @property
    def gbps(self) -> Optional[float]:
        if self.work.bytes is None or self.median_ms <= 0:
            return None
        return self.work.bytes / (self.median_ms * 1e-3) / 1e9

    @property
    def flops_fraction(self) -> Optional[float]:
        if self.tflops is None or self.peak is None or not self.peak.flops_per_s:
            return None
        return self.tflops * 1e12 / self.peak.flops_per_s

    @property
    def bytes_fraction(self) -> Optional[float]:
        if self.gbps is None or self.peak is None or not self.peak.bytes_per_s:
            return None
        return self.gbps * 1e9 / self.peak.bytes_per_s

    def summary(self) -> str:
        """One line: median, spread, runs, rates and roofline fractions."""
        text = (
            f"{self.kernel} on {self.target} ({self.device}, {self.method}): median "
            f"{self.median_ms:.4g} ms, IQR {self.spread_pct:.1f}%, min {self.min_ms:.4g} ms, "
            f"{len(self.times_ms)} runs after {self.n_warmup} warm-up"
        )
        if self.tflops is not None:
            text += f"; {self.tflops:.3g} TFLOP/s"
            if self.flops_fraction is not None:
                text += f" ({100 * self.flops_fraction:.1f}% of peak)"
        if self.gbps is not None:
            text += f"; {self.gbps:.3g} GB/s"
            if self.bytes_fraction is not None:
                text += f" ({100 * self.bytes_fraction:.1f}% of peak)"
        return text

    def to_dict(self) -> Dict[str, Any]:
        """A JSON-able record (benchmark results, `tile bench --json`)."""
        return {
            "kernel": self.kernel,
            "target": self.target,
            "device": self.device,
            "method": self.method,
            "median_ms": self.median_ms,
            "min_ms": self.min_ms,
            "spread_pct": self.spread_pct,
            "runs": len(self.times_ms),
            "warmup": self.n_warmup,
            "times_ms": list(self.times_ms),
            "flops": self.work.flops,
            "bytes": self.work.bytes,
            "tflops": self.tflops,
            "gbps": self.gbps,
            "flops_fraction": self.flops_fraction,
            "bytes_fraction": self.bytes_fraction,
            **self.extra,
        }


def random_inputs(kernel, seed: int = 0) -> List[Any]:
    """Fresh random inputs for every input parameter of `kernel`, in its backend's memory
    (torch tensors where the kernel's `profiler_inputs` is "torch", as TileLang's profiler).

    Floats are uniform in [-1, 1), integers small (so integer GEMMs do not
    overflow), bools random. A dynamic dimension has no size to draw: pass the
    inputs yourself.
    """
    from ..ir.types import is_int4, storage_of
    from ..runtime.arrays import numpy_dtype
    from ..testing import to_device

    rng = np.random.default_rng(seed)
    space = kernel.backend.capabilities.memory_space
    arrays = []
    for param in kernel.inputs:
        dynamic = [d.name for d in param.shape if isinstance(d, N.Var)]
        if dynamic:
            raise TileError(
                f"kernel {kernel.name!r}: input {param.name!r} has the dynamic "
                f"dimension(s) {', '.join(dynamic)}, so the profiler cannot make inputs "
                f"for it; pass them (input_tensors=... or tilecore.bench(kernel, *arrays))"
            )
        dtype, shape = storage_of(param.dtype, tuple(int(d) for d in param.shape))
        host: np.ndarray
        if is_int4(param.dtype):  # any byte is two int4 values (-8..7): small enough for integer GEMMs
            host = rng.integers(-128, 128, size=shape).astype(np.int8)
        elif param.dtype == "bool":
            host = rng.random(shape) < 0.5
        elif param.dtype.startswith(("int", "uint")):
            low = 0 if param.dtype.startswith("uint") else -4
            host = rng.integers(low, 5, size=shape).astype(numpy_dtype(dtype))
        else:
            host = rng.uniform(-1.0, 1.0, size=shape).astype(numpy_dtype(dtype))
        arrays.append(to_device(host, space, getattr(kernel, "profiler_inputs", "numpy")))
    return arrays


def run_counts(
    timer: Timer,
    run: Callable[[], None],
    warmup_ms: float,
    rep_ms: float,
    n_warmup: Optional[int],
    n_repeat: Optional[int],
) -> Tuple[int, int, Optional[List[float]]]:
    """(n_warmup, n_repeat, probe): the given counts, else the budgets divided by one run's time,
    measured over MIN_REPEAT probe runs. When those probe runs alone take the whole warm-up and
    repetition budget (a run slower than the budget), they are the measurements: `probe` holds
    their seconds and no more runs are needed (n_warmup = 0: the caller's untimed first run warmed
    up). Otherwise probe is None."""
    if timer.deterministic:
        return (1 if n_warmup is None else n_warmup), (1 if n_repeat is None else n_repeat), None
    if n_warmup is not None and n_repeat is not None:
        return n_warmup, n_repeat, None
    probe = timer.measure(run, 0, MIN_REPEAT)
    if n_warmup is None and n_repeat is None and sum(probe) * 1e3 >= warmup_ms + rep_ms:
        return 0, len(probe), probe
    one_ms = max(statistics.median(probe) * 1e3, 1e-6)
    if n_warmup is None:
        n_warmup = min(MAX_RUNS, max(1, math.ceil(warmup_ms / one_ms)))
    if n_repeat is None:
        n_repeat = min(MAX_RUNS, max(MIN_REPEAT, math.ceil(rep_ms / one_ms)))
    return n_warmup, n_repeat, None


class Profiler:
    """Times one compiled Kernel (TileLang's `kernel.get_profiler()`).

    inputs: the kernel's input arrays; None draws random ones (`random_inputs`)
    on first use.
    """

    def __init__(self, kernel, inputs: Optional[Sequence[Any]] = None, seed: int = 0):
        self.kernel = kernel
        self.seed = seed
        self._inputs = list(inputs) if inputs is not None else None
        self._timer: Optional[Timer] = None

    @property
    def inputs(self) -> List[Any]:
        if self._inputs is None:
            self._inputs = random_inputs(self.kernel, self.seed)
        return self._inputs

    @property
    def timer(self) -> Timer:
        if self._timer is None:
            self._timer = timer_for(self.kernel.backend)
        return self._timer

    def bench(
        self,
        func: Optional[Callable] = None,
        warmup: float = 25,
        rep: float = 100,
        n_warmup: Optional[int] = None,
        n_repeat: Optional[int] = None,
        input_tensors: Optional[Sequence[Any]] = None,
    ) -> BenchResult:
        """Time `func(*inputs)` (default: the kernel) and return every measurement."""
        inputs = list(input_tensors) if input_tensors is not None else self.inputs
        target = func if func is not None else self.kernel
        _, bindings = self.kernel.check_arguments(inputs)

        def run():
            target(*inputs)

        run()  # loads the launcher and checks the arguments once, outside any timing
        timer = self.timer
        warm, reps, probe = run_counts(timer, run, warmup, rep, n_warmup, n_repeat)
        times = probe if probe is not None else timer.measure(run, warm, reps)
        work = work_of(self.kernel.ir, bindings)
        name = self.kernel.name if func is None else getattr(func, "__name__", "function")
        return BenchResult(
            name,
            self.kernel.target,
            timer.device(),
            timer.method,
            [t * 1e3 for t in times],
            warm,
            work,
            timer.peak(work.dtype),
        )

    def do_bench(
        self,
        func: Optional[Callable] = None,
        warmup: float = 25,
        rep: float = 100,
        n_warmup: Optional[int] = None,
        n_repeat: Optional[int] = None,
        input_tensors: Optional[Sequence[Any]] = None,
        **_ignored,
    ) -> float:
        """The median time of one run in milliseconds (TileLang's `Profiler.do_bench`)."""
        return self.bench(func, warmup, rep, n_warmup, n_repeat, input_tensors).median_ms

    def assert_allclose(
        self, reference_program: Callable, rtol: Optional[float] = None, atol: Optional[float] = None
    ) -> None:
        """Run the kernel and `reference_program` on the same inputs; raise on a mismatch.

        `reference_program(*inputs)` returns the outputs (one array or a tuple) in
        any array library; tolerances default to tilecore.testing's per dtype.
        """
        problem = compare_outputs(self.kernel, self.inputs, reference_program(*self.inputs), rtol, atol)
        if problem:
            raise AssertionError(problem)


def outputs_of(kernel, inputs: Sequence[Any]) -> tuple:
    """[(parameter, numpy array)] of what `kernel(*inputs)` produces: its out_idx outputs, or, for a
    kernel without any, the inputs it writes in place (run on copies, so `inputs` stay as they are)."""
    from ..runtime.kernel import written_buffer_names
    from ..testing import _copy_like, to_numpy

    if kernel.outputs:
        out = kernel(*inputs)
        out = out if isinstance(out, tuple) else (out,)
        return tuple(zip(kernel.outputs, (to_numpy(o) for o in out)))
    written = written_buffer_names(kernel.ir)
    copies = [_copy_like(x) for x in inputs]
    kernel(*copies)
    return tuple((p, to_numpy(c)) for p, c in zip(kernel.inputs, copies) if p.name in written)


def compare_outputs(
    kernel,
    inputs: Sequence[Any],
    expected,
    rtol: Optional[float] = None,
    atol: Optional[float] = None,
    scale_atol: bool = False,
) -> Optional[str]:
    """None when what `kernel(*inputs)` produces (see outputs_of) matches `expected` (an array or a
    tuple of them, in any array library), else a description of the first difference.

    Tolerances default to tilecore.testing's per dtype. scale_atol: multiply the default atol by
    max(1, max|expected|), for outputs of long reductions whose rounding error grows with their
    magnitude (a GEMM over K = 1024 accumulates in another order in every configuration)."""
    from ..testing import compare_arrays, to_numpy, tolerance

    got = outputs_of(kernel, inputs)
    want = tuple(to_numpy(w) for w in (expected if isinstance(expected, (tuple, list)) else (expected,)))
    if len(got) != len(want):
        return f"the kernel produced {len(got)} output(s), the reference {len(want)}"
    for (param, g), w in zip(got, want):
        param_atol = atol
        if param_atol is None and scale_atol and w.size and w.dtype.kind == "f":
            with np.errstate(invalid="ignore"):
                magnitude = float(np.nanmax(np.abs(w.astype(np.float64))))
            param_atol = tolerance(param.dtype)[1] * max(1.0, magnitude if np.isfinite(magnitude) else 1.0)
        problem = compare_arrays(param.name, g, w, param.dtype, rtol, param_atol)
        if problem:
            return problem
    return None


def bench(
    kernel, *args, warmup: float = 25, rep: float = 100, n_warmup: Optional[int] = None, n_repeat: Optional[int] = None
) -> BenchResult:
    """Time `kernel(*args)` (no args: random inputs) on its backend; see BenchResult."""
    from ..runtime.api import LazyKernel

    if isinstance(kernel, LazyKernel):
        kernel = kernel.compiled()
    return Profiler(kernel, list(args) if args else None).bench(
        warmup=warmup, rep=rep, n_warmup=n_warmup, n_repeat=n_repeat
    )
