"""The reference interpreter on hand-built Tile IR: every op and semantic rule of DESIGN.md."""

from __future__ import annotations

import os
import sys

import ml_dtypes
import numpy as np
import pytest

from tilecore.diagnostics import TileRuntimeError
from tilecore.interp import run
from tilecore.ir import nodes as N

sys.path.insert(0, os.path.dirname(__file__))
from test_interp_support import (  # noqa: E402
    FILE,
    add,
    binop,
    buf,
    const,
    func,
    gemm_ir,
    kernel,
    load,
    lt,
    mul,
    parallel,
    region,
    serial,
    span,
    store,
    var,
    whole,
)

RNG = np.random.default_rng(1234)


def rand(shape, dtype=np.float32, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, size=shape).astype(dtype)


def one_block(params, body, grid=(1,), names=("bx",)):
    return func(params, [kernel(list(grid), list(names), body)])


# ----------------------------------------------------------------------------- GEMM


@pytest.mark.parametrize("M,N_,K", [(200, 200, 200), (64, 64, 32), (130, 70, 33)])
def test_gemm_partial_tiles_match_numpy(M, N_, K):
    f = gemm_ir(M, N_, K, 64, 64, 32)
    a, b = rand((M, K)), rand((K, N_))
    c = np.full((M, N_), 7.0, np.float32)  # every element must be overwritten
    run(f, [a, b, c])
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-5)


def test_gemm_fp16_inputs_fp32_accumulation():
    f = gemm_ir(96, 80, 70, 32, 32, 16, dtype="float16", accum="float32")
    a, b = rand((96, 70), np.float16), rand((70, 80), np.float16)
    c = np.zeros((96, 80), np.float16)
    run(f, [a, b, c])
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c.astype(np.float64), ref, rtol=1e-2, atol=1e-2)


def test_gemm_dynamic_m_bound_from_arguments():
    f = gemm_ir(None, 64, 64, 32, 32, 32, dyn=True)
    for m in (17, 64, 100):
        a, b, c = rand((m, 64)), rand((64, 64)), np.zeros((m, 64), np.float32)
        run(f, [a, b, c])
        np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def _single_gemm(ta, tb, clear, a_dt="float32", c_dt="float32", shape=(16, 8, 12)):
    m, n, k = shape
    A = buf("A", (k, m) if ta else (m, k), a_dt)
    B = buf("B", (n, k) if tb else (k, n), a_dt)
    C = buf("C", (m, n), c_dt)
    body = [N.Gemm(whole(A), whole(B), whole(C), transpose_a=ta, transpose_b=tb, clear_accum=clear)]
    return one_block([A, B, C], body)


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("clear", [False, True])
def test_gemm_transposes_and_clear_accum(ta, tb, clear):
    f = _single_gemm(ta, tb, clear)
    a = rand((12, 16) if ta else (16, 12))
    b = rand((8, 12) if tb else (12, 8))
    c0 = rand((16, 8))
    c = c0.copy()
    run(f, [a, b, c])
    ref = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64)
    if not clear:
        ref = ref + c0
    np.testing.assert_allclose(c, ref, rtol=1e-6, atol=1e-6)


def test_gemm_int8_exact_int32_accumulation():
    f = _single_gemm(False, False, True, "int8", "int32", shape=(8, 8, 64))
    a = RNG.integers(-128, 128, (8, 64)).astype(np.int8)
    b = RNG.integers(-128, 128, (64, 8)).astype(np.int8)
    c = np.zeros((8, 8), np.int32)
    run(f, [a, b, c])
    np.testing.assert_array_equal(c, a.astype(np.int64) @ b.astype(np.int64))


def test_gemm_products_are_exact_then_rounded_once():
    # 1 + 2^-12 squared needs more than fp32's mantissa; fp32 products would lose 2^-24.
    f = _single_gemm(False, False, True, "float32", "float64", shape=(1, 1, 2))
    x = np.float32(1 + 2**-12)
    a = np.array([[x, x]], np.float32)
    b = np.array([[x], [-x]], np.float32) * np.array([[1], [1]], np.float32)
    b[1, 0] = np.float32(-1)
    c = np.zeros((1, 1), np.float64)
    run(f, [a, b, c])
    assert c[0, 0] == float(x) * float(x) - float(x)


