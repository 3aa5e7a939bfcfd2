"""Math intrinsic tables: (function name, dtype) -> a builder of a TVM TIR expression.

A table entry is a callable `impl(args: list[PrimExpr]) -> PrimExpr` taking
arguments already lowered in `dtype`; `IntrinsicTable.lower(func, dtype, args)`
looks it up. `default_table()` covers every function of
`tilecore.ir.nodes.MATH_FUNCS` (plus "pow") for every float dtype, and `abs`,
`floor`, `ceil` for integers:

* float32 / float64 use TVM's own ops (`tvm.tirx.exp`, ...), which TVM's target
  lowering maps to LLVM intrinsics, libdevice, or the shading language's builtins;
* float16 / bfloat16 are evaluated in float32 and cast back (one rounding at the
  end, which is what numpy's float16 math does within an ulp);
* `vectorizable_exp2_f32` and friends are polynomial versions made only of
  arithmetic and bit casts: loops that use them vectorize (LLVM turns
  `llvm.exp.v16f32` into sixteen libm calls). A backend that wants them puts
  them into its table (the CPU backend does).

How a backend customises it: take `default_table()`, then assign entries
(`table[("exp", "float32")] = my_impl`) -- this is exactly what the plugin hook
`tilecore_intrinsics(backend, table)` lets a third party do too. An entry may
also be a string: a `tvm.tirx` function name ("exp"), "llvm.<intrinsic>"
(a pure LLVM intrinsic call) or "extern:<symbol>" (a pure extern C call).
An entry marked with `contextual` is called as `impl(lowering, args)`: it may read
the lowering it is used in (its target description, the kernel's helper library).

This module imports TVM at top level: import it only from backend code.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Tuple, Union

import tvm
from tvm import tirx as tx

from ..ir.nodes import MATH_FUNCS

Impl = Union[Callable[[List[tvm.tirx.Expr]], tvm.tirx.Expr], str]

FLOATS = ("float16", "bfloat16", "float32", "float64")
INTS = ("int8", "int16", "int32", "int64", "uint8")
# Functions with two arguments (the rest take one).
BINARY_FUNCS = ("pow",)


def dtype_of(expr) -> str:
    """The dtype string of a TVM PrimExpr ("float32", "int32", "bool", ...)."""
    return str(expr.ty.dtype)


def _unary(op):
    return lambda args: op(args[0])


def _via_float32(impl: Callable, dtype: str) -> Callable:
    """Evaluate `impl` in float32 and round the result back to `dtype`."""

    def lowered(args):
        wide = [tx.Cast("float32", a) for a in args]
        return tx.Cast(dtype, impl(wide))

    return lowered


def _identity(args):
    return args[0]


def _int_abs(args):
    x = args[0]
    if dtype_of(x) == "uint8":
        return x
    zero = tx.const(0, dtype_of(x))
    return tx.Select(x < zero, zero - x, x)


def _sigmoid(args):
    x = args[0]
    one = tx.const(1.0, dtype_of(x))
    return one / (one + tx.exp(zero_minus(x)))


def zero_minus(x):
    return tx.const(0, dtype_of(x)) - x


def _rsqrt(args):
    x = args[0]
    return tx.const(1.0, dtype_of(x)) / tx.sqrt(x)


def _float_abs(args):
    return tx.abs(args[0])


_FLOAT_OPS: Dict[str, Callable] = {
    "exp": _unary(tx.exp),
    "exp2": _unary(tx.exp2),
    "log": _unary(tx.log),
    "log2": _unary(tx.log2),
    "sqrt": _unary(tx.sqrt),
    "rsqrt": _rsqrt,
    "tanh": _unary(tx.tanh),
    "sigmoid": _sigmoid,
    "sin": _unary(tx.sin),
    "cos": _unary(tx.cos),
    "floor": _unary(tx.floor),
    "ceil": _unary(tx.ceil),
    "abs": _float_abs,
    "pow": lambda args: tx.pow(args[0], args[1]),
}


def contextual(impl: Callable) -> Callable:
    """Mark `impl` as `impl(lowering, args)`: `IntrinsicTable.bound` passes it the lowering."""
    impl.needs_lowering = True  # type: ignore[attr-defined]
    return impl


class IntrinsicTable(dict):
    """A dict (func, dtype) -> impl, with `lower` to apply an entry."""

    def bound(self, lowering, always: Iterable[str] = ()) -> "IntrinsicTable":
        """A copy whose contextual entries (and every entry named in `always`) are bound to
        `lowering`, so that all of them are called as `impl(args)`."""
        names = set(always)
        out = IntrinsicTable()
        for key, impl in self.items():
            if callable(impl) and (getattr(impl, "needs_lowering", False) or key[0] in names):
                out[key] = (lambda f: lambda args: f(lowering, args))(impl)
            else:
                out[key] = impl
        return out

    def lower(self, func: str, dtype: str, args: List[tvm.tirx.Expr]) -> tvm.tirx.Expr:
        """Build `func(*args)` in `dtype`; KeyError if the table has no entry."""
        impl = self[(func, dtype)]
        if isinstance(impl, str):
            return _resolve_named(impl, dtype, args)
        return impl(list(args))

    def has(self, func: str, dtype: str) -> bool:
        return (func, dtype) in self


def _resolve_named(name: str, dtype: str, args):
    if name.startswith("llvm."):
        return tx.call_llvm_pure_intrin(dtype, name, *args)
    if name.startswith("extern:"):
        return tx.call_pure_extern(dtype, name[len("extern:") :], *args)
    return getattr(tx, name)(*args)


def default_table() -> IntrinsicTable:
    """The portable table: TVM math ops in float32/float64, float16/bfloat16 through float32."""
    table = IntrinsicTable()
    for func in tuple(MATH_FUNCS) + BINARY_FUNCS:
        impl = _FLOAT_OPS[func]
        table[(func, "float32")] = impl
        table[(func, "float64")] = impl
        for narrow in ("float16", "bfloat16"):
            table[(func, narrow)] = _via_float32(impl, narrow)
    for d in INTS:
        table[("abs", d)] = _int_abs
        table[("floor", d)] = _identity
        table[("ceil", d)] = _identity
    return table


# ----------------------------------------------------------------------------- vectorizable float32 math
# Only arithmetic, comparisons, selects and bit casts, so that a vectorized loop
# stays vectorized. Accuracy: a few ulp over the whole float32 range (checked
# against numpy in the CPU plugin's tests), with correct inf / 0 / NaN handling.

_LN2 = 0.6931471805599453
_LOG2E = 1.4426950408889634


def _f(v):
    return tx.const(v, "float32")


def _exp_of_reduced(r):
    """e**r for r in [-ln2/2, ln2/2]: Cephes' degree-6 expf polynomial (about 1 ulp)."""
    if not isinstance(r, tx.Var):
        return _let(r, _exp_of_reduced, "r")
    p = _f(1.9875691500e-4)
    p = p * r + _f(1.3981999507e-3)
    p = p * r + _f(8.3334519073e-3)
    p = p * r + _f(4.1665795894e-2)
    p = p * r + _f(1.6666665459e-1)
    p = p * r + _f(5.0000001201e-1)
    return p * r * r + r + _f(1.0)


