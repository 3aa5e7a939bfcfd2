"""Checking and timing the compiled candidates, in the process that holds the device.

Every candidate runs once on the same inputs and is compared with the
reference: the user's `ref_prog(*inputs)` when given, else the reference
interpreter running the first compiled candidate (all configurations of one
kernel must compute the same function). A candidate that fails to run or
differs is skipped; the others are timed with the profiler, in interleaved
rounds. This function gets only picklable arguments, so the Ray executor runs
it unchanged on a worker that holds the device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import report as R


@dataclass
class MeasureSettings:
    """How to check and time: profiler budgets (ms), tolerances, the user's reference and inputs."""

    warmup: float = 25
    rep: float = 100
    rtol: Optional[float] = None
    atol: Optional[float] = None
    skip_check: bool = False
    ref_prog: Optional[Callable] = None
    supply_prog: Optional[Callable] = None
    inputs: Optional[List[np.ndarray]] = None  # host copies of the user's inputs, if given
    seed: int = 0
    rounds: int = 3  # interleaved timing rounds (see measure_candidates)
    runoff: float = 0.10  # candidates within this fraction of the fastest are timed again...
    finalists: int = 4  # ...at most this many (0: no run-off)


@dataclass
class Measurement:
    """One candidate's check and timing: status from report.py, message, median and spread."""

    index: int
    status: str
    message: str = ""
    median_ms: Optional[float] = None
    spread_pct: Optional[float] = None
    method: str = ""
    device: str = ""
    runoff: bool = False  # timed again among the finalists; median_ms is from the run-off


def install_entries(entries: Dict[str, bytes]) -> None:
    """Put compile-cache entries made on other machines into this machine's compile cache."""
    from ..runtime.cache import DiskCache, cache_enabled, decode_entry

    if not entries or not cache_enabled():
        return
    disk = DiskCache()
    for key, data in entries.items():
        if disk.get(key) is None:
            disk.put(key, decode_entry(data, key))


def _inputs_for(kernel, settings: MeasureSettings) -> List[Any]:
    from ..profiler import random_inputs
    from ..testing import to_device

    space = kernel.backend.capabilities.memory_space
    if settings.inputs is not None:
        return [to_device(np.array(x, copy=True), space) for x in settings.inputs]
    if settings.supply_prog is not None:
        return list(settings.supply_prog(kernel.inputs))
    return random_inputs(kernel, settings.seed)


def _reference_outputs(kernel, inputs, settings: MeasureSettings):
    """The expected outputs on `inputs`: the user's reference, else the interpreter's."""
    from ..profiler import outputs_of
    from ..runtime import api
    from ..testing import to_numpy

    if settings.ref_prog is not None:
        expected = settings.ref_prog(*inputs)
        return tuple(to_numpy(e) for e in (expected if isinstance(expected, (tuple, list)) else (expected,)))
    reference = api.compile(kernel.ir, target="reference", out_idx=list(kernel.out_idx))
    host = [to_numpy(x) for x in inputs]
    return tuple(array for _, array in outputs_of(reference, host))


def measure_candidates(
    candidates: Sequence[Tuple[int, str]],
    target: Optional[str],
    out_idx,
    options: Dict[str, Any],
    settings: MeasureSettings,
    entries: Optional[Dict[str, bytes]] = None,
    on_done: Optional[Callable[[Measurement], None]] = None,
) -> List[Measurement]:
    """Check, then time each compiled candidate ((index, Tile IR JSON)); one Measurement each, in order.

    Survivors are timed in `settings.rounds` interleaved rounds (each round: warm-up, then
    rep / rounds ms of runs, candidate after candidate), and each one's median is taken over
    all its runs: load from other processes that comes and goes then hits every candidate,
    not just the one that happened to be timed at that moment. Then a run-off: the candidates
    within `settings.runoff` of the fastest (at most `settings.finalists`) are timed again, in
    as many interleaved rounds among themselves, and their medians come from those runs only. A
    candidate that looked fastest because a quiet moment fell on its turn must win again
    head to head (on a 16-core VM whose timings swung 8%, the pick was 1.055x the best without).
    """
    install_entries(entries or {})
    results: Dict[int, Measurement] = {}
    survivors = _checked(candidates, target, out_idx, options, settings, results, on_done)
    if survivors:
        inputs = survivors[0][2]
        _time_in_rounds([(i, k) for i, k, _ in survivors], inputs, settings, results, on_done)
    return [results[index] for index, _ in candidates]


