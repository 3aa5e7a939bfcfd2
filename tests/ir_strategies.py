"""Hypothesis strategies: random valid Tile IR, built with the frontend's typing rules.

Every expression is made by tilecore.frontend.exprs (literal adoption, explicit
promotion casts), so the IR is canonical: what the frontend would produce for
some DSL program. Statements respect the checker's rules (tile operations and
allocations outside T.Parallel, constant indices inside buffers, gemm dtypes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Dict, List

from hypothesis import strategies as st

from tilecore.frontend import exprs as E
from tilecore.ir import nodes as N
from tilecore.ir.types import DTYPES, FLOAT_DTYPES, INT_DTYPES

NUMERIC = tuple(d for d in DTYPES if d != "bool")
ARITH = ("+", "-", "*", "//", "%", "min", "max")
FLOAT_ARITH = ("+", "-", "*", "/", "min", "max", "pow")
INT_ONLY = ("&", "|", "^", "<<", ">>")
NAME_STEMS = ("x", "acc", "i", "tile", "buf", "v", "s_1")


@dataclass
class Env:
    """What a statement may refer to: int vars, all vars, buffers; plus the name counter."""

    names: Dict[str, int]
    int_vars: List[N.Var] = field(default_factory=list)
    vars: List[N.Var] = field(default_factory=list)
    buffers: List[N.Buffer] = field(default_factory=list)
    in_parallel: bool = False
    depth: int = 0

    def child(self, **changes) -> "Env":
        return replace(
            self,
            int_vars=list(self.int_vars),
            vars=list(self.vars),
            buffers=list(self.buffers),
            depth=self.depth + 1,
            **changes,
        )

    def fresh(self, stem: str) -> str:
        n = self.names.get(stem, 0)
        self.names[stem] = n + 1
        return f"{stem}{n}"

    def add_var(self, var: N.Var) -> None:
        self.vars.append(var)
        if var.dtype == "int32":
            self.int_vars.append(var)


@st.composite
def constants(draw, dtype: str):
    if dtype in FLOAT_DTYPES:
        value = draw(st.sampled_from([0.0, 1.0, -2.5, 0.1, 1e-3, 3.0, 65504.0, math.inf, -math.inf]))
    elif dtype == "bool":
        value = draw(st.booleans())
    else:
        low = 0 if dtype == "uint8" else -100
        value = draw(st.integers(low, 100))
    return E.const(value, dtype)


@st.composite
def index_exprs(draw, env: Env, dim):
    """An int32 index: a constant inside `dim` (when static) or a variable expression."""
    choices = ["const"] + (["var", "affine"] if env.int_vars else [])
    kind = draw(st.sampled_from(choices))
    if kind == "const":
        upper = dim - 1 if isinstance(dim, int) else 7
        return E.const(draw(st.integers(0, upper)), "int32")
    var = draw(st.sampled_from(env.int_vars))
    if kind == "var":
        return var
    return E.binary(draw(st.sampled_from(["+", "*"])), var, draw(st.integers(0, 3)))


@st.composite
def loads(draw, env: Env):
    buf = draw(st.sampled_from(env.buffers))
    if buf.scope == "var":
        return N.Load(buf, (E.const(0, "int32"),), buf.dtype)
    return N.Load(buf, tuple(draw(index_exprs(env, d)) for d in buf.shape), buf.dtype)


@st.composite
def exprs(draw, env: Env, depth: int = 2):
    """A scalar expression of any dtype."""
    leaves = ["const"] + (["var"] if env.vars else []) + (["load"] if env.buffers else [])
    kinds = leaves + (["binary", "compare", "unary", "call", "cast", "select", "logic"] if depth > 0 else [])
    kind = draw(st.sampled_from(kinds))
    sub = exprs(env, depth - 1)
    if kind == "const":
        return draw(constants(draw(st.sampled_from(DTYPES))))
    if kind == "var":
        return draw(st.sampled_from(env.vars))
    if kind == "load":
        return draw(loads(env))
    if kind == "binary":
        a = draw(sub)
        b = draw(st.one_of(sub, st.integers(-5, 5), st.sampled_from([0.5, 2.0])))
        if isinstance(b, int) and a.dtype == "uint8":
            b = abs(b)  # a literal must fit the dtype it adopts (-1 next to uint8 is an error)
        dtype = E.binary("+", a, b).dtype if not isinstance(b, float) or a.dtype in FLOAT_DTYPES else "float32"
        ops = FLOAT_ARITH if dtype in FLOAT_DTYPES else ARITH + INT_ONLY + ("pow",)
        return E.binary(draw(st.sampled_from(ops)), a, b)
    if kind == "compare":
        return E.binary(draw(st.sampled_from(N.COMPARE_OPS)), draw(sub), draw(st.one_of(sub, st.integers(0, 3))))
    if kind == "logic":
        return E.binary(draw(st.sampled_from(N.LOGIC_OPS)), draw(sub), draw(sub))
    if kind == "unary":
        a = draw(sub)
        ops = ["not"] + (["neg"] if a.dtype != "bool" else []) + (["~"] if a.dtype in INT_DTYPES + ("bool",) else [])
        return E.unary(draw(st.sampled_from(ops)), a)
    if kind == "call":
        a = draw(sub)
        if a.dtype == "bool":
            a = E.cast(a, "int32")
        return E.math_call(draw(st.sampled_from(N.MATH_FUNCS)), a)
    if kind == "cast":
        return E.cast(draw(sub), draw(st.sampled_from(DTYPES)))
    a = draw(st.one_of(sub, st.integers(0, 2)))
    return E.select(draw(sub), a, draw(sub))


# ----------------------------------------------------------------------------- regions


@st.composite
def regions(draw, env: Env, buf: N.Buffer, extents):
    """A region of `buf` with the given extents (each <= the dim for on-chip buffers)."""
    starts = []
    for dim, extent in zip(buf.shape, extents):
        if buf.scope == "global" and env.int_vars and draw(st.booleans()):
            starts.append(E.binary("*", draw(st.sampled_from(env.int_vars)), extent))
        else:
            upper = dim - extent if isinstance(dim, int) else 4
            starts.append(E.const(draw(st.integers(0, max(upper, 0))), "int32"))
    return N.Region(buf, tuple(starts), tuple(extents))


def fits(buf: N.Buffer, extents) -> bool:
    return len(extents) == buf.ndim and all(
        not isinstance(d, int) or e <= d or buf.scope == "global" for d, e in zip(buf.shape, extents)
    )


@st.composite
def tile_extents(draw, buf: N.Buffer):
    """Extents of a sub-tile of `buf`."""
    return tuple(draw(st.integers(1, d if isinstance(d, int) else 8)) for d in buf.shape)


def embed(extents, rank: int, draw):
    """`extents` with unit dims inserted to reach `rank` (same squeezed shape)."""
    out = list(extents)
    while len(out) < rank:
        out.insert(draw(st.integers(0, len(out))), 1)
    return tuple(out)


@st.composite
def copy_pair(draw, env: Env):
    tiles = [b for b in env.buffers if b.scope != "var"]
    src = draw(st.sampled_from(tiles))
    extents = draw(tile_extents(src))
    squeezed = tuple(e for e in extents if e != 1)
    candidates = [b for b in tiles if b.ndim >= len(squeezed) and fits(b, embed(squeezed, b.ndim, lambda s: 0))]
    dst = draw(st.sampled_from(candidates))
    dst_extents = embed(squeezed, dst.ndim, draw)
    if not fits(dst, dst_extents):
        dst_extents = embed(squeezed, dst.ndim, lambda s: 0)
    return draw(regions(env, src, extents)), draw(regions(env, dst, dst_extents))


# ----------------------------------------------------------------------------- statements


def alloc(env: Env, scope: str, shape, dtype: str) -> N.Alloc:
    buf = N.Buffer(env.fresh("buf"), tuple(shape), dtype, scope)
    env.buffers.append(buf)
    return N.Alloc(buf)


@st.composite
def statements(draw, env: Env):
    """One or a few statements valid in `env` (which they may extend)."""
    kinds = ["store", "let", "alloc", "if", "for", "print"] if not env.in_parallel else ["store", "let", "if", "print"]
    if not env.in_parallel:
        kinds += ["parallel", "copy", "fill", "gemm", "reduce", "cumsum", "hint"]
    if any(b.scope == "global" and b.dtype != "bool" for b in env.buffers):
        kinds.append("atomic")
    if env.depth >= 3:
        kinds = [k for k in kinds if k not in ("if", "for", "parallel")]
    kind = draw(st.sampled_from(kinds))
    return draw(STATEMENT_KINDS[kind](env))


@st.composite
def bodies(draw, env: Env, min_size: int = 0, max_size: int = 4):
    out = []
    for _ in range(draw(st.integers(min_size, max_size))):
        out.extend(draw(statements(env)))
    return tuple(out)


@st.composite
def store_stmt(draw, env):
    writable = [b for b in env.buffers]
    buf = draw(st.sampled_from(writable))
    indices = (E.const(0, "int32"),) if buf.scope == "var" else tuple(draw(index_exprs(env, d)) for d in buf.shape)
    value = draw(st.one_of(exprs(env), constants(buf.dtype)))
    return [N.Store(buf, indices, value)]


@st.composite
def let_stmt(draw, env):
    value = draw(exprs(env))
    var = N.Var(env.fresh(draw(st.sampled_from(NAME_STEMS))), value.dtype)
    env.add_var(var)
    return [N.Let(var, value)]


@st.composite
def alloc_stmt(draw, env):
    scope = draw(st.sampled_from(["shared", "fragment", "local", "var"]))
    shape = (1,) if scope == "var" else tuple(draw(st.lists(st.integers(1, 8), min_size=1, max_size=2)))
    return [alloc(env, scope, shape, draw(st.sampled_from(DTYPES)))]


@st.composite
def if_stmt(draw, env):
    cond = E.to_bool(draw(exprs(env)))
    return [N.If(cond, draw(bodies(env.child(), 0, 3)), draw(bodies(env.child(), 0, 2)))]


@st.composite
def for_stmt(draw, env):
    kind = draw(st.sampled_from(N.LOOP_KINDS))
    begin = draw(
        st.one_of(
            st.just(E.const(0, "int32")),
            st.integers(1, 4).map(lambda v: E.const(v, "int32")),
            *([st.sampled_from(env.int_vars)] if env.int_vars else []),
        )
    )
    extent = draw(
        st.one_of(
            st.integers(0, 4).map(lambda v: E.const(v, "int32")),
            *([st.sampled_from(env.int_vars).map(lambda v: E.binary("+", v, 1))] if env.int_vars else []),
        )
    )
    stages = draw(st.integers(0, 3)) if kind == "pipelined" else 0
    inner = env.child()
    var = N.Var(env.fresh(draw(st.sampled_from(("k", "i", "t")))), "int32")
    inner.add_var(var)
    return [N.For(var, begin, extent, kind, draw(bodies(inner, 1, 3)), stages)]


@st.composite
def parallel_stmt(draw, env):
    extents = tuple(draw(st.lists(st.integers(1, 8), min_size=1, max_size=2)))
    inner = env.child(in_parallel=True)
    pvars = tuple(N.Var(env.fresh("p"), "int32") for _ in extents)
    for v in pvars:
        inner.add_var(v)
    return [N.Parallel(pvars, extents, draw(bodies(inner, 1, 3)))]


@st.composite
def print_stmt(draw, env):
    msg = draw(st.sampled_from(["", "value", 'it\'s "quoted"']))
    tiles = [b for b in env.buffers if b.scope != "var" and not env.in_parallel]
    if tiles and draw(st.booleans()):
        return [N.Print(draw(st.sampled_from(tiles)), msg)]
    return [N.Print(draw(exprs(env, 1)), msg)]


@st.composite
def copy_stmt(draw, env):
    if not any(b.scope != "var" for b in env.buffers):
        return draw(alloc_stmt(env))
    src, dst = draw(copy_pair(env))
    return [N.Copy(src, dst)]


@st.composite
def fill_stmt(draw, env):
    tiles = [b for b in env.buffers if b.scope != "var"]
    if not tiles:
        return draw(alloc_stmt(env))
    buf = draw(st.sampled_from(tiles))
    region = draw(regions(env, buf, draw(tile_extents(buf))))
    value = draw(st.one_of(constants(buf.dtype), exprs(env, 1)))
    return [N.Fill(region, value)]


GEMM_TYPES = (
    ("float16", "float32"),
    ("bfloat16", "float32"),
    ("float32", "float32"),
    ("int8", "int32"),
    ("float64", "float64"),
)


@st.composite
def gemm_stmt(draw, env):
    m, n, k = (draw(st.sampled_from([1, 2, 4, 8])) for _ in range(3))
    in_dtype, acc_dtype = draw(st.sampled_from(GEMM_TYPES))
    ta, tb = draw(st.booleans()), draw(st.booleans())
    a = alloc(env, draw(st.sampled_from(["shared", "fragment"])), (k, m) if ta else (m, k), in_dtype)
    b = alloc(env, "shared", (n, k) if tb else (k, n), in_dtype)
    c = alloc(env, draw(st.sampled_from(["fragment", "local"])), (m, n), acc_dtype)
    whole = lambda buf: N.Region(buf, tuple(E.const(0, "int32") for _ in buf.shape), tuple(buf.shape))
    gemm = N.Gemm(
        whole(a.buffer),
        whole(b.buffer),
        whole(c.buffer),
        ta,
        tb,
        draw(st.booleans()),
        draw(st.sampled_from(["square", "full_row", "full_col"])),
    )
    return [a, b, c, gemm]


@st.composite
def reduce_stmt(draw, env):
    rows, cols = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    dtype = draw(st.sampled_from(NUMERIC))
    src = alloc(env, "fragment", (rows, cols), dtype)
    dim = draw(st.sampled_from([0, 1]))
    kept = (cols,) if dim == 0 else draw(st.sampled_from([(rows,), (rows, 1)]))
    dst = alloc(env, "fragment", kept, dtype)
    return [src, dst, N.Reduce(draw(st.sampled_from(N.REDUCE_KINDS)), src.buffer, dst.buffer, dim, draw(st.booleans()))]


@st.composite
def cumsum_stmt(draw, env):
    shape = tuple(draw(st.lists(st.integers(1, 8), min_size=1, max_size=2)))
    src = alloc(env, "shared", shape, draw(st.sampled_from(NUMERIC)))
    dst = src.buffer if draw(st.booleans()) else alloc(env, "fragment", shape, src.buffer.dtype).buffer
    stmts = [src] + ([] if dst is src.buffer else [N.Alloc(dst)])
    return stmts + [N.Cumsum(src.buffer, dst, draw(st.integers(0, len(shape) - 1)), draw(st.booleans()))]


@st.composite
def atomic_stmt(draw, env):
    dsts = [b for b in env.buffers if b.scope == "global" and b.dtype != "bool"]
    dst = draw(st.sampled_from(dsts))
    kind = draw(st.sampled_from(N.ATOMIC_KINDS))
    if env.in_parallel or draw(st.booleans()):
        indices = tuple(draw(index_exprs(env, d)) for d in dst.shape)
        value = draw(st.one_of(exprs(env, 1), constants(dst.dtype)))
        return [N.Atomic(kind, N.Region(dst, indices, (1,) * dst.ndim), value)]
    extents = draw(tile_extents(dst))
    tile = alloc(env, "fragment", extents, dst.dtype)
    value = N.Region(tile.buffer, tuple(E.const(0, "int32") for _ in extents), extents)
    return [tile, N.Atomic(kind, draw(regions(env, dst, extents)), value)]


@st.composite
def hint_stmt(draw, env):
    shared = [b for b in env.buffers if b.scope == "shared"]
    if shared and draw(st.booleans()):
        chosen = draw(st.lists(st.sampled_from(shared), min_size=1, max_size=2, unique_by=lambda b: b.name))
        return [N.Hint("annotate_layout", tuple(chosen), (("layout", "swizzled"),))]
    params = (("panel_size", draw(st.integers(1, 16))), ("enable", draw(st.booleans())))
    if draw(st.booleans()):
        params += (("order", "col"),)
    return [N.Hint("use_swizzle", (), params)]


STATEMENT_KINDS = {
    "store": store_stmt,
    "let": let_stmt,
    "alloc": alloc_stmt,
    "if": if_stmt,
    "for": for_stmt,
    "parallel": parallel_stmt,
    "print": print_stmt,
    "copy": copy_stmt,
    "fill": fill_stmt,
    "gemm": gemm_stmt,
    "reduce": reduce_stmt,
    "cumsum": cumsum_stmt,
    "atomic": atomic_stmt,
    "hint": hint_stmt,
}


@st.composite
def prim_funcs(draw):
    """A random valid PrimFunc."""
    env = Env(names={})
    dyn = (N.Var("n", "int32"),) if draw(st.booleans()) else ()
    for v in dyn:
        env.add_var(v)
    params = []
    for _ in range(draw(st.integers(1, 3))):
        shape = list(draw(st.lists(st.integers(1, 16), min_size=1, max_size=2)))
        if dyn and (not params or draw(st.booleans())):  # every dynamic dim belongs to a parameter
            shape[0] = dyn[0]
        params.append(N.Buffer(env.fresh("A"), tuple(shape), draw(st.sampled_from(DTYPES))))
    env.buffers.extend(params)
    ndim = draw(st.integers(1, 3))
    grid = tuple(E.const(draw(st.integers(1, 4)), "int32") for _ in range(ndim))
    if dyn and draw(st.booleans()):
        grid = (E.binary("//", E.binary("+", dyn[0], 3), 4),) + grid[1:]
    block_vars = tuple(N.Var(name, "int32") for name in ("bx", "by", "bz")[:ndim])
    inner = env.child()
    for v in block_vars:
        inner.add_var(v)
    threads = tuple(draw(st.lists(st.sampled_from([1, 32, 128]), min_size=1, max_size=2)))
    kernel = N.Kernel(grid, block_vars, threads, draw(bodies(inner, 1, 6)))
    return N.PrimFunc(draw(st.sampled_from(["main", "kernel"])), tuple(params), (kernel,), dyn)
