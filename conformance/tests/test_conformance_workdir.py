"""Issue 16, finding 4: the conformance working folder executed files that were already in it."""
from __future__ import annotations

import hashlib
import os

import pytest

from tile_conformance import execute
from tilecore.runtime.folders import UnsafeFolderError

SOURCE = '''import tilecore.language as T


@T.prim_func
def main(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
    with T.Kernel(1) as bx:
        for i in T.Parallel(16):
            B[i] = A[i]
'''


@pytest.fixture
def fresh_workdir(monkeypatch, tmp_path):
    monkeypatch.setattr(execute, "_WORKDIR", None)
    monkeypatch.setenv("TILE_CONFORMANCE_WORKDIR", str(tmp_path / "work"))
    yield tmp_path / "work"
    monkeypatch.setattr(execute, "_WORKDIR", None)


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
