"""The generator: reproducible, parsed by the real frontend, restricted by capabilities."""

from __future__ import annotations

from tile_conformance.execute import load_source, run_program
from tile_conformance.programs import FAMILIES, build
from tile_conformance.runner import family_quota, generate_knobs
from tile_conformance.strategies import Caps
from tilecore.interp.plugin import make_backend
from tilecore.language.features import features_used

REF = make_backend()
ALL = Caps.from_backend(REF)


def test_same_seed_same_programs():
    a = [build(k).source for k in generate_knobs(ALL, 40, seed=7)]
    b = [build(k).source for k in generate_knobs(ALL, 40, seed=7)]
    c = [build(k).source for k in generate_knobs(ALL, 40, seed=8)]
    assert a == b
    assert a != c
    assert len(a) == 40


def test_families_balanced():
    knobs = generate_knobs(ALL, 70, seed=1)
    counts = {f: sum(k["family"] == f for k in knobs) for f in FAMILIES}
    assert counts == family_quota(FAMILIES, 70)


def test_every_family_parses_and_declares_its_features():
    for k in generate_knobs(ALL, 70, seed=2):
        prog = build(k)
        func = load_source(prog.source)
        # what the frontend sees is what the generator claims (partial_tiles only the generator knows;
        # int32 index arithmetic and bool conditions appear in every program with indexing or an if)
        used = set(features_used(func)) - {"partial_tiles", "dtype:int32", "dtype:bool"}
        assert used <= set(prog.features), (prog.source, used - set(prog.features))
        assert func.source.startswith("import tilecore.language as T")


def test_spans_point_at_generated_lines():
    prog = build(generate_knobs(ALL, 7, seed=3)[0])
    func = load_source(prog.source)
    lines = prog.source.splitlines()
    assert lines[func.kernel.span.line - 1].strip().startswith("with T.Kernel(")


def test_capabilities_restrict_generation():
    caps = Caps(
        features=frozenset({"copy", "parallel", "fill", "dtype:float32", "dtype:int32"}),
        dtypes=frozenset({"float32", "int32"}),
    )
    for k in generate_knobs(caps, 30, seed=4):
        prog = build(k)
        assert prog.features <= caps.features, (prog.source, prog.features - caps.features)
        assert "bfloat16" not in prog.source and "T.gemm" not in prog.source


def test_undeclared_features_reported_unsupported(monkeypatch):
    import dataclasses

    narrow = dataclasses.replace(
        REF,
        capabilities=dataclasses.replace(REF.capabilities, features=frozenset(REF.capabilities.features) - {"math"}),
    )
    # a program with math, checked against a backend that does not declare it, is never passed
    for k in generate_knobs(ALL, 20, seed=5, families=("ewise",)):
        prog = build(k)
        if "math" in prog.features:
            out = run_program(prog, narrow)
            assert out.status == "unsupported" and "math" in out.unsupported
            break
    else:
        raise AssertionError("no math program generated")


def test_selects_of_an_unsigned_dtype_get_literals_that_fit():
    """A select between a uint8 value and the literal -3 (the literal adopts uint8) was refused by
    the frontend, a suite error that left cpu NOT CERTIFIED at seed 9393 (program 33)."""
    from tile_conformance.runner import resolve_backend

    caps = Caps.from_backend(resolve_backend("cpu"))
    knobs = generate_knobs(caps, 34, seed=9393)[33]
    assert knobs["in_dtypes"] == ["uint8"] and ["const", -3] in knobs["expr"][2]
    prog = build(knobs)
    load_source(prog.source)  # the frontend accepts it
    assert "-3" not in prog.source  # the literal became 3


def test_later_wrap_programs_compare_wrapped_int64_and_int32_values_with_their_operand():
    """The first "wrap" program of a run adds narrow integers; the later ones wrap int64 (then int32)
    and keep x op B only where it compares as the wrapped value does (LLVM's `nsw` folding of
    x - B >= x to B <= 0 is caught; tile-cpu's int64 lowering until session 8)."""

    wraps = [k for k in generate_knobs(ALL, 300, seed=14141, families=("intops",)) if k["target"] == "wrap"]
    assert [k["dtypes"][0] for k in wraps[:4]] in (
        ["int8", "int64", "int64", "int32"],
        ["int16", "int64", "int64", "int32"],
    )
    for k in wraps[1:]:
        kind, cond, kept, other = k["expr"]
        assert kind == "sel" and cond[0] == "cmp" and cond[2] == kept and cond[3] == other == kept[2]


def test_shrinking_a_four_dimensional_copy_may_drop_its_leading_dimensions():
    from tile_conformance.shrink import variants

    k = next(k for k in generate_knobs(ALL, 40, seed=12, families=("copy",)) if k.get("heads"))
    offered = dict(variants(k))
    assert offered["heads"] == [False] and offered["batch"] == [False]
    rank3 = build({**k, "heads": False})
    assert len(rank3.params[0].shape) == 3 and "for h in" not in rank3.source
    load_source(rank3.source)


