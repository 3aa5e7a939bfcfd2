"""pipeline: order, insertion points, trace, IR dumps, and the default pipeline end to end."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import sys

import pytest

from tilecore.diagnostics import TileCompileError, UnsupportedFeatureError
from tilecore.ir import nodes as N
from tilecore.language.features import ALL_FEATURES
from tilecore.passes.pipeline import POINTS, PassContext, Pipeline, default_pipeline

sys.path.insert(0, os.path.dirname(__file__))
from test_passes_support import SOURCE, gemm_func, make_backend  # noqa: E402

CORE = [
    "fragment_extents",
    "check_types",
    "int4_storage",
    "simplify",
    "bounds",
    "check_features",
    "loops",
    "memory_plan",
    "layout_inference",
]


def recorder(name, log):
    def pass_(func, ctx):
        log.append(name)
        return func

    pass_.name = name
    return pass_


def test_default_order_and_points():
    pipe = default_pipeline()
    assert pipe.names() == CORE
    log = []
    for point in reversed(POINTS):
        pipe.insert(point, recorder(point, log))
    pipe.insert("after_check", recorder("after_check_2", log))
    assert pipe.names() == [
        "after_parse",
        "fragment_extents",
        "check_types",
        "int4_storage",
        "after_check",
        "after_check_2",
        "simplify",
        "after_simplify",
        "bounds",
        "after_bounds",
        "check_features",
        "loops",
        "memory_plan",
        "layout_inference",
        "after_layout",
        "before_codegen",
    ]
    pipe.run(gemm_func(), PassContext())
    assert log == [n for n in pipe.names() if n not in CORE]


def test_bad_insertions_and_bad_passes():
    pipe = default_pipeline()
    with pytest.raises(ValueError, match="unknown pipeline point 'after_lunch'"):
        pipe.insert("after_lunch", recorder("x", []))
    with pytest.raises(TypeError):
        pipe.insert("after_check", 42)

    def broken(func, ctx):
        return None

    pipe.insert("after_bounds", broken)
    with pytest.raises(TypeError, match="pass 'broken' returned NoneType, expected a PrimFunc"):
        pipe.run(gemm_func(), PassContext())


def test_trace_lists_the_ir_after_each_pass():
    ctx = PassContext()
    steps = default_pipeline().trace(gemm_func(M=200), ctx)
    assert [name for name, _ in steps] == ["input"] + CORE
    before = [s.predicated for s in steps[0][1].kernel.body[4].body[:2]]
    after = [s.predicated for s in steps[1 + CORE.index("bounds")][1].kernel.body[4].body[:2]]
    assert before == [True, True] and after == [True, False]
    assert set(ctx.analyses) >= {"bounds", "loops", "memory_plan", "liveness", "layout"}
    assert all(f.source == SOURCE for _, f in steps)


def test_dump_ir_writes_one_file_per_pass(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECORE_DUMP_IR", str(tmp_path))
    default_pipeline().run(gemm_func(), PassContext())
    names = sorted(os.listdir(tmp_path))
    stems = ["00-input"] + [f"{i:02d}-{n}" for i, n in enumerate(CORE, start=1)]
    assert [n for n in names if n.endswith(".py")] == [s + ".py" for s in stems]
    text = (tmp_path / f"{1 + CORE.index('bounds'):02d}-bounds.py").read_text()
    assert "main" in text
    if importlib.util.find_spec("tilecore.ir.serialize") is not None:
        from tilecore.ir.serialize import loads

        assert [n for n in names if n.endswith(".json")] == [s + ".json" for s in stems]
        after_bounds = loads((tmp_path / f"{1 + CORE.index('bounds'):02d}-bounds.json").read_text())
        assert after_bounds == default_pipeline().run(gemm_func(), PassContext())


def test_default_pipeline_end_to_end_with_backend_limits():
    backend = make_backend("cuda", max_shared=48 * 1024, features=ALL_FEATURES - {"partial_tiles"})
    ctx = PassContext(backend=backend, target="cuda", source=SOURCE)
    out = default_pipeline().run(gemm_func(M=256), ctx)
    assert ctx.analyses["memory_plan"].shared_bytes == 2 * 64 * 32 * 2
    assert not any(s.predicated for s in out.kernel.body[4].body[:2])
    # partial tiles need the feature this backend lacks: the error is at the first unproven copy
    with pytest.raises(UnsupportedFeatureError) as info:
        default_pipeline().run(gemm_func(M=200), PassContext(backend=backend, source=SOURCE))
    assert info.value.span.line == 11
    # type errors stop the pipeline first
    bad = gemm_func(b_dtype="float32")
    with pytest.raises(TileCompileError, match="T.gemm dtype mismatch"):
        default_pipeline().run(bad, PassContext(backend=backend))


def test_passes_that_rewrite_keep_the_source():
    def rebuild(func, ctx):
        return N.PrimFunc(func.name, func.params, func.body, func.dyn_vars, span=func.span)

    rebuild.name = "rebuild"
    pipe = Pipeline([("pass", rebuild)])
    assert pipe.run(gemm_func()).source == SOURCE


def test_a_backend_pass_sees_analyses():
    seen = {}

    def codegen_prep(func, ctx):
        seen["facts"] = len(ctx.analyses["bounds"])
        return dataclasses.replace(func, name=func.name + "_prepared")

    codegen_prep.name = "codegen_prep"
    pipe = default_pipeline()
    pipe.insert("before_codegen", codegen_prep)
    out = pipe.run(gemm_func(), PassContext())
    assert out.name == "main_prepared" and seen["facts"] == 3


def test_trace_of_a_failing_pipeline_keeps_the_completed_steps():
    backend = make_backend("cuda", max_shared=1024)
    with pytest.raises(TileCompileError) as info:
        default_pipeline().trace(gemm_func(), PassContext(backend=backend, source=SOURCE))
    assert [name for name, _ in info.value.partial_trace] == ["input"] + CORE[: CORE.index("memory_plan")]
