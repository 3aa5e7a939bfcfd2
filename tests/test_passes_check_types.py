"""check_types: each ill-formed program is a TileCompileError at the culprit's line."""

from __future__ import annotations

import dataclasses
import os
import sys

import pytest

from tilecore.diagnostics import TileCompileError
from tilecore.ir import nodes as N
from tilecore.passes.check_types import check, check_types
from tilecore.passes.pipeline import PassContext

sys.path.insert(0, os.path.dirname(__file__))
from test_passes_support import FILE, SOURCE_LINES, c, gemm_func, kernel_func, mul, region, span, v  # noqa: E402


def error_of(func) -> TileCompileError:
    with pytest.raises(TileCompileError) as info:
        check(func)
    return info.value


def replace_in_loop(func, index, new_stmt):
    """Replace the `index`-th statement of the gemm's pipelined loop."""
    kernel = func.kernel
    loop = kernel.body[4]
    body = list(loop.body)
    body[index] = new_stmt
    loop = dataclasses.replace(loop, body=tuple(body))
    kbody = list(kernel.body)
    kbody[4] = loop
    return dataclasses.replace(func, body=(dataclasses.replace(kernel, body=tuple(kbody)),))


def test_well_formed_gemm_passes_and_pass_returns_it_unchanged():
    func = gemm_func()
    check(func)
    assert check_types(func, PassContext()) is func
    check(gemm_func(dtype="int8", accum="int32"))
    check(gemm_func(dynamic_m=True))
    check(gemm_func(gemm_kwargs={"transpose_b": True}, bk=64, bn=64))


def test_gemm_inner_dimension_mismatch_points_at_the_gemm():
    A_s = N.Buffer("A_s", (64, 32), "float16", "shared")
    B_s = N.Buffer("B_s", (16, 64), "float16", "shared")
    C_f = N.Buffer("C_f", (64, 64), "float32", "fragment")
    gemm = N.Gemm(region(A_s), region(B_s), region(C_f), span=span(13))
    err = error_of(kernel_func([], [N.Alloc(A_s), N.Alloc(B_s), N.Alloc(C_f), gemm]))
    assert err.span.line == 13
    assert err.message == (
        "T.gemm shape mismatch: A (A_s) is (64, 32) and B (B_s) is (16, 64): the inner dimensions 32 and 16 differ"
    )
    assert f"{FILE}:13:" in str(err) and SOURCE_LINES[12] in str(err) and "^" in str(err)
    C_bad = N.Buffer("C_bad", (64, 32), "float32", "fragment")
    B_ok = N.Buffer("B_ok", (32, 64), "float16", "shared")
    gemm = N.Gemm(region(A_s), region(B_ok), region(C_bad), span=span(13))
    err = error_of(kernel_func([], [N.Alloc(A_s), N.Alloc(B_ok), N.Alloc(C_bad), gemm]))
    assert "A @ B is (64, 64) but C (C_bad) is (64, 32)" in err.message


def test_gemm_transpose_changes_the_expected_shapes():
    err = error_of(gemm_func(gemm_kwargs={"transpose_a": True}, bm=64, bk=32))
    assert err.span.line == 13 and "A^T" in err.message


def test_gemm_dtype_mismatch_names_both_dtypes():
    err = error_of(gemm_func(b_dtype="float32"))
    assert err.span.line == 13
    assert "T.gemm dtype mismatch: A (A_s) is float16 but B (B_s) is float32" in err.message
    assert err.span.col == 24  # the B operand


def test_gemm_accumulator_dtype_and_scope():
    err = error_of(gemm_func(dtype="int8", accum="int8", c_dtype="int8"))
    assert "int8 inputs accumulate in int32 or int64" in err.message and err.span.line == 13
    err = error_of(gemm_func(dtype="float32", accum="float16"))
    assert "accumulate in float32 or float64" in err.message


