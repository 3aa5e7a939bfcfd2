"""tilecore.autotune on the cpu backend: faulty candidates skipped and named, the winner checked,
timed and stored, a second process loading it without tuning, Triton-style `key=`, and config errors.

Compiles run in real worker processes (spawned, so each test pays a few seconds of compiler
start-up); the faults come from a real plugin (autotune_faults.py) registered in this process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import tilecore
from tilecore.autotune import report as R
from tilecore.diagnostics import TileError

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import autotune_faults  # noqa: E402
import autotune_kernels  # noqa: E402


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILECORE_CACHE", raising=False)


@pytest.fixture
def faults_plugin():
    from tilecore.plugin.manager import register_plugin, unregister_plugin

    name = register_plugin(autotune_faults, "autotune_faults")
    yield
    unregister_plugin(name)


def test_crashing_hanging_wrong_and_invalid_candidates_are_skipped_and_named(faults_plugin):
    configs = [
        {"block": 64, "mode": "hang"},
        {"block": 64, "mode": "crash"},
        {"block": 128},
        {"block": 64, "mode": "miscompile"},
        {"block": 48},
        {"block": 64},
    ]
    tuned = tilecore.autotune(configs=configs, timeout=6, warmup=1, rep=5)(autotune_kernels.vector_add)
    kernel = tuned(4096)
    report = tuned.last_report
    status = {c.index: c.status for c in report.candidates}
    assert status == {0: R.TIMEOUT, 1: R.CRASHED, 2: R.OK, 3: R.WRONG, 4: R.INVALID, 5: R.OK}
    messages = {c.index: c.message for c in report.candidates}
    assert "timeout=6" in messages[0]
    assert "SIGABRT" in messages[1]
    assert "differ from the reference" in messages[3]
    assert "power of two" in messages[4]
    assert report.best_index in (2, 5)
    summary = report.summary()
    for index in (0, 1, 3, 4):
        assert f"#{index} " in summary and "SKIPPED" in summary
    a, b = np.random.default_rng(0).standard_normal((2, 4096), dtype=np.float32)
    np.testing.assert_allclose(kernel(a, b), a + b, rtol=1e-6)


def test_user_reference_rejects_a_wrong_configuration_and_the_winner_is_reused(tmp_path):
    configs = [{"block": 64, "scale": 2.0}, {"block": 128}, {"block": 256}]
    tuned = tilecore.autotune(configs=configs, warmup=1, rep=5, timeout=300, ref_prog=lambda a, b: a + b)(
        autotune_kernels.vector_add
    )
    seen = []
    tuned.settings.ref_prog = lambda a, b: seen.append(a.copy()) or a + b
    given = np.random.default_rng(5).standard_normal((2, 2048), dtype=np.float32)
    with tilecore.autotune.set_autotune_inputs(given[0], given[1]):  # TileLang's way to give inputs
        kernel = tuned(2048)
    np.testing.assert_array_equal(seen[0], given[0])
    report = tuned.last_report
    assert not report.from_cache
    assert report.candidates[0].status == R.WRONG
    assert report.best_index in (1, 2)
    assert all(c.median_ms > 0 for c in report.candidates if c.status == R.OK)
    a, b = np.ones((2, 2048), dtype=np.float32)
    np.testing.assert_array_equal(kernel(a, b), a + b)

    # a second tuner in a fresh process finds the winner in the tuning cache and does not tune
    script = (
        "import sys, json, time; sys.path.insert(0, %r)\n"
        "import tilecore, autotune_kernels\n"
        "tuned = tilecore.autotune(configs=%r, warmup=1, rep=5, timeout=300,\n"
        "                          ref_prog=lambda a, b: a + b)(autotune_kernels.vector_add)\n"
        "kernel = tuned(2048)\n"
        "print(json.dumps({'from_cache': tuned.last_report.from_cache,\n"
        "                  'config': tuned.last_report.best_config}))\n"
    ) % (HERE, configs)
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=dict(os.environ)
    )
    assert out.returncode == 0, out.stderr
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert loaded == {"from_cache": True, "config": report.best_config}


def test_key_names_the_arguments_that_select_a_tuning_entry():
    configs = [{"block": 64}, {"block": 128}]
    tuned = tilecore.autotune(configs=configs, key=["n"], warmup=1, rep=3, workers=1, timeout=300)(
        autotune_kernels.vector_add
    )
    tuned(1024)
    first = tuned.last_report
    assert not first.from_cache
    # `scale` is not in key: the same entry serves it (Triton's key semantics), through a second
    # tuner that has only the disk cache in common with the first
    again = tilecore.autotune(configs=configs, key=["n"], warmup=1, rep=3, timeout=300)(autotune_kernels.vector_add)
    kernel = again(1024, scale=3.0)
    assert again.last_report.from_cache
    assert again.last_report.best_config == first.best_config
    a, b = np.ones((2, 1024), dtype=np.float32)
    np.testing.assert_array_equal(kernel(a, b), 3 * (a + b))


def test_configuration_mistakes_are_clear_errors():
    with pytest.raises(TileError, match="'blok', which vector_add\\(\\) does not take"):
        tilecore.autotune(configs=[{"blok": 64}])(autotune_kernels.vector_add)(1024)
    with pytest.raises(TileError, match="block given in the call but also tuned"):
        tilecore.autotune(configs=[{"block": 64}])(autotune_kernels.vector_add)(1024, block=32)
    with pytest.raises(TileError, match="key= names m"):
        tilecore.autotune(configs=[{"block": 64}], key=["m"])(autotune_kernels.vector_add)(1024)
    with pytest.raises(TileError, match="configs are empty"):
        tilecore.autotune(configs=lambda n: [])(autotune_kernels.vector_add)(1024)
    with pytest.raises(TileError, match="executor must be"):
        tilecore.autotune(configs=[{"block": 64}], executor="dask")(autotune_kernels.vector_add)


def test_every_candidate_failing_is_an_error_that_lists_them():
    tuned = tilecore.autotune(configs=[{"block": 3}, {"block": 5}])(autotune_kernels.vector_add)
    with pytest.raises(TileError, match="no configuration compiled") as info:
        tuned(1024)
    assert "#0" in str(info.value) and "#1" in str(info.value) and "power of two" in str(info.value)


def test_progress_bar_stays_quiet_off_a_terminal(capsys):
    from tilecore.autotune.progress import progress

    with progress("compiling 3 candidates", 3) as advance:
        for _ in range(3):
            advance()
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


def test_tilelang_spelling_works_on_the_module():
    import tilecore.autotune as module

    tuner = module(configs=[{"block": 64}])(autotune_kernels.vector_add)  # `tilelang.autotune(...)`
    assert isinstance(tuner, module.AutoTuner) and tilecore.autotune is module


def test_autotune_on_the_npu_simulator_times_in_simulated_cycles():
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
    from gemm import matmul

    on_npu = tilecore.jit(out_idx=[-1], target="npu")(matmul.factory)
    tuned = tilecore.autotune(configs=[{"block_M": 32, "block_N": 32}, {"block_M": 64, "block_N": 64}], timeout=300)(
        on_npu
    )
    kernel = tuned(128, 128, 128)
    report = tuned.last_report
    assert report.method == "simulated cycles" and [c.status for c in report.candidates] == [R.OK, R.OK]
    best = min(report.candidates, key=lambda c: c.median_ms)
    assert report.best_index == best.index and kernel.target == "npu"


def test_runoff_times_the_closest_candidates_again_among_themselves():
    """After the interleaved rounds, the candidates within `runoff` of the fastest (at most
    `finalists`) are timed again head to head; the rest keep their first timing. The three
    configurations of a small GEMM run on the reference interpreter (no compiler to wait for);
    with a wide run-off window all are close and `finalists` alone decides how many run off."""
    from tilecore.autotune.measure import MeasureSettings, measure_candidates
    from tilecore.ir.serialize import dumps

    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
    from gemm import matmul

    candidates = [
        (i, dumps(matmul.prim_func(32, 32, 32, bm, bm, 16, dtype="float32", accum="float32")))
        for i, bm in enumerate((8, 16, 32))
    ]
    quick = dict(warmup=1, rep=4, rounds=2, skip_check=True)
    two = measure_candidates(candidates, "reference", [-1], {}, MeasureSettings(**quick, runoff=100.0, finalists=2))
    assert [m.status for m in two] == [R.OK] * 3
    assert sum(m.runoff for m in two) == 2
    none = measure_candidates(candidates, "reference", [-1], {}, MeasureSettings(**quick, runoff=0.0))
    assert not any(m.runoff for m in none)


def test_the_winner_comes_from_the_runoff():
    """A candidate left out of the run-off never wins on its first, noisier timing."""
    first_pass_only = R.Candidate(0, {"x": 0}, median_ms=1.0)
    finalists = [
        R.Candidate(1, {"x": 1}, median_ms=1.2, runoff=True),
        R.Candidate(2, {"x": 2}, median_ms=1.1, runoff=True),
    ]
    assert R.fastest([first_pass_only, *finalists]).index == 2
    assert R.fastest([first_pass_only, R.Candidate(3, {"x": 3}, median_ms=1.5)]).index == 0
