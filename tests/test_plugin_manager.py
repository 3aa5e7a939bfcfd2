"""Plugin discovery through real entry points, the allowlist, the autoload switch, load errors,
the backend registry, default-target order and the Tile IR version check."""

from __future__ import annotations

import json
import os
import sys

import pytest

from tilecore.plugin import Backend, Capabilities, ToolchainStatus, hookimpl
from tilecore.plugin.manager import TilecorePluginManager
from tilecore.plugin.registry import (
    BackendRegistry,
    IRVersionMismatchError,
    TargetError,
    check_ir_version,
    ir_version_accepted,
)

sys.path.insert(0, os.path.dirname(__file__))
from test_plugin_support import clean_env, install_toy_and_broken, last_json, run_python  # noqa: E402

LIST_BACKENDS = """
import json
from tilecore.plugin.registry import get_registry
r = get_registry()
print(json.dumps({"backends": r.names(),
                  "dists": {n: [b.distribution, b.version] for n, b in r.backends.items()},
                  "errors": [e.to_dict() for e in r.errors]}))
"""


@pytest.fixture
def site(tmp_path):
    return install_toy_and_broken(tmp_path / "site")


def test_entry_point_plugin_is_discovered_and_broken_one_reported(tmp_path, site):
    env = clean_env(tmp_path, site)
    del env["TILECORE_PLUGINS"]  # everything installed loads (here and in the venv)
    out = last_json(run_python(LIST_BACKENDS, env).stdout)
    assert "toy" in out["backends"] and "reference" in out["backends"]
    assert out["dists"]["toy"] == ["tile-toy", "0.1.0"]
    assert out["dists"]["reference"][0] == "tilecore"
    (broken,) = [e for e in out["errors"] if e["name"] == "broken"]
    assert broken["name"] == "broken"
    assert broken["distribution"] == "tile-broken" and broken["version"] == "2.3.4"
    assert broken["entry_point"] == "tile_broken.plugin"
    assert broken["error"] == "ImportError: tile_broken needs libbroken.so, which is not installed"


def test_import_tilecore_does_not_load_plugins(tmp_path, site):
    code = """
    import sys, tilecore
    print(sorted(m for m in sys.modules if m.startswith(("tile_", "tvm", "pluggy"))))
    """
    assert run_python(code, clean_env(tmp_path, site)).stdout.strip() == "[]"


def test_allowlist_loads_only_named_plugins_and_reference(tmp_path, site):
    code = LIST_BACKENDS + "\nimport sys; print('tile_broken' in sys.modules, 'tile_toy.plugin' in sys.modules)"
    proc = run_python(code, clean_env(tmp_path, site, TILECORE_PLUGINS="toy"))
    assert "tile_cpu" not in proc.stdout
    lines = proc.stdout.strip().splitlines()
    out = json.loads(lines[0])
    assert out["backends"] == ["reference", "toy"]
    assert out["errors"] == []  # the broken plugin was never imported
    assert lines[1] == "False True"


def test_allowlist_without_toy_keeps_only_reference(tmp_path, site):
    env = clean_env(tmp_path, site, TILECORE_PLUGINS=" no-such-backend , x")
    out = last_json(run_python(LIST_BACKENDS, env).stdout)
    assert out["backends"] == ["reference"]
    # a name nothing declares (a typo, a plugin not installed) is reported
    assert [e["name"] for e in out["errors"]] == ["no-such-backend", "x"]
    assert out["errors"][0]["error"] == (
        "listed in TILECORE_PLUGINS, but no installed distribution declares a 'tilecore' entry point of that name"
    )


def test_disable_autoload_keeps_reference_and_explicit_plugins(tmp_path, site):
    code = """
    import json
    import tilecore.plugin as P
    from tilecore.plugin.registry import get_registry
    before = get_registry().names()
    import tile_toy.plugin
    P.register_plugin(tile_toy.plugin, name="toy-explicit", distribution="tile-toy", version="0.1.0")
    print(json.dumps([before, get_registry().names(), get_registry().backends["toy"].distribution]))
    """
    out = last_json(run_python(code, clean_env(tmp_path, site, TILECORE_DISABLE_PLUGIN_AUTOLOAD="1")).stdout)
    assert out == [["reference"], ["reference", "toy"], "tile-toy"]


def test_plugin_backend_compiles_and_runs(tmp_path, site):
    code = """
    import numpy as np, tilecore
    from test_plugin_support import simple_add_func
    k = tilecore.compile(simple_add_func(64), target="toy", out_idx=[-1])
    a = np.arange(64, dtype=np.float32); b = np.ones(64, dtype=np.float32)
    c = k(a, b)
    assert k.backend.name == "toy" and k.target == "toy"
    assert k.source.startswith("// toy backend")
    np.testing.assert_array_equal(c, a + b)
    print("ok", type(c).__name__)
    """
    env = clean_env(tmp_path, site)
    assert run_python(code, env).stdout.split() == ["ok", "ndarray"]


