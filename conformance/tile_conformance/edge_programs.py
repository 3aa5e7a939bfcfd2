"""Program families that run on edge values and compare exactly (or by the ULP table).

convert  one conversion between any two dtypes (float <-> float, float <-> int, int <-> int,
         to and from bool) as `T.cast`, as the implicit conversion of a store, or as a tile copy
         between buffers of different dtypes, on the edge values of the pair (ties, fractions,
         limits, specials); bit-exact, the sign of zero included
intops   integer expressions over values at their dtypes' limits: wrapping + - *, // and % by
         run-time divisors of either sign, << and >> by run-time amounts, ~, negation, & | ^,
         max / min, all six comparisons, and / or / not, T.if_then_else, bool -> int casts;
         bit-exact
math     a directed sweep of every math function's domain for one float dtype (one input and one
         output per function), compared within the accuracy table (accuracy.py)
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List

from tilecore.ir.types import is_float, promote

from . import accuracy
from .programs import (
    Param,
    Program,
    Tolerance,
    Unbuildable,
    _ceildiv_text,
    _dim,
    _dims,
    _dtype_features,
    _finish,
    _header,
    _kernel,
    _partial,
    _Writer,
)


def _guarded_parallel(w: _Writer, k: dict, M, N, feats: set) -> tuple:
    """Open `for i, j in T.Parallel(bm, bn)` with bounds guards where tiles are partial; (row, col) text."""
    bm, bn = k["bm"], k["bn"]
    ri, rj = f"by * {bm} + i", f"bx * {bn} + j"
    w(f"for i, j in T.Parallel({bm}, {bn}):")
    w.indent()
    if _partial(M, bm):
        feats.add("runtime_if")
        w(f"if {ri} < {_dim(M)}:")
        w.indent()
    if _partial(N, bn):
        feats.add("runtime_if")
        w(f"if {rj} < {_dim(N)}:")
        w.indent()
    return ri, rj


def convert_edges(src: str, dst: str) -> List[str]:
    """Edge classes that exercise the conversion src -> dst."""
    if src == "bool":
        return ["bool"]
    if is_float(src):
        if dst == "bool":
            return ["special"]
        if not is_float(dst):
            return [f"fraction:{dst}"]
        return [f"ties:{dst}", "special"] if accuracy_bits(dst) < accuracy_bits(src) else ["special"]
    return ["limits"]


def accuracy_bits(d: str) -> int:
    return {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}[d]


def _build_convert(k: dict) -> Program:
    M, N, bindings = _dims(k)
    src, dst, mode = k["src"], k["dst"], k["mode"]
    A = Param("A", (M, N), src, "in", -2.0 if is_float(src) else -100, 2.0 if is_float(src) else 100, k["edges"])
    if src == "uint8":
        A.lo = 0
    out = Param("Out", (M, N), dst, "out")
    params = [A, out]
    fp8 = k.get("fp8")
    if fp8:  # inputs are drawn in parameter order: A's values stay what they were without it
        params += [
            Param("A8", (M, N), fp8["src"], "in", -2.0, 2.0, fp8["edges"]),
            Param("Out8", (M, N), fp8["dst"], "out"),
        ]
    w = _Writer()
    _header(w, params, ["m"] if k.get("dyn") else [])
    grid = [_ceildiv_text(N, k["bn"]), _ceildiv_text(M, k["bm"])]
    _kernel(w, grid, k["threads"])
    feats = set()
    bm, bn = k["bm"], k["bn"]
    if mode == "copy":
        feats.add("copy")
        w(f'A_t = T.alloc_fragment(({bm}, {bn}), "{src}")')
        w(f'O_t = T.alloc_fragment(({bm}, {bn}), "{dst}")')
        w(f"T.copy(A[by * {bm}, bx * {bn}], A_t)")
        w("T.copy(A_t, O_t)")
        w(f"T.copy(O_t, Out[by * {bm}, bx * {bn}])")
        if fp8:
            _copy_conversion(w, k, "A8", "Out8", fp8["src"], fp8["dst"])
        if _partial(M, bm) or _partial(N, bn):
            feats.add("partial_tiles")
    else:
        feats.add("parallel")
        ri, rj = _guarded_parallel(w, k, M, N, feats)
        pairs = [("A", "Out", dst)] + ([("A8", "Out8", fp8["dst"])] if fp8 else [])
        for a, o, d in pairs:
            value = f"{a}[{ri}, {rj}]"
            w(f"{o}[{ri}, {rj}] = " + (f'T.cast({value}, "{d}")' if mode == "cast" else value))
    if k.get("dyn"):
        feats.add("dynamic_shape")
    feats |= _dtype_features(src, dst)
    tols = {"Out": _conversion_tolerance(src, dst)}
    if fp8:
        feats |= _dtype_features(fp8["src"], fp8["dst"])
        tols["Out8"] = _conversion_tolerance(fp8["src"], fp8["dst"])
    return _finish(k, w, params, bindings, feats, tols, grid)


def _conversion_tolerance(src: str, dst: str) -> Tolerance:
    return Tolerance(0.0, 0.0, f"{src} -> {dst} conversion is uniquely defined: bit-exact", signed_zero=is_float(dst))


def _copy_conversion(w: _Writer, k: dict, a: str, out: str, src: str, dst: str) -> None:
    """A second conversion by tile copies (global -> fragment, fragment -> fragment of `dst`, back)."""
    bm, bn = k["bm"], k["bn"]
    w(f'{a}_t = T.alloc_fragment(({bm}, {bn}), "{src}")')
    w(f'{out}_t = T.alloc_fragment(({bm}, {bn}), "{dst}")')
    w(f"T.copy({a}[by * {bm}, bx * {bn}], {a}_t)")
    w(f"T.copy({a}_t, {out}_t)")
    w(f"T.copy({out}_t, {out}[by * {bm}, bx * {bn}])")


# ----------------------------------------------------------------------------- integer expressions


def render_intops(e, dtypes: dict) -> tuple:
    """(text, dtype, features) of an intops expression tree; `dtypes` maps leaf names to dtypes."""
    kind = e[0]
    if kind == "in":
        return e[1], dtypes[e[1].split("[")[0]], set()
    if kind == "const":
        return repr(int(e[1])), "", set()
    if kind == "bin":
        a, da, fa = render_intops(e[2], dtypes)
        b, db, fb = render_intops(e[3], dtypes)
        d = promote(da, db) if da and db else (da or db)
        if e[1] in ("max", "min"):
            return f"T.{e[1]}({a}, {b})", d, fa | fb
        return f"({a} {e[1]} {b})", d, fa | fb
    if kind in ("div", "shift"):
        a, da, fa = render_intops(e[2], dtypes)
        b, db, fb = render_intops(e[3], dtypes)
        d = promote(da, db) if da and db else (da or db)
        return f"({a} {e[1]} {b})", d, fa | fb
    if kind == "un":
        a, da, fa = render_intops(e[2], dtypes)
        return (f"(-{a})" if e[1] == "neg" else f"(~{a})"), da, fa
    if kind == "cmp":
        a, da, fa = render_intops(e[2], dtypes)
        b, db, fb = render_intops(e[3], dtypes)
        return f"({a} {e[1]} {b})", "bool", fa | fb
    if kind == "logic":
        a, _, fa = render_intops(e[2], dtypes)
        b, _, fb = render_intops(e[3], dtypes)
        return f"({a} {e[1]} {b})", "bool", fa | fb
    if kind == "not":
        a, _, fa = render_intops(e[1], dtypes)
        return f"(not {a})", "bool", fa
    if kind == "sel":
        c, _, fc = render_intops(e[1], dtypes)
        a, da, fa = render_intops(e[2], dtypes)
        b, db, fb = render_intops(e[3], dtypes)
        d = promote(da, db) if da and db else (da or db)
        return f"T.if_then_else({c}, {a}, {b})", d, fc | fa | fb | {"select"}
    if kind == "bcast":
        c, _, fc = render_intops(e[1], dtypes)
        return f'T.cast({c}, "int32")', "int32", fc
    raise ValueError(f"unknown intops node {e!r}")


def _build_intops(k: dict) -> Program:
    M, N, bindings = _dims(k)
    dA, dB, dD = k["dtypes"]
    params = [
        Param("A", (M, N), dA, "in", -100, 100, "limits"),
        Param("B", (M, N), dB, "in", -100, 100, "limits"),
        Param("D", (M, N), dD, "in", 1, 7, "divisor"),
        Param("S", (M, N), dA, "in", 0, 7, "shift:8"),
    ]
    for p in params[:2]:
        if p.dtype == "uint8":
            p.lo = 0
    w = _Writer()
    out = Param("Out", (M, N), k["out_dtype"], "out")
    params.append(out)
    _header(w, params, ["m"] if k.get("dyn") else [])
    grid = [_ceildiv_text(N, k["bn"]), _ceildiv_text(M, k["bm"])]
    _kernel(w, grid, k["threads"])
    feats = {"parallel"}
    ri, rj = _guarded_parallel(w, k, M, N, feats)
    at = f"[{ri}, {rj}]"
    expr = _bind_leaves(k["expr"], at)
    text, d, used = render_intops(expr, {p.name: p.dtype for p in params})
    w(f"Out{at} = {text}")
    if k.get("dyn"):
        feats.add("dynamic_shape")
    feats |= used | _dtype_features(dA, dB, dD, k["out_dtype"], d)
    tol = Tolerance(
        0.0,
        0.0,
        "integer operations (wrapping, floor division, shifts) are exact: bit-exact",
        signed_zero=is_float(k["out_dtype"]),
    )
    return _finish(k, w, params, bindings, feats, {"Out": tol}, grid)


def _bind_leaves(e, at: str):
    """Expression leaves ["in", "A"] become ["in", "A[row, col]"]."""
    if not isinstance(e, list):
        return e
    if e[0] == "in":
        return ["in", f"{e[1]}{at}"]
    return [e[0]] + [_bind_leaves(c, at) if isinstance(c, list) else c for c in e[1:]]


# ----------------------------------------------------------------------------- math sweeps


def _build_math(k: dict) -> Program:
    M, N, bindings = _dims(k)
    d, funcs = k["dtype"], k["funcs"]
    params = [Param(f"X_{f}", (M, N), d, "in", -2.0, 2.0, f"math:{f}") for f in funcs]
    special = k.get("special_ops", False)
    if special:
        params += [Param("P", (M, N), d, "in", -2.0, 2.0, "special"), Param("Q", (M, N), d, "in", -2.0, 2.0, "special")]
    params += [Param(f"O_{f}", (M, N), d, "out") for f in funcs]
    if special:
        params += [Param(f"O_{op}", (M, N), d, "out") for op in SPECIAL_OPS]
    w = _Writer()
    _header(w, params, ["m"] if k.get("dyn") else [])
    grid = [_ceildiv_text(N, k["bn"]), _ceildiv_text(M, k["bm"])]
    _kernel(w, grid, k["threads"])
    feats = {"parallel", "math"}
    ri, rj = _guarded_parallel(w, k, M, N, feats)
    tols = {}
    fast = bool(k.get("fast_math"))
    for f in funcs:
        w(f"O_{f}[{ri}, {rj}] = T.{f}(X_{f}[{ri}, {rj}])")
        u = accuracy.ulps(f, d, fast)
        table = "fast_math table" if fast else "accuracy table"
        tols[f"O_{f}"] = Tolerance(0.0, 0.0, f"{f} on {d}: {u:g} ulp ({table})" if u else f"{f} on {d}: exact", ulps=u)
        if fast and u:  # fast math may flush subnormal results to zero
            from .edges import FLOAT_INFO

            tols[f"O_{f}"].atol = 2.0 ** FLOAT_INFO[d][1]
    if special:
        feats.add("select")
        for op, text in SPECIAL_OPS.items():
            w(f"O_{op}[{ri}, {rj}] = " + text.format(p=f"P[{ri}, {rj}]", q=f"Q[{ri}, {rj}]"))
            tols[f"O_{op}"] = Tolerance(
                0.0,
                0.0,
                f"{op} of NaN, infinities, zeros and extremes: exact "
                "(NaN propagates through max / min; comparisons with NaN are false, except !=)",
                signed_zero=op in SIGNED_ZERO_OPS,
            )
    if k.get("dyn"):
        feats.add("dynamic_shape")
    feats |= _dtype_features(d)
    return _finish(k, w, params, bindings, feats, tols, grid)


# exact float operations on special values (P, Q: NaN, +-inf, +-0, subnormals, extremes)
SPECIAL_OPS = {
    "max": "T.max({p}, {q})",
    "min": "T.min({p}, {q})",
    "select_lt": "T.if_then_else({p} < {q}, {p}, {q})",
    "select_ge": "T.if_then_else({p} >= {q}, {q}, {p})",
    "select_eq": "T.if_then_else({p} == {q}, {q}, -{p})",
    # != with a NaN operand is true (an ordered != says false), also of x itself (x == x is not
    # always true); (x + y) - y is not x (TVM's simplifier cancels it for floats); -(+0.0) is -0.0
    "select_ne": "T.if_then_else({p} != {q}, {p}, -{q})",
    "self_ne": "T.if_then_else({p} != {p}, {q}, {p})",
    "cancel": "({p} + {q}) - {q}",
    "neg": "-{p}",
}
SIGNED_ZERO_OPS = ("cancel", "neg")  # the sign of a zero result is compared


# ----------------------------------------------------------------------------- directed: 2^31 bytes


def _build_offsets(k: dict) -> Program:
    """Tiles of a one-byte tensor just past 2^31 bytes, read from offsets at and past 2^31
    (strategies.directed_knobs) into a small output: a backend computing element offsets in 32
    bits reads the wrong memory. Only the tiles read are filled (edges `window:`), so the input
    costs what it reads, not 2 GiB."""
    d, bm, bn, (gx, gy) = k["dtype"], k["bm"], k["bn"], k["grid"]
    r0, c0 = k["row0"], k["col0"]
    M, N = k["M"], k["N"]
    # what the program is for (the shrinker may propose anything): one-byte elements, every tile
    # inside the tensor and starting past offset 2^31
    if d not in ("int8", "uint8") or r0 * N < 2**31 or r0 + gy * bm > M or c0 < 0 or c0 + gx * bn > N:
        raise Unbuildable("the offsets program needs one-byte tiles inside the tensor, past offset 2^31")
    window = f"window:{r0}:{r0 + gy * bm}:{c0}:{c0 + gx * bn}"
    lo, hi = (0, 255) if d == "uint8" else (-128, 127)
    params = [Param("A", (M, N), d, "in", lo, hi, window), Param("Out", (gy * bm, gx * bn), d, "out")]
    w = _Writer()
    _header(w, params, [])
    grid = [str(gx), str(gy)]
    _kernel(w, grid, k["threads"])
    alloc = "T.alloc_shared" if k["scope"] == "shared" else "T.alloc_fragment"
    w(f'T_a = {alloc}(({bm}, {bn}), "{d}")')
    w(f"T.copy(A[{r0} + by * {bm}, {c0} + bx * {bn}], T_a)")
    w(f"T.copy(T_a, Out[by * {bm}, bx * {bn}])")
    tol = Tolerance(0.0, 0.0, "copies are exact: bit-exact")
    return _finish(k, w, params, {}, {"copy"} | _dtype_features(d), {"Out": tol}, grid)


EDGE_BUILDERS: Dict[str, Callable[..., Any]] = {"convert": _build_convert, "intops": _build_intops, "math": _build_math}
DIRECTED_BUILDERS: Dict[str, Callable[..., Any]] = {"offsets": _build_offsets}  # not drawn: strategies.directed_knobs
