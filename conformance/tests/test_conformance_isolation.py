"""A backend that crashes, hangs or raises SystemExit fails those programs, named, with a report.

The crashing mutants (tests/mutants/tile_mutants.py, found through a real
entry point) wrap the reference interpreter and, on every program with a
reduction, call os._exit(3), raise SIGSEGV, raise SystemExit(0) or loop
forever. Each must give NOT CERTIFIED naming exactly the reduce programs,
while the other programs still run and pass in fresh workers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tile_conformance.runner import run_suite

EXPECTED = {"exit": "exited with status 3", "segv": "killed by SIGSEGV", "sysexit": "SystemExit", "hang": "timed out"}


@pytest.fixture
def on_reference(monkeypatch, mutant_path):
    from tilecore.plugin.manager import reset_plugins

    monkeypatch.setenv("TILE_MUTANTS_WRAP", "reference")
    reset_plugins(keep_explicit=True)
    yield
    monkeypatch.undo()
    reset_plugins(keep_explicit=True)


@pytest.mark.parametrize("how", sorted(EXPECTED))
def test_crashing_backend_fails_the_programs_it_crashes_on(on_reference, how):
    # cumsum programs are small (copy ones may be large: slow under load, close to a short timeout)
    report = run_suite(
        f"cpu-bug-{how}",
        examples=6,
        seed=1,
        families=("cumsum", "reduce"),
        shrink=False,
        jobs=1,
        timeout=3 if how == "hang" else 60,  # a reference program runs in well under a second
    )
    assert not report["verdict"]["certified"]
    assert report["totals"]["programs"] == 6
    failed = {f["index"] for f in report["failures"]}
    reduce_programs = {f["index"] for f in report["failures"] if f["family"] == "reduce"}
    assert failed and failed == reduce_programs  # exactly the programs with a reduction
    assert report["totals"]["pass"] == 6 - len(failed)  # the others ran in fresh workers and passed
    for f in report["failures"]:
        assert EXPECTED[how] in f["message"], f["message"]
        assert f["repro"]["script"].startswith("import tilecore.language as T")


def test_systemexit_zero_from_a_backend_is_not_certified_on_the_command_line(on_reference, mutant_path, tmp_path):
    """`tile conformance` in a fresh process: exit status 1 and a written report naming the programs."""
    out = tmp_path / "report.json"
    env = dict(os.environ, PYTHONPATH=mutant_path + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tilecore.cli.main",
            "conformance",
            "cpu-bug-sysexit",
            "--examples",
            "4",
            "--seed",
            "2",
            "--families",
            "reduce",
            "--no-shrink",
            "--report",
            str(out),
            "--no-progress",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "NOT CERTIFIED" in proc.stdout
    report = json.loads(out.read_text())
    assert sorted(f["index"] for f in report["failures"]) == [0, 1, 2, 3]
    assert (tmp_path / "report.md").exists()


def test_rerun_runs_the_failing_programs_again(on_reference, tmp_path):
    from tile_conformance.plugin import main
    from tile_conformance.report import write_report

    report = run_suite("cpu-bug-exit", examples=4, seed=3, families=("reduce", "cumsum"), shrink=False, jobs=1)
    path = str(tmp_path / "r.json")
    write_report(report, path)
    # still failing on the buggy backend, and passing on the reference (the "fixed" backend)
    assert main(["rerun", path, "--jobs", "1"]) == 1
    assert main(["rerun", path, "--backend", "reference", "--jobs", "1", "--report", str(tmp_path / "again.json")]) == 0
    again = json.loads((tmp_path / "again.json").read_text())
    assert again["totals"]["programs"] == len(report["failures"])
    assert again["totals"]["pass"] == again["totals"]["programs"]
