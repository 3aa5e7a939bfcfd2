"""`T.get_thread_binding()` as a thread-group split: `if T.get_thread_binding() < c:` gives the
`if` branch to threads [0, c) and the `else` branch to the rest; with no shared state between the
groups the result is that of running the non-empty groups' branches one after the other. Other
uses are per-thread code (tests/test_simt.py)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import tilecore
from tilecore.diagnostics import TileCompileError
from tilecore.frontend import parse_source
from tilecore.ir import nodes as N


def _split(bound: int, op: str = "<"):
    src = f"""
import tilecore.language as T
@T.prim_func
def split(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32"), C: T.Tensor((64,), "float32")):
    with T.Kernel(2, threads=96) as bx:
        s = T.alloc_shared((32,), "float32")
        T.copy(A[bx * 32 : bx * 32 + 32], s)
        if T.get_thread_binding() {op} {bound}:
            for i in T.Parallel(32):
                B[bx * 32 + i] = s[i] * 2.0
        else:
            t = T.alloc_fragment((32,), "float32")
            T.copy(s, t)
            for i in T.Parallel(32):
                C[bx * 32 + i] = t[i] + 1.0
"""
    return parse_source(src)


@pytest.mark.parametrize(
    "bound, op, then_runs, else_runs",
    [
        (32, "<", True, True),
        (0, "<", False, True),
        (96, "<", True, False),
        (95, ">=", True, True),
        (0, ">=", True, False),
    ],
)
def test_groups_that_have_threads_run_their_branch(bound, op, then_runs, else_runs):
    func = _split(bound, op)
    kernel = next(s for s in func.body if isinstance(s, N.Kernel))
    assert not any(isinstance(s, N.If) for s in kernel.body)  # resolved while parsing
    a = np.arange(64, dtype=np.float32)
    # cpu compiles once (both groups run); the reference checks every case
    for target in ("reference", "cpu") if (then_runs and else_runs and op == "<") else ("reference",):
        b, c = np.zeros(64, np.float32), np.zeros(64, np.float32)
        tilecore.compile(func, target=target)(a, b, c)
        np.testing.assert_array_equal(b, a * 2 if then_runs else 0, err_msg=target)
        np.testing.assert_array_equal(c, a + 1 if else_runs else 0, err_msg=target)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc here")
def test_split_compiles_for_cuda_sm_90a():
    kernel = tilecore.compile(_split(32), target="cuda:sm_90a")
    assert "__global__" in kernel.get_kernel_source()


def _one_block(line: str) -> str:
    return (
        "import tilecore.language as T\n"
        "@T.prim_func\n"
        "def k(A: T.Tensor((4,), 'float32'), B: T.Tensor((4,), 'float32')):\n"
        "    with T.Kernel(1, threads=64) as bx:\n"
        "        " + line + "\n"
    )


def test_a_split_inside_parallel_is_an_error_at_the_line():
    line = "for i in T.Parallel(4):\n            if T.get_thread_binding() < 2:\n                B[i] = 1.0"
    with pytest.raises(TileCompileError, match="T.Parallel") as info:
        parse_source(_one_block(line))
    assert info.value.span.line == 6


@pytest.mark.parametrize(
    "line",
    [
        "if T.get_thread_binding() < 32 and A[0] > 0:\n            B[0] = 1.0",
        "if T.get_thread_binding() < A[1]:\n            B[0] = 1.0",
    ],
)
def test_other_conditions_are_per_thread_code(line):
    """Not the split form: every thread evaluates the condition (docs/semantics.md "Per-thread code")."""
    b = np.zeros(4, np.float32)
    tilecore.compile(parse_source(_one_block(line)), target="reference")(np.full(4, 2.0, np.float32), b)
    assert b[0] == 1.0
