"""The oracle's oracle: the reference interpreter against independent numpy formulas.

For every program family, generated programs are run by the interpreter and
compared with a numpy model written from the program's knobs alone (not from
the interpreter): tile-local semantics, zero-filled out-of-bounds reads,
dropped out-of-bounds writes, conversions, reductions with their init values,
prefix sums, GEMM with transposes, atomics, control flow.
"""

from __future__ import annotations

import numpy as np
import pytest

from tile_conformance import exprs as X
from tile_conformance.compare import compare
from tile_conformance.execute import load_source, make_inputs, np_dtype
from tile_conformance.programs import build, chain_leaves
from tile_conformance.runner import generate_knobs
from tile_conformance.strategies import Caps
from tilecore import interp
from tilecore.interp.plugin import make_backend
from tilecore.ir.types import is_float

CAPS = Caps.from_backend(make_backend())
F64 = np.float64


def _pad(a: np.ndarray, tiles) -> np.ndarray:
    """Zero-pad `a` up to whole tiles (what a tile copy reads beyond the tensor)."""
    shape = [-(-s // t) * t for s, t in zip(a.shape, tiles)]
    out = np.zeros(shape, dtype=a.dtype)
    out[tuple(slice(0, s) for s in a.shape)] = a
    return out


def _conv(a, dtype):
    return np.asarray(a).astype(np_dtype(dtype))


def model_copy(k, A):
    bm = k["bm"]
    d_in, d1, d2, d_out = k["dtypes"]
    chain = _conv(_conv(A, d1), d2)
    if k["sub_rows"] and k["sub_rows"] < bm:
        rows = (np.arange(A.shape[-2]) % bm) >= k["sub_rows"]  # (a rank-3 A: the batch leads)
        chain = chain.copy()
        chain[..., rows, :] = _conv(k["fill_value"], d2)
    return _conv(chain, d_out)


def model_reduce(k, A):
    dim, kind, acc = k["dim"], k["kind"], k["acc_dtype"]
    red_tile = k["bn"] if dim == 1 else k["bm"]
    tiles = (1, red_tile) if dim == 1 else (red_tile, 1)
    x = _conv(_pad(A, tiles), acc).astype(F64 if is_float(acc) else np.int64)
    if kind in ("abssum", "absmax"):
        x = np.abs(x)
    fn = {"sum": np.sum, "abssum": np.sum, "max": np.max, "absmax": np.max, "min": np.min}[kind]
    r = fn(x, axis=dim)
    n_tiles = -(-(A.shape[1] if dim == 1 else A.shape[0]) // red_tile)
    single = k["mode"] == "clear" and n_tiles == 1
    if not single:
        init = k["init"]
        r = {
            "sum": lambda v: v + init,
            "abssum": lambda v: v + init,
            "max": lambda v: np.maximum(v, init),
            "absmax": lambda v: np.maximum(v, init),
            "min": lambda v: np.minimum(v, init),
        }[kind](r)
    return _conv(_conv(r, acc), k["out_dtype"])


def _int4_values(packed):
    """The int4 values of a tensor passed packed (docs/semantics.md "int4"): byte j of a row holds
    value 2j in bits 0-3 and value 2j + 1 in bits 4-7, two's complement."""
    u = packed.astype(np.int64) % 256
    nibbles = np.stack((u % 16, u // 16), axis=-1).reshape(packed.shape[:-1] + (2 * packed.shape[-1],))
    return np.where(nibbles >= 8, nibbles - 16, nibbles)


def model_gemm(k, A, B):
    wide = F64 if is_float(k["acc_dtype"]) else np.int64
    if k["in_dtype"] == "int4":
        A, B = _int4_values(A), _int4_values(B)
    a, b = A.astype(wide), B.astype(wide)
    a = a.T if k["ta"] else a
    b = b.T if k["tb"] else b
    return _conv(_conv(a @ b, k["acc_dtype"]), k["out_dtype"])


def model_atomic(k, A, Out0):
    d = k["dtype"]
    wide = F64 if is_float(d) else np.int64
    out = Out0.astype(wide).copy()
    kind = k["kind"]
    comb = {"add": np.add, "max": np.maximum, "min": np.minimum}[kind]
    if k["form"] == "tile":
        x = _pad(A, (k["bm"], 1)).astype(wide)
        part = {"add": np.sum, "max": np.max, "min": np.min}[kind](x, axis=0)
        out = comb(out, part)
    else:
        for i in range(A.shape[0]):
            out[i % k["rows"], :] = comb(out[i % k["rows"], :], A[i, :].astype(wide))
    return _conv(out, d)


def model_cumsum(k, A):
    bm, bn, dim = k["bm"], k["bn"], k["dim"]
    wide = F64 if is_float(k["dtype"]) else np.int64
    x = _pad(A, (bm, bn)).astype(wide)
    gm, gn = x.shape[0] // bm, x.shape[1] // bn
    t = x.reshape(gm, bm, gn, bn)
    axis = 1 if dim == 0 else 3
    if k["reverse"]:
        t = np.flip(np.cumsum(np.flip(t, axis), axis), axis)
    else:
        t = np.cumsum(t, axis)
    return _conv(t.reshape(x.shape)[: A.shape[0], : A.shape[1]], k["dtype"])


def model_control(k, A):
    acc = k["acc_dtype"]
    wide = F64 if is_float(acc) else np.int64
    thr = k["thr"] if is_float(k["dtype"]) else int(round(k["thr"]))
    x = A.astype(wide)
    take = A.astype(F64) > thr
    other = (-x * 0.5 if is_float(acc) else -x * 2) if k["with_else"] else np.zeros_like(x)
    terms = np.where(take, x, other)
    if k.get("while") == "stop":  # the walk ends after the first element below the stop value
        lo = -2.0 if is_float(k["dtype"]) else {"int8": -8, "int16": -50, "int32": -100}[k["dtype"]]
        below = A.astype(F64) < (lo * 0.75 if is_float(k["dtype"]) else lo * 3 // 4)
        first = np.where(below.any(axis=1), below.argmax(axis=1), A.shape[1])
        terms = np.where(np.arange(A.shape[1])[None, :] <= first[:, None], terms, 0)
    s = terms.sum(axis=1)
    if k["block_if"]:
        odd = (np.arange(A.shape[0]) // k["bm"]) % 2 == 1
        s = np.where(odd, s * 0.5 if is_float(acc) else s * 2, s)
    return _conv(s, acc)


class _NumpyT:
    """The DSL's math functions in numpy (float64 / int64), for the ewise model."""

    exp, exp2, log, log2, sqrt = np.exp, np.exp2, np.log, np.log2, np.sqrt
    tanh, sin, cos, floor, ceil, abs = np.tanh, np.sin, np.cos, np.floor, np.ceil, np.abs
    max, min = np.maximum, np.minimum

    @staticmethod
    def rsqrt(x):
        return 1 / np.sqrt(x)

    @staticmethod
    def sigmoid(x):
        return 1 / (1 + np.exp(-x))

    @staticmethod
    def pow(x, p):
        return np.power(x, p)

    @staticmethod
    def if_then_else(c, a, b):
        return np.where(c, a, b)

    @staticmethod
    def cast(x, d):
        # round to the target dtype, then carry on in the wide model type
        return np.asarray(x).astype(np_dtype(d)).astype(F64 if is_float(d) else np.int64)


def model_ewise(k, *inputs):
    names = [chr(ord("A") + i) for i in range(len(inputs))]
    leaves = [X.Leaf(n, d, 0, 0) for n, d in zip(names, k["in_dtypes"])]
    int_mode = not is_float(k["in_dtypes"][0])
    wide = np.int64 if int_mode else F64
    env = {n: a.astype(wide) for n, a in zip(names, inputs)}
    bounded = [
        X.Leaf(
            n,
            d,
            *(
                (-2.0, 2.0)
                if not int_mode
                else __import__("tile_conformance.programs", fromlist=["INT_BOUNDS"]).INT_BOUNDS[d]
            ),
        )
        for n, d in zip(names, k["in_dtypes"])
    ]
    r = (X.render_int if int_mode else X.render_float)(k["expr"], bounded)
    del leaves
    with np.errstate(all="ignore"):
        v = eval(r.text, {"T": _NumpyT}, env)
    return np.broadcast_to(np.asarray(v, dtype=wide), inputs[0].shape)


def model_chain(k, A, B, Bias):
    bm, bn = k["bm"], k["bn"]
    a = _pad(A, (bm, 1)).astype(F64)
    b = np.zeros((A.shape[1], bn))
    b[:, : B.shape[1]] = B.astype(F64)  # columns beyond N read as zeros (one tile covers the row)
    c = a[: A.shape[0]] @ b
    bias = np.zeros(bn)
    bias[: Bias.shape[0]] = Bias.astype(F64)
    r = X.render_float(k["expr"], chain_leaves(k, "C", "Bias"))
    with np.errstate(all="ignore"):
        e = np.broadcast_to(
            np.asarray(eval(r.text, {"T": _NumpyT}, {"C": c, "Bias": bias[None, :]}), dtype=F64), c.shape
        )
    row = {"max": np.max, "min": np.min, "sum": np.sum}[k["kind"]](e, axis=1)
    return {"Out": (e - row[:, None])[:, : B.shape[1]], "RowOut": row}


def _wrap(x, dtype):
    """Python integers (an object array) wrapped into the integer `dtype` (two's complement); bool: != 0."""
    if dtype == "bool":
        return x != 0
    lo, hi = (int(v) for v in (np.iinfo(np_dtype(dtype)).min, np.iinfo(np_dtype(dtype)).max))
    return (x - lo) % (hi - lo + 1) + lo


def _intops_value(e, env):
    """(value as an object array of Python integers, dtype) of an intops tree: exact integer arithmetic,
    then wrapped to the promoted dtype (docs/semantics.md, Integer operations); "" is a literal's dtype."""
    from tilecore.ir.types import promote

    kind = e[0]
    if kind == "in":
        return env[e[1]]
    if kind == "const":
        return np.array(int(e[1]), dtype=object), ""
    if kind in ("cmp", "logic"):
        (a, _), (b, _) = _intops_value(e[2], env), _intops_value(e[3], env)
        ops = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}
        ops.update({"==": np.equal, "!=": np.not_equal, "and": np.logical_and, "or": np.logical_or})
        return ops[e[1]](a, b).astype(bool), "bool"
    if kind == "not":
        return ~_intops_value(e[1], env)[0], "bool"
    if kind == "bcast":
        return _intops_value(e[1], env)[0].astype(object) * 1, "int32"
    if kind == "un":
        a, d = _intops_value(e[2], env)
        return _wrap(-a if e[1] == "neg" else -a - 1, d), d
    if kind == "sel":
        c = _intops_value(e[1], env)[0]
        (a, da), (b, db) = _intops_value(e[2], env), _intops_value(e[3], env)
        d = promote(da, db) if da and db else (da or db)
        return np.where(c, a, b), d
    (a, da), (b, db) = _intops_value(e[2], env), _intops_value(e[3], env)
    d = promote(da, db) if da and db else (da or db)
    op = e[1]
    if op in ("//", "%"):
        safe = np.where(b == 0, 1, b)
        r = np.where(b == 0, 0, a // safe if op == "//" else a % safe)
    elif op == "<<":
        r = np.vectorize(lambda x, s: x << s, otypes=[object])(a, b)
    elif op == ">>":
        r = np.vectorize(lambda x, s: x >> s, otypes=[object])(a, b)
    else:
        r = {"+": np.add, "-": np.subtract, "*": np.multiply, "&": np.bitwise_and, "|": np.bitwise_or}.get(op)
        r = r(a, b) if r else {"^": np.bitwise_xor, "max": np.maximum, "min": np.minimum}[op](a, b)
    return _wrap(r, d), d


def model_intops(k, A, B, D, S):
    """Integer expressions in exact Python integers, wrapped after every operation."""
    dA, dB, dD = k["dtypes"]
    env = {n: (x.astype(object), d) for n, x, d in (("A", A, dA), ("B", B, dB), ("D", D, dD), ("S", S, dA))}
    value, d = _intops_value(k["expr"], env)
    return np.broadcast_to(np.asarray(value).astype(np_dtype(d)), A.shape)  # exact: already wrapped to d


MODELS = {
    "intops": model_intops,
    "copy": model_copy,
    "reduce": model_reduce,
    "gemm": model_gemm,
    "cumsum": model_cumsum,
    "control": model_control,
    "ewise": model_ewise,
    "chain": model_chain,
}


def _check_against_model(family: str, k: dict):
    """Run one generated program on the interpreter and compare every output with the family's model."""
    prog = build(k)
    func = load_source(prog.source)
    arrays = make_inputs(prog.params, prog.bindings, prog.input_seed)
    before = [a.copy() for a in arrays]
    interp.run(func, arrays, dict(prog.bindings))
    outs = [(i, p) for i, p in enumerate(prog.params) if p.role in ("out", "inout")]
    i, p = outs[0]
    ins = [before[j] for j, q in enumerate(prog.params) if q.role == "in"]
    if family == "atomic":
        wants = {p.name: model_atomic(k, ins[0], before[i])}
    else:
        want = MODELS[family](k, *ins)
        wants = want if isinstance(want, dict) else {p.name: want}
    for i, p in outs:
        m = compare(p.name, p.dtype, _conv(wants[p.name], p.dtype), arrays[i], prog.tolerances[p.name])
        assert m is None, f"{m.describe()}\n{prog.source}"
    return prog


@pytest.mark.parametrize("family", sorted(MODELS) + ["atomic"])
def test_interpreter_matches_numpy_model(family):
    checked = 0
    for k in generate_knobs(CAPS, 25, seed=11, families=(family,)):
        _check_against_model(family, k)
        checked += 1
    assert checked == 25


def test_while_loops_fp8_and_int4_gemms_are_among_the_checked_programs():
    """The control and gemm models above see `while` walks (both kinds), fp8 and packed int4 operands."""
    control = generate_knobs(CAPS, 25, seed=11, families=("control",))
    assert {k.get("while") for k in control} >= {"count", "stop"}
    gemm = generate_knobs(CAPS, 25, seed=11, families=("gemm",))
    assert {k["in_dtype"] for k in gemm} >= {"float8_e4m3fn", "float8_e5m2", "int4"}
    assert any(k.get("fp8_exact") for k in gemm)


def test_fp8_conversions_match_one_rounding_from_the_exact_value():
    """Every fp8 conversion a convert program carries against the model of docs/semantics.md: the
    source value widened exactly to float64, rounded once by ml_dtypes (to nearest, ties to even,
    NaN past the largest finite e4m3fn value, inf past e5m2's), truncated toward zero into ints."""
    knobs = generate_knobs(CAPS, 15, seed=13, families=("convert",))
    seen = set()
    for k in knobs:
        prog = build(k)
        func = load_source(prog.source)
        arrays = make_inputs(prog.params, prog.bindings, prog.input_seed)
        interp.run(func, arrays, dict(prog.bindings))
        names = [p.name for p in prog.params]
        a8, out8 = arrays[names.index("A8")], arrays[names.index("Out8")]
        want = _conv(a8.astype(F64), k["fp8"]["dst"])
        m = compare("Out8", k["fp8"]["dst"], want, out8, prog.tolerances["Out8"])
        assert m is None, f"{m.describe()}\n{prog.source}"
        seen.add((k["fp8"]["src"], k["fp8"]["dst"]))
    assert len(seen) == 15


def test_four_dimensional_copies_match_the_model():
    """Copies of 4-D tensors (batch x heads x M x N, two nested serial loops) against the copy model."""
    knobs = [k for k in generate_knobs(CAPS, 40, seed=12, families=("copy",)) if k.get("heads")][:4]
    assert len(knobs) >= 3
    for k in knobs:
        prog = _check_against_model("copy", k)
        assert len(prog.params[0].shape) == 4 and "for h in T.serial(" in prog.source
