"""fp8 (`float8_e4m3fn`, `float8_e5m2`) in TIR: exact conversions built from integer operations.

TVM's own fp8 legalization on LLVM rounds wrongly (no subnormals, overflow wraps instead of
becoming NaN / inf), so a backend that compiles through TVM holds fp8 values the way the
semantics define them (docs/semantics.md "fp8"), with conversions written here:

* every fp8 value inside a kernel is a float32 PrimExpr holding the fp8 value exactly
  (`Fp8Lowering` / `Fp8ExprLowerer`); block-local fp8 buffers are float32 buffers of such
  values; only global tensors keep fp8 storage, read by `decode` and written by `encode`;
* rounding to fp8 (`round_to_fp8`) is round to nearest even on the float32 bits; a float64
  source is first rounded to float32 *to odd*, so the two roundings equal one; a result beyond
  the largest finite value becomes NaN (e4m3fn, which has no inf) or inf (e5m2), and NaN keeps
  its sign, exactly as ml_dtypes converts.

Target-neutral (no vendor instruction): mix `Fp8Lowering` into a `TirLowering` subclass before
it (`class MyLowering(Fp8Lowering, TirLowering)`). This module imports TVM.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
from tvm import tirx as tx

from ..ir import nodes as N
from ..ir.types import is_fp8
from .intrinsics import dtype_of
from .tir_expr import ExprLowerer, cast_to, dtype_of_index, float32_round_to_odd


@dataclass(frozen=True)
class Fp8Format:
    """An fp8 format: mantissa bits, exponent bias, largest finite value, NaN and inf codes."""

    mantissa: int
    bias: int
    max_finite: float
    nan_code: int
    inf_code: int  # -1: the format has no inf (overflow gives NaN)


FORMATS = {
    "float8_e4m3fn": Fp8Format(mantissa=3, bias=7, max_finite=448.0, nan_code=0x7F, inf_code=-1),
    "float8_e5m2": Fp8Format(mantissa=2, bias=15, max_finite=57344.0, nan_code=0x7E, inf_code=0x7C),
}


def _u32(value: int):
    return tx.const(value, "uint32")


def _f32(value: float):
    return tx.const(value, "float32")


def _bits(x32):
    return tx.reinterpret("uint32", x32)


def _with_sign(magnitude32, sign_bit):
    """`magnitude32` (a non-negative float32) with the float32 sign bit `sign_bit` (uint32)."""
    return tx.reinterpret("float32", tx.bitwise_or(_bits(magnitude32), sign_bit))


def as_float32(value):
    """A lowered value of any dtype as float32, rounded *to odd* from float64 (see module doc)."""
    src = dtype_of(value)
    if src == "float32":
        return value
    if src == "float64":
        return float32_round_to_odd(value)
    if src == "bfloat16":
        return tx.Cast("float32", value)
    if src == "float16":  # (a GPU's half -> float conversion may drop a NaN's sign: keep it)
        x32 = tx.Cast("float32", value)
        sign = tx.shift_left(tx.Cast("uint32", tx.shift_right(tx.reinterpret("uint16", value), 15)), _u32(31))
        return tx.Select(tx.isnan(x32), tx.reinterpret("float32", tx.bitwise_or(_u32(0x7FC00000), sign)), x32)
    return float32_round_to_odd(cast_to(value, "float64"))  # ints and bool: exact in float64


def round_to_fp8(x32, dtype: str):
    """The float32 `x32` rounded to fp8 `dtype` (nearest, ties to even), as the float32 holding it."""
    fmt = FORMATS[dtype]
    u = _bits(x32)
    sign = tx.bitwise_and(u, _u32(0x80000000))
    a = tx.bitwise_and(u, _u32(0x7FFFFFFF))
    exponent = tx.shift_right(a, _u32(23))
    # normal range: round the float32 significand to `mantissa` bits
    drop = 23 - fmt.mantissa
    odd = tx.bitwise_and(tx.shift_right(a, _u32(drop)), _u32(1))
    normal = tx.bitwise_and(a + _u32((1 << (drop - 1)) - 1) + odd, _u32(~((1 << drop) - 1) & 0xFFFFFFFF))
    # subnormal range: a whole number of the smallest subnormal, rounded to even
    significand = tx.bitwise_or(tx.bitwise_and(a, _u32(0x7FFFFF)), _u32(0x800000))
    shift = tx.Cast(
        "uint32", tx.min(tx.Cast("int32", _u32(151 - fmt.bias - fmt.mantissa)) - tx.Cast("int32", exponent), 31)
    )
    half = tx.shift_left(_u32(1), shift - _u32(1)) - _u32(1)
    keep_odd = tx.bitwise_and(tx.shift_right(significand, shift), _u32(1))
    units = tx.shift_right(significand + half + keep_odd, shift)
    subnormal = tx.Cast("float32", units) * _f32(2.0 ** (1 - fmt.bias - fmt.mantissa))
    magnitude = tx.Select(exponent < _u32(128 - fmt.bias), subnormal, tx.reinterpret("float32", normal))
    beyond = _f32(float("nan") if fmt.inf_code < 0 else float("inf"))
    magnitude = tx.Select(magnitude > _f32(fmt.max_finite), beyond, magnitude)
    magnitude = tx.Select(tx.isnan(x32), _f32(float("nan")), magnitude)
    return _with_sign(magnitude, sign)


def encode(y32, dtype: str):
    """The fp8 `dtype` bits (a uint8) of float32 `y32`, which holds an fp8 value exactly."""
    fmt = FORMATS[dtype]
    u = _bits(y32)
    sign = tx.bitwise_and(tx.shift_right(u, _u32(24)), _u32(0x80))
    a = tx.bitwise_and(u, _u32(0x7FFFFFFF))
    normal = tx.shift_right(a, _u32(23 - fmt.mantissa)) - _u32((127 - fmt.bias) << fmt.mantissa)
    subnormal = tx.Cast("uint32", tx.reinterpret("float32", a) * _f32(2.0 ** (fmt.bias - 1 + fmt.mantissa)))
    code = tx.Select(tx.shift_right(a, _u32(23)) < _u32(128 - fmt.bias), subnormal, normal)
    if fmt.inf_code >= 0:
        code = tx.Select(tx.EQ(a, _u32(0x7F800000)), _u32(fmt.inf_code), code)
    code = tx.Select(a > _u32(0x7F800000), _u32(fmt.nan_code), code)
    return tx.Cast("uint8", tx.bitwise_or(code, sign))


def decode(bits8, dtype: str):
    """The float32 value of fp8 `dtype` bits (a uint8 PrimExpr); exact."""
    fmt = FORMATS[dtype]
    c = tx.Cast("uint32", bits8)
    sign = tx.shift_left(tx.bitwise_and(c, _u32(0x80)), _u32(24))
    magnitude = tx.bitwise_and(c, _u32(0x7F))
    exponent = tx.shift_right(magnitude, _u32(fmt.mantissa))
    mantissa = tx.bitwise_and(magnitude, _u32((1 << fmt.mantissa) - 1))
    normal = tx.shift_left(magnitude, _u32(23 - fmt.mantissa)) + _u32((127 - fmt.bias) << 23)
    subnormal = _bits(tx.Cast("float32", mantissa) * _f32(2.0 ** (1 - fmt.bias - fmt.mantissa)))
    value = tx.Select(tx.EQ(exponent, _u32(0)), subnormal, normal)
    if fmt.inf_code < 0:  # e4m3fn: S.1111.111 is NaN, every other code is finite
        special = tx.EQ(magnitude, _u32(0x7F))
        value = tx.Select(special, _u32(0x7FC00000), value)
    else:  # IEEE-like: the top exponent is inf (mantissa 0) or NaN
        top = (1 << (8 - 1 - fmt.mantissa)) - 1
        value = tx.Select(
            tx.EQ(exponent, _u32(top)), tx.bitwise_or(_u32(0x7F800000), tx.shift_left(mantissa, _u32(21))), value
        )
    return tx.reinterpret("float32", tx.bitwise_or(value, sign))


def fp8_bits(value) -> object:
    """A TIR value of fp8 dtype as its uint8 bits."""
    return tx.reinterpret("uint8", value)


class Fp8ExprLowerer(ExprLowerer):
    """ExprLowerer whose fp8-typed expressions lower to float32 values holding them exactly."""

    held_fp8: dict = {}  # float32 buffer name -> the fp8 dtype it holds (set by Fp8Lowering)

    def exact(self, value, dtype: str):
        """Note that float32 `value` holds an fp8 `dtype` value exactly (rounding it is a no-op)."""
        if not hasattr(self, "_exact_fp8"):
            self._exact_fp8: dict = {}
        self._exact_fp8[id(value)] = (value, dtype)
        return value

    def is_exact_fp8(self, value, dtype: str) -> bool:
        """Whether `value` is known to hold an fp8 `dtype` value exactly: a rounding's or a
        decoding's result, or a reading of a float32 buffer that holds `dtype` values."""
        if isinstance(value, tvm.ir.TensorLoad) and self.held_fp8.get(value.source.name) == dtype:
            return True
        known = getattr(self, "_exact_fp8", {}).get(id(value))
        return known is not None and known[0] is value and known[1] == dtype

    def read(self, load):
        """fp8 memory is read by its bits (`decode`); other loads as ExprLowerer reads them."""
        dt = dtype_of(load)
        if is_fp8(dt):
            return self.exact(decode(fp8_bits(load), dt), dt)
        return super().read(load)

    def to_fp8(self, value, dtype: str, exact: bool = False, hold: bool = True):
        """A lowered value rounded to fp8 `dtype`, as float32 (`exact`: it already is one).

        With `hold` (expressions of the statement being lowered) the operand is computed once,
        before the statement; a tile operation's own loops pass False (their indices are not
        defined there)."""
        if exact or self.is_exact_fp8(value, dtype):
            return value
        x32 = as_float32(value)
        # (not inside a T.if_then_else branch: a held value is computed whether the branch is taken)
        keep = self.hold if hold and not self._speculative else None
        if keep is not None and not isinstance(x32, (tx.Var, tvm.ir.TensorLoad)):
            x32 = keep(x32)  # the rounding repeats its operand: compute it once
        rounded = round_to_fp8(x32, dtype)
        if keep is not None:
            rounded = keep(rounded)  # and so does `encode`, which often follows
        return self.exact(rounded, dtype)

    def lower_as(self, expr: N.Expr, dtype: str):
        """`expr` as `dtype`; into fp8 it is rounded (unless it is that fp8 dtype already)."""
        if is_fp8(dtype):
            return self.to_fp8(self.lower(expr), dtype, exact=expr.dtype == dtype)
        return super().lower_as(expr, dtype)

    def value_dtype(self, dtype: str) -> str:
        return "float32" if is_fp8(dtype) else super().value_dtype(dtype)

    def _lower_Const(self, e: N.Const):
        if is_fp8(e.dtype):
            from ..interp.dtypes import scalar

            return _f32(float(scalar(e.dtype, e.value)))
        return super()._lower_Const(e)

    def _lower_Var(self, e: N.Var):
        if is_fp8(e.dtype):
            return self.variables[e.name]  # bound to its float32 value (Fp8Lowering.lower_Let)
        return super()._lower_Var(e)

    def _lower_Cast(self, e: N.Cast):
        if is_fp8(e.dtype):
            return self.to_fp8(self.lower(e.value), e.dtype, exact=e.value.dtype == e.dtype)
        return super()._lower_Cast(e)

    def _lower_Load(self, e: N.Load):
        if not is_fp8(e.dtype):
            return super()._lower_Load(e)
        idx = [self.lower_as(i, dtype_of_index(i)) for i in e.indices]
        if self.checked_load is not None:
            value = self.checked_load(e, idx, self._speculative > 0)
        else:
            value = self.load(e.buffer, idx)
        return self.to_fp8(value, e.dtype, exact=e.buffer.dtype == e.dtype)


