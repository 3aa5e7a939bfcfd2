"""Dtype objects of the language: `T.float16`, `T.int32`, ... .

Each is a `str` subclass, so it can be passed wherever a dtype string is
accepted (`T.alloc_shared((64, 64), T.float16)` or `"float16"`). Calling one
inside a kernel (`T.float32(x)`) is a cast; on a Python number it makes a
typed constant.
"""

from __future__ import annotations

from ..ir.types import DTYPES


class DType(str):
    """A dtype name that is also callable inside a kernel as a cast."""

    __tile_intrinsic__ = "dtype_call"

    def __call__(self, value):
        raise RuntimeError(
            f"T.{self}(...) can only be used inside a @T.prim_func kernel body "
            "(outside a kernel, use the Python value directly)"
        )

    def __repr__(self) -> str:
        return f"T.{str(self)}"

    def as_torch(self):
        """The torch dtype of this dtype (TileLang's `T.float16.as_torch()`); imports torch."""
        import torch

        return getattr(torch, "bool" if self == "bool" else str(self))


float16 = DType("float16")
bfloat16 = DType("bfloat16")
float32 = DType("float32")
float64 = DType("float64")
int8 = DType("int8")
int16 = DType("int16")
int32 = DType("int32")
int64 = DType("int64")
uint8 = DType("uint8")
bool = DType("bool")  # noqa: A001  (TileLang spells it T.bool)
float8_e4m3fn = DType("float8_e4m3fn")
float8_e5m2 = DType("float8_e5m2")
int4 = DType("int4")  # signed 4-bit; global tensors packed two per int8 byte (docs/semantics.md "int4")

DTYPE_OBJECTS = {name: globals()[name] for name in DTYPES}
float = float32  # noqa: A001  (TileLang's T.float is float32)
# TileLang's T.tfloat32: float32 storage whose GEMMs may round products to TF32 on tensor cores;
# here it is float32, computed in full float32 (more accurate, never less)
tfloat32 = float32


class dtype(str):  # noqa: N801  (TileLang's name; a class, so `T.dtype | None` annotations work)
    """`T.dtype("float16")`: the dtype object (a DType) of a name in any accepted spelling."""

    # TileLang's T.dtype(...) makes the dtype object, which is our DType (not a `dtype`)
    def __new__(cls, name) -> DType:  # type: ignore[misc]
        from ..ir.types import normalize_dtype

        return DType(normalize_dtype(name))
