"""Install a plugin package for a test the way pip exposes one: a `*.dist-info` folder with an
`entry_points.txt` on sys.path, found by tilecore's real entry-point discovery."""

from __future__ import annotations

import os

from tilecore.plugin import reset_plugins

HERE = os.path.dirname(os.path.abspath(__file__))


def install(tmp_path, monkeypatch, dist: str, entry_points: str, package_dir: str = HERE) -> None:
    """Put `package_dir` and a dist-info for `dist` (with `entry_points`, lines of the "tilecore"
    group) on sys.path, then rediscover plugins. `monkeypatch.undo()` + `reset_plugins()` undo it."""
    info = tmp_path / f"{dist}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist.replace('_', '-')}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[tilecore]\n" + entry_points + "\n")
    monkeypatch.syspath_prepend(package_dir)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("TILECORE_PLUGINS", raising=False)
    monkeypatch.delenv("TILECORE_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.setenv("TILECORE_CACHE", "0")  # the cache key does not cover third-party rules
    reset_plugins()
