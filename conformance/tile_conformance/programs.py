"""Program families: knobs -> runnable DSL source, parameters and tolerances.

A generated program is described by its *knobs*, a JSON-friendly dict drawn by
the hypothesis strategies in `strategies.py` (and reduced by `shrink.py`).
`build(knobs)` deterministically renders the knobs to DSL source text (the
same text a kernel author would write: `import tilecore.language as T`,
`@T.prim_func def main(...)`), the parameter list with how to fill each
argument, the dynamic-dimension bindings, the features it uses (the
vocabulary of `tilecore.language.features`) and the per-output tolerance that
follows from the error analysis documented in the README.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

from tilecore.ir.types import is_float, itemsize

from . import exprs as X

FLOAT_BOUND = 2.0  # float inputs are uniform in [-2, 2]
INT_BOUNDS = {
    "int8": (-8, 8),
    "int16": (-50, 50),
    "int32": (-100, 100),
    "int64": (-100, 100),
    "uint8": (0, 15),
    "bool": (0, 1),
    "int4": (-8, 7),  # (inputs are drawn as packed bytes: edges.fill)
}


@dataclass
class Param:
    """A kernel argument: `role` is "in", "out" (compared) or "inout" (initialised, compared)."""

    name: str
    shape: Tuple  # ints, or dynamic-dim names (str)
    dtype: str
    role: str = "in"
    lo: float = -FLOAT_BOUND
    hi: float = FLOAT_BOUND
    edges: str = ""  # edge class of the input values (edges.py); "" = uniform in [lo, hi]

    def concrete_shape(self, bindings: Dict[str, int]) -> Tuple[int, ...]:
        return tuple(bindings[s] if isinstance(s, str) else int(s) for s in self.shape)


@dataclass
class Tolerance:
    """|got - ref| <= atol + rtol * |ref| + ulps * ulp(ref) elementwise; all zero means exact.

    `signed_zero`: -0.0 and +0.0 must match too (results that are uniquely
    defined down to the sign of zero: copies and conversions).
    """

    atol: float = 0.0
    rtol: float = 0.0
    why: str = "exact"
    ulps: float = 0.0
    signed_zero: bool = False

    def to_json(self):
        out = {"atol": self.atol, "rtol": self.rtol, "why": self.why}
        if self.ulps:
            out["ulps"] = self.ulps
        if self.signed_zero:
            out["signed_zero"] = True
        return out

    @classmethod
    def from_json(cls, d: dict) -> "Tolerance":
        return cls(d["atol"], d["rtol"], d.get("why", ""), d.get("ulps", 0.0), d.get("signed_zero", False))


@dataclass
class Program:
    family: str
    knobs: dict
    source: str
    params: List[Param]
    bindings: Dict[str, int]
    features: frozenset
    tolerances: Dict[str, Tolerance]
    input_seed: int

    @property
    def outputs(self) -> List[Param]:
        return [p for p in self.params if p.role in ("out", "inout")]


class Unbuildable(Exception):
    """The knobs do not describe a valid program (used while shrinking)."""


# ----------------------------------------------------------------------------- text helpers


class _Writer:
    def __init__(self):
        self.lines: List[str] = []
        self.level = 0

    def __call__(self, line: str):
        self.lines.append("    " * self.level + line)

    def indent(self):
        self.level += 1

    def dedent(self):
        self.level -= 1

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _shape_text(shape) -> str:
    items = [s if isinstance(s, str) else str(int(s)) for s in shape]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _dim(v) -> str:
    return v if isinstance(v, str) else str(int(v))


def _header(w: _Writer, params: Sequence[Param], dyn: Sequence[str], helpers: Sequence[str] = ()):
    """The module up to the kernel's body: imports, dynamic dims, `helpers` (module-level source
    lines, e.g. a `@T.macro` the kernel calls), then `@T.prim_func def main(params):`."""
    w("import tilecore.language as T")
    w("")
    for line in helpers:
        w(line)
    if helpers:
        w("")
    for d in dyn:
        w(f'{d} = T.dynamic("{d}")')
    if dyn:
        w("")
    w("")
    w("@T.prim_func")
    sig = ", ".join(
        f"{p.name}: T.{p.dtype}" if p.shape == () else f'{p.name}: T.Tensor({_shape_text(p.shape)}, "{p.dtype}")'
        for p in params
    )  # a shape of () is a scalar parameter, passed at each call
    w(f"def main({sig}):")
    w.indent()


def _kernel(w: _Writer, grid: Sequence[str], threads: int):
    names = ["bx", "by", "bz"][: len(grid)]
    target = names[0] if len(names) == 1 else "(" + ", ".join(names) + ")"
    w(f"with T.Kernel({', '.join(grid)}, threads={threads}) as {target}:")
    w.indent()


def _ceildiv_text(extent, tile: int) -> str:
    if isinstance(extent, str):
        return f"T.ceildiv({extent}, {tile})"
    return str(-(-int(extent) // tile))


def _offset(var: str, tile: int) -> str:
    return f"{var} * {tile}"


def _region(name: str, starts: Sequence[str], extents: Sequence[int], form: str) -> str:
    """A global region in start-point form `A[s0, s1]` or slice form `A[s0:s0 + e0, ...]`."""
    if form == "slice":
        parts = []
        for s, e in zip(starts, extents):
            parts.append(f"{s}:{s} + {e}" if s != "0" else f"0:{e}")
        return f"{name}[{', '.join(parts)}]"
    return f"{name}[{', '.join(starts)}]"


def _partial(extent, tile: int) -> bool:
    return isinstance(extent, str) or int(extent) % tile != 0


def _dtype_features(*dtypes) -> set:
    return {f"dtype:{d}" for d in dtypes if d}


def _input_bounds(dtype: str) -> Tuple[float, float]:
    if is_float(dtype):
        return (-FLOAT_BOUND, FLOAT_BOUND)
    return INT_BOUNDS[dtype]


def _sum_tolerance(n: int, acc: str, abs_sum: float, out: str, why: str) -> Tolerance:
    """Summation of n terms (any order) in `acc`: each side within n*u*S of exact."""
    if not is_float(acc) and not is_float(out):
        return Tolerance(0.0, 0.0, "integer: exact")
    u = X.unit_roundoff(acc)
    atol = 2.0 * (n + 1) * u * abs_sum
    return Tolerance(atol, 2.0 * X.unit_roundoff(out), why)


def _out_dtype_fitting(preferred: str, lo: float, hi: float, allowed) -> str:
    for d in (preferred, "int32", "int64"):
        rlo, rhi = X.INT_RANGES[d]
        if rlo <= lo and hi <= rhi and (d in allowed or d == preferred):
            return d
    return "int64"


# ----------------------------------------------------------------------------- families


def build(knobs: dict) -> Program:
    """Render `knobs` to a Program (raises Unbuildable for inconsistent knobs)."""
    fam = knobs["family"]
    fn = _BUILDERS.get(fam)
    if fn is None:
        raise Unbuildable(f"unknown family {fam}")
    from .accuracy import fast_math_tables

    with fast_math_tables(bool(knobs.get("fast_math"))):  # the tolerances of a fast-math run
        return fn(knobs)


def _dims(k) -> Tuple:
    """(M or its dynamic name, N) and bindings."""
    if k.get("dyn"):
        return "m", k["N"], {"m": k["M"]}
    return k["M"], k["N"], {}


def _build_ewise(k: dict) -> Program:
    M, N, bindings = _dims(k)
    bm, bn = k["bm"], k["bn"]
    in_dtypes: List[str] = k["in_dtypes"]
    int_mode = not is_float(in_dtypes[0])
    stage, out_stage = k["stage"], k["out_stage"]
    feats = {"parallel"}
    params = [Param(chr(ord("A") + n), (M, N), d, "in", *_input_bounds(d)) for n, d in enumerate(in_dtypes)]
    partial = _partial(M, bm) or _partial(N, bn)
    ri, rj = f"by * {bm} + i", f"bx * {bn} + j"
    if stage == "direct":
        leaves = [X.Leaf(f"{p.name}[{ri}, {rj}]", p.dtype, p.lo, p.hi) for p in params]
    else:
        leaves = [X.Leaf(f"{p.name}_t[i, j]", p.dtype, p.lo, p.hi) for p in params]
    # names bound inside the T.Parallel body (bit 1: each input element, bit 2: the result)
    names = int(k.get("names", 0))
    bindings_text = []
    if names & 1:
        bindings_text = [f"{p.name.lower()}_v = {leaf.text}" for p, leaf in zip(params, leaves)]
        leaves = [X.Leaf(f"{p.name.lower()}_v", leaf.dtype, leaf.lo, leaf.hi) for p, leaf in zip(params, leaves)]
    if int_mode:
        r = X.render_int(k["expr"], leaves)
        out_dtype = _out_dtype_fitting(k["out_dtype"], r.lo, r.hi, k.get("allowed_dtypes", ()))
        tol = Tolerance(0.0, 0.0, "integer expression: exact")
    else:
        r = X.render_float(k["expr"], leaves)
        out_dtype = k["out_dtype"]
        if r.err == 0:
            tol = Tolerance(0.0, 0.0, "only exactly rounded steps on exact inputs: bit-exact")
        else:
            tol = Tolerance(
                2.0 * r.err,
                2.0 * X.unit_roundoff(out_dtype),
                f"forward error bound {r.err:.3g} of a {r.ops}-step expression, both sides",
            )
    if X.uses_funcs(k["expr"]):
        feats.add("math")
    if X.uses_select(k["expr"]):
        feats.add("select")
    out = Param("Out", (M, N), out_dtype, "out")
    params.append(out)
    dyn = ["m"] if k.get("dyn") else []
    w = _Writer()
    _header(w, params, dyn)
    grid = [_ceildiv_text(N, bn), _ceildiv_text(M, bm)]
    _kernel(w, grid, k["threads"])
    if stage != "direct":
        feats.add("copy")
        for p in params[:-1]:
            w(f'{p.name}_t = T.alloc_{stage}(({bm}, {bn}), "{p.dtype}")')
            w(f"T.copy({_region(p.name, [_offset('by', bm), _offset('bx', bn)], [bm, bn], k['form'])}, {p.name}_t)")
    if out_stage == "fragment":
        feats.add("copy")
        w(f'Out_t = T.alloc_fragment(({bm}, {bn}), "{out_dtype}")')
    w(f"for i, j in T.Parallel({bm}, {bn}):")
    w.indent()
    guard = partial and (stage == "direct" or out_stage == "direct")
    if guard:
        feats.add("runtime_if")
        w(f"if {ri} < {_dim(M)}:")
        w.indent()
        w(f"if {rj} < {_dim(N)}:")
        w.indent()
    target = "Out_t[i, j]" if out_stage == "fragment" else f"Out[{ri}, {rj}]"
    for line in bindings_text:
        w(line)
    if names & 2:
        w(f"result_v = {r.text}")
    w(f"{target} = {'result_v' if names & 2 else r.text}")
    w.level = 2  # back to the kernel body
    if out_stage == "fragment":
        w(f"T.copy(Out_t, {_region('Out', [_offset('by', bm), _offset('bx', bn)], [bm, bn], k['form'])})")
    if partial and "copy" in feats:
        feats.add("partial_tiles")
    if k.get("dyn"):
        feats.update({"dynamic_shape", "partial_tiles"} if "copy" in feats else {"dynamic_shape"})
    feats |= _dtype_features(*in_dtypes, out_dtype, *X.cast_dtypes(k["expr"]))
    if r.dtype:
        feats.add(f"dtype:{r.dtype}")
    return _finish(k, w, params, bindings, feats, {"Out": tol}, grid)


def _finish(k, w, params, bindings, feats, tols, grid) -> Program:
    if any(g != "1" for g in grid):
        feats.add("multi_block")
    return Program(k["family"], k, w.text(), params, bindings, frozenset(feats), tols, int(k.get("input_seed", 0)))


def _build_copy(k: dict) -> Program:
    M, N, bindings = _dims(k)
    bm, bn = k["bm"], k["bn"]
    d_in, d1, d2, d_out = k["dtypes"]
    s1, s2 = k["scopes"]
    lo, hi = _input_bounds(d_in)
    edges = k.get("edges", "")
    if not is_float(d_in) and not edges:
        # int chains stay inside every dtype of the chain (no wrap-around)
        for d in (d1, d2, d_out):
            lo, hi = max(lo, _input_bounds(d)[0]), min(hi, _input_bounds(d)[1])
    batch, heads = k.get("batch", 0), k.get("heads", 0)
    lead = tuple(d for d in (batch, heads) if d)  # rank 3 or 4: (batch, [heads,] M, N)
    walk = [(v, d) for v, d in (("z", batch), ("h", heads)) if d]
    A = Param("A", lead + (M, N), d_in, "in", lo, hi, edges)
    out = Param("Out", lead + (M, N), d_out, "out")
    params = [A, out]
    dyn = ["m"] if k.get("dyn") else []
    w = _Writer()
    _header(w, params, dyn)
    grid = [_ceildiv_text(N, bn), _ceildiv_text(M, bm)]
    _kernel(w, grid, k["threads"])
    feats = {"copy"}
    starts = [_offset("by", bm), _offset("bx", bn)]
    w(f'S1 = T.alloc_{s1}(({bm}, {bn}), "{d1}")')
    w(f'S2 = T.alloc_{s2}(({bm}, {bn}), "{d2}")')

    def region(name, form):  # the tile's region of A or Out, at point indices z (and h) of a rank-3 (4) tensor
        text = _region(name, starts, [bm, bn], form)
        return text.replace(f"{name}[", f"{name}[{''.join(v + ', ' for v, _ in walk)}", 1)

    for var, extent in walk:
        feats.add("serial")
        w(f"for {var} in T.serial({extent}):")
        w.indent()
    w(f"T.copy({region('A', k['forms'][0])}, S1)")
    rows = k.get("sub_rows") or 0
    if rows and rows < bm:
        feats.add("fill")
        fill = k.get("fill_value", 0)
        if fill == 0:
            w("T.clear(S2)")
        else:
            w(f"T.fill(S2, {fill!r})")
        w(f"T.copy(S1[0:{rows}, 0:{bn}], S2[0:{rows}, 0:{bn}])")
    else:
        w("T.copy(S1, S2)")
    w(f"T.copy(S2, {region('Out', k['forms'][1])})")
    if _partial(M, bm) or _partial(N, bn):
        feats.add("partial_tiles")
    if k.get("dyn"):
        feats.add("dynamic_shape")
    feats |= _dtype_features(d_in, d1, d2, d_out)
    tol = Tolerance(
        0.0, 0.0, "copies and dtype conversions are exactly rounded: bit-exact", signed_zero=is_float(d_out)
    )
    return _finish(k, w, params, bindings, feats, {"Out": tol}, grid)


_IDENTITY_FILL = {"sum": 0, "abssum": 0, "max": -100, "absmax": 0, "min": 100}


def _build_reduce(k: dict) -> Program:
    M, N, bindings = _dims(k)
    bm, bn, dim, kind = k["bm"], k["bn"], k["dim"], k["kind"]
    d_in, acc, d_out = k["in_dtype"], k["acc_dtype"], k["out_dtype"]
    lo, hi = _input_bounds(d_in)
    A = Param("A", (M, N), d_in, "in", lo, hi, k.get("edges", ""))
    red_extent, keep_extent = (N, M) if dim == 1 else (M, N)
    red_tile, keep_tile = (bn, bm) if dim == 1 else (bm, bn)
    out = Param("Out", (keep_extent,), d_out, "out")
    params = [A, out]
    dyn = ["m"] if k.get("dyn") else []
    w = _Writer()
    _header(w, params, dyn)
    grid = [_ceildiv_text(keep_extent, keep_tile)]
    _kernel(w, grid, k["threads"])
    feats = {"copy", "reduce"}
    w(f'A_t = T.alloc_{k["src_scope"]}(({bm}, {bn}), "{d_in}")')
    w(f'R_t = T.alloc_fragment(({keep_tile},), "{acc}")')
    n_tiles = -(-int(k["N"] if dim == 1 else k["M"]) // red_tile)
    single = k["mode"] == "clear" and (not isinstance(red_extent, str)) and n_tiles == 1
    init = 0
    if single:
        start = [_offset("bx", bm), "0"] if dim == 1 else ["0", _offset("bx", bn)]
        w(f"T.copy({_region('A', start, [bm, bn], k['form'])}, A_t)")
        w(f"T.reduce_{kind}(A_t, R_t, dim={dim})")
        steps = 1
    else:
        feats.add("fill")
        init = k.get("init", _IDENTITY_FILL[kind])
        if is_float(acc):
            w(f"T.fill(R_t, {float(init)!r})")
        else:
            w(f"T.fill(R_t, {int(init)})")
        loop = k["loop"]
        nk = _ceildiv_text(red_extent, red_tile)
        feats.add({"serial": "serial", "range": "serial", "unroll": "unroll", "pipelined": "pipelined"}[loop])
        if loop == "serial":
            w(f"for k in T.serial({nk}):")
        elif loop == "range":
            w(f"for k in range({nk}):")
        elif loop == "unroll":
            w(f"for k in T.unroll({nk}):")
        else:
            w(f"for k in T.Pipelined({nk}, num_stages={k.get('num_stages', 2)}):")
        w.indent()
        start = [_offset("bx", bm), _offset("k", bn)] if dim == 1 else [_offset("k", bm), _offset("bx", bn)]
        w(f"T.copy({_region('A', start, [bm, bn], k['form'])}, A_t)")
        w(f"T.reduce_{kind}(A_t, R_t, dim={dim}, clear=False)")
        w.dedent()
        steps = n_tiles
    w(f"T.copy(R_t, Out[{_offset('bx', keep_tile)}])")
    n = steps * red_tile
    if _partial(M, bm) or _partial(N, bn):
        feats.add("partial_tiles")
    if k.get("dyn"):
        feats.add("dynamic_shape")
    feats |= _dtype_features(d_in, acc, d_out)
    if kind in ("sum", "abssum"):
        bound = max(abs(lo), abs(hi))
        tol = _sum_tolerance(
            n, acc, n * bound + abs(init), d_out, f"sum of {n} terms in {acc}: (n+1)*u*sum|x| per side"
        )
        if not is_float(acc) and is_float(d_out):
            tol = Tolerance(0.0, 0.0, "integer sum converted once: exact")
    else:
        tol = Tolerance(0.0, 0.0, f"{kind} is order-independent and exactly rounded: bit-exact")
    return _finish(k, w, params, bindings, feats, {"Out": tol}, grid)


def int4_dims(k: dict) -> Tuple[int, int, int]:
    """(M, N, K) of gemm knobs `k`, with the last dimension of each int4 operand rounded up to even
    (int4 tensors are passed packed two per byte: A's is M when transposed, else K; B's is K when
    transposed, else N); unchanged for other dtypes, so shrinking never makes an odd one."""
    M, N, K = k["M"], k["N"], k["K"]
    if k["in_dtype"] != "int4":
        return M, N, K
    if k["ta"]:
        M += M % 2
    if k["tb"] or not k["ta"]:
        K += K % 2
    if not k["tb"]:
        N += N % 2
    return M, N, K


def _build_gemm(k: dict) -> Program:
    M, N, K = int4_dims(k)
    bm, bn, bk = k["bm"], k["bn"], k["bk"]
    ta, tb = k["ta"], k["tb"]
    d_in, acc, d_out = k["in_dtype"], k["acc_dtype"], k["out_dtype"]
    lo, hi = _input_bounds(d_in)
    edges = ""
    if d_in in ("int8", "uint8"):  # the whole range: partial sums overflow any narrower accumulator
        (lo, hi), edges = X.INT_RANGES[d_in], "limits"
    if k.get("fp8_exact"):  # small integers: exact sums in any order, so the fp8 result is exact too
        lo, hi, edges = -8.0, 8.0, "intfloat"
    A = Param("A", (K, M) if ta else (M, K), d_in, "in", lo, hi, edges)
    B = Param("B", (N, K) if tb else (K, N), d_in, "in", lo, hi, edges)
    C = Param("C", (M, N), d_out, "out")
    params = [A, B, C]
    w = _Writer()
    _header(w, params, [])
    grid = [_ceildiv_text(N, bn), _ceildiv_text(M, bm)]
    _kernel(w, grid, k["threads"])
    feats = {"copy", "gemm"}
    if ta or tb:
        feats.add("gemm_transpose")
    if k.get("swizzle"):
        w("T.use_swizzle(panel_size=4)")
    a_shape = (bk, bm) if ta else (bm, bk)
    b_shape = (bn, bk) if tb else (bk, bn)
    w(f'A_s = T.alloc_{k["a_scope"]}({_shape_text(a_shape)}, "{d_in}")')
    w(f'B_s = T.alloc_{k["b_scope"]}({_shape_text(b_shape)}, "{d_in}")')
    w(f'C_f = T.alloc_fragment(({bm}, {bn}), "{acc}")')
    flags = ""
    if ta:
        flags += ", transpose_A=True"
    if tb:
        flags += ", transpose_B=True"
    nk = -(-K // bk)
    loop = k["loop"] if nk > 1 else "single"

    def loads(kv: str):
        a_start = [_offset(kv, bk), _offset("by", bm)] if ta else [_offset("by", bm), _offset(kv, bk)]
        b_start = [_offset("bx", bn), _offset(kv, bk)] if tb else [_offset(kv, bk), _offset("bx", bn)]
        w(f"T.copy({_region('A', a_start, list(a_shape), k['form'])}, A_s)")
        w(f"T.copy({_region('B', b_start, list(b_shape), k['form'])}, B_s)")

    if loop == "single":
        a_start = ["0", _offset("by", bm)] if ta else [_offset("by", bm), "0"]
        b_start = [_offset("bx", bn), "0"] if tb else ["0", _offset("bx", bn)]
        w(f"T.copy({_region('A', a_start, list(a_shape), k['form'])}, A_s)")
        w(f"T.copy({_region('B', b_start, list(b_shape), k['form'])}, B_s)")
        if k.get("clear_accum", True):
            w(f"T.gemm(A_s, B_s, C_f{flags}, clear_accum=True)")
        else:
            feats.add("fill")
            w("T.clear(C_f)")
            w(f"T.gemm(A_s, B_s, C_f{flags})")
    else:
        feats.add("fill")
        w("T.clear(C_f)")
        if loop == "pipelined":
            feats.add("pipelined")
            w(f"for k in T.Pipelined({nk}, num_stages={k.get('num_stages', 2)}):")
        else:
            feats.add("serial")
            w(f"for k in T.serial({nk}):")
        w.indent()
        loads("k")
        w(f"T.gemm(A_s, B_s, C_f{flags})")
        w.dedent()
    w(f"T.copy(C_f, {_region('C', [_offset('by', bm), _offset('bx', bn)], [bm, bn], k['form'])})")
    if M % bm or N % bn or K % bk:
        feats.add("partial_tiles")
    feats |= _dtype_features(d_in, acc, d_out)
    bound = max(abs(lo), abs(hi))
    n = nk * bk
    if k.get("fp8_exact"):
        tol = Tolerance(0.0, 0.0, f"{d_in} products of small integers: exact sums, one rounding into {d_out}")
    elif is_float(acc):
        tol = _sum_tolerance(
            n, acc, n * bound * bound, d_out, f"K={K} products accumulated in {acc}: (K+1)*u*sum|a*b| per side"
        )
    else:
        tol = Tolerance(0.0, 0.0, "integer gemm: exact")
    return _finish(k, w, params, bindings={}, feats=feats, tols={"C": tol}, grid=grid)


def _build_atomic(k: dict) -> Program:
    M, N = k["M"], k["N"]
    bm, bn, kind, d = k["bm"], k["bn"], k["kind"], k["dtype"]
    lo, hi = _input_bounds(d)
    # floats hold small integers: every partial sum is exact, so any order gives the same bits
    exact_floats = is_float(d)
    A = Param("A", (M, N), d, "in", lo, hi, "intfloat" if exact_floats else "")
    feats = {"atomic", "copy"}
    w = _Writer()
    if k["form"] == "tile":
        out = Param("Out", (N,), d, "inout", lo, hi, A.edges)
        params = [A, out]
        _header(w, params, [])
        grid = [_ceildiv_text(N, bn), _ceildiv_text(M, bm)]
        _kernel(w, grid, k["threads"])
        w(f'A_t = T.alloc_fragment(({bm}, {bn}), "{d}")')
        w(f"T.copy(A[by * {bm}, bx * {bn}], A_t)")
        w(f'R_t = T.alloc_fragment(({bn},), "{d}")')
        red = {"add": "sum", "max": "max", "min": "min"}[kind]
        w(f"T.reduce_{red}(A_t, R_t, dim=0)")
        w(f"T.atomic_{kind}(Out[bx * {bn}], R_t)")
        feats.add("reduce")
        contributions = M
        if M % bm:
            feats.add("partial_tiles")
    else:
        R = k["rows"]
        out = Param("Out", (R, N), d, "inout", lo, hi, A.edges)
        params = [A, out]
        _header(w, params, [])
        grid = [_ceildiv_text(M, bm)]
        _kernel(w, grid, k["threads"])
        feats.discard("copy")
        feats.add("parallel")
        w(f"for i, j in T.Parallel({bm}, {N}):")
        w.indent()
        if M % bm:
            feats.add("runtime_if")
            w(f"if bx * {bm} + i < {M}:")
            w.indent()
        w(f"T.atomic_{kind}(Out[(bx * {bm} + i) % {R}, j], A[bx * {bm} + i, j])")
        contributions = -(-M // R)
    feats |= _dtype_features(d)
    if kind == "add" and is_float(d) and (contributions + 1) * 8 >= 2.0 ** {"float16": 11, "bfloat16": 8}.get(d, 24):
        bound = max(abs(lo), abs(hi), 8)
        tol = _sum_tolerance(
            contributions + 1,
            d,
            (contributions + 1) * bound,
            d,
            f"{contributions} atomic additions in any order in {d}",
        )
    elif kind == "add" and is_float(d):
        tol = Tolerance(
            0.0,
            0.0,
            f"{contributions} atomic additions of small integers in {d}: every partial "
            "sum is exact, so any order gives the same result",
        )
    else:
        tol = Tolerance(0.0, 0.0, f"atomic {kind} on {d}: order-independent, exact")
    return _finish(k, w, params, {}, feats, {"Out": tol}, grid)


def _build_cumsum(k: dict) -> Program:
    M, N, bindings = _dims(k)
    bm, bn, dim, d = k["bm"], k["bn"], k["dim"], k["dtype"]
    lo, hi = _input_bounds(d)
    A = Param("A", (M, N), d, "in", lo, hi, k.get("edges", ""))
    out = Param("Out", (M, N), d, "out")
    params = [A, out]
    dyn = ["m"] if k.get("dyn") else []
    w = _Writer()
    _header(w, params, dyn)
    grid = [_ceildiv_text(N, bn), _ceildiv_text(M, bm)]
    _kernel(w, grid, k["threads"])
    feats = {"copy", "cumsum"}
    starts = [_offset("by", bm), _offset("bx", bn)]
    w(f'A_t = T.alloc_{k["scope"]}(({bm}, {bn}), "{d}")')
    w(f"T.copy({_region('A', starts, [bm, bn], k['form'])}, A_t)")
    rev = ", reverse=True" if k["reverse"] else ""
    if k["inplace"]:
        w(f"T.cumsum(A_t, A_t, dim={dim}{rev})")
        res = "A_t"
    else:
        w(f'C_t = T.alloc_fragment(({bm}, {bn}), "{d}")')
        w(f"T.cumsum(A_t, C_t, dim={dim}{rev})")
        res = "C_t"
    w(f"T.copy({res}, {_region('Out', starts, [bm, bn], k['form'])})")
    if _partial(M, bm) or _partial(N, bn):
        feats.add("partial_tiles")
    if k.get("dyn"):
        feats.add("dynamic_shape")
    feats |= _dtype_features(d)
    n = bm if dim == 0 else bn
    bound = max(abs(lo), abs(hi))
    tol = _sum_tolerance(n, d, n * bound, d, f"prefix sums of up to {n} terms in {d}")
    return _finish(k, w, params, bindings, feats, {"Out": tol}, grid)


def _build_control(k: dict) -> Program:
    M, N, bm = k["M"], k["N"], k["bm"]
    d, acc = k["dtype"], k["acc_dtype"]
    lo, hi = _input_bounds(d)
    A = Param("A", (M, N), d, "in", lo, hi)
    out = Param("Out", (M,), acc, "out")
    params = [A, out]
    w = _Writer()
    _header(w, params, [])
    grid = [_ceildiv_text(M, bm)]
    _kernel(w, grid, k["threads"])
    feats = {"copy", "runtime_if"}
    thr = k["thr"] if is_float(d) else int(round(k["thr"]))
    zero = "0.0" if is_float(acc) else "0"
    half = " * 0.5" if is_float(acc) else " * 2"
    w(f'A_s = T.alloc_shared(({bm}, {N}), "{d}")')
    w(f"T.copy(A[bx * {bm}, 0], A_s)")
    w(f'O_t = T.alloc_fragment(({bm},), "{acc}")')
    use_var = k["use_var"]
    if use_var:
        feats.add("alloc_var")
        w(f's = T.alloc_var("{acc}")')
    if k.get("while"):
        feats |= {"while_loop", "alloc_var"}
        w('j = T.alloc_var("int32")')
        w('lim = T.alloc_var("int32")')
    loop = k["loop"]
    feats.add("unroll" if loop == "unroll" else "serial")
    w(f"for i in T.{'unroll' if loop == 'unroll' else 'serial'}({bm}):")
    w.indent()
    acc_ref = "s" if use_var else "O_t[i]"
    w(f"{acc_ref} = {zero}")
    head = {"serial": f"T.serial({N})", "range": f"range({N})", "unroll": f"T.unroll({N})"}[loop]
    if k.get("while"):
        _while_head(w, N)
    else:
        w(f"for j in {head}:")
    w.indent()
    val = "A_s[i, j]" if d == acc else f'T.cast(A_s[i, j], "{acc}")'
    w(f"if A_s[i, j] > {thr!r}:")
    w.indent()
    w(f"{acc_ref} = {acc_ref} + {val}")
    w.dedent()
    if k["with_else"]:
        w("else:")
        w.indent()
        w(f"{acc_ref} = {acc_ref} - {val}{half}")
        w.dedent()
    if k.get("while"):
        _while_tail(w, k["while"], lo)
    w.dedent()
    if use_var:
        w("O_t[i] = s")
    w.dedent()
    if k["block_if"]:
        feats.add("parallel")
        w("if bx % 2 == 1:")
        w.indent()
        w(f"for i in T.Parallel({bm}):")
        w.indent()
        w(f"O_t[i] = O_t[i]{half}")
        w.dedent()
        w.dedent()
    if k.get("print"):
        feats.add("print")
        w('T.print(O_t[0], msg="first row sum")')
    w(f"T.copy(O_t, Out[bx * {bm}])")
    if M % bm:
        feats.add("partial_tiles")
    feats |= _dtype_features(d, acc)
    bound = max(abs(lo), abs(hi)) * (2 if not is_float(acc) else 1)
    if is_float(acc) or is_float(d):
        tol = _sum_tolerance(N + 1, acc, (N + 1) * bound * 2, acc, f"{N} conditional accumulations in {acc}")
    else:
        tol = Tolerance(0.0, 0.0, "integer accumulation: exact")
    return _finish(k, w, params, {}, feats, {"Out": tol}, grid)


def _stop_below(lo) -> str:
    return repr(lo * 0.75 if isinstance(lo, float) else int(lo * 3 // 4))


def _while_head(w: _Writer, N: int) -> None:
    """The row walk as a `while` on counter j up to `lim`: N, or (kind "stop", _while_tail) just
    past the first element below 3/4 of the inputs' lower bound."""
    w("j = 0")
    w(f"lim = {N}")
    w("while j < lim:")


