"""`tile conformance BACKEND --ray [ADDRESS]`: a run's programs generated, compiled and run on a Ray
cluster.

Ray places the work (`pip install 'tile-conformance[ray]'`); nothing here schedules:
ray.util.ActorPool hands program indices to idle shards. Each shard is a Ray actor
with its own private compile cache and one isolated worker process (pool.WorkerPool,
as a single-machine run: a crash or hang fails that program, not the shard) that
resolves the backend on its node, generates program i from (seed, i) itself
(strategies.knobs_at: nothing else decides it) and runs it, after checking that it is the program the driver drew for
the report (same source and input seed). When it is not, the shard runs the
driver's program (sent along) and the report lists the index under
`settings.ray.programs_drawn_differently_by_shards`: the report always describes
the programs that ran, and a node with another suite, hypothesis or backend
version is named, not hidden. The
driver merges the outcomes in index order and builds the report exactly as a
single-process run does, so the verdict and program digest are those of a
single-process run with the same programs. Failures are shrunk in the driver's
worker (shrinking is sequential).

The runner's seam is its `pool=` argument (runner.InProcessPool is the default).
"""

from __future__ import annotations

import os
import sys
from typing import List, Optional, Sequence

from .execute import Outcome
from .programs import Program
from .repro import program_record


def _ray():
    try:
        import ray
    except ImportError:
        from .runner import ConformanceError

        raise ConformanceError("--ray needs Ray: pip install 'tile-conformance[ray]' (or pip install ray)") from None
    return ray


def _program_digest(program: Program) -> str:
    import hashlib

    return hashlib.sha256((program.source + str(program.input_seed)).encode()).hexdigest()


class _Shard:
    """A Ray actor that generates and runs programs of one run (see the module doc)."""

    def __init__(self, backend: str, tier: str, timeout: float, seed: int, families):
        from .execute import fresh_compile_cache
        from .pool import WorkerPool
        from .runner import resolve_backend, run_families
        from .strategies import Caps

        self.cache = fresh_compile_cache().__enter__()  # this shard compiles every program anew
        self.pool = WorkerPool(backend, tier, 1, timeout)  # the backend runs isolated, as without Ray
        self.backend = resolve_backend(backend)
        self.caps = Caps.from_backend(self.backend)
        self.seed, self.families = seed, run_families(self.caps, families)

    def run(self, index: int, digest: str, record: dict, options: dict):
        """(index, Outcome, generated here?) of program `index` compiled with `options`: the shard's
        own program when it is the driver's (same digest), else the driver's `record` (see the
        module doc)."""
        from .programs import build
        from .repro import program_from_record
        from .strategies import Caps, directed_knobs, knobs_at

        if options != self.pool.options:  # options that declare capabilities change the programs
            self.pool.options = options
            self.caps = Caps.from_backend(self.backend, options)

        directed = record["knobs"].get("directed")  # a directed program (after the seeded ones)
        if directed is not None:
            knobs = directed_knobs(self.caps, self.seed, self.families)[int(directed)]
        else:
            knobs = knobs_at(self.caps, self.seed, index, self.families)
        program = build(knobs)
        own = _program_digest(program) == digest
        return index, self.pool.run_one(program if own else program_from_record(record)), own


class RayShardPool:
    """The runner's pool (`run`, `run_one`) over Ray shards; see the module doc.

    `run(programs)` takes the run's generated programs (program i of (examples, seed,
    families)); `run_one`, used while shrinking, runs in this process.
    """

    def __init__(
        self,
        backend,
        tier: str,
        timeout: float,
        seed: int,
        families=None,
        address: Optional[str] = None,
        shards: Optional[int] = None,
    ):
        from .pool import WorkerPool

        ray = _ray()
        if not ray.is_initialized():
            path = os.pathsep.join(p for p in sys.path if p)
            ray.init(address=address or None, log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": path}})
        self.ray, self.backend, self.tier, self.timeout = ray, backend.name, tier, timeout
        self.options: dict = {}  # compile options of every program (set by the runner)
        self.local = WorkerPool(backend.name, tier, 1, timeout)  # shrinking candidates
        self.from_driver: List[int] = []  # programs a shard drew differently (it ran the driver's)
        self.count = shards or max(1, int(ray.cluster_resources().get("CPU", 1)))
        shard = ray.remote(num_cpus=1)(_Shard)
        self.shards = [shard.remote(backend.name, tier, timeout, seed, families) for _ in range(self.count)]
        self.jobs = self.count

    def close(self) -> None:
        """End the shards (the cluster stays up) and the local worker."""
        for shard in self.shards:
            self.ray.kill(shard)
        self.shards = []
        self.local.close()

    def run_one(self, program: Program) -> Outcome:
        """One program (a shrinking candidate), on this machine's isolated worker."""
        return self.local.run_one(program)

    def run(self, programs: Sequence[Program], on_result=None, order=None) -> List[Optional[Outcome]]:
        """Outcomes of the run's programs in index order, submitted in `order` (default: first to
        last); `on_result(i, outcome)` sees each as it comes."""
        from ray.util import ActorPool

        results: List[Optional[Outcome]] = [None] * len(programs)
        actors = ActorPool(self.shards)
        for i in range(len(programs)) if order is None else order:
            program = programs[i]
            actors.submit(
                lambda shard, job: shard.run.remote(*job),
                (i, _program_digest(program), program_record(program), self.options),
            )
        while actors.has_next():
            try:
                i, outcome, own = actors.get_next_unordered()
                if not own:
                    self.from_driver.append(i)
            except self.ray.exceptions.RayActorError as err:
                from .runner import ConformanceError

                raise ConformanceError(
                    f"a Ray shard died (its node, or the backend in it, crashed): {str(err).splitlines()[0]}"
                ) from None
            results[i] = outcome
            if on_result is not None and on_result(i, outcome):
                break  # the runner's stop_after_failures: the rest stay None (not run)
        return results


def run_suite_on_ray(
    backend_name: str,
    address: Optional[str] = None,
    shards: Optional[int] = None,
    seed: int = 0,
    tier: str = "execute",
    families=None,
    timeout: Optional[float] = None,
    **options,
) -> dict:
    """runner.run_suite with the programs sharded over the Ray cluster at `address` (None: the running
    one, else a new local cluster); the same report as a single-process run, but for timings."""
    from .pool import DEFAULT_TIMEOUT
    from .runner import resolve_backend, run_suite

    timeout = DEFAULT_TIMEOUT if timeout is None else timeout
    pool = RayShardPool(resolve_backend(backend_name), tier, timeout, seed, families, address, shards)
    try:
        report = run_suite(backend_name, seed=seed, tier=tier, families=families, timeout=timeout, pool=pool, **options)
    finally:
        pool.close()
    report["settings"]["ray"] = {
        "address": address or "local",
        "shards": pool.count,
        "programs_drawn_differently_by_shards": sorted(pool.from_driver),
    }
    return report