def _times_pow2(k, body_fn):
    """`body_fn(scaled)` where `scaled(p)` is p * 2**k for an integral float32 k in [-152, 129],
    scaling in two halves (two factors keep each scale a normal float, so results that are
    subnormal or overflow to inf come out right). The lets come first, outside any select, so
    that a statement can bind them one by one (`let_chain`)."""

    def with_ki(ki):
        def with_k1(k1):
            def scaled(p):
                return (
                    p
                    * tx.reinterpret(  # floor(k / 2)
                        "float32", tx.shift_left(k1 + tx.const(127, "int32"), tx.const(23, "int32"))
                    )
                    * tx.reinterpret("float32", tx.shift_left(ki - k1 + tx.const(127, "int32"), tx.const(23, "int32")))
                )

            return body_fn(scaled)

        return _let(tx.shift_right(ki, tx.const(1, "int32")), with_k1, "k1")

    return _let(tx.Cast("int32", k), with_ki, "ki")


def _let(value, body_fn, name="v"):
    """`body_fn(v)` with `value` bound once to `v` (expression trees are DAGs: no recomputation)."""
    if isinstance(value, (tx.Var, tx.FloatImm, tx.IntImm)):
        return body_fn(value)
    v = tx.Var(name, dtype_of(value))
    return tx.Let(v, value, body_fn(v))


