"""A conformance run sharded over a local Ray cluster against the same run in one process.

    python benchmarks/conformance_ray.py [--backend npu] [--examples 400] [--seed 0] [--workers 2]

Runs `tile conformance BACKEND` twice with the same seed: once on this machine's worker
pool, once sharded over a local Ray cluster of `workers` CPUs (`--ray`: each shard
generates program i from (seed, i), compiles and runs it). Bar: the same verdict and
program digest (and the same totals, per-family and per-feature counts and failing programs).
Writes benchmarks/results/conformance_ray-<date>.json (machine, versions, command, both
reports' totals, digests, verdicts and durations). Results (npu, 400, seed 0): 12:41, per-index generation: the same
(digest 5ac55db5..., certified, 55 s vs 66 s); 12:23, the runner before it: not the same (see
conformance/README.md, "Sharding over a Ray cluster").
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from results_file import utc_stamp, write_record  # noqa: E402


def _summary(report: dict, seconds: float) -> dict:
    return {
        "verdict": report["verdict"],
        "program_digest": report["program_digest"],
        "totals": report["totals"],
        "seconds": seconds,
        "families": report["families"],
        "features": report["features"],
        "failed_programs": [f["index"] for f in report["failures"]],
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="npu")
    parser.add_argument("--examples", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    args = parser.parse_args(argv)

    import ray

    from tile_conformance.ray_shard import run_suite_on_ray
    from tile_conformance.runner import run_suite

    common = dict(examples=args.examples, seed=args.seed, shrink=False)
    start = time.perf_counter()
    single = run_suite(args.backend, **common)
    single_s = time.perf_counter() - start
    print(
        f"single process: {single['totals']} verdict certified={single['verdict']['certified']} "
        f"digest {single['program_digest'][:16]} in {single_s:.0f} s",
        flush=True,
    )

    path = os.pathsep.join(p for p in sys.path if p)
    ray.init(
        num_cpus=args.workers,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": path}},
    )
    start = time.perf_counter()
    sharded = run_suite_on_ray(args.backend, **common)
    sharded_s = time.perf_counter() - start
    ray.shutdown()
    print(
        f"sharded on Ray ({args.workers} CPUs): {sharded['totals']} verdict "
        f"certified={sharded['verdict']['certified']} digest {sharded['program_digest'][:16]} "
        f"in {sharded_s:.0f} s",
        flush=True,
    )

    a, b = _summary(single, single_s), _summary(sharded, sharded_s)
    same = all(a[k] == b[k] for k in ("verdict", "program_digest", "totals", "families", "features", "failed_programs"))
    print(f"same verdict, digest, totals, per-family and per-feature counts and failing programs: {same}", flush=True)
    from importlib.metadata import version

    record = {
        "benchmark": "conformance_ray",
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load_average": os.getloadavg()},
        "versions": {d: version(d) for d in ("ray", "hypothesis", "tile-conformance")},
        "backend": args.backend,
        "examples": args.examples,
        "seed": args.seed,
        "ray_workers": args.workers,
        "single_process": a,
        "ray_sharded": b,
        "bar_same_verdict_and_digest": same,
    }
    write_record(args.out, "conformance_ray", utc_stamp(), record)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
