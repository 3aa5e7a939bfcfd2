"""Compile options in a run (`tile conformance BACKEND --option NAME=VALUE`): checked before any
program runs, sent with every program to the worker that compiles it, and recorded in the report.
(An option that declares a capability, tile-cuda's fast_math, is tested with tile-cuda.)"""

from __future__ import annotations

import pytest

from tile_conformance.execute import FAIL
from tile_conformance.plugin import main
from tile_conformance.pool import WorkerPool
from tile_conformance.programs import build
from tile_conformance.runner import ConformanceError, generate_knobs, run_suite
from tile_conformance.strategies import Caps
from tilecore.interp.plugin import make_backend


def test_an_unknown_option_is_a_clear_error_before_anything_runs(capsys):
    with pytest.raises(ConformanceError, match="unknown compile option 'fast_math' for backend 'reference'"):
        run_suite("reference", examples=1, options={"fast_math": True})
    assert main(["reference", "--option", "fast_math=true", "--examples", "1", "--no-progress"]) == 2
    assert "unknown compile option 'fast_math'" in capsys.readouterr().err
    assert main(["reference", "--option", "fast_math", "--no-progress"]) == 2
    assert "--option needs NAME=VALUE, got 'fast_math'" in capsys.readouterr().err


def test_the_worker_compiles_with_the_runs_options():
    program = build(generate_knobs(Caps.from_backend(make_backend()), 1, seed=3)[0])
    with WorkerPool("reference", jobs=1) as pool:
        pool.options = {"no_such_option": 1}  # reaches tilecore.compile in the worker, which refuses it
        outcome = pool.run_one(program)
    assert outcome.status == FAIL and "unknown compile option 'no_such_option'" in outcome.message
