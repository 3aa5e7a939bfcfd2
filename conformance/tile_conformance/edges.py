"""Input values where backends differ: edge classes per dtype, and directed sweeps of math functions.

A program parameter names an *edge class* (`Param.edges`); `fill` makes its
array from the program's input seed. Half of the elements (all of them for
sweeps) come from the class's pool, the rest from the parameter's ordinary
range, so both the edge cases and ordinary neighbours meet the same code.

Classes:
  special         floats: NaN, +-inf, +-0, subnormals, the smallest normal, the largest finite
                  values, and magnitudes spread over the whole exponent range
  nan             floats: NaN and +-inf among ordinary values (sums, scans)
  ties:D          exact rounding ties of float dtype D (midpoints of neighbours, in the normal and
                  subnormal ranges and at the overflow threshold), their neighbours one ulp of the
                  source away, and (float64 -> bfloat16) values that a double rounding through float32
                  gets wrong
  fraction:D      floats with fractional parts (exact halves, negatives, -0.0) inside integer dtype
                  D's range, for float -> int conversions (truncation toward zero)
  limits          integers at and across every narrower integer dtype's limits, and over the full
                  range of their own dtype (wrapping arithmetic, narrowing conversions)
  divisor         nonzero integers other than -1 (run-time operands of // and %)
  shift:B         shift amounts 0 .. B-1
  intfloat        integer-valued floats in [-8, 8] (sums of them are exact in any order)
  bool            True / False
  fp8:D           floats about to be rounded into fp8 dtype D: D's ties and their neighbours, the
                  overflow region (D's largest finite value up to past the threshold where it becomes
                  NaN or inf), halves of D's smallest subnormal, NaN, +-inf, +-0
  (int4)          an int4 tensor is passed packed two per int8 byte: every byte value at random
                  (so every int4 value, -8 and 7 included, in both nibbles), whatever the class
  fp8bits[:I]     every bit pattern of an fp8 dtype (NaN payloads, both zeros, subnormals, e5m2's
                  infinities); with an integer dtype I only the finite values inside I's range
  math:F          a directed sweep of function F's domain for the parameter's dtype: the region
                  around 0, the range-reduction region, the overflow and underflow regions, tiny
                  arguments and the special values (see SWEEPS)
"""

from __future__ import annotations

import math
from typing import Tuple

import numpy as np

from tilecore.ir.types import is_float, is_fp8, is_int4, storage_of

FLOAT_INFO = {  # mantissa bits, minimum normal exponent, largest finite value
    "float16": (10, -14, 65504.0),
    "bfloat16": (7, -126, 3.3895313892515355e38),
    "float32": (23, -126, 3.4028234663852886e38),
    "float64": (52, -1022, 1.7976931348623157e308),
    "float8_e4m3fn": (3, -6, 448.0),
    "float8_e5m2": (2, -14, 57344.0),
}
INT_RANGES = {
    "int8": (-128, 127),
    "uint8": (0, 255),
    "int16": (-32768, 32767),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "bool": (0, 1),
}


def np_dtype(dtype: str):
    if dtype == "bfloat16" or is_fp8(dtype):
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, dtype))
    if dtype == "bool":
        return np.dtype(bool)
    return np.dtype(dtype)


def ulp(x: np.ndarray, dtype: str) -> np.ndarray:
    """The spacing of `dtype`'s floats at |x| (the subnormal spacing below the smallest normal)."""
    p, emin, _ = FLOAT_INFO[dtype]
    _, e = np.frexp(np.abs(np.asarray(x, dtype=np.float64)))
    return np.ldexp(1.0, np.maximum(e - 1, emin) - p)


# ----------------------------------------------------------------------------- float pools


def _special(rng, n: int, dtype: str) -> np.ndarray:
    p, emin, vmax = FLOAT_INFO[dtype]
    tiny = 2.0**emin
    sub = 2.0 ** (emin - p)
    fixed = np.array(
        [np.nan, np.inf, -np.inf, 0.0, -0.0, sub, -sub, tiny, -tiny, tiny - sub, vmax, -vmax, 1.0, -1.0, 0.5, -2.0]
    )
    logmag = rng.uniform(math.log2(sub), math.log2(vmax), n)
    spread = np.ldexp(rng.uniform(0.5, 1.0, n), np.floor(logmag).astype(int)) * rng.choice([-1.0, 1.0], n)
    return np.where(rng.random(n) < 0.5, rng.choice(fixed, n), spread)


def _nan(rng, n: int, dtype: str, lo: float, hi: float) -> np.ndarray:
    return rng.choice(np.array([np.nan, np.inf, -np.inf, np.nan]), n)


