"""`tilelang.testing`: the test helpers TileLang's example and test files use, on tilecore.

`requires_cuda` and the `requires_cuda_compute_version*` family (TileLang's names) skip a
test unless the backend that TileLang's target "cuda" maps to is installed with its device
present (and, for the version checks, unless the version that backend declares in
`Backend.tilelang.device_version` qualifies); `main()` runs pytest on the calling file;
`set_random_seed` seeds Python, numpy and torch; `torch_assert_close` compares two
arrays allowing a fraction of mismatches. The perf-regression helpers of TileLang's
CI (`process_func`, `regression`) raise UnsupportedFeatureError.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import random
import sys

import numpy as np

from ...diagnostics import UnsupportedFeatureError


def _device_backend(tilelang_target: str):
    """The installed backend TileLang's `tilelang_target` maps to when torch is importable (TileLang's
    tests make their inputs with it) and that backend's device is present, else None."""
    if importlib.util.find_spec("torch") is None:
        return None
    from ...plugin.registry import get_registry
    from .host import target_aliases

    registry = get_registry()
    backend = registry.get(target_aliases().get(tilelang_target, ""))
    return backend if backend is not None and registry.device_present(backend) else None


def _device_version(tilelang_target: str):
    """(major, minor) of that device, from its backend's `tilelang.device_version`, else None."""
    backend = _device_backend(tilelang_target)
    probe = backend.tilelang.device_version if backend is not None else None
    try:
        version = probe() if probe is not None else None
    except Exception:  # noqa: BLE001 - a failing probe means "no such device", as device_present does
        return None
    return tuple(version) if version is not None else None


def _skip_unless(condition_fn, reason: str):
    import pytest

    def decorate(func):
        @functools.wraps(func)
        def run(*args, **kwargs):
            if not condition_fn():
                pytest.skip(reason)
            return func(*args, **kwargs)

        return run

    return decorate


def requires_cuda(func):
    """Skip unless the backend TileLang's target "cuda" maps to is installed with its device present."""
    return _skip_unless(lambda: _device_backend("cuda") is not None, "needs a CUDA device")(func)


def requires_cuda_compute_version(major_version, minor_version=0, mode="ge"):
    """Skip unless the CUDA device's compute capability (its backend's `tilelang.device_version`)
    compares to (major, minor) by `mode`."""
    ops = {
        "ge": lambda a, b: a >= b,
        "gt": lambda a, b: a > b,
        "eq": lambda a, b: a == b,
        "lt": lambda a, b: a < b,
        "le": lambda a, b: a <= b,
    }
    if mode not in ops:
        raise ValueError(f"mode must be one of {sorted(ops)}, got {mode!r}")

    def ok():
        cap = _device_version("cuda")
        return cap is not None and ops[mode](cap, (major_version, minor_version))

    return _skip_unless(ok, f"needs a CUDA device with compute capability {mode} {major_version}.{minor_version}")


def requires_cuda_compute_version_ge(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, "ge")


def requires_cuda_compute_version_gt(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, "gt")


def requires_cuda_compute_version_eq(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, "eq")


def requires_cuda_compute_version_lt(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, "lt")


def requires_cuda_compute_version_le(major_version, minor_version=0):
    return requires_cuda_compute_version(major_version, minor_version, "le")


def requires_package(*names):
    """Skip unless every named Python package is importable."""
    return _skip_unless(
        lambda: all(importlib.util.find_spec(n) for n in names), f"needs the package(s) {', '.join(names)}"
    )


def main():
    """Run pytest on the file that calls this (TileLang's `if __name__ == "__main__"` idiom)."""
    import pytest

    caller = inspect.stack()[1].filename
    sys.exit(pytest.main([caller, *sys.argv[1:]]))


def set_random_seed(seed: int = 42) -> None:
    """Seed Python's, numpy's and (when installed) torch's generators."""
    random.seed(seed)
    np.random.seed(seed)
    if importlib.util.find_spec("torch") is not None:
        import torch

        torch.manual_seed(seed)


def _numpy(x):
    if hasattr(x, "detach"):
        x = x.detach().cpu()
        if str(x.dtype) in ("torch.bfloat16",) or "float8" in str(x.dtype):
            x = x.float()
        return x.numpy()
    return np.asarray(x)


def torch_assert_close(
    actual,
    expected,
    rtol=1e-2,
    atol=1e-2,
    max_mismatched_ratio=0.001,
    verbose=False,
    equal_nan=True,
    check_device=True,
    check_dtype=True,
    base_name="LHS",
    ref_name="RHS",
):
    """Assert |actual - expected| <= atol + rtol*|expected| except for a fraction of elements."""
    a = _numpy(actual).astype(np.float64)
    e = _numpy(expected).astype(np.float64)
    if a.shape != e.shape:
        raise AssertionError(f"shape mismatch: {base_name} {a.shape} vs {ref_name} {e.shape}")
    close = np.isclose(a, e, rtol=rtol, atol=atol, equal_nan=equal_nan)
    bad = int(close.size - close.sum())
    allowed = int(max_mismatched_ratio * close.size)
    if bad > allowed:
        raise AssertionError(
            f"{bad} of {close.size} elements differ beyond rtol={rtol}, atol={atol} "
            f"(at most {allowed} allowed); max abs difference "
            f"{np.nanmax(np.abs(a - e)):.6g}"
        )


def process_func(*args, **kwargs):
    """TileLang's perf-regression helper: not part of tilecore."""
    raise UnsupportedFeatureError("tilecore", "tilelang.testing.process_func (TileLang's perf-regression CI)")


def regression(*args, **kwargs):
    """TileLang's perf-regression helper: not part of tilecore."""
    raise UnsupportedFeatureError("tilecore", "tilelang.testing.regression (TileLang's perf-regression CI)")
