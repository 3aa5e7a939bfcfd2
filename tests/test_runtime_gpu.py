"""The runtime with CUDA arrays (torch and cupy): describing them, device checks, and outputs
allocated on the inputs' device, through a test backend whose memory space is "cuda".

The test backend runs the reference interpreter on host copies and writes results back, so
these tests exercise the runtime's marshalling, not a GPU code generator."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import tilecore
from tilecore.diagnostics import TileRuntimeError
from tilecore.interp import plugin as ref
from tilecore.plugin import Backend, hookimpl, register_plugin, unregister_plugin
from tilecore.runtime import arrays

sys.path.insert(0, os.path.dirname(__file__))
from test_plugin_support import simple_add_func  # noqa: E402


def _cuda_available():
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not _cuda_available(), reason="needs torch with a CUDA GPU")]


class HostCopyCudaBackend:
    """memory_space "cuda": receives CUDA arrays, interprets on host copies, copies results back."""

    @hookimpl
    def tilecore_register_backends(self, register):
        base = ref.make_backend()
        caps = base.capabilities.__class__(**{**base.capabilities.__dict__, "memory_space": "cuda"})
        register(
            Backend(
                name="hostcuda",
                targets=("hostcuda",),
                ir_versions=base.ir_versions,
                capabilities=caps,
                toolchain_status=base.toolchain_status,
            )
        )

    @hookimpl
    def tilecore_codegen(self, backend, module, options):
        if backend.name == "hostcuda":
            return ref.tilecore_codegen(backend=ref.make_backend(), module=module, options=options)

    @hookimpl
    def tilecore_launcher(self, backend, artifact):
        if backend.name != "hostcuda":
            return None
        run = ref.tilecore_launcher(backend=ref.make_backend(), artifact=artifact)

        def launch(args, bindings):
            from tilecore.testing import to_numpy

            host = [to_numpy(a) for a in args]
            run(host, bindings)
            for dev, h in zip(args, host):
                if hasattr(dev, "copy_"):  # torch
                    import torch

                    dev.copy_(torch.from_numpy(h))
                else:  # cupy
                    dev.set(h)

        return launch


@pytest.fixture
def hostcuda(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(tmp_path / "cache"))
    name = register_plugin(HostCopyCudaBackend(), name="hostcuda-plugin")
    yield "hostcuda"
    unregister_plugin(name)


def test_describe_cuda_tensors():
    import torch

    t = torch.zeros(4, 6, device="cuda")
    info = arrays.describe(t)
    assert (info.library, info.memory_space, info.device) == ("torch", "cuda", "cuda:0")
    assert info.strides == (6, 1) and info.contiguous
    assert not arrays.describe(t.t()).contiguous


def test_torch_cuda_outputs_on_the_same_device(hostcuda):
    import torch

    k = tilecore.compile(simple_add_func("N"), target=hostcuda, out_idx=[-1])
    a = torch.arange(40, dtype=torch.float32, device="cuda")
    c = k(a, a)
    assert isinstance(c, torch.Tensor) and c.device == a.device
    assert torch.equal(c, 2 * a)


def test_cupy_outputs_on_the_same_device(hostcuda):
    cupy = pytest.importorskip("cupy")
    k = tilecore.compile(simple_add_func("N"), target=hostcuda, out_idx=[-1])
    a = cupy.arange(24, dtype=cupy.float32)
    info = arrays.describe(a)
    assert (info.library, info.device) == ("cupy", "cuda:0")
    c = k(a, a)
    assert isinstance(c, cupy.ndarray) and c.device.id == 0
    np.testing.assert_array_equal(c.get(), 2 * a.get())


def test_memory_space_errors(hostcuda):
    import torch

    on_host = tilecore.compile(simple_add_func(16), target="reference", out_idx=[-1])
    g = torch.zeros(16, device="cuda")
    with pytest.raises(TileRuntimeError) as e:
        on_host(g, g)
    assert str(e.value) == (
        "kernel 'add', argument 'A': expected an array in cpu memory for backend "
        "'reference', got one on cuda:0; move it there first (e.g. tensor.cpu() "
        "or numpy.asarray)"
    )
    on_dev = tilecore.compile(simple_add_func(16), target=hostcuda, out_idx=[-1])
    with pytest.raises(TileRuntimeError) as e:
        on_dev(g, np.zeros(16, np.float32))
    assert str(e.value) == (
        "kernel 'add', argument 'B': expected an array in cuda memory for backend "
        "'hostcuda', got one on cpu; move it there first (e.g. tensor.to('cuda'))"
    )


@pytest.mark.skipif(not _cuda_available() or __import__("torch").cuda.device_count() < 2, reason="needs two CUDA GPUs")
def test_arguments_on_two_devices(hostcuda):
    import torch

    k = tilecore.compile(simple_add_func(16), target=hostcuda, out_idx=[-1])
    with pytest.raises(TileRuntimeError) as e:
        k(torch.zeros(16, device="cuda:0"), torch.zeros(16, device="cuda:1"))
    assert str(e.value) == (
        "kernel 'add', argument 'B': is on cuda:1 but 'A' is on cuda:0; all arguments must be on one device"
    )
