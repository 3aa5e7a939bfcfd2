"""Kernel calls remember the argument signatures that passed the checks; a changed argument
(shape, dtype, contiguity, writability, device, library) after such a call is still checked
and rejected with the same message as on a first call."""

from __future__ import annotations

import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tilecore.diagnostics import TileRuntimeError

N = T.dynamic("N")


@T.prim_func
def scale_rows(X: T.Tensor((N, 8), "float32"), W: T.Tensor((N, 8), "float32"), Y: T.Tensor((N, 8), "float32")):
    with T.Kernel(N) as bx:  # one block per row
        for j in T.Parallel(8):
            Y[bx, j] = X[bx, j] * 2.0 + W[bx, j]


@T.prim_func
def inplace(X: T.Tensor((16,), "float32")):
    with T.Kernel(1) as bx:
        for i in T.Parallel(16):
            X[i] = X[i] + 1.0


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILECORE_CACHE", raising=False)


def f32(*shape):
    return np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)


def fresh_error(func, target, out_idx, *args):
    """The message a never-called Kernel gives for `args` (no remembered signatures)."""
    kernel = tilecore.compile(func, target=target, out_idx=out_idx)
    kernel._plans.clear()
    with pytest.raises(TileRuntimeError) as e:
        kernel(*args)
    return str(e.value)


@pytest.mark.parametrize("target", ["reference", "cpu"])
def test_changed_numpy_arguments_after_a_remembered_call_are_rejected(target):
    from tilecore.plugin import get_registry

    if get_registry().get(target) is None:
        pytest.skip(f"backend {target} is not installed")
    k = tilecore.compile(scale_rows, target=target, out_idx=[-1])
    x, w = f32(4, 8), np.ones((4, 8), np.float32)
    np.testing.assert_array_equal(k(x, w), x * 2 + w)
    np.testing.assert_array_equal(k(x, w), x * 2 + w)  # the remembered plan
    assert len(k._plans) == 1
    bad_calls = {
        "shape": (f32(4, 7), w),
        "rank": (f32(32), w),
        "dynamic dim": (x, np.ones((5, 8), np.float32)),
        "dtype": (x, np.ones((4, 8), np.float64)),
        "contiguity": (f32(8, 4).T, w),  # shape (4, 8), column-major
        "strided": (f32(8, 8)[::2], w),
        "not an array": (x.tolist(), w),
    }
    assert not bad_calls["contiguity"][0].flags.c_contiguous
    for what, args in bad_calls.items():
        with pytest.raises(TileRuntimeError) as e:
            k(*args)
        assert str(e.value) == fresh_error(scale_rows, target, [-1], *args), what
    # new shapes still bind N anew (a second remembered signature)
    y = k(f32(6, 8), np.ones((6, 8), np.float32))
    assert y.shape == (6, 8)
    np.testing.assert_array_equal(y, f32(6, 8) * 2 + 1)
    np.testing.assert_array_equal(k(x, w), x * 2 + w)


def test_read_only_array_for_a_written_parameter_after_a_remembered_call():
    k = tilecore.compile(inplace, target="reference")
    x = np.zeros(16, np.float32)
    k(x)
    k(x)
    np.testing.assert_array_equal(x, 2)
    ro = np.zeros(16, np.float32)
    ro.flags.writeable = False
    with pytest.raises(TileRuntimeError, match="the kernel writes this argument, but the array is read-only"):
        k(ro)
    k(x)
    np.testing.assert_array_equal(x, 3)


def test_keyword_and_count_errors_after_a_remembered_call():
    k = tilecore.compile(scale_rows, target="reference", out_idx=[-1])
    x, w = f32(2, 8), f32(2, 8)
    k(x, w)
    with pytest.raises(TileRuntimeError, match=r"takes 2 input\(s\) \(X, W\) but 1 were given"):
        k(x)
    with pytest.raises(TileRuntimeError, match="has no input named 'Z'"):
        k(x, Z=w)
    np.testing.assert_array_equal(k(W=w, X=x), x * 2 + w)  # keywords take the full check


def test_torch_changes_after_a_remembered_call():
    torch = pytest.importorskip("torch")
    k = tilecore.compile(scale_rows, target="reference", out_idx=[-1])
    x, w = torch.arange(32, dtype=torch.float32).reshape(4, 8), torch.ones(4, 8)
    assert torch.equal(k(x, w), x * 2 + w)
    y = k(x, w)
    assert isinstance(y, torch.Tensor) and torch.equal(y, x * 2 + w)
    bad_calls = {
        "dtype": (x, w.double()),
        "shape": (x, torch.ones(5, 8)),
        "contiguity": (torch.zeros(8, 4).t(), w),  # shape (4, 8), strides (1, 4)
        "device": (torch.zeros(4, 8, device="meta"), w),
    }
    for what, args in bad_calls.items():
        with pytest.raises(TileRuntimeError) as e:
            k(*args)
        assert str(e.value) == fresh_error(scale_rows, "reference", [-1], *args), what
    # the same shapes from numpy give numpy outputs (the library is part of the signature)
    out = k(x.numpy(), w.numpy())
    assert type(out) is np.ndarray
    assert isinstance(k(x, w), torch.Tensor)
