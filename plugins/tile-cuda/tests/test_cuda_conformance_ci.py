"""The CI-sized conformance run of the cuda backend (compile tier, fixed seed).

`tile conformance cuda --tier compile --examples 100 --seed 0` must certify here;
the full run and its report are under conformance/reports/.
"""

from __future__ import annotations

import pytest

tile_conformance = pytest.importorskip("tile_conformance", reason="tile-conformance is not installed")

from tile_conformance.report import to_markdown  # noqa: E402
from tile_conformance.runner import run_suite  # noqa: E402


def test_cuda_certifies_at_the_compile_tier():
    report = run_suite("cuda", examples=100, seed=0, tier="compile")
    assert report["verdict"]["certified"], to_markdown(report)
    counts = report.get("totals") or {}
    assert counts.get("fail", 0) == 0, to_markdown(report)


def test_tensor_core_programs_reach_the_hopper_paths():
    """The gemm programs of TENSOR_CORE_TILES' shapes (slots 6, 12, ...: a 300-program run has
    four) take wgmma on sm_90a, one of them the warp-specialized TMA pipeline by default and, with
    option tma_multicast, clusters of two: so a certified run executed those paths."""
    from tile_conformance.execute import load_source
    from tile_conformance.programs import build
    from tile_conformance.runner import resolve_backend, run_knobs
    from tile_conformance.strategies import TENSOR_CORE_TILES, Caps
    from tile_cuda.rules import cuda_plan

    backend = resolve_backend("cuda")
    for options in ({}, {"tma_multicast": True}):
        caps = Caps.from_backend(backend, options)
        gemms = [k for k in run_knobs(caps, 300, 3) if k["family"] == "gemm"]
        shapes = [k for k in gemms if (k["bm"], k["bn"], k["bk"], k["threads"], k["num_stages"]) in TENSOR_CORE_TILES]
        assert len(shapes) == 4
        claims = [cuda_plan(load_source(build(k).source), "sm_90a", options).claims for k in shapes]
        assert sum("wgmma" in c for c in claims) >= 2
        ws = [c for c in claims if "warp_specialized" in c]
        assert len(ws) >= 1 and all(c.get("tma") for c in ws)
        if options:
            assert any(info.multicast for c in ws for info in c["warp_specialized"].values())
