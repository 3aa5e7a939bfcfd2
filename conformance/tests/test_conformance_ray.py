"""`tile conformance BACKEND --ray`: a run sharded over a real local Ray cluster (2 CPUs) gives the
report of the single-process run with the same seed: verdict, program digest, totals, per-family
and per-feature counts and the failing programs. The 400-program comparison is
benchmarks/conformance_ray.py (results committed)."""

from __future__ import annotations

import json
import os
import sys

import pytest

ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'tile-conformance[ray]'")

from tile_conformance.plugin import main  # noqa: E402
from tile_conformance.ray_shard import run_suite_on_ray  # noqa: E402
from tile_conformance.runner import run_suite  # noqa: E402

SAME = ("verdict", "program_digest", "totals", "families", "features")


@pytest.fixture
def local_ray():
    path = os.pathsep.join(p for p in sys.path if p)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": path}})
    yield
    ray.shutdown()


def test_sharded_run_reports_what_the_single_process_run_reports(local_ray, tmp_path, capsys):
    single = run_suite("npu", examples=10, seed=5, shrink=False)
    sharded = run_suite_on_ray("npu", examples=10, seed=5, shrink=False)
    for field in SAME:
        assert sharded[field] == single[field], field
    assert [f["index"] for f in sharded["failures"]] == [f["index"] for f in single["failures"]]
    ray_settings = sharded["settings"]["ray"]
    assert ray_settings["address"] == "local" and ray_settings["shards"] == 2
    # indices whose shard-drawn program differed (then the driver's program ran): named, at most a few
    assert len(ray_settings["programs_drawn_differently_by_shards"]) <= 10
    assert sharded["totals"]["programs"] == 10 and sharded["totals"]["suite_error"] == 0

    # the command line, on the cluster that is already up
    path = str(tmp_path / "report.json")
    code = main(["npu", "--examples", "10", "--seed", "5", "--no-shrink", "--no-progress", "--ray", "--report", path])
    assert code == (0 if single["verdict"]["certified"] else 1)
    report = json.load(open(path))
    assert report["program_digest"] == single["program_digest"] and "ray" in report["settings"]
    assert "verdict" in capsys.readouterr().out
