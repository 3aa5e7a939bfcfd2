"""The examples: each check passes on the reference backend; run_all.py reports and fails properly."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import types

import numpy as np
import pytest

EXAMPLES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
sys.path.insert(0, EXAMPLES_DIR)


@pytest.mark.parametrize("name", ["gemm", "softmax", "layernorm", "flash_attention"])
def test_example_checks_pass_on_reference(name):
    module = importlib.import_module(name)
    results = module.check(target="reference")
    assert results, f"{name}.check() ran no checks"
    for r in results:
        assert r.passed, r.line()
        assert r.error > 0 or "float32" in r.name  # fp16/bf16 results are never bit-exact


def test_gemm_example_covers_partial_tiles():
    gemm = importlib.import_module("gemm")
    names = [r.name for r in gemm.check(target="reference")]
    assert any("200x200x200 tiles 64x64x32 float32" in n for n in names)


def test_flash_attention_example_covers_the_issue_shapes():
    fa = importlib.import_module("flash_attention")
    names = [r.name for r in fa.check(target="reference")]
    for causal in ("causal", "full"):
        assert any(f"B=1 H=2 S=256 D=64 {causal}" in n for n in names)


def test_compare_is_relative_to_the_largest_reference_value():
    common = importlib.import_module("common")
    ref = np.array([1000.0, 1e-3])
    r = common.compare("x", ref + np.array([0.0, 1e-3]), ref, 1e-5)
    assert r.passed and abs(r.error - 1e-6) < 1e-12
    assert not common.compare("nan", np.array([np.nan]), np.array([1.0]), 1.0).passed
    assert not common.compare("shape", np.zeros(2), np.zeros(3), 1.0).passed


def test_run_all_on_reference_exits_zero_and_prints_a_line_per_check():
    proc = subprocess.run(
        [
            sys.executable,
            os.path.join(EXAMPLES_DIR, "run_all.py"),
            "--target",
            "reference",
            "--only",
            "softmax",
            "layernorm",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(("PASS", "FAIL"))]
    # softmax: 3 checks, layernorm: 4 (the last one with W and Bias loaded early)
    assert len(lines) == 7 and all(ln.startswith("PASS") and "vs numpy" in ln for ln in lines)
    assert "7/7 checks passed" in proc.stdout


def test_run_all_exits_nonzero_when_a_check_fails(monkeypatch, capsys):
    common = importlib.import_module("common")
    run_all = importlib.import_module("run_all")
    bad = types.ModuleType("always_wrong_example")
    bad.check = lambda target=None: [common.compare("always wrong", np.ones(3), np.zeros(3) + 2, 1e-5)]
    broken = types.ModuleType("raising_example")

    def explode(target=None):
        raise RuntimeError("boom")

    broken.check = explode
    monkeypatch.setitem(sys.modules, "always_wrong_example", bad)
    monkeypatch.setitem(sys.modules, "raising_example", broken)
    monkeypatch.setattr(run_all, "EXAMPLES", ("always_wrong_example", "raising_example"))
    assert run_all.main(["--target", "reference"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  always wrong" in out and "FAIL  raising_example: RuntimeError: boom" in out
    assert "0/2 checks passed, 2 FAILED" in out


def test_checks_compare_other_backends_with_the_reference_interpreter():
    """A backend whose output drifts from the reference fails the check even when
    the numpy formula alone would accept it."""
    common = importlib.import_module("common")
    softmax = importlib.import_module("softmax")
    kernel = common.build(softmax.softmax, "reference", 64, 128, 16, dtype="float32")
    assert kernel.reference is None  # on the reference itself there is nothing to pair with

    reference = kernel.kernel

    class Drifting:  # a backend whose results are off by 5e-5 relative
        backend = reference.backend

        def __call__(self, x):
            return reference(x) * (1 + 5e-5)

    drifting = common.CheckedKernel(Drifting(), reference)
    x = np.random.default_rng(0).uniform(-4, 4, (64, 128)).astype(np.float32)
    out = drifting(x)
    result = common.compare("drift", out, softmax.reference(x), 1e-3, drifting)
    assert result.passed and 4e-5 < result.reference_error < 6e-5
    strict = common.compare("drift", out, softmax.reference(x), 1e-5, drifting)
    assert not strict.passed and "vs reference" in strict.line()