def _while_tail(w: _Writer, kind: str, lo) -> None:
    if kind == "stop":
        w(f"if A_s[i, j] < {_stop_below(lo)}:")
        w.indent()
        w("lim = j + 1")
        w.dedent()
    w("j = j + 1")


def chain_leaves(k: dict, c_text: str, bias_text: str) -> List[X.Leaf]:
    """The epilogue's inputs: the GEMM result (with its error bound) and the bias."""
    lo, hi = _input_bounds(k["in_dtype"])
    bound = max(abs(lo), abs(hi))
    n_terms = -(-k["K"] // k["bk"]) * k["bk"]
    gemm_mag = n_terms * bound * bound
    gemm_err = (n_terms + 1) * X.unit_roundoff(k["acc_dtype"]) * gemm_mag
    return [
        X.Leaf(c_text, k["acc_dtype"], -gemm_mag, gemm_mag, gemm_err),
        X.Leaf(bias_text, "float32", -FLOAT_BOUND, FLOAT_BOUND),
    ]


def _build_chain(k: dict) -> Program:
    """A fused tile-op chain: pipelined GEMM -> elementwise epilogue with a broadcast bias ->
    row reduction -> broadcast subtraction, all on fragments (layouts must agree across ops)."""
    M, N, K = k["M"], k["N"], k["K"]
    bm, bn, bk = k["bm"], k["bn"], k["bk"]
    d_in, acc = k["in_dtype"], k["acc_dtype"]
    lo, hi = _input_bounds(d_in)
    A = Param("A", (M, K), d_in, "in", lo, hi)
    B = Param("B", (K, N), d_in, "in", lo, hi)
    bias = Param("Bias", (N,), "float32", "in", -FLOAT_BOUND, FLOAT_BOUND)
    out = Param("Out", (M, N), "float32", "out")
    rows = Param("RowOut", (M,), "float32", "out")
    params = [A, B, bias, out, rows]
    w = _Writer()
    _header(w, params, [])
    grid = [_ceildiv_text(M, bm)]
    _kernel(w, grid, k["threads"])
    feats = {"copy", "gemm", "fill", "parallel", "reduce"}
    nk = -(-K // bk)
    w(f'A_s = T.alloc_shared(({bm}, {bk}), "{d_in}")')
    w(f'B_s = T.alloc_shared(({bk}, {bn}), "{d_in}")')
    w(f'C_f = T.alloc_fragment(({bm}, {bn}), "{acc}")')
    w("T.clear(C_f)")
    if k["loop"] == "pipelined":
        feats.add("pipelined")
        w(f"for k in T.Pipelined({nk}, num_stages={k.get('num_stages', 2)}):")
    else:
        feats.add("serial")
        w(f"for k in T.serial({nk}):")
    w.indent()
    w(f"T.copy(A[bx * {bm}, k * {bk}], A_s)")
    w(f"T.copy(B[k * {bk}, 0], B_s)")
    w("T.gemm(A_s, B_s, C_f)")
    w.dedent()
    w(f'Bias_s = T.alloc_shared(({bn},), "float32")')
    w("T.copy(Bias[0], Bias_s)")
    leaves = chain_leaves(k, "C_f[i, j]", "Bias_s[j]")
    gemm_err = leaves[0].err
    r = X.render_float(k["expr"], leaves)
    if X.uses_funcs(k["expr"]):
        feats.add("math")
    if X.uses_select(k["expr"]):
        feats.add("select")
    w(f'E_f = T.alloc_fragment(({bm}, {bn}), "float32")')
    w(f"for i, j in T.Parallel({bm}, {bn}):")
    w.indent()
    w(f"E_f[i, j] = {r.text}")
    w.dedent()
    e_err = r.err + X.unit_roundoff("float32") * r.mag  # the store into float32
    kind = k["kind"]
    w(f'R_f = T.alloc_fragment(({bm},), "float32")')
    w(f"T.reduce_{kind}(E_f, R_f, dim=1)")
    if kind == "sum":
        r_mag = bn * r.mag
        r_err = bn * e_err + (bn + 1) * X.unit_roundoff("float32") * r_mag
    else:
        r_mag, r_err = r.mag, e_err
    w(f"for i, j in T.Parallel({bm}, {bn}):")
    w.indent()
    w("E_f[i, j] = E_f[i, j] - R_f[i]")
    w.dedent()
    o_err = e_err + r_err + X.unit_roundoff("float32") * (r.mag + r_mag)
    w(f"T.copy(E_f, Out[bx * {bm}, 0])")
    w(f"T.copy(R_f, RowOut[bx * {bm}])")
    if M % bm or N % bn or K % bk:
        feats.add("partial_tiles")
    feats |= _dtype_features(d_in, acc, "float32", r.dtype)
    why = f"GEMM (K={K}) error {gemm_err:.2g} through a {r.ops}-step epilogue and a row {kind}"
    tols = {
        "Out": Tolerance(2 * o_err, 2 * X.unit_roundoff("float32"), why),
        "RowOut": Tolerance(2 * r_err, 2 * X.unit_roundoff("float32"), why),
    }
    return _finish(k, w, params, {}, feats, tols, grid)


_BUILDERS = {
    "ewise": _build_ewise,
    "copy": _build_copy,
    "reduce": _build_reduce,
    "gemm": _build_gemm,
    "atomic": _build_atomic,
    "cumsum": _build_cumsum,
    "control": _build_control,
    "chain": _build_chain,
}
from .edge_programs import DIRECTED_BUILDERS, EDGE_BUILDERS  # noqa: E402  (they build on the helpers above)
from .form_programs import FORM_BUILDERS, FORMS, IDIOMS, idiom_cells  # noqa: E402, F401  (strategies, coverage)

_BUILDERS.update(EDGE_BUILDERS)
FAMILIES = tuple(_BUILDERS)  # the families a run draws from in turn
_BUILDERS.update(DIRECTED_BUILDERS)  # built (reruns, reports) but never drawn
_BUILDERS.update(FORM_BUILDERS)  # directed too (strategies.directed_knobs)


def shared_bytes(k: dict) -> int:
    """Shared + fragment bytes a program allocates per block (checked against the backend's limit)."""
    fam = k["family"]
    if fam in ("gemm", "chain"):
        operands = (k["bm"] * k["bk"] + k["bk"] * k["bn"]) * itemsize(k["in_dtype"])
        return operands + k["bm"] * k["bn"] * itemsize(k["acc_dtype"])
    if fam == "control":
        return k["bm"] * k["N"] * itemsize(k["dtype"])
    return 3 * k.get("bm", 1) * k.get("bn", 1) * 8
