"""Compiling candidates in worker processes, each compile isolated.

A candidate may crash a backend's compiler (a signal in its code generator) or hang it. Each
worker is a separate process (multiprocessing "spawn": no state shared with the
caller's threads) that compiles one candidate at a time and reports back over a
pipe; the caller waits with a deadline per candidate. A worker that dies or
misses the deadline is killed and replaced, and only its candidate is lost. The
compiled artifact lands in the shared on-disk compile cache, where the caller's
own `tilecore.compile` finds it.

concurrent.futures' ProcessPoolExecutor cannot do this: one dead worker breaks
the whole pool, and a running task cannot be stopped.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

from . import report as R


@dataclass
class CompileTask:
    """One candidate to compile: its Tile IR as JSON and the compile arguments."""

    index: int
    ir_json: str
    target: Optional[str]
    out_idx: Any
    options: Dict[str, Any]


@dataclass
class CompileOutcome:
    """What compiling one candidate gave: a status from report.py, a message, seconds taken,
    and (from workers that do not share the caller's disk) the cache entry to install."""

    index: int
    status: str
    message: str = ""
    seconds: float = 0.0
    cache_key: str = ""
    entry: bytes = b""


def explicit_plugin_modules() -> List[str]:
    """Names of the modules registered with `register_plugin` in this process: workers register
    them too, so that they compile with the same plugins as the caller."""
    from ..plugin import manager

    return [p.__name__ for p, *_ in manager._explicit if hasattr(p, "__spec__") and p.__spec__]


def register_plugin_modules(names: Sequence[str]) -> None:
    """Import and register each named plugin module (in a worker)."""
    import importlib

    from ..plugin import manager

    registered = {id(p) for p, *_ in manager._explicit}
    for name in names:
        module = importlib.import_module(name)
        if id(module) not in registered:  # the worker's copy of __main__ may have registered it
            manager.register_plugin(module, name)


def compile_one(task: CompileTask, with_entry: bool = False) -> CompileOutcome:
    """Compile one candidate in this process; errors become an outcome, never an exception."""
    from ..diagnostics import TileError
    from ..ir.serialize import loads
    from ..runtime import api
    from ..runtime.cache import encode_entry

    start = time.perf_counter()
    try:
        func = loads(task.ir_json)
        kernel = api.compile(func, target=task.target, out_idx=task.out_idx, **task.options)
        key, entry = "", b""
        if with_entry:
            key = api.compile_cache_key(func, task.target, task.out_idx, **task.options)
            entry = encode_entry(key, kernel.artifact)
        return CompileOutcome(task.index, R.OK, "", time.perf_counter() - start, key, entry)
    except TileError as err:
        return CompileOutcome(task.index, R.COMPILE_ERROR, str(err), time.perf_counter() - start)
    except Exception as err:  # a backend bug is this candidate's problem, not the tuner's
        return CompileOutcome(task.index, R.COMPILE_ERROR, f"{type(err).__name__}: {err}", time.perf_counter() - start)


def warm_up(target: Optional[str]) -> None:
    """Load the target's compiler (TVM, LLVM, ...) by compiling a tiny kernel, bypassing the
    cache: that one-time cost (seconds) must not count against the first candidate's timeout."""
    from ..runtime import api
    from .warmup import tiny_copy

    backend, full = api.resolve_target(target)
    try:
        api._codegen(tiny_copy, backend, full, api._codegen_options(full, (), {}))
    except Exception:  # a broken toolchain shows up as each candidate's compile error instead
        pass


def _worker_main(conn, plugin_modules: Sequence[str], target: Optional[str]) -> None:
    """A worker: register the caller's explicit plugins, load the compiler, say it is ready, then
    compile tasks until told to stop."""
    register_plugin_modules(plugin_modules)
    warm_up(target)
    conn.send("ready")
    while True:
        try:
            task = conn.recv()
        except EOFError:
            return
        if task is None:
            return
        conn.send(compile_one(task))


class _Worker:
    def __init__(self, context, plugin_modules, target):
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_worker_main, args=(child, plugin_modules, target), daemon=True)
        self.process.start()
        child.close()
        self.ready = False  # the first task's deadline starts when the worker has warmed up
        self.task: Optional[CompileTask] = None
        self.deadline = 0.0
        self.timeout = 0.0

    def stop(self, kill: bool = False) -> None:
        if kill:
            self.process.kill()
        else:
            try:
                self.conn.send(None)
            except OSError:
                pass
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()


