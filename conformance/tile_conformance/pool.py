"""Running programs in isolated, reused worker processes with a per-program timeout.

The backend under test only ever runs inside a worker (`worker.py`), never in
the suite's own process. A worker that dies while running a program (any exit
status, a signal such as SIGSEGV, os._exit) or exceeds the per-program
timeout (it is killed) makes that program a failure with its message, and a
fresh worker takes the next program: a crashing or hanging backend can fail
programs, never end the run or skip the report.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from typing import IO, Callable, List, Optional, Protocol, Sequence

from .execute import FAIL, Outcome
from .programs import Program
from .repro import program_record
from .worker import read_message, write_message

DEFAULT_TIMEOUT = 120.0  # seconds per program (compile + both runs); a fresh worker also gets STARTUP_TIMEOUT
STARTUP_TIMEOUT = 180.0
STDERR_TAIL = 1500


def default_jobs() -> int:
    """Workers used when none is asked for: two where there are two cores or more."""
    return max(1, min(2, os.cpu_count() or 1))


def _describe_exit(code: Optional[int]) -> str:
    if code is None:
        return "did not exit"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name}"
    return f"exited with status {code}"


def _pipe(stream: Optional[IO[bytes]]) -> IO[bytes]:
    """A worker's stdin or stdout (always a pipe: the workers are started with both)."""
    if stream is None:
        raise AssertionError("the conformance worker was started without a pipe")
    return stream


class ProgramPool(Protocol):
    """What the runner needs of a pool of program runners (WorkerPool, ray_shard.RayShardPool)."""

    backend: str
    tier: str
    jobs: int
    timeout: float

    def run(
        self,
        programs: Sequence[Program],
        on_result: Optional[Callable[[int, Outcome], bool]] = None,
        order: Optional[Sequence[int]] = None,
    ) -> List[Optional[Outcome]]:
        """Outcomes of `programs` in their order (None: not run, after on_result stopped the run);
        `order`: the positions in the order to start them (default: first to last)."""

    def run_one(self, program: Program) -> Outcome:
        """The outcome of one program (a shrinking candidate)."""

    def close(self) -> None:
        """Stop the pool's workers."""


class _Worker:
    """One worker process; `stderr` goes to a file whose tail explains crashes."""

    def __init__(self, backend: str):
        self.err = tempfile.TemporaryFile()
        env = dict(os.environ)
        # the worker sees the same modules and plugins as this process (tests add entries to sys.path)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tile_conformance.worker", backend],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.err,
            env=env,
            start_new_session=True,
        )
        self.job: Optional[int] = None
        self.deadline = 0.0
        self.ready = False

    def fileno(self) -> int:
        return _pipe(self.proc.stdout).fileno()

    def send(self, message) -> None:
        write_message(_pipe(self.proc.stdin).fileno(), message)

    def receive(self):
        return read_message(self.fileno())

    def stderr_tail(self) -> str:
        try:
            self.err.seek(0, os.SEEK_END)
            size = self.err.tell()
            self.err.seek(max(0, size - STDERR_TAIL))
            return self.err.read().decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            return ""

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        self.proc.wait()
        self.close_files()

    def close_files(self) -> None:
        for f in (self.proc.stdin, self.proc.stdout, self.err):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass

    def stop(self) -> None:
        """Close the pipe (the worker exits at EOF); kill it if it does not."""
        try:
            _pipe(self.proc.stdin).close()
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


