"""Kernel calls: argument validation (every message asserted), output allocation in the
caller's array library, dynamic-dimension binding, jit memoization."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import tilecore
from tilecore.diagnostics import TileError, TileRuntimeError
from tilecore.runtime.kernel import normalize_out_idx

sys.path.insert(0, os.path.dirname(__file__))
from test_plugin_support import matrix_func, simple_add_func  # noqa: E402


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILECORE_CACHE", raising=False)


@pytest.fixture
def add_kernel():
    return tilecore.compile(simple_add_func("N"), target="reference", out_idx=[-1])


@pytest.fixture
def mat_kernel():
    return tilecore.compile(matrix_func("M", 8), target="reference", out_idx=-1)


def f32(*shape):
    return np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)


def test_kernel_attributes(add_kernel):
    assert add_kernel.ir.name == "add"
    assert add_kernel.backend.name == "reference" and add_kernel.target == "reference"
    assert add_kernel.source == add_kernel.artifact.source and "def add" in add_kernel.source
    assert [p.name for p in add_kernel.inputs] == ["A", "B"]
    assert [p.name for p in add_kernel.outputs] == ["C"]
    assert repr(add_kernel) == "<tilecore.Kernel add(A, B) -> (C) on reference>"


def test_dynamic_dims_bind_and_output_is_allocated(add_kernel):
    for n in (1, 17, 64):
        a, b = f32(n), np.full(n, 0.5, np.float32)
        c = add_kernel(a, b)
        assert isinstance(c, np.ndarray) and c.shape == (n,) and c.dtype == np.float32
        np.testing.assert_array_equal(c, a + b)


def test_keyword_arguments(add_kernel):
    a, b = f32(5), f32(5)
    np.testing.assert_array_equal(add_kernel(B=b, A=a), a + b)


def test_wrong_argument_count(add_kernel):
    with pytest.raises(TileRuntimeError) as e:
        add_kernel(f32(4))
    assert str(e.value) == (
        "kernel 'add' takes 2 input(s) (A, B) but 1 were given; the output(s) C "
        "are allocated by the kernel (out_idx=[2])"
    )
    with pytest.raises(TileRuntimeError, match=r"takes 2 input\(s\) \(A, B\) but 3 were given"):
        add_kernel(f32(4), f32(4), f32(4))
    with pytest.raises(TileRuntimeError, match="kernel 'add' has no input named 'C'; inputs: A, B"):
        add_kernel(f32(4), f32(4), C=f32(4))
    with pytest.raises(TileRuntimeError, match="kernel 'add': missing input\\(s\\) B"):
        add_kernel(A=f32(4))


def test_wrong_dtype(add_kernel):
    with pytest.raises(TileRuntimeError) as e:
        add_kernel(f32(4), np.zeros(4, np.float16))
    assert str(e.value) == "kernel 'add', argument 'B': expected dtype float32, got float16"
    with pytest.raises(TileRuntimeError, match="argument 'A': expected dtype float32, got complex64"):
        add_kernel(np.zeros(4, np.complex64), f32(4))


def test_wrong_rank_and_static_shape(mat_kernel):
    with pytest.raises(TileRuntimeError) as e:
        mat_kernel(f32(4), f32(4, 8))
    assert str(e.value) == (
        "kernel 'scale_add', argument 'X': expected a 2-D array of shape (M, 8), got a 1-D array of shape (4,)"
    )
    with pytest.raises(TileRuntimeError) as e:
        mat_kernel(f32(4, 8), f32(4, 7))
    assert str(e.value) == (
        "kernel 'scale_add', argument 'W': expected shape (M, 8), got (4, 7) (dimension 1 must be 8, not 7)"
    )


def test_inconsistent_dynamic_dim(add_kernel, mat_kernel):
    with pytest.raises(TileRuntimeError) as e:
        add_kernel(f32(4), f32(5))
    assert str(e.value) == (
        "kernel 'add', argument 'B': dimension 0 is N = 5, but N = 4 was bound by "
        "argument 'A' (dimension 0); expected shape (N,) with N = 4, got (5,)"
    )
    with pytest.raises(TileRuntimeError, match=r"argument 'W': dimension 0 is M = 3, but M = 2"):
        mat_kernel(f32(2, 8), f32(3, 8))


def test_non_contiguous_strides(mat_kernel):
    x = np.zeros((8, 4), np.float32).T  # shape (4, 8), column-major
    with pytest.raises(TileRuntimeError) as e:
        mat_kernel(x, f32(4, 8))
    assert str(e.value) == (
        "kernel 'scale_add', argument 'X': expected a C-contiguous (row-major, "
        "dense) array, got strides (1, 4) for shape (4, 8); pass "
        "tensor.contiguous() (torch) or numpy.ascontiguousarray(a) (numpy/cupy)"
    )
    np.testing.assert_array_equal(mat_kernel(np.ascontiguousarray(x), f32(4, 8)), f32(4, 8))


def test_not_an_array(add_kernel):
    with pytest.raises(TileRuntimeError) as e:
        add_kernel([1.0, 2.0], f32(2))
    assert str(e.value) == (
        "kernel 'add', argument 'A': got list, which is not an array (expected "
        "numpy, torch, cupy or an object with __dlpack__)"
    )


def test_dlpack_object_gives_numpy_output(add_kernel):
    class Capsule:  # a foreign CPU array that only speaks DLPack
        def __init__(self, arr):
            self.arr = arr

        def __dlpack__(self, **kw):
            return self.arr.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.arr.__dlpack_device__()

    a, b = f32(6), f32(6)
    c = add_kernel(Capsule(a), Capsule(b))
    assert type(c) is np.ndarray
    np.testing.assert_array_equal(c, a + b)


def test_outputs_none_and_several():
    func = matrix_func(4, 8)
    all_params = tilecore.compile(func, target="reference")
    x, w, y = f32(4, 8), f32(4, 8), np.zeros((4, 8), np.float32)
    assert all_params(x, w, y) is None
    np.testing.assert_array_equal(y, x * 2 + w)
    two = tilecore.compile(func, target="reference", out_idx=[1, -1])
    w_out, y_out = two(x)
    assert w_out.shape == y_out.shape == (4, 8)
    np.testing.assert_array_equal(y_out, x * 2)  # W is a fresh zero-filled output


def test_output_dim_not_bound_by_inputs():
    k = tilecore.compile(simple_add_func("N"), target="reference", out_idx=[0, 1, 2])
    with pytest.raises(TileRuntimeError) as e:
        k()
    assert str(e.value) == (
        "kernel 'add': dynamic dimension N of output 'A' is not the size of any input dimension, so it cannot be bound"
    )


def test_out_idx_validation():
    assert normalize_out_idx([-1, 0], 3) == (0, 2)
    assert normalize_out_idx(None, 3) == ()
    with pytest.raises(TileError, match="out_idx 3 is out of range for 'f', which has 3 parameter"):
        normalize_out_idx([3], 3, "f")
    with pytest.raises(TileError, match="out_idx names parameter 2 twice"):
        normalize_out_idx([2, -1], 3)


def test_compile_rejects_non_primfunc():
    with pytest.raises(TileError, match="tilecore.compile expects a PrimFunc"):
        tilecore.compile(lambda: None)


def test_jit_factory_memoizes_per_arguments():
    calls = []

    @tilecore.jit(out_idx=[-1], target="reference")
    def make(n, dtype="float32"):
        calls.append((n, dtype))
        return simple_add_func(n, dtype)

    k1 = make(32)
    assert make(32) is k1 and calls == [(32, "float32")]
    k2 = make(32, dtype="float64")
    assert k2 is not k1 and len(calls) == 2
    a = np.ones(32)
    np.testing.assert_array_equal(k2(a, a), 2 * a)
    assert make.prim_func(16).params[0].shape == (16,)
    with pytest.raises(TileError, match="is a @tilecore.jit factory: call it"):
        tilecore.compile(make)

    @tilecore.jit
    def not_a_kernel():
        return 42

    with pytest.raises(TileError, match="must return a function made by @T.prim_func, but it returned int"):
        not_a_kernel()


def test_jit_on_prim_func_compiles_lazily():
    lazy = tilecore.jit(simple_add_func(16), out_idx=[-1], target="reference")
    a = f32(16)
    np.testing.assert_array_equal(lazy(a, a), 2 * a)
    assert lazy.target == "reference"


def test_torch_tensors_in_and_out(add_kernel):
    torch = pytest.importorskip("torch")
    a = torch.arange(10, dtype=torch.float32)
    b = torch.full((10,), 2.0)
    c = add_kernel(a, b)
    assert isinstance(c, torch.Tensor) and c.device.type == "cpu" and c.dtype == torch.float32
    assert torch.equal(c, a + b)
    with pytest.raises(TileRuntimeError, match="argument 'B': expected dtype float32, got float64"):
        add_kernel(a, b.double())
    nc = torch.zeros(4, 8).t()
    mk = tilecore.compile(matrix_func("M", 4), target="reference", out_idx=-1)
    with pytest.raises(
        TileRuntimeError,
        match=r"got strides \(1, 8\) for shape \(8, 4\); pass "
        r"tensor.contiguous\(\)",
    ):
        mk(nc, torch.zeros(8, 4))
    y = mk(nc.contiguous(), torch.ones(8, 4))
    assert torch.equal(y, torch.ones(8, 4))


def test_torch_bfloat16(tmp_path):
    torch = pytest.importorskip("torch")
    k = tilecore.compile(simple_add_func(16, "bfloat16"), target="reference", out_idx=[-1])
    a = torch.linspace(-2, 2, 16, dtype=torch.bfloat16)
    c = k(a, a)
    assert c.dtype == torch.bfloat16 and torch.equal(c, a + a)


def test_device_mismatch_message():
    torch = pytest.importorskip("torch")
    k = tilecore.compile(simple_add_func(16), target="reference", out_idx=[-1])
    meta = torch.zeros(16, device="meta")  # a non-CPU device that exists on every torch build
    with pytest.raises(TileRuntimeError) as e:
        k(meta, meta)
    assert str(e.value) == (
        "kernel 'add', argument 'A': expected an array in cpu memory for backend "
        "'reference', got one on meta:0; move it there first (e.g. tensor.cpu() "
        "or numpy.asarray)"
    )