def _checked(candidates, target, out_idx, options, settings, results, on_done) -> List[tuple]:
    """[(index, kernel, inputs)] of the candidates that ran and matched the reference; the others'
    Measurements go into `results`."""
    from ..ir.serialize import loads
    from ..profiler import compare_outputs
    from ..runtime import api

    survivors = []
    inputs = expected = None
    for index, ir_json in candidates:
        try:
            kernel = api.compile(loads(ir_json), target=target, out_idx=out_idx, **options)
            if inputs is None:  # both come from the first candidate that compiled, or neither
                fresh = _inputs_for(kernel, settings)
                expected = None if settings.skip_check else _reference_outputs(kernel, fresh, settings)
                inputs = fresh
            problem = (
                None
                if expected is None
                else compare_outputs(kernel, inputs, expected, settings.rtol, settings.atol, scale_atol=True)
            )
        except Exception as err:  # anything this candidate does wrong skips it, never the tuning
            results[index] = Measurement(index, R.RUN_ERROR, f"{type(err).__name__}: {err}")
        else:
            if problem is None:
                survivors.append((index, kernel, inputs))
                continue
            results[index] = Measurement(index, R.WRONG, problem)
        if on_done is not None:
            on_done(results[index])
    return survivors


def _time_in_rounds(survivors, inputs, settings: MeasureSettings, results, on_done) -> None:
    from ..profiler import Profiler

    profilers = {index: Profiler(kernel, inputs) for index, kernel in survivors}
    deterministic = profilers[survivors[0][0]].timer.deterministic
    rounds = 1 if deterministic else max(1, settings.rounds)
    indices = [index for index, _ in survivors]
    runs = _rounds(indices, profilers, settings, rounds, results)
    medians = {i: _merged(r).median_ms for i, r in runs.items() if i not in results}
    finalists = _finalists(medians, settings) if not deterministic else []
    if len(finalists) > 1:
        runs.update(_rounds(finalists, profilers, settings, rounds, results))
    for index in indices:
        if index not in results:
            merged = _merged(runs[index])
            results[index] = Measurement(
                index,
                R.OK,
                "",
                merged.median_ms,
                merged.spread_pct,
                merged.method,
                merged.device,
                runoff=index in finalists and len(finalists) > 1,
            )
        if on_done is not None:
            on_done(results[index])


def _rounds(indices, profilers, settings: MeasureSettings, rounds: int, results) -> Dict[int, list]:
    """{index: [BenchResult per round]}: `rounds` interleaved rounds over the candidates; one that
    fails now gets its RUN_ERROR Measurement in `results` (it ran once already: still its own)."""
    runs: Dict[int, list] = {index: [] for index in indices}
    for _ in range(rounds):
        for index in indices:
            if index in results:
                continue
            try:
                runs[index].append(profilers[index].bench(warmup=settings.warmup, rep=settings.rep / rounds))
            except Exception as err:
                results[index] = Measurement(index, R.RUN_ERROR, f"{type(err).__name__}: {err}")
    return runs


def _merged(bench_results):
    """One BenchResult holding the runs of several."""
    from ..profiler import BenchResult

    first = bench_results[0]
    times = [t for r in bench_results for t in r.times_ms]
    return BenchResult(first.kernel, first.target, first.device, first.method, times, first.n_warmup, first.work)


def _finalists(medians: Dict[int, float], settings: MeasureSettings) -> List[int]:
    """The candidates timed again: within `runoff` of the fastest median, at most `finalists`."""
    if not medians or settings.finalists < 2 or settings.runoff <= 0:
        return []
    best = min(medians.values())
    close = sorted((m, i) for i, m in medians.items() if m <= best * (1 + settings.runoff))
    return [i for _, i in close[: settings.finalists]]