def test_copy_shape_mismatch():
    A = N.Buffer("A", (128, 128), "float32")
    S = N.Buffer("S", (32, 16), "float32", "shared")
    func = kernel_func([A], [N.Alloc(S, span=span(6)), N.Copy(region(A, (0, 0), (32, 32)), region(S), span=span(11))])
    err = error_of(func)
    assert err.span.line == 11
    assert "source A region has shape (32, 32)" in err.message and "(32, 16)" in err.message


def test_copy_squeezes_unit_dims():
    A = N.Buffer("A", (4, 128, 64), "float32")
    S = N.Buffer("S", (128, 64), "float32", "shared")
    check(kernel_func([A], [N.Alloc(S), N.Copy(region(A, (v("bx"), 0, 0), (1, 128, 64)), region(S))], grid=(4,)))


def test_constant_index_out_of_range_points_at_the_index():
    S = N.Buffer("A_s", (8, 4), "float32", "shared")
    out = N.Buffer("out", (8,), "float32")
    idx = N.Const(8, "int32", span=span(11, 20, 1))
    func = kernel_func(
        [out], [N.Alloc(S, span=span(6)), N.Store(out, (c(0),), N.Load(S, (idx, c(0)), "float32"), span=span(11))]
    )
    err = error_of(func)
    assert err.message == "index 8 is out of range for dimension 0 of A_s (size 8)"
    assert (err.span.line, err.span.col) == (11, 20)
    neg = N.BinOp("-", c(1), c(2), "int32", span=span(11, 20, 1))  # folds to -1
    func = kernel_func([out], [N.Store(out, (neg,), c(0.0, "float32"), span=span(11))])
    assert "index -1 is out of range for dimension 0 of out (size 8)" in error_of(func).message


def test_shared_region_beyond_its_buffer_is_an_error_global_is_not():
    A = N.Buffer("A", (100,), "float32")
    S = N.Buffer("S", (64,), "float32", "shared")
    ok = kernel_func([A], [N.Alloc(S), N.Copy(region(A, (c(64),), (64,)), region(S))])
    check(ok)  # hangs over the edge of A: predicated, legal
    bad_start = N.Const(32, "int32", span=span(11, 14, 2))
    S2 = N.Buffer("S2", (128,), "float32", "shared")
    bad = kernel_func(
        [A],
        [
            N.Alloc(S),
            N.Alloc(S2),
            N.Copy(region(S2, (bad_start,), (64,)), region(S), span=span(11)),
            N.Copy(region(S, (bad_start,), (64,)), region(S2, (0,), (64,)), span=span(12)),
        ],
    )
    err = error_of(bad)
    assert err.message == "region 32:96 exceeds dimension 0 of S (size 64)"
    assert err.span.line == 11


def test_index_count_and_float_index():
    out = N.Buffer("out", (8, 8), "float32")
    err = error_of(kernel_func([out], [N.Store(out, (c(0),), c(1.0, "float32"), span=span(9))]))
    assert "out has 2 dimensions but is indexed with 1 index" in err.message and err.span.line == 9
    fidx = N.Const(1.0, "float32", span=span(9, 10, 3))
    err = error_of(kernel_func([out], [N.Store(out, (fidx, c(0)), c(1.0, "float32"), span=span(9))]))
    assert "must be an integer, got float32" in err.message and err.span.col == 10


def test_fragment_cannot_be_a_parameter_or_allocated_outside_the_kernel():
    frag = N.Buffer("C_f", (16, 16), "float32", "fragment", span=span(4, 67, 27))
    err = error_of(kernel_func([frag], []))
    assert "parameter C_f is a fragment buffer" in err.message and err.span.line == 4
    shared = N.Buffer("S", (16,), "float32", "shared")
    func = kernel_func([], [])
    func = dataclasses.replace(func, body=(N.Alloc(shared, span=span(3)),) + func.body)
    err = error_of(func)
    assert "T.alloc_shared buffer S must be allocated inside `with T.Kernel(...)`" in err.message
    assert err.span.line == 3


