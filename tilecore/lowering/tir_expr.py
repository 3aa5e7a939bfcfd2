"""Tile IR expressions -> TVM TIR (`tvm.tirx`) PrimExprs.

The Tile IR already carries the promoted dtype on every node (the frontend
applies `tilecore.ir.types.promote`), so this lowering does no type inference:
it builds exactly what each node says, converting operands to the node's dtype
where TIR needs both sides equal.

How a backend plugs in:

* `buffers` maps a Tile IR buffer *name* to either a `tvm.tirx.Buffer` (loads
  become `BufferLoad(buffer, indices)`) or a callable `(indices) -> PrimExpr`
  for buffers whose storage is remapped (a fragment spread over threads, a
  swizzled shared tile, a scalar kept in a register). Buffers of scope "var"
  are indexed with the single index 0 like any other buffer.
* `variables` maps Tile IR variable names (block indices, loop variables,
  dynamic dimensions, `Let` bindings) to PrimExprs; `bind()` adds one.
* `intrinsics` is an `IntrinsicTable` ((func, dtype) -> builder); start from
  `tilecore.lowering.intrinsics.default_table()` and override entries.
* `narrow_float_via_float32`: float16 / bfloat16 arithmetic is computed in
  float32 and rounded back after every operation -- bit-identical to IEEE
  float16 arithmetic for + - * / (float32 has more than 2p+2 bits), and what
  targets without native half arithmetic need anyway.

Semantics encoded here (DESIGN.md "Numbers"): `//` and `%` are floor division
and floor modulo for integers and floats; integer division by zero yields 0
instead of trapping; casts to bool test `!= 0`; float -> int casts truncate.

This module imports TVM at top level: import it only from backend code.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, Mapping, Optional, Union

import numpy as np
import tvm
import tvm_ffi
from tvm import tirx as tx

from ..diagnostics import TileCompileError, UnsupportedFeatureError
from ..interp.dtypes import scalar
from ..ir import nodes as N
from ..ir.types import bits as dtype_bits
from ..ir.visitor import Dispatcher, walk
from .intrinsics import IntrinsicTable, default_table, dtype_of

BufferView = Union["tvm.tirx.Buffer", Callable]

NARROW_FLOATS = ("float16", "bfloat16")


def tir_const(value, dtype: str):
    """A TIR constant of `dtype` (bool stored as 0/1, inf and nan allowed).

    A float constant holds `value` rounded to `dtype` (ties to even, overflow to inf), as
    in the reference: TVM keeps a FloatImm's value as a double, and its folding of
    `Cast("float32", FloatImm("float16", 0.3))` gave float32(0.3) instead of the float16
    0.300048828125, so a float16 `x * 0.3` on cpu came out float16 ulps off. The
    rounding is the reference's own conversion (`tilecore.interp.dtypes.scalar`)."""
    if dtype == "bool":
        return tx.const(bool(value), "bool")
    if dtype.startswith("float") or dtype == "bfloat16":
        with np.errstate(over="ignore"):
            return tx.const(float(scalar(dtype, value)), dtype)
    return tx.const(int(value), dtype)


def round_to_bfloat16(x32, quiet_nan: bool = False):
    """A float32 value rounded to the nearest bfloat16 (ties to even), still as float32.

    TVM computes bfloat16 in float32 and rounds only when storing to a bfloat16
    buffer, so an intermediate `T.cast(x, "bfloat16")` that is widened again would
    silently keep float32 precision. `x32` appears three times in the result: use
    it on small expressions only (see ExprLowerer._lower_Cast).
    """
    u = tx.reinterpret("uint32", x32)
    bias = tx.const(0x7FFF, "uint32") + tx.bitwise_and(tx.shift_right(u, tx.const(16, "uint32")), tx.const(1, "uint32"))
    rounded = tx.bitwise_and(u + bias, tx.const(0xFFFF0000, "uint32"))
    if quiet_nan:  # NaN as a bfloat16 NaN (its low bits cleared, quiet), which a later rounding keeps
        nan = tx.bitwise_and(tx.bitwise_or(u, tx.const(0x00400000, "uint32")), tx.const(0xFFFF0000, "uint32"))
        return tx.reinterpret("float32", tx.Select(tx.isnan(x32), nan, rounded))
    return tx.Select(tx.isnan(x32), x32, tx.reinterpret("float32", rounded))


def bfloat16_bits_as_float32(value):
    """A bfloat16 value read from memory as the float32 it denotes (exact: its 16 bits shifted up)."""
    bits = tx.Cast("uint32", tx.reinterpret("uint16", value))
    return tx.reinterpret("float32", tx.shift_left(bits, tx.const(16, "uint32")))


def float32_as_bfloat16_bits(x32):
    """A float32 that holds a bfloat16 value exactly, as that bfloat16 (its top 16 bits).

    Storing it this way keeps TVM from rounding `x32` again, which repeats it."""
    top = tx.shift_right(tx.reinterpret("uint32", x32), tx.const(16, "uint32"))
    return tx.reinterpret("bfloat16", tx.Cast("uint16", top))


