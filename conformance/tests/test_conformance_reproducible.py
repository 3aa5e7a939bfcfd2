"""The same seed, families and capabilities give the same programs whatever else is installed."""

from __future__ import annotations

import os
import subprocess
import sys

DIGEST = """
from tile_conformance.runner import generate_knobs, program_digest, resolve_backend
from tile_conformance.programs import build
from tile_conformance.strategies import Caps
from tilecore.plugin.manager import get_plugin_manager
caps = Caps.from_backend(resolve_backend("reference"))
names = sorted(info.name for info in get_plugin_manager().plugins.values())
print(",".join(names))
print(program_digest([build(k) for k in generate_knobs(caps, 80, 11)]))
"""


def _digest(extra_path, hash_seed):
    env = dict(os.environ, PYTHONHASHSEED=str(hash_seed))
    if extra_path:
        env["PYTHONPATH"] = extra_path + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", DIGEST], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    plugins, digest = proc.stdout.split()
    return plugins.split(","), digest


def test_digest_identical_with_and_without_an_extra_plugin(mutant_path):
    """An installed plugin full of numeric constants (the mutants) changes nothing: hypothesis's habit of
    drawing constants from every local module cannot reach the generator (gen.py)."""
    without, d1 = _digest(None, 1)
    with_extra, d2 = _digest(mutant_path, 2)
    assert "mutants" in with_extra and "mutants" not in without
    assert d1 == d2


def test_program_i_is_generated_alone():
    """The seam a sharded runner uses: program i depends only on (caps, seed, i, families)."""
    from tile_conformance.runner import generate_knobs, run_families
    from tile_conformance.strategies import Caps, knobs_at
    from tilecore.interp.plugin import make_backend

    caps = Caps.from_backend(make_backend())
    fams = run_families(caps)
    whole = generate_knobs(caps, 30, 4)
    assert [knobs_at(caps, 4, i, fams) for i in (29, 3, 17)] == [whole[29], whole[3], whole[17]]
