"""Mutation score of the conformance suite: is every planted bug rejected by the default run?

For each bug of the catalog (conformance/tests/mutants/tile_mutant_bugs.py, plus the original
axis / transpose / edge / bf16 mutants) and each seed, runs the default certification settings
(`tile conformance cpu-bug-<bug> --seed S`, all families, the default number of programs) on the
mutant wrapping BACKEND, stopping at the first failing program, and records whether the run was
rejected, how many programs it took and how long. Usage:

    python benchmarks/mutation_score.py [--wrap reference|cpu] [--seeds 1,2,3] [--bugs a,b] [--out FILE]

Results: benchmarks/results/mutation_score-<wrap>.json (machine, versions, command, per bug and seed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "conformance", "tests"))


def install_mutants(wrap: str) -> str:
    """Write the mutant plugin as an installed distribution and make it importable; its folder."""
    from conftest import write_mutant_distribution

    os.environ["TILE_MUTANTS_WRAP"] = wrap
    folder = write_mutant_distribution(tempfile.mkdtemp(prefix="tile-mutants-"))
    sys.path.insert(0, folder)
    from tilecore.plugin.manager import reset_plugins

    reset_plugins(keep_explicit=True)
    return folder


def score(wrap: str, seeds, only=None, examples=None, jobs=1):
    """[(bug, seed, rejected, programs run, seconds, first failure)] for every bug and seed."""
    import tile_mutants

    from tile_conformance.pool import WorkerPool
    from tile_conformance.runner import DEFAULT_EXAMPLES, run_suite

    rows = []
    pool = WorkerPool("cpu-bug-atomic", jobs=jobs)  # one pool serves every run (workers load each mutant once)
    for bug in only or tile_mutants.planted_bugs(wrap):
        for seed in seeds:
            t0 = time.time()
            r = run_suite(
                f"cpu-bug-{bug}",
                examples=examples or DEFAULT_EXAMPLES,
                seed=seed,
                shrink=False,
                stop_after_failures=1,
                pool=pool,
            )
            fail = r["failures"][0] if r["failures"] else None
            rows.append(
                {
                    "bug": bug,
                    "seed": seed,
                    "rejected": not r["verdict"]["certified"] and bool(fail),
                    "programs_run": r["settings"]["programs_run"],
                    "seconds": round(time.time() - t0, 1),
                    "first_failure": (f"#{fail['index']} {fail['family']}: {fail['message'][:160]}" if fail else None),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    pool.close()
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--wrap", default="reference")
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--bugs", default=None)
    p.add_argument("--examples", type=int, default=None)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    install_mutants(args.wrap)
    import tile_mutants

    seeds = [int(s) for s in args.seeds.split(",")]
    t0 = time.time()
    rows = score(args.wrap, seeds, args.bugs.split(",") if args.bugs else None, args.examples)
    import hypothesis
    import numpy

    import tilecore
    from tile_conformance import __version__
    from tile_conformance.runner import DEFAULT_EXAMPLES

    bugs = sorted({r["bug"] for r in rows})
    killed = [b for b in bugs if all(r["rejected"] for r in rows if r["bug"] == b)]
    result = {
        "command": "python benchmarks/mutation_score.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "numpy": numpy.__version__,
            "hypothesis": hypothesis.__version__,
        },
        "versions": {"tilecore": tilecore.__version__, "tile-conformance": __version__},
        "wrap": args.wrap,
        "seeds": seeds,
        "examples": args.examples or DEFAULT_EXAMPLES,
        "catalog": {
            b: (tile_mutants.bugs.IR_BUGS | tile_mutants.bugs.LAUNCH_BUGS | tile_mutants.bugs.NUMERIC_BUGS).get(b, "")
            for b in bugs
        },
        "score": {
            "bugs": len(bugs),
            "rejected_at_every_seed": len(killed),
            "per_seed": {s: sum(r["rejected"] for r in rows if r["seed"] == s) for s in seeds},
        },
        "seconds": round(time.time() - t0, 1),
        "rows": rows,
    }
    out = args.out or os.path.join(HERE, "results", f"mutation_score-{args.wrap}.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"{len(killed)} of {len(bugs)} bugs rejected at every seed {seeds}; {result['seconds']} s; {out}")
    return 0 if len(killed) == len(bugs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