# ----------------------------------------------------------------------------- copies


def test_copy_out_of_bounds_reads_zero_and_drops_writes():
    A = buf("A", (10, 10))
    B = buf("B", (10, 10))
    S = buf("S", (8, 8), scope="shared")
    body = [
        N.Alloc(S),
        N.Copy(region(A, [6, -2], (8, 8)), whole(S)),  # rows 6..13, cols -2..5
        N.Copy(whole(S), region(B, [5, 5], (8, 8))),
    ]  # rows 5..12, cols 5..12
    f = one_block([A, B], body)
    a = rand((10, 10))
    b = np.full((10, 10), -5.0, np.float32)
    run(f, [a, b])
    tile = np.zeros((8, 8), np.float32)
    tile[0:4, 2:8] = a[6:10, 0:6]
    expect = np.full((10, 10), -5.0, np.float32)
    expect[5:10, 5:10] = tile[0:5, 0:5]
    np.testing.assert_array_equal(b, expect)


def test_copy_entirely_outside_is_all_zeros_and_no_write():
    A, B = buf("A", (4, 4)), buf("B", (4, 4))
    S = buf("S", (4, 4), scope="shared")
    body = [
        N.Alloc(S),
        N.Copy(region(A, [100, 0], (4, 4)), whole(S)),
        N.Copy(whole(S), whole(B)),
        N.Copy(whole(A), region(B, [0, 9], (4, 4))),
    ]
    b = np.ones((4, 4), np.float32)
    run(one_block([A, B], body), [rand((4, 4)), b])
    np.testing.assert_array_equal(b, np.zeros((4, 4)))


def test_copy_squeezes_unit_dimensions():
    A = buf("A", (6, 8))
    V = buf("V", (8,), scope="fragment")
    B = buf("B", (8, 6))
    body = [N.Alloc(V), N.Copy(region(A, [3, 0], (1, 8)), whole(V)), N.Copy(whole(V), region(B, [0, 2], (8, 1)))]
    a, b = rand((6, 8)), np.zeros((8, 6), np.float32)
    run(one_block([A, B], body), [a, b])
    np.testing.assert_array_equal(b[:, 2], a[3])
    assert np.count_nonzero(b[:, [0, 1, 3, 4, 5]]) == 0


def test_copy_converts_dtype_with_round_to_nearest_even_and_truncation():
    A = buf("A", (4,), "float32")
    H = buf("H", (4,), "float16")
    I_ = buf("I", (4,), "int32")
    body = [N.Copy(whole(A), whole(H)), N.Copy(whole(A), whole(I_))]
    a = np.array([1 + 2**-11, 1 + 3 * 2**-11, -2.7, 2.7], np.float32)
    h, i = np.zeros(4, np.float16), np.zeros(4, np.int32)
    run(one_block([A, H, I_], body), [a, h, i])
    assert h[0] == np.float16(1.0)  # halfway: to even
    assert h[1] == np.float16(1 + 2**-9)  # halfway: to even (upwards)
    np.testing.assert_array_equal(i, [1, 1, -2, 2])


def test_float64_to_bfloat16_rounds_once():
    A = buf("A", (2,), "float64")
    Bf = buf("B", (2,), "bfloat16")
    a = np.array([1 + 2**-8 + 2**-40, -(1 + 2**-8 + 2**-40)])
    b = np.zeros(2, ml_dtypes.bfloat16)
    run(one_block([A, Bf], [N.Copy(whole(A), whole(Bf))]), [a, b])
    np.testing.assert_array_equal(b.astype(np.float64), [1 + 2**-7, -(1 + 2**-7)])


# ----------------------------------------------------------------------------- allocation, fill


