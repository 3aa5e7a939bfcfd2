"""Shared helpers of the examples: fresh random inputs and one printed line per check."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import List, Optional

import numpy as np


@dataclass
class CheckResult:
    """One check of a kernel's output.

    `error` is max|out - numpy formula| / max|formula|; `reference_error` is the
    same measure against the reference interpreter's output on the same inputs
    (None when the kernel ran on the reference itself). Both must be within
    `tolerance`.
    """

    name: str
    error: float
    tolerance: float
    reference_error: Optional[float] = None

    @property
    def passed(self) -> bool:
        errors = [self.error] + ([] if self.reference_error is None else [self.reference_error])
        return all(bool(np.isfinite(e)) and e <= self.tolerance for e in errors)

    def line(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        text = f"{verdict}  {self.name:<52} vs numpy {self.error:.3e}"
        if self.reference_error is not None:
            text += f"  vs reference {self.reference_error:.3e}"
        return text + f"  (tolerance {self.tolerance:.0e})"


def relative_error(out, ref) -> float:
    """max|out - ref| / max|ref| in float64 (inf when the shapes differ)."""
    out = np.asarray(out).astype(np.float64)
    ref = np.asarray(ref).astype(np.float64)
    if out.shape != ref.shape:
        return float("inf")
    scale = max(float(np.max(np.abs(ref))), 1e-30)
    return float(np.max(np.abs(out - ref))) / scale


def compare(name: str, out, ref, tolerance: float, kernel=None) -> CheckResult:
    """Check `out` against the numpy formula `ref` and, when `kernel` is a
    CheckedKernel that ran on another backend, against the reference interpreter."""
    reference_error = None
    if isinstance(kernel, CheckedKernel) and kernel.reference is not None:
        reference_error = relative_error(out, kernel.last_reference_output)
    return CheckResult(name, relative_error(out, ref), tolerance, reference_error)


class CheckedKernel:
    """A compiled kernel that also runs the reference interpreter on the same inputs."""

    def __init__(self, kernel, reference):
        self.kernel = kernel
        self.reference = reference
        self.last_reference_output = None

    def __call__(self, *inputs):
        """Run on the kernel's backend (inputs moved to its memory first), return numpy."""
        from tilecore.testing import to_device, to_numpy

        space = self.kernel.backend.capabilities.memory_space
        out = to_numpy(self.kernel(*[to_device(x, space) for x in inputs]))
        if self.reference is not None:
            self.last_reference_output = self.reference(*[np.array(x, copy=True) for x in inputs])
        return out


def build(factory, target, *args, **kwargs) -> CheckedKernel:
    """Compile a `@tilecore.jit` factory for `target` (None: the default target),
    paired with the same kernel on the reference interpreter unless that is the target."""
    import tilecore

    func = factory.prim_func(*args, **kwargs)
    kernel = tilecore.compile(func, target=target, out_idx=factory.out_idx)
    reference = None
    if kernel.backend.name != "reference":
        reference = tilecore.compile(func, target="reference", out_idx=factory.out_idx)
    return CheckedKernel(kernel, reference)


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
