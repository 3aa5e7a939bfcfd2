"""The catalog of planted bugs (see tile_mutants.py, the plugin that registers one backend per bug).

Each bug is what a real backend could get wrong, planted our own way:

* IR bugs rewrite the Tile IR the wrapped backend compiles (work on cpu and reference);
* launch bugs change what the kernel wrote, after it ran (both);
* numeric bugs change the reference interpreter's number handling during the
  launch (reference only: they model conversion and accumulation hardware).
"""

from __future__ import annotations

import contextlib
import dataclasses

import numpy as np

from tilecore.ir import nodes as N
from tilecore.ir.types import bits, is_float, is_fp8, is_int, is_int4
from tilecore.ir.visitor import Transformer, walk

INT_RANGES = {
    "int8": (-128, 127),
    "uint8": (0, 255),
    "int16": (-32768, 32767),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


def _c(v, dtype):
    return N.Const(v, dtype)


def _isnan(x):
    return N.BinOp("!=", x, x, "bool")


def _ints(*dtypes) -> bool:
    return all(is_int(d) and d != "bool" for d in dtypes)


# ----------------------------------------------------------------------------- conversions


class _RoundFloatToInt(Transformer):
    """float -> int rounds to nearest instead of truncating toward zero."""

    def _fix(self, value, dtype):
        d = value.dtype
        return N.Cast(N.Call("floor", (N.BinOp("+", value, _c(0.5, d), d),), d), dtype)

    def visit_Cast(self, e):
        return self._fix(e.value, e.dtype) if _ints(e.dtype) and is_float(e.value.dtype) else e

    def visit_Store(self, s):
        if _ints(s.buffer.dtype) and is_float(s.value.dtype):
            return dataclasses.replace(s, value=self._fix(s.value, s.buffer.dtype))
        return s


class _SaturateNarrowing(Transformer):
    """Integer narrowing conversions saturate instead of wrapping."""

    def _fix(self, value, dtype):
        lo, hi = INT_RANGES[dtype]
        d = value.dtype
        return N.Cast(N.BinOp("max", N.BinOp("min", value, _c(hi, d), d), _c(lo, d), d), dtype)

    def _narrowing(self, src, dst):
        return _ints(src, dst) and (INT_RANGES[dst][0] > INT_RANGES[src][0] or INT_RANGES[dst][1] < INT_RANGES[src][1])

    def visit_Cast(self, e):
        return self._fix(e.value, e.dtype) if self._narrowing(e.value.dtype, e.dtype) else e

    def visit_Store(self, s):
        if self._narrowing(s.value.dtype, s.buffer.dtype):
            return dataclasses.replace(s, value=self._fix(s.value, s.buffer.dtype))
        return s


class _BoolViaInt(Transformer):
    """float -> bool converts through int (0.5 becomes False)."""

    def visit_Cast(self, e):
        if e.dtype == "bool" and is_float(e.value.dtype):
            return N.Cast(N.Cast(e.value, "int32"), "bool")
        return e

    def visit_Store(self, s):
        if s.buffer.dtype == "bool" and is_float(s.value.dtype):
            return dataclasses.replace(s, value=N.Cast(N.Cast(s.value, "int32"), "bool"))
        return s


# ----------------------------------------------------------------------------- integer semantics


class _TruncatingDivision(Transformer):
    """Integer // and % truncate toward zero (C) instead of flooring."""

    def visit_BinOp(self, e):
        if e.op == "//" and _ints(e.dtype):
            return N.BinOp("/", e.a, e.b, e.dtype)
        if e.op == "%" and _ints(e.dtype):
            q = N.BinOp("/", e.a, e.b, e.dtype)
            return N.BinOp("-", e.a, N.BinOp("*", q, e.b, e.dtype), e.dtype)
        return e


class _OpSwap(Transformer):
    """Replace one operator by another on integer operands."""

    def __init__(self, table):
        self.table = table

    def visit_BinOp(self, e):
        if e.op in self.table and _ints(e.a.dtype, e.b.dtype):
            return dataclasses.replace(e, op=self.table[e.op])
        return e


class _LogicalShiftRight(Transformer):
    """>> on signed integers shifts in zeros (logical) instead of copies of the sign bit."""

    def visit_BinOp(self, e):
        if e.op == ">>" and _ints(e.dtype) and e.dtype != "uint8":
            d, w = e.dtype, bits(e.dtype)
            mask = N.BinOp("-", N.BinOp("<<", _c(1, d), N.BinOp("-", _c(w, d), e.b, d), d), _c(1, d), d)
            return N.BinOp("&", e, mask, d)
        return e


class _InvertAsNegate(Transformer):
    """~x computed as -x."""

    def visit_UnaryOp(self, e):
        return dataclasses.replace(e, op="neg") if e.op == "~" else e


class _SaturatingAdd(Transformer):
    """int8 / int16 + saturates instead of wrapping."""

    def visit_BinOp(self, e):
        if e.op == "+" and e.dtype in ("int8", "int16"):
            lo, hi = INT_RANGES[e.dtype]
            wide = N.BinOp("+", N.Cast(e.a, "int32"), N.Cast(e.b, "int32"), "int32")
            return N.Cast(
                N.BinOp("max", N.BinOp("min", wide, _c(hi, "int32"), "int32"), _c(lo, "int32"), "int32"), e.dtype
            )
        return e


class _Fp8Saturates(Transformer):
    """Conversions into fp8 saturate at the largest finite value (a `satfinite` conversion)
    instead of giving NaN (e4m3fn) or inf (e5m2)."""

    LARGEST = {"float8_e4m3fn": 448.0, "float8_e5m2": 57344.0}

    def _fix(self, value, dtype):
        wide = value if value.dtype in ("float32", "float64") else N.Cast(value, "float32")
        d, top = wide.dtype, self.LARGEST[dtype]
        return N.Cast(N.BinOp("max", N.BinOp("min", wide, _c(top, d), d), _c(-top, d), d), dtype)

    def visit_Cast(self, e):
        return self._fix(e.value, e.dtype) if is_fp8(e.dtype) and e.value.dtype != e.dtype else e

    def visit_Store(self, s):
        if is_fp8(s.buffer.dtype) and s.value.dtype != s.buffer.dtype:
            return dataclasses.replace(s, value=self._fix(s.value, s.buffer.dtype))
        return s


# ----------------------------------------------------------------------------- int4


class _Int4NibblesSwapped(Transformer):
    """Packed int4 tensors unpacked high nibble first (element 2j of a row read from bits 4-7 of
    byte j, element 2j + 1 from bits 0-3): the core rewrite's nibble unpack with its shift
    mirrored. The reference keeps int4 (it unpacks arguments itself), so a kernel it is to run is
    first rewritten as every other backend receives it (passes/int4_storage.py)."""

    def visit(self, node):
        if isinstance(node, N.PrimFunc) and any(is_int4(p.dtype) for p in node.params):
            from tilecore.passes.int4_storage import Int4StoragePass
            from tilecore.passes.pipeline import PassContext

            node = Int4StoragePass()(node, PassContext(source=node.source))
        return super().visit(node)

    @staticmethod
    def _packed_byte(e) -> bool:
        load = e.value if isinstance(e, N.Cast) else None
        return isinstance(load, N.Load) and load.buffer.scope == "global" and load.buffer.dtype == "int8"

    @staticmethod
    def _nibble_shift(e) -> bool:  # (k % 2) * 4, maybe cast to int32
        e = e.value if isinstance(e, N.Cast) else e
        return (
            isinstance(e, N.BinOp)
            and e.op == "*"
            and isinstance(e.a, N.BinOp)
            and e.a.op == "%"
            and isinstance(e.a.b, N.Const)
            and e.a.b.value == 2
        )

    def visit_BinOp(self, e):
        shift = e.a if isinstance(e.a, N.BinOp) and e.a.op == ">>" else None
        if e.op != "&" or shift is None or not (self._packed_byte(shift.a) and self._nibble_shift(shift.b)):
            return e
        mirrored = N.BinOp("-", _c(4, shift.b.dtype), shift.b, shift.b.dtype)
        return dataclasses.replace(e, a=dataclasses.replace(shift, b=mirrored))


# ----------------------------------------------------------------------------- while loops


class _WhileExitsEarly(Transformer):
    """`while a < b` tests the counter already advanced (a + 1 < b): one iteration too few."""

    def visit_While(self, s):
        c = s.cond
        if isinstance(c, N.BinOp) and c.op == "<" and not is_float(c.a.dtype):
            early = N.BinOp("<", N.BinOp("+", c.a, _c(1, c.a.dtype), c.a.dtype), c.b, c.dtype)
            return dataclasses.replace(s, cond=early)
        return s


class _ParallelLoopFollowsOneLane(Transformer):
    """A loop inside T.Parallel whose header depends on the iteration (per-thread code's
    thread-dependent `while` or `for`) uses the last iteration's header for every iteration: a
    backend that branches on one lane's test ends every thread's `while` when that lane's ends,
    one that computes one trip count for all lanes walks the wrong elements. `fields`: the
    header's fields of the statement type `kind`."""

    def __init__(self, kind, fields):
        self.kind, self.fields = kind, fields

    def visit_Parallel(self, p):
        last = {v.name: _c(int(n) - 1, v.dtype) for v, n in zip(p.vars, p.extents)}
        kind, fields = self.kind, self.fields

        class Lane(Transformer):
            def visit_Var(self, v):
                return last.get(v.name, v)

        class Loops(Transformer):  # (bottom-up: a loop's body is already rewritten)
            def header(self, s):
                if not isinstance(s, kind):
                    return s
                return dataclasses.replace(s, **{f: Lane().visit(getattr(s, f)) for f in fields})

            visit_While = visit_For = header

        return dataclasses.replace(p, body=Loops().visit_body(p.body))


# ----------------------------------------------------------------------------- inlined calls


class _InlinedCopyReused(Transformer):
    """Code cached by source position: a statement written at the same place in the source as an
    earlier statement of the same body (the second inlined copy of a `@T.macro` called twice) runs
    the earlier one's code, with the first call's arguments. Allocations keep their own buffers."""

    def __init__(self):
        self.n = 0

    def visit_body(self, body):
        first: dict = {}
        out = []
        for s in super().visit_body(body):
            span = getattr(s, "span", None)
            if span is not None and span.line and not isinstance(s, N.Alloc):
                key = (type(s), span.file, span.line, span.col)
                s = self._again(first[key]) if key in first else first.setdefault(key, s)
            out.append(s)
        return tuple(out)

    def _again(self, stmt):
        """`stmt` with the names it binds (loop variables, local names) renamed: names are unique
        in a kernel, and the copy must stay well-formed IR."""
        bound = {v.name for n in walk(stmt) if isinstance(n, (N.Parallel, N.For, N.Let)) for v in _bound_vars(n)}
        self.n += 1
        suffix = f"_mutant_again{self.n}"

        class Rename(Transformer):
            def visit_Var(self, v):
                return dataclasses.replace(v, name=v.name + suffix) if v.name in bound else v

        return Rename().visit(stmt)


def _bound_vars(node):
    return node.vars if isinstance(node, N.Parallel) else (node.var,)


# ----------------------------------------------------------------------------- threads


class _ThreadsMaskedToPowerOfTwo(Transformer):
    """With a `threads=` that is not a power of two, T.Parallel iterations are dealt out with a stride
    of `threads` but each thread's lane is masked to the power of two below (`tid & (P - 1)`): the
    iterations whose position in their round is P or more never run."""

    def visit_Kernel(self, k):
        threads = 1
        for t in k.threads:
            threads *= int(t)
        lanes = 1 << (threads.bit_length() - 1)
        if lanes == threads:
            return k

        class Mask(Transformer):
            def visit_Parallel(self, p):
                flat = _c(0, "int32")
                for var, extent in zip(p.vars, p.extents):
                    flat = N.BinOp("+", N.BinOp("*", flat, _c(int(extent), "int32"), "int32"), var, "int32")
                lane = N.BinOp("%", flat, _c(threads, "int32"), "int32")
                runs = N.BinOp("<", lane, _c(lanes, "int32"), "bool")
                return dataclasses.replace(p, body=(N.If(runs, p.body, ()),))

        return dataclasses.replace(k, body=Mask().visit(k.body))


# ----------------------------------------------------------------------------- NaN


class _ReduceIgnoresNaN(Transformer):
    """reduce_max / min / absmax skip NaN (fmax semantics): NaNs in the source are replaced first."""

    def __init__(self):
        self.n = 0

    def visit_Reduce(self, s):
        src = s.src
        if s.kind not in ("max", "min", "absmax") or not is_float(src.dtype):
            return s
        repl = {"max": float("-inf"), "min": float("inf"), "absmax": 0.0}[s.kind]
        self.n += 1
        idx = tuple(N.Var(f"_mutant_nan{self.n}_{d}", "int32") for d in range(src.ndim))
        ld = N.Load(src, idx, src.dtype)
        store = N.Store(src, idx, N.Select(_isnan(ld), _c(repl, src.dtype), ld, src.dtype))
        return (N.Parallel(idx, tuple(int(x) for x in src.shape), (store,)), s)


class _MaxMinIgnoreNaN(Transformer):
    """T.max / T.min on floats return the other operand when one is NaN."""

    def visit_BinOp(self, e):
        if e.op in ("max", "min") and is_float(e.dtype):
            return N.Select(_isnan(e.a), e.b, N.Select(_isnan(e.b), e.a, e, e.dtype), e.dtype)
        return e


# ----------------------------------------------------------------------------- math accuracy


class _MathBug(Transformer):
    """Rewrite calls of one math function."""

    def __init__(self, func, rewrite, dtypes=None):
        self.func, self.rewrite, self.dtypes = func, rewrite, dtypes

    def visit_Call(self, e):
        if e.func == self.func and (self.dtypes is None or e.dtype in self.dtypes):
            return self.rewrite(e.args[0], e.dtype, e)
        return e


def _inaccurate_exp(x, d, call):
    return N.BinOp("*", call, _c(1.0027, d), d)


def _naive_tanh(x, d, call):
    t = N.Call("exp", (N.BinOp("*", _c(2.0, d), x, d),), d)
    return N.BinOp("/", N.BinOp("-", t, _c(1.0, d), d), N.BinOp("+", t, _c(1.0, d), d), d)


def _naive_sin(x, d, call):
    c = _c(6.2831855, d)
    k = N.Call("floor", (N.BinOp("*", x, _c(1.0 / 6.2831855, d), d),), d)
    return N.Call("sin", (N.BinOp("-", x, N.BinOp("*", k, c, d), d),), d)


def _log2_via_log(x, d, call):
    return N.BinOp("*", N.Call("log", (x,), d), _c(1.4427, d), d)


def _rsqrt_estimate(x, d, call):
    return N.BinOp("*", call, _c(1.0 + 2.0**-12, d), d)


# ----------------------------------------------------------------------------- loops, shapes, layouts


class _PipelineDropsLast(Transformer):
    """A pipelined loop drops its last iteration when n % num_stages == 1 (a prologue/epilogue slip)."""

    def visit_For(self, s):
        if s.kind != "pipelined" or s.num_stages < 2:
            return s
        n = s.extent
        cond = N.BinOp("==", N.BinOp("%", n, _c(s.num_stages, n.dtype), n.dtype), _c(1, n.dtype), "bool")
        return dataclasses.replace(s, extent=N.Select(cond, N.BinOp("-", n, _c(1, n.dtype), n.dtype), n, n.dtype))


class _DynamicCeildivFloors(Transformer):
    """T.ceildiv of a dynamic extent rounds down: ((m + b) - 1) // b becomes m // b."""

    def __init__(self, dyn_names):
        self.dyn = set(dyn_names)

    def _dynamic(self, x) -> bool:
        return any(isinstance(v, N.Var) and v.name in self.dyn for v in walk(x))

    def visit_BinOp(self, e):
        a = e.a
        if e.op != "//" or not isinstance(a, N.BinOp) or not isinstance(e.b, N.Const):
            return e
        if a.op == "-" and isinstance(a.a, N.BinOp) and a.a.op == "+" and self._dynamic(a.a.a):
            return N.BinOp("//", a.a.a, e.b, e.dtype)  # as the frontend writes it
        if a.op == "+" and isinstance(a.b, N.Const) and a.b.value == e.b.value - 1 and self._dynamic(a.a):
            return N.BinOp("//", a.a, e.b, e.dtype)  # after constant folding
        return e


class _OverwriteAbsAccumulation(Transformer):
    """reduce_abssum / absmax with clear=False overwrite the output instead of accumulating."""

    def visit_Reduce(self, s):
        return dataclasses.replace(s, clear=True) if s.kind in ("abssum", "absmax") and not s.clear else s


class _CumsumIgnoresReverse(Transformer):
    def visit_Cumsum(self, s):
        return dataclasses.replace(s, reverse=False) if s.reverse else s


class _SquareTileTransposed(Transformer):
    """A copy between two on-chip square tiles transposes them (two layouts mixed up)."""

    def __init__(self):
        self.n = 0

    def visit_Copy(self, s):
        src, dst = s.src, s.dst
        if "global" in (src.buffer.scope, dst.buffer.scope) or len(src.extents) != 2:
            return s
        e = tuple(int(x) for x in src.extents)
        whole = all(
            tuple(r.buffer.shape) == e and all(isinstance(x, N.Const) and x.value == 0 for x in r.starts)
            for r in (src, dst)
        )
        if not whole or e[0] != e[1] or e[0] < 2:
            return s
        self.n += 1
        i, j = N.Var(f"_mutant_sq{self.n}_i", "int32"), N.Var(f"_mutant_sq{self.n}_j", "int32")
        value = N.Load(src.buffer, (j, i), src.buffer.dtype)
        if src.buffer.dtype != dst.buffer.dtype:
            value = N.Cast(value, dst.buffer.dtype)
        return N.Parallel((i, j), e, (N.Store(dst.buffer, (i, j), value),))


class _NarrowAtomicsRace(Transformer):
    """float16 / float64 atomics lose the updates of every other block (a read-modify-write race)."""

    def __init__(self, block_vars):
        self.block_vars = block_vars

    def visit_Atomic(self, s):
        if s.dst.buffer.dtype not in ("float16", "float64"):
            return s
        total = self.block_vars[0]
        for v in self.block_vars[1:]:
            total = N.BinOp("+", total, v, "int32")
        keep = N.BinOp("==", N.BinOp("%", total, _c(2, "int32"), "int32"), _c(0, "int32"), "bool")
        return N.If(keep, (s,), ())


class _LoseBlockZeroAtomics(Transformer):
    def __init__(self, block_var):
        self.block_var = block_var

    def visit_Atomic(self, s):
        cond = N.BinOp("!=", self.block_var, N.Const(0, self.block_var.dtype), "bool")
        return N.If(cond, (s,), ())


# ----------------------------------------------------------------------------- launch bugs


def _offset16(args, state):
    """Writes at element index >= 65,536 are lost (16-bit offsets); `state`: copies of the
    written arguments from before the launch (None for the others)."""
    for a, before in zip(args, state):
        if before is not None and a.size > 65536:
            a.reshape(-1)[65536:] = before.reshape(-1)[65536:]


def _flush_subnormals(args, state):
    """Subnormal results are flushed to zero."""
    for a in args:
        if a.dtype.kind == "f" or str(a.dtype) == "bfloat16":
            x = a.astype(np.float64)
            tiny = {2: 2.0**-14, 4: 2.0**-126, 8: 2.0**-1022}[a.dtype.itemsize]
            if str(a.dtype) == "bfloat16":
                tiny = 2.0**-126
            sub = (x != 0) & (np.abs(x) < tiny)
            a[sub] = np.copysign(0.0, x[sub]).astype(a.dtype)


# ----------------------------------------------------------------------------- numeric bugs (reference)


@contextlib.contextmanager
def _patched(module, name, value):
    old = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, old)


