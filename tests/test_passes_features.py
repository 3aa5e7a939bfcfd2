"""check_features: the first feature the backend lacks is an UnsupportedFeatureError at its use."""

from __future__ import annotations

import os
import sys

import pytest

from tilecore.diagnostics import TileCompileError, UnsupportedFeatureError
from tilecore.ir import nodes as N
from tilecore.language.features import ALL_FEATURES
from tilecore.passes.bounds import bounds
from tilecore.passes.check_features import check_features
from tilecore.passes.pipeline import PassContext

sys.path.insert(0, os.path.dirname(__file__))
from test_passes_support import FILE, SOURCE, c, gemm_func, kernel_func, make_backend, region, span  # noqa: E402


def run(func, backend):
    ctx = PassContext(backend=backend, source=SOURCE)
    return check_features(func, ctx)


def test_cumsum_on_a_backend_without_it():
    F = N.Buffer("F", (16, 16), "float32", "fragment")
    func = kernel_func(
        [],
        [
            N.Alloc(F, span=span(8)),
            N.Fill(region(F), c(0.0, "float32"), span=span(9)),
            N.Cumsum(F, F, 1, span=span(13)),
        ],
    )
    backend = make_backend("cpu", features=ALL_FEATURES - {"cumsum"})
    with pytest.raises(UnsupportedFeatureError) as info:
        run(func, backend)
    err = info.value
    assert err.message == "backend cpu does not support T.cumsum"
    assert err.backend == "cpu" and err.feature_key == "cumsum"
    assert err.span.line == 13 and str(err).startswith(f"{FILE}:13:")
    assert run(func, make_backend("cpu")) is func


def test_the_first_use_in_the_source_is_reported():
    func = gemm_func(gemm_kwargs={"transpose_b": True}, bk=64)
    backend = make_backend("npu", features=ALL_FEATURES - {"gemm_transpose", "pipelined"})
    with pytest.raises(UnsupportedFeatureError) as info:
        run(func, backend)
    assert info.value.span.line == 10  # T.Pipelined (line 10) comes before the gemm (line 13)
    assert "T.Pipelined" in info.value.message


def test_dtypes_are_checked_against_declared_dtypes():
    func = gemm_func(dtype="float64", accum="float64")
    backend = make_backend(
        "metal", features=ALL_FEATURES - {"dtype:float64"}, dtypes={"float16", "float32", "int32", "bool"}
    )
    with pytest.raises(UnsupportedFeatureError) as info:
        run(func, backend)
    assert info.value.message == "backend metal does not support dtype float64"
    assert info.value.span.line == 4


def test_gemm_dtype_pairs():
    backend = make_backend("cuda", gemm_dtypes=frozenset({("float16", "float32")}))
    run(gemm_func(), backend)
    with pytest.raises(UnsupportedFeatureError) as info:
        run(gemm_func(dtype="float16", accum="float16"), backend)
    assert "T.gemm with float16 inputs and a float16 accumulator" in info.value.message
    assert info.value.span.line == 13


def test_partial_tiles_only_when_bounds_could_not_prove_the_copies():
    backend = make_backend("npu", features=ALL_FEATURES - {"partial_tiles"})
    proven = bounds(gemm_func(M=256), PassContext())
    run(proven, backend)
    partial = bounds(gemm_func(M=200), PassContext())
    with pytest.raises(UnsupportedFeatureError) as info:
        run(partial, backend)
    assert info.value.span.line == 11 and info.value.feature_key == "partial_tiles"


def test_threads_limit_and_no_backend():
    func = gemm_func()
    with pytest.raises(TileCompileError) as info:
        run(func, make_backend("tiny", max_threads=64))
    assert "threads=128 exceeds the 64 threads per block that backend tiny supports" in info.value.message
    assert info.value.span.line == 5
    assert check_features(func, PassContext()) is func
