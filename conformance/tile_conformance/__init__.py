"""tile-conformance: certifies tilecore backends against the reference interpreter.

Programs are generated with hypothesis from a grammar of the tile language
(`strategies.py`, `programs.py`), written as DSL source and parsed by the real
frontend, run on the backend and on the reference interpreter, compared with
documented tolerances (`compare.py`), and failures are shrunk to a minimal
program (`shrink.py`). Entry points: `tile conformance ...` (`plugin.py`), the
pytest plugin (`pytest --tile-backend NAME --pyargs tile_conformance`) and
`run_suite` below.
"""

__version__ = "0.4.0"


def run_suite(*args, **kwargs):
    """See tile_conformance.runner.run_suite."""
    from .runner import run_suite as _run

    return _run(*args, **kwargs)
