"""The directed `idioms` programs: TileLang's spellings in the grammar (form_programs.py).

Each default-sized run adds six; what they compute is checked here against a numpy model (which
rows each move writes, which thread group runs, macro arguments, the atomic add), so that a
generator or frontend that lost a macro call, ran an empty thread group or swapped the moves could
not certify a backend that shares the mistake. The conversion itself is the interpreter's
(`tilecore.interp.dtypes.convert`, checked by the convert family's oracle tests).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from tile_conformance.compare import compare
from tile_conformance.coverage import program_cells, required_cells
from tile_conformance.execute import OUTPUT_SENTINEL, load_source, make_inputs, np_dtype, run_program
from tile_conformance.programs import IDIOMS, build
from tile_conformance.runner import DIRECTED_FROM, run_families, run_knobs
from tile_conformance.strategies import Caps
from tilecore import interp
from tilecore.interp.dtypes import convert
from tilecore.interp.plugin import make_backend

REF = make_backend()
ALL = Caps.from_backend(REF)


def _idioms(seed: int, caps: Caps = ALL):
    return [k for k in run_knobs(caps, DIRECTED_FROM, seed=seed) if k["family"] == "idioms"]


def test_every_default_run_has_each_idiom():
    knobs = _idioms(3)
    assert len(knobs) == 7
    cells = set().union(*(program_cells(build(k)) for k in knobs))
    required = {c for c in required_cells(ALL, run_families(ALL)) if c.startswith("idioms:")}
    assert required == {f"idioms:{i}" for i in IDIOMS} <= cells
    assert knobs[0]["macro"] and knobs[1]["split"] and knobs[2]["macro"] and knobs[2]["loops"] == "simt"
    assert knobs[0]["loops"] == "simt_while" and knobs[5]["loops"] == "simt_for"
    assert not [k for k in run_knobs(ALL, DIRECTED_FROM - 1, seed=3) if k["family"] == "idioms"]  # small runs


def test_idioms_a_backend_cannot_declare_are_left_out():
    """No atomics, no serial loops: the programs leave those idioms out, and they are not required."""
    caps = Caps(ALL.features - {"atomic", "serial"}, ALL.dtypes)
    knobs = _idioms(5, caps)
    assert len(knobs) == 7 and not any(k["order"] or k["loops"] in ("serial", "simt_for") for k in knobs)
    assert all(k["loops"] != "simt_while" for k in _idioms(5, Caps(ALL.features - {"parallel_while"}, ALL.dtypes)))
    required = set(required_cells(caps, run_families(caps)))
    assert "idioms:macro" in required and not {"idioms:memory_order", "idioms:serial"} & required


def _groups_run(k: dict) -> tuple:
    """Whether the `if` group (A's move) and the `else` group (B's move) have threads."""
    if not k["split"]:
        return True, True
    op, bound = k["split"]
    taken = sum(1 for t in range(k["threads"]) if (t < bound if op == "<" else t >= bound))
    return taken > 0, taken < k["threads"]


def _clamped(k: dict, x: np.ndarray) -> np.ndarray:
    """x limited to [lo, hi] of the clamp knob (in float64 or int64: every value of x, lo and hi
    is exact there), NaN kept."""
    if not k["clamp"]:
        return x
    lo, hi = k["clamp"]
    wide = x.astype(np.float64 if x.dtype.kind not in "iub" else np.int64)
    return np.minimum(np.maximum(wide, lo), hi).astype(x.dtype)


def _expected(k: dict, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A (clamped, converted) into Out's first M rows, B into the rest (each added to the initial
    value when the moves are atomic adds); a move whose thread group is empty leaves its rows alone."""
    M, d_out = k["M"], k["out_dtype"]
    out = np.full((2 * M, k["N"]), OUTPUT_SENTINEL).astype(np_dtype(d_out))
    for rows, x, runs in zip((slice(0, M), slice(M, 2 * M)), (a, b), _groups_run(k)):
        if runs:
            value = convert(_clamped(k, x), d_out)
            out[rows] = (out[rows] + value).astype(out.dtype) if k["order"] else value
    return out


@settings(max_examples=14, deadline=None)
@given(hs.integers(0, 2**20), hs.integers(0, 5))
def test_idioms_programs_compute_what_they_say(seed, which):
    k = _idioms(seed)[which]
    prog = build(k)
    func = load_source(prog.source)
    arrays = make_inputs(prog.params, prog.bindings, prog.input_seed)
    interp.run(func, arrays, {})
    want = _expected(k, arrays[0], arrays[1])
    mismatch = compare("Out", k["out_dtype"], want, arrays[2], prog.tolerances["Out"])
    assert mismatch is None, f"{mismatch.describe()}\n{prog.source}"


