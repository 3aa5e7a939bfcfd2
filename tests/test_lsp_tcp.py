"""`tile lsp --tcp`: the same server over a TCP socket, with a real LSP client."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("pygls", reason="the lsp extra (pygls) is not installed")

from tilecore.lsp.client import TileLspClient  # noqa: E402

BROKEN = """import tilecore.language as T


@T.prim_func
def scale(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=64) as bx:
        A_s = T.alloc_shared((64,), "float32")
        T.copy(A, A_s)
        T.copy(A_s, B_missing)
"""


def test_tcp_mode_serves_diagnostics(tmp_path):
    server = subprocess.Popen(
        [sys.executable, "-m", "tilecore.cli.main", "lsp", "--tcp", "--port", "0"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = server.stderr.readline()
        match = re.search(r"listening on (\S+):(\d+)", line)
        assert match, f"no address announced: {line!r}"
        client = TileLspClient(tcp=(match.group(1), int(match.group(2))))
        try:
            path = os.path.join(tmp_path, "scale.py")
            uri = client.open(path, BROKEN)
            diagnostics, _ = client.diagnostics(uri)
            assert len(diagnostics) == 1
            d = diagnostics[0]
            assert d.range.start.line == 8 and d.range.start.character == BROKEN.splitlines()[8].index("B_missing")
            assert "B_missing" in d.message
            version = client.change(uri, BROKEN.replace("B_missing", "B"))
            assert client.diagnostics(uri, version)[0] == []
        finally:
            client.stop()
        assert server.wait(timeout=60) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
