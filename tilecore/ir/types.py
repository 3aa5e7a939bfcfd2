"""Dtypes of the tile language and the promotion rules the interpreter defines.

Rules (DESIGN.md "Numbers"):
* a Python literal adopts the dtype of the other operand;
* two floats promote to the wider (float16 with bfloat16 gives float32);
* an int with a float gives the float;
* two ints promote to the wider; signed wins over unsigned of the same width
  (uint8 with int8 gives int16);
* bool behaves as the narrowest int when mixed with numbers;
* fp8 (float8_e4m3fn, float8_e5m2) is a storage format: an fp8 operand counts as
  float32 (it widens exactly), so arithmetic never happens in fp8 and a Python
  literal next to an fp8 value is a float32 literal;
* int4 is a storage format too: an int4 operand counts as int8 (it widens exactly), so
  arithmetic never happens in int4 and a Python literal next to an int4 value is an int8
  literal. Global int4 tensors are passed packed two per byte (docs/semantics.md "int4").
"""

from __future__ import annotations

from typing import Any, Tuple

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
# fp8 formats (ml_dtypes' definitions): storage and conversions only, see `promote`
FP8_DTYPES = ("float8_e4m3fn", "float8_e5m2")
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8")
# signed 4-bit integers: a storage format (see `promote`), packed two per byte in global tensors
INT4 = "int4"
DTYPES = FLOAT_DTYPES + INT_DTYPES + ("bool",) + FP8_DTYPES + (INT4,)

_BITS = {
    "bool": 1,
    "int8": 8,
    "uint8": 8,
    "int16": 16,
    "int32": 32,
    "int64": 64,
    "float16": 16,
    "bfloat16": 16,
    "float32": 32,
    "float64": 64,
    "float8_e4m3fn": 8,
    "float8_e5m2": 8,
    "int4": 4,
}

# Aliases users write (TileLang / numpy / torch spellings).
ALIASES = {
    "half": "float16",
    "fp16": "float16",
    "f16": "float16",
    "bf16": "bfloat16",
    "float": "float32",
    "fp32": "float32",
    "f32": "float32",
    "tfloat32": "float32",
    "double": "float64",
    "fp64": "float64",
    "f64": "float64",
    "int": "int32",
    "long": "int64",
    "char": "int8",
    "byte": "uint8",
    "bool_": "bool",
    "e4m3": "float8_e4m3fn",
    "fp8_e4m3": "float8_e4m3fn",
    "e5m2": "float8_e5m2",
    "fp8_e5m2": "float8_e5m2",
}

INDEX_DTYPE = "int32"


class DTypeError(ValueError):
    """An unknown dtype name."""


def normalize_dtype(dtype: object) -> str:
    """Return the canonical dtype name for a string, numpy/torch dtype or alias.

    Scalar types count too: `np.float32`, `ml_dtypes.bfloat16`, `float` (float32), `int` (int32).
    """
    name = dtype.__name__ if isinstance(dtype, type) else str(dtype)
    for prefix in ("torch.", "numpy.", "np."):
        if name.startswith(prefix):
            name = name[len(prefix) :]
    name = ALIASES.get(name, name)
    if name not in DTYPES:
        raise DTypeError(f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPES)}")
    return name


def is_float(dtype: str) -> bool:
    """Whether `dtype` is a floating-point dtype (fp8 included)."""
    return dtype in FLOAT_DTYPES or dtype in FP8_DTYPES


def is_fp8(dtype: str) -> bool:
    """Whether `dtype` is one of the fp8 storage formats."""
    return dtype in FP8_DTYPES


def accum_dtype(dtype: str) -> str:
    """Where arithmetic on `dtype` happens: narrow floats (float16, bfloat16) and fp8 in float32, the rest as is."""
    return "float32" if dtype in ("float16", "bfloat16") or is_fp8(dtype) else dtype


def is_int(dtype: str) -> bool:
    """Whether `dtype` is an integer dtype (int4 included; bool is not)."""
    return dtype in INT_DTYPES or dtype == INT4


def is_int4(dtype: str) -> bool:
    """Whether `dtype` is int4, the packed 4-bit storage format."""
    return dtype == INT4


def is_bool(dtype: str) -> bool:
    return dtype == "bool"


def bits(dtype: str) -> int:
    return _BITS[dtype]


def itemsize(dtype: str) -> int:
    """Bytes per element of a tile (bool and int4 tiles hold one element a byte; global int4
    tensors hold two, see docs/semantics.md "int4")."""
    return max(1, _BITS[dtype] // 8)


def promote(a: str, b: str) -> str:
    """The dtype in which a binary arithmetic operation on `a` and `b` happens."""
    if is_fp8(a) or is_fp8(b):
        return promote("float32" if is_fp8(a) else a, "float32" if is_fp8(b) else b)
    if is_int4(a) or is_int4(b):
        return promote("int8" if is_int4(a) else a, "int8" if is_int4(b) else b)
    if a == b:
        return a
    if is_float(a) or is_float(b):
        if not is_float(a):
            return b
        if not is_float(b):
            return a
        if {a, b} == {"float16", "bfloat16"}:
            return "float32"
        return a if _BITS[a] >= _BITS[b] else b
    # both integer-like (bool counts as the narrowest)
    if a == "bool":
        return b
    if b == "bool":
        return a
    signed = {x for x in (a, b) if x != "uint8"}
    width = max(_BITS[a], _BITS[b])
    if len(signed) < 2 and ("uint8" in (a, b)):
        other = a if b == "uint8" else b
        if _BITS[other] == 8:  # int8 with uint8
            return "int16"
        return other
    return f"int{width}"


def literal_dtype(value: object) -> str:
    """The dtype a bare Python literal takes when nothing else decides it."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int32"
    return "float32"


def storage_of(dtype: str, shape: Tuple[Any, ...]) -> Tuple[str, Tuple[Any, ...]]:
    """(dtype, shape) of the array that a global tensor of `dtype` and `shape` is passed as: the
    same, except int4, passed as int8 with the last dimension halved (element k of a row in the
    low nibble of byte k // 2 when k is even, in the high nibble when k is odd)."""
    if not is_int4(dtype):
        return dtype, tuple(shape)
    last = shape[-1]
    return "int8", tuple(shape[:-1]) + ((last // 2) if isinstance(last, int) else last,)
