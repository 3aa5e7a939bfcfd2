"""Printer: IR -> DSL text that parses back to an equal IR."""

import os
import sys

import pytest

import tilecore.language as T
from tilecore.frontend import parse_source
from tilecore.ir import nodes as N
from tilecore.ir.printer import expr_to_source, to_source

sys.path.insert(0, os.path.dirname(__file__))  # pytest runs with --import-mode=importlib
from frontend_kernels import flash_attention, layernorm, matmul, softmax

KERNELS = {
    "gemm_partial": lambda: matmul(200, 200, 200, 64, 64, 32),
    "softmax": lambda: softmax(64, 128),
    "layernorm": lambda: layernorm(64, 128),
    "fa_causal": lambda: flash_attention(1, 2, 256, 64, True),
    "fa": lambda: flash_attention(1, 2, 256, 64, False),
}


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_example_kernels_round_trip(name):
    func = KERNELS[name]()
    text = to_source(func)
    assert text.startswith("import tilecore.language as T\n")
    again = parse_source(text)
    assert again == func
    assert to_source(again) == text


def test_printed_gemm_reads_like_tilelang():
    text = to_source(matmul(256, 256, 256, 64, 64, 32))
    assert "T.copy(A[by * 64, k * 32], A_s)" in text
    assert "for k in T.Pipelined(8, num_stages=3):" in text
    assert "T.gemm(A_s, B_s, C_f, policy=T.GemmWarpPolicy.FullRow)" in text
    assert "T.use_swizzle(panel_size=10, enable=True)" in text


def test_dynamic_dims_constants_and_special_values_round_trip():
    m = T.dynamic("m")

    @T.prim_func
    def k(A: T.Tensor((m, 8), "float16"), B: T.Tensor((m, 8), "int8")):
        with T.Kernel(T.ceildiv(m, 4), threads=(32, 4)) as bx:
            v = T.alloc_var("float32")
            v = T.float32("-inf")
            for i, j in T.Parallel(4, 8):
                A[bx * 4 + i, j] = T.max(A[bx * 4 + i, j], T.float16(2.5)) + T.cast(B[bx * 4 + i, j], "float16")
                B[bx * 4 + i, j] = T.if_then_else(i < 2 and not j > 3, B[bx * 4 + i, j] * -3, 7)
            for t in T.serial(bx, m):
                v = T.max(v, T.cast(A[t, 0], "float32"))
            T.print(v, msg="max")

    text = to_source(k)
    assert 'm = T.dynamic("m", "int32")' in text
    assert parse_source(text) == k


def test_expr_to_source_parenthesizes_by_precedence():
    i, j = N.Var("i"), N.Var("j")
    add = N.BinOp("+", i, j, "int32")
    assert expr_to_source(N.BinOp("*", add, N.Const(2, "int32"), "int32")) == "(i + j) * 2"
    assert expr_to_source(N.BinOp("-", i, add, "int32")) == "i - (i + j)"
    assert expr_to_source(N.BinOp("-", add, i, "int32")) == "i + j - i"


# ----------------------------------------------------------------------------- properties

from dsl_strategies import dsl_programs  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from ir_strategies import prim_funcs  # noqa: E402

PROPERTY = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


@PROPERTY
@given(prim_funcs())
def test_random_ir_prints_to_source_that_parses_back_equal(func):
    text = to_source(func)
    again = parse_source(text)
    assert again == func
    assert to_source(again) == text


@PROPERTY
@given(dsl_programs())
def test_random_programs_print_and_reparse_equal(text):
    func = parse_source(text)
    printed = to_source(func)
    again = parse_source(printed)
    assert again == func
    assert to_source(again) == printed
