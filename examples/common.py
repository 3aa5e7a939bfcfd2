"""Shared helpers of the examples: fresh random inputs and one printed line per check."""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import List

import numpy as np


@dataclass
class CheckResult:
    """One comparison against numpy: `error` is max|out - ref| / max|ref| (relative to the largest value)."""

    name: str
    error: float
    tolerance: float

    @property
    def passed(self) -> bool:
        return bool(np.isfinite(self.error)) and self.error <= self.tolerance

    def line(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        return f"{verdict}  {self.name:<52} max rel error {self.error:.3e} (tolerance {self.tolerance:.0e})"


def compare(name: str, out, ref, tolerance: float) -> CheckResult:
    """Max error of `out` against the float64 reference `ref`, relative to max|ref|."""
    out = np.asarray(out).astype(np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if out.shape != ref.shape:
        return CheckResult(f"{name} (shape {out.shape} != {ref.shape})", float("inf"), tolerance)
    scale = max(float(np.max(np.abs(ref))), 1e-30)
    return CheckResult(name, float(np.max(np.abs(out - ref))) / scale, tolerance)


def build(factory, target, *args, **kwargs):
    """The compiled kernel of a `@tilecore.jit` factory for `target` (None: the default target)."""
    import tilecore

    if target is None:
        return factory(*args, **kwargs)
    return tilecore.compile(factory.prim_func(*args, **kwargs), target=target, out_idx=factory.out_idx)


def random_array(rng: np.random.Generator, shape, dtype, low=-1.0, high=1.0) -> np.ndarray:
    """Uniform random values (never zeros) in the tilecore dtype `dtype`."""
    from tilecore.interp import np_dtype

    return rng.uniform(low, high, size=shape).astype(np_dtype(dtype))


def tolerance_for(dtype: str) -> float:
    """fp32: 1e-5 relative; fp16/bf16 inputs with fp32 accumulation: 1e-2."""
    return 1e-5 if dtype in ("float32", "float64") else 1e-2


def main(check, description: str) -> int:
    """Command line of a single example: run its checks, print them, exit 1 on a failure."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--target", default=None, help="backend target (default: tilecore's default)")
    args = parser.parse_args()
    results: List[CheckResult] = check(target=args.target)
    for r in results:
        print(r.line())
    return 0 if all(r.passed for r in results) else 1
