"""tilecore.autotune(executor="ray") on a real local Ray cluster (2 CPUs): candidates compile as Ray
tasks, a crashing one is named and skipped, the winner is checked, timed and correct."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import tilecore
from tilecore.autotune import report as R

ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'tilecore[ray]'")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import autotune_faults  # noqa: E402
import autotune_kernels  # noqa: E402


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILECORE_CACHE", raising=False)


@pytest.fixture
def local_ray():
    path = os.pathsep.join(p for p in sys.path if p)
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": path, "TILECORE_CACHE_DIR": os.environ["TILECORE_CACHE_DIR"] + "-ray"}},
    )
    yield
    ray.shutdown()


@pytest.fixture
def faults_plugin():
    from tilecore.plugin.manager import register_plugin, unregister_plugin

    name = register_plugin(autotune_faults, "autotune_faults")
    yield
    unregister_plugin(name)


def test_ray_executor_compiles_on_workers_and_skips_a_crashing_candidate(local_ray, faults_plugin):
    configs = [{"block": 64, "mode": "crash"}, {"block": 64}, {"block": 128, "mode": "miscompile"}, {"block": 256}]
    tuned = tilecore.autotune(configs=configs, executor="ray", timeout=300, warmup=1, rep=5)(
        autotune_kernels.vector_add
    )
    kernel = tuned(4096)
    report = tuned.last_report
    status = [c.status for c in report.candidates]
    assert status == [R.CRASHED, R.OK, R.WRONG, R.OK]
    assert "Ray worker" in report.candidates[0].message
    assert report.best_index in (1, 3)
    # the candidates compiled on Ray workers (their own cache folder, set in local_ray)
    worker_cache = os.environ["TILECORE_CACHE_DIR"] + "-ray"
    assert any(name.endswith(".tcc") for _, _, names in os.walk(worker_cache) for name in names)
    a, b = np.random.default_rng(1).standard_normal((2, 4096), dtype=np.float32)
    np.testing.assert_allclose(kernel(a, b), a + b, rtol=1e-6)
