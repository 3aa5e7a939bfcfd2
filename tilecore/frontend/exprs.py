"""Typed construction of Tile IR expressions (the rules of tilecore/ir/types.py).

The frontend builds every expression through these helpers, and the printer
and the property tests use the same rules, so that "literals adopt the other
operand's dtype" and the implicit casts of promotion mean the same thing
everywhere. Errors are `ExprTypeError`s; the frontend adds the source span.
"""

from __future__ import annotations

import math
from typing import Optional

from ..ir import nodes as N
from ..ir.types import INDEX_DTYPE, is_bool, is_float, is_fp8, is_int, is_int4, literal_dtype, promote

PY_NUMBER = (bool, int, float)
# Math functions that need a float argument (an int argument is computed in float32).
FLOAT_MATH = frozenset(N.MATH_FUNCS) - {"abs"}


class ExprTypeError(TypeError):
    """An expression that breaks the typing rules; the frontend reports it at the user's line."""


def is_py_number(value) -> bool:
    return isinstance(value, PY_NUMBER)


def adopted_dtype(value, other: str) -> str:
    """The dtype a Python literal takes next to an operand of dtype `other`.

    ints and bools adopt any numeric dtype; floats adopt float dtypes and are
    float32 next to integers; next to a bool, numbers keep their own default; next
    to an fp8 value (computed in float32, see `promote`) they are float32, next to an int4 value
    (computed in int8) int8.
    """
    if is_fp8(other) and not isinstance(value, bool):
        return "float32"
    if is_int4(other):
        return adopted_dtype(value, "int8")
    if isinstance(value, bool):
        return other
    if isinstance(value, int):
        return "int32" if is_bool(other) else other
    return other if is_float(other) else "float32"


def const(value, dtype: str, span: N.Span = N.NO_SPAN) -> N.Const:
    """A constant whose Python value type matches its dtype (1 -> 1.0 in floats)."""
    if is_float(dtype):
        return N.Const(float(value), dtype, span)
    if is_bool(dtype):
        return N.Const(bool(value), dtype, span)
    if isinstance(value, float) and not value.is_integer():
        raise ExprTypeError(f"the float literal {value!r} cannot be an {dtype} constant")
    return N.Const(int(value), dtype, span)


def as_expr(value, span: N.Span = N.NO_SPAN, like: Optional[str] = None) -> N.Expr:
    """`value` as an IR expression; a Python number adopts `like` (or its default dtype)."""
    if isinstance(value, N.Expr):
        return value
    if is_py_number(value):
        dtype = adopted_dtype(value, like) if like else literal_dtype(value)
        check_literal_fits(value, dtype)
        return const(value, dtype, span)
    raise ExprTypeError(f"expected a scalar expression, got {describe(value)}")


def int_range(dtype: str):
    """(smallest, largest) value of an integer dtype."""
    bits_ = {"int4": 4, "int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8}[dtype]
    if dtype.startswith("u"):
        return 0, 2**bits_ - 1
    return -(2 ** (bits_ - 1)), 2 ** (bits_ - 1) - 1


FLOAT_MAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38, "float32": 3.4028234663852886e38}


def _rounds_to_inf(value, dtype: str) -> bool:
    """Whether `value` rounds to inf in `dtype` (65519 still rounds to float16's 65504)."""
    import numpy as np

    if dtype == "bfloat16":
        import ml_dtypes

        target = ml_dtypes.bfloat16
    else:
        target = np.dtype(dtype)
    with np.errstate(over="ignore"):
        return bool(np.isinf(np.asarray(float(value), dtype=np.float64).astype(target)))


def check_literal_fits(value, dtype: str) -> None:
    """A literal must fit the dtype it adopts: an integer would silently wrap, a finite float
    would silently become inf (1e6 next to a float16 value)."""
    if isinstance(value, bool):
        return
    if is_float(dtype) and dtype in FLOAT_MAX:
        if math.isfinite(value) and abs(value) > FLOAT_MAX[dtype] and _rounds_to_inf(value, dtype):
            raise ExprTypeError(
                f"the literal {value!r} is beyond the largest {dtype} ({FLOAT_MAX[dtype]:g}), the "
                f"dtype it adopts here, so it would become inf: cast the other operand to a wider "
                f'dtype first (e.g. T.cast(x, "float32")), or write T.infinity("{dtype}") if '
                f"inf is meant"
            )
        return
    if not isinstance(value, int) or not is_int(dtype):
        return
    low, high = int_range(dtype)
    if not low <= value <= high:
        raise ExprTypeError(
            f"the integer literal {value} does not fit {dtype} (range {low}..{high}), the dtype it "
            f"adopts here, so it would wrap around: cast the other operand to a wider dtype first "
            f'(e.g. T.cast(x, "int32")), or use a value in range'
        )


def describe(value) -> str:
    """A short user-facing description of a parse-time value."""
    if isinstance(value, N.Buffer):
        return f"the buffer {value.name}"
    if isinstance(value, N.Expr):
        return f"{'an' if value.dtype[0] in 'aeiou' else 'a'} {value.dtype} expression"
    return f"the Python value {value!r}" if len(repr(value)) < 40 else f"a Python {type(value).__name__}"


def cast_to(e: N.Expr, dtype: str) -> N.Expr:
    """`e` converted to `dtype` (itself when it already has it)."""
    return e if e.dtype == dtype else N.Cast(e, dtype, e.span)


def to_bool(e: N.Expr) -> N.Expr:
    """A condition: bools stay, numbers become `e != 0`."""
    if is_bool(e.dtype):
        return e
    if is_fp8(e.dtype):  # compared in float32, as `binary` would (see promote)
        e = cast_to(e, "float32")
    if is_int4(e.dtype):  # compared in int8, as `binary` would (see promote)
        e = cast_to(e, "int8")
    return N.BinOp("!=", e, const(0, e.dtype, e.span), "bool", e.span)


