"""JSON form: deterministic text and exact round trip, spans and source included."""

import json
import os
import sys

import pytest

from tilecore.ir import nodes as N
from tilecore.ir.serialize import IRFormatError, dumps, loads
from tilecore.ir.version import TILE_IR_VERSION
from tilecore.ir.visitor import walk

sys.path.insert(0, os.path.dirname(__file__))  # pytest runs with --import-mode=importlib
from frontend_kernels import flash_attention, matmul


def spans(func):
    return [n.span for n in walk(func) if hasattr(n, "span")]


@pytest.mark.parametrize(
    "make", [lambda: matmul(200, 200, 200, 64, 64, 32), lambda: flash_attention(1, 2, 256, 64, True)]
)
def test_exact_round_trip(make):
    func = make()
    text = dumps(func)
    again = loads(text)
    assert again == func and spans(again) == spans(func)
    assert again.source == func.source and again.span == func.span
    assert dumps(again) == text
    assert dumps(make()) == text  # deterministic across parses


def test_version_and_format_are_checked():
    doc = json.loads(dumps(matmul(64, 64, 64, 32, 32, 32)))
    assert doc["version"] == TILE_IR_VERSION and doc["format"] == "tilecore-ir"
    doc["version"] = "99.0"
    with pytest.raises(IRFormatError, match="99.0"):
        loads(json.dumps(doc))
    with pytest.raises(IRFormatError):
        loads("{not json")
    with pytest.raises(IRFormatError):
        loads('{"format": "other"}')


def test_non_finite_constants():
    f = flash_attention(1, 1, 64, 16, True)
    text = dumps(f)
    assert "Infinity" not in text and "NaN" not in text
    assert loads(text) == f
    assert any(isinstance(n, N.Const) and n.value == float("inf") for n in walk(loads(text)))


# ----------------------------------------------------------------------------- properties

from dsl_strategies import dsl_programs  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from ir_strategies import prim_funcs  # noqa: E402

from tilecore.frontend import parse_source  # noqa: E402

PROPERTY = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


@PROPERTY
@given(prim_funcs())
def test_random_ir_json_round_trip(func):
    text = dumps(func)
    assert loads(text) == func
    assert dumps(loads(text)) == text


@PROPERTY
@given(dsl_programs())
def test_parsed_programs_json_round_trip_keeps_spans(text):
    func = parse_source(text)
    again = loads(dumps(func))
    assert again == func and spans(again) == spans(func) and again.source == text