@pytest.mark.parametrize(
    "dtype,expect",
    [("float32", np.nan), ("bfloat16", np.nan), ("int32", -(2**31)), ("int8", -128), ("uint8", 0), ("bool", True)],
)
def test_fresh_allocations_hold_sentinels(dtype, expect):
    S = buf("S", (3,), dtype, "shared")
    O = buf("O", (3,), dtype)
    from tilecore.interp import np_dtype

    out = np.zeros(3, np_dtype(dtype))
    run(one_block([O], [N.Alloc(S), N.Copy(whole(S), whole(O))]), [out])
    if dtype in ("float32", "bfloat16"):
        assert np.isnan(out.astype(np.float32)).all()
    else:
        assert (out == expect).all()


def test_fill_partial_region_of_global_drops_outside():
    O = buf("O", (5, 5))
    o = np.zeros((5, 5), np.float32)
    run(one_block([O], [N.Fill(region(O, [3, 3], (4, 4)), const(2.5))]), [o])
    expect = np.zeros((5, 5), np.float32)
    expect[3:, 3:] = 2.5
    np.testing.assert_array_equal(o, expect)


def test_allocations_are_fresh_in_every_block():
    # Block 0 writes S; block 1 reads S before writing it: it must see NaN, not block 0's data.
    S = buf("S", (1,), "float32", "shared")
    O = buf("O", (2,))
    bx = var("bx")
    body = [
        N.Alloc(S),
        N.If(binop("==", bx, 0), (store(S, [0], const(1.0)),)),
        N.Copy(region(S, [0], (1,)), region(O, [bx], (1,))),
    ]
    o = np.zeros(2, np.float32)
    run(func([O], [kernel([2], ["bx"], body)]), [o])
    assert o[0] == 1.0 and np.isnan(o[1])


# ----------------------------------------------------------------------------- element indexing


def test_element_index_out_of_bounds_raises_with_line_and_caret():
    A, B = buf("A", (8,)), buf("B", (8,))
    i = var("i")
    body = [parallel(["i"], [8], [store(B, [i], load(A, add(i, 1), line=7), line=7)])]
    with pytest.raises(TileRuntimeError) as info:
        run(one_block([A, B], body), [rand(8), np.zeros(8, np.float32)])
    text = str(info.value)
    assert f"{FILE}:7:5" in text
    assert "A[8]" in text and "shape (8,)" in text
    assert "where i=7, in block (0,)" in text
    assert "line 7 of the hand-built kernel" in text and "^" in text
    assert info.value.span.line == 7


def test_block_level_store_out_of_bounds_raises():
    O = buf("O", (4,))
    body = [store(O, [add(var("bx"), 3)], const(1.0), line=12)]
    with pytest.raises(TileRuntimeError, match=r"O\[4\]") as info:
        run(func([O], [kernel([2], ["bx"], body)]), [np.zeros(4, np.float32)])
    assert info.value.span.line == 12
    assert "where bx=1, in block (1,)" in str(info.value)


def test_negative_index_is_out_of_bounds_not_wrapped():
    A, O = buf("A", (4,)), buf("O", (1,))
    with pytest.raises(TileRuntimeError, match=r"A\[-1\]"):
        run(one_block([A, O], [store(O, [0], load(A, -1, line=3), line=3)]), [rand(4), np.zeros(1, np.float32)])


def test_masked_off_elements_may_be_out_of_bounds():
    # for i in T.Parallel(8): if i < 5: B[i] = A[i + 3]  (A has 8 elements)
    A, B = buf("A", (8,)), buf("B", (8,))
    i = var("i")
    body = [parallel(["i"], [8], [N.If(lt(i, 5), (store(B, [i], load(A, add(i, 3))),))])]
    a, b = rand(8), np.full(8, 9.0, np.float32)
    run(one_block([A, B], body), [a, b])
    np.testing.assert_array_equal(b, np.concatenate([a[3:], np.full(3, 9.0, np.float32)]))


