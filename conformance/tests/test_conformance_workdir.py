"""Issue 16, finding 4: the conformance working folder executed files that were already in it."""

from __future__ import annotations

import hashlib
import os

import pytest

from tile_conformance import execute
from tilecore.runtime.folders import UnsafeFolderError

SOURCE = """import tilecore.language as T


@T.prim_func
def main(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
    with T.Kernel(1) as bx:
        for i in T.Parallel(16):
            B[i] = A[i]
"""


@pytest.fixture
def fresh_workdir(monkeypatch, tmp_path):
    monkeypatch.setenv("TILE_CONFORMANCE_WORKDIR", str(tmp_path / "work"))
    return tmp_path / "work"


def test_files_already_in_the_workdir_are_never_executed(fresh_workdir, tmp_path):
    marker = tmp_path / "executed.txt"
    digest = hashlib.sha256(SOURCE.encode()).hexdigest()[:16]
    fresh_workdir.mkdir(mode=0o700)
    planted = fresh_workdir / f"prog_{digest}.py"  # the name the suite used to reuse
    planted.write_text(f"open({str(marker)!r}, 'w').write('ran')\n" + SOURCE)
    func = execute.load_source(SOURCE)
    assert func.name == "main" and not marker.exists()
    folder = execute.workdir()
    assert os.path.dirname(folder) == str(fresh_workdir) and folder != str(fresh_workdir)
    assert os.stat(folder).st_mode & 0o777 == 0o700


def test_a_workdir_others_can_write_is_refused(fresh_workdir):
    fresh_workdir.mkdir()
    os.chmod(fresh_workdir, 0o777)
    with pytest.raises(UnsafeFolderError, match="conformance working folder .* other users can write it"):
        execute.workdir()


def test_workdir_is_removed_at_exit_even_after_a_sigkill(tmp_path):
    """1,751 `tile-conformance-*` folders of generated programs had piled up in /tmp: the working
    folder was never removed. Now it goes at exit, and a killed run's folder with the next run."""
    import signal
    import subprocess
    import sys

    base = tmp_path / "work"
    base.mkdir(mode=0o700)
    code = (
        "import os, signal, sys\nfrom tile_conformance import execute\n"
        f"execute.load_source({SOURCE!r})\nprint(execute.workdir(), flush=True)\n"
        "if sys.argv[1] == 'kill': os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    env = dict(os.environ, TILE_CONFORMANCE_WORKDIR=str(base))

    def run(how):
        return subprocess.run([sys.executable, "-c", code, how], env=env, capture_output=True, text=True, timeout=300)

    killed = run("kill")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    orphan = killed.stdout.strip()
    assert os.listdir(orphan)  # the program file stayed behind
    finished = run("exit")
    assert finished.returncode == 0, finished.stderr
    assert not os.path.exists(orphan) and not os.path.exists(finished.stdout.strip())
    assert os.listdir(base) == []
