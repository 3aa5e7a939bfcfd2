"""`tile bench`: plain kernels on cpu and npu, JSON output, an autotuned factory, and bad references."""

from __future__ import annotations

import json
import os

import pytest

from tilecore.cli.main import main

HERE = os.path.dirname(os.path.abspath(__file__))
GEMM = os.path.join(os.path.dirname(HERE), "examples", "gemm.py")


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILECORE_TARGET", raising=False)


def test_bench_prints_median_spread_and_rates_on_cpu(capsys):
    assert (
        main(
            [
                "bench",
                f"{GEMM}:matmul",
                "128",
                "128",
                "128",
                "--arg",
                "dtype='float32'",
                "--target",
                "cpu",
                "--n-repeat",
                "3",
            ]
        )
        == 0
    )
    line = capsys.readouterr().out.strip()
    assert line.startswith("main on cpu (") and "wall clock" in line
    assert "3 runs after 1 warm-up" in line and "TFLOP/s" in line and "GB/s" in line


def test_bench_json_on_npu_has_the_roofline_fractions(capsys):
    assert main(["bench", f"{GEMM}::matmul", "128", "128", "128", "--target", "npu", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["method"] == "simulated cycles" and record["runs"] == 1
    assert record["flops"] == 2 * 128**3
    assert 0 < record["flops_fraction"] <= 1 and 0 < record["bytes_fraction"] <= 1


def test_bench_tunes_an_autotuned_factory_first(capsys):
    path = os.path.join(HERE, "autotune_kernels.py")
    assert main(["bench", f"{path}::tuned_add", "2048", "--n-repeat", "3"]) == 0
    out = capsys.readouterr().out
    assert "autotune vector_add on cpu" in out and "best: #" in out
    assert out.strip().splitlines()[-1].startswith("main on cpu")


def test_bench_of_a_missing_factory_is_a_one_line_error(capsys):
    assert main(["bench", f"{GEMM}:nothing", "--target", "cpu"]) == 1
    assert "has no 'nothing'" in capsys.readouterr().err