def _f16_ties_away(convert):
    def buggy(value, dtype):
        out = convert(value, dtype)
        arr = np.asarray(value)
        if dtype != "float16" or arr.dtype.kind != "f" or arr.dtype.itemsize <= 2:
            return out
        x = arr.astype(np.float64)
        y = np.asarray(out, dtype=np.float16)
        away = np.nextafter(y, np.copysign(np.float16(np.inf), y)).astype(np.float64)
        yd = y.astype(np.float64)
        with np.errstate(invalid="ignore"):
            tie = np.isfinite(yd) & (np.abs(x) > np.abs(yd)) & (np.abs(x - yd) == np.abs(away - x))
        if not np.any(tie):
            return out
        fixed = np.where(tie, away, yd).astype(np.float16)
        return fixed if isinstance(out, np.ndarray) else fixed[()]

    return buggy


def _bf16_double_rounding(convert):
    def buggy(value, dtype):
        arr = np.asarray(value)
        if dtype == "bfloat16" and arr.dtype == np.float64:
            return (
                convert(arr.astype(np.float32), dtype)
                if isinstance(value, np.ndarray)
                else convert(arr.astype(np.float32), dtype)[()]
            )
        return convert(value, dtype)

    return buggy


def _fp8_ties_away(convert):
    """Rounding into fp8 goes to the neighbour away from zero on exact ties (not to even)."""

    def buggy(value, dtype):
        out = convert(value, dtype)
        arr = np.asarray(value)
        if not is_fp8(dtype) or arr.dtype == np.asarray(out).dtype:
            return out
        x = arr.astype(np.float64)
        y = np.asarray(out)
        # fp8 is sign-magnitude: the next bit pattern up is the next value away from zero
        away = (y.view(np.uint8) + np.uint8(1)).view(y.dtype).astype(np.float64)
        yd = y.astype(np.float64)
        with np.errstate(invalid="ignore"):
            tie = np.isfinite(yd) & np.isfinite(away) & (np.abs(x) > np.abs(yd)) & (np.abs(x - yd) == np.abs(away - x))
        if not np.any(tie):
            return out
        fixed = np.where(tie, away, yd).astype(y.dtype)
        return fixed if isinstance(out, np.ndarray) else fixed[()]

    return buggy