def let_chain(value) -> Tuple[List[Tuple[Any, Any]], Any]:
    """([(var, value), ...], core): the lets at the top of `value` (and at the top of their own
    values), in binding order, and the expression under them. A statement that binds a name to
    `value` binds these one by one first: TVM 0.27's simplifier refuses to bind one let variable
    twice with different ranges, which happened when a named value holding these lets was bound
    inside a loop (gdn/example_chunk_delta_bwd.py on cpu)."""
    binds: List[Tuple[Any, Any]] = []
    while isinstance(value, tx.Let):
        inner, core = let_chain(value.value)
        binds += inner + [(value.var, core)]
        value = value.body
    return binds, value


def vectorizable_exp2_f32(x):
    """2**x for float32: 2**round(x) times e**((x - round(x)) * ln2)."""
    return _let(x, _exp2_body, "x")


def _exp2_body(x):
    # The clamp keeps the exponent arithmetic in range; outside it the result
    # saturates to inf / 0 exactly as exp2 does. NaN is restored at the end.
    xc = tx.Max(tx.Min(x, _f(129.0)), _f(-152.0))
    return _let(
        xc,
        lambda xc: _let(
            tx.round(xc),
            lambda k: _let(
                (xc - k) * _f(_LN2),  # xc - k is exact
                lambda r: _times_pow2(k, lambda scaled: tx.Select(tx.isnan(x), x, scaled(_exp_of_reduced(r)))),
                "r",
            ),
            "k",
        ),
        "xc",
    )


def vectorizable_exp_f32(x):
    """e**x for float32 with Cody-Waite reduction (ln2 split in two)."""
    return _let(x, _exp_body, "x")


def _exp_body(x):
    xc = tx.Max(tx.Min(x, _f(89.5)), _f(-105.0))
    return _let(
        xc,
        lambda xc: _let(
            tx.round(xc * _f(_LOG2E)),
            lambda k: _let(
                xc - k * _f(0.693145751953125) - k * _f(1.428606765330187e-06),
                lambda r: _times_pow2(k, lambda scaled: tx.Select(tx.isnan(x), x, scaled(_exp_of_reduced(r)))),
                "r",
            ),
            "k",
        ),
        "xc",
    )


def vectorizable_table() -> Dict[Tuple[str, str], Callable]:
    """Entries that replace exp/exp2/sigmoid/tanh for float32."""

    def exp(args):
        return vectorizable_exp_f32(args[0])

    def exp2(args):
        return vectorizable_exp2_f32(args[0])

    def sigmoid(args):
        # e = exp(-|x|) never overflows; sigmoid(x) = 1/(1+e) for x >= 0, e/(1+e) below.
        def body(x):
            return _let(
                vectorizable_exp_f32(_f(0.0) - tx.abs(x)),
                lambda e: _let(_f(1.0) / (_f(1.0) + e), lambda s: tx.Select(x >= _f(0.0), s, e * s), "s"),
                "e",
            )

        return _let(args[0], body, "x")

    def tanh(args):
        # tanh(x) = sign(x) * (1 - e) / (1 + e) with e = exp(-2|x|): no overflow, no cancellation
        # for large |x|; for small |x| the odd polynomial keeps the relative accuracy.
        def body(x):
            ax = tx.abs(x)

            def with_e(e):
                big = (_f(1.0) - e) / (_f(1.0) + e)
                return _let(
                    x * x,
                    lambda x2: tx.Select(
                        tx.isnan(x),
                        x,
                        tx.Select(
                            ax < _f(0.125),
                            x
                            * (
                                _f(1.0)
                                + x2
                                * (
                                    _f(-0.33333334)
                                    + x2 * (_f(0.13333334) + x2 * (_f(-0.053968254) + x2 * _f(0.021869488)))
                                )
                            ),
                            tx.Select(x < _f(0.0), _f(0.0) - big, big),
                        ),
                    ),
                    "x2",
                )

            # e first (exp of NaN is NaN, and the select then takes x): every let stays outside
            # the selects, so a statement can bind them one by one (`let_chain`)
            return _let(vectorizable_exp_f32(_f(-2.0) * ax), with_e, "e")

        return _let(args[0], body, "x")

    out = {}
    for name, impl in (("exp", exp), ("exp2", exp2), ("sigmoid", sigmoid), ("tanh", tanh)):
        # float16/bfloat16 keep the default entries: TVM's narrow-float legalization
        # does not accept Let-bound loads of the narrow buffers
        out[(name, "float32")] = impl
    return out


def table_from(entries: Iterable[Tuple[Tuple[str, str], Impl]]) -> IntrinsicTable:
    """Build an IntrinsicTable from (key, impl) pairs on top of `default_table()`."""
    table = default_table()
    for key, impl in entries:
        table[key] = impl
    return table
