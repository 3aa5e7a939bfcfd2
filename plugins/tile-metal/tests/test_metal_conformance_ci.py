"""The CI-sized conformance run of the metal backend (compile tier, fixed seed).

`tile conformance metal --tier compile --examples 100 --seed 0` must certify here;
the full run and its report are under conformance/reports/.
"""

from __future__ import annotations

import pytest

tile_conformance = pytest.importorskip("tile_conformance", reason="tile-conformance is not installed")

from tile_conformance.report import to_markdown  # noqa: E402
from tile_conformance.runner import run_suite  # noqa: E402


def test_metal_certifies_at_the_compile_tier():
    report = run_suite("metal", examples=100, seed=0, tier="compile")
    assert report["verdict"]["certified"], to_markdown(report)
    counts = report.get("totals") or {}
    assert counts.get("fail", 0) == 0, to_markdown(report)
