"""The `tile` command end to end, in subprocesses: backends (text and JSON, with a real
entry-point plugin and a broken one), compile (--emit ir|source, factory arguments),
trace (terminal + self-contained HTML), plugin subcommands, error reporting."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from test_plugin_support import clean_env, install_toy_and_broken, run_tile  # noqa: E402

KERNELS = """
import tilecore
import tilecore.language as T


@tilecore.jit(out_idx=[-1])
def add(N, block=16, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] * 2 + B[bx * block + i]
    return main


@tilecore.jit(out_idx=[-1], target="toy")
def on_toy(N):
    return add.prim_func(N)


def plain_factory(n):
    @T.prim_func
    def twice(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            X_s = T.alloc_shared((n,), "float32")
            T.copy(X, X_s)
            for i in T.Parallel(n):
                Y[i] = X_s[i] + X_s[i] * 1
    return twice


def bad(n):
    @T.prim_func
    def broken(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            Y[0] = undefined_name + 1
    return broken
"""


@pytest.fixture
def env(tmp_path):
    site = install_toy_and_broken(tmp_path / "site")
    return clean_env(tmp_path, site)


@pytest.fixture
def kernels(tmp_path):
    path = tmp_path / "kernels.py"
    path.write_text(textwrap.dedent(KERNELS))
    return path


def test_backends_text(env):
    proc = run_tile(["backends"], env)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "tilecore 0.1.0 (Tile IR 1.0)" in out
    assert "default target: reference (fallback)" in out
    assert "\nreference  (tilecore 0.1.0)\n" in out
    assert "\ntoy  (tile-toy 0.1.0)\n" in out
    assert "  targets:     toy, toy:fast\n" in out
    assert "  IR versions: 1.0 (ok)\n" in out
    assert "  toolchain:   ok: toy toolchain ready\n" in out
    assert "  device:      toy device 0\n" in out
    assert (
        "plugins that failed to load:\n  broken (tile-broken 2.3.4, tile_broken.plugin): "
        "ImportError: tile_broken needs libbroken.so, which is not installed\n"
    ) in out


def test_backends_verbose_and_incompatible_ir(env):
    proc = run_tile(["backends", "-v"], dict(env, TOY_IR_VERSIONS="2.0"))
    assert "  IR versions: 2.0 (INCOMPATIBLE: tilecore produces 1.0)\n" in proc.stdout
    assert "    compiler: toycc 1.0\n" in proc.stdout
    assert 'raise ImportError("tile_broken needs libbroken.so' in proc.stdout  # traceback shown


def test_backends_json(env):
    proc = run_tile(["backends", "--json"], dict(env, TOY_DEVICE="1"))
    info = json.loads(proc.stdout)
    assert info["default_target"] == "toy"
    toy = next(b for b in info["backends"] if b["name"] == "toy")
    assert toy["distribution"] == "tile-toy" and toy["version"] == "0.1.0"
    assert toy["targets"] == ["toy", "toy:fast"] and toy["ir_versions"] == ["1.0"]
    assert toy["toolchain"]["ok"] is True and toy["device_present"] is True
    assert toy["plugin"] == "toy"
    (err,) = info["load_errors"]
    assert err["name"] == "broken" and err["distribution"] == "tile-broken"


def test_plugin_subcommand(env):
    proc = run_tile(["toy-hello"], env)
    assert proc.returncode == 0 and proc.stdout == "hello from toy\n"


def test_compile_emit_source_and_ir(env, kernels):
    proc = run_tile(["compile", f"{kernels}::add", "64", "--target", "toy", "--emit", "source"], env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("// toy backend\n")
    assert "T.Kernel(4" in proc.stdout  # 64 / 16 blocks
    proc = run_tile(
        [
            "compile",
            f"{kernels}::add",
            "64",
            "--arg",
            "block=32",
            "--arg",
            "dtype='float16'",
            "--target",
            "reference",
            "--emit",
            "ir",
        ],
        env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "T.Kernel(2" in proc.stdout and "float16" in proc.stdout
    assert "@T.prim_func" in proc.stdout


def test_compile_uses_the_jit_target_unless_overridden(env, kernels):
    proc = run_tile(["compile", f"{kernels}::on_toy", "32"], env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("// toy backend\n")
    proc = run_tile(["compile", f"{kernels}::on_toy", "32", "--target", "reference"], env)
    assert proc.returncode == 0 and proc.stdout.startswith("import tilecore.language as T")


def test_compile_plain_factory_to_file(env, kernels, tmp_path):
    out = tmp_path / "twice.txt"
    proc = run_tile(["compile", f"{kernels}::plain_factory", "8", "-o", str(out)], env)
    assert proc.returncode == 0, proc.stderr
    assert "def twice" in out.read_text()


def test_compile_errors_are_reported_without_traceback(env, kernels):
    proc = run_tile(["compile", f"{kernels}::bad", "8"], env)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert f"{kernels}:" in proc.stderr and "undefined_name" in proc.stderr
    proc = run_tile(["compile", f"{kernels}::nosuch"], env)
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"error: {kernels} has no 'nosuch'; it defines: T, add, bad, on_toy, ")
    proc = run_tile(["compile", f"{kernels}"], env)
    assert proc.stderr.startswith("error: expected FILE::FUNC")
    proc = run_tile(["compile", f"{kernels}::add", "64", "--target", "nosuch"], env)
    assert proc.returncode == 1 and proc.stderr.startswith("error: unknown target 'nosuch'")
    proc = run_tile(["compile", f"{kernels}::add", "64", "--arg", "oops"], env)
    assert proc.stderr.startswith("error: --arg expects name=value, got 'oops'")


def test_trace_terminal_and_html(env, kernels, tmp_path):
    html_path = tmp_path / "trace.html"
    proc = run_tile(["trace", f"{kernels}::plain_factory", "8", "--target", "reference", "--html", str(html_path)], env)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("==== input ")
    assert "==== after pass 2: check_types " in out
    assert "simplify" in out and "bounds" in out
    page = html_path.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<style>" in page
    assert "<script" not in page and "http://" not in page and "https://" not in page
    assert page.count("<h2 id='step") == out.count("==== ")
    # simplify drops "* 1"; bounds proves the copy in bounds: both show up as diffs
    assert page.count('<table class="diff"') == 2 and "diff_chg" in page
    # the line number in the written file, found by content (robust to KERNELS' indentation)
    line = next(
        n for n, text in enumerate(textwrap.dedent(KERNELS).splitlines(), start=1) if text.strip() == "T.copy(X, X_s)"
    )
    assert f"T.copy(X -&gt; X_s) at line {line}: predicated (bounds not proven)" in page
    assert f"T.copy(X -&gt; X_s) at line {line}: bounds proven" in page
    assert out.count("(unchanged)") == out.count("==== ") - 3


def test_cache_info_and_clear(env, kernels):
    assert run_tile(["compile", f"{kernels}::add", "64", "--target", "toy"], env).returncode == 0
    proc = run_tile(["cache"], env)
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert lines[0] == f"cache: {env['TILECORE_CACHE_DIR']}" and lines[1] == "state: on"
    assert lines[2].startswith("entries: 1, native objects: 0, temporary files: 0 (")
    proc = run_tile(["cache", "clear"], env)
    assert proc.stdout.startswith(f"removed 1 file(s) from {env['TILECORE_CACHE_DIR']} (")
    assert (
        run_tile(["cache", "info"], env).stdout.splitlines()[2]
        == "entries: 0, native objects: 0, temporary files: 0 (0.0 MB)"
    )


def test_no_command_prints_help(env):
    proc = run_tile([], env)
    assert proc.returncode == 2 and "backends" in proc.stdout and "trace" in proc.stdout


@pytest.mark.skipif(
    not shutil.which("tile", path=os.path.dirname(sys.executable)),
    reason="the tile console script is not installed in this environment",
)
def test_console_script(env):
    tile = shutil.which("tile", path=os.path.dirname(sys.executable))
    proc = subprocess.run([tile, "backends"], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "reference" in proc.stdout


def test_loading_a_file_imports_its_neighbours_and_leaves_sys_path_as_it_was(tmp_path):
    """A kernel file may import the modules beside it, but its folder must not stay on sys.path:
    workers started later inherit sys.path, and a `typing.py` there (an editor buffer, say)
    once shadowed the standard library in every conformance worker."""
    from tilecore.cli.loading import load_object

    (tmp_path / "typing.py").write_text("broken = (\n")
    (tmp_path / "helper_mod_for_loading.py").write_text("VALUE = 41\n")
    (tmp_path / "kern.py").write_text("import helper_mod_for_loading\nANSWER = helper_mod_for_loading.VALUE + 1\n")
    before = list(sys.path)
    assert load_object(f"{tmp_path / 'kern.py'}::ANSWER") == 42
    assert sys.path == before
    out = subprocess.run(
        [sys.executable, "-c", "import typing; print(typing.Any)"],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
