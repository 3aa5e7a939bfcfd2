"""Lint and types in CI: `ruff check` over the whole repository and `mypy` over the packages
[tool.mypy] names are clean (configuration: [tool.ruff] and [tool.mypy] in pyproject.toml).

`scripts/lint.sh` also runs `ruff format --check`, which is not clean yet (issue #17).
"""

import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _ruff():
    here = os.path.join(os.path.dirname(sys.executable), "ruff")
    return here if os.path.exists(here) else shutil.which("ruff")


def test_ruff_check_is_clean():
    ruff = _ruff()
    assert ruff, "ruff is not installed (requirements-dev.txt installs it)"
    res = subprocess.run(
        [ruff, "check", "--no-cache", "--output-format", "concise", ROOT], capture_output=True, text=True, cwd=ROOT
    )
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]


def test_ruff_format_is_clean():
    """Every Python file is as `ruff format` writes it (configuration in pyproject.toml)."""
    ruff = _ruff()
    assert ruff, "ruff is not installed (requirements-dev.txt installs it)"
    res = subprocess.run([ruff, "format", "--check", "--no-cache", ROOT], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]


def test_mypy_is_clean(tmp_path):
    """Every module [tool.mypy] `files` names type-checks: strict in tilecore/plugin, tilecore/ir and
    tilecore/runtime, `check_untyped_defs` elsewhere. A cold run (fresh cache) takes ~15 s on 2 cores."""
    res = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy-cache")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert "No module named mypy" not in res.stderr, "mypy is not installed (requirements-dev.txt installs it)"
    assert res.returncode == 0, res.stdout[-6000:] + res.stderr[-2000:]
