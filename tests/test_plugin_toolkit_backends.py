"""Vendors build on the lowering toolkit without editing tilecore: the out-of-tree test plugins
under tests/plugins, installed through the real entry-point discovery (a dist-info folder with an
entry_points.txt on sys.path), add a SIMT backend (`toygpu`) and override one rule of `cuda`."""

import difflib
import os
import re
import sys

import pytest

pytest.importorskip("tvm")

import tilecore  # noqa: E402
from tilecore.plugin import get_registry, reset_plugins  # noqa: E402
from tilecore.testing import gemm_kernel  # noqa: E402

PLUGINS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plugins")
sys.path.insert(0, PLUGINS)  # pytest runs with --import-mode=importlib
from entry_point_install import install  # noqa: E402


@pytest.fixture
def toygpu(tmp_path, monkeypatch):
    install(tmp_path, monkeypatch, "tile_toygpu", "toygpu = tile_toygpu.plugin")
    yield get_registry().resolve("toygpu")[0]
    monkeypatch.undo()
    reset_plugins()


@pytest.fixture
def cuda_override(tmp_path, monkeypatch):
    def enable():
        install(tmp_path, monkeypatch, "tile_cuda_override", "cuda-fill = tile_cuda_override.plugin")

    yield enable
    monkeypatch.undo()
    reset_plugins()


def test_toygpu_is_discovered_through_its_entry_point(toygpu):
    assert toygpu.distribution == "tile-toygpu"
    assert toygpu.capabilities.tiers == ("compile",)


def test_toygpu_gemm_takes_its_own_rule_and_tanh_its_own_intrinsic(toygpu):
    import tilecore.language as T

    art = tilecore.compile(
        gemm_kernel(128, 128, 64, "float16", "float32", block_K=32, threads=128), target="toygpu"
    ).artifact
    assert art.meta["rules"]["Gemm"] == ["toy_outer_product", "portable"]
    assert any(n.startswith("toygpu: T.gemm into") for n in art.meta["notes"])

    @T.prim_func
    def act(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(256):
                B[i] = T.tanh(A[i])

    src = tilecore.compile(act, target="toygpu").artifact.source
    assert "tanh" not in src and "__expf" not in src and "exp" in src


def test_toygpu_passes_the_compile_tier_at_a_small_budget(toygpu):
    """Every generated program toygpu declares compiles (certification needs 100 programs and the
    must-pass features, atomics among them; a CI-sized run checks that nothing fails)."""
    run_suite = pytest.importorskip("tile_conformance.runner").run_suite
    from tile_conformance.report import to_markdown

    # the families toygpu can take (no atomics); programs in dtypes it does not declare are unsupported
    families = ("ewise", "copy", "reduce", "gemm", "cumsum", "control", "chain", "convert", "math")
    report = run_suite("toygpu", examples=45, seed=0, tier="compile", shrink=False, families=families)
    totals = report["totals"]
    assert totals.get("fail", 0) == 0 and totals.get("suite_error", 0) == 0, to_markdown(report)
    assert totals["pass"] >= 20, to_markdown(report)
    assert report["features"]["gemm"]["pass"] >= 1, to_markdown(report)


def _cuda_source(func, arch="sm_80"):
    from tile_cuda import compiler

    low, _ = tilecore.lower(func, target=f"cuda:{arch}")
    return compiler.generate_source(low, arch, {})[0]


def test_cuda_override_changes_only_the_fill(cuda_override):
    func = gemm_kernel(256, 256, 128, "float16", "float32", block_K=32, threads=128)
    before = _cuda_source(func)
    cuda_override()
    after = _cuda_source(func)
    assert "override_fill<" not in before and re.search(r"override_fill<\d+>\(", after)
    changed = [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    removed = [line[1:] for line in changed if line.startswith("-")]
    added = [line[1:] for line in changed if line.startswith("+")]
    # the portable fill (stores of 0 into C's registers) gives way to one helper call
    assert removed and all(
        r.strip().startswith("C_f_ptr[") and r.endswith("= 0x0p+0f/*0.000000e+00*/;") for r in removed
    ), removed
    from tile_cuda_override.plugin import HELPER

    assert all("override_fill" in a or a in HELPER.splitlines() for a in added), added
    for needle in ("tc::gemm_ss<", "tc::cp_async16(", "tc::cp_async_wait<"):
        assert before.count(needle) == after.count(needle) > 0
