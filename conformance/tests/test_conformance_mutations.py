"""The suite can fail: each planted bug is rejected, named, and shrunk to a repro.

The mutants (tests/mutants/tile_mutants.py) wrap the cpu backend (reference
where tile-cpu is not installed) and are found through a real entry point.
Fixed seeds; the examples are restricted to the families that can show each
bug so the check fits in CI (see README, "Mutation check"). Every mutant runs
wrapping reference here; wrapping cpu (compiles each program natively, minutes
per mutant) only the axis one, which proves that the wrapper drives a real
compiled backend. The whole cpu sweep is `python benchmarks/mutation_score.py
--wrap cpu`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tile_conformance.runner import run_suite

# mutant -> (families the run draws from, features the report must name)
CASES = {
    "edge": (("copy", "ewise", "cumsum"), {"partial_tiles"}),
    "axis": (("reduce",), {"reduce"}),
    "transpose": (("gemm",), {"gemm_transpose"}),
    "bf16": (("copy", "ewise"), {"dtype:bfloat16"}),
    "atomic": (("atomic",), {"atomic"}),
}


def _cases():
    """(wrapped backend, mutant) pairs: every mutant on reference but edge (its shrink is the longest;
    that the default run rejects it is test_conformance_mutation_gate's), the axis one on cpu too."""
    out = [("reference", m) for m in sorted(CASES) if m != "edge"]
    try:
        import tile_cpu.plugin  # noqa: F401

        out.append(("cpu", "axis"))
    except ImportError:
        pass
    return out


@pytest.fixture
def wrapping(monkeypatch, mutant_path):
    """Sets the backend the mutants wrap: cpu (a real compiled backend) or reference (no bugs of its
    own, so every failure comes from the planted bug)."""
    from tilecore.plugin.manager import reset_plugins

    def wrap(backend: str) -> str:
        monkeypatch.setenv("TILE_MUTANTS_WRAP", backend)
        reset_plugins(keep_explicit=True)
        return backend

    yield wrap
    monkeypatch.undo()
    reset_plugins(keep_explicit=True)


@pytest.mark.parametrize("wrapped,mutant", _cases())
def test_suite_rejects_planted_bug(wrapping, wrapped, mutant):
    wrapping(wrapped)
    families, named = CASES[mutant]
    report = run_suite(
        f"cpu-bug-{mutant}", examples=16, seed=3, families=families, max_shrinks=3, shrink_runs=15, shrink_seconds=12
    )
    assert report["totals"]["fail"] > 0, f"the suite did not notice the {mutant} bug"
    assert not report["verdict"]["certified"]
    # a shrunk failure names the planted feature among the suspects of its minimal program
    # (other failures may come from real bugs of the wrapped backend itself)
    named_failures = [f for f in report["failures"] if f["shrunk"] and named & set(f["repro"]["suspects"])]
    assert named_failures, [(f["repro"]["suspects"], f["repro"]["message"]) for f in report["failures"]]
    first = named_failures[0]
    repro = first["repro"]
    assert repro["source"].startswith("import tilecore.language as T")
    assert repro["max_error"] is not None or first["kind"] != "mismatch"
    # the minimal program is no bigger than the original, and its script runs as a repro
    assert first["shrink"]["size_after"] <= first["shrink"]["size_before"]
    assert "run_repro(main" in repro["script"]
    if wrapped == "reference":
        # nothing else is wrong with the reference: failures are wrong results or the planted op's own
        # error (a shape mismatch after a dropped transpose), never the wrapper confusing its artifacts
        assert not [f for f in report["failures"] if "KeyError" in f["message"] or "launcher" in f["message"]]
        assert report["backend"]["version"] == "0.0.0+reference"


def test_mutant_cli_through_entry_point(mutant_path, tmp_path):
    """`tile conformance cpu-bug-transpose` in a fresh process finds the bug and exits 1."""
    out = tmp_path / "report.json"
    env = dict(
        os.environ,
        PYTHONPATH=mutant_path + os.pathsep + os.environ.get("PYTHONPATH", ""),
        TILE_MUTANTS_WRAP="reference",
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tilecore.cli.main",
            "conformance",
            "cpu-bug-transpose",
            "--examples",
            "8",
            "--seed",
            "3",
            "--families",
            "gemm",
            "--max-shrinks",
            "1",
            "--shrink-runs",
            "8",
            "--report",
            str(out),
            "--no-progress",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "NOT CERTIFIED" in proc.stdout
    report = json.loads(out.read_text())
    assert report["failures"] and report["backend"]["distribution"] == "tile-mutants"
    assert (tmp_path / "report.md").read_text().count("Minimal program") >= 1
    # the repro script of the minimal program runs on its own and shows the failure again
    script = tmp_path / "repro.py"
    script.write_text(report["failures"][0]["repro"]["script"])
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "cpu-bug-transpose:" in proc.stdout


@pytest.mark.parametrize(
    "mutant,family,min_differ",
    [
        ("axis", "reduce", 22),
        ("transpose", "gemm", 6),
        ("fp8-saturates", "convert", 10),
        ("while-exits-early", "control", 10),
    ],
)
def test_planted_ir_bugs_keep_programs_well_formed(mutant_path, mutant, family, min_differ):
    """IR-level mutants must give wrong answers, never inconsistent IR: a native backend given shapes
    that do not match would run undefined code (it once hung CI) instead of the planted bug."""
    import numpy as np
    import tile_mutants

    import tilecore.interp as interp
    from tile_conformance.execute import load_source, make_inputs
    from tile_conformance.programs import build
    from tile_conformance.runner import Caps, generate_knobs, resolve_backend
    from tilecore.passes.check_types import check

    caps = Caps.from_backend(resolve_backend("reference"))
    differ = 0
    knobs = generate_knobs(caps, 24, 5, (family,))
    for k in knobs:
        prog = build(k)
        func = load_source(prog.source)
        planted = tile_mutants._plant(mutant, func)
        check(planted)  # raises TileCompileError on inconsistent shapes
        good = make_inputs(prog.params, prog.bindings, prog.input_seed)
        bad = [a.copy() for a in good]
        interp.run(func, good, prog.bindings)
        interp.run(planted, bad, prog.bindings)
        differ += any(not np.array_equal(x, y, equal_nan=True) for x, y in zip(good, bad))
    assert differ >= min_differ, f"only {differ} of {len(knobs)} programs show the {mutant} bug"