class WorkerPool:
    """`jobs` reusable workers; `run(programs)` runs them on `self.backend` at `self.tier` and returns one
    Outcome per program. Several runs (backends) may share a pool: set `backend` / `tier` between them."""

    def __init__(
        self, backend: str, tier: str = "execute", jobs: Optional[int] = None, timeout: float = DEFAULT_TIMEOUT
    ):
        self.backend, self.tier = backend, tier
        self.options: dict = {}  # compile options of every program (set by the runner)
        self.jobs = max(1, jobs or default_jobs())
        self.timeout = timeout
        self.workers: List[_Worker] = []
        self.startup_failures = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def close(self) -> None:
        for w in self.workers:
            w.stop()
        self.workers = []

    def run_one(self, program: Program) -> Outcome:
        """Run a single program (used while shrinking)."""
        outcome = self.run([program])[0]
        if outcome is None:  # run() leaves None only where on_result stopped it, and there is none
            raise AssertionError("the worker pool returned no outcome for a single program")
        return outcome

    def run(
        self,
        programs: Sequence[Program],
        on_result: Optional[Callable[[int, Outcome], bool]] = None,
        order: Optional[Sequence[int]] = None,
    ) -> List[Optional[Outcome]]:
        """Outcomes of `programs` in their order, started in `order` (default: first to last).
        `on_result(i, outcome)` returning True stops the run early (remaining programs get None)."""
        results: List[Optional[Outcome]] = [None] * len(programs)
        pending = list(range(len(programs)) if order is None else order)[::-1]
        stop = False
        while (pending and not stop) or any(w.job is not None for w in self.workers):
            while pending and not stop and (self._idle() or len(self.workers) < self.jobs):
                i = pending.pop()
                early = self._dispatch(i, programs[i])
                if early is not None:
                    results[i] = early
                    stop = bool(on_result and on_result(i, early)) or stop
            for i, outcome in self._collect(programs):
                results[i] = outcome
                stop = bool(on_result and on_result(i, outcome)) or stop
        return results

    # ------------------------------------------------------------------ scheduling

    def _idle(self) -> Optional[_Worker]:
        return next((w for w in self.workers if w.job is None), None)

    def _start(self) -> _Worker:
        w = _Worker(self.backend)
        self.workers.append(w)
        return w

    def _dispatch(self, i: int, program: Program) -> Optional[Outcome]:
        """Hand program i to a worker (starting one if needed); an Outcome when that is impossible."""
        w = self._idle() or self._start()
        if not w.ready:
            problem = self._await_ready(w)
            if problem:
                self._discard(w)
                return Outcome(FAIL, sorted(program.features), problem, error_kind="crash")
        try:
            w.send(
                {
                    "index": i,
                    "program": program_record(program),
                    "tier": self.tier,
                    "backend": self.backend,
                    "options": self.options,
                    "cache_dir": os.environ.get("TILECORE_CACHE_DIR", ""),
                }
            )
        except OSError:
            self._discard(w)
            return (
                self._dispatch(i, program)
                if self.startup_failures < 3
                else Outcome(
                    FAIL,
                    sorted(program.features),
                    "run failed: the worker process could not take the program",
                    error_kind="crash",
                )
            )
        w.job, w.deadline = i, time.monotonic() + self.timeout
        return None

    def _await_ready(self, w: _Worker) -> str:
        """'' once the worker has loaded the backend; otherwise why it could not."""
        if self.startup_failures >= 3:
            return "run failed: the worker process could not start three times in a row; not retried"
        r, _, _ = select.select([w], [], [], STARTUP_TIMEOUT)
        try:
            msg = w.receive() if r else {"ready": False, "error": f"no answer within {STARTUP_TIMEOUT:.0f} s"}
        except (EOFError, OSError):
            w.proc.wait()
            msg = {
                "ready": False,
                "error": f"the worker {_describe_exit(w.proc.returncode)} while loading "
                f"the backend; its stderr: {w.stderr_tail()[-500:]}",
            }
        if msg.get("ready"):
            w.ready = True
            self.startup_failures = 0
            return ""
        self.startup_failures += 1
        return f"run failed: the worker process could not load backend {self.backend!r}: {msg.get('error')}"

    def _discard(self, w: _Worker) -> None:
        w.kill()
        self.workers.remove(w)

    def _collect(self, programs: Sequence[Program]):
        """Wait for the next answers (or deaths, or timeouts) of busy workers; yield (index, Outcome)."""
        busy = [w for w in self.workers if w.job is not None]
        if not busy:
            return
        now = time.monotonic()
        wait = max(0.0, min(w.deadline for w in busy) - now)
        readable, _, _ = select.select(busy, [], [], wait)
        for w in readable:
            i = w.job
            if i is None:  # busy workers have a job
                continue
            try:
                msg = w.receive()
            except (EOFError, OSError):
                w.proc.wait()
                tail = w.stderr_tail()
                self._discard(w)
                yield (
                    i,
                    Outcome(
                        FAIL,
                        sorted(programs[i].features),
                        f"run failed: the worker process {_describe_exit(w.proc.returncode)} while "
                        f"running this program (a crash of the backend)"
                        + (f"; its stderr ends with: {tail[-600:]}" if tail else ""),
                        error_kind="crash",
                    ),
                )
                continue
            w.job = None
            yield msg["index"], msg["outcome"]
        now = time.monotonic()
        for w in [w for w in busy if w.job is not None and w not in readable and now >= w.deadline]:
            i = w.job
            if i is None:
                continue
            self._discard(w)
            yield (
                i,
                Outcome(
                    FAIL,
                    sorted(programs[i].features),
                    f"run failed: timed out after {self.timeout:g} s (the worker was killed: the "
                    "backend hangs or is far too slow)",
                    error_kind="timeout",
                    seconds=self.timeout,
                ),
            )
