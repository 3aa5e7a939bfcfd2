"""The frontend's affine simplifier: slice extents like `(k + 1) * 64 - k * 64`."""

from hypothesis import given, settings
from hypothesis import strategies as st

from tilecore.frontend import exprs as E
from tilecore.frontend.affine import constant_difference, constant_value, linear
from tilecore.ir import nodes as N

VARS = [N.Var("i"), N.Var("j"), N.Var("k")]


def evaluate(e, env):
    if isinstance(e, N.Const):
        return e.value
    if isinstance(e, N.Var):
        return env[e.name]
    if isinstance(e, N.UnaryOp):
        return -evaluate(e.a, env)
    a, b = evaluate(e.a, env), evaluate(e.b, env)
    return {"+": a + b, "-": a - b, "*": a * b, "//": a // b if b else 0}[e.op]


def affine_exprs(depth=3):
    leaf = st.one_of(st.sampled_from(VARS), st.integers(-9, 9).map(lambda v: E.const(v, "int32")))
    if depth == 0:
        return leaf
    sub = affine_exprs(depth - 1)
    return st.one_of(
        leaf,
        st.tuples(st.sampled_from(["+", "-", "//"]), sub, sub).map(lambda t: E.binary(*t)),
        st.tuples(sub, st.integers(-4, 4)).map(lambda t: E.binary("*", t[0], t[1])),
        sub.map(lambda e: E.unary("neg", e)),
    )


def evaluate_linear(form, env):
    terms, const = form
    return const + sum(c * evaluate(atom, env) for atom, c in terms.items())


@settings(max_examples=300, deadline=None)
@given(affine_exprs(), st.fixed_dictionaries({v.name: st.integers(-20, 20) for v in VARS}))
def test_linear_form_has_the_same_value(e, env):
    assert evaluate_linear(linear(e), env) == evaluate(e, env)


@settings(max_examples=200, deadline=None)
@given(affine_exprs(), st.integers(1, 128))
def test_difference_of_a_shifted_expression_is_the_shift(e, extent):
    assert constant_difference(E.binary("+", e, extent), e) == extent


def test_slice_extent_pattern():
    k = N.Var("k")
    stop = E.binary("*", E.binary("+", k, 1), 64)
    start = E.binary("*", k, 64)
    assert constant_difference(stop, start) == 64
    assert constant_difference(stop, k) is None
    assert constant_value(E.binary("-", k, k)) == 0


import numpy as np  # noqa: E402
import pytest  # noqa: E402

import tilecore  # noqa: E402
import tilecore.language as T  # noqa: E402
from tilecore.diagnostics import TileCompileError  # noqa: E402


@settings(max_examples=4, deadline=None)
@given(
    block=st.sampled_from([2, 4, 8]),
    blocks=st.integers(1, 4),
    shift=st.integers(0, 3),
    target=st.sampled_from(["reference", "cpu"]),
)
def test_slices_between_names_bound_in_the_kernel(block, blocks, shift, target):
    """`lo = ...; hi = lo + block; A[lo:hi]`: the extent simplifies through the names' values."""
    rows = block * (blocks + 1)

    @T.prim_func
    def window(A: T.Tensor((rows, 3), "float32"), B: T.Tensor((rows, 3), "float32")):
        with T.Kernel(blocks) as bx:
            tile = T.alloc_shared((block, 3), "float32")
            lo = bx * block + shift
            hi = (bx + 1) * block + shift
            T.copy(A[lo:hi, :], tile)
            T.copy(tile, B[lo:hi, :])

    a = np.random.default_rng(block + blocks + shift).random((rows, 3)).astype(np.float32)
    b = tilecore.compile(window, target=target, out_idx=[-1])(a)
    np.testing.assert_array_equal(b[shift : shift + blocks * block], a[shift : shift + blocks * block])


def test_names_of_loaded_values_are_not_looked_through():
    """A name bound to a value read from memory is not expanded: the memory may change between
    the two names, so `lo:hi` of two such names stays an error."""
    with pytest.raises(TileCompileError, match="does not simplify to a constant"):

        @T.prim_func
        def window(A: T.Tensor((16,), "float32"), I: T.Tensor((2,), "int32"), B: T.Tensor((4,), "float32")):
            with T.Kernel(1) as bx:
                tile = T.alloc_shared((4,), "float32")
                lo = I[0]
                hi = I[0] + 4
                T.copy(A[lo:hi], tile)
                T.copy(tile, B)