def _int16_accumulation(acc_dtype):
    def buggy(*dtypes):
        if dtypes and all(d in ("int8", "uint8") for d in dtypes):
            return np.dtype(np.int16)
        return acc_dtype(*dtypes)

    return buggy


def numeric_patches(bug: str):
    """A context manager under which the interpreter has the numeric bug."""
    from tilecore.interp import executor

    if bug == "f16-ties-away":
        return _patched(executor, "convert", _f16_ties_away(executor.convert))
    if bug == "bf16-double-rounding":
        return _patched(executor, "convert", _bf16_double_rounding(executor.convert))
    if bug == "fp8-ties-away":
        return _patched(executor, "convert", _fp8_ties_away(executor.convert))
    if bug == "int8-gemm-int16":
        return _patched(executor, "_acc_dtype", _int16_accumulation(executor._acc_dtype))
    raise KeyError(bug)


# ----------------------------------------------------------------------------- large offsets


class _ScalarArgumentLost(Transformer):
    """Scalar kernel parameters read as 0: the launcher never packs them into the call."""

    def __init__(self, func):
        self.names = frozenset(func.scalar_names)
        # the parameters themselves stay (they are bound like dynamic dimensions): only their uses read 0
        self.params, self.dyn_vars = func.scalar_params, func.dyn_vars

    def visit_Var(self, v):
        return _c(0, v.dtype) if v.name in self.names else v

    def visit_PrimFunc(self, f):
        return dataclasses.replace(f, scalar_params=self.params, dyn_vars=self.dyn_vars)