def float32_round_to_odd(x64):
    """A float64 value rounded to float32 *to odd* (truncated, low bit set when inexact).

    Rounding that to bfloat16 (or float16) is then one correct rounding of the
    float64 value; converting through float32 directly rounds twice and is one
    ulp off when the first rounding lands on a tie of the second.
    """
    v = tx.Var("x64", "float64")
    f = tx.Cast("float32", v)
    back = tx.Cast("float64", f)
    bits = tx.reinterpret("uint32", f)
    inexact = tx.NE(back, v)
    toward_zero = tx.Select(tx.And(inexact, tx.abs(back) > tx.abs(v)), bits - tx.const(1, "uint32"), bits)
    odd = tx.Select(inexact, tx.bitwise_or(toward_zero, tx.const(1, "uint32")), toward_zero)
    return tx.Let(v, x64, tx.Select(tx.isnan(v), f, tx.reinterpret("float32", odd)))


def cast_to(expr, dtype: str):
    """Convert a PrimExpr to `dtype` with Tile IR semantics (bool means != 0)."""
    src = dtype_of(expr)
    if src == dtype:
        return expr
    if dtype == "bool":
        if is_float_dtype(src):  # NaN is nonzero: true (an ordered != would say false)
            wide = tx.Cast("float32", expr) if src in NARROW_FLOATS else expr  # TVM has no narrow isnan
            return tx.Or(tx.NE(expr, tir_const(0, src)), tx.isnan(wide))
        return tx.NE(expr, tir_const(0, src))
    if src in NARROW_FLOATS and dtype not in ("float32", "float64"):
        # float16/bfloat16 -> int or the other narrow float: go through float32
        expr = tx.Cast("float32", expr)
    if src == "float64" and dtype == "bfloat16":
        expr = float32_round_to_odd(expr)
    if src == "int64" and dtype in _I64_NARROWING:
        # int64 -> narrower int wraps. A plain Cast of a value that TVM folds to a constant out of
        # the dtype's range (after binding a 1-block grid's index, say) aborts in its IntImm check
        # ("Literal value 2147515648 exceeds range of int32"): wrap in int64 first, so the Cast
        # always fits (a mask LLVM folds back into the truncation)
        if isinstance(expr, tx.IntImm):
            return tir_const(int(scalar(dtype, np.int64(expr.value))), dtype)
        return wrap_to(expr, dtype)
    return tx.Cast(dtype, expr)


_I64_NARROWING = ("int8", "int16", "int32", "uint8", "uint16", "uint32")


# Integer + - * << wrap (two's complement), as the language defines. They are computed
# exactly in a wider signed type (`_WRAP_WIDE`: no overflow there, so TVM marking signed
# arithmetic `nsw` is true) and wrapped to the dtype with a mask, which TVM's bound analysis
# follows soundly; LLVM narrows the arithmetic back to the dtype's width.
# Why not plain arithmetic: with `nsw` LLVM folds e.g. min(a + a, 100) or not (b + a > b)
# as if the sum could not wrap. Why not an unsigned type and a cast back (the earlier way):
# TVM's bound analysis treats unsigned arithmetic as unbounded integers and a cast as
# preserving the value, so it folded uint32(0) - uint32(b) to 0 and `-b < 0` to false.
# int8/int16/uint8/uint16 always wrap this way. int32 is also the index type, whose
# analysis (vectorization, bounds) must keep seeing plain arithmetic: it wraps only where
# an operand depends on memory (`ExprLowerer.reads_memory`), never in index arithmetic of
# loop variables (cpu folded `not (B + A > B)` for int32 data, conformance seed 5151
# program 163). int64 data wraps the same way, in int128 (`wrapping_int64`).
_WRAP_WIDE = {"int8": "int32", "int16": "int32", "uint8": "int32", "uint16": "int64"}
_WRAP_WIDE_DATA = {**_WRAP_WIDE, "int32": "int64", "int64": "int128"}
_WRAPPING_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "<<": tx.shift_left}


def wrap_to(value, dtype: str):
    """The low bits of the wider integer `value` as the integer `dtype` (two's complement),
    written as a mask that TVM's bound analysis follows (see _WRAP_WIDE)."""
    n, wide = dtype_bits(dtype), dtype_of(value)
    low = tx.bitwise_and  # (v + 2^(n-1)) mod 2^n - 2^(n-1) for a signed dtype, v mod 2^n otherwise
    if dtype.startswith("uint"):
        return tx.Cast(dtype, low(value, tx.const((1 << n) - 1, wide)))
    half = tx.const(1 << (n - 1), wide)
    return tx.Cast(dtype, low(value + half, tx.const((1 << n) - 1, wide)) - half)


def wrapping_arith(op: str, a, b, dtype: str, int64_via: str = "int128"):
    """a op b (op in + - * <<) for an integer `dtype` of _WRAP_WIDE_DATA, wrapping to the dtype's bits
    (int64: see wrapping_int64)."""
    if dtype == "int64":
        return wrapping_int64(op, a, b, int64_via)
    wide = _WRAP_WIDE_DATA[dtype]
    return wrap_to(_WRAPPING_OPS[op](tx.Cast(wide, a), tx.Cast(wide, b)), dtype)