def test_tile_ops_and_allocs_inside_parallel_are_errors():
    S = N.Buffer("S", (16,), "float32", "shared")
    F = N.Buffer("F", (16,), "float32", "fragment")
    i = v("i")
    func = kernel_func(
        [], [N.Alloc(S), N.Parallel((i,), (16,), (N.Fill(region(S), c(0.0, "float32"), span=span(9)),), span=span(8))]
    )
    err = error_of(func)
    assert "T.fill is a tile operation and cannot appear inside T.Parallel" in err.message
    assert err.span.line == 9
    func = kernel_func([], [N.Parallel((i,), (16,), (N.Alloc(F, span=span(9)),))])
    assert "T.alloc_fragment cannot be used inside T.Parallel" in error_of(func).message


def test_undefined_buffer_and_variable():
    S = N.Buffer("S", (16,), "float32", "shared")
    out = N.Buffer("out", (16,), "float32")
    err = error_of(kernel_func([out], [N.Copy(region(S), region(out), span=span(11))]))
    assert "buffer S is used before it is defined" in err.message
    err = error_of(
        kernel_func([out], [N.Store(out, (N.Var("q", span=span(9, 12, 1)),), c(0.0, "float32"), span=span(9))])
    )
    assert "variable q is used before it is defined" in err.message and err.span.col == 12


def test_reduce_and_cumsum_shapes():
    F = N.Buffer("F", (16, 32), "float32", "fragment")
    R = N.Buffer("R", (16,), "float32", "fragment")
    Rk = N.Buffer("Rk", (16, 1), "float32", "fragment")
    bad = N.Buffer("bad", (32,), "float32", "fragment")
    allocs = [N.Alloc(b) for b in (F, R, Rk, bad)]
    check(
        kernel_func(
            [],
            allocs
            + [N.Reduce("sum", F, R, 1), N.Reduce("max", F, Rk, 1), N.Reduce("min", F, bad, 0), N.Cumsum(F, F, 1)],
        )
    )
    err = error_of(kernel_func([], allocs + [N.Reduce("sum", F, bad, 1, span=span(12))]))
    assert (
        "T.reduce_sum shape mismatch: reducing F (16, 32) over dim 1 gives (16,) but bad is (32,)" in err.message
        and err.span.line == 12
    )
    err = error_of(kernel_func([], allocs + [N.Reduce("sum", F, R, 2, span=span(12))]))
    assert "dim=2 is out of range for F with 2 dimensions" in err.message
    err = error_of(kernel_func([], allocs + [N.Cumsum(F, R, 0, span=span(12))]))
    assert "T.cumsum shape mismatch" in err.message


def test_atomic_needs_global_destination():
    S = N.Buffer("S", (16,), "float32", "shared")
    F = N.Buffer("F", (16,), "float32", "fragment")
    G = N.Buffer("G", (16,), "float32")
    func = kernel_func(
        [G], [N.Alloc(S), N.Alloc(F), N.Atomic("add", region(S, sp=span(11, 26, 1)), region(F), span=span(11))]
    )
    err = error_of(func)
    assert "T.atomic_add needs a global tensor as destination, but S is a shared buffer" in err.message
    assert err.span.col == 26
    check(kernel_func([G], [N.Alloc(F), N.Atomic("add", region(G), region(F))]))
    err = error_of(kernel_func([G], [N.Atomic("max", region(G), c(1.0, "float32"), span=span(11))]))
    assert "single element destination" in err.message


def test_math_on_int_and_dynamic_dims():
    out = N.Buffer("out", (4,), "float32")
    call = N.Call("exp", (c(1),), "int32", span=span(9, 20, 8))
    err = error_of(kernel_func([out], [N.Store(out, (c(0),), call, span=span(9))]))
    assert "T.exp needs a float argument, got int32" in err.message and err.span.col == 20
    n = v("n")
    dyn = N.Buffer("X", (n,), "float32")
    err = error_of(kernel_func([dyn], []))
    assert "uses n, which is not a declared dynamic dimension" in err.message
    check(kernel_func([dyn], [], dyn_vars=(n,)))


