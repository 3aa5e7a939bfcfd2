"""Names bound inside kernel bodies are part of the grammar (the ewise family's `names` knob).

A bfloat16 name inside T.Parallel once failed to compile on cpu, and a float32 name
computed from a bfloat16 load read the stored bits as an integer; the grammar never
bound names, so certification could not see it.
"""

from __future__ import annotations

import pytest

from tile_conformance.execute import load_source, run_program
from tile_conformance.programs import build
from tile_conformance.runner import generate_knobs
from tile_conformance.strategies import Caps
from tilecore.interp.plugin import make_backend

ALL = Caps.from_backend(make_backend())


def test_the_generator_binds_names_and_the_frontend_parses_them():
    knobs = generate_knobs(ALL, 40, seed=3, families=("ewise",))
    named = [k for k in knobs if k.get("names")]
    assert named, "no program with local names generated"
    for k in named[:6]:
        prog = build(k)
        assert ("result_v = " in prog.source) == bool(k["names"] & 2)
        assert ("a_v = " in prog.source) == bool(k["names"] & 1)
        load_source(prog.source)


def _cpu():
    from tilecore.plugin.registry import get_registry

    backend = get_registry().backends.get("cpu")
    if backend is None:
        pytest.skip("tile-cpu is not installed")
    return backend


@pytest.mark.parametrize("names", [1, 2, 3])
def test_bfloat16_names_certify_on_cpu(names):
    cpu = _cpu()
    knobs = [k for k in generate_knobs(ALL, 60, seed=11, families=("ewise",)) if "bfloat16" in k["in_dtypes"]][:2]
    assert knobs, "no bfloat16 program generated"
    for k in knobs:
        prog = build({**k, "names": names})
        out = run_program(prog, cpu)
        assert out.status == "pass", (out.status, getattr(out, "message", ""), prog.source)
