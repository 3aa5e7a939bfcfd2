"""Remembered plans: a repeat call with a checked argument signature runs a prebuilt plan (bindings,
output allocators, launch), and a launcher that offers `specialize(args, bindings)` gets asked once
per signature for the `run(args)` that later calls use. The test backend "specializing" is the
reference interpreter with such a launcher, which records what the Kernel asks of it."""

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
from test_plugin_support import matrix_func, simple_add_func  # noqa: E402


class RecordingLauncher:
    """The reference launcher, plus `specialize`; `events` lists what the Kernel called."""

    def __init__(self, artifact, offer_run=True, fail_with=None, offer_bind_call=False):
        self.plain = ref.tilecore_launcher(backend=ref.make_backend(), artifact=artifact)
        self.events = []
        self.offer_run = offer_run
        self.fail_with = fail_with
        if offer_bind_call:
            self.bind_call = self._bind_call

    def _bind_call(self, args, bindings, input_positions, outputs, fallback):
        """The whole call for one signature (numpy arrays of the first call's dtypes and shapes);
        anything else goes to `fallback`, as tile-cuda's C FastCall does."""
        self.events.append(
            ("bind_call", tuple(input_positions), [(i, uninitialised) for i, _, uninitialised in outputs])
        )
        expected = [(args[i].dtype, args[i].shape) for i in input_positions]
        fixed = dict(bindings)

        def call(inputs):
            if [(a.dtype, a.shape) for a in inputs] != expected:
                self.events.append(("fallback",))
                return fallback(inputs)
            self.events.append(("fast", fixed))
            full = [None] * (len(inputs) + len(outputs))
            for i, a in zip(input_positions, inputs):
                full[i] = a
            made = [(i, allocate()) for i, allocate, _ in outputs]
            for i, a in made:
                full[i] = a
            self.plain(full, fixed)
            return None if not made else made[0][1] if len(made) == 1 else tuple(a for _, a in made)

        return call

    def __call__(self, args, bindings):
        self.events.append(("launch", dict(bindings)))
        self.plain(args, bindings)

    def specialize(self, args, bindings):
        self.events.append(("specialize", [np.shape(a) for a in args], dict(bindings)))
        if not self.offer_run:
            return None
        fixed = dict(bindings)

        def run(args):
            self.events.append(("run", fixed))
            if self.fail_with is not None:
                raise self.fail_with
            self.plain(list(args), fixed)

        return run


class SpecializingBackend:
    def __init__(self):
        self.launchers = []
        self.options = {}

    @hookimpl
    def tilecore_register_backends(self, register):
        base = ref.make_backend()
        register(
            Backend(
                name="specializing",
                targets=("specializing",),
                ir_versions=base.ir_versions,
                capabilities=base.capabilities,
                toolchain_status=base.toolchain_status,
            )
        )

    @hookimpl
    def tilecore_codegen(self, backend, module, options):
        if backend.name == "specializing":
            return ref.tilecore_codegen(backend=ref.make_backend(), module=module, options=options)

    @hookimpl
    def tilecore_launcher(self, backend, artifact):
        if backend.name != "specializing":
            return None
        launcher = RecordingLauncher(artifact, **self.options)
        self.launchers.append(launcher)
        return launcher


