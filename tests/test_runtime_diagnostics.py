"""Errors through the compile flow and at call time point at the user's source line:
argument errors show the parameter's declaration; a backend's missing feature and its
shared-memory limit are reported at the culprit's line, naming the backend."""

from __future__ import annotations

import importlib.util
import textwrap

import numpy as np
import pytest

import tilecore
from tilecore.diagnostics import TileCompileError, TileRuntimeError, UnsupportedFeatureError
from tilecore.interp import plugin as ref
from tilecore.plugin import Backend, hookimpl, register_plugin, unregister_plugin

SOURCE = """
import tilecore
import tilecore.language as T


@tilecore.jit(out_idx=[-1], target="reference")
def scale(n, factor=2.0):
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            X_s = T.alloc_shared((n,), "float32")
            T.copy(X, X_s)
            for i in T.Parallel(n):
                Y[i] = X_s[i] * factor
    return main
"""


@pytest.fixture
def module(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "user_kernels.py"
    path.write_text(textwrap.dedent(SOURCE))
    spec = importlib.util.spec_from_file_location("user_kernels_rt_diag", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, str(path)


def _line_of(text):
    return textwrap.dedent(SOURCE).splitlines().index(text) + 1


class Limited:
    """The reference interpreter declared as "limited" (no T.Parallel) and "small" (64 bytes
    of shared memory)."""

    @hookimpl
    def tilecore_register_backends(self, register):
        base = ref.make_backend()
        caps = base.capabilities.__dict__
        for name, change in (
            ("limited", {"features": base.capabilities.features - {"parallel"}}),
            ("small", {"max_shared_memory": 64}),
        ):
            register(
                Backend(
                    name=name,
                    targets=(name,),
                    ir_versions=base.ir_versions,
                    capabilities=base.capabilities.__class__(**{**caps, **change}),
                    toolchain_status=base.toolchain_status,
                )
            )


@pytest.fixture
def limited():
    name = register_plugin(Limited(), name="limited-plugin")
    yield "limited"
    unregister_plugin(name)


def test_argument_error_points_at_the_parameter(module):
    mod, path = module
    kernel = mod.scale(8)
    np.testing.assert_allclose(kernel(np.ones(8, np.float32)), 2.0)
    with pytest.raises(TileRuntimeError) as e:
        kernel(np.ones(8, np.float64))
    line = _line_of('    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):')
    head, code, caret = str(e.value).splitlines()
    assert head.startswith(f"{path}:{line}:")
    assert head.endswith(": error: kernel 'main', argument 'X': expected dtype float32, got float64")
    assert code.strip().startswith("def main(X: T.Tensor")
    col = int(head.split(":")[2])
    assert caret.index("^") == code.index("X: T.Tensor") == col - 1 + 4


def test_unsupported_feature_names_backend_feature_and_line(module, limited):
    mod, path = module
    with pytest.raises(UnsupportedFeatureError) as e:
        tilecore.compile(mod.scale.prim_func(8), target=limited, out_idx=[-1])
    assert e.value.backend == "limited" and e.value.feature == "T.Parallel"
    head = str(e.value).splitlines()[0]
    assert head.startswith(f"{path}:{_line_of('            for i in T.Parallel(n):')}:")
    assert "backend limited does not support" in head


def test_shared_memory_over_the_backend_limit(module, limited):
    mod, path = module
    with pytest.raises(TileCompileError) as e:
        tilecore.lower(mod.scale.prim_func(32), target="small")  # 128 bytes of shared memory
    head = str(e.value).splitlines()[0]
    line = _line_of('            X_s = T.alloc_shared((n,), "float32")')
    assert head.startswith(f"{path}:{line}:")
    assert "64" in head and "128" in head and "shared" in head
