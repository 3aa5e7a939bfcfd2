"""Plugin discovery reads entry points with a plain folder scan (importlib.metadata costs
40-60 ms to import and parse); the scan must give importlib.metadata's answer, in its order,
and step aside wherever it could differ."""

from __future__ import annotations

import sys
import zipfile

from tilecore.plugin import manager


def described(eps):
    return [(ep.name, ep.value, manager._dist_of(ep)) for ep in eps]


def test_scan_matches_importlib_metadata_here():
    scanned = manager._scan_entry_points(manager.ENTRY_POINT_GROUP)
    assert scanned is not None  # a plain virtual environment: the scan applies
    assert described(scanned) == described(manager._metadata_entry_points())


def test_scan_matches_with_extra_folders_and_shadowed_distributions(tmp_path, monkeypatch):
    first, second = tmp_path / "first", tmp_path / "second"
    for folder, version, value in ((first, "1.0", "pkg_one.plugin:Plugin.inner"), (second, "2.0", "pkg_two.plugin")):
        info = folder / f"tile_extra-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: tile-extra\nVersion: {version}\n\nbody\n")
        (info / "entry_points.txt").write_text(
            f"[console_scripts]\nx = y:z\n\n# a comment\n[tilecore]\nextra = {value}\n"
        )
    other = second / "Other.Dist-0.3.dist-info"
    other.mkdir()
    (other / "METADATA").write_text("Name: other.dist\nVersion: 0.3\n")
    (other / "entry_points.txt").write_text("[tilecore]\nother=pkg_other\n")
    monkeypatch.setattr(sys, "path", [str(first), str(second)] + sys.path)
    scanned = manager._scan_entry_points(manager.ENTRY_POINT_GROUP)
    expected = described(manager._metadata_entry_points())
    assert described(scanned) == expected
    names = [name for name, _, _ in expected]
    assert names.count("extra") == 1 and "other" in names  # the second tile-extra is shadowed
    extra = next(ep for ep in scanned if ep.name == "extra")
    assert manager._dist_of(extra) == ("tile-extra", "1.0") and extra.value == "pkg_one.plugin:Plugin.inner"


def test_entry_point_load_resolves_module_and_attribute(tmp_path, monkeypatch):
    pkg = tmp_path / "scan_probe_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "plugin.py").write_text("class Holder:\n    value = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    dist = manager._Distribution(str(tmp_path / "nowhere.dist-info"))
    assert manager._EntryPoint("p", "scan_probe_pkg.plugin:Holder.value", "tilecore", dist).load() == 42
    assert manager._EntryPoint("p", "scan_probe_pkg.plugin", "tilecore", dist).load().Holder.value == 42
    assert manager._dist_of(manager._EntryPoint("p", "x", "tilecore", dist)) == ("", "")


def test_zip_on_sys_path_uses_importlib_metadata(tmp_path, monkeypatch):
    archive = tmp_path / "plugins.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("zipped-1.0.dist-info/METADATA", "Name: zipped\nVersion: 1.0\n")
        z.writestr("zipped-1.0.dist-info/entry_points.txt", "[tilecore]\nzipped = zipped_plugin\n")
    monkeypatch.setattr(sys, "path", [str(archive)] + sys.path)
    assert manager._scan_entry_points(manager.ENTRY_POINT_GROUP) is None
    assert "zipped" in [ep.name for ep in manager._entry_points()]
