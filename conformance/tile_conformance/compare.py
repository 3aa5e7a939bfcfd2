"""Comparing a backend's outputs with the reference interpreter's.

* integers and bool: bit-exact;
* floats: NaN where the reference has NaN and nowhere else; +inf / -inf at the
  same positions with the same sign; every finite element within
  `atol + rtol * |ref| + ulps * ulp(ref)` of the reference, with the tolerance
  the program's error analysis or the math accuracy table gives (see
  programs.py, accuracy.py and the README, "Tolerances"); where the tolerance
  says `signed_zero`, a zero must also have the reference's sign.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from tilecore.ir.types import is_float

from .programs import Tolerance


@dataclass
class Mismatch:
    output: str
    reason: str
    max_error: float
    index: Tuple[int, ...]
    expected: str
    got: str
    count: int
    total: int
    tolerance: Tolerance

    def describe(self) -> str:
        t = self.tolerance
        tol = (
            "bit-exact"
            if t.atol == 0 and t.rtol == 0 and not t.ulps
            else f"{t.ulps:g} ulp"
            if t.ulps and not t.atol and not t.rtol
            else f"atol={t.atol:.3g}, rtol={t.rtol:.3g}"
        )
        return (
            f"output {self.output}{list(self.index)}: {self.reason}: expected {self.expected}, got {self.got} "
            f"(max error {self.max_error:.6g}; {self.count} of {self.total} elements differ; "
            f"tolerance {tol}: {self.tolerance.why})"
        )

    def to_json(self):
        return {
            "output": self.output,
            "reason": self.reason,
            "max_error": self.max_error,
            "index": list(self.index),
            "expected": self.expected,
            "got": self.got,
            "mismatched": self.count,
            "total": self.total,
            "tolerance": self.tolerance.to_json(),
        }


def _fmt(v) -> str:
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    return repr(float(v))


def _worst(name: str, what: str, error: float, bad, key, ref, got, tol: Tolerance) -> Mismatch:
    """The mismatch reported at the element where `key` is largest (the first one where `key` is
    the `bad` mask itself), counting every `bad` element."""
    idx = np.unravel_index(int(np.argmax(key)), ref.shape)
    at = tuple(int(i) for i in idx)
    return Mismatch(name, what, error, at, _fmt(ref[idx]), _fmt(got[idx]), int(bad.sum()), int(ref.size), tol)


def compare(name: str, dtype: str, ref: np.ndarray, got: np.ndarray, tol: Tolerance) -> Optional[Mismatch]:
    """The first (largest) violation of `tol` between `got` and `ref`, or None."""
    if tuple(ref.shape) != tuple(got.shape):
        shapes = (str(ref.shape), str(got.shape))
        what = f"shape {tuple(got.shape)} instead of {tuple(ref.shape)}"
        return Mismatch(name, what, float("inf"), (), *shapes, ref.size, ref.size, tol)
    if not is_float(dtype):
        r = ref.astype(np.int64) if dtype != "bool" else ref.astype(bool)
        g = got.astype(np.int64) if dtype != "bool" else got.astype(bool)
        bad = r != g
        if not bad.any():
            return None
        diff = np.abs(r.astype(np.float64) - g.astype(np.float64))
        return _worst(name, "integer values differ", float(diff.max()), bad, np.where(bad, diff, -1), ref, got, tol)
    r = ref.astype(np.float64)
    g = got.astype(np.float64)
    r_nan, g_nan = np.isnan(r), np.isnan(g)
    bad = r_nan != g_nan
    if bad.any():
        return _worst(name, "NaN at a different position", float("nan"), bad, bad, ref, got, tol)
    r_inf, g_inf = np.isinf(r), np.isinf(g)
    bad = (r_inf | g_inf) & ~((r_inf & g_inf) & (np.sign(r) == np.sign(g)))
    if bad.any():
        what = "infinity at a different position or with another sign"
        return _worst(name, what, float("inf"), bad, bad, ref, got, tol)
    finite = ~(r_nan | r_inf)
    if tol.signed_zero:
        bad = finite & (r == 0) & (g == 0) & (np.signbit(r) != np.signbit(g))
        if bad.any():
            return _worst(name, "zero with the other sign", 0.0, bad, bad, ref, got, tol)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.where(finite, np.abs(g - r), 0.0)
        limit = tol.atol + tol.rtol * np.abs(np.where(finite, r, 0.0))
        if tol.ulps:
            from .edges import ulp

            limit = limit + tol.ulps * ulp(np.where(finite, r, 0.0), dtype)
    bad = err > limit
    if not bad.any():
        return None
    excess = np.where(bad, err - limit, -1.0)
    return _worst(name, "value outside tolerance", float(err.max()), bad, excess, ref, got, tol)
