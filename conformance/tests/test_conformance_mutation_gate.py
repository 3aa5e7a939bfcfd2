"""The mutation-score gate: the default certification run rejects every planted bug.

Each bug of the catalog (tests/mutants/tile_mutant_bugs.py and the original
axis / transpose / edge / bf16 mutants) is planted in the reference
interpreter through the real plugin mechanism (an installed distribution with
a `tilecore` entry point) and the default run (`tile conformance
cpu-bug-<bug>`: all families, the default number of programs, seed 1) must be
NOT CERTIFIED. The run stops at the first failing program, so a rejected bug
costs only the programs up to it; all runs share one worker pool. The full
sweep over seeds 1, 2 and 3 (and over the cpu wrap) is
`benchmarks/mutation_score.py`, results in benchmarks/results/.
"""

from __future__ import annotations

import pytest

from tile_conformance.pool import WorkerPool
from tile_conformance.runner import DEFAULT_EXAMPLES, run_suite


@pytest.fixture(scope="module")
def reference_mutants(mutant_path):
    import os

    from tilecore.plugin.manager import reset_plugins

    saved = os.environ.get("TILE_MUTANTS_WRAP")
    os.environ["TILE_MUTANTS_WRAP"] = "reference"
    reset_plugins(keep_explicit=True)
    import tile_mutants

    with WorkerPool("cpu-bug-atomic", jobs=2) as pool:
        yield tile_mutants, pool
    if saved is None:
        os.environ.pop("TILE_MUTANTS_WRAP", None)
    else:
        os.environ["TILE_MUTANTS_WRAP"] = saved
    reset_plugins(keep_explicit=True)


def test_catalog_has_every_bug_class(reference_mutants):
    tile_mutants, _ = reference_mutants
    planted = set(tile_mutants.planted_bugs("reference"))
    assert len(planted) >= 25
    # the seven bugs that the old generator never caught, and the ones it caught only sometimes
    assert {
        "f16-ties-away",
        "float-to-int-rounds",
        "int-narrowing-saturates",
        "reduce-max-ignores-nan",
        "int8-gemm-int16",
        "offset16",
        "int-division-truncates",
        "exp-inaccurate",
        "tanh-naive",
        "abs-reduce-overwrites",
        "pipeline-drops-last",
        "dynamic-ceildiv-floors",
        "narrow-atomics-race",
    } <= planted


def test_default_run_rejects_every_planted_bug(reference_mutants):
    tile_mutants, pool = reference_mutants
    survivors = []
    for bug in tile_mutants.planted_bugs("reference"):
        report = run_suite(
            f"cpu-bug-{bug}", examples=DEFAULT_EXAMPLES, seed=1, shrink=False, stop_after_failures=1, pool=pool
        )
        if report["verdict"]["certified"] or not report["failures"]:
            survivors.append(bug)
    assert not survivors, f"planted bugs the default run (seed 1) did not reject: {survivors}"