def test_if_then_else_evaluates_only_the_chosen_side_per_element():
    A, B = buf("A", (6,)), buf("B", (8,))
    i = var("i")
    value = N.Select(lt(i, 6), load(A, i), const(0.0), "float32")
    a, b = rand(6), np.zeros(8, np.float32)
    run(one_block([A, B], [parallel(["i"], [8], [store(B, [i], value)])]), [a, b])
    np.testing.assert_array_equal(b, np.concatenate([a, [0, 0]]))


def test_and_short_circuits_per_element():
    A, B = buf("A", (4,)), buf("B", (8,), "int32")
    i = var("i")
    cond = binop("and", lt(i, 4), binop(">", load(A, i), const(0.0)))
    a = np.array([1, -1, 2, -2], np.float32)
    b = np.zeros(8, np.int32)
    body = [parallel(["i"], [8], [store(B, [i], N.Select(cond, const(1), const(0), "int32"))])]
    run(one_block([A, B], body), [a, b])
    np.testing.assert_array_equal(b, [1, 0, 1, 0, 0, 0, 0, 0])


def test_scalar_out_of_bounds_under_all_false_mask_is_not_an_error():
    A, B = buf("A", (4,)), buf("B", (4,))
    i = var("i")
    body = [parallel(["i"], [4], [N.If(lt(i, 0), (store(B, [i], load(A, 10)),))])]
    b = np.zeros(4, np.float32)
    run(one_block([A, B], body), [rand(4), b])
    assert not b.any()


# ----------------------------------------------------------------------------- parallel forms


def test_parallel_transpose_broadcast_and_offsets():
    A = buf("A", (16, 8))
    R = buf("R", (16,))
    B = buf("B", (8, 20))
    i, j = var("i"), var("j")
    # B[j, i + 4] = A[i, j] * R[i]
    body = [parallel(["i", "j"], [16, 8], [store(B, [j, add(i, 4)], mul(load(A, i, j), load(R, i)))])]
    a, r, b = rand((16, 8)), rand(16), np.zeros((8, 20), np.float32)
    run(one_block([A, R, B], body), [a, r, b])
    expect = np.zeros((8, 20), np.float32)
    expect[:, 4:] = (a * r[:, None]).T
    np.testing.assert_array_equal(b, expect)


