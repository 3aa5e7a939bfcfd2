"""Strategies over the grammar of the tile language.

`knobs_at(caps, seed, i, families)` draws the knobs of program i of a seeded
run (see `programs.py`), from its own seeded Random (gen.py: hypothesis's
strategy spelling, no dependence on what else is installed), using
only what the backend declares in its capabilities: features outside
`caps.features`, dtypes outside `caps.dtypes` and GEMM dtype pairs outside
`caps.gemm_dtypes` are never drawn (the runner reports them "unsupported").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import FrozenSet, Optional, Tuple

from tilecore.ir.types import FLOAT_DTYPES, FP8_DTYPES, INT_DTYPES, bits, is_float, is_fp8, is_int4

from . import exprs as X
from . import gen as st
from .programs import FAMILIES, FORMS, IDIOMS, int4_dims, shared_bytes

TILES = (1, 2, 4, 8, 16, 32)
_PRECISION = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}  # significand bits


@dataclass(frozen=True)
class Caps:
    """The part of a backend's Capabilities that steers generation."""

    features: FrozenSet[str]
    dtypes: FrozenSet[str]
    gemm_dtypes: FrozenSet[Tuple[str, str]] = frozenset()
    max_shared_memory: Optional[int] = None
    max_threads: Optional[int] = None
    fast_math: bool = False  # math functions are held to accuracy.FAST_MATH_ULPS
    max_tensor_bytes: Optional[int] = None  # declared: a directed program reads a tensor past 2^31 bytes

    @classmethod
    def from_backend(cls, backend, options: Optional[dict] = None) -> "Caps":
        """The backend's declarations, with those of the compile `options` that are on
        (Option.declares: e.g. a fast-math option declares `fast_math`)."""
        from tilecore.language.features import declared_features

        c = backend.capabilities
        on = {d for o in getattr(backend, "options", ()) or () if (options or {}).get(o.name) for d in o.declares}
        return cls(
            declared_features(c),
            frozenset(c.dtypes),
            frozenset(tuple(p) for p in c.gemm_dtypes),
            c.max_shared_memory,
            c.max_threads,
            bool(getattr(c, "fast_math", False)) or "fast_math" in on,
            getattr(c, "max_tensor_bytes", None),
        )

    def has(self, *names) -> bool:
        return all(n in self.features for n in names)

    def floats(self):
        return tuple(d for d in FLOAT_DTYPES if d in self.dtypes and f"dtype:{d}" in self.features)

    def ints(self):
        return tuple(d for d in INT_DTYPES if d in self.dtypes and f"dtype:{d}" in self.features)

    def dtype_ok(self, d: str) -> bool:
        return d in self.dtypes and f"dtype:{d}" in self.features

    def fp8s(self):
        """The fp8 dtypes declared (opt-in: drawn only by the knobs of fp8 programs, last)."""
        return tuple(d for d in FP8_DTYPES if self.dtype_ok(d))


def family_requirements(caps: Caps):
    """Families whose required features the backend declares."""
    req = {
        "ewise": ("parallel",),
        "copy": ("copy",),
        "reduce": ("reduce", "copy"),
        "gemm": ("gemm", "copy"),
        "atomic": ("atomic",),
        "cumsum": ("cumsum", "copy"),
        "control": ("copy", "runtime_if"),
        "chain": ("copy", "gemm", "fill", "parallel", "reduce", "dtype:float32"),
        "convert": ("parallel",),
        "intops": ("parallel",),
        "math": ("parallel", "math"),
    }
    out = []
    for fam in FAMILIES:
        if not caps.has(*req[fam]):
            continue
        if fam in ("gemm", "chain") and not _gemm_pairs(caps):
            continue
        if fam == "chain" and not (caps.has("pipelined") or caps.has("serial")):
            continue
        if fam == "chain" and not [p for p in _gemm_pairs(caps) if p[1] in ("float32", "float64")]:
            continue
        if fam == "atomic" and not (caps.has("copy", "reduce") or caps.has("parallel")):
            continue
        if fam == "control" and not (caps.has("serial") or caps.has("unroll")):
            continue
        if not (caps.floats() or caps.ints()):
            continue
        if fam == "intops" and not [d for d in caps.ints() if d != "bool"]:
            continue
        if fam == "math" and not caps.floats():
            continue
        out.append(fam)
    return tuple(out)


def _gemm_pairs(caps: Caps):
    """Declared (input, accumulator) pairs, minus those the language itself rejects
    (the frontend refuses a float accumulator narrower than the inputs)."""
    from tilecore.ir.types import bits

    def language_ok(pair):
        a, acc = pair
        # fp8: see _fp8_gemm; int4: see _int4_gemm
        return not (is_float(a) and is_float(acc) and bits(acc) < bits(a)) and not is_fp8(a) and not is_int4(a)

    return tuple(sorted(p for p in caps.gemm_dtypes if caps.dtype_ok(p[0]) and caps.dtype_ok(p[1]) and language_ok(p)))


@st.composite
def _extent(draw, caps: Caps, tile: int, allow_partial: bool = True, max_tiles: int = 3):
    """An extent for `tile`-sized tiles: one or several tiles, maybe a partial last tile."""
    tiles = draw(st.integers(1, max_tiles)) if caps.has("multi_block") else 1
    if allow_partial and caps.has("partial_tiles") and tile > 1 and draw(st.booleans()):
        rem = draw(st.integers(1, tile - 1))  # the last tile is partial
        return (tiles - 1) * tile + rem
    return tiles * tile


def _threads(draw, caps: Caps) -> int:
    """A `threads=` hint, up to 1024-thread blocks (capped by the backend's max_threads)."""
    t = draw(st.sampled_from((32, 128, 256, 1024)))
    if caps.max_threads:
        t = min(t, caps.max_threads)
    return t


@st.composite
def float_expr(draw, n_inputs: int, caps: Caps, depth: int = 3):
    """A float expression tree over `n_inputs` input tiles (see exprs.py)."""
    leaf = st.one_of(
        st.builds(lambda k: ["in", k], st.integers(0, n_inputs - 1)),
        st.builds(lambda v: ["const", v], st.sampled_from(X.FLOAT_CONSTS)),
    )
    if depth <= 0:
        e = draw(leaf)
        return e if e[0] == "in" else ["in", 0]
    choices = ["in", "bin"]
    if caps.has("math"):
        choices += ["un", "pow"]
    if caps.has("select"):
        choices.append("sel")
    floats = caps.floats()
    if len(floats) > 1:
        choices.append("cast")
    kind = draw(st.sampled_from(choices))
    sub = float_expr(n_inputs, caps, depth - 1)
    if kind == "in":
        return ["in", draw(st.integers(0, n_inputs - 1))]
    if kind == "bin":
        ops = [o for o in X.FLOAT_BINOPS if o != "/" or caps.has("math")]
        op = draw(st.sampled_from(ops))
        return ["bin", op, draw(sub), draw(st.one_of(sub, leaf))]
    if kind == "un":
        f = draw(st.sampled_from([f for f in X.FLOAT_FUNCS]))
        if f in ("floor", "ceil"):
            return ["un", f, ["in", draw(st.integers(0, n_inputs - 1))]]
        return ["un", f, draw(sub)]
    if kind == "pow":
        return ["pow", draw(sub), draw(st.sampled_from(X.POW_EXPONENTS))]
    if kind == "sel":
        return [
            "sel",
            draw(st.integers(0, n_inputs - 1)),
            draw(st.sampled_from((0.0, 0.5, -1.0))),
            draw(sub),
            draw(st.one_of(sub, leaf)),
        ]
    return ["cast", draw(st.sampled_from(floats)), draw(sub)]


