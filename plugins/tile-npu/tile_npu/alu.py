"""Element arithmetic of the scalar unit and the vector engine (numpy, one definition for both).

Follows the tile language's number rules: the operation happens in its dtype
(operands converted first), `//` and `%` are floor division/modulo, integer
`/` truncates toward zero, comparisons give bool, and conversions are the
store rules of `tilecore.interp.dtypes.convert`.
"""

from __future__ import annotations

import numpy as np

from tilecore.interp.dtypes import convert as _convert

from .arch import NP_DTYPES
from .isa import BINOPS, UNOPS

COMPARES = {"<", "<=", ">", ">=", "==", "!=", "and", "or"}


def convert(values, dtype: str):
    """`values` converted to `dtype` by the store rules (array in, array out)."""
    with np.errstate(all="ignore"):
        return np.asarray(_convert(np.asarray(values), dtype))


def _int_div(a, b):
    # C division: truncate toward zero; x / 0 gives 0 (numpy's integer convention)
    q = np.floor_divide(a, b)
    r = np.remainder(a, b)
    fix = (r != 0) & ((a < 0) != (b < 0))
    return np.where(fix, q + 1, q).astype(a.dtype)


def binop(index: int, a, b, dtype: str):
    """Apply BINOPS[index] to arrays `a`, `b` in `dtype`; compare/logic ops return bool."""
    op = BINOPS[index]
    if op in ("and", "or"):
        a = convert(a, "bool")
        b = convert(b, "bool")
        return np.logical_and(a, b) if op == "and" else np.logical_or(a, b)
    a = convert(a, dtype)
    b = convert(b, dtype)
    kind = NP_DTYPES[dtype].kind
    with np.errstate(all="ignore"):
        if op == "+":
            r = a + b
        elif op == "-":
            r = a - b
        elif op == "*":
            r = a * b
        elif op == "/":
            r = _int_div(a, b) if kind in "iub" else a / b
        elif op == "//":
            r = np.floor_divide(a, b)
        elif op == "%":
            r = np.remainder(a, b)
        elif op == "min":
            r = np.minimum(a, b)
        elif op == "max":
            r = np.maximum(a, b)
        elif op == "pow":
            if kind in "iub":
                neg = b < 0
                r = np.power(a, np.where(neg, 0, b).astype(a.dtype))
                if np.any(neg):  # a ** -n in integers: C-like truncation
                    alt = np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 == 0, 1, -1), 0))
                    r = np.where(neg, alt, r).astype(a.dtype)
            else:
                r = np.power(a, b)
        elif op == "&":
            r = a & b
        elif op == "|":
            r = a | b
        elif op == "^":
            r = a ^ b
        elif op == "<<":
            r = np.left_shift(a, b)
        elif op == ">>":
            r = np.right_shift(a, b)
        elif op == "<":
            return a < b
        elif op == "<=":
            return a <= b
        elif op == ">":
            return a > b
        elif op == ">=":
            return a >= b
        elif op == "==":
            return a == b
        elif op == "!=":
            return a != b
        else:  # pragma: no cover - BINOPS is closed
            raise ValueError(op)
    return convert(r, dtype)


def unop(index: int, a, dtype: str):
    """Apply UNOPS[index] to array `a` in `dtype` ("mov" only converts)."""
    op = UNOPS[index]
    if op == "not":
        return np.logical_not(convert(a, "bool"))
    a = convert(a, dtype)
    with np.errstate(all="ignore"):
        if op == "mov":
            r = a
        elif op == "neg":
            r = a if dtype == "bool" else -a  # -True is nonzero: stays True
        elif op == "~":
            r = ~a
        elif op == "abs":
            r = np.abs(a)
        elif op == "floor":
            r = np.floor(a) if NP_DTYPES[dtype].kind == "f" or dtype == "bfloat16" else a
        elif op == "ceil":
            r = np.ceil(a) if NP_DTYPES[dtype].kind == "f" or dtype == "bfloat16" else a
        else:
            # transcendental functions: half types evaluate in float32 and round once;
            # integer arguments evaluate in float64 (the tile language's rule)
            wide = np.float32 if dtype in ("float16", "bfloat16", "float32") else np.float64
            x = a.astype(wide)
            if op == "exp":
                r = np.exp(x)
            elif op == "exp2":
                r = np.exp2(x)
            elif op == "log":
                r = np.log(x)
            elif op == "log2":
                r = np.log2(x)
            elif op == "sqrt":
                r = np.sqrt(x)
            elif op == "rsqrt":
                r = 1.0 / np.sqrt(x)
            elif op == "tanh":
                r = np.tanh(x)
            elif op == "sigmoid":
                r = 1.0 / (1.0 + np.exp(-x))
            elif op == "sin":
                r = np.sin(x)
            elif op == "cos":
                r = np.cos(x)
            else:  # pragma: no cover
                raise ValueError(op)
    return convert(r, dtype)