def test_default_target_order(tmp_path, site):
    code = """
    from tilecore.plugin.registry import get_registry
    print(get_registry().default_target_and_origin())
    """
    cfg = tmp_path / "config.toml"
    cfg.write_text('target = "toy:fast"\n')
    base = clean_env(tmp_path, site)
    # nothing set, toy has no device: reference is the fallback (no cpu backend installed here)
    assert "('reference', 'fallback')" in run_python(code, base).stdout
    # a present device wins over the fallback
    assert "('toy', \"device present for backend 'toy'\")" in run_python(code, dict(base, TOY_DEVICE="1")).stdout
    # the config file wins over devices
    out = run_python(code, dict(base, TOY_DEVICE="1", TILECORE_CONFIG=str(cfg))).stdout
    assert f"('toy:fast', 'config file {cfg}')" in out
    # the environment wins over the config file
    out = run_python(code, dict(base, TILECORE_CONFIG=str(cfg), TILECORE_TARGET="reference")).stdout
    assert "('reference', 'TILECORE_TARGET')" in out


def test_config_file_in_xdg_config_home(tmp_path, site):
    (tmp_path / "xdg" / "tilecore").mkdir(parents=True)
    (tmp_path / "xdg" / "tilecore" / "config.toml").write_text('target = "toy"\n')
    env = clean_env(tmp_path, site, XDG_CONFIG_HOME=tmp_path / "xdg")
    del env["TILECORE_CONFIG"]
    code = "import tilecore; print(tilecore.default_target())"
    assert run_python(code, env).stdout.strip() == "toy"


def test_malformed_config_is_a_clear_error(tmp_path, site):
    cfg = tmp_path / "bad.toml"
    cfg.write_text("target = \n")
    code = """
    import tilecore
    try:
        tilecore.default_target()
    except tilecore.plugin.registry.ConfigError as e:
        print(e)
    """
    out = run_python(code, clean_env(tmp_path, site, TILECORE_CONFIG=cfg)).stdout
    assert out.startswith(f"config file {cfg} is not valid TOML")


def test_ir_version_mismatch_is_a_clear_error(tmp_path, site):
    code = """
    import tilecore
    from test_plugin_support import simple_add_func
    try:
        tilecore.compile(simple_add_func(64), target="toy")
    except tilecore.plugin.IRVersionMismatchError as e:
        print(e)
    """
    env = clean_env(tmp_path, site, TOY_IR_VERSIONS="2.0,2.1")
    out = run_python(code, env).stdout.strip()
    assert out == (
        "backend 'toy' (tile-toy 0.1.0) accepts Tile IR version(s) 2.0, 2.1, but this "
        "tilecore 0.1.0 produces Tile IR 1.0. Install a release of tile-toy that supports "
        "Tile IR 1.0, or a tilecore release that produces one of 2.0, 2.1."
    )


def test_unknown_target_names_installed_backends_and_broken_plugin(tmp_path, site):
    code = """
    import tilecore
    from tilecore.plugin.registry import get_registry
    for t in ("nosuch", "broken", "toy:other"):
        try:
            get_registry().resolve(t)
        except tilecore.plugin.TargetError as e:
            print(e)
    print(get_registry().resolve("toy")[1], get_registry().resolve("toy:fast")[1])
    """
    out = run_python(code, clean_env(tmp_path, site)).stdout.strip().splitlines()
    assert out[0] == (
        "unknown target 'nosuch': no installed backend is named 'nosuch'. Installed "
        "backends: reference, toy. Install the plugin (e.g. `pip install tile-nosuch`) "
        "or run `tile backends`"
    )
    assert out[1].startswith(
        "unknown target 'broken': no installed backend is named 'broken'; the "
        "plugin 'broken' (tile-broken 2.3.4, tile_broken.plugin) failed to load: "
        "ImportError: tile_broken needs libbroken.so"
    )
    # "toy:other" is accepted by prefix (the backend decides what its variants mean)
    assert out[2] == "toy toy:fast"


# ---------------------------------------------------------------------- in-process unit tests


def _caps():
    return Capabilities(features=frozenset({"copy"}), dtypes=frozenset({"float32"}))


class _Plugin:
    def __init__(self, *backends, fail=None):
        self.backends = backends
        self.fail = fail

    @hookimpl
    def tilecore_register_backends(self, register):
        if self.fail:
            raise self.fail
        for b in self.backends:
            register(b)


