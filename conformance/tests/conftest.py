"""Fixtures: the mutant plugins registered through a real entry point."""

from __future__ import annotations

import os
import sys

import pytest

MUTANTS_DIR = os.path.join(os.path.dirname(__file__), "mutants")


def write_mutant_distribution(folder: str) -> str:
    """A minimal installed distribution `tile-mutants` (dist-info with an entry point) in `folder`."""
    import shutil

    for name in ("tile_mutants.py", "tile_mutant_bugs.py"):
        shutil.copy(os.path.join(MUTANTS_DIR, name), os.path.join(folder, name))
    info = os.path.join(folder, "tile_mutants-0.0.0.dist-info")
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\nName: tile-mutants\nVersion: 0.0.0\n")
    with open(os.path.join(info, "entry_points.txt"), "w") as f:
        f.write("[tilecore]\nmutants = tile_mutants\n")
    return folder


@pytest.fixture(scope="module")
def mutant_path(tmp_path_factory):
    """sys.path entry holding the mutant plugin as an installed distribution; plugins rediscovered.
    Module-scoped: the plugin is gone again before the worker's next test file, whose cache keys
    (the plugin fingerprint) must match a fresh process's."""
    from tilecore.plugin.manager import reset_plugins

    folder = write_mutant_distribution(str(tmp_path_factory.mktemp("mutants")))
    sys.path.insert(0, folder)
    import importlib

    importlib.invalidate_caches()
    reset_plugins(keep_explicit=True)
    yield folder
    sys.path.remove(folder)
    sys.modules.pop("tile_mutants", None)
    sys.modules.pop("tile_mutant_bugs", None)
    reset_plugins(keep_explicit=True)