@pytest.fixture
def specializing(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILECORE_CACHE", raising=False)
    plugin = SpecializingBackend()
    name = register_plugin(plugin, name="specializing-plugin")
    yield plugin
    unregister_plugin(name)


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILECORE_CACHE", raising=False)


def f32(*shape, start=0):
    return np.arange(start, start + int(np.prod(shape)), dtype=np.float32).reshape(shape)


def kinds(events):
    return [e[0] for e in events]


def test_specialize_once_per_signature_then_run(specializing):
    k = tilecore.compile(matrix_func("M", 8), target="specializing", out_idx=[-1])
    for start in (0, 100, 200):  # fresh arrays each call: the run must use the call's own arrays
        x, w = f32(4, 8, start=start), f32(4, 8, start=start + 1)
        np.testing.assert_array_equal(k(x, w), x * 2 + w)
    (launcher,) = specializing.launchers
    assert launcher.events == [
        ("specialize", [(4, 8), (4, 8), (4, 8)], {"M": 4}),
        ("run", {"M": 4}),
        ("run", {"M": 4}),
        ("run", {"M": 4}),
    ]
    # a new shape is a new signature: checked, specialized with its own bindings
    x6 = f32(6, 8)
    np.testing.assert_array_equal(k(x6, x6), x6 * 3)
    np.testing.assert_array_equal(k(f32(4, 8), f32(4, 8)), f32(4, 8) * 3)
    assert launcher.events[4:] == [
        ("specialize", [(6, 8), (6, 8), (6, 8)], {"M": 6}),
        ("run", {"M": 6}),
        ("run", {"M": 4}),
    ]


def test_keywords_and_arrays_without_a_signature_take_the_plain_launch(specializing):
    k = tilecore.compile(matrix_func("M", 8), target="specializing", out_idx=[-1])
    x = f32(2, 8)
    np.testing.assert_array_equal(k(X=x, W=x), x * 3)  # keywords: full check, plain launch

    class CpuDLPack:  # a CPU DLPack producer that is neither numpy nor torch
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kwargs):
            return self.a.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    np.testing.assert_array_equal(k(CpuDLPack(x), x), x * 3)
    assert kinds(specializing.launchers[0].events) == ["launch", "launch"]
    assert not k._plans


def test_bind_call_takes_repeat_calls_and_hands_others_to_the_checked_path(specializing):
    specializing.options = {"offer_bind_call": True}
    func = matrix_func("M", 8)  # (X, W, Y): Y = X * 2 + W
    k = tilecore.compile(func, target="specializing", out_idx=[0, 2])  # outputs X and Y around input W
    w4, w6 = f32(4, 8), f32(6, 8, start=5)
    for w in (w4, w4):
        x, y = k(w)
        np.testing.assert_array_equal(x, np.zeros((4, 8), np.float32))
        np.testing.assert_array_equal(y, w)
    (launcher,) = specializing.launchers
    assert kinds(launcher.events) == ["specialize", "run", "bind_call", "fast"]
    assert launcher.events[2] == ("bind_call", (1,), [(0, False), (2, True)])  # X is never written
    # another shape: the bound call falls back, the checked path remembers it and binds it too
    np.testing.assert_array_equal(k(w6)[1], w6)
    np.testing.assert_array_equal(k(w6)[1], w6)
    assert kinds(launcher.events[4:]) == ["fallback", "specialize", "run", "bind_call", "fast"]
    # back to the first shape: its plan runs (through the fallback) and its bound call is taken up again
    np.testing.assert_array_equal(k(w4)[1], w4)
    np.testing.assert_array_equal(k(w4)[1], w4)
    assert kinds(launcher.events[9:]) == ["fallback", "run", "fast"]
    # keywords and wrong arguments take the checked path and its errors
    np.testing.assert_array_equal(k(W=w4)[1], w4)
    with pytest.raises(TileRuntimeError, match="expected dtype float32, got float64"):
        k(w4.astype(np.float64))


def test_specialize_may_decline(specializing):
    specializing.options = {"offer_run": False}
    k = tilecore.compile(simple_add_func("N"), target="specializing", out_idx=[-1])
    for n in (5, 5, 5):
        np.testing.assert_array_equal(k(f32(n), f32(n)), f32(n) * 2)
    # asked once; the remembered plan then uses the plain launch with the remembered bindings
    assert specializing.launchers[0].events == [
        ("specialize", [(5,), (5,), (5,)], {"N": 5}),
        ("launch", {"N": 5}),
        ("launch", {"N": 5}),
        ("launch", {"N": 5}),
    ]