class Fp8Lowering:
    """TirLowering mixin: fp8 held in float32 inside the kernel (see the module docstring)."""

    expr_class = Fp8ExprLowerer

    def __init__(self, *args, **kwargs):
        self.held_fp8: dict = {}  # names of the float32 buffers that hold fp8 values -> their fp8 dtype
        super().__init__(*args, **kwargs)
        self.expr.held_fp8 = self.held_fp8  # type: ignore[attr-defined]

    def declare(self, shape, dtype: str, name: str, scope: str):
        """A block-local buffer; an fp8 one is a float32 buffer of exact fp8 values."""
        if is_fp8(dtype):
            self.held_fp8[name] = dtype
            dtype = "float32"
        return super().declare(shape, dtype, name, scope)  # type: ignore[misc]

    def logical_dtype(self, tb) -> str:
        return self.held_fp8.get(tb.name) or super().logical_dtype(tb)  # type: ignore[misc]

    def convert(self, value, dtype: str):
        if is_fp8(dtype):
            return self.expr.to_fp8(value, dtype, hold=False)  # type: ignore[attr-defined]
        return super().convert(value, dtype)  # type: ignore[misc]

    def store(self, tb, value, indices, exact_bfloat16: bool = True):
        """Into fp8: rounded (`round_to_fp8`), then kept as float32 or written as fp8 bits."""
        dt = self.logical_dtype(tb)
        if not is_fp8(dt):
            return super().store(tb, value, indices, exact_bfloat16)  # type: ignore[misc]
        y32 = self.expr.to_fp8(value, dt, hold=False)  # type: ignore[attr-defined]
        if tb.name in self.held_fp8:
            return tx.BufferStore(tb, y32, list(indices))
        return tx.BufferStore(tb, tx.reinterpret(dt, encode(y32, dt)), list(indices))

    def lower_Cumsum(self, s: N.Cumsum):
        """A scan whose destination is fp8 is refused: this lowering reads the previous (rounded)
        output element back, and rounding every partial sum to 3 or 2 mantissa bits is far from
        the reference's one rounding."""
        if is_fp8(s.dst.dtype):
            raise self.unsupported(  # type: ignore[attr-defined]
                f"T.cumsum into an fp8 buffer ({s.dst.dtype}): scan into a float32 buffer and copy it", s
            )
        return super().lower_Cumsum(s)  # type: ignore[misc]

    def lower_Let(self, s: N.Let):
        """A name of fp8 dtype is a float32 name holding its exact value."""
        if not is_fp8(s.var.dtype):
            return super().lower_Let(s)  # type: ignore[misc]
        v = tx.Var(s.var.name, "float32")
        value = self.lower_expr(s.value, s.var.dtype)  # type: ignore[attr-defined]
        self.expr.bind_let(s, v)  # type: ignore[attr-defined]
        return tx.Bind(v, value)
