"""Issue 16, finding 8: plugin faults name the plugin and the hook; a backend name declared twice is
refused whatever the sys.path order, naming both distributions."""

from __future__ import annotations

import os
import sys

import pytest

import tilecore
from tilecore.diagnostics import PluginHookError
from tilecore.plugin import hookimpl
from tilecore.plugin.manager import register_plugin, unregister_plugin

sys.path.insert(0, os.path.dirname(__file__))
from test_plugin_support import clean_env, install_plugin, install_toy_and_broken, run_python, simple_add_func  # noqa: E402

FAULTY_PASSES = """
from tilecore.plugin import hookimpl


@hookimpl
def tilecore_passes(backend, pipeline):
    raise KeyError("pass table")
"""

FAKE_TOY = """
from tilecore.plugin import Backend, ToolchainStatus, hookimpl
from tilecore.interp import plugin as ref


@hookimpl
def tilecore_register_backends(register):
    register(Backend(name="toy", targets=("toy",), ir_versions=("1.0",),
                     capabilities=ref.make_backend().capabilities,
                     toolchain_status=lambda: ToolchainStatus(True, "impostor")))
"""


def test_fault_in_a_passes_hook_names_the_plugin_and_hook(tmp_path):
    site = install_toy_and_broken(tmp_path / "site")
    install_plugin(site, "tile-faulty", "9.9", "tile_faulty", FAULTY_PASSES, "faulty")
    env = clean_env(tmp_path, site, TILECORE_PLUGINS="toy,faulty")
    proc = run_python(
        """
        import tilecore
        from test_plugin_support import simple_add_func
        tilecore.compile(simple_add_func(32), target="reference", out_idx=[-1])
    """,
        env,
        check=False,
    )
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert "PluginHookError" in last
    assert "plugin 'faulty' (tile-faulty 9.9, entry point tile_faulty.plugin)" in last
    assert "failed in hook tilecore_passes for backend 'reference'" in last and "KeyError: 'pass table'" in last


class _CrashingCodegen:
    @hookimpl(tryfirst=True)
    def tilecore_codegen(self, backend, module, options):
        raise ZeroDivisionError("third-party codegen bug")


def test_fault_in_a_codegen_hook_is_not_blamed_on_the_backend(monkeypatch):
    monkeypatch.setenv("TILECORE_CACHE", "0")
    register_plugin(_CrashingCodegen(), name="crashy", distribution="tile-crashy", version="0.3")
    try:
        with pytest.raises(PluginHookError) as info:
            tilecore.compile(simple_add_func(32), target="reference", out_idx=[-1])
    finally:
        unregister_plugin("crashy")
    msg = str(info.value)
    assert msg.startswith("plugin 'crashy' (tile-crashy 0.3")
    assert "failed in hook tilecore_codegen for backend 'reference' compiling 'add'" in msg
    assert info.value.plugin == "crashy" and info.value.hook == "tilecore_codegen"


@pytest.mark.parametrize("impostor_first", [False, True])
def test_duplicate_backend_name_is_refused_naming_both(tmp_path, impostor_first):
    """A fake `cpu` displaced tile-cpu by sys.path order, and the error blamed tile-cpu."""
    site = install_toy_and_broken(tmp_path / "site")
    other = tmp_path / "other-site"
    install_plugin(other, "tile-impostor", "6.6.6", "tile_impostor", FAKE_TOY, "impostor")
    env = clean_env(tmp_path, site, TILECORE_PLUGINS="toy,impostor")
    paths = env["PYTHONPATH"].split(os.pathsep)
    env["PYTHONPATH"] = os.pathsep.join([str(other)] + paths if impostor_first else paths + [str(other)])
    proc = run_python(
        """
        import tilecore
        from tilecore.plugin import get_registry
        r = get_registry()
        print(sorted(r.names()))
        print([e.error for e in r.errors if e.name == "toy"][0])
        try:
            r.resolve("toy")
        except tilecore.plugin.TargetError as err:
            print(err)
    """,
        env,
    )
    names, error, resolve_error = proc.stdout.strip().splitlines()
    assert "toy" not in names
    assert "tile-impostor 6.6.6 (plugin 'impostor'" in error and "tile-toy 0.1.0 (plugin 'toy'" in error
    assert "none of them is used" in error
    assert "declared by 2 plugins" in resolve_error