def test_a_failing_run_is_one_clear_error_on_first_and_later_calls(specializing):
    specializing.options = {"fail_with": RuntimeError("device fell off the bus")}
    k = tilecore.compile(simple_add_func(16), target="specializing", out_idx=[-1])
    messages = []
    for _ in range(2):
        with pytest.raises(TileRuntimeError) as e:
            k(f32(16), f32(16))
        messages.append(str(e.value))
        assert e.value.__cause__ is None  # hidden from the user, kept for backend authors
        assert isinstance(e.value.internal_cause, RuntimeError)
    assert (
        messages[0]
        == messages[1]
        == (
            "kernel 'add': backend 'specializing' failed to run the kernel: RuntimeError: device fell off "
            "the bus (TILECORE_TRACEBACK=1 shows the backend's traceback)"
        )
    )
    assert not k._plans  # a failed first call remembers nothing


@pytest.mark.parametrize("target", ["reference", "cpu"])
def test_outputs_that_are_not_the_last_parameters(target):
    from tilecore.plugin import get_registry

    if get_registry().get(target) is None:
        pytest.skip(f"backend {target} is not installed")
    # parameters (X, W, Y), Y = X * 2 + W: with X allocated (zero-filled), the kernel writes Y = W
    func = matrix_func("M", 8)
    k_first = tilecore.compile(func, target=target, out_idx=[0])  # X is the output: inputs W, Y
    k_two = tilecore.compile(func, target=target, out_idx=[0, 2])  # X and Y are outputs: input W
    for start in (0, 50, 50):
        w, y = f32(3, 8, start=start), f32(3, 8, start=start + 7)
        x = k_first(w, y)  # X is allocated zero-filled; the kernel writes Y = 0 * 2 + W
        np.testing.assert_array_equal(x, np.zeros((3, 8), np.float32))
        np.testing.assert_array_equal(y, w)
        x2, y2 = k_two(w)
        np.testing.assert_array_equal(x2, np.zeros((3, 8), np.float32))
        np.testing.assert_array_equal(y2, w)
    assert len(k_first._plans) == 1 and len(k_two._plans) == 1


def test_allocation_failure_names_the_output_on_first_and_later_calls(monkeypatch):
    failing = {"now": False}
    real_allocator = arrays.allocator

    def allocator(*args, **kwargs):
        make = real_allocator(*args, **kwargs)

        def allocate():
            if failing["now"]:
                raise MemoryError("no room for 64 bytes")
            return make()

        return allocate

    monkeypatch.setattr(arrays, "allocator", allocator)
    k = tilecore.compile(simple_add_func(16), target="reference", out_idx=[-1])
    np.testing.assert_array_equal(k(f32(16), f32(16)), f32(16) * 2)  # remembered
    failing["now"] = True
    with pytest.raises(TileRuntimeError) as later:
        k(f32(16), f32(16))
    k._plans.clear()
    with pytest.raises(TileRuntimeError) as first:
        k(f32(16), f32(16))
    assert (
        str(later.value)
        == str(first.value)
        == "kernel 'add': cannot allocate output 'C': MemoryError: no room for 64 bytes"
    )


def test_torch_cpu_tensors_through_plans_with_new_tensors_each_call():
    torch = pytest.importorskip("torch")
    k = tilecore.compile(matrix_func("M", 8), target="reference", out_idx=[-1])
    for rows in (3, 5, 3, 5):
        x = torch.randn(rows, 8)
        w = torch.randn(rows, 8)
        y = k(x, w)
        assert isinstance(y, torch.Tensor) and torch.equal(y, x * 2 + w)
    assert len(k._plans) == 2
    # a parameter subclass (nn.Parameter) is a torch tensor too, remembered under its own type
    p = torch.nn.Parameter(torch.randn(3, 8), requires_grad=False)
    assert torch.equal(k(p, p), p * 3) and torch.equal(k(p, p), p * 3)
    assert len(k._plans) == 3