class _Offsets32(Transformer):
    """Element offsets into global tensors are computed in signed 32-bit integers: past 2^31 they
    wrap negative, and the access lands 2^32 elements before the tensor's start."""

    def _wrap(self, buf: N.Buffer, indices):
        shape = buf.static_shape() if buf.scope == "global" else None
        size = 1
        for n in shape or ():
            size *= n
        if not shape or size <= 2**31 or len(indices) != len(shape):
            return None
        flat = _c(0, "int64")
        for index, n in zip(indices, shape):
            flat = N.BinOp("+", N.BinOp("*", flat, _c(n, "int64"), "int64"), N.Cast(index, "int64"), "int64")
        rest = N.Cast(flat, "int32")  # the 32-bit offset (narrowing wraps)
        out = []
        for n in reversed(shape[1:]):
            out.insert(0, N.BinOp("%", rest, _c(n, "int32"), "int32"))
            rest = N.BinOp("//", rest, _c(n, "int32"), "int32")
        return (rest,) + tuple(out)

    def visit_Load(self, e):
        idx = self._wrap(e.buffer, e.indices)
        return e if idx is None else dataclasses.replace(e, indices=idx)

    def visit_Store(self, s):
        idx = self._wrap(s.buffer, s.indices)
        return s if idx is None else dataclasses.replace(s, indices=idx)

    def visit_Region(self, r):
        starts = self._wrap(r.buffer, r.starts)
        return r if starts is None else dataclasses.replace(r, starts=starts)


