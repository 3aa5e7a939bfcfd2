"""TileLang's `tilelang.language.fp8` helpers: which fp8 dtype to use.

tilecore's fp8 dtypes are the OCP formats `float8_e4m3fn` and `float8_e5m2` (ml_dtypes'
definitions) on every backend that has fp8; the AMD-only "fnuz" variants TileLang picks on
ROCm are not part of the language, so these helpers never return them.
"""

from __future__ import annotations

from .dtypes import DType, float8_e4m3fn, float8_e5m2

_FORMATS = {"e4m3": float8_e4m3fn, "e5m2": float8_e5m2}


def determine_fp8_type(fp8_format: str = "e4m3") -> DType:
    """The fp8 dtype of a format name: "e4m3" -> T.float8_e4m3fn, "e5m2" -> T.float8_e5m2."""
    if fp8_format not in _FORMATS:
        raise ValueError(f"unknown fp8 format {fp8_format!r}; expected 'e4m3' or 'e5m2'")
    return _FORMATS[fp8_format]


def determine_torch_fp8_type(fp8_format: str = "e4m3"):
    """The torch dtype of `determine_fp8_type(fp8_format)`; imports torch."""
    return determine_fp8_type(fp8_format).as_torch()