def ties(rng, n: int, src: str, dst: str) -> np.ndarray:
    """Values of `src` that are exact ties (and near-ties) when rounded to the narrower float `dst`."""
    p, emin, vmax = FLOAT_INFO[dst]
    ps, emins, vmaxs = FLOAT_INFO[src]
    top = int(math.log2(min(vmax, vmaxs)))
    exps = np.where(rng.random(n) < 0.5, rng.integers(-4, min(20, top) + 1, n), rng.integers(emin - 1, top + 1, n))
    mant = rng.integers(0, 2**p, n).astype(np.float64)
    # a representable dst value v = (1 + m / 2^p) * 2^e and the midpoint to its upper neighbour
    base = np.ldexp(1.0 + mant / 2.0**p, np.maximum(exps, emin))
    sub = exps < emin  # the subnormal range of dst: spacing 2^(emin - p)
    base = np.where(sub, np.ldexp(mant, emin - p), base)
    half = np.where(sub, 2.0 ** (emin - p - 1), np.ldexp(1.0, np.maximum(exps, emin) - p - 1))
    mid = base + half
    src_ulp = ulp(mid, src)
    kind = rng.integers(0, 4, n)
    val = np.where(kind == 1, mid + src_ulp, np.where(kind == 2, mid - src_ulp, mid))
    if src == "float64" and dst == "bfloat16":
        # just above a bfloat16 tie by less than half a float32 ulp: rounding through float32 lands on
        # the tie and then goes to even, one correct rounding goes up
        val = np.where(kind == 3, mid + ulp(mid, "float32") / 4, val)
    if vmax < vmaxs:
        # the overflow threshold: halfway between dst's largest finite value and the next power of two
        thr = vmax + 2.0 ** (math.floor(math.log2(vmax)) - p - 1)
        val = np.where(rng.random(n) < 0.05, thr, val)
    return val * rng.choice([-1.0, 1.0], n)


def _fp8_edges(rng, n: int, src: str, dst: str) -> np.ndarray:
    """Values of `src` (float64 here) where rounding into fp8 `dst` can go wrong (class fp8:D)."""
    p, emin, vmax = FLOAT_INFO[dst]
    thr = vmax + 2.0 ** (math.floor(math.log2(vmax)) - p - 1)  # from here on: NaN (e4m3fn) or inf
    step = 2.0 ** (emin - p - 1)  # half the smallest subnormal
    region = rng.integers(0, 4, n)
    overflow = np.where(
        rng.random(n) < 0.5,
        rng.uniform(0.9 * vmax, 1.2 * thr, n),
        thr + ulp(np.asarray(thr), src) * rng.integers(-1, 2, n),
    )
    tiny = rng.integers(0, 5, n) * step + ulp(np.asarray(step), src) * rng.integers(-1, 2, n)
    special = rng.choice(np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30]), n)
    val = np.where(
        region == 0, ties(rng, n, src, dst), np.where(region == 1, overflow, np.where(region == 2, tiny, special))
    )
    return val * np.where(region == 3, 1.0, rng.choice([-1.0, 1.0], n))


def _fp8_bits(rng, shape, dtype: str, within: str) -> np.ndarray:
    """Every fp8 bit pattern at random (class fp8bits); `within` an int dtype: finite values in its range."""
    out = rng.integers(0, 256, shape, dtype=np.uint8).view(np_dtype(dtype))
    if within:
        lo, hi = INT_RANGES[within]
        v = out.astype(np.float64)
        out = np.where(np.isfinite(v) & (v > lo - 1) & (v < hi + 1), out, np.array(0.5, dtype=out.dtype))
    return out


def _fraction(rng, n: int, dst: str) -> np.ndarray:
    lo, hi = INT_RANGES[dst]
    lo, hi = max(lo, -(2**40)), min(hi, 2**40)
    whole = np.where(rng.random(n) < 0.5, rng.integers(-3, 4, n), rng.integers(lo, hi + 1, n, dtype=np.int64)).astype(
        np.float64
    )
    frac = rng.choice(np.array([0.5, 0.25, 0.75, 0.0, 0.999, 0.001]), n)
    val = whole + np.where(whole < 0, -frac, frac)
    val = np.clip(val, lo - 0.5 if lo < 0 else 0.0, hi + 0.5)
    val = np.where(rng.random(n) < 0.05, -0.0, val)
    return np.where(rng.random(n) < 0.05, np.where(rng.random(n) < 0.5, lo - 0.5, hi + 0.5), val) if lo < 0 else val