# int64 + - * << wrap through one of two types (`ExprLowerer.int64_wrap_via`):
# * "int128" (the default; LLVM codegens must use it): computed exactly in int128 (no overflow
#   there: TVM's `nsw` is true) and truncated to int64; LLVM narrows it back to one 64-bit
#   operation. uint64 does not work with LLVM: TVM marks unsigned arithmetic of 32 bits and more
#   `nuw`, so a wrapping uint64 sum is poison too (it dropped the else-branch update of an int64
#   accumulator under a run-time if). The truncation sits between two XORs with a constant,
#   which TVM's bound analysis does not follow: a truncated value's bound would otherwise be
#   taken from the int128 value (e.g. B + 1 >= 1 for B >= 0, false for B = 2^63 - 1).
# * "uint64", for codegens that emit C source (CUDA, Metal; `TargetDescription.int64_wrap_via`):
#   the int64 bit patterns reinterpreted as uint64, whose arithmetic wraps in C (TVM's simplifier
#   narrows the int128 form back to signed int64 arithmetic, undefined on overflow in C, and
#   Metal has no 128-bit integers); the reinterpretation hides the values from TVM's bound
#   analysis (its unsigned rules assume no wrap-around).
INT64_WRAP_VIA = ("int128", "uint64")


def wrapping_int64(op: str, a, b, via: str = "int128"):
    """int64 a op b (op in + - * <<) wrapping to 64 bits (two's complement), computed in `via`."""
    if via not in INT64_WRAP_VIA:
        raise ValueError(f"int64_wrap_via must be one of {INT64_WRAP_VIA}, not {via!r}")
    if via == "uint64":
        return tx.reinterpret("int64", _WRAPPING_OPS[op](_uint64_bits(a), _uint64_bits(b)))
    exact = _WRAPPING_OPS[op](tx.Cast("int128", a), tx.Cast("int128", b))
    flip = 1  # any constant: x ^ flip ^ flip == x
    truncated = tx.Cast("int64", tx.bitwise_xor(exact, tx.const(flip, "int128")))
    return tx.bitwise_xor(truncated, tx.const(flip, "int64"))


def _uint64_bits(v):
    """An int64 PrimExpr's bits as uint64 (a constant directly: TVM's LLVM codegen takes a
    reinterpreted constant 0 for a null pointer)."""
    if isinstance(v, tx.IntImm):
        return tx.const(int(v.value) % (1 << 64), "uint64")
    return tx.reinterpret("uint64", v)


def wrapping_not(a, dtype: str):
    """~a for an integer `dtype`, its bits complemented within the dtype: C-source codegens
    promote narrow operands to int, so a uint8 `~a` converted to float16 gave -1 - a
    instead of 255 - a."""
    if dtype not in _WRAP_WIDE or dtype.startswith("int"):
        return tx.bitwise_not(a)  # -a - 1 stays within a signed dtype
    return wrap_to(tx.bitwise_not(tx.Cast(_WRAP_WIDE[dtype], a)), dtype)


def has_negated_var(expr) -> bool:
    """Whether a variable enters the integer `expr` with a negative sign (through -, or a product
    with a negative constant), as in `31 - i`."""

    def walk_signed(e, negative: bool) -> bool:
        if isinstance(e, tx.Var):
            return negative
        if isinstance(e, tx.Add):
            return walk_signed(e.a, negative) or walk_signed(e.b, negative)
        if isinstance(e, tx.Sub):
            return walk_signed(e.a, negative) or walk_signed(e.b, not negative)
        if isinstance(e, tx.Mul):
            for x, k in ((e.a, e.b), (e.b, e.a)):
                if isinstance(k, tx.IntImm):
                    return walk_signed(x, negative != (k.value < 0))
        if isinstance(e, (tx.IntImm, tx.FloatImm)):
            return False
        # anything else (a load, a division, a call): look for negation inside, keep the sign
        return any(walk_signed(c, negative) for c in _sub_expressions(e))

    return walk_signed(expr, False)


def _sub_expressions(e) -> list:
    """The expression operands of a TIR expression node (none for leaves)."""
    found = []
    fields = ("a", "b", "value", "condition", "true_value", "false_value", "body", "args", "indices", "base", "stride")
    for field in fields:
        x = getattr(e, field, None)
        for item in x if isinstance(x, (list, tuple, tvm_ffi.Array)) else [x]:
            if isinstance(item, tvm.ir.Expr):
                found.append(item)
    return found


def hide_from_iter_map(value, body_fn):
    """`body_fn(v)` with `v` let-bound to `value`. TVM's iter-map simplification (FlattenBuffer runs
    it on every buffer index) treats a let variable as a symbol, not as a loop or thread iterator:
    it rewrote floordiv(c - t, d) for an iterator t as floordiv(t, -d) + c // d, wrong where c is
    not a multiple of d (apache-tvm 0.27; `(31 - i) // 2` became `i // -2 + 15`)."""
    v = tx.Var("neg_index", dtype_of(value))
    return tx.Let(v, value, body_fn(v))


def is_float_dtype(dtype: str) -> bool:
    return dtype.startswith("float") or dtype == "bfloat16"


def nan_max(a, b):
    """max(a, b) where a NaN operand gives NaN (numpy `maximum`, the language's semantics).

    Plain `Max` lowers to maxps/fmaxf, which drop NaN. `a + b` is NaN exactly when
    one operand is; one unordered compare, a max and a blend stay vectorized.
    """
    return _nan_propagating(tx.Max, a, b)