def test_parallel_gather_forms_diagonal_and_division():
    A = buf("A", (8, 8))
    B = buf("B", (8,))
    i = var("i")
    value = add(load(A, i, i), load(A, binop("//", i, const(2)), binop("%", mul(i, 3), const(8))))
    a, b = rand((8, 8)), np.zeros(8, np.float32)
    run(one_block([A, B], [parallel(["i"], [8], [store(B, [i], value)])]), [a, b])
    idx = np.arange(8)
    np.testing.assert_array_equal(b, a[idx, idx] + a[idx // 2, (idx * 3) % 8])


def test_serial_loop_inside_parallel_and_let():
    # for i in T.Parallel(6): acc = 0; for k in range(5): acc += A[i, k]  -> B[i]
    A = buf("A", (6, 5))
    B = buf("B", (6,))
    acc = buf("acc", (6,), scope="fragment")
    i, k = var("i"), var("k")
    body = [
        N.Alloc(acc),
        parallel(
            ["i"],
            [6],
            [
                store(acc, [i], const(0.0)),
                serial("k", 5, [store(acc, [i], add(load(acc, i), load(A, i, k)))]),
                N.Let(var("twice", "float32"), mul(load(acc, i), const(2.0))),
                store(B, [i], var("twice", "float32")),
            ],
        ),
    ]
    a, b = rand((6, 5)), np.zeros(6, np.float32)
    run(one_block([A, B], body), [a, b])
    np.testing.assert_allclose(b, 2 * a.sum(1), rtol=1e-6)


def test_let_holding_a_load_is_not_changed_by_a_later_store():
    A, B = buf("A", (4,)), buf("B", (4,))
    i = var("i")
    x = var("x", "float32")
    body = [parallel(["i"], [4], [N.Let(x, load(A, i)), store(A, [i], const(0.0)), store(B, [i], x)])]
    a, b = rand(4), np.zeros(4, np.float32)
    a0 = a.copy()
    run(one_block([A, B], body), [a, b])
    np.testing.assert_array_equal(b, a0)
    assert not a.any()


def test_serial_loop_with_per_element_extent():
    # for i in T.Parallel(5): for k in range(i): B[i] += 1   (triangular loop)
    B = buf("B", (5,), "int32")
    i = var("i")
    body = [parallel(["i"], [5], [serial("k", i, [store(B, [i], add(load(B, i), 1))])])]
    b = np.zeros(5, np.int32)
    run(one_block([B], body), [b])
    np.testing.assert_array_equal(b, [0, 1, 2, 3, 4])


def test_runtime_if_else_at_block_level_and_in_parallel():
    O = buf("O", (4, 6), "int32")
    bx, i, j = var("bx"), var("i"), var("j")
    body = [
        N.If(
            binop("==", binop("%", bx, 2), 0),
            (parallel(["i", "j"], [1, 6], [N.If(lt(j, 3), (store(O, [bx, j], 7),))]),),
            (parallel(["i", "j"], [1, 6], [store(O, [bx, j], add(mul(i, 0), j))]),),
        )
    ]
    o = np.zeros((4, 6), np.int32)
    run(func([O], [kernel([4], ["bx"], body)]), [o])
    np.testing.assert_array_equal(o[0], [7, 7, 7, 0, 0, 0])
    np.testing.assert_array_equal(o[1], np.arange(6))


# ----------------------------------------------------------------------------- arithmetic


def _eval_1d(expr_fn, a, out_dtype, in_dtype=None):
    """B[i] = expr(A[i]) over a T.Parallel; returns B."""
    from tilecore.interp.dtypes import tile_dtype

    in_dt = in_dtype or tile_dtype(a.dtype)
    A, B = buf("A", a.shape, in_dt), buf("B", a.shape, out_dtype)
    i = var("i")
    from tilecore.interp import np_dtype

    b = np.zeros(a.shape, np_dtype(out_dtype))
    run(one_block([A, B], [parallel(["i"], [a.shape[0]], [store(B, [i], expr_fn(load(A, i)))])]), [a, b])
    return b


def test_floor_division_and_modulo_on_negative_ints():
    a = np.array([-7, -6, -1, 0, 5, 7], np.int32)
    d = _eval_1d(lambda x: binop("//", x, const(3)), a, "int32")
    m = _eval_1d(lambda x: binop("%", x, const(3)), a, "int32")
    np.testing.assert_array_equal(d, a // 3)
    np.testing.assert_array_equal(m, a % 3)
    t = _eval_1d(lambda x: binop("/", x, const(3)), a, "int32")
    np.testing.assert_array_equal(t, np.trunc(a / 3).astype(np.int32))


def test_int8_arithmetic_wraps():
    a = np.array([100, -100, 127], np.int8)
    r = _eval_1d(lambda x: binop("+", x, const(100, "int8")), a, "int8")
    np.testing.assert_array_equal(r, (a.astype(np.int16) + 100).astype(np.int8))


def test_float16_arithmetic_rounds_in_float16():
    a = np.array([2048.0], np.float16)
    r = _eval_1d(lambda x: binop("+", x, const(1.0, "float16")), a, "float32")
    assert r[0] == 2048.0  # 2049 is not a float16; the sum rounds before the store widens it


def test_mixed_float_promotion_float16_with_bfloat16_is_float32():
    H, Bf, O = buf("H", (1,), "float16"), buf("Bf", (1,), "bfloat16"), buf("O", (1,), "float32")
    expr = binop("+", load(H, 0), load(Bf, 0))
    assert expr.dtype == "float32"
    h = np.array([1.0 + 2**-10], np.float16)
    bf = np.array([256.0], ml_dtypes.bfloat16)
    o = np.zeros(1, np.float32)
    run(one_block([H, Bf, O], [store(O, [0], expr)]), [h, bf, o])
    assert o[0] == np.float32(257.0 + 2**-10)


@pytest.mark.parametrize(
    "name,ref",
    [
        ("exp", np.exp),
        ("exp2", np.exp2),
        ("log", np.log),
        ("log2", np.log2),
        ("sqrt", np.sqrt),
        ("rsqrt", lambda x: 1 / np.sqrt(x)),
        ("tanh", np.tanh),
        ("sigmoid", lambda x: 1 / (1 + np.exp(-x))),
        ("sin", np.sin),
        ("cos", np.cos),
        ("floor", np.floor),
        ("ceil", np.ceil),
        ("abs", np.abs),
    ],
)
def test_math_functions(name, ref):
    a = (
        rand(16, lo=0.1, hi=3.0) * np.where(np.arange(16) % 2, 1, -1).astype(np.float32)
        if name in ("floor", "ceil", "abs", "sin", "cos", "tanh", "sigmoid", "exp", "exp2")
        else rand(16, lo=0.1, hi=3)
    )
    r = _eval_1d(lambda x: N.Call(name, (x,), "float32"), a, "float32")
    np.testing.assert_allclose(r, ref(a.astype(np.float64)), rtol=1e-6, atol=1e-7)


def test_cast_float_to_int_truncates_and_int_to_bool_is_nonzero():
    a = np.array([-1.9, -0.5, 0.5, 3.99], np.float32)
    r = _eval_1d(lambda x: N.Cast(x, "int16"), a, "int16")
    np.testing.assert_array_equal(r, [-1, 0, 0, 3])
    b = _eval_1d(lambda x: N.Cast(x, "bool"), np.array([0, 2, -1], np.int32), "bool")
    np.testing.assert_array_equal(b, [False, True, True])


def test_min_max_pow_bitwise():
    a = np.array([1, 5, -3, 12], np.int32)
    np.testing.assert_array_equal(_eval_1d(lambda x: binop("max", x, const(4)), a, "int32"), np.maximum(a, 4))
    np.testing.assert_array_equal(_eval_1d(lambda x: binop("min", x, const(4)), a, "int32"), np.minimum(a, 4))
    np.testing.assert_array_equal(_eval_1d(lambda x: binop("pow", x, const(2)), a, "int32"), a**2)
    np.testing.assert_array_equal(_eval_1d(lambda x: binop("&", x, const(6)), a, "int32"), a & 6)
    np.testing.assert_array_equal(_eval_1d(lambda x: binop("<<", x, const(2)), a, "int32"), a << 2)
    np.testing.assert_array_equal(_eval_1d(lambda x: N.UnaryOp("neg", x, "int32"), a, "int32"), -a)
    np.testing.assert_array_equal(_eval_1d(lambda x: N.UnaryOp("~", x, "int32"), a, "int32"), ~a)


# ----------------------------------------------------------------------------- reductions, scans


@pytest.mark.parametrize("kind", ["sum", "max", "min", "abssum", "absmax"])
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("clear", [True, False])
def test_reduce_kinds(kind, dim, clear):
    S = buf("S", (6, 10))
    D = buf("D", (10,) if dim == 0 else (6,))
    body = [N.Reduce(kind, S, D, dim, clear)]
    s = rand((6, 10))
    d0 = rand(D.shape)
    d = d0.copy()
    run(one_block([S, D], body), [s, d])
    x = s.astype(np.float64)
    fn = {
        "sum": lambda: x.sum(dim),
        "max": lambda: x.max(dim),
        "min": lambda: x.min(dim),
        "abssum": lambda: np.abs(x).sum(dim),
        "absmax": lambda: np.abs(x).max(dim),
    }[kind]
    r = fn()
    if not clear:
        r = {
            "sum": r + d0,
            "abssum": r + d0,
            "max": np.maximum(r, d0),
            "absmax": np.maximum(r, d0),
            "min": np.minimum(r, d0),
        }[kind]
    np.testing.assert_allclose(d, r, rtol=1e-6)


def test_reduce_into_kept_unit_dimension():
    S, D = buf("S", (4, 5)), buf("D", (4, 1))
    s, d = rand((4, 5)), np.zeros((4, 1), np.float32)
    run(one_block([S, D], [N.Reduce("max", S, D, 1, True)]), [s, d])
    np.testing.assert_array_equal(d, s.max(1, keepdims=True))


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("inplace", [False, True])
def test_cumsum(reverse, inplace):
    S = buf("S", (3, 7))
    D = S if inplace else buf("D", (3, 7))
    s = rand((3, 7))
    expect = np.flip(np.cumsum(np.flip(s, 1), 1), 1) if reverse else np.cumsum(s, 1)
    if inplace:
        run(one_block([S], [N.Cumsum(S, S, 1, reverse)]), [s])
        out = s
    else:
        out = np.zeros((3, 7), np.float32)
        run(one_block([S, D], [N.Cumsum(S, D, 1, reverse)]), [s, out])
    np.testing.assert_allclose(out, expect, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- atomics


@pytest.mark.parametrize("kind", ["add", "max", "min"])
def test_element_atomics_with_duplicate_indices_across_blocks(kind):
    # every block: for i in T.Parallel(12): atomic_<kind>(O[i % 3], A[bx, i])
    A, O = buf("A", (4, 12)), buf("O", (3,))
    i, bx = var("i"), var("bx")
    at = N.Atomic(kind, region(O, [binop("%", i, const(3))], (1,)), load(A, bx, i))
    a = rand((4, 12))
    o0 = rand(3)
    o = o0.copy()
    run(func([A, O], [kernel([4], ["bx"], [parallel(["i"], [12], [at])])]), [a, o])
    groups = a.reshape(4, 4, 3).transpose(2, 0, 1).reshape(3, -1).astype(np.float64)
    expect = {"add": o0 + groups.sum(1), "max": np.maximum(o0, groups.max(1)), "min": np.minimum(o0, groups.min(1))}[
        kind
    ]
    np.testing.assert_allclose(o, expect, rtol=1e-5)


def test_element_atomic_with_invariant_index_counts_every_iteration():
    O = buf("O", (1,), "int32")
    at = N.Atomic("add", region(O, [0], (1,)), const(1))
    o = np.zeros(1, np.int32)
    run(func([O], [kernel([3], ["bx"], [parallel(["i", "j"], [4, 5], [at])])]), [o])
    assert o[0] == 60


def test_tile_atomic_add_drops_out_of_bounds():
    F = buf("F", (4, 4), scope="fragment")
    O = buf("O", (6, 6))
    body = [
        N.Alloc(F),
        N.Fill(whole(F), const(1.5)),
        N.Atomic("add", region(O, [mul(var("bx"), 3), 3], (4, 4)), whole(F)),
    ]
    o = np.zeros((6, 6), np.float32)
    run(func([O], [kernel([2], ["bx"], body)]), [o])
    expect = np.zeros((6, 6), np.float32)
    expect[0:4, 3:6] += 1.5
    expect[3:6, 3:6] += 1.5
    np.testing.assert_array_equal(o, expect)


def test_block_level_element_atomic_out_of_bounds_raises():
    O = buf("O", (2,))
    at = N.Atomic("add", region(O, [var("bx")], (1,)), const(1.0), span=span(9))
    with pytest.raises(TileRuntimeError, match=r"O\[2\].*where bx=2, in block \(2,\)"):
        run(func([O], [kernel([3], ["bx"], [at])]), [np.zeros(2, np.float32)])


# ----------------------------------------------------------------------------- print, hints, order


def test_print_scalar_and_buffer(capsys):
    O = buf("O", (2,))
    body = [
        N.Print(mul(var("bx"), 10), msg="ten times"),
        N.Print(O, msg="out"),
        N.Hint("use_swizzle", (), (("panel_size", 8), ("enable", True))),
    ]
    run(func([O], [kernel([2], ["bx"], body)]), [np.array([1.5, 2.5], np.float32)])
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "[block (0,)] ten times: 0"
    assert out[1] == "[block (0,)] out:" and out[2] == "O =" and "1.5" in out[3]
    assert out[4] == "[block (1,)] ten times: 10"


def test_blocks_run_in_grid_order_first_dimension_fastest(capsys):
    body = [N.Print(add(mul(var("by"), 10), var("bx")))]
    run(func([], [kernel([3, 2], ["bx", "by"], body)]), [])
    values = [int(line.split(": ")[1]) for line in capsys.readouterr().out.splitlines()]
    assert values == [0, 1, 2, 10, 11, 12]


def test_print_inside_parallel_shows_active_elements(capsys):
    i = var("i")
    body = [parallel(["i"], [6], [N.If(lt(i, 3), (N.Print(mul(i, 2), msg="v"),))])]
    run(func([], [kernel([1], ["bx"], body)]), [])
    assert capsys.readouterr().out.strip() == "[block (0,)] v: [0 2 4]"


# ----------------------------------------------------------------------------- arguments


def test_dynamic_dims_checked_against_bindings_and_each_other():
    m = var("M")
    A, B = buf("A", (m, 4)), buf("B", (m,))
    f = func([A, B], [kernel([1], ["bx"], [])], dyn=(m,))
    run(f, [rand((5, 4)), rand(5)], {"M": 5})
    with pytest.raises(TileRuntimeError, match="M=6"):
        run(f, [rand((5, 4)), rand(6)])
    with pytest.raises(TileRuntimeError, match="bound to 7"):
        run(f, [rand((5, 4)), rand(5)], {"M": 7})


def test_argument_dtype_and_shape_errors_name_the_parameter():
    A = buf("A", (4,))
    f = func([A], [kernel([1], ["bx"], [])])
    with pytest.raises(TileRuntimeError, match="argument A: expected dtype float32, got float64"):
        run(f, [np.zeros(4)])
    with pytest.raises(TileRuntimeError, match=r"argument A: expected shape \(4\)"):
        run(f, [np.zeros(5, np.float32)])


def test_tile_op_inside_parallel_is_rejected_at_its_line():
    A = buf("A", (4,))
    bad = N.Fill(whole(A), const(0.0), span=span(5))
    with pytest.raises(TileRuntimeError, match="inside a T.Parallel") as info:
        run(one_block([A], [parallel(["i"], [4], [bad])]), [rand(4)])
    assert info.value.span.line == 5


def test_same_function_object_is_compiled_once():
    from tilecore.interp import compile_program

    f = gemm_ir(64, 64, 64, 32, 32, 32)
    assert compile_program(f) is compile_program(f)


def test_masked_scatter_and_atomic_report_the_bad_iteration():
    # for i, j in T.Parallel(4, 4): if j < 3: O[i * 2 + j] = 1   -> first bad: i=2, j=2 writes O[6]
    O = buf("O", (6,))
    i, j = var("i"), var("j")
    st_ = store(O, [add(mul(i, 2), j)], const(1.0), line=4)
    with pytest.raises(TileRuntimeError, match=r"O\[6\] .* where i=2, j=2, in block \(0,\)"):
        run(one_block([O], [parallel(["i", "j"], [4, 4], [N.If(lt(j, 3), (st_,))])]), [np.zeros(6, np.float32)])
    at = N.Atomic("max", region(O, [add(mul(i, 2), j)], (1,)), const(1.0), span=span(5))
    o = np.zeros(6, np.float32)
    run(one_block([O], [parallel(["i", "j"], [3, 2], [at])]), [o])  # all inside: fine
    assert (o == 1).all()
    with pytest.raises(TileRuntimeError, match=r"O\[6\] .* where i=3, j=0"):
        run(one_block([O], [parallel(["i", "j"], [4, 2], [at])]), [o])
