"""Both `tile new-backend` scaffolds write a package that imports, registers through its entry point
and compiles a kernel: `--kind scratch` (own codegen, starts as the reference interpreter, like
tile-npu) and `--kind toolkit` (a SIMT GPU on the lowering toolkit, like tests/plugins/tile_toygpu).
The slow install-into-a-fresh-venv test of the scratch scaffold is plugins/tile-npu/tests/test_new_backend.py."""

import os
import re
import sys

import numpy as np
import pytest

import tilecore
from tilecore.cli.main import main as tile_main
from tilecore.plugin import get_registry, reset_plugins
from tilecore.testing import assert_matches_reference, gemm_kernel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "plugins"))
from entry_point_install import install  # noqa: E402


@pytest.fixture
def scaffold(tmp_path, monkeypatch):
    """Write the scaffold of `kind` for backend `name` with `tile new-backend` and install it."""

    def make(name, kind):
        pkg = tmp_path / f"tile-{name}"
        assert tile_main(["new-backend", name, "--kind", kind, "--dir", str(pkg)]) == 0
        pyproject = (pkg / "pyproject.toml").read_text()
        entry = re.search(rf'^{name} = "tile_{name}.plugin"$', pyproject, re.M).group(0)
        install(tmp_path, monkeypatch, f"tile_{name}", entry.replace('"', ""), package_dir=str(pkg))
        return get_registry().resolve(name)[0]

    yield make
    monkeypatch.undo()
    reset_plugins()


def test_unknown_kind_is_refused(capsys):
    with pytest.raises(SystemExit):
        tile_main(["new-backend", "acme", "--kind", "fpga"])
    assert "invalid choice" in capsys.readouterr().err


def test_scratch_scaffold_registers_and_runs_like_the_reference(scaffold):
    backend = scaffold("acme_npu", "scratch")
    assert backend.distribution == "tile-acme_npu" and backend.toolchain_status().ok
    x = np.arange(64, dtype=np.float32)

    import tilecore.language as T

    @T.prim_func
    def double(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(64):
                B[i] = A[i] * 2.0

    np.testing.assert_array_equal(assert_matches_reference(double, [x], backend="acme_npu", out_idx=[-1]), 2 * x)


def test_toolkit_scaffold_registers_and_compiles_through_its_rules(scaffold):
    pytest.importorskip("tvm")
    backend = scaffold("acme_gpu", "toolkit")
    assert backend.capabilities.tiers == ("compile",)
    art = tilecore.compile(
        gemm_kernel(128, 128, 64, "float16", "float32", block_K=32, threads=128), target="acme_gpu"
    ).artifact
    assert art.meta["rules"]["Gemm"] == ["acme_gpu_gemm", "portable"]
    assert "__global__" in art.source
