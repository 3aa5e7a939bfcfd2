"""Lint in CI: `ruff check` over the whole repository is clean (rules: [tool.ruff] in pyproject.toml).

`scripts/lint.sh` also runs `ruff format --check` and mypy, which are not clean yet (issue #17);
this test keeps the lint rules that are clean from regressing.
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
    res = subprocess.run([ruff, "check", "--no-cache", "--output-format", "concise", ROOT],
                         capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