def _operands(a, b, span):
    if not isinstance(a, N.Expr) and not isinstance(b, N.Expr):
        raise ExprTypeError("at least one operand must be a kernel expression")
    if not isinstance(a, N.Expr):
        a = as_expr(a, span, like=b.dtype)
    if not isinstance(b, N.Expr):
        b = as_expr(b, span, like=a.dtype)
    return a, b


def _widen_for_comparison(a, b):
    """`x > -1` with x uint8: compare in int64 rather than reject (or wrap) the literal.

    A comparison's result is a bool, so comparing in a wider dtype is exact and
    matches what the Python text says; arithmetic keeps the strict rule.
    """
    for lit, other, swap in ((b, a, False), (a, b, True)):
        if isinstance(lit, int) and not isinstance(lit, bool) and isinstance(other, N.Expr) and is_int(other.dtype):
            low, high = int_range(other.dtype)
            if not low <= lit <= high and -(2**63) <= lit < 2**63:
                wide = cast_to(other, "int64")
                return (lit, wide) if swap else (wide, lit)
    return a, b


def binary(op: str, a, b, span: N.Span = N.NO_SPAN) -> N.Expr:
    """`a op b` with literal adoption, promotion (explicit Casts) and result dtype."""
    if op in N.COMPARE_OPS:
        a, b = _widen_for_comparison(a, b)
    a, b = _operands(a, b, span)
    if op in N.LOGIC_OPS:
        return N.BinOp(op, to_bool(a), to_bool(b), "bool", span)
    dtype = promote(a.dtype, b.dtype)
    if op == "/" and not is_float(dtype):
        raise ExprTypeError(
            f"'/' on integers ({a.dtype} / {b.dtype}) is not defined; "
            "use '//' for floor division or cast to a float dtype"
        )
    if op in ("&", "|", "^", "<<", ">>") and is_float(dtype):
        raise ExprTypeError(f"'{op}' needs integer operands, got {a.dtype} and {b.dtype}")
    a, b = cast_to(a, dtype), cast_to(b, dtype)
    if op in N.COMPARE_OPS:
        return N.BinOp(op, a, b, "bool", span)
    if op not in N.ARITH_OPS:
        raise ExprTypeError(f"unknown operator {op!r}")
    return N.BinOp(op, a, b, dtype, span)


def unary(op: str, a, span: N.Span = N.NO_SPAN) -> N.Expr:
    """`-a`, `not a`, `~a`."""
    a = as_expr(a, span)
    if op == "not":
        return N.UnaryOp("not", to_bool(a), "bool", span)
    if op == "~" and not (is_int(a.dtype) or is_bool(a.dtype)):
        raise ExprTypeError(f"'~' needs an integer operand, got {a.dtype}")
    if op == "neg" and is_bool(a.dtype):
        raise ExprTypeError("cannot negate a bool; use 'not'")
    if is_fp8(a.dtype):  # fp8 is computed in float32 (see promote)
        a = cast_to(a, "float32")
    if is_int4(a.dtype):  # int4 is computed in int8 (see promote)
        a = cast_to(a, "int8")
    return N.UnaryOp(op, a, a.dtype, span)


def math_call(func: str, arg, span: N.Span = N.NO_SPAN) -> N.Expr:
    """A math intrinsic; integer arguments of float functions are computed in float32."""
    a = as_expr(arg, span, like="float32" if func in FLOAT_MATH else None)
    if is_bool(a.dtype):
        raise ExprTypeError(f"T.{func} of a bool is not defined")
    if (func in FLOAT_MATH and not is_float(a.dtype)) or is_fp8(a.dtype):
        a = cast_to(a, "float32")  # fp8 is computed in float32 (see promote)
    if is_int4(a.dtype):  # int4 is computed in int8 (see promote)
        a = cast_to(a, "int8")
    return N.Call(func, (a,), a.dtype, span)


def select(cond, a, b, span: N.Span = N.NO_SPAN) -> N.Expr:
    """`T.if_then_else(cond, a, b)`: the branches are promoted to a common dtype."""
    c = to_bool(as_expr(cond, span))
    a, b = (
        _operands(a, b, span)
        if (isinstance(a, N.Expr) or isinstance(b, N.Expr))
        else (as_expr(a, span), as_expr(b, span))
    )
    dtype = promote(a.dtype, b.dtype)
    return N.Select(c, cast_to(a, dtype), cast_to(b, dtype), dtype, span)


def cast(value, dtype: str, span: N.Span = N.NO_SPAN) -> N.Expr:
    """`T.cast(value, dtype)`: a Python number becomes a typed constant."""
    if is_py_number(value):
        if is_int(dtype) and isinstance(value, float) and not value.is_integer():
            raise ExprTypeError(f"{value!r} is not an integer; use a float dtype or write {int(value)}")
        return const(value, dtype, span)
    return N.Cast(as_expr(value, span), dtype, span)


def infinity(dtype: str, span: N.Span = N.NO_SPAN) -> N.Const:
    """+inf in a float dtype."""
    if not is_float(dtype):
        raise ExprTypeError(f"T.infinity needs a float dtype, got {dtype}")
    return N.Const(math.inf, dtype, span)


def index_expr(value, span: N.Span = N.NO_SPAN) -> N.Expr:
    """An index or extent: an integer expression (Python ints are int32 constants)."""
    e = as_expr(value, span, like=INDEX_DTYPE)
    if not is_int(e.dtype):
        raise ExprTypeError(f"an index must be an integer, got {describe(e)}")
    return e
