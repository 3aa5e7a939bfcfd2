"""The CI-sized certification run of the cpu backend (fixed seed), and its time limit.

This is `tile conformance cpu` with its defaults (100 programs, seed 0): it
must certify, and finish within 10 minutes on the CI machine (2 cores).
"""

from __future__ import annotations

import pytest

from tile_conformance.report import to_markdown
from tile_conformance.runner import run_suite

CI_SECONDS = 600


def _cpu_installed() -> bool:
    from tilecore.plugin.registry import get_registry

    return "cpu" in get_registry().backends


@pytest.mark.skipif(not _cpu_installed(), reason="tile-cpu is not installed")
def test_cpu_certifies_in_ci_time():
    report = run_suite("cpu")
    assert report["duration_seconds"] < CI_SECONDS, f"CI-sized run took {report['duration_seconds']} s"
    assert report["verdict"]["certified"], to_markdown(report)