# ----------------------------------------------------------------------------- the catalog


@dataclasses.dataclass(frozen=True)
class Bug:
    name: str
    kind: str  # "ir", "launch", "numeric"
    description: str


def _ir_bugs(func):
    dyn = [v.name for v in func.dyn_vars]
    bv = func.kernel.block_vars
    return {
        "float-to-int-rounds": _RoundFloatToInt(),
        "int-narrowing-saturates": _SaturateNarrowing(),
        "float-to-bool-via-int": _BoolViaInt(),
        "int-division-truncates": _TruncatingDivision(),
        "le-as-lt": _OpSwap({"<=": "<", ">=": ">"}),
        "shift-right-logical": _LogicalShiftRight(),
        "invert-as-negate": _InvertAsNegate(),
        "int-add-saturates": _SaturatingAdd(),
        "reduce-max-ignores-nan": _ReduceIgnoresNaN(),
        "max-min-ignore-nan": _MaxMinIgnoreNaN(),
        "exp-inaccurate": _MathBug("exp", _inaccurate_exp, ("float32",)),
        "tanh-naive": _MathBug("tanh", _naive_tanh),
        "sin-naive-range-reduction": _MathBug("sin", _naive_sin),
        "log2-via-log": _MathBug("log2", _log2_via_log),
        "rsqrt-estimate": _MathBug("rsqrt", _rsqrt_estimate, ("float32", "float64")),
        "pipeline-drops-last": _PipelineDropsLast(),
        "dynamic-ceildiv-floors": _DynamicCeildivFloors(dyn),
        "abs-reduce-overwrites": _OverwriteAbsAccumulation(),
        "offset32": _Offsets32(),
        "cumsum-ignores-reverse": _CumsumIgnoresReverse(),
        "square-tile-transposed": _SquareTileTransposed(),
        "narrow-atomics-race": _NarrowAtomicsRace(bv),
        "atomic": _LoseBlockZeroAtomics(bv[0]),
        "fp8-saturates": _Fp8Saturates(),
        "int4-nibbles-swapped": _Int4NibblesSwapped(),
        "while-exits-early": _WhileExitsEarly(),
        "parallel-while-one-lane": _ParallelLoopFollowsOneLane(N.While, ("cond",)),
        "parallel-for-one-lane": _ParallelLoopFollowsOneLane(N.For, ("begin", "extent")),
        "scalar-lost": _ScalarArgumentLost(func),
        "macro-copy-reused": _InlinedCopyReused(),
        "threads-masked-pow2": _ThreadsMaskedToPowerOfTwo(),
    }