def nan_min(a, b):
    """min(a, b) where a NaN operand gives NaN (numpy `minimum`); see nan_max."""
    return _nan_propagating(tx.Min, a, b)


def _nan_propagating(op, a, b):
    # a and b appear twice: callers pass operands that are cheap and pure to repeat
    # (the SIMT lowering binds a warp shuffle to a variable first)
    if not is_float_dtype(dtype_of(a)):
        return op(a, b)
    return tx.Select(tx.Or(tx.isnan(a), tx.isnan(b)), a + b, op(a, b))


def _opaque_negative_zero(dtype: str):
    """-0.0 as a bit pattern TVM's constant folder cannot see (it folds float `x * 0`
    to 0, which is wrong for inf and NaN). LLVM still sees a constant, and without
    fast-math flags keeps the IEEE `fmul x, -0.0`. (+0.0 would be the bit pattern 0,
    which TVM's codegen reserves for null pointers.)"""
    width = 16 if dtype == "bfloat16" else int(dtype[len("float") :])
    return tx.reinterpret(dtype, tx.const(1 << (width - 1), f"uint{width}"))


def _zero_constant(x) -> Optional[float]:
    """The value of `x` when it is a float constant zero (possibly under a cast), else None."""
    while isinstance(x, tx.Cast):
        x = x.value
    if isinstance(x, tx.FloatImm) and x.value == 0.0:
        return x.value
    return None


def ieee_mul(a, b):
    """`a * b` with IEEE semantics: a constant zero factor is not folded away (inf * 0 is NaN)."""
    dtype = dtype_of(a)
    if not is_float_dtype(dtype):
        return a * b
    zero_a, zero_b = _zero_constant(a), _zero_constant(b)
    if zero_a is None and zero_b is None:
        return tx.Mul(a, b)
    if zero_b is not None:
        x, zero = a, zero_b
    else:
        x, zero = b, zero_a if zero_a is not None else 0.0  # one of them is a zero constant
    product = tx.Mul(x, _opaque_negative_zero(dtype))  # x * -0.0
    if math.copysign(1.0, zero) > 0:
        product = tx.Mul(product, tir_const(-1.0, dtype))  # x * +0.0 == -(x * -0.0), exactly
    return product


def ieee_add_sub(op: str, a, b):
    """`a + b` or `a - b` (op "+" / "-") for floats, out of reach of TVM's folds that IEEE values
    contradict. Its constant folding turns x + 0.0 and x - (-0.0) into x (wrong for x = -0.0:
    the sum is +0.0), and its simplifier applies cancellations to floats on purpose ("models
    should not encounter NaN"): x - x -> 0, (x + y) - y -> x, x - (x + y) -> -y and
    select(c, y, z) - z -> select(c, y - z, 0), wrong for infinities, NaN and rounding."""
    dtype = dtype_of(a)
    zero_a, zero_b = _zero_constant(a), _zero_constant(b)
    if zero_b is not None and (op == "+") == (math.copysign(1.0, zero_b) > 0):
        return tx.Sub(a, _opaque_negative_zero(dtype))  # x + 0.0 == x - (-0.0), exactly
    if op == "+" and zero_a is not None and math.copysign(1.0, zero_a) > 0:
        return tx.Sub(b, _opaque_negative_zero(dtype))
    if op == "-" and zero_b is None and _shares_an_operand(a, b):
        b = _opaque_float(b)
    return tx.Add(a, b) if op == "+" else tx.Sub(a, b)


def float_compare(op: str, a, b):
    """A comparison of two floats with IEEE semantics: every comparison with NaN is false except
    `!=`, which TVM's LLVM codegen emits ordered (NaN != x false) and so gets an explicit NaN
    test; and x == x is not folded to true (TVM's simplifier does so for floats)."""
    if _zero_constant(b) is None and tvm_ffi.structural_equal(a, b):
        b = _opaque_float(b)
    compare = {"<": tx.LT, "<=": tx.LE, ">": tx.GT, ">=": tx.GE, "==": tx.EQ, "!=": tx.NE}[op](a, b)
    if op != "!=":
        return compare
    nan_a, nan_b = (tx.isnan(tx.Cast("float32", v) if dtype_of(v) in NARROW_FLOATS else v) for v in (a, b))
    return tx.Or(compare, tx.Or(nan_a, nan_b))


def _operands(e) -> tuple:
    """The operands of an Add, Sub or Select that TVM's cancellation rules look at."""
    if isinstance(e, (tx.Add, tx.Sub)):
        return (e.a, e.b)
    if isinstance(e, tx.Select):
        return (e.true_value, e.false_value)
    return ()


def _shares_an_operand(a, b) -> bool:
    """Whether `a` and `b` are equal, or one equals an operand of the other (see ieee_add_sub)."""
    same = tvm_ffi.structural_equal
    return same(a, b) or any(same(b, x) for x in _operands(a)) or any(same(a, x) for x in _operands(b))


def _opaque_float(x):
    """The float `x` through its bits and back: the same value, which TVM's simplifier cannot
    match against `x` (nonzero constants only: see _opaque_negative_zero)."""
    dtype = dtype_of(x)
    width = 16 if dtype == "bfloat16" else int(dtype[len("float") :])
    return tx.reinterpret(dtype, tx.reinterpret(f"uint{width}", x))