def _backend(name, **kw):
    return Backend(
        name=name,
        targets=kw.pop("targets", (name,)),
        ir_versions=kw.pop("ir", ("1.0",)),
        capabilities=_caps(),
        toolchain_status=lambda: ToolchainStatus(True, "ok"),
        **kw,
    )


def _registry(*plugins):
    m = TilecorePluginManager(autoload=False, allowlist=None)
    for i, p in enumerate(plugins):
        m.register(p, name=f"p{i}", distribution=f"dist{i}", version=f"1.{i}")
    return BackendRegistry(m)


def test_registration_errors_are_recorded_not_raised():
    good = _Plugin(_backend("a"))
    crashing = _Plugin(fail=RuntimeError("probe exploded"))
    dup = _Plugin(_backend("a"))
    invalid = _Plugin(_backend("bad:name"), "not a backend")
    other = _Plugin(_backend("b"))
    r = _registry(good, crashing, dup, invalid, other)
    assert r.names() == ["b"]  # 'a' is declared twice: refused, whichever loads first
    assert r.backends["b"].distribution == "dist4" and r.backends["b"].version == "1.4"
    msgs = sorted(e.error for e in r.errors)
    assert "RuntimeError: probe exploded" in msgs
    (dup_msg,) = [m for m in msgs if "declared by 2 plugins" in m]
    assert "dist0 1.0 (plugin 'p0'" in dup_msg and "dist2 1.2 (plugin 'p2'" in dup_msg
    assert "none of them is used" in dup_msg
    assert _registry(dup, invalid, good).names() == []  # the same outcome in another order
    assert "invalid backend: backend name 'bad:name' must be a non-empty string without ':'" in msgs
    assert "invalid backend: expected tilecore.plugin.Backend, got str" in msgs


def test_plugin_with_unknown_hook_is_rejected():
    class Typo:
        @hookimpl
        def tilecore_codegenn(self, backend):
            return None

    m = TilecorePluginManager(autoload=False)
    with pytest.raises(ValueError, match="tilecore_codegenn"):
        m.register(Typo(), name="typo")
    assert "typo" not in m.plugins


def test_priority_decides_among_present_devices(monkeypatch, tmp_path):
    monkeypatch.delenv("TILECORE_TARGET", raising=False)
    monkeypatch.setenv("TILECORE_CONFIG", str(tmp_path / "none.toml"))
    r = _registry(
        _Plugin(
            _backend("low", priority=1, device_present=lambda: True),
            _backend("high", priority=9, device_present=lambda: True),
            _backend("absent", priority=99, device_present=lambda: False),
            _backend("crashy", priority=100, device_present=lambda: 1 / 0),
            _backend("cpu"),
        )
    )
    assert r.default_target() == "high"
    r2 = _registry(_Plugin(_backend("cpu"), _backend("reference", device_present=lambda: True)))
    assert r2.default_target_and_origin() == ("cpu", "fallback")


def test_resolve_expands_to_default_target_and_checks_ir():
    r = _registry(
        _Plugin(
            _backend("gpu", targets=("gpu:sm_90a", "gpu:sm_80")),
            _backend("old", ir=("0.9",)),
            _backend("wild", ir=("1.*",)),
        )
    )
    assert r.resolve("gpu")[1] == "gpu:sm_90a"
    assert r.resolve("gpu:sm_80")[1] == "gpu:sm_80"
    assert r.resolve("wild")[1] == "wild"
    with pytest.raises(IRVersionMismatchError, match="accepts Tile IR version"):
        r.resolve("old")
    assert r.resolve("old", check_ir=False)[0].name == "old"
    with pytest.raises(TargetError, match="invalid target"):
        r.resolve("  ")


def test_ir_version_matching():
    assert ir_version_accepted(("1.0",), "1.0")
    assert ir_version_accepted(("1",), "1.3")
    assert ir_version_accepted(("1.*",), "1.3")
    assert not ir_version_accepted(("1.1",), "1.0")
    assert not ir_version_accepted(("2.*", "2"), "1.0")
    with pytest.raises(IRVersionMismatchError):
        check_ir_version(_backend("x", ir=("2.0",)))


def test_unknown_command_names_the_plugins_that_failed_to_load(tmp_path, site):
    """A plugin that fails to load loses its commands; `tile` then says which plugin and why,
    not only "invalid choice"."""
    from test_plugin_support import run_tile

    proc = run_tile(["toycmd"], clean_env(tmp_path, site))
    assert proc.returncode == 2
    assert "invalid choice: 'toycmd'" in proc.stderr
    assert (
        "plugin 'broken' (tile-broken 2.3.4, tile_broken.plugin): ImportError: tile_broken needs "
        "libbroken.so, which is not installed (failed to load)" in proc.stderr
    )