@st.composite
def int_expr(draw, n_inputs: int, caps: Caps, depth: int = 3):
    leaf = st.one_of(
        st.builds(lambda k: ["in", k], st.integers(0, n_inputs - 1)),
        st.builds(lambda v: ["const", v], st.sampled_from(X.INT_CONSTS)),
    )
    if depth <= 0:
        e = draw(leaf)
        return e if e[0] == "in" else ["in", 0]
    choices = ["in", "bin", "neg"]
    if caps.has("math"):
        choices.append("abs")
    if caps.has("select"):
        choices.append("sel")
    kind = draw(st.sampled_from(choices))
    sub = int_expr(n_inputs, caps, depth - 1)
    if kind == "in":
        return ["in", draw(st.integers(0, n_inputs - 1))]
    if kind == "bin":
        op = draw(st.sampled_from(X.INT_BINOPS))
        if op in ("//", "%"):
            return ["bin", op, draw(sub), ["const", draw(st.sampled_from((2, 3, 5, 7)))]]
        return ["bin", op, draw(sub), draw(st.one_of(sub, leaf))]
    if kind in ("neg", "abs"):
        return ["un", kind, draw(sub)]
    return [
        "sel",
        draw(st.integers(0, n_inputs - 1)),
        draw(st.sampled_from((0, 2, -1))),
        draw(sub),
        draw(st.one_of(sub, leaf)),
    ]


@st.composite
def ewise_knobs(draw, caps: Caps, slot: int = 0):
    floats, ints = caps.floats(), caps.ints()
    int_mode = bool(ints) and (not floats or draw(st.integers(0, 3)) == 0)
    pool = tuple(d for d in ints if d != "bool") if int_mode else floats
    if not pool:
        int_mode, pool = False, floats
    n_in = draw(st.integers(1, 3))
    in_dtypes = [draw(st.sampled_from(pool)) for _ in range(n_in)]
    stages = ["direct"] + (["shared", "fragment", "local"] if caps.has("copy") else [])
    stage = draw(st.sampled_from(stages))
    out_stage = draw(st.sampled_from(["direct", "fragment"] if caps.has("copy") else ["direct"]))
    bm, bn = draw(st.sampled_from(TILES[1:])), draw(st.sampled_from(TILES[1:]))
    allow_partial = caps.has("runtime_if") or (stage != "direct" and out_stage != "direct")
    if stage != "direct" or out_stage != "direct":
        allow_partial = allow_partial and caps.has("partial_tiles")
    if stage == "direct" or out_stage == "direct":
        allow_partial = allow_partial and caps.has("runtime_if")
    M = draw(_extent(caps, bm, allow_partial))
    N = draw(_extent(caps, bn, allow_partial))
    dyn = (
        allow_partial
        and caps.has("dynamic_shape")
        and caps.has("partial_tiles", "runtime_if")
        and (slot % 4 == 3 or draw(st.integers(0, 4)) == 0)
    )
    expr = draw(int_expr(n_in, caps) if int_mode else float_expr(n_in, caps))
    return {
        "family": "ewise",
        "M": M,
        "N": N,
        "bm": bm,
        "bn": bn,
        "in_dtypes": in_dtypes,
        "out_dtype": draw(st.sampled_from(pool)),
        "expr": expr,
        "stage": stage,
        "out_stage": out_stage,
        "form": draw(st.sampled_from(("point", "slice"))),
        "dyn": dyn,
        "threads": _threads(draw, caps),
        "allowed_dtypes": sorted(caps.dtypes),
        "names": draw(st.integers(0, 3)),
    }  # local names in the body (programs._build_ewise)