def involves_bfloat16(let: N.Let) -> bool:
    """Whether a Let's name or any node of its value is bfloat16 (TVM's bfloat16
    legalization does not rewrite a bound value: backends hold such names in a buffer)."""
    from ..ir.visitor import walk

    return let.var.dtype == "bfloat16" or any(getattr(n, "dtype", None) == "bfloat16" for n in walk(let.value))


def has_load(expr: N.Expr) -> bool:
    """Whether evaluating `expr` reads memory (so it must not be speculated)."""
    from ..ir.visitor import walk

    return any(isinstance(n, N.Load) for n in walk(expr))


class ExprLowerer(Dispatcher):
    """Lower Tile IR expressions for one function (see the module docstring)."""

    def __init__(
        self,
        buffers: Optional[Mapping[str, BufferView]] = None,
        variables: Optional[Mapping[str, object]] = None,
        intrinsics: Optional[IntrinsicTable] = None,
        backend: str = "tvm",
        source: str = "",
        narrow_float_via_float32: bool = True,
    ):
        self.buffers: Dict[str, BufferView] = dict(buffers or {})
        self.variables: Dict[str, object] = dict(variables or {})
        self.intrinsics = intrinsics if intrinsics is not None else default_table()
        self.backend = backend
        self.source = source
        self.narrow_float_via_float32 = narrow_float_via_float32
        self.held_bfloat16: set = set()
        self.guards: list = []  # (condition, branch taken when it is true) around the expression being lowered
        self._exact: Dict[int, object] = {}  # id -> PrimExpr known to hold a bfloat16 value
        self.memory_names: set = set()  # names bound to values that depend on memory (see reads_memory)

    # A backend whose TVM pipeline legalizes bfloat16 sets this. TVM's BF16ComputeLegalize
    # turns every cast to bfloat16 into a cast to float32 (so no intermediate result is ever
    # rounded) and leaves `Let`/`Bind` values alone. With it set, an expression of dtype
    # bfloat16 lowers to a float32 PrimExpr holding the exactly rounded value (rounded with
    # integer operations), bfloat16 memory is read by its bits, and no bfloat16-typed node
    # is left inside an expression. `held_bfloat16` names the buffers whose float32
    # elements are such exact values.
    bfloat16_as_float32 = False
    # How int64 data arithmetic wraps: "int128" or "uint64" (see INT64_WRAP_VIA).
    int64_wrap_via = "int128"
    # `hold(x32) -> PrimExpr`, set by a statement lowering: computes x32 once, before the
    # current statement, and returns its reading. The rounding repeats its operand, so
    # without it a chain of roundings grows exponentially; a `Let` does not help (TVM's
    # codegen analyzer substitutes each let-bound value into the next).
    hold: Optional[Callable[[Any], Any]] = None
    # A backend whose TVM pipeline keeps bfloat16 arithmetic in float32 and drops casts to
    # bfloat16 inside expressions (TargetDescription.bfloat16_computed_in_float32) sets this:
    # every bfloat16 result is then rounded here, with integer operations (`narrow`).
    rounds_bfloat16 = False

    # -- environment
    def bind(self, name: str, value) -> None:
        """Make Tile IR variable `name` lower to `value` from now on."""
        self.variables[name] = value

    def bind_let(self, let: N.Let, value) -> None:
        """Make the name a `Let` binds lower to `value`, noting whether it depends on memory."""
        if self.reads_memory(let.value):
            self.memory_names.add(let.var.name)
        else:
            self.memory_names.discard(let.var.name)
        self.bind(let.var.name, value)

    def nan_minmax(self, op: str, a, b):
        """min or max (`op`) where a NaN operand gives NaN: the target's single instruction when its
        intrinsic table has ("nan_min" / "nan_max", dtype), else the portable select (`nan_max`)."""
        key, dt = "nan_" + op, str(dtype_of(a))
        if self.intrinsics.has(key, dt):
            return self.intrinsics.lower(key, dt, [a, b])
        return (nan_max if op == "max" else nan_min)(a, b)

    def reads_memory(self, e: N.Expr) -> bool:
        """Whether `e` reads a buffer, directly or through a name bound to such a value: data,
        whose int32 arithmetic must wrap, unlike the index arithmetic of loop variables."""
        return any(isinstance(n, N.Load) or (isinstance(n, N.Var) and n.name in self.memory_names) for n in walk(e))

    def bind_buffer(self, name: str, view: BufferView) -> None:
        self.buffers[name] = view

    def load(self, buffer: N.Buffer, indices):
        """Read `buffer[indices]` (indices already lowered)."""
        view = self.buffers.get(buffer.name)
        if view is None:
            raise TileCompileError(f"buffer {buffer.name!r} is not available here", buffer.span, self.source)
        if callable(view) and not isinstance(view, tx.Buffer):
            return view(list(indices))
        return self.read(tx.BufferLoad(view, list(indices)))

    def read(self, load):
        """A load as it enters an expression: bfloat16 memory by its bits (see bfloat16_as_float32)."""
        if self.bfloat16_as_float32 and dtype_of(load) == "bfloat16":
            return bfloat16_bits_as_float32(load)
        return load

    # -- bfloat16 held in float32 (bfloat16_as_float32)
    def is_exact_bfloat16(self, value) -> bool:
        """Whether a float32 `value` is known to hold a bfloat16 value exactly."""
        if isinstance(value, tvm.ir.TensorLoad):
            return value.source.name in self.held_bfloat16
        if self._exact.get(id(value)) is value:
            return True
        # bfloat16_bits_as_float32's form
        return (
            isinstance(value, tvm.ir.Call)
            and value.op.name == "tirx.reinterpret"
            and isinstance(value.args[0], tx.LShift)
        )

    def to_bfloat16(self, value, hold: bool = True):
        """Any lowered value converted to bfloat16, as the float32 holding it exactly.

        With `hold` (and a `hold` hook) the unrounded value is computed once, before the
        statement; otherwise it is repeated, so pass small values only."""
        src = dtype_of(value)
        if src == "bfloat16":
            return self._held_bfloat16(value, hold)
        if src == "float32" and self.is_exact_bfloat16(value):
            return value
        x32 = float32_round_to_odd(value) if src == "float64" else cast_to(value, "float32")
        if hold and self.hold is not None:
            x32 = self.hold(x32)
        rounded = round_to_bfloat16(x32)
        self._exact[id(rounded)] = rounded
        return rounded

    def _held_bfloat16(self, value, hold: bool = True):
        """A bfloat16-typed PrimExpr (a constant, a cast, a load) as its exact float32 value."""
        if isinstance(value, tx.FloatImm):
            return tx.const(float(scalar("bfloat16", value.value)), "float32")
        if isinstance(value, tx.Cast):
            return self.to_bfloat16(value.value, hold)
        if isinstance(value, tvm.ir.TensorLoad):
            return bfloat16_bits_as_float32(value)
        raise TileCompileError(f"internal error: bfloat16 value {value} cannot be held in float32", None, self.source)

    # -- expressions
    def __call__(self, expr: N.Expr):
        return self.lower(expr)

    def lower(self, expr: N.Expr):
        method = self.handler("_lower_", expr)
        if method is None:
            raise UnsupportedFeatureError(
                self.backend, f"expression {type(expr).__name__}", getattr(expr, "span", None), self.source
            )
        value = method(self, expr)
        if self.bfloat16_as_float32 and expr.dtype == "bfloat16" and dtype_of(value) != "float32":
            return self.to_bfloat16(value)
        return value

    def lower_as(self, expr: N.Expr, dtype: str):
        """Lower `expr` and convert the result to `dtype` (bfloat16: see bfloat16_as_float32)."""
        if self.bfloat16_as_float32 and dtype == "bfloat16":
            value = self.lower(expr)
            return value if expr.dtype == "bfloat16" else self.to_bfloat16(value)
        return cast_to(self.float64_operand(self.lower(expr), dtype), dtype)

    def float64_operand(self, value, dtype: str):
        """`value`, held by the `hold` hook when it is a float64 computation about to be rounded
        to bfloat16: that rounding (`float32_round_to_odd`) binds its operand with a `Let`, and
        TVM's bfloat16 legalization (rocm) rewrites no cast to bfloat16 inside a `Let` value
        ("BF16 needs to be storaged lowered first"). Not inside a `T.if_then_else` branch,
        whose reads may only be valid when it is taken."""
        if (
            dtype == "bfloat16"
            and dtype_of(value) == "float64"
            and self.hold is not None
            and not self.bfloat16_as_float32
            and not self._speculative
            and not isinstance(value, (tx.Var, tvm.ir.TensorLoad))
        ):
            return self.hold(value)
        return value

    def narrow(self, value, dtype: str):
        """`value` converted to the result dtype `dtype` of an operation. With `rounds_bfloat16`, a
        bfloat16 result is rounded here (NaN to a bfloat16 NaN: TVM's rounding would turn the
        float32 NaN 0x7FFFFFFF into -0), so the rounding TVM's legalization puts at the cast is
        exact."""
        if self.rounds_bfloat16 and dtype == "bfloat16" and isinstance(value, tx.Cast) and dtype_of(value) == dtype:
            value = value.value  # a bfloat16 cast (an intrinsic's result): the legalization would drop it
        src = dtype_of(value)
        if not (self.rounds_bfloat16 and dtype == "bfloat16" and src != "bfloat16") or "x" in src:
            return cast_to(value, dtype)  # (a vector copy rounds once, at its store)
        x32 = (
            float32_round_to_odd(self.float64_operand(value, dtype)) if src == "float64" else cast_to(value, "float32")
        )
        if self.hold is not None and not self._speculative:
            x32 = self.hold(x32)
        elif not isinstance(x32, (tx.Var, tx.FloatImm, tvm.ir.TensorLoad)):
            return cast_to(value, dtype)  # not repeated thrice unheld (a branch of T.if_then_else)
        return tx.Cast("bfloat16", round_to_bfloat16(x32, quiet_nan=True))

    def value_dtype(self, dtype: str) -> str:
        """The dtype of a lowered value of Tile IR `dtype` (bfloat16 may be held in float32)."""
        return "float32" if self.bfloat16_as_float32 and dtype == "bfloat16" else dtype

    def _lower_Const(self, e: N.Const):
        return tir_const(e.value, e.dtype)

    def _lower_Var(self, e: N.Var):
        v = self.variables.get(e.name)
        if v is None:
            raise TileCompileError(f"variable {e.name!r} is not defined here", e.span, self.source)
        if dtype_of(v) != e.dtype:
            return cast_to(v, e.dtype)
        return v

    # A backend that checks element indices sets `checked_load(node, indices, speculative)`:
    # it returns the guarded load (and records the check); `speculative` is True inside a
    # T.if_then_else branch, which may be evaluated without being taken.
    checked_load: Optional[Callable[..., Any]] = None
    _speculative = 0

    def _lower_Load(self, e: N.Load):
        idx = [self.lower_as(i, dtype_of_index(i)) for i in e.indices]
        if self.checked_load is not None:
            value = self.checked_load(e, idx, self._speculative > 0)
        else:
            value = self.load(e.buffer, idx)
        if self.bfloat16_as_float32 and e.dtype == "bfloat16":
            return value if e.buffer.dtype == "bfloat16" else self.to_bfloat16(value)
        return cast_to(value, e.dtype)

    def _lower_Cast(self, e: N.Cast):
        value = self.float64_operand(self.lower(e.value), e.dtype)
        if self.bfloat16_as_float32 and e.dtype == "bfloat16":
            return value if e.value.dtype == "bfloat16" else self.to_bfloat16(value)
        if e.dtype == "bfloat16" and dtype_of(value) != "bfloat16" and _small(e.value):
            # an explicit cast rounds even if the value is widened again (see round_to_bfloat16)
            x32 = (
                value
                if dtype_of(value) == "float32"
                else float32_round_to_odd(value)
                if dtype_of(value) == "float64"
                else tx.Cast("float32", value)
            )
            return tx.Cast("bfloat16", round_to_bfloat16(x32))
        return cast_to(value, e.dtype)

    def _lower_Select(self, e: N.Select):
        cond = self.lower_as(e.cond, "bool")
        self._speculative += 1
        try:
            a = self._lower_branch(e.a, e.dtype, cond, True)
            b = self._lower_branch(e.b, e.dtype, cond, False)
        finally:
            self._speculative -= 1
        if has_load(e.a) or has_load(e.b):
            # a branch that reads memory may be out of bounds when not taken
            return tx.if_then_else(cond, a, b)
        return tx.Select(cond, a, b)

    def _lower_branch(self, branch: N.Expr, dtype: str, cond, when: bool):
        """A T.if_then_else branch, taken when `cond` is `when`; what it holds (see `hold`) is
        computed only then if the branch reads memory (which may be out of bounds otherwise)."""
        guarded = has_load(branch)
        if guarded:
            self.guards.append((cond, when))
        try:
            return self.lower_as(branch, dtype)
        finally:
            if guarded:
                self.guards.pop()

    def _lower_UnaryOp(self, e: N.UnaryOp):
        if e.op == "not":
            return tx.Not(self.lower_as(e.a, "bool"))
        wide = self._compute_dtype(e.dtype)
        a = self.lower_as(e.a, wide)
        if e.op == "neg" and is_float_dtype(wide):
            r = tx.Mul(a, tir_const(-1.0, wide))  # exact, and -(+0.0) is -0.0 (0.0 - x would give +0.0)
        elif e.op == "neg":
            r = self.arith("-", tir_const(0, wide), a, wide, e) if wide != "bool" else a
        elif e.op == "~":
            r = tx.Not(a) if wide == "bool" else wrapping_not(a, wide)
        else:
            raise UnsupportedFeatureError(self.backend, f"unary operator {e.op}", e.span, self.source)
        return self.narrow(r, e.dtype)

    def _lower_Call(self, e: N.Call):
        wide = e.dtype
        args = [self.lower_as(a, wide) for a in e.args]
        if not self.intrinsics.has(e.func, e.dtype):
            raise UnsupportedFeatureError(self.backend, f"T.{e.func} on {e.dtype}", e.span, self.source)
        return self._narrow_result(self.intrinsics.lower(e.func, e.dtype, args), e.dtype)

    def _narrow_result(self, value, dtype: str):
        """An intrinsic's result of `dtype`; held bfloat16 is rounded even if the builder returned float32."""
        if self.bfloat16_as_float32 and dtype == "bfloat16":
            return self.to_bfloat16(value)
        return self.narrow(value, dtype) if self.rounds_bfloat16 and dtype == "bfloat16" else value

    def _compute_dtype(self, dtype: str) -> str:
        if self.narrow_float_via_float32 and dtype in NARROW_FLOATS:
            return "float32"
        return dtype

    def _lower_BinOp(self, e: N.BinOp):
        op = e.op
        if op in N.LOGIC_OPS:
            a, b = self.lower_as(e.a, "bool"), self.lower_as(e.b, "bool")
            return tx.And(a, b) if op == "and" else tx.Or(a, b)
        if op in N.COMPARE_OPS:
            # operands are compared in their common dtype (the frontend promoted them)
            common = _common_dtype(e.a.dtype, e.b.dtype)
            if common == "bool":
                common = "int8"  # TVM's LLVM codegen has no comparison of i1 values
            held = self.value_dtype(common)
            a = self.lower_as(e.a, common) if e.a.dtype != "bool" else tx.Cast(held, self.lower(e.a))
            b = self.lower_as(e.b, common) if e.b.dtype != "bool" else tx.Cast(held, self.lower(e.b))
            if is_float_dtype(held):
                return float_compare(op, a, b)
            return {"<": tx.LT, "<=": tx.LE, ">": tx.GT, ">=": tx.GE, "==": tx.EQ, "!=": tx.NE}[op](a, b)
        if op == "pow":
            return self._lower_pow(e)
        wide = self._compute_dtype(e.dtype)
        a, b = self.lower_as(e.a, wide), self.lower_as(e.b, wide)
        return self.narrow(self.arith(op, a, b, wide, e), e.dtype)

    def arith(self, op: str, a, b, dtype: str, node: Optional[N.Expr] = None):
        """`a op b` for two PrimExprs of `dtype` with Tile IR semantics."""
        is_float = dtype.startswith("float") or dtype == "bfloat16"
        if dtype == "bool" and op == "^":
            # TVM's LLVM codegen compares i1 values as floats (invalid IR): compare as int8
            return tx.NE(tx.Cast("int8", a), tx.Cast("int8", b))
        if dtype == "bool" and op in ("&", "|", "+", "*", "min", "max"):
            return {"&": tx.And, "*": tx.And, "min": tx.And, "|": tx.Or, "+": tx.Or, "max": tx.Or}[op](a, b)
        if op in _WRAPPING_OPS and (
            dtype in _WRAP_WIDE or (dtype in _WRAP_WIDE_DATA and node is not None and self.reads_memory(node))
        ):
            return wrapping_arith(op, a, b, dtype, self.int64_wrap_via)
        if op in ("+", "-"):
            return ieee_add_sub(op, a, b) if is_float else (a + b if op == "+" else a - b)
        if op == "*":
            return ieee_mul(a, b) if is_float else a * b
        if op in ("min", "max"):
            return self.nan_minmax(op, a, b)
        if op == "/":
            if is_float:
                return tx.Div(a, b)
            # the IR's integer `/` is C division, truncating toward zero (docs/semantics.md); the
            # frontend never writes it, but IR from a pass or a plugin may
            return self._int_div(a, b, dtype, tx.truncdiv)
        if op == "//":
            if is_float:
                return tx.floor(tx.Div(a, b))
            return self._int_div(a, b, dtype, tx.floordiv)
        if op == "%":
            if is_float:
                return a - tx.floor(tx.Div(a, b)) * b
            return self._int_div(a, b, dtype, tx.floormod)
        if not is_float:
            if op == "&":
                return tx.bitwise_and(a, b)
            if op == "|":
                return tx.bitwise_or(a, b)
            if op == "^":
                return tx.bitwise_xor(a, b)
            if op == "<<":
                return tx.shift_left(a, b)
            if op == ">>":
                return tx.shift_right(a, b)
        raise UnsupportedFeatureError(
            self.backend, f"operator {op} on {dtype}", getattr(node, "span", None), self.source
        )

    @staticmethod
    def _int_div(a, b, dtype, fn):
        if isinstance(b, tx.IntImm):
            if b.value == 0:
                return tir_const(0, dtype)
            if fn in (tx.floordiv, tx.floormod) and has_negated_var(a):
                return hide_from_iter_map(a, lambda v: fn(v, b))
            return fn(a, b)
        # integer division by zero gives 0 (numpy's answer) instead of a SIGFPE
        zero, one = tir_const(0, dtype), tir_const(1, dtype)
        safe = tx.Select(tx.EQ(b, zero), one, b)
        return tx.Select(tx.EQ(b, zero), zero, fn(a, safe))

    def _lower_pow(self, e: N.BinOp):
        if e.dtype.startswith("float") or e.dtype == "bfloat16":
            if not self.intrinsics.has("pow", e.dtype):
                raise UnsupportedFeatureError(self.backend, f"T.pow on {e.dtype}", e.span, self.source)
            return self._narrow_result(
                self.intrinsics.lower("pow", e.dtype, [self.lower_as(e.a, e.dtype), self.lower_as(e.b, e.dtype)]),
                e.dtype,
            )
        # exact integer power: only for a constant non-negative exponent
        if isinstance(e.b, N.Const) and int(e.b.value) >= 0:
            base = self.lower_as(e.a, e.dtype)
            result = tir_const(1, e.dtype)
            for _ in range(int(e.b.value)):
                result = self.arith("*", result, base, e.dtype, e)  # wraps like any product
            return result
        raise UnsupportedFeatureError(self.backend, "integer ** with a run-time exponent", e.span, self.source)


def _small(expr: N.Expr, limit: int = 24) -> bool:
    """Whether `expr` has at most `limit` expression nodes (safe to repeat when lowered)."""
    from ..ir.visitor import walk

    count = 0
    for node in walk(expr):
        if isinstance(node, N.Expr):
            count += 1
            if count > limit:
                return False
    return True


def dtype_of_index(expr: N.Expr) -> str:
    """Indices are lowered in their own integer dtype (int32 unless the IR says int64)."""
    return expr.dtype if expr.dtype in ("int32", "int64") else "int32"


def _common_dtype(a: str, b: str) -> str:
    from ..ir.types import promote

    return promote(a, b)
