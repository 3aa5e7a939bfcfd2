"""`tilecore.autotune(..., executor="ray")`: compile candidates as Ray tasks, time them on a Ray
worker that holds the target's device.

Ray places the work (`pip install tilecore[ray]`); nothing here schedules. Each
candidate is one task with no retries, so a compiler crash kills only that
task's worker and comes back as that candidate's failure; a task still running
`timeout` seconds after it was submitted is cancelled (its worker killed).
At most as many tasks as the cluster has CPUs are in flight, so the clock of a
task starts when a CPU is free for it; it includes loading the compiler on a
fresh Ray worker. Compiled artifacts travel back with the results and go into
the caller's compile cache, and to the timing worker, which may be on another
machine. The timing worker runs measure.measure_candidates unchanged, with one
GPU reserved when the backend's memory is not host memory.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Dict, List, Optional, Sequence

from ..diagnostics import TileError
from . import report as R
from .pool import CompileOutcome, CompileTask, compile_one, explicit_plugin_modules, register_plugin_modules


def _ray():
    try:
        import ray
    except ImportError:
        raise TileError("executor='ray' needs Ray: pip install 'tilecore[ray]' (or pip install ray)") from None
    return ray


def _compile_task(task: CompileTask, plugin_modules: Sequence[str]) -> CompileOutcome:
    """A Ray task: compile one candidate and return its outcome with the compile-cache entry."""
    register_plugin_modules(plugin_modules)
    return compile_one(task, with_entry=True)


class _Measurer:
    """A Ray actor that checks and times candidates where the device is."""

    def __init__(self, plugin_modules: Sequence[str]):
        register_plugin_modules(plugin_modules)

    def measure(self, candidates, target, out_idx, options, settings, entries):
        from .measure import measure_candidates

        return measure_candidates(candidates, target, out_idx, options, settings, entries)


class RayExecutor:
    """Compiles and measures on the Ray cluster at `address` (None: the running one, else a new
    local one whose workers import from this process's sys.path)."""

    def __init__(self, address: Optional[str] = None):
        ray = _ray()
        if not ray.is_initialized():
            path = os.pathsep.join(p for p in sys.path if p)
            ray.init(address=address, runtime_env={"env_vars": {"PYTHONPATH": path}}, log_to_driver=False)
        self.ray = ray
        self.plugins = explicit_plugin_modules()

    def compile(self, tasks: Sequence[CompileTask], timeout: float, on_done) -> List[CompileOutcome]:
        ray = self.ray
        remote = ray.remote(max_retries=0, num_cpus=1)(_compile_task)
        window = max(1, int(ray.cluster_resources().get("CPU", 1)))
        pending = list(reversed(tasks))
        running: Dict = {}  # ObjectRef -> (task, deadline)
        outcomes: Dict[int, CompileOutcome] = {}
        while pending or running:
            while pending and len(running) < window:
                task = pending.pop()
                running[remote.remote(task, self.plugins)] = (task, time.monotonic() + timeout)
            first_deadline = min(deadline for _, deadline in running.values())
            ready, _ = ray.wait(list(running), num_returns=1, timeout=max(0.0, first_deadline - time.monotonic()))
            finished = [(ref, self._result(ref, running[ref][0])) for ref in ready]
            now = time.monotonic()
            for ref, (task, deadline) in list(running.items()):
                if ref not in ready and now >= deadline:
                    ray.cancel(ref, force=True)
                    finished.append(
                        (
                            ref,
                            CompileOutcome(
                                task.index,
                                R.TIMEOUT,
                                f"compiling took longer than timeout={timeout:g} s; the Ray task was cancelled",
                            ),
                        )
                    )
            for ref, outcome in finished:
                running.pop(ref)
                outcomes[outcome.index] = outcome
                on_done(outcome)
        return [outcomes[t.index] for t in tasks]

    def _result(self, ref, task: CompileTask) -> CompileOutcome:
        ray = self.ray
        try:
            return ray.get(ref)
        except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError) as err:
            return CompileOutcome(task.index, R.CRASHED, f"the Ray worker compiling it died ({type(err).__name__})")
        except ray.exceptions.RayError as err:
            return CompileOutcome(
                task.index, R.CRASHED, f"the Ray task failed: {type(err).__name__}: {str(err).splitlines()[0]}"
            )

    def measure(self, candidates, target, out_idx, options, settings, entries, on_done):
        from ..runtime.api import resolve_target
        from .measure import install_entries

        install_entries(entries)  # the caller's own compile cache, for the winner's Kernel
        backend, _ = resolve_target(target)
        on_device = backend.capabilities.memory_space != "cpu"
        actor_class = self.ray.remote(num_cpus=1, num_gpus=1 if on_device else 0)(_Measurer)
        actor = actor_class.remote(self.plugins)
        try:
            results = self.ray.get(actor.measure.remote(list(candidates), target, out_idx, options, settings, entries))
        finally:
            self.ray.kill(actor)
        for result in results:
            on_done(result)
        return results
