"""loops: trip counts and the stage buffers a backend may multi-buffer; multi-buffered memory plans."""

from __future__ import annotations

import os
import sys

import pytest

from tilecore.diagnostics import TileCompileError
from tilecore.ir import nodes as N
from tilecore.passes.loops import analyze
from tilecore.passes.memory_plan import MemoryPlanPass
from tilecore.passes.pipeline import PassContext, default_pipeline

sys.path.insert(0, os.path.dirname(__file__))
from test_passes_support import SOURCE, c, gemm_func, kernel_func, make_backend, mul, region, v  # noqa: E402


def test_gemm_loop_stage_buffers():
    (info,) = analyze(gemm_func(K=128, bk=32))
    assert (info.var, info.kind, info.trip_count, info.num_stages, info.depth) == ("k", "pipelined", 4, 3, 0)
    assert info.stage_buffers == ("A_s", "B_s") and info.pipelined


def test_buffers_read_before_their_copy_or_partly_written_are_not_stages():
    A = N.Buffer("A", (256,), "float32")
    S = N.Buffer("S", (32,), "float32", "shared")
    P = N.Buffer("P", (64,), "float32", "shared")
    out = N.Buffer("out", (32,), "float32", "fragment")
    k = v("k")
    body = (
        N.Copy(region(S), region(out)),  # reads last iteration's S
        N.Copy(region(A, (mul(k, c(32)),), (32,)), region(S)),
        N.Copy(region(A, (mul(k, c(32)),), (32,)), region(P, (0,), (32,))),  # half of P only
    )
    func = kernel_func(
        [A], [N.Alloc(S), N.Alloc(P), N.Alloc(out), N.For(k, c(0), v("bx"), "pipelined", body, num_stages=2)], grid=(8,)
    )
    (info,) = analyze(func)
    assert info.stage_buffers == () and not info.pipelined and info.trip_count is None


def test_multi_buffered_plan_multiplies_stage_buffers_and_checks_the_limit():
    func = gemm_func(bm=64, bn=64, bk=32)  # A_s 4 KiB, B_s 4 KiB, 3 stages
    ctx = PassContext()
    pipe = default_pipeline()
    pipe.replace("memory_plan", MemoryPlanPass(multi_buffer=True))
    pipe.run(func, ctx)
    shared = ctx.analyses["memory_plan"].storages["shared"]
    assert shared.stages == {"A_s": 3, "B_s": 3}
    assert shared.total_bytes == 3 * 4096 * 2
    backend = make_backend("cuda", max_shared=20 * 1024)
    default_pipeline().run(func, PassContext(backend=backend))  # single-buffered: 8 KiB fits
    with pytest.raises(TileCompileError) as info:
        pipe.run(func, PassContext(backend=backend, source=SOURCE))
    assert "needs 24576 bytes" in info.value.message and "(3 stages)" in info.value.message
    assert info.value.span.line == 7


def test_replace_unknown_pass():
    with pytest.raises(ValueError, match="no core pass named 'nope'"):
        default_pipeline().replace("nope", MemoryPlanPass())