def test_idioms_are_written_in_tilelangs_spellings():
    """The source holds each idiom's spelling (the frontend desugars them: only the text shows them)."""
    spelled = {
        "macro": ("@T.macro",),
        "split": ("if T.get_thread_binding() ",),
        "astype": (".astype(",),
        "Cast": ("T.Cast(",),
        "clamp": ("T.clamp(",),
        "serial": ("T.Serial(", "T.vectorized("),
        "floordiv": ("T.floordiv(f, ", "T.floormod(f, "),
        "memory_order": ("memory_order=",),
        "hints": ("T.disable_warp_group_reg_alloc()", "T.annotate_layout({"),
        "persistent": ("as block_id:", "for by, bx in T.Persistent(["),
        "simt": ("tx = T.get_thread_binding()", "_v = T.alloc_var(", "_x[tx] = ", "f = e * "),
        "simt_while": ("tx = T.get_thread_binding()", "_f = T.alloc_var(", "while ", "_f += 1"),
        "simt_for": ("tx = T.get_thread_binding()", "for f in T.serial(tx * ", ", T.min((tx + 1) * "),
    }
    for seed in (1, 2):
        for k in _idioms(seed):
            source = build(k).source
            for idiom in {c.split(":")[1] for c in program_cells(build(k)) if c.startswith("idioms:")}:
                assert all(text in source for text in spelled[idiom]), (idiom, source)


def test_idioms_pass_on_the_reference_backend():
    for k in _idioms(11):
        outcome = run_program(build(k), REF)
        assert outcome.status == "pass", outcome.message


@pytest.mark.parametrize("seed", [1, 2])
def test_a_macro_whose_second_call_reuses_the_first_is_caught(mutant_path, seed):
    """The planted bug `macro-copy-reused` (code cached by source position) gives well-formed IR
    that writes A's rows twice and never B's: every macro program of a run shows it."""
    macros = [k for k in _idioms(seed) if k["macro"] and all(_groups_run(k))]
    assert len(macros) >= 2
    for k in macros:
        _assert_shows_bug("macro-copy-reused", k)


@pytest.mark.parametrize("seed", [1, 2])
def test_a_per_thread_while_that_follows_one_lane_is_caught(mutant_path, seed):
    """The first idioms program moves its tiles with a per-thread `while` (threads loop different
    numbers of times); the planted bug `parallel-while-one-lane` (every thread's loop tests the
    last thread's condition) loses elements, in well-formed IR."""
    k = _idioms(seed)[0]
    assert k["loops"] == "simt_while" and k["macro"]
    _assert_shows_bug("parallel-while-one-lane", k)


@pytest.mark.parametrize("seed", [1, 2])
def test_a_per_thread_for_that_runs_one_lanes_bounds_is_caught(mutant_path, seed):
    """The sixth idioms program moves its tiles with a per-thread `for` whose bounds depend on the
    thread; the planted bug `parallel-for-one-lane` (every thread runs the last thread's bounds)
    stores the wrong elements, in well-formed IR."""
    k = _idioms(seed)[5]
    assert k["loops"] == "simt_for"
    _assert_shows_bug("parallel-for-one-lane", k)


def _assert_shows_bug(bug: str, k: dict) -> None:
    """Planting IR bug `bug` in program `k` gives well-formed IR whose output differs."""
    import tile_mutants

    from tilecore.passes.check_types import check

    prog = build(k)
    func = load_source(prog.source)
    planted = tile_mutants._plant(bug, func)
    check(planted)  # raises TileCompileError on inconsistent IR
    good = make_inputs(prog.params, prog.bindings, prog.input_seed)
    bad = [x.copy() for x in good]
    interp.run(func, good, {})
    interp.run(planted, bad, {})
    assert compare("Out", k["out_dtype"], good[2], bad[2], prog.tolerances["Out"]) is not None, prog.source


def test_the_directed_knob_is_each_programs_index():
    """A Ray shard regenerates a directed program as `directed_knobs(...)[knobs["directed"]]`
    (ray_shard._Shard.run): the knob must be its index, whichever directed programs a backend gets."""
    from tile_conformance.strategies import directed_knobs

    fams = run_families(ALL)
    knobs = directed_knobs(ALL, 7, fams)
    assert [k["family"] for k in knobs] == ["forms"] * 4 + ["idioms"] * 7 + ["offsets"]
    assert all(directed_knobs(ALL, 7, fams)[k["directed"]] == k for k in knobs)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_first_split_shows_a_thread_count_that_is_not_a_power_of_two(mutant_path, seed):
    """The first split program has threads= 96, 160 or 384 (the seeded families draw powers of two
    only) and more elements per tile than threads: the planted bug `threads-masked-pow2` (T.Parallel
    lanes masked to the power of two below) loses some of its elements, in well-formed IR."""
    k = _idioms(seed)[1]
    assert k["split"] and k["threads"] in (96, 160, 384) and k["bm"] * k["bn"] > k["threads"]
    _assert_shows_bug("threads-masked-pow2", k)
