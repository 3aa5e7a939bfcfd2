"""numpy views of the tile language's dtypes, and the value conversions the semantics define.

Conversions (DESIGN.md "Numbers"): float narrowing rounds to nearest even, float
to int truncates toward zero (C), int narrowing wraps, anything to bool is
"nonzero". numpy does all of that except float64 -> bfloat16, where ml_dtypes
rounds twice (through float32); `convert` fixes that with round-to-odd.

fp8 (`float8_e4m3fn`, `float8_e5m2`) is ml_dtypes' own: conversion to fp8 rounds to
nearest even from any source (a float64 through float32 rounded to odd, as for bfloat16:
some ml_dtypes releases round a float64 through float32 to nearest); a value beyond
the largest finite one after rounding becomes NaN in e4m3fn (it has no inf) and inf in
e5m2, NaN stays NaN with its sign. fp8 to an int or bool goes through float32 (exact),
so it follows the float rules above.

int4 tiles are held one value per int8 (`np_dtype("int4")` is int8); converting into int4
first converts into int32 by the rules above, then keeps the low four bits as a two's
complement value (so 8 becomes -8 and 9 becomes -7), as every int narrowing wraps. Global int4
tensors arrive packed two per byte and are unpacked by `unpack_int4`.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ..ir.types import DTYPES, INT4, is_float, is_int

NUMPY_DTYPES = {
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
    "int8": np.dtype(np.int8),
    "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "uint8": np.dtype(np.uint8),
    "bool": np.dtype(np.bool_),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    INT4: np.dtype(np.int8),  # one value per byte in tiles; see unpack_int4 for tensors
}
assert set(NUMPY_DTYPES) == set(DTYPES)

_BY_NUMPY = {v: k for k, v in NUMPY_DTYPES.items() if k != INT4}  # an int8 array is int8
_FP8 = (NUMPY_DTYPES["float8_e4m3fn"], NUMPY_DTYPES["float8_e5m2"])


def np_dtype(dtype: str) -> np.dtype:
    """The numpy dtype that stores tile dtype `dtype`."""
    return NUMPY_DTYPES[dtype]


def tile_dtype(np_dt) -> str:
    """The tile dtype name of a numpy dtype (KeyError when there is none)."""
    return _BY_NUMPY[np.dtype(np_dt)]


def scalar(dtype: str, value):
    """A numpy scalar of `dtype` holding `value` (converted by the store rules)."""
    return convert(np.asarray(value), dtype)[()]


def fill_value(dtype: str):
    """What a fresh allocation holds: NaN for floats, the minimum for ints, True for bool.

    Reading memory that was never written is undefined; these values make such
    reads visible in results instead of looking like plausible zeros.
    """
    if is_float(dtype):
        return np.nan
    if is_int(dtype):
        return np.iinfo(NUMPY_DTYPES[dtype]).min
    return True


def _f64_to_narrow(x: np.ndarray, target) -> np.ndarray:
    # Round to odd into float32 (keeps a sticky bit), then round-to-nearest-even
    # into bfloat16 or fp8 (`target`): that equals one correct rounding of the float64 value.
    with np.errstate(over="ignore"):  # (beyond float32: inf, stepped back to its largest finite value)
        f32 = x.astype(np.float32)
    back = f32.astype(np.float64)
    inexact = back != x
    if np.any(inexact):
        f32 = np.array(f32, copy=True)
        bits = f32.view(np.uint32)
        overshot = inexact & (np.abs(back) > np.abs(x))
        bits[overshot] -= np.uint32(1)  # step back toward zero: truncation
        bits[inexact] |= np.uint32(1)  # sticky bit: the value lies strictly inside
    return f32.astype(target)


def convert(value, dtype: str):
    """`value` (numpy scalar or array) converted to `dtype` by the store rules.

    Arrays stay arrays, scalars stay numpy scalars; no copy when the dtype
    already matches.
    """
    if dtype == INT4:
        return _to_int4(value)
    target = NUMPY_DTYPES[dtype]
    arr = np.asarray(value)
    if arr.dtype == target:
        return value
    if (
        dtype == "bfloat16"
        and arr.dtype.kind in "fiu"
        and arr.dtype.itemsize > 4
        or (dtype == "bfloat16" and arr.dtype.kind in "iu" and arr.dtype.itemsize > 2)
    ):
        out = _f64_to_narrow(arr.astype(np.float64), target)
    elif target in _FP8 and arr.dtype.kind in "fiu" and arr.dtype.itemsize > 4:
        # one rounding whatever ml_dtypes does with a float64 (some releases round through float32)
        out = _f64_to_narrow(arr.astype(np.float64), target)
    elif arr.dtype in _FP8 and dtype not in ("float32", "float64"):
        out = arr.astype(np.float32).astype(target)  # exact widening, then the float rules
    else:
        out = arr.astype(target)
    if out.ndim == 0 and not isinstance(value, np.ndarray):
        return out[()]
    return out


def _to_int4(value):
    """`value` converted to int4 (held in int8): through int32, keeping the low four bits."""
    wide = np.asarray(convert(value, "int32"), dtype=np.int64)
    out = (((wide + 8) % 16) - 8).astype(np.int8)  # the value modulo 16, in -8..7
    if out.ndim == 0 and not isinstance(value, np.ndarray):
        return out[()]
    return out


def unpack_int4(packed: np.ndarray) -> np.ndarray:
    """The int4 values (held in int8) of a tensor packed two per byte along its last dimension:
    value 2j of a row is the low nibble of byte j, value 2j + 1 its high nibble, each a two's
    complement number in -8..7."""
    nibbles = packed.view(np.uint8)
    low = (nibbles & 0x0F).astype(np.int8)
    high = (nibbles >> 4).astype(np.int8)
    values = np.stack((low, high), axis=-1).reshape(packed.shape[:-1] + (2 * packed.shape[-1],))
    return np.where(values > 7, values - 16, values).astype(np.int8)
