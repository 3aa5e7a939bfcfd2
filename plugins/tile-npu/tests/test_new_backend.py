"""`tile new-backend NAME` writes a plugin that installs into a fresh venv, is listed, and passes its tests.

Offline and fast: the fresh virtual environment reaches tilecore, numpy,
pytest and the conformance suite through a .pth file that adds this
environment's site-packages (`site.addsitedir`), and the generated package is
installed with `pip --no-deps --no-build-isolation --no-index`.
"""

import os
import subprocess
import sys
import sysconfig

import pytest

from tilecore.cli import new_backend
from tilecore.cli.main import main as tile_main


def test_rejects_bad_names(capsys):
    assert tile_main(["new-backend", "Bad-Name"]) == 2
    assert "lower case" in capsys.readouterr().err
    with pytest.raises(ValueError):
        new_backend.check_name("class")


def test_refuses_to_overwrite(tmp_path, capsys):
    (tmp_path / "tile-x").mkdir()
    (tmp_path / "tile-x" / "keep.txt").write_text("mine")
    assert tile_main(["new-backend", "x", "--dir", str(tmp_path / "tile-x")]) == 1
    assert "not empty" in capsys.readouterr().err


@pytest.mark.slow
def test_generated_plugin_installs_lists_and_passes_its_tests(tmp_path):
    pkg = tmp_path / "tile-acme_npu"
    assert tile_main(["new-backend", "acme_npu", "--dir", str(pkg)]) == 0
    assert (pkg / "pyproject.toml").read_text().count('acme_npu = "tile_acme_npu.plugin"') == 1
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    site_dir = subprocess.run(
        [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    host = sysconfig.get_paths()["purelib"]
    with open(os.path.join(site_dir, "_tilecore_host.pth"), "w") as f:
        f.write(f"import site; site.addsitedir({host!r})\n")
    env = dict(
        os.environ,
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        TILE_CONFORMANCE_EXAMPLES="16",
        TILECORE_CACHE_DIR=str(tmp_path / "cache"),
    )
    env.pop("TILECORE_PLUGINS", None)
    subprocess.run(
        [py, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index", "-e", str(pkg)],
        check=True,
        env=env,
        capture_output=True,
    )
    # installed into the fresh venv only
    assert any(n.startswith("tile_acme_npu") for n in os.listdir(site_dir))
    listed = subprocess.run([py, "-m", "tilecore.cli", "backends"], env=env, capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    assert "acme_npu  (tile-acme_npu 0.1.0)" in listed.stdout or "acme_npu" in listed.stdout
    tests = subprocess.run(
        [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(pkg / "tests")],
        env=env,
        capture_output=True,
        text=True,
        cwd=str(pkg),
    )
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-2000:]
    assert "3 passed" in tests.stdout
