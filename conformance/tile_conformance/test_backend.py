"""Conformance tests of one backend: `pytest --tile-backend BACKEND --pyargs tile_conformance`."""

from __future__ import annotations

import pytest

from tilecore.language.features import FEATURES


def _failure_text(report, feature):
    out = []
    for f in report["failures"]:
        if feature in f["repro"]["features"] or feature in f["features"]:
            r = f["repro"]
            out.append(
                f"{f['family']} #{f['index']}: {r['message']}\n"
                f"minimal program (inputs seed {r['input_seed']}):\n{r['source']}"
            )
    return "\n\n".join(out[:3])


@pytest.mark.parametrize("feature", sorted(FEATURES))
def test_feature(tile_conformance_report, feature):
    """Every generated program using `feature` matches the reference interpreter."""
    row = tile_conformance_report["features"][feature]
    if not row["declared"]:
        pytest.skip(f"unsupported: the backend does not declare {feature!r}")
    if row["fail"]:
        pytest.fail(
            f"{row['fail']} program(s) using {feature!r} failed (of {row['pass'] + row['fail']})\n\n"
            + _failure_text(tile_conformance_report, feature),
            pytrace=False,
        )
    if not row["pass"]:
        pytest.skip(f"no generated program exercised {feature!r} (run more --tile-examples)")


def test_no_suite_errors(tile_conformance_report):
    """Every generated program could be parsed and run by the reference interpreter."""
    errors = tile_conformance_report["suite_errors"]
    assert not errors, "\n".join(f"#{e['index']} {e['family']}: {e['message']}" for e in errors)


def test_verdict(tile_conformance_report):
    """The report satisfies the suite's must-pass list."""
    v = tile_conformance_report["verdict"]
    if not v["certified"]:
        pytest.fail("not certified:\n" + "\n".join(f"- {r}" for r in v["reasons"]), pytrace=False)
