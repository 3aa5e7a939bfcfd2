"""`@tilecore.autotune(configs=...)` over `@tilecore.jit`: pick the fastest configuration, remember it.

Calling the tuned factory with the arguments that are not tuned (`matmul(M, N, K)`):
  1. looks the winner up in memory, then in the tuning cache on disk (store.py);
  2. otherwise builds every configuration's Tile IR here (the factory is Python and cheap),
     compiles the candidates in isolated workers (pool.py, or Ray: ray_executor.py),
     checks and times the survivors (measure.py), and stores the winner;
  3. returns the winner's Kernel, compiled through the compile cache.

The tuning key covers the factory's code, the arguments that select an entry
(`key=`, as in Triton; default: every argument that is not tuned, which fixes the
shapes and dtypes), the configuration space, jit options, the backend and its
version, the full target, the device and every loaded plugin's version.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from ..diagnostics import TileError, user_facing
from ..runtime.cache import canonical_encoding
from . import report as R
from .measure import MeasureSettings
from .progress import progress
from .store import TuningStore, tuning_key

Configs = Union[Sequence[Dict[str, Any]], Callable[..., Sequence[Dict[str, Any]]]]

_inputs_local = threading.local()


class set_autotune_inputs:
    """`with set_autotune_inputs(a, b): kernel = tuned(M, N, K)` tunes on these inputs
    (TileLang's spelling) instead of random ones."""

    def __init__(self, *inputs):
        self.inputs = list(inputs[0]) if len(inputs) == 1 and isinstance(inputs[0], (list, tuple)) else list(inputs)

    def __enter__(self):
        self._saved = getattr(_inputs_local, "inputs", None)
        _inputs_local.inputs = self.inputs
        return self

    def __exit__(self, *exc):
        _inputs_local.inputs = self._saved
        return False


class AutoTuner:
    """A `@tilecore.jit` factory whose tile parameters are chosen by measurement (see module doc).

    `last_report` is the TuningReport of the most recent call; `reports` maps tuning keys to theirs.
    """

    def __init__(
        self,
        jit_function,
        configs: Configs,
        warmup: float = 25,
        rep: float = 100,
        timeout: float = 100,
        key: Optional[Sequence[str]] = None,
        ref_prog: Optional[Callable] = None,
        supply_prog: Optional[Callable] = None,
        rtol: Optional[float] = None,
        atol: Optional[float] = None,
        skip_check: bool = False,
        executor: str = "process",
        workers: Optional[int] = None,
        cache: bool = True,
        ray_address: Optional[str] = None,
        rounds: int = 3,
    ):
        from ..runtime.api import JITFunction

        if not isinstance(jit_function, JITFunction):
            jit_function = JITFunction(jit_function)
        if executor not in ("process", "ray"):
            raise TileError(f"autotune: executor must be 'process' or 'ray', got {executor!r}")
        self.jit = jit_function
        self.__name__ = jit_function.__name__
        self.__doc__ = jit_function.__doc__
        self.configs = configs
        self.settings = MeasureSettings(
            warmup=warmup,
            rep=rep,
            rtol=rtol,
            atol=atol,
            skip_check=skip_check,
            ref_prog=ref_prog,
            supply_prog=supply_prog,
            rounds=rounds,
        )
        self.timeout = timeout
        self.key = list(key) if key is not None else None
        self.executor = executor
        self.workers = workers
        self.use_cache = cache
        self.ray_address = ray_address
        self.last_report: Optional[R.TuningReport] = None
        self.reports: Dict[str, R.TuningReport] = {}
        self._winners: Dict[str, Dict[str, Any]] = {}  # tuning key -> the tuning record (store.py)
        self._by_call: Dict[Any, Any] = {}  # frozen call arguments -> the winner's Kernel
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<tilecore.autotune {self.__name__} executor={self.executor}>"

    # ------------------------------------------------------------------ calling

    @user_facing
    def __call__(self, *args, **kwargs):
        """The fastest configuration's Kernel for these factory arguments (tuning if needed)."""
        from ..runtime.api import _freeze

        try:  # the same arguments again: the same Kernel, no key to compute
            call_key = (_freeze(args), _freeze(kwargs), os.environ.get("TILECORE_TARGET"))
            kernel = self._by_call.get(call_key)
        except TypeError:
            call_key, kernel = None, None
        if kernel is not None:
            return kernel
        configs = self._config_list(args, kwargs)
        key_parts = self._key_parts(args, kwargs, configs)
        tkey, call = tuning_key(key_parts), tuning_key(self._arguments(args, kwargs, configs))
        with self._lock:
            record = self._winners.get(tkey) or self._cached_record(tkey, key_parts)
            if record is None:
                report = self.tune(*args, _configs=configs, _key=tkey, **kwargs)
                record = {
                    "config": report.best_config,
                    "kernel": report.kernel,
                    "median_ms": report.best.median_ms if report.best else None,
                    "device": report.device,
                    "target": report.target,
                    "key": canonical_encoding(key_parts),
                    "ir": report.best_ir,
                    "ir_arguments": call,
                }
                if self.use_cache:
                    TuningStore().put(tkey, record)
            self._winners[tkey] = record
        if record.get("ir") and record.get("ir_arguments") == call:
            kernel = self._compile_stored(record["ir"])
        else:  # another call that shares the entry through key=: its own kernel, the same config
            kernel = self.jit(*args, **kwargs, **record["config"])
        if call_key is not None:
            self._by_call[call_key] = kernel
        return kernel

    def _compile_stored(self, ir_json: str):
        """The winner's Kernel from its stored Tile IR (the factory, and so the frontend, not run:
        a cached load stays fast); the compile cache supplies the artifact."""
        from ..ir.serialize import loads
        from ..runtime.api import compile

        return compile(loads(ir_json), target=self.jit.target, out_idx=self.jit.out_idx, **self.jit.options)

    def _cached_record(self, tkey: str, key_parts: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        record = TuningStore().get(tkey) if self.use_cache and _cache_on() else None
        if record is None:
            return None
        best = R.Candidate(-1, record["config"], median_ms=record.get("median_ms"))
        self.last_report = R.TuningReport(
            self.__name__,
            key_parts["target"],
            key_parts["device"],
            candidates=[best],
            best_index=-1,
            from_cache=True,
            key=tkey,
        )
        self.reports[tkey] = self.last_report
        return record

    # ------------------------------------------------------------------ the key

    def _config_list(self, args, kwargs) -> List[Dict[str, Any]]:
        configs = self.configs(*args, **kwargs) if callable(self.configs) else self.configs
        configs = [dict(c) for c in (configs or [])]
        if not configs:
            raise TileError(
                f"autotune {self.__name__}: the configs are empty; give at least one "
                f"configuration (a dict of factory arguments)"
            )
        params = inspect.signature(self.jit.factory).parameters
        takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
        given = set(inspect.signature(self.jit.factory).bind_partial(*args, **kwargs).arguments)
        for i, config in enumerate(configs):
            unknown = [k for k in config if k not in params and not takes_any]
            if unknown:
                raise TileError(
                    f"autotune {self.__name__}: config #{i} {config} names "
                    f"{', '.join(map(repr, unknown))}, which {self.__name__}() does not "
                    f"take; its parameters are {', '.join(params)}"
                )
            clash = sorted(given & set(config))
            if clash:
                raise TileError(
                    f"autotune {self.__name__}: {', '.join(clash)} given in the call "
                    f"but also tuned by the configs; leave tuned parameters out of the call"
                )
        return configs

    def _arguments(self, args, kwargs, configs) -> Dict[str, Any]:
        """Every untuned factory argument by name, defaults applied."""
        bound = inspect.signature(self.jit.factory).bind_partial(*args, **kwargs)
        bound.apply_defaults()
        tuned = {k for c in configs for k in c}
        return {k: v for k, v in bound.arguments.items() if k not in tuned}

    def _key_parts(self, args, kwargs, configs) -> Dict[str, Any]:
        from .. import __version__
        from ..profiler.timer import timer_for
        from ..runtime.api import _plugin_fingerprint, resolve_target

        values = self._arguments(args, kwargs, configs)
        if self.key is not None:
            missing = [k for k in self.key if k not in values]
            if missing:
                raise TileError(
                    f"autotune {self.__name__}: key= names {', '.join(missing)}, which "
                    f"is not an untuned argument of {self.__name__}()"
                )
            values = {k: values[k] for k in self.key}
        backend, target = resolve_target(self.jit.target)
        return {
            "source": _source_of(self.jit.factory),
            "arguments": values,
            "configs": configs,
            "out_idx": self.jit.out_idx,
            "options": self.jit.options,
            "backend": backend.name,
            "backend_version": backend.version,
            "target": target,
            "device": timer_for(backend).device(),
            "tilecore": __version__,
            "plugins": _plugin_fingerprint(),
            "check": not self.settings.skip_check,
        }

    # ------------------------------------------------------------------ tuning

    @user_facing
    def tune(self, *args, _configs=None, _key: str = "", **kwargs) -> R.TuningReport:
        """Compile, check and time every configuration for these arguments; return the report
        (also `last_report`). Does not consult or write the tuning cache."""
        from ..ir.serialize import dumps
        from ..runtime.api import resolve_target
        from .pool import CompileTask

        start = time.perf_counter()
        configs = _configs if _configs is not None else self._config_list(args, kwargs)
        candidates = [R.Candidate(i, c) for i, c in enumerate(configs)]
        tasks: List[CompileTask] = []
        for cand in candidates:
            try:
                func = self.jit.prim_func(*args, **kwargs, **cand.config)
            except Exception as err:  # a configuration the factory rejects is skipped
                cand.status, cand.message = R.INVALID, _error_text(err)
                continue
            tasks.append(
                CompileTask(cand.index, dumps(func), self.jit.target, self.jit.out_idx, dict(self.jit.options))
            )
        _, target = resolve_target(self.jit.target)
        report = R.TuningReport(self.__name__, target, "", candidates=candidates, key=_key)
        executor = self._executor()
        with progress(f"compiling {len(tasks)} {self.__name__} candidates", len(tasks)) as advance:
            outcomes = executor.compile(tasks, self.timeout, lambda _: advance())
        entries = {}
        for outcome in outcomes:
            cand = candidates[outcome.index]
            cand.status, cand.message, cand.compile_s = outcome.status, outcome.message, outcome.seconds
            if outcome.entry:
                entries[outcome.cache_key] = outcome.entry
        compiled = [(t.index, t.ir_json) for t in tasks if candidates[t.index].status == R.OK]
        settings = self._settings()
        with progress(f"timing {len(compiled)} {self.__name__} candidates", len(compiled)) as advance:
            measurements = executor.measure(
                compiled,
                self.jit.target,
                self.jit.out_idx,
                dict(self.jit.options),
                settings,
                entries,
                lambda _: advance(),
            )
        for m in measurements:
            cand = candidates[m.index]
            cand.status, cand.message = m.status, m.message
            cand.median_ms, cand.spread_pct, cand.runoff = m.median_ms, m.spread_pct, m.runoff
            report.method, report.device = m.method or report.method, m.device or report.device
        timed = [c for c in candidates if c.status == R.OK and c.median_ms is not None]
        report.tuning_s = time.perf_counter() - start
        self.last_report = report
        if _key:
            self.reports[_key] = report
        if not timed:
            raise TileError(
                f"autotune {self.__name__}: no configuration compiled, ran and matched the "
                f"reference, so there is nothing to choose from:\n{report.summary()}"
            )
        report.best_index = R.fastest(timed).index
        report.best_ir = next(t.ir_json for t in tasks if t.index == report.best_index)
        if _terminal():
            print(report.summary(), file=sys.stderr)
        return report

    def _settings(self) -> MeasureSettings:
        from ..testing import to_numpy

        settings = MeasureSettings(**self.settings.__dict__)
        user_inputs = getattr(_inputs_local, "inputs", None)
        if user_inputs is not None:
            settings.inputs = [to_numpy(x) for x in user_inputs]
        return settings

    def _executor(self):
        if self.executor == "ray":
            from .ray_executor import RayExecutor

            return RayExecutor(self.ray_address)
        return LocalExecutor(self.workers)


class LocalExecutor:
    """Compiles in isolated worker processes on this machine; checks and times in this process."""

    def __init__(self, workers: Optional[int] = None):
        self.workers = workers

    def compile(self, tasks, timeout, on_done):
        from .pool import compile_isolated

        return compile_isolated(tasks, timeout, self.workers, on_done)

    def measure(self, candidates, target, out_idx, options, settings, entries, on_done):
        from .measure import measure_candidates

        return measure_candidates(candidates, target, out_idx, options, settings, entries, on_done)


def _terminal() -> bool:
    return bool(getattr(sys.stderr, "isatty", None)) and sys.stderr.isatty()


def _cache_on() -> bool:
    from ..runtime.cache import cache_enabled

    return cache_enabled()


def _source_of(factory) -> str:
    """A digest of the factory's code: bytecode, constants (nested kernels included) and names, and
    the Python version. (Reading the source text costs tens of ms per process, too much for a
    cached load; marshal's bytes depend on reference counts, so they are not stable.)"""
    code = getattr(factory, "__code__", None)
    if code is None:
        return f"{getattr(factory, '__qualname__', factory)!r}"
    digest = hashlib.sha256(sys.version.encode())
    _hash_code(code, digest)
    return digest.hexdigest()


def _hash_code(code, digest) -> None:
    for part in (code.co_name, code.co_code, code.co_names, code.co_varnames, code.co_freevars):
        digest.update(repr(part).encode())
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            _hash_code(const, digest)
        else:
            digest.update(repr(const).encode())


def _error_text(err: Exception) -> str:
    return str(err) if isinstance(err, TileError) else f"{type(err).__name__}: {err}"


def autotune(
    fn=None,
    *,
    configs: Optional[Configs] = None,
    warmup: float = 25,
    rep: float = 100,
    timeout: float = 100,
    key: Optional[Sequence[str]] = None,
    ref_prog=None,
    supply_prog=None,
    rtol=None,
    atol=None,
    skip_check: bool = False,
    executor: str = "process",
    workers: Optional[int] = None,
    cache: bool = True,
    ray_address: Optional[str] = None,
    rounds: int = 3,
):
    """Tune a `@tilecore.jit` factory over `configs` (dicts of factory arguments, or a callable
    taking the factory's other arguments and returning them); stack it above `@tilecore.jit`.

    warmup: warm-up budget in ms before each timing round; rep: timing budget in ms per candidate,
    split over `rounds` interleaved rounds; timeout: seconds a candidate may take to compile;
    key: the arguments whose values select a tuning entry (Triton's `key`); ref_prog: the
    reference `ref_prog(*inputs) -> outputs` (default: the reference interpreter); supply_prog:
    `supply_prog(params) -> inputs`; executor: "process" (this machine) or "ray" (a Ray cluster at
    `ray_address`, default: a local one); cache: use the on-disk tuning cache.
    """
    if configs is None:
        raise TileError("@tilecore.autotune needs configs= (a list of dicts of factory arguments)")

    def wrap(f):
        return AutoTuner(
            f,
            configs,
            warmup=warmup,
            rep=rep,
            timeout=timeout,
            key=key,
            ref_prog=ref_prog,
            supply_prog=supply_prog,
            rtol=rtol,
            atol=atol,
            skip_check=skip_check,
            executor=executor,
            workers=workers,
            cache=cache,
            ray_address=ray_address,
            rounds=rounds,
        )

    return wrap(fn) if fn is not None else wrap
