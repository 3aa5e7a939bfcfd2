"""Coverage cells, the accuracy contract, edge values and suspect ranking."""

from __future__ import annotations

import numpy as np

from tile_conformance import edges
from tile_conformance.coverage import program_cells, required_cells
from tile_conformance.programs import build
from tile_conformance.report import verify
from tile_conformance.runner import run_families, run_knobs, suspects
from tile_conformance.strategies import Caps
from tilecore.interp.plugin import make_backend

CAPS = Caps.from_backend(make_backend())


def test_default_run_reaches_every_required_cell_at_any_seed():
    from tile_conformance.runner import DEFAULT_EXAMPLES

    required = set(required_cells(CAPS, run_families(CAPS)))
    assert {
        "convert:f>i",
        "intop:>>",
        "math:tanh:bfloat16",
        "reduce:absmax",
        "dynamic:reduce",
        "size:>2^16 elements",
        "size:>2^31 bytes",  # the reference declares its memory (max_tensor_bytes): a directed program
    } <= required
    for seed in (1, 2, 3, 17):
        covered = set()
        for k in run_knobs(CAPS, DEFAULT_EXAMPLES, seed):
            covered |= program_cells(build(k))
        assert required <= covered, (seed, sorted(required - covered))


def test_verify_needs_every_required_cell():
    report = {
        "format": 1,
        "settings": {"tier": "execute"},
        "totals": {"programs": 200, "fail": 0, "suite_error": 0, "pass": 200},
        "backend": {"features": []},
        "features": {},
        "coverage": {"required": ["intop:%", "convert:f>i"], "cells": {"intop:%": {"pass": 3, "fail": 0}}},
    }
    must = {"features": [], "min_examples": 100, "min_passes": 1, "coverage": {"min_passes": 1}}
    ok, reasons = verify(report, must)
    assert not ok and any("convert:f>i" in r for r in reasons)
    report["coverage"]["cells"]["convert:f>i"] = {"pass": 1, "fail": 0}
    assert verify(report, must) == (True, [])


def test_suspects_prefer_the_feature_with_more_failures():
    table = {"cumsum": {"pass": 0, "fail": 1}, "dynamic_shape": {"pass": 0, "fail": 6}, "copy": {"pass": 40, "fail": 7}}
    assert suspects(["copy", "cumsum", "dynamic_shape"], table)[0] == "dynamic_shape"


def test_ties_are_exact_midpoints():
    rng = np.random.default_rng(0)
    v = edges.ties(rng, 2000, "float32", "float16").astype(np.float32)
    with np.errstate(over="ignore"):
        lo = v.astype(np.float16).astype(np.float32)
    gap = edges.ulp(lo, "float16")
    mid = np.abs(np.abs(v.astype(np.float64) - lo.astype(np.float64)) - gap / 2) == 0
    assert mid.mean() > 0.3  # the rest are neighbours one float32 ulp away, or overflow thresholds


def test_fractions_stay_inside_the_int_range():
    rng = np.random.default_rng(1)
    for src, dst in (("float16", "int32"), ("float32", "int8"), ("bfloat16", "uint8"), ("float64", "int64")):
        a = edges.fill(rng, (4000,), src, -2, 2, f"fraction:{dst}").astype(np.float64)
        lo, hi = edges.INT_RANGES[dst]
        assert np.all((a > lo - 1) & (a < hi + 1)) and np.any(a != np.trunc(a))


def test_math_sweeps_reach_overflow_and_special_values():
    rng = np.random.default_rng(2)
    x = edges.fill(rng, (5000,), "float32", -2, 2, "math:exp")
    with np.errstate(over="ignore"):
        y = np.exp(x)
    assert np.isinf(y).any() and (y == 0).any() and np.isnan(x).any()
    assert (np.abs(y[np.isfinite(y)]) > 1e38).any()
