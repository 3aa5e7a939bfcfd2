"""The directed `forms` programs: scalar parameters, buffer views and kernel stages (form_programs.py).

Each default-sized run adds four; what they compute is checked here against numpy, so that a
generator (or interpreter) that lost the scalar, the view's element order or the stages' order
could not certify a backend that shares the mistake.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as hs

from tile_conformance.coverage import program_cells, required_cells
from tile_conformance.execute import OUTPUT_SENTINEL, load_source, make_inputs, reference_outputs, run_program
from tile_conformance.programs import build
from tile_conformance.runner import DIRECTED_FROM, run_families, run_knobs
from tile_conformance.strategies import Caps
from tilecore.interp.plugin import make_backend

REF = make_backend()
ALL = Caps.from_backend(REF)


def _forms(seed: int):
    return [k for k in run_knobs(ALL, DIRECTED_FROM, seed=seed) if k["family"] == "forms"]


def test_every_default_run_has_each_form():
    knobs = _forms(3)
    assert [(k["scalar"], bool(k["view"]), k["stages"]) for k in knobs] == [
        (True, False, False),
        (False, True, False),
        (False, False, True),
        (False, True, True),
    ]
    cells = set().union(*(program_cells(build(k)) for k in knobs))
    required = {c for c in required_cells(ALL, run_families(ALL)) if c.startswith("forms:")}
    assert required == {"forms:scalar", "forms:view", "forms:stages"} <= cells
    assert not [k for k in run_knobs(ALL, DIRECTED_FROM - 1, seed=3) if k["family"] == "forms"]  # small runs


def _expected(k: dict, a: np.ndarray) -> np.ndarray:
    """What a forms program writes: A's elements in row-major order as (M, N), rows below n,
    upside down after two stages; the other rows keep the output's initial value."""
    M, N = k["M"], k["N"]
    rows = a.reshape(M, N)
    out = np.full((M, N), OUTPUT_SENTINEL).astype(a.dtype)
    n = k["n"] if k["scalar"] else M
    if k["stages"]:
        out[M - n :] = rows[:n][::-1]
    else:
        out[:n] = rows[:n]
    return out


@settings(max_examples=12, deadline=None)
@given(hs.integers(0, 2**20), hs.integers(0, 3))
def test_forms_programs_compute_what_they_say(seed, which):
    k = _forms(seed)[which]
    prog = build(k)
    func = load_source(prog.source)
    assert bool(func.scalar_params) == k["scalar"] and func.is_multi_stage == k["stages"]
    arrays = make_inputs(prog.params, prog.bindings, prog.input_seed)
    got = reference_outputs(func, prog, arrays)[1]
    want = _expected(k, arrays[0])
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), prog.source  # bit-exact, NaNs too


def test_forms_pass_on_the_reference_backend():
    for k in _forms(11):
        outcome = run_program(build(k), REF)
        assert outcome.status == "pass", outcome.message
