"""The fast_math option declares the `fast_math` capability (Option.declares): conformance run with
`--option fast_math=true` generates the same programs and holds their math to the looser fast-math
table (tile_conformance/accuracy.py), and the default run stays on the strict one."""

from __future__ import annotations

import pytest

tile_conformance = pytest.importorskip("tile_conformance", reason="tile-conformance is not installed")

from tile_conformance import accuracy  # noqa: E402
from tile_conformance.programs import build  # noqa: E402
from tile_conformance.runner import run_knobs  # noqa: E402
from tile_conformance.strategies import Caps  # noqa: E402
from tile_cuda.plugin import make_backend  # noqa: E402

FAST = {"fast_math": True}


def _programs(options, families, examples=24):
    return [build(k) for k in run_knobs(Caps.from_backend(make_backend(), options), examples, 12, families)]


def test_only_the_fast_math_option_on_declares_fast_math():
    backend = make_backend()
    assert not Caps.from_backend(backend).fast_math
    assert not Caps.from_backend(backend, {"fast_math": False}).fast_math
    assert Caps.from_backend(backend, FAST).fast_math
    assert not Caps.from_backend(backend, {"gemm_block_panel": 4}).fast_math  # declares nothing


def test_fast_math_runs_the_same_programs_against_the_fast_math_table():
    strict, fast = _programs({}, ("math",)), _programs(FAST, ("math",))
    assert [p.source for p in strict] == [p.source for p in fast]
    maths = list(zip(strict, fast))
    for s, f in maths:
        d = s.knobs["dtype"]
        assert s.tolerances["O_exp"].ulps == accuracy.ulps("exp", d, fast_math=False)
        assert f.tolerances["O_exp"].ulps == accuracy.ulps("exp", d, fast_math=True)
        assert "fast_math table" in f.tolerances["O_exp"].why and "accuracy table" in s.tolerances["O_exp"].why
        assert s.tolerances["O_floor"].ulps == f.tolerances["O_floor"].ulps == 0  # exact either way
    assert any(s.knobs["dtype"] == "float32" for s, _ in maths)  # 4 ulp -> 8192 ulp
    # expressions' error analysis follows the same table: an ewise float32 program with a
    # transcendental function gets a wider tolerance, one without gets the same
    strict, fast = _programs({}, ("ewise",), 60), _programs(FAST, ("ewise",), 60)
    assert [p.source for p in strict] == [p.source for p in fast]
    wider = [s for s, f in zip(strict, fast) if s.tolerances != f.tolerances]
    assert wider and all(any(f"T.{f}(" in s.source for f in accuracy.FUNCS) for s in wider)


@pytest.mark.gpu
def test_fast_math_certifies_against_its_table_and_fails_the_strict_one():
    """On the GPU: fast exp/log (__expf, ex2.approx, __logf) pass the fast-math table, and the same
    code fails the strict table (session 7: __expf was 7 ulp off near overflow; the table has 4)."""
    from tile_conformance.execute import FAIL, run_program
    from tile_conformance.runner import run_suite

    report = run_suite("cuda", examples=22, seed=12, families=("math", "ewise"), options=FAST, shrink=False)
    assert report["settings"]["accuracy_table"] == "fast_math"
    assert report["totals"]["fail"] == 0, report["failures"][:1]
    strict = [p for p in _programs({}, ("math",)) if p.knobs["dtype"] == "float32"]
    outcomes = [run_program(p, make_backend(), options=FAST) for p in strict]
    assert any(o.status == FAIL and "O_exp" in o.message for o in outcomes), [o.message for o in outcomes]