def default_workers() -> int:
    """Processes to compile with: one per CPU core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def compile_isolated(
    tasks: Sequence[CompileTask],
    timeout: float,
    workers: Optional[int] = None,
    on_done: Optional[Callable[[CompileOutcome], None]] = None,
) -> List[CompileOutcome]:
    """Compile every task in a pool of isolated workers; one outcome per task, in task order."""
    outcomes: Dict[int, CompileOutcome] = {}
    for outcome in _run_pool(list(tasks), timeout, workers or default_workers()):
        outcomes[outcome.index] = outcome
        if on_done is not None:
            on_done(outcome)
    return [outcomes[t.index] for t in tasks]


def _run_pool(pending: List[CompileTask], timeout: float, size: int) -> Iterator[CompileOutcome]:
    context = multiprocessing.get_context("spawn")
    plugins = explicit_plugin_modules()
    target = pending[0].target if pending else None
    pool: List[_Worker] = []
    try:
        pending.reverse()  # pop() from the end keeps the tasks' order
        while pending or any(w.task is not None for w in pool):
            for worker in pool:  # give idle workers work
                if worker.task is None and pending:
                    _assign(worker, pending.pop(), timeout)
            while pending and len(pool) < size:
                worker = _Worker(context, plugins, target)
                pool.append(worker)
                _assign(worker, pending.pop(), timeout)
            busy = [w for w in pool if w.task is not None]
            first_deadline = min(w.deadline for w in busy)
            ready = wait(
                [w.conn for w in busy] + [w.process.sentinel for w in busy],
                timeout=None if first_deadline == float("inf") else max(0.0, first_deadline - time.monotonic()),
            )
            for worker in busy:
                outcome = _collect(worker, ready)
                if outcome is None:
                    continue
                yield outcome
                if outcome.status in (R.CRASHED, R.TIMEOUT):
                    pool.remove(worker)
    finally:
        for worker in pool:
            worker.stop(kill=worker.task is not None)


def _assign(worker: _Worker, task: CompileTask, timeout: float) -> None:
    worker.task = task
    worker.timeout = timeout
    worker.deadline = time.monotonic() + timeout if worker.ready else float("inf")
    worker.conn.send(task)


def _collect(worker: _Worker, ready) -> Optional[CompileOutcome]:
    """The outcome of `worker`'s task if it finished, died or ran out of time; else None."""
    task = worker.task
    if task is None:  # an idle worker has nothing to report
        return None
    if worker.conn in ready:
        try:
            outcome = worker.conn.recv()
            if outcome == "ready":
                worker.ready = True
                worker.deadline = time.monotonic() + worker.timeout
                return None
            worker.task = None
            return outcome
        except (EOFError, OSError):
            pass  # it died while sending: handled as a crash below
    elif worker.process.sentinel not in ready and time.monotonic() < worker.deadline:
        return None
    worker.process.join(timeout=0.5)
    if worker.process.is_alive():  # still compiling past the deadline
        worker.stop(kill=True)
        worker.task = None
        return CompileOutcome(
            task.index,
            R.TIMEOUT,
            f"compiling took longer than timeout={worker.timeout:g} s; the compiler process was killed",
        )
    code = worker.process.exitcode
    worker.stop(kill=True)
    worker.task = None
    when = "" if worker.ready else " while loading the compiler"
    return CompileOutcome(task.index, R.CRASHED, f"the compiler process died{when} ({_exit_text(code)})")


def _exit_text(code: Optional[int]) -> str:
    if code is None:
        return "no exit status"
    if code < 0:
        import signal

        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"