@st.composite
def copy_knobs(draw, caps: Caps, slot: int = 0):
    floats, ints = caps.floats(), caps.ints()
    kinds = ([floats] if floats else []) + ([tuple(d for d in ints if d != "bool")] if ints else [])
    if caps.dtype_ok("bool"):
        kinds.append(("bool",))
    pool = draw(st.sampled_from([k for k in kinds if k]))
    dtypes = [draw(st.sampled_from(pool)) for _ in range(4)]
    scopes = [draw(st.sampled_from(("shared", "fragment", "local"))) for _ in range(2)]
    bm, bn = draw(st.sampled_from(TILES)), draw(st.sampled_from(TILES))
    if slot % 3 == 1:  # square tiles: a layout mix-up that transposes them shows
        bn = bm = max(bm, 2)
    M = draw(_extent(caps, bm))
    N = draw(_extent(caps, bn))
    big = slot % 3 == 0 and caps.has("multi_block")
    if big:  # past 2^16 elements, grids of ~100-300 blocks
        bm, bn = draw(st.sampled_from((16, 32))), 32
        M, N = draw(st.integers(257, 700)), draw(st.integers(257, 320))
        if not caps.has("partial_tiles"):
            M, N = -(-M // bm) * bm, -(-N // bn) * bn
    dyn = caps.has("dynamic_shape", "partial_tiles") and (slot % 4 == 3 or draw(st.integers(0, 4)) == 0)
    edges = ""
    if is_float(dtypes[0]):
        narrowest = min(dtypes[1:], key=lambda d: _PRECISION.get(d, 0))
        narrower = _PRECISION[narrowest] < _PRECISION[dtypes[0]]
        edges = draw(st.sampled_from(["special", "", f"ties:{narrowest}"] if narrower else ["special", ""]))
    elif dtypes[0] != "bool":
        edges = draw(st.sampled_from(["limits", "limits", ""]))
    sub_rows = draw(st.integers(1, bm - 1)) if (caps.has("fill") and bm > 1 and draw(st.booleans())) else 0
    fill = 0
    if sub_rows:
        fill = draw(st.sampled_from((0, 1.5, -3.0))) if is_float(dtypes[2]) else draw(st.sampled_from((0, 3, 1)))
        if dtypes[2] == "bool":
            fill = draw(st.sampled_from((0, 1)))
        if dtypes[2] == "uint8" and fill < 0:
            fill = 0
    knobs = {
        "family": "copy",
        "M": M,
        "N": N,
        "bm": bm,
        "bn": bn,
        "dtypes": dtypes,
        "scopes": scopes,
        "forms": [draw(st.sampled_from(("point", "slice"))) for _ in range(2)],
        "dyn": dyn,
        "sub_rows": sub_rows,
        "fill_value": fill,
        "threads": _threads(draw, caps),
        "edges": edges,
    }
    # drawn last, so that the knobs above stay what they were for every seed: 3-D tensors whose
    # leading (batch) dimension a serial loop walks (strides of a rank-3 tensor, a point index
    # in a region)
    if caps.has("serial") and not big:
        knobs["batch"] = draw(st.sampled_from((0, 0, 2, 3)))
        # drawn after that (session 8), for the same reason: half of those are 4-D, a second
        # leading dimension (heads) walked by a nested serial loop
        if knobs["batch"]:
            knobs["heads"] = draw(st.sampled_from((0, 2)))
    return knobs


def _loops(caps: Caps):
    loops = []
    if caps.has("serial"):
        loops += ["serial", "range"]
    if caps.has("unroll"):
        loops.append("unroll")
    if caps.has("pipelined"):
        loops.append("pipelined")
    return loops


@st.composite
def reduce_knobs(draw, caps: Caps, slot: int = 0):
    floats, ints = caps.floats(), caps.ints()
    pool = [d for d in floats] + [d for d in ints if d not in ("bool", "uint8")]
    kind = ("sum", "max", "min", "abssum", "absmax")[slot % 5]
    # the first max/min/absmax programs of a run reduce floats with NaN, infinities and signed zeros
    nan_first = slot < 10 and kind in ("max", "min", "absmax") and bool(floats)
    d_in = draw(st.sampled_from(floats if nan_first else pool))
    if is_float(d_in):
        accs = [d for d in floats if d in ("float32", "float64", d_in)]
    else:
        accs = [d for d in ints if d in ("int32", "int64")] or [d_in]
        if kind not in ("sum", "abssum"):
            accs = sorted(set(accs) | {d_in})
    acc = draw(st.sampled_from(accs))
    bm, bn = draw(st.sampled_from(TILES[1:])), draw(st.sampled_from(TILES[1:]))
    dim = draw(st.sampled_from((0, 1)))
    loops = _loops(caps)
    modes = ["clear"] + (["fill"] if loops and caps.has("fill") else [])
    mode = modes[(slot // 5) % len(modes)] if slot < 10 else draw(st.sampled_from(modes))
    # along the reduced dimension: one tile for "clear", several for accumulating modes
    red_tile, keep_tile = (bn, bm) if dim == 1 else (bm, bn)
    keep = draw(_extent(caps, keep_tile))
    if mode == "clear":
        red = red_tile if not caps.has("partial_tiles") or draw(st.booleans()) else draw(st.integers(1, red_tile))
    else:
        red = (
            draw(_extent(caps, red_tile, max_tiles=4))
            if caps.has("multi_block")
            else draw(st.integers(1, 3)) * red_tile
        )
        if not caps.has("partial_tiles"):
            red = -(-red // red_tile) * red_tile
    # low-precision accumulators only over short sums (see README: tolerances)
    n = red if mode == "clear" else -(-red // red_tile) * red_tile
    if acc in ("float16", "bfloat16") and kind in ("sum", "abssum") and n > (16 if acc == "float16" else 8):
        acc = "float32" if caps.dtype_ok("float32") else acc
        if acc in ("float16", "bfloat16"):
            kind = "max"
    M, N = (keep, red) if dim == 1 else (red, keep)
    outs = [d for d in (floats if is_float(acc) else ints) if d != "bool" and d != "uint8"]
    if not is_float(acc):
        outs = [acc]
    init = 0
    if mode == "fill":
        # never the identity: an accumulation that overwrites instead of combining must show
        init = draw(
            st.sampled_from(
                {
                    "sum": (-2.5, 1.5),
                    "abssum": (3.0, 2.0),
                    "max": (-1.0, 1.0),
                    "absmax": (0.5, 1.5),
                    "min": (1.0, -1.0),
                }[kind]
            )
        )
        if not is_float(acc):
            init = int(init) or 2
    dyn = caps.has("dynamic_shape", "partial_tiles") and (slot % 4 == 3 or draw(st.integers(0, 3)) == 0)
    if nan_first:
        edges = "special"
    elif is_float(d_in):
        edges = draw(st.sampled_from(["special", "special", ""] if kind in ("max", "min", "absmax") else ["nan", ""]))
    else:
        # max / min of values that do not fit the accumulator are undefined (docs/semantics.md)
        fits = kind == "sum" or bits(acc) >= bits(d_in)
        edges = "limits" if kind in ("sum", "max", "min") and fits and draw(st.booleans()) else ""
    return {
        "family": "reduce",
        "M": M,
        "N": N,
        "bm": bm,
        "bn": bn,
        "dim": dim,
        "kind": kind,
        "in_dtype": d_in,
        "acc_dtype": acc,
        "out_dtype": draw(st.sampled_from(outs)),
        "mode": mode,
        "init": init,
        "loop": draw(st.sampled_from(loops)) if loops else "serial",
        "num_stages": draw(st.integers(1, 3)),
        "src_scope": draw(st.sampled_from(("fragment", "shared"))),
        "form": draw(st.sampled_from(("point", "slice"))),
        "dyn": dyn,
        "threads": _threads(draw, caps),
        "edges": edges,
    }


@st.composite
def gemm_knobs(draw, caps: Caps, slot: int = 0):
    pairs = _gemm_pairs(caps)
    int_pairs = [p for p in pairs if not is_float(p[0])]
    d_in, acc = draw(st.sampled_from(int_pairs if int_pairs and slot % 3 == 2 else pairs))
    outs = [d for d in (caps.floats() if is_float(acc) else caps.ints()) if d not in ("bool", "uint8", "int8")]
    if not is_float(acc):
        outs = [acc]
    bm, bn, bk = (draw(st.sampled_from((4, 8, 16, 32))) for _ in range(3))
    ta = caps.has("gemm_transpose") and draw(st.booleans())
    tb = caps.has("gemm_transpose") and draw(st.booleans())
    loops = [lp for lp in ("pipelined", "serial") if caps.has(lp)] if caps.has("fill") else []
    max_k = 16 if acc == "float16" else 8 if acc == "bfloat16" else 96
    bk = min(bk, max_k)
    M = draw(_extent(caps, bm, max_tiles=2))
    N = draw(_extent(caps, bn, max_tiles=2))
    if loops and draw(st.booleans()):
        K = draw(_extent(caps, bk, max_tiles=3)) if caps.has("multi_block") or True else bk
        if not caps.has("partial_tiles"):
            K = -(-K // bk) * bk
        K = min(K, max_k)
        loop = draw(st.sampled_from(loops))
    else:
        K = bk if not caps.has("partial_tiles") or draw(st.booleans()) else draw(st.integers(1, bk))
        loop = "single"
    k = {
        "family": "gemm",
        "M": M,
        "N": N,
        "K": K,
        "bm": bm,
        "bn": bn,
        "bk": bk,
        "ta": ta,
        "tb": tb,
        "in_dtype": d_in,
        "acc_dtype": acc,
        "out_dtype": draw(st.sampled_from(outs)),
        "loop": loop,
        "num_stages": draw(st.integers(1, 3)),
        "clear_accum": (not caps.has("fill")) or draw(st.booleans()),
        "a_scope": draw(st.sampled_from(("shared", "shared", "fragment"))),
        "b_scope": "shared",
        "swizzle": draw(st.integers(0, 4)) == 0,
        "form": draw(st.sampled_from(("point", "slice"))),
        "threads": _threads(draw, caps),
    }
    _fp8_gemm(caps, slot, k)  # after every draw: the knobs above stay what they were elsewhere
    _matrix_step_gemm(caps, slot, k)
    _int4_gemm(caps, slot, k)
    _tensor_core_gemm(caps, slot, k)
    if caps.max_shared_memory is not None:
        while shared_bytes(k) > caps.max_shared_memory and max(k["bm"], k["bn"], k["bk"]) > 4:
            for key in ("bm", "bn", "bk"):
                k[key] = max(4, k[key] // 2)
    return k


@st.composite
def atomic_knobs(draw, caps: Caps, slot: int = 0):
    pool = [d for d in ("float32", "int32", "float64", "float16", "int64") if caps.dtype_ok(d)] or [
        d for d in caps.floats() + caps.ints() if d not in ("bool",)
    ]
    d = pool[slot % len(pool)]
    kind = (
        ("add", "max", "add", "min")[(slot // len(pool)) % 4]
        if slot < 4 * len(pool)
        else draw(st.sampled_from(("add", "max", "min")))
    )
    forms = []
    if caps.has("copy", "reduce"):
        forms.append("tile")
    if caps.has("parallel"):
        forms.append("element")
    form = draw(st.sampled_from(forms))
    bm, bn = draw(st.sampled_from(TILES[1:5])), draw(st.sampled_from(TILES[1:5]))
    allow_partial = caps.has("partial_tiles") if form == "tile" else caps.has("runtime_if")
    M = draw(_extent(caps, bm, allow_partial, max_tiles=4))
    N = draw(st.integers(1, 3)) * bn if form == "tile" else draw(st.integers(1, 16))
    if form == "tile" and not caps.has("multi_block"):
        N = bn
    return {
        "family": "atomic",
        "M": M,
        "N": N,
        "bm": bm,
        "bn": bn,
        "kind": kind,
        "form": form,
        "dtype": d,
        "rows": draw(st.integers(1, 3)),
        "threads": _threads(draw, caps),
    }


@st.composite
def cumsum_knobs(draw, caps: Caps, slot: int = 0):
    pool = [d for d in caps.floats() if d in ("float32", "float64")] + [
        d for d in caps.ints() if d in ("int32", "int64")
    ]
    if not pool:
        pool = [d for d in caps.floats() + caps.ints() if d != "bool"]
    d = draw(st.sampled_from(pool))
    bm, bn = draw(st.sampled_from(TILES)), draw(st.sampled_from(TILES))
    M = draw(_extent(caps, bm))
    N = draw(_extent(caps, bn))
    dyn = caps.has("dynamic_shape", "partial_tiles") and (slot % 4 == 3 or draw(st.integers(0, 4)) == 0)
    edges = draw(st.sampled_from(("nan", "") if is_float(d) else ("limits", "")))
    return {
        "family": "cumsum",
        "M": M,
        "N": N,
        "bm": bm,
        "bn": bn,
        "dim": draw(st.sampled_from((0, 1))),
        "reverse": draw(st.booleans()),
        "dtype": d,
        "scope": draw(st.sampled_from(("fragment", "shared"))),
        "inplace": draw(st.booleans()),
        "form": draw(st.sampled_from(("point", "slice"))),
        "dyn": dyn,
        "threads": _threads(draw, caps),
        "edges": edges,
    }


def _steered(choices, slot: int, drawn):
    """choices[slot % n] for the first two rounds of slots, else the drawn value (drawn either way,
    so the later knobs stay what they were): a 100-program run has each choice at least twice,
    as the must-pass list asks of every feature (`T.unroll` was once drawn only once at 100)."""
    return choices[slot % len(choices)] if slot < 2 * len(choices) else drawn


@st.composite
def control_knobs(draw, caps: Caps, slot: int = 0):
    pool = [d for d in caps.floats()] + [d for d in caps.ints() if d in ("int32", "int16", "int8")]
    d = draw(st.sampled_from(pool))
    if is_float(d):
        accs = [a for a in caps.floats() if a in ("float32", "float64")] or [d]
    else:
        accs = [a for a in caps.ints() if a in ("int32", "int64")] or [d]
    loops = [lp for lp in ("serial", "range", "unroll") if caps.has("unroll" if lp == "unroll" else "serial")]
    bm = draw(st.sampled_from(TILES[:5]))
    return {
        "family": "control",
        "M": draw(_extent(caps, bm)),
        "N": draw(st.integers(1, 12)),
        "bm": bm,
        "dtype": d,
        "acc_dtype": draw(st.sampled_from(accs)),
        "loop": _steered(loops, slot, draw(st.sampled_from(loops))),
        "thr": draw(st.sampled_from((0.0, 0.5, -1.0))),
        "with_else": draw(st.booleans()),
        "use_var": caps.has("alloc_var") and draw(st.booleans()),
        "block_if": caps.has("parallel", "multi_block") and draw(st.booleans()),
        "print": caps.has("print") and draw(st.integers(0, 3)) == 0,
        "threads": _threads(draw, caps),
        **while_loop_knob(caps, slot),  # after every draw: the knobs above stay what they were
    }


@st.composite
def chain_knobs(draw, caps: Caps, slot: int = 0):
    pairs = [p for p in _gemm_pairs(caps) if p[1] in ("float32", "float64") and is_float(p[0])]
    d_in, acc = draw(st.sampled_from(pairs))
    bm, bn, bk = (draw(st.sampled_from((4, 8, 16, 32))) for _ in range(3))
    M = draw(_extent(caps, bm, max_tiles=3))
    # one tile covers the row, so the row reduction is complete inside a block
    N = bn if not caps.has("partial_tiles") or draw(st.booleans()) else draw(st.integers(1, bn))
    K = draw(_extent(caps, bk, max_tiles=3))
    loops = [lp for lp in ("pipelined", "serial") if caps.has(lp)]
    k = {
        "family": "chain",
        "M": M,
        "N": N,
        "K": K,
        "bm": bm,
        "bn": bn,
        "bk": bk,
        "in_dtype": d_in,
        "acc_dtype": acc,
        "loop": draw(st.sampled_from(loops)),
        "num_stages": draw(st.integers(1, 3)),
        "expr": draw(float_expr(2, caps, depth=2)),
        "kind": draw(st.sampled_from(("max", "min", "sum"))),
        "threads": _threads(draw, caps),
    }
    if caps.max_shared_memory is not None:
        while shared_bytes(k) > caps.max_shared_memory and max(k["bm"], k["bn"], k["bk"]) > 4:
            for key in ("bm", "bn", "bk"):
                k[key] = max(4, k[key] // 2)
    return k


_FAMILY_STRATEGIES = {
    "ewise": ewise_knobs,
    "copy": copy_knobs,
    "reduce": reduce_knobs,
    "gemm": gemm_knobs,
    "atomic": atomic_knobs,
    "cumsum": cumsum_knobs,
    "control": control_knobs,
    "chain": chain_knobs,
}


@st.composite
def program_knobs(draw, caps: Caps, families=None):
    """Knobs of one program the backend can be asked to run (plus the inputs' seed)."""
    fams = tuple(f for f in family_requirements(caps) if families is None or f in families)
    if not fams:
        raise ValueError("the backend declares too few features for any program family")
    fam = draw(st.sampled_from(fams))
    knobs = draw(_FAMILY_STRATEGIES[fam](caps))
    knobs["input_seed"] = draw(st.integers(0, 2**31 - 1))
    return knobs


GENERATOR_VERSION = 2  # part of every program's seed: bump when the same seed must give new programs


def knobs_at(caps: Caps, seed: int, index: int, families) -> dict:
    """Knobs of program `index` of the run with `seed` over `families` (in their fixed order).

    Depends on nothing else: program i of a sharded run is generated alone.
    Families take turns (i mod the number of families).
    """
    fams = tuple(families)
    fam = fams[index % len(fams)]
    rng = st.rng_for("tile-conformance", GENERATOR_VERSION, seed, index, fam)
    knobs = _FAMILY_STRATEGIES[fam](caps, slot=index // len(fams)).draw(rng)
    knobs["input_seed"] = rng.randrange(2**31)
    if caps.fast_math:  # expressions' tolerances from the fast-math table (programs.build)
        knobs["fast_math"] = True
    return knobs


# ----------------------------------------------------------------------------- directed programs
# Programs a default-sized run adds after its seeded ones (runner.DIRECTED_FROM), for what the
# seeded families cannot afford to draw: the kernel forms of TileLang's examples (scalar
# parameters, buffer views, several kernel stages) and a tensor past 2^31 bytes.

LARGE_OFFSET = 1 << 31  # element offsets from here on need more than a signed 32-bit integer
_LARGE_COLUMNS = 1 << 15  # int8 rows of 32 KiB: row 65536 starts at byte 2^31


def large_tensor_dtype(caps: Caps) -> Optional[str]:
    """The one-byte dtype of the directed 2^31-byte program, or None when the backend does not
    declare the memory for it (Capabilities.max_tensor_bytes) or the copy family's features."""
    declared = caps.max_tensor_bytes or 0
    if declared <= LARGE_OFFSET + (1 << 24) or not caps.has("copy", "multi_block"):
        return None
    return next((d for d in ("int8", "uint8") if caps.dtype_ok(d)), None)


def directed_knobs(caps: Caps, seed: int, families) -> list:
    """Knobs of the directed programs of a run with `seed` over `families` (see above); knob
    `directed` is each one's index in this list (a Ray shard regenerates it from that)."""
    knobs = _forms_directed(caps, seed, families) + _idioms_directed(caps, seed, families)
    knobs += _offsets_directed(caps, seed, families)
    return [{**k, "directed": n} for n, k in enumerate(knobs)]


def _slot_programs(caps: Caps, seed: int, families, family: str, knobs_of, count: int) -> list:
    """`count` directed programs of `family` (small copies, on backends with `copy` and `parallel`),
    program `slot` drawn by `knobs_of(caps, slot=slot)` from the run's seed."""
    if "copy" not in families or not caps.has("copy", "parallel"):
        return []
    out = []
    for slot in range(count):
        rng = st.rng_for("tile-conformance", GENERATOR_VERSION, seed, "directed", family, slot)
        knobs = knobs_of(caps, slot=slot).draw(rng)
        knobs["input_seed"] = rng.randrange(2**31)
        out.append(knobs)
    return out


def _forms_directed(caps: Caps, seed: int, families) -> list:
    """Four `forms` programs (form_programs.py): a scalar parameter, a buffer view, two kernel
    stages, a view with stages."""
    return _slot_programs(caps, seed, families, "forms", forms_knobs, len(FORMS) + 1)


def _idioms_directed(caps: Caps, seed: int, families) -> list:
    """Six `idioms` programs (form_programs.py): TileLang's spellings (a macro called twice, a
    thread-group split, astype / T.Cast, T.clamp, T.Serial / T.vectorized, T.floordiv, memory_order,
    hints and custom layouts),
    each in one of the first five (IDIOM_SLOTS), a drawn mix in the sixth."""
    return _slot_programs(caps, seed, families, "idioms", idioms_knobs, len(IDIOM_SLOTS) + 1)


def _offsets_directed(caps: Caps, seed: int, families) -> list:
    """The program that copies tiles past byte 2^31 of an int8 tensor, where the backend declares
    the memory (Capabilities.max_tensor_bytes)."""
    dtype = large_tensor_dtype(caps)
    if dtype is None or "copy" not in families:
        return []
    rng = st.rng_for("tile-conformance", GENERATOR_VERSION, seed, "directed", "offsets")
    draw = rng.choice
    bm, bn = draw((8, 16, 32)), draw((16, 32, 64))
    gx, gy = draw((1, 2, 3)), draw((1, 2))
    # every tile starts past offset 2^31 (row 65536): a 32-bit offset of its first element wraps
    row0 = LARGE_OFFSET // _LARGE_COLUMNS + rng.randrange(0, 8)
    col0 = _LARGE_COLUMNS - gx * bn - rng.randrange(0, 3 * bn)
    rows = row0 + gy * bm + rng.randrange(0, 64)
    return [
        {
            "family": "offsets",
            "dtype": dtype,
            "M": rows,
            "N": _LARGE_COLUMNS,
            "bm": bm,
            "bn": bn,
            "grid": [gx, gy],
            "row0": row0,
            "col0": col0,
            "scope": draw(("shared", "fragment")),
            "threads": _threads(lambda s: s.draw(rng), caps),
            "input_seed": rng.randrange(2**31),
        }
    ]


# ----------------------------------------------------------------------------- edge-value families
# `slot` is the program's number within its family in the run: directed choices cycle through the
# cells that must be covered (conversion kinds, integer operators, dtypes), so a default-sized run
# covers each of them whatever the seed.

_CONVERT_KINDS = ("f>f", "f>i", "i>i", "f>f", "i>f", ">bool", "f>f", "f>i", "bool>", "f>f")
# narrowing float pairs in the order a run covers them (double rounding and ties first)
_NARROWING = (
    ("float64", "bfloat16"),
    ("float32", "float16"),
    ("float64", "float16"),
    ("float32", "bfloat16"),
    ("float64", "float32"),
    ("float16", "bfloat16"),
)


@st.composite
def convert_knobs(draw, caps: Caps, slot: int = 0):
    from .edge_programs import convert_edges

    floats, ints = caps.floats(), tuple(d for d in caps.ints() if d != "bool")
    kind = _CONVERT_KINDS[slot % len(_CONVERT_KINDS)]
    boolean = ("bool",) if caps.dtype_ok("bool") else ()
    pick = {"f": floats, "i": ints, "": floats + ints, "bool": boolean}
    src_kind, dst_kind = kind.split(">")
    if kind == ">bool" and slot < len(_CONVERT_KINDS):
        src_kind = "f"  # the run's first conversion to bool starts from floats (fractions, NaN, -0.0)
    srcs, dsts = pick[src_kind] or floats + ints, pick[dst_kind or ""] or floats + ints
    pairs = [p for p in _NARROWING if p[0] in floats and p[1] in floats]
    if kind == "f>f" and pairs:
        src, dst = pairs[
            (slot // len(_CONVERT_KINDS) * 4 + _CONVERT_KINDS[: slot % len(_CONVERT_KINDS)].count("f>f")) % len(pairs)
        ]
    else:
        src, dst = draw(st.sampled_from(srcs)), draw(st.sampled_from(dsts))
    modes = [m for m, need in (("cast", "parallel"), ("store", "parallel"), ("copy", "copy")) if caps.has(need)]
    mode = modes[(slot // len(_CONVERT_KINDS)) % len(modes)]  # each conversion kind in every form, in turn
    bm, bn = draw(st.sampled_from(TILES[2:])), draw(st.sampled_from(TILES[2:]))
    guard_ok = caps.has("runtime_if") if mode != "copy" else caps.has("partial_tiles")
    M, N = draw(_extent(caps, bm, guard_ok)), draw(_extent(caps, bn, guard_ok))
    edges = convert_edges(src, dst)
    knobs = {
        "family": "convert",
        "M": M,
        "N": N,
        "bm": bm,
        "bn": bn,
        "src": src,
        "dst": dst,
        "mode": mode,
        "edges": edges[0] if kind == "f>f" else draw(st.sampled_from(edges)),
        "dyn": _dyn(draw, caps, guard_ok, slot),
        "threads": _threads(draw, caps),
    }
    fp8 = fp8_conversion(caps, slot)  # after every draw: the knobs above stay what they were
    if fp8:
        knobs["fp8"] = fp8
    return knobs


def _dyn(draw, caps: Caps, guard_ok: bool, slot: int) -> bool:
    """Dynamic shapes: every fourth program of a family, and a few more at random."""
    return guard_ok and caps.has("dynamic_shape", "runtime_if") and (slot % 4 == 3 or draw(st.integers(0, 5)) == 0)


_INT_TARGETS = ("//", "%", "<<", ">>", "~", "cmp", "logic", "wrap")


@st.composite
def _int_tree(draw, depth: int, signed: bool):
    leaf = st.sampled_from((["in", "A"], ["in", "B"], ["const", 3], ["const", 7], ["const", 100]))
    if depth <= 0:
        return draw(st.sampled_from((["in", "A"], ["in", "B"])))
    sub = _int_tree(depth - 1, signed)
    kind = draw(st.sampled_from(("in", "bin", "bin", "div", "shift", "un", "sel")))
    if kind == "in":
        return draw(st.sampled_from((["in", "A"], ["in", "B"])))
    if kind == "bin":
        return [
            "bin",
            draw(st.sampled_from(("+", "-", "*", "&", "|", "^", "max", "min"))),
            draw(sub),
            draw(st.one_of(sub, leaf)),
        ]
    if kind == "div":
        return ["div", draw(st.sampled_from(("//", "%"))), draw(sub), ["in", "D"]]
    if kind == "shift":
        return ["shift", draw(st.sampled_from(("<<", ">>"))), draw(sub), ["in", "S"]]
    if kind == "un":
        return ["un", draw(st.sampled_from(("neg", "~") if signed else ("~",))), draw(sub)]
    return ["sel", draw(_int_cond(depth - 1, signed)), draw(sub), draw(sub)]


@st.composite
def _int_cond(draw, depth: int, signed: bool):
    sub = _int_tree(max(0, depth - 1), signed)
    c = ["cmp", draw(st.sampled_from(("<", "<=", ">", ">=", "==", "!="))), draw(sub), draw(sub)]
    r = draw(st.integers(0, 3))
    if r == 1:
        return ["logic", draw(st.sampled_from(("and", "or"))), c, draw(_int_cond(0, signed))]
    if r == 2:
        return ["not", c]
    return c


# the dtypes of the later wrap programs, in turn (round 1 multiplies, round 2 subtracts, round 3 adds)
_WIDE_WRAP_DTYPES = ("int64", "int64", "int32")


def _wide_wrap(e, wrap_round: int):
    """`e` = x op B compared with its own operand x and the larger (or smaller) one kept:
    T.if_then_else(x op B > x, x op B, x). A backend whose int32 / int64 arithmetic does not
    wrap (LLVM's `nsw`) folds x + B > x to B > 0 and x - B > x to B < 0, which the wrapped
    values contradict (tile-cpu int32: conformance seed 5151; int64 until session 8)."""
    cmp = (">", "<", ">=", "<=")[wrap_round % 4]
    return ["sel", ["cmp", cmp, e, e[2]], e, e[2]]


@st.composite
def intops_knobs(draw, caps: Caps, slot: int = 0):
    ints = tuple(d for d in caps.ints() if d != "bool")
    dA, dB = draw(st.sampled_from(ints)), draw(st.sampled_from(ints))
    target = _INT_TARGETS[slot % len(_INT_TARGETS)]
    # "wrap": both operands of one dtype, so the operation itself wraps at its limits. The first wrap
    # program of a run (slot 7) is narrow; later ones are int64 and int32 (see _wide_wrap)
    wrap_round = slot // len(_INT_TARGETS)
    narrow = [d for d in ("int8", "int16") if d in ints]
    turn = (wrap_round - 1) % len(_WIDE_WRAP_DTYPES)
    wide = [d for d in _WIDE_WRAP_DTYPES[turn:] + _WIDE_WRAP_DTYPES if d in ints]
    if target == "wrap" and narrow and (wrap_round == 0 or not wide):
        dA = dB = draw(st.sampled_from(narrow))
    elif target == "wrap" and wide:
        dA = dB = wide[0]
    signed = "uint8" not in (dA, dB)
    sub = _int_tree(2, signed)
    if target in ("//", "%"):
        expr = ["div", target, draw(sub), ["in", "D"]]
    elif target in ("<<", ">>"):
        expr = ["shift", target, draw(sub), ["in", "S"]]
    elif target == "~":
        expr = ["un", "~", draw(sub)]
    elif target == "cmp":  # the inputs compared directly, each comparison in turn (equal values occur)
        op = ("<=", ">=", "==", "!=", "<", ">")[(slot // len(_INT_TARGETS)) % 6]
        cond = ["cmp", op, ["in", "A"], ["in", "B"]]
        expr = ["bcast", cond] if draw(st.booleans()) else ["sel", cond, draw(sub), draw(sub)]
    elif target == "logic":
        cond = draw(_int_cond(2, signed))
        if cond[0] == "cmp":
            cond = ["logic", draw(st.sampled_from(("and", "or"))), cond, draw(_int_cond(1, signed))]
        expr = ["bcast", cond] if draw(st.booleans()) else ["sel", cond, draw(sub), draw(sub)]
    else:
        # the inputs themselves (values at the limits) meet the wrapping operation; later ones get subtrees
        op = ("+", "*", "-")[(slot // len(_INT_TARGETS)) % 3]
        expr = (
            ["bin", op, ["in", "A"], ["in", "B"]]
            if slot < 3 * len(_INT_TARGETS) and draw(st.booleans())
            else ["bin", op, draw(st.one_of(sub, st.just(["in", "A"]))), ["in", "B"]]
        )
    if target == "wrap" and dA in _WIDE_WRAP_DTYPES and caps.has("select"):
        expr = _wide_wrap(expr, wrap_round)
    if not caps.has("select") and "'sel'" in repr(expr):
        expr = ["bin", "+", ["in", "A"], ["in", "B"]]
    bm, bn = draw(st.sampled_from(TILES[2:])), draw(st.sampled_from(TILES[2:]))
    guard_ok = caps.has("runtime_if")
    outs = ints + tuple(caps.floats()[:1])
    return {
        "family": "intops",
        "M": draw(_extent(caps, bm, guard_ok)),
        "N": draw(_extent(caps, bn, guard_ok)),
        "bm": bm,
        "bn": bn,
        "dtypes": [dA, dB, dA if target == "wrap" else draw(st.sampled_from(ints))],
        "expr": expr,
        "target": target,
        "out_dtype": draw(st.sampled_from(outs)),
        "dyn": _dyn(draw, caps, guard_ok, slot),
        "threads": _threads(draw, caps),
    }


@st.composite
def math_knobs(draw, caps: Caps, slot: int = 0):
    from .accuracy import FUNCS

    floats = caps.floats()
    d = floats[slot % len(floats)]
    bm, bn = draw(st.sampled_from((8, 16, 32))), draw(st.sampled_from((16, 32, 64)))
    guard_ok = caps.has("runtime_if")
    return {
        "family": "math",
        "dtype": d,
        "funcs": list(FUNCS),
        "M": draw(_extent(caps, bm, guard_ok)),
        "N": draw(_extent(caps, bn, guard_ok)),
        "bm": bm,
        "bn": bn,
        "fast_math": caps.fast_math,
        "special_ops": caps.has("select"),
        "dyn": _dyn(draw, caps, guard_ok, slot),
        "threads": _threads(draw, caps),
    }


_FAMILY_STRATEGIES.update({"convert": convert_knobs, "intops": intops_knobs, "math": math_knobs})


@st.composite
def forms_knobs(draw, caps: Caps, slot: int = 0):
    """A `forms` program (form_programs.py): slots 0-2 use one form each (scalar, view, stages),
    slot 3 view and stages together, later ones a drawn mix (never scalar with stages: tilecore
    refuses scalar parameters in a multi-stage prim_func)."""
    pool = caps.floats() + caps.ints() + (("bool",) if caps.dtype_ok("bool") else ())
    bm, bn = draw(st.sampled_from(TILES[1:])), draw(st.sampled_from(TILES[1:]))
    guards = caps.has("runtime_if", "partial_tiles")
    M, N = draw(_extent(caps, bm, guards)), draw(_extent(caps, bn, guards))
    if slot < len(FORMS):
        forms = {FORMS[slot]}
    elif slot == len(FORMS):
        forms = {"view", "stages"}
    else:
        forms = {f for f in FORMS if draw(st.booleans())}
    if not caps.has("runtime_if") or "stages" in forms:  # scalars in a multi-stage prim_func: unsupported
        forms.discard("scalar")
    return {
        "family": "forms",
        "M": M,
        "N": N,
        "bm": bm,
        "bn": bn,
        "dtype": draw(st.sampled_from(pool)),
        "tile": draw(st.sampled_from(("shared", "fragment"))),
        "threads": _threads(draw, caps),
        "scalar": "scalar" in forms,
        "n": draw(st.integers(1, M)) if "scalar" in forms else M,
        "view": draw(st.sampled_from(("flat", "swapped"))) if "view" in forms else "",
        "stages": "stages" in forms,
    }


# what the directed idioms programs use, in turn (then one drawn mix)
IDIOM_SLOTS = (
    ("macro", "simt_while"),
    ("split",),
    ("macro", "simt", "astype"),
    ("Cast", "clamp", "serial", "hints", "persistent"),
    ("memory_order", "floordiv"),
    ("simt_for", "clamp"),
)
# the idioms that choose how a move's elements are stored (at most one per program), as knob "loops"
LOOP_IDIOMS = (
    ("serial", "serial"),
    ("floordiv", "flat"),
    ("simt", "simt"),
    ("simt_while", "simt_while"),
    ("simt_for", "simt_for"),
)
# T.clamp bounds by the kind of the input dtype (representable in each dtype of the kind)
CLAMP_BOUNDS = {"float": [-1.5, 1.5], "signed": [-100, 100], "uint8": [10, 200]}
ATOMIC_DTYPES = ("float32", "int32", "float64", "float16", "int64")  # as the atomic family's


def _idioms_dtypes(draw, caps: Caps, cast: bool, atomic: bool, slot: int, clamp: bool) -> tuple:
    """(input dtype, output dtype, input edge class) of an idioms program: an atomic output in a
    dtype atomics cover (the directed slot: the first two declared of ATOMIC_DTYPES, which every
    backend with atomics has), on small integers (intfloat: one exact add); else a conversion's
    edge values. No bool input for T.clamp."""
    from .edge_programs import convert_edges

    pool = caps.floats() + caps.ints() + (("bool",) if caps.dtype_ok("bool") and not clamp else ())
    if atomic:
        outs = [d for d in ATOMIC_DTYPES if caps.dtype_ok(d)]
        d_out = draw(st.sampled_from(outs[:2] if slot < len(IDIOM_SLOTS) else outs))
        d = draw(st.sampled_from([d for d in pool if d not in ("bool", d_out)])) if cast else d_out
        return d, d_out, "intfloat" if is_float(d) else ""
    d = draw(st.sampled_from(pool))
    if cast:  # not into bool: the output's initial value (77) is True, as most converted values are
        d_out = draw(st.sampled_from([x for x in pool if x not in (d, "bool")]))
        return d, d_out, draw(st.sampled_from(convert_edges(d, d_out)))
    return d, d, "special" if is_float(d) else ("limits" if d != "bool" else "")


def _thread_split(draw, caps: Caps, slot: int) -> tuple:
    """(threads, [op, bound]) of a thread-group split: both groups run in the directed slots, the
    drawn mix may leave one without threads (bound 0 or threads=). The first split has a `threads=`
    that is not a power of two (warp-specialized kernels use 3 warp groups: 384), which the seeded
    families never draw."""
    threads = draw(st.sampled_from((96, 160, 384) if slot == 1 else (64, 96, 128, 256, 384)))
    threads = min(threads, caps.max_threads) if caps.max_threads else threads
    bounds = [b for b in range(32, threads, 32)] or [max(1, threads // 2)]
    if slot >= len(IDIOM_SLOTS):
        bounds += [0, threads]
    op = ("<", ">=")[slot % 2] if slot < len(IDIOM_SLOTS) else draw(st.sampled_from(("<", ">=")))
    return threads, [op, draw(st.sampled_from(bounds))]


def reachable_idioms(caps: Caps) -> set:
    """The IDIOMS an idioms program may use on a backend with `caps`: atomics need the feature and
    a dtype of ATOMIC_DTYPES, T.Serial loops `serial`, conversions two dtypes."""
    out = set(IDIOMS)
    if not (caps.has("atomic") and any(caps.dtype_ok(d) for d in ATOMIC_DTYPES)):
        out.discard("memory_order")
    if not caps.has("serial"):
        out -= {"serial", "persistent", "simt", "simt_for"}
    if not caps.has("runtime_if"):
        out -= {"persistent", "simt"}
    if len(caps.floats() + caps.ints()) < 2:
        out -= {"astype", "Cast"}
    if not caps.has("while_loop", "parallel_while", "alloc_var", "runtime_if"):
        out.discard("simt_while")
    return out


@st.composite
def idioms_knobs(draw, caps: Caps, slot: int = 0):
    """An `idioms` program (form_programs.py): slots 0-4 use the idioms of IDIOM_SLOTS, later ones a
    drawn mix; an idiom the backend's declarations rule out is left out (atomics, T.Serial, a
    conversion with one dtype)."""
    from tilecore.frontend.tileops import MEMORY_ORDERS

    # the first split (threads= up to 384) moves tiles of more elements than threads
    # the first per-thread program moves several rounds of its few threads
    directed_simt = slot < len(IDIOM_SLOTS) and "simt" in IDIOM_SLOTS[slot]
    rows, cols = (
        (TILES[4:], TILES[5:]) if slot == 1 else ((TILES[3:], TILES[4:]) if directed_simt else (TILES[1:], TILES[1:]))
    )
    bm, bn = draw(st.sampled_from(rows)), draw(st.sampled_from(cols))
    guards = caps.has("runtime_if", "partial_tiles")
    M, N = draw(_extent(caps, bm, guards)), draw(_extent(caps, bn, guards))
    reachable = reachable_idioms(caps)
    # (an idiom the backend cannot reach is not drawn for: its other programs stay as they were)
    drawn = [i for i in IDIOMS if i != "simt_while" or i in reachable]
    use = set(IDIOM_SLOTS[slot]) & set(drawn) if slot < len(IDIOM_SLOTS) else {i for i in drawn if draw(st.booleans())}
    # one of each pair per program (a thread-group split is written at the kernel's top level)
    # (and one way of writing the element loop; per-thread code makes a split's tile copy per-thread)
    pairs: Tuple[Tuple[str, str], ...] = (("astype", "Cast"), ("serial", "floordiv"), ("split", "persistent"))
    pairs += (("serial", "simt"),) + tuple((other, "simt_while") for other in ("serial", "floordiv", "simt", "split"))
    pairs += tuple((other, "simt_for") for other in ("serial", "floordiv", "simt", "simt_while", "split"))
    for pair in pairs + (("floordiv", "simt"), ("split", "simt")):
        if set(pair) <= use:
            use.discard(draw(st.sampled_from(pair)))
    use &= reachable
    cast = next((c for c in ("astype", "Cast") if c in use), "")
    d, d_out, edges = _idioms_dtypes(draw, caps, bool(cast), "memory_order" in use, slot, "clamp" in use)
    kind = "float" if is_float(d) else ("uint8" if d == "uint8" else "signed")
    clamp = CLAMP_BOUNDS[kind] if "clamp" in use else []
    threads, split = _thread_split(draw, caps, slot) if "split" in use else (_threads(draw, caps), [])
    if directed_simt and "simt" in use:  # not a power of two at times: a last round with idle threads
        threads = min(draw(st.sampled_from((32, 64, 96))), caps.max_threads or 96)
    elif "simt" in use:  # its shared exchange buffer (threads= elements per move) stays small
        threads = min(threads, 256)
    elif "simt_while" in use or "simt_for" in use:  # (not a power of two at times) full, partial, empty runs
        threads = min(draw(st.sampled_from((32, 64, 96, 128))), caps.max_threads or 128)
    return {
        "family": "idioms",
        "M": M,
        "N": N,
        "bm": bm,
        "bn": bn,
        "dtype": d,
        "out_dtype": d_out,
        "edges": edges,
        "tile": draw(st.sampled_from(("shared", "fragment"))),
        "threads": threads,
        "macro": "macro" in use,
        "split": split,
        "cast": cast,
        "clamp": clamp,
        "spelling": draw(st.sampled_from(("str", "attr", "dtype"))),
        "loops": next((name for i, name in LOOP_IDIOMS if i in use), "parallel"),
        "order": draw(st.sampled_from(MEMORY_ORDERS)) if "memory_order" in use else "",
        "hints": "hints" in use,
        "persistent": _persistent_wave(draw, M, N, bm, bn) if "persistent" in use else [],
    }


def _persistent_wave(draw, M: int, N: int, bm: int, bn: int) -> list:
    """[wave size, group size] of a T.Persistent loop over the (M / bm) x (N / bn) tiles: waves of
    one block up to more blocks than tiles, groups that divide the last extent or not."""
    tiles = -(-M // bm) * -(-N // bn)
    return [draw(st.integers(1, tiles + 1)), draw(st.integers(1, 4))]


# ----------------------------------------------------------------------------- opt-in features
# Drawn for backends that declare them (fp8 dtypes, `while_loop`) and chosen by the program's slot
# alone, after every draw of its family: a backend that does not declare them gets the programs it
# got before, and one that does gets the same programs with the opt-in part added.

# (source, destination) of the fp8 conversion a convert program carries, in turn: into each fp8
# dtype from every wider float and from int32, out of each into floats, int32 and the other fp8
FP8_CONVERSIONS = (
    ("float32", "float8_e4m3fn"),
    ("float8_e4m3fn", "float32"),
    ("float32", "float8_e5m2"),
    ("float8_e5m2", "float16"),
    ("float16", "float8_e4m3fn"),
    ("bfloat16", "float8_e5m2"),
    ("float64", "float8_e4m3fn"),
    ("float8_e5m2", "float8_e4m3fn"),
    ("float16", "float8_e5m2"),
    ("float8_e4m3fn", "bfloat16"),
    ("bfloat16", "float8_e4m3fn"),
    ("float64", "float8_e5m2"),
    ("float8_e4m3fn", "float8_e5m2"),
    ("int32", "float8_e4m3fn"),
    ("float8_e5m2", "int32"),
)


def fp8_conversion(caps: Caps, slot: int) -> dict:
    """The fp8 conversion convert program `slot` carries ({} without fp8): source, destination and
    the edge class of its input (every bit pattern out of fp8; ties, overflow and specials into it)."""
    pairs = [p for p in FP8_CONVERSIONS if all(caps.dtype_ok(d) for d in p)]
    if not pairs:
        return {}
    src, dst = pairs[slot % len(pairs)]
    if is_fp8(src):
        edges = "fp8bits" if is_float(dst) else f"fp8bits:{dst}"
    else:
        edges = f"fp8:{dst}" if is_float(src) else "limits"
    return {"src": src, "dst": dst, "edges": edges}


def _fp8_gemm(caps: Caps, slot: int, k: dict) -> None:
    """Every third gemm program (slot 1, 4, ...) multiplies fp8 tiles into a float32 / float64
    accumulator; every other one of those holds small integers, whose sums are exact in any order,
    and writes an fp8 result, compared bit for bit (the GEMM's final rounding into fp8)."""
    accs = [a for a in ("float32", "float64") if caps.dtype_ok(a)]
    fp8s = [d for d in caps.fp8s() if any((d, a) in caps.gemm_dtypes for a in accs)]
    if slot % 3 != 1 or not fp8s:
        return
    d = fp8s[(slot // 3) % len(fp8s)]
    k["in_dtype"] = d
    if (d, k["acc_dtype"]) not in caps.gemm_dtypes:
        k["acc_dtype"] = next(a for a in accs if (d, a) in caps.gemm_dtypes)
        if k["out_dtype"] in ("float16", "bfloat16") or not is_float(k["out_dtype"]):
            k["out_dtype"] = k["acc_dtype"]
    if slot % 6 == 1:
        k["out_dtype"], k["fp8_exact"] = d, True


def _matrix_step_gemm(caps: Caps, slot: int, k: dict) -> None:
    """Every sixth gemm program (slot 3, 9, ...) multiplies bfloat16 (else float16) tiles into float32
    with a K tile of 32 and at least 32 k, and every sixth other (slot 5, 11, ...: the integer slots)
    int8 tiles into int32 with a K tile of 64 and at least 64 k: the K steps of CPU and GPU matrix
    instructions (tile-cpu's AMX paths take only such gemms), which the drawn tiles of 4-32 and short
    K rarely give."""
    pairs: Tuple[Tuple[str, str], ...]
    if slot % 6 == 3:
        pairs, bk = (("bfloat16", "float32"), ("float16", "float32")), 32
    elif slot % 6 == 5:
        pairs, bk = (("int8", "int32"),), 64
    else:
        return
    pair = next((p for p in pairs if p in _gemm_pairs(caps)), None)
    if pair is None:
        return
    k["in_dtype"], k["acc_dtype"], k["bk"] = pair[0], pair[1], bk
    k["K"] = max(k["K"], bk) if k["loop"] != "single" else bk
    if is_float(pair[1]) and (not is_float(k["out_dtype"]) or is_fp8(k["out_dtype"])):
        k["out_dtype"] = "float32"
    if not is_float(pair[1]):
        k["out_dtype"] = pair[1]
    k.pop("fp8_exact", None)


# (bm, bn, bk, threads, stages): block shapes that GPU tensor-core GEMMs and their pipelines take
# (one warpgroup of 16 or 32 rows per warp, TileLang's quickstart, two warpgroups)
TENSOR_CORE_TILES = (
    (64, 64, 32, 128, 2),
    (128, 128, 32, 128, 3),
    (128, 128, 64, 256, 3),
    (64, 128, 64, 128, 4),
    (128, 256, 32, 256, 2),
)


def _tensor_core_gemm(caps: Caps, slot: int, k: dict) -> None:
    """Every sixth gemm program after the first (slot 6, 12, ...) multiplies float16 / bfloat16
    tiles into float32 in a block shape of TENSOR_CORE_TILES, in turn: a pipelined K loop of
    stages + 2 steps (every stage refilled), two blocks along each grid axis (an even x extent:
    clusters of two fit), every other one with partial tiles in M, N and K. The drawn tiles of
    4-32 never reach the GPU backends' tensor-core, warp-specialized and TMA paths (tile-cuda's
    wgmma needs 64-row blocks), which such kernels take by default."""
    pairs = [p for p in (("float16", "float32"), ("bfloat16", "float32")) if p in _gemm_pairs(caps)]
    if slot % 6 or not slot or not pairs or not caps.has("pipelined", "fill", "multi_block"):
        return
    turn = slot // 6 - 1
    bm, bn, bk, threads, stages = TENSOR_CORE_TILES[turn % len(TENSOR_CORE_TILES)]
    ragged = turn % 2 == 1 and caps.has("partial_tiles")
    trim = 8 if ragged else 0
    k["in_dtype"], k["acc_dtype"] = pairs[(turn // len(TENSOR_CORE_TILES)) % len(pairs)]
    k.update(bm=bm, bn=bn, bk=bk, num_stages=stages, loop="pipelined", a_scope="shared", b_scope="shared")
    k["threads"] = min(threads, caps.max_threads) if caps.max_threads else threads
    k["M"], k["N"], k["K"] = 2 * bm - trim, 2 * bn - trim, (stages + 2) * bk - trim
    if not is_float(k["out_dtype"]) or is_fp8(k["out_dtype"]):
        k["out_dtype"] = "float32"
    k.pop("fp8_exact", None)


def int4_gemm_accumulator(caps: Caps) -> Optional[str]:
    """The accumulator of the int4 gemm programs (int32, else int64), or None where the backend does
    not declare int4 or int8 / int4 gemms into it (int4 tiles are int8 ones after the core rewrite)."""
    if not caps.dtype_ok("int4"):
        return None
    accs = [a for a in ("int32", "int64") if caps.dtype_ok(a) and {("int4", a), ("int8", a)} & caps.gemm_dtypes]
    return accs[0] if accs else None


def _int4_gemm(caps: Caps, slot: int, k: dict) -> None:
    """Every twelfth gemm program (slot 2, 14, ...: integer slots) multiplies int4 tensors, passed
    packed two values per int8 byte (every byte value drawn), into int32 (else int64): a backend
    reads them through the core rewrite's nibble unpack, the reference through its own unpacking
    (docs/semantics.md "int4"). The packed dimension of each operand is made even
    (programs.int4_dims). Nibbles read in the wrong order permute K alike in A (M, K) and B (N, K),
    which leaves A @ B.T unchanged: slots 2, 26, ... pack B along N (the output's columns), slots
    14, 38, ... take that form of TileLang's int4 example."""
    acc = int4_gemm_accumulator(caps)
    if slot % 12 != 2 or acc is None:
        return
    k["in_dtype"], k["acc_dtype"], k["out_dtype"] = "int4", acc, acc
    if slot % 24 == 14 and caps.has("gemm_transpose"):
        k["ta"], k["tb"] = False, True
    else:
        k["tb"] = False
    k["M"], k["N"], k["K"] = int4_dims(k)
    k.pop("fp8_exact", None)


def while_loop_knob(caps: Caps, slot: int) -> dict:
    """Control programs of a backend with `while_loop`: every other one walks its row with a
    `while` on a counter ("count"), every fourth also stops early at a data-dependent element
    ("stop")."""
    if not caps.has("while_loop", "alloc_var") or slot % 2:
        return {}
    return {"while": "stop" if slot % 4 == 2 else "count"}
