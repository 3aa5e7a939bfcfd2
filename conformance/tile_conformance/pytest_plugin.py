"""pytest plugin: `pytest --tile-backend BACKEND --pyargs tile_conformance`.

Adds the options below (loaded through the `pytest11` entry point, so it is
light: nothing is imported until a conformance test runs). The tests in
`tile_conformance/test_backend.py` run the suite once per session and report
one test per feature (skipped when the backend does not declare it), one for
suite errors and one for the verdict.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser):
    """--tile-backend, --tile-examples, --tile-seed, --tile-tier, --tile-report."""
    group = parser.getgroup("tile-conformance")
    group.addoption(
        "--tile-backend", default=None, metavar="NAME", help="backend to certify with `--pyargs tile_conformance`"
    )
    group.addoption(
        "--tile-examples",
        type=int,
        default=None,
        metavar="N",
        help="programs to generate (default: the suite's default)",
    )
    group.addoption("--tile-seed", type=int, default=0, metavar="S", help="generation seed (default 0)")
    group.addoption(
        "--tile-tier", default="execute", choices=("execute", "compile"), help="conformance tier (default execute)"
    )
    group.addoption(
        "--tile-report", default=None, metavar="PATH", help="also write the JSON (and Markdown) report here"
    )


@pytest.fixture(scope="session")
def tile_conformance_report(request):
    """The report of one suite run on --tile-backend (skips when no backend was given)."""
    backend = request.config.getoption("--tile-backend")
    if not backend:
        pytest.skip("no backend to certify: pass --tile-backend NAME")
    from .report import write_report
    from .runner import DEFAULT_EXAMPLES, run_suite

    report = run_suite(
        backend,
        examples=request.config.getoption("--tile-examples") or DEFAULT_EXAMPLES,
        seed=request.config.getoption("--tile-seed"),
        tier=request.config.getoption("--tile-tier"),
    )
    path = request.config.getoption("--tile-report")
    if path:
        write_report(report, path)
    return report
