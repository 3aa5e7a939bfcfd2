"""tilecore.testing: assert_matches_reference catches a wrong backend, honours per-dtype
tolerances, and the pytest plugin's option and fixtures work in a real pytest run."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tilecore
from tilecore.interp import plugin as ref
from tilecore.plugin import Backend, hookimpl, register_plugin, unregister_plugin
from tilecore.testing import assert_matches_reference, compare_arrays, tolerance

sys.path.insert(0, os.path.dirname(__file__))
from test_plugin_support import clean_env, matrix_func, simple_add_func  # noqa: E402


class SkewedBackend:
    """Runs the reference interpreter, then adds `skew` to the last argument (a wrong backend)."""

    def __init__(self, name, skew):
        self.name, self.skew = name, skew

    @hookimpl
    def tilecore_register_backends(self, register):
        base = ref.make_backend()
        register(
            Backend(
                name=self.name,
                targets=(self.name,),
                ir_versions=base.ir_versions,
                capabilities=base.capabilities,
                toolchain_status=base.toolchain_status,
            )
        )

    @hookimpl
    def tilecore_codegen(self, backend, module, options):
        if backend.name == self.name:
            return ref.tilecore_codegen(backend=ref.make_backend(), module=module, options=options)

    @hookimpl
    def tilecore_launcher(self, backend, artifact):
        if backend.name != self.name:
            return None
        run = ref.tilecore_launcher(backend=ref.make_backend(), artifact=artifact)

        def launch(args, bindings):
            run(args, bindings)
            args[-1][...] += np.asarray(self.skew).astype(args[-1].dtype)

        return launch


@pytest.fixture
def skewed(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(tmp_path / "cache"))
    names = []

    def make(name, skew):
        names.append(register_plugin(SkewedBackend(name, skew), name=f"plugin-{name}"))
        return name

    yield make
    for n in names:
        unregister_plugin(n)


def test_exact_backend_matches(skewed):
    target = skewed("exact", 0.0)
    a = np.random.default_rng(0).standard_normal(32).astype(np.float32)
    c = assert_matches_reference(simple_add_func(32), [a, a], backend=target, out_idx=[-1])
    np.testing.assert_array_equal(c, a + a)


def test_wrong_backend_fails_with_details(skewed):
    target = skewed("skew", 1e-3)
    a = np.ones(32, np.float32)
    with pytest.raises(AssertionError) as e:
        assert_matches_reference(simple_add_func(32), [a, a], backend=target, out_idx=[-1])
    msg = str(e.value)
    assert msg == (
        "kernel 'add' on skew does not match the reference:\n  output 'C' (float32): "
        "32 of 32 elements differ from the reference beyond rtol=1e-05, atol=1e-05; "
        "first at index (0,): got 2.001, reference 2.0; max abs difference 0.000999928"
    )


def test_in_place_outputs_are_compared_without_out_idx(skewed):
    target = skewed("skew2", 5.0)
    x = np.ones((2, 8), np.float32)
    with pytest.raises(AssertionError, match="argument 'Y' after the call"):
        assert_matches_reference(matrix_func(2, 8), [x, x, np.zeros_like(x)], backend=target)


def test_float16_tolerance(skewed):
    target = skewed("half", 2e-3)  # within fp16's 1e-2, beyond fp32's 1e-5
    a = np.full(16, 0.5, np.float16)
    assert_matches_reference(simple_add_func(16, "float16"), [a, a], backend=target, out_idx=[-1])
    with pytest.raises(AssertionError, match=r"output 'C' \(float16\).*rtol=0.0001, atol=0.0001"):
        assert_matches_reference(
            simple_add_func(16, "float16"), [a, a], backend=target, out_idx=[-1], rtol=1e-4, atol=1e-4
        )


def test_kernel_input_reuses_out_idx(skewed):
    target = skewed("exact2", 0)
    kernel = tilecore.compile(simple_add_func(16), target="reference", out_idx=[-1])
    a = np.arange(16, dtype=np.float32)
    np.testing.assert_array_equal(assert_matches_reference(kernel, [a, a], backend=target), 2 * a)


def test_compare_arrays_rules():
    assert tolerance("int32") == (0.0, 0.0) and tolerance("float16") == (1e-2, 1e-2)
    i = np.array([1, 2, 3], np.int32)
    assert compare_arrays("x", i, i.copy(), "int32") is None
    assert "1 of 3 elements differ" in compare_arrays("x", i + np.array([0, 0, 1], np.int32), i, "int32")
    nan = np.array([np.nan, 1.0], np.float32)
    assert compare_arrays("x", nan, nan.copy(), "float32") is None
    assert compare_arrays("x", np.zeros(3), np.zeros(4), "float64") == "x: shape (3,) != reference shape (4,)"
    b = np.array([True, False])
    assert compare_arrays("x", b, ~b, "bool").startswith("x (bool): 2 of 2 elements differ")


def test_cpu_backend_matches_reference_with_torch_inputs():
    pytest.importorskip("tile_cpu", reason="the tile-cpu plugin is not installed")
    torch = pytest.importorskip("torch")
    a = torch.linspace(-1, 1, 64, dtype=torch.float32)
    c = assert_matches_reference(simple_add_func("N"), [a, a * 3], backend="cpu", out_idx=[-1])
    assert isinstance(c, torch.Tensor) and torch.allclose(c, 4 * a)


PYTEST_FILE = """
import numpy as np
from tilecore.testing import assert_matches_reference
from test_plugin_support import simple_add_func

def test_uses_fixtures(tile_target, tile_backend, tile_rng):
    assert tile_target == "reference" and tile_backend.name == "reference"
    a = tile_rng.standard_normal(16).astype(np.float32)
    assert_matches_reference(simple_add_func(16), [a, a], backend=tile_target, out_idx=[-1])
"""


def test_pytest_plugin_option_and_fixtures(tmp_path):
    (tmp_path / "test_user.py").write_text(textwrap.dedent(PYTEST_FILE))
    env = clean_env(tmp_path)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--tilecore-target=reference",
            str(tmp_path / "test_user.py"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout


def test_to_device_keeps_cpu_arrays_and_refuses_unknown_memory():
    import numpy as np

    from tilecore.testing import to_device

    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert to_device(a, "cpu") is a
    with pytest.raises(ValueError, match="npu-sram memory"):
        to_device(a, "npu-sram")
