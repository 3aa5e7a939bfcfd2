"""`while` loops in kernels: run-time conditions re-read every iteration, on reference and cpu
(npu and the SIMT backends: their own tests, with tilecore.testing.while_loops_kernel); a `while`
inside T.Parallel (each iteration its own loop; per-thread code's thread-dependent `while`:
tests/test_simt.py); clear errors where a condition cannot be lowered and on backends without the
feature."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilecore
import tilecore.language as T
from tilecore.diagnostics import TileCompileError, UnsupportedFeatureError
from tilecore.frontend import parse_source
from tilecore.ir.serialize import dumps, loads


@T.prim_func
def halvings(
    A: T.Tensor((8,), "int32"),
    Steps: T.Tensor((8,), "int32"),
    Rest: T.Tensor((8,), "int32"),
    Lim: T.Tensor((2,), "int32"),
    Out: T.Tensor((64,), "float32"),
):
    """Per block: halve A[bx] while it is above 3 (a data-dependent trip count, possibly 0);
    block 0 also loops over tiles whose range is read from memory (T.Parallel + T.copy inside)."""
    with T.Kernel(8) as bx:
        x = T.alloc_var("int32")
        n = T.alloc_var("int32")
        x = A[bx]
        n = 0
        while x > 3:
            x = x // 2
            n += 1
        Steps[bx] = n
        Rest[bx] = x
        if bx == 0:
            tile = T.alloc_fragment((8,), "float32")
            start = T.alloc_local((1,), "int32")
            start[0] = Lim[0]
            while start[0] < Lim[1]:
                for i in T.Parallel(8):
                    tile[i] = T.cast(start[0] * 8 + i, "float32")
                T.copy(tile, Out[start[0] * 8 : start[0] * 8 + 8])
                start[0] += 1


def _halvings(v: int):
    n = 0
    while v > 3:
        v, n = v // 2, n + 1
    return n, v


@pytest.fixture(scope="module", params=["reference", "cpu"])
def compiled(request):
    return request.param, tilecore.compile(halvings, target=request.param)


@settings(max_examples=10, deadline=None)
@given(st.lists(st.integers(-5, 10**6), min_size=8, max_size=8), st.integers(0, 8), st.integers(0, 8))
def test_while_matches_python(compiled, values, lo, hi):
    target, kernel = compiled
    a = np.array(values, np.int32)
    steps, rest = np.zeros(8, np.int32), np.zeros(8, np.int32)
    out = np.full(64, -1.0, np.float32)
    kernel(a, steps, rest, np.array([lo, hi], np.int32), out)
    want = np.array([_halvings(v) for v in values])
    np.testing.assert_array_equal(steps, want[:, 0], err_msg=target)
    np.testing.assert_array_equal(rest, want[:, 1], err_msg=target)
    expect = np.full(64, -1.0, np.float32)
    expect[lo * 8 : hi * 8] = np.arange(lo * 8, hi * 8)
    np.testing.assert_array_equal(out, expect, err_msg=target)


def test_while_prints_back_to_source():
    from tilecore.ir.printer import to_source

    text = to_source(halvings)
    again = parse_source(text)
    assert "while " in text and again == halvings and to_source(again) == text
    assert loads(dumps(halvings)) == halvings


def _kernel(body: str) -> str:
    return (
        "import tilecore.language as T\n"
        "@T.prim_func\n"
        "def k(A: T.Tensor((8,), 'int32')):\n"
        "    with T.Kernel(1) as bx:\n"
        "        n = T.alloc_var('int32')\n"
        "        n = A[0]\n" + body
    )


@pytest.mark.parametrize(
    "body, message",
    [
        ("        while 3 > 2:\n            n += 1\n", "must be a run-time value"),
        ("        while n < 4:\n            n += 1\n        else:\n            n = 0\n", "while-else"),
        ("        m = n\n        while m < 4:\n            m = m + 1\n", "assigned inside a while loop body"),
        ("        while A:\n            n += 1\n", "A"),
    ],
)
def test_conditions_that_cannot_be_lowered_are_errors_at_the_line(body, message):
    with pytest.raises(TileCompileError, match=message) as info:
        parse_source(_kernel(body))
    assert info.value.span.line >= 7


def test_a_backend_without_the_opt_in_feature_refuses_while_at_its_line():
    """`while_loop` is opt-in (outside ALL_FEATURES): a backend declaring "every feature" lacks it."""
    import os
    import sys

    from tilecore.passes.check_features import check_features
    from tilecore.passes.pipeline import PassContext

    sys.path.insert(0, os.path.dirname(__file__))
    from test_passes_support import make_backend

    with pytest.raises(UnsupportedFeatureError, match="backend toy does not support `while` loops") as info:
        check_features(halvings, PassContext(backend=make_backend("toy"), source=halvings.source))
    lines = open(__file__).read().splitlines()
    assert lines[info.value.span.line - 1].strip() == "while x > 3:"


@T.prim_func
def countdowns(A: T.Tensor((2, 8), "int32"), Steps: T.Tensor((2, 8), "int32")):
    """Each T.Parallel iteration runs its own loop: halve A[i, j] while it is above 3."""
    with T.Kernel(1) as bx:
        x = T.alloc_fragment((2, 8), "int32")
        n = T.alloc_fragment((2, 8), "int32")
        for i, j in T.Parallel(2, 8):
            x[i, j] = A[i, j]
            n[i, j] = 0
            while x[i, j] > 3:
                x[i, j] = x[i, j] // 2
                n[i, j] += 1
            Steps[i, j] = n[i, j] + bx


@pytest.mark.parametrize("target", ["reference", "cpu", "npu"])
def test_a_while_inside_parallel_runs_once_per_iteration(target):
    a = np.array([[-5, 0, 3, 4, 7, 8, 1000, 2**30], [9, 1, 2, 16, 17, 100, 5, 6]], np.int32)
    steps = np.full((2, 8), -1, np.int32)
    tilecore.compile(countdowns, target=target)(a, steps)
    want = np.array([[_halvings(int(v))[0] for v in row] for row in a])
    np.testing.assert_array_equal(steps, want, err_msg=target)
    from tilecore.ir.printer import to_source

    assert parse_source(to_source(countdowns)) == countdowns  # the printer's text parses back
    assert loads(dumps(countdowns)) == countdowns


def test_a_backend_without_parallel_while_refuses_it_at_its_line():
    """`parallel_while` is opt-in too: a backend that declares every feature and `while_loop` but
    not it refuses the loop inside T.Parallel by name, at its line."""
    import os
    import sys

    from tilecore.language.features import ALL_FEATURES
    from tilecore.passes.check_features import check_features
    from tilecore.passes.pipeline import PassContext

    sys.path.insert(0, os.path.dirname(__file__))
    from test_passes_support import make_backend

    toy = make_backend("toy", features=ALL_FEATURES | {"while_loop"})
    with pytest.raises(
        UnsupportedFeatureError, match="backend toy does not support `while` loops inside T.Parallel"
    ) as e:
        check_features(countdowns, PassContext(backend=toy, source=countdowns.source))
    assert open(__file__).read().splitlines()[e.value.span.line - 1].strip() == "while x[i, j] > 3:"