def test_missing_kernel_and_duplicate_names():
    err = error_of(N.PrimFunc("main", (), (), source="x", span=span(4)))
    assert "main has no `with T.Kernel(...)` block" in err.message and err.span.line == 4
    S = N.Buffer("S", (16,), "float32", "shared")
    err = error_of(kernel_func([], [N.Alloc(S), N.Alloc(S, span=span(7))]))
    assert "name 'S' is defined twice" in err.message and err.span.line == 7


def test_copy_inside_loop_with_loop_var_in_scope_only_there():
    A = N.Buffer("A", (128,), "float32")
    S = N.Buffer("S", (32,), "float32", "shared")
    k = v("k")
    loop = N.For(k, c(0), c(4), "serial", (N.Copy(region(A, (mul(k, c(32)),), (32,)), region(S)),))
    check(kernel_func([A], [N.Alloc(S), loop]))
    after = N.Copy(region(A, (mul(k, c(32)),), (32,)), region(S), span=span(14))
    err = error_of(kernel_func([A], [N.Alloc(S), loop, after]))
    assert "variable k is used before it is defined" in err.message


# ----------------------------------------------------------------------------- robustness

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

GARBAGE = [
    None,
    0,
    -1,
    3,
    2.5,
    "x",
    (),
    (c(1),),
    c(7),
    c(1.5, "float32"),
    N.Const(True, "bool"),
    v("ghost"),
    N.Buffer("ghost", (4,), "float32", "shared"),
    "bfloat17",
    "fragment",
    (0,),
    (-2, 3),
    N.Alloc(N.Buffer("ghost2", (4,), "float32", "shared")),
    (N.Fill(N.Region(N.Buffer("ghost3", (4,), "float32"), (c(0),), (4,)), c(0)),),
    (None,),
    10**20,
    "global",
]


def _nodes_with_fields(node, out):
    if dataclasses.is_dataclass(node) and not isinstance(node, (type, N.Span)):
        for f in dataclasses.fields(node):
            if f.name in ("span", "source"):
                continue
            out.append((node, f.name))
            _nodes_with_fields(getattr(node, f.name), out)
    elif isinstance(node, tuple):
        for item in node:
            _nodes_with_fields(item, out)
    return out


def _rebuild(node, target, field_name, value):
    if node is target:
        return dataclasses.replace(node, **{field_name: value}) if True else node
    if dataclasses.is_dataclass(node) and not isinstance(node, (type, N.Span)):
        changes = {}
        for f in dataclasses.fields(node):
            if f.name in ("span", "source"):
                continue
            old = getattr(node, f.name)
            new = _rebuild(old, target, field_name, value)
            if new is not old:
                changes[f.name] = new
        return dataclasses.replace(node, **changes) if changes else node
    if isinstance(node, tuple):
        items = tuple(_rebuild(i, target, field_name, value) for i in node)
        return items if any(a is not b for a, b in zip(items, node)) else node
    return node


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_corrupted_ir_gives_a_compile_error_never_a_crash(data):
    func = gemm_func()
    spots = _nodes_with_fields(func, [])
    node, field_name = data.draw(st.sampled_from(spots))
    value = data.draw(st.sampled_from(GARBAGE))
    try:
        broken = _rebuild(func, node, field_name, value)
    except (TypeError, ValueError):
        return  # the dataclass itself refused the value
    try:
        check(broken)
    except TileCompileError as err:
        assert err.message and "Traceback" not in str(err)
        assert err.span.line > 0  # always located: the culprit, or the statement holding it
        return
    # whatever the checker accepts, the rest of the pipeline handles
    from tilecore.passes.pipeline import default_pipeline

    try:
        default_pipeline().run(broken, PassContext())
    except TileCompileError:
        pass