def test_opt_in_features_only_add_to_the_programs_of_a_backend_without_them():
    """fp8 and `while` are chosen by slot after every draw of a family: the same backend without
    them gets the same knobs minus the opt-in parts (an fp8 GEMM's dtypes replace the drawn ones),
    so backends that do not declare them keep the programs they had."""
    import dataclasses

    from tilecore.ir.types import FP8_DTYPES, is_fp8

    opt_in = {"while_loop"} | {f"dtype:{d}" for d in FP8_DTYPES}
    without = dataclasses.replace(ALL, features=ALL.features - opt_in, dtypes=ALL.dtypes - set(FP8_DTYPES))
    assert ALL.fp8s() and ALL.has("while_loop") and not without.fp8s()
    added = {"fp8", "fp8_exact", "while", "allowed_dtypes"}  # (the last: the declared dtypes, listed)
    changed = 0
    for a, b in zip(generate_knobs(ALL, 132, seed=9), generate_knobs(without, 132, seed=9)):
        fp8_gemm = a["family"] == "gemm" and is_fp8(a["in_dtype"])
        skip = added | ({"in_dtype", "acc_dtype", "out_dtype"} if fp8_gemm else set())
        assert {k: v for k, v in a.items() if k not in skip} == {k: v for k, v in b.items() if k not in skip}
        changed += a != b
    assert changed >= 20  # each convert program, half the control ones, a third of the gemms


def _rss_bytes() -> int:
    import os

    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_directed_program_reads_past_two_gib_and_costs_only_its_window():
    """A backend declaring the memory (max_tensor_bytes) gets one directed program per default-sized
    run: tiles of a one-byte tensor past 2^31 bytes, every tile starting past offset 2^31 (the
    mutation gate's offset32 bug, 32-bit offsets, fails it). Its input is filled only where read."""
    import dataclasses
    import os

    import pytest

    from tile_conformance.coverage import program_cells, required_cells
    from tile_conformance.execute import make_inputs
    from tile_conformance.runner import DIRECTED_FROM, run_families, run_knobs

    fams = run_families(ALL)
    knobs = run_knobs(ALL, DIRECTED_FROM, seed=5)
    # after the seeded programs: the four `forms` and seven `idioms` programs (test_conformance_forms.py,
    # test_conformance_idioms.py), then this one
    assert len(knobs) == DIRECTED_FROM + 12 and knobs[:DIRECTED_FROM] == generate_knobs(ALL, DIRECTED_FROM, seed=5)
    assert len(run_knobs(ALL, DIRECTED_FROM - 1, seed=5)) == DIRECTED_FROM - 1  # small runs: none
    undeclared = dataclasses.replace(ALL, max_tensor_bytes=None)
    assert len(run_knobs(undeclared, DIRECTED_FROM, seed=5)) == DIRECTED_FROM + 11
    assert "size:>2^31 bytes" not in required_cells(undeclared, fams)
    prog = build(knobs[-1])
    assert "size:>2^31 bytes" in program_cells(prog) and "size:>2^31 bytes" in required_cells(ALL, fams)
    big = prog.params[0]
    rows, cols = big.shape
    assert rows * cols > 2**31 and knobs[-1]["row0"] * cols >= 2**31  # every tile past offset 2^31
    from tile_conformance.programs import Unbuildable

    for shrunk in ({"dtype": "int32"}, {"row0": 60000}, {"N": 1024}):  # what shrinking must not reach
        with pytest.raises(Unbuildable):
            build({**knobs[-1], **shrunk})
    if not os.path.exists("/proc/self/statm"):
        pytest.skip("no /proc/self/statm to read the resident memory from")
    before = _rss_bytes()
    arrays = make_inputs(prog.params, prog.bindings, prog.input_seed)
    assert _rss_bytes() - before < 64 << 20  # the window, not 2 GiB
    r0, r1, c0, c1 = (int(v) for v in big.edges.split(":")[1:])
    assert arrays[0][r0:r1, c0:c1].any() and not arrays[0][r0 - 1].any()
    outcome = run_program(prog, REF)
    assert outcome.status == "pass", outcome.message


def test_a_minimum_run_draws_each_loop_kind_twice():
    """A run of the certification minimum (100 programs) meets the must-pass list's two programs
    per feature for the loop kinds whatever the seed: the first control programs take serial,
    range and T.unroll in turn (at seed 19191, `T.unroll` used to come up in one program only)."""
    from tile_conformance.report import load_must_pass
    from tile_conformance.runner import DIRECTED_FROM

    need = load_must_pass()["min_passes"]
    for seed in (19191, 27272, 5):
        counts = {}
        for k in generate_knobs(ALL, DIRECTED_FROM, seed=seed):
            for f in build(k).features:
                counts[f] = counts.get(f, 0) + 1
        assert counts.get("unroll", 0) >= need and counts.get("serial", 0) >= need, (seed, counts)


def test_integer_operations_of_an_unsigned_dtype_with_a_negative_literal_compute_in_int32():
    """`a_v - -3` with a uint8 a_v: the literal adopts uint8 and the frontend refuses it, a suite
    error that left cuda (compile tier, option tma_multicast) NOT CERTIFIED at seed 67676
    (program 187). Such a step is computed in int32, as one that would overflow is."""
    from tile_conformance import exprs as X
    from tile_conformance.runner import resolve_backend

    r = X.render_int(["bin", "-", ["in", 0], ["const", -3]], [X.Leaf("a_v", "uint8", 0, 250)])
    assert r.dtype == "int32" and r.text == '(T.cast(a_v, "int32") - -3)' and (r.lo, r.hi) == (3, 253)
    knobs = generate_knobs(Caps.from_backend(resolve_backend("cuda")), 188, seed=67676)[187]
    assert knobs["in_dtypes"][0] == "uint8"
    load_source(build(knobs).source)  # the frontend accepts it