IR_BUGS = {
    "float-to-int-rounds": "float -> int conversion rounds to nearest instead of truncating toward zero",
    "int-narrowing-saturates": "integer narrowing conversions saturate instead of wrapping",
    "float-to-bool-via-int": "float -> bool goes through int (0.5 becomes False)",
    "int-division-truncates": "integer // and % truncate toward zero instead of flooring",
    "le-as-lt": "integer <= and >= compare strictly",
    "shift-right-logical": ">> on signed integers is logical",
    "invert-as-negate": "~x computed as -x",
    "int-add-saturates": "int8 / int16 addition saturates instead of wrapping",
    "reduce-max-ignores-nan": "reduce_max / min / absmax ignore NaN",
    "max-min-ignore-nan": "T.max / T.min return the other operand when one is NaN",
    "exp-inaccurate": "float32 exp with 2.7e-3 relative error",
    "tanh-naive": "tanh as (e^2x - 1) / (e^2x + 1): NaN once e^2x overflows",
    "sin-naive-range-reduction": "sin reduces its argument with a rounded 2*pi",
    "log2-via-log": "log2(x) as log(x) * 1.4427",
    "rsqrt-estimate": "rsqrt with a 12-bit hardware estimate (no Newton step)",
    "pipeline-drops-last": "a pipelined loop drops its last iteration when n % num_stages == 1",
    "dynamic-ceildiv-floors": "T.ceildiv of a dynamic extent rounds down (the last partial tile is skipped)",
    "abs-reduce-overwrites": "reduce_abssum / absmax with clear=False overwrite instead of accumulating",
    "offset32": "element offsets into global tensors computed in signed 32 bits (wrap past 2^31)",
    "cumsum-ignores-reverse": "T.cumsum ignores reverse=True",
    "square-tile-transposed": "copies between on-chip square tiles transpose them (layouts mixed up)",
    "narrow-atomics-race": "float16 / float64 atomics lose the updates of every other block",
    "atomic": "the atomic updates of block 0 are lost",
    "axis": "reductions run along the other axis",
    "transpose": "T.gemm ignores transpose_A / transpose_B",
    "fp8-saturates": "conversions into fp8 saturate at the largest finite value instead of giving NaN / inf",
    "int4-nibbles-swapped": "packed int4 tensors read high nibble first (element 2j from bits 4-7 of byte j)",
    "while-exits-early": "`while a < b` tests a + 1 < b (one iteration too few)",
    "parallel-while-one-lane": "a `while` inside T.Parallel (a per-thread one) follows the last lane's condition",
    "parallel-for-one-lane": "a `for` inside T.Parallel (a per-thread one) runs the last lane's bounds in every lane",
    "scalar-lost": "scalar kernel parameters read as 0 (never packed into the launch)",
    "macro-copy-reused": "a macro called twice runs its first call's code twice (code cached by source position)",
    "threads-masked-pow2": "threads= not a power of two: T.Parallel iterations past the power of two below are lost",
}
LAUNCH_BUGS = {
    "edge": "the last row/column of a partial edge tile is never written",
    "bf16": "bfloat16 results are truncated instead of rounded",
    "offset16": "writes at element index >= 65,536 are lost (16-bit offsets)",
    "ftz": "subnormal results are flushed to zero",
}
NUMERIC_BUGS = {
    "f16-ties-away": "float32/float64 -> float16 rounds ties away from zero instead of to even",
    "bf16-double-rounding": "float64 -> bfloat16 rounds twice, through float32",
    "int8-gemm-int16": "int8 T.gemm accumulates in a wrapping int16 before adding into the int32 accumulator",
    "fp8-ties-away": "rounding into fp8 goes away from zero on exact ties instead of to even",
}


def plant_ir(bug: str, func: N.PrimFunc) -> N.PrimFunc:
    """`func` with IR bug `bug` planted."""
    return _ir_bugs(func)[bug].visit(func)


def launch_after(bug: str, args, state) -> None:
    """Apply launch bug `bug` to the arrays after the kernel ran (`state`: copies from before)."""
    if bug == "offset16":
        _offset16(args, state)
    elif bug == "ftz":
        _flush_subnormals(args, state)