# ----------------------------------------------------------------------------- integer pools


def _limits(rng, n: int, dtype: str) -> np.ndarray:
    lo, hi = INT_RANGES[dtype]
    marks = set()
    for d, (a, b) in INT_RANGES.items():
        if d == "bool":
            continue
        for v in (a, b, a + 1, b - 1, a - 1, b + 1, (b + 1) // 2, -((b + 1) // 2)):
            if lo <= v <= hi:
                marks.add(v)
    marks |= {v for v in (0, 1, -1, 2, -2, 3, -3, 7, -7, 100, -100) if lo <= v <= hi}
    fixed = np.array(sorted(marks), dtype=np.int64)
    wide = rng.integers(lo, hi, n, dtype=np.int64, endpoint=True)
    return np.where(rng.random(n) < 0.5, rng.choice(fixed, n), wide)


def _divisor(rng, n: int, dtype: str) -> np.ndarray:
    lo, hi = INT_RANGES[dtype]
    small = np.array(
        [v for v in (1, 2, 3, 5, 7, -2, -3, -5, -7, 16, -16, lo, hi) if lo <= v <= hi and v not in (0, -1)]
    )
    return rng.choice(small, n)


# ----------------------------------------------------------------------------- math sweeps


def _sweep_regions(func: str, dtype: str):
    """[(kind, a, b)] regions of `func`'s domain for `dtype` (kind: lin, log, fixed)."""
    p, emin, vmax = FLOAT_INFO[dtype]
    sub, tiny = 2.0 ** (emin - p), 2.0**emin
    ln_max, log2_max = math.log(vmax), math.log2(vmax)
    if func in ("exp", "exp2"):
        top = ln_max if func == "exp" else log2_max
        bottom = (math.log(tiny) if func == "exp" else emin) - (p * (0.7 if func == "exp" else 1.0))
        return [
            ("lin", -1.0, 1.0),
            ("lin", -0.99 * top, 0.99 * top),
            ("lin", 1.01 * top, 2.0 * top),
            ("lin", bottom, 0.98 * (emin if func == "exp2" else math.log(tiny))),
            ("logpm", sub, 1e-3),
            ("fixed", [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0]),
        ]
    if func in ("log", "log2"):
        return [
            ("lin", 0.5, 2.0),
            ("log", tiny, vmax),
            ("log", sub, tiny),
            ("lin", -4.0, -0.001),
            ("fixed", [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, 2.0]),
        ]
    if func == "sqrt":
        return [("log", sub, vmax), ("lin", 0.0, 4.0), ("lin", -4.0, -0.001), ("fixed", [0.0, np.inf, np.nan, 1.0])]
    if func == "rsqrt":
        return [("log", sub, vmax), ("lin", 0.001, 4.0), ("lin", -4.0, -0.001), ("fixed", [0.0, np.inf, np.nan, 1.0])]
    if func == "tanh":
        return [
            ("lin", -1.0, 1.0),
            ("lin", -20.0, 20.0),
            ("logpm", 20.0, min(vmax, 1e4)),
            ("logpm", sub, 1e-3),
            ("fixed", [0.0, -0.0, np.inf, -np.inf, np.nan]),
        ]
    if func == "sigmoid":
        return [("lin", -20.0, 20.0), ("lin", -80.0, 80.0), ("fixed", [0.0, np.inf, -np.inf, np.nan])]
    if func in ("sin", "cos"):
        return [
            ("lin", -math.pi, math.pi),
            ("lin", -100.0, 100.0),
            ("logpm", 1e3, min(1e5, vmax / 2)),
            ("logpm", sub, 1e-3),
            ("fixed", [0.0, -0.0, np.inf, -np.inf, np.nan]),
        ]
    if func in ("floor", "ceil", "abs"):
        big = min(2.0 ** (p + 2), vmax / 2)
        return [
            ("half", -8.0, 8.0),
            ("lin", -1000.0, 1000.0),
            ("logpm", 1.0, big),
            ("logpm", sub, 1.0),
            ("fixed", [0.0, -0.0, 0.5, -0.5, 1.5, -1.5, np.inf, -np.inf, np.nan]),
        ]
    raise ValueError(f"no sweep for {func}")


def sweep(rng, n: int, func: str, dtype: str) -> np.ndarray:
    """`n` arguments of `func` over its regions for `dtype` (float64, to be rounded to `dtype`)."""
    regions = _sweep_regions(func, dtype)
    which = rng.integers(0, len(regions), n)
    out = np.zeros(n)
    for k, reg in enumerate(regions):
        sel = which == k
        m = int(sel.sum())
        if not m:
            continue
        kind = reg[0]
        if kind == "fixed":
            vals = rng.choice(np.array(reg[1]), m)
        elif kind == "lin":
            vals = rng.uniform(reg[1], reg[2], m)
        elif kind == "half":
            vals = rng.integers(int(reg[1]) * 2, int(reg[2]) * 2 + 1, m) / 2.0
        else:  # log / logpm: log-uniform magnitudes (logpm: either sign)
            vals = np.exp(rng.uniform(math.log(reg[1]), math.log(reg[2]), m))
            if kind == "logpm":
                vals = vals * rng.choice([-1.0, 1.0], m)
        out[sel] = vals
    return out


# ----------------------------------------------------------------------------- filling arrays


def fill(rng, shape: Tuple[int, ...], dtype: str, lo: float, hi: float, edges: str) -> np.ndarray:
    """An input array of `dtype` for edge class `edges` ("" = uniform in [lo, hi])."""
    if edges.startswith("window:"):
        return _window(rng, shape, dtype, lo, hi, edges)
    if is_int4(dtype):  # passed packed: every byte (two values, each of -8..7) at random
        return rng.integers(-128, 128, storage_of(dtype, shape)[1]).astype(np.int8)
    n = int(np.prod(shape)) if shape else 1
    dt = np_dtype(dtype)
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    if is_float(dtype):
        base = rng.uniform(lo, hi, n)
    else:
        base = rng.integers(int(lo), int(hi), n, dtype=np.int64, endpoint=True)
    if not edges:
        return _cast(base, dtype).reshape(shape)
    kind, _, arg = edges.partition(":")
    if kind == "fp8bits":
        return _fp8_bits(rng, shape, dtype, arg)
    if kind == "math":
        return _cast(sweep(rng, n, arg, dtype), dtype).reshape(shape)
    if kind == "intfloat":
        return _cast(rng.integers(-8, 9, n).astype(np.float64), dtype).reshape(shape)
    if kind == "shift":
        return rng.integers(0, int(arg), n).astype(dt).reshape(shape)
    if kind == "divisor":
        return _divisor(rng, n, dtype).astype(dt).reshape(shape)
    pool = {
        "special": lambda: _special(rng, n, dtype),
        "nan": lambda: _nan(rng, n, dtype, lo, hi),
        "ties": lambda: ties(rng, n, dtype, arg),
        "fraction": lambda: _fraction(rng, n, arg),
        "limits": lambda: _limits(rng, n, dtype),
        "fp8": lambda: _fp8_edges(rng, n, dtype, arg),
    }[kind]()
    if kind == "limits":
        base = rng.integers(*INT_RANGES[dtype], n, dtype=np.int64, endpoint=True) if rng.random() < 0.5 else base
    mix = rng.random(n) < 0.5
    if is_float(dtype):
        out = _cast(np.where(mix, pool, base.astype(np.float64)), dtype)
        if kind == "fraction":
            # rounding to this dtype may carry a value out of the int dtype's range (undefined): keep inside
            ilo, ihi = INT_RANGES[arg]
            v = out.astype(np.float64)
            out = np.where((v > ilo - 1) & (v < ihi + 1), out, _cast(np.array([0.5]), dtype))
        return out.reshape(shape)
    return np.where(mix, pool, base).astype(dt).reshape(shape)


def _cast(values: np.ndarray, dtype: str) -> np.ndarray:
    """float64 (or int) values rounded to `dtype` once (float64 -> bfloat16 correctly, not via float32)."""
    if dtype == "bfloat16" or is_fp8(dtype):  # the interpreter's rounding (one rounding, from float64)
        from tilecore.interp.dtypes import convert

        return np.asarray(convert(np.asarray(values, dtype=np.float64), dtype))
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(values).astype(np_dtype(dtype))


def _window(rng, shape: Tuple[int, ...], dtype: str, lo: float, hi: float, edges: str) -> np.ndarray:
    """Edge class `window:R0:R1:C0:C1` of a 2-D input: rows R0:R1, columns C0:C1 at the integer
    limits, zero elsewhere. The zeros are never written (np.zeros maps them lazily), so a tensor
    past 2^31 bytes costs the memory of the window it is read through."""
    r0, r1, c0, c1 = (int(v) for v in edges.split(":")[1:])
    out = np.zeros(shape, np_dtype(dtype))
    out[r0:r1, c0:c1] = fill(rng, (r1 - r0, c1 - c0), dtype, lo, hi, "limits")
    return out
