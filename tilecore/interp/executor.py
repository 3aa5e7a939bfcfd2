"""The reference interpreter: Tile IR compiled once into numpy closures, then run.

Every node becomes a Python closure `f(frame)` when a PrimFunc is first run
(cached per function), so nothing about the program is re-derived per block.
Tile operations are single numpy operations on whole tiles; a `T.Parallel`
body is evaluated once over broadcast index arrays (axis k of the iteration
space is axis k of every value), with run-time `if`, `T.if_then_else` and
short-circuit `and`/`or` handled by masks. Element accesses whose indices are
a parallel variable plus an invariant offset become numpy slices (views);
anything else uses gathers/scatters with broadcast index arrays.

Semantics are DESIGN.md's, which this module defines executably:
* tile copies/fills/atomics: out-of-bounds reads give 0, writes are dropped;
* element indexing outside a buffer raises TileRuntimeError at the node's line
  (under a mask only the active elements count);
* fresh allocations hold NaN (floats), the dtype's minimum (ints), True (bool);
* arithmetic in the node's dtype (operands converted first), `//` and `%` floor,
  integer `/` truncates (C), stores convert to the destination dtype;
* T.gemm: exact products (float64 / int64), one rounding into C's dtype;
* reductions and scans accumulate in float64 / int64, then convert.

Where DESIGN.md is silent, the interpreter decides (and conformance follows):
* the tile out-of-bounds rules apply to every scope, not only global tensors;
* `T.if_then_else`, `and`, `or` evaluate a side only for the elements that use
  it, so `T.if_then_else(i < n, A[i], 0)` never reports A[n] as out of bounds;
* blocks run in grid order, the first grid dimension fastest (CUDA's x);
* T.print writes `[block (bx, ...)] msg: value` to stdout; inside T.Parallel
  the value is the array of the active elements.
"""

from __future__ import annotations

import itertools
import operator
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import numpy as np

from ..diagnostics import TileRuntimeError
from ..ir import nodes as N
from ..ir.types import is_float, is_int4, promote, storage_of
from ..ir.visitor import Dispatcher, walk
from .dtypes import convert, fill_value, np_dtype, scalar, tile_dtype, unpack_int4
from .regions import read_tile, tile_view, write_tile

MAX_BLOCKS = 1 << 24  # blocks per launch the interpreter accepts (each runs in Python, one at a time)


def _free_memory() -> int:
    """Bytes of physical memory free now (a large number where the system cannot tell)."""
    try:
        import os

        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1 << 62


Closure = Callable[["Frame"], Any]  # a numpy array or scalar (or an index)


class Frame:
    """Run-time state of one launch: variable values, buffers, the active mask."""

    __slots__ = ("vars", "bufs", "mask", "block", "space")

    def __init__(self):
        self.vars: Dict[str, object] = {}
        self.bufs: Dict[str, np.ndarray] = {}
        self.mask = None  # bool array (broadcastable to `space`) inside a masked Parallel region
        self.block: Tuple[int, ...] = ()
        self.space: Optional[Tuple[int, ...]] = None  # extents of the running T.Parallel


class _Scope:
    """Compile-time context: the enclosing T.Parallel (if any) and which vars vary over it."""

    def __init__(self, axes=None, extents=(), varying=()):
        self.axes: Optional[Dict[str, int]] = axes  # parallel var name -> axis
        self.extents: Tuple[int, ...] = tuple(extents)
        self.varying = set(varying)

    @property
    def in_parallel(self) -> bool:
        return self.axes is not None

    def child(self) -> "_Scope":
        return _Scope(self.axes, self.extents, self.varying)


def _is_array(x) -> bool:
    return isinstance(x, np.ndarray)


def _scalarize(x):
    if isinstance(x, np.ndarray) and x.ndim == 0:
        return x[()]
    return x


# ----------------------------------------------------------------------------- arithmetic kernels


def _int_truediv(a, b):
    """C division of ints: truncation toward zero."""
    q = np.floor_divide(a, b)
    fix = (np.not_equal(np.subtract(a, np.multiply(q, b)), 0)) & (np.less(a, 0) != np.less(b, 0))
    return _scalarize(np.where(fix, q + 1, q).astype(np.result_type(q)))


def _int_pow(a, b):
    a_arr, b_arr = np.asarray(a), np.asarray(b)
    neg = b_arr < 0
    out = np.power(a_arr, np.where(neg, 0, b_arr))
    if np.any(neg):
        # a ** -n in integers: 1 for a == 1, +-1 for a == -1, else 0 (C-like truncation)
        alt = np.where(a_arr == 1, 1, np.where(a_arr == -1, np.where(b_arr % 2 == 0, 1, -1), 0))
        out = np.where(neg, alt, out).astype(out.dtype)
    return _scalarize(out)


_ARITH: Dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "//": np.floor_divide,
    "%": np.mod,
    "min": np.minimum,
    "max": np.maximum,
    "&": np.bitwise_and,
    "|": np.bitwise_or,
    "^": np.bitwise_xor,
    "<<": np.left_shift,
    ">>": np.right_shift,
}
_COMPARE: Dict[str, Callable[[Any, Any], Any]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _rsqrt(x):
    return 1 / np.sqrt(x)


_MATH: Dict[str, Callable[[Any], Any]] = {
    "exp": np.exp,
    "exp2": np.exp2,
    "log": np.log,
    "log2": np.log2,
    "sqrt": np.sqrt,
    "rsqrt": _rsqrt,
    "tanh": np.tanh,
    "sigmoid": _sigmoid,
    "sin": np.sin,
    "cos": np.cos,
    "floor": np.floor,
    "ceil": np.ceil,
    "abs": np.abs,
}

_ATOMIC_UFUNC = {"add": np.add, "max": np.maximum, "min": np.minimum}


def _acc_dtype(*dtypes: str) -> np.dtype:
    """Exact-enough accumulation: float64 when any float is involved, else int64."""
    return np.dtype(np.float64) if any(is_float(d) for d in dtypes) else np.dtype(np.int64)


# ----------------------------------------------------------------------------- compiled program


class Program(Dispatcher):
    """A PrimFunc compiled into closures; `run(args, bindings)` executes it in place."""

    def __init__(self, func: N.PrimFunc):
        self.func = func
        self.source = func.source or ""
        self.params = func.params
        self.dyn_names = {v.name: v for v in func.dyn_vars}
        for p in func.params:
            for s in p.shape:
                if isinstance(s, N.Var):
                    self.dyn_names.setdefault(s.name, s)
        self.body = self._body(func.body, _Scope())

    # -------------------------------------------------------------- errors

    def _error(self, message: str, span) -> TileRuntimeError:
        return TileRuntimeError(message, span, self.source)

    # -------------------------------------------------------------- launch

    def run(self, args, bindings: Optional[Dict[str, int]] = None) -> None:
        func = self.func
        if len(args) != len(self.params):
            raise TileRuntimeError(
                f"{func.name} takes {len(self.params)} arrays ({', '.join(p.name for p in self.params)}), "
                f"got {len(args)}"
            )
        frame = Frame()
        dims: Dict[str, int] = {}
        for param, arg in zip(self.params, args):
            if not isinstance(arg, np.ndarray):
                raise TileRuntimeError(f"argument {param.name}: expected a numpy array, got {type(arg).__name__}")
            want_dtype, want_shape = storage_of(param.dtype, param.shape)  # int4: packed in int8
            if arg.dtype != np_dtype(want_dtype):
                raise TileRuntimeError(
                    f"argument {param.name}: expected dtype {want_dtype}, got {_dtype_name(arg.dtype)}"
                )
            if arg.ndim != len(param.shape):
                raise TileRuntimeError(
                    f"argument {param.name}: expected {len(param.shape)} dimensions, got shape {arg.shape}"
                )
            for axis, (want_dim, got) in enumerate(zip(want_shape, arg.shape)):
                if isinstance(want_dim, N.Var):
                    seen = dims.setdefault(want_dim.name, got)
                    if seen != got:
                        raise TileRuntimeError(
                            f"argument {param.name}: dimension {axis} is {want_dim.name}={got}, but "
                            f"{want_dim.name}={seen} from an earlier argument"
                        )
                elif int(want_dim) != got:
                    raise TileRuntimeError(
                        f"argument {param.name}: expected shape {_shape_text(want_shape)}, got {arg.shape}"
                    )
            # the kernel reads an int4 tensor's values (it never writes one: passes/int4_storage.py)
            frame.bufs[param.name] = unpack_int4(arg) if is_int4(param.dtype) else arg
        for name, value in (bindings or {}).items():
            if name in dims and dims[name] != int(value):
                raise TileRuntimeError(
                    f"dynamic dimension {name}: bound to {value} but the arguments give {dims[name]}"
                )
            dims.setdefault(name, int(value))
        for name, var in self.dyn_names.items():
            if name not in dims:
                raise TileRuntimeError(f"dynamic dimension {name} is not bound by any argument")
            frame.vars[name] = scalar(var.dtype, dims[name])
        try:
            with np.errstate(all="ignore"):
                self.body(frame)
        except TileRuntimeError as err:
            # The report names the user's line; the interpreter's own frames would only hide it.
            raise err.with_traceback(None) from err.__cause__

    # -------------------------------------------------------------- statements

    def _body(self, stmts, sc: _Scope) -> Closure:
        compiled: List[Closure] = []
        spans = []
        for s in stmts:
            c = self._stmt(s, sc)
            if c is not None:
                compiled.append(c)
                spans.append(s.span)
        error = self._error

        if len(compiled) == 1:
            only, only_span = compiled[0], spans[0]

            def run_one(fr):
                try:
                    only(fr)
                except (TileRuntimeError, KeyboardInterrupt):
                    raise
                except Exception as ex:  # numpy errors become errors at the user's line
                    raise error(_describe(ex), only_span) from ex

            return run_one

        def run_body(fr):
            k = 0
            try:
                for k, c in enumerate(compiled):  # noqa: B007 (k names the failing statement below)
                    c(fr)
            except (TileRuntimeError, KeyboardInterrupt):
                raise
            except Exception as ex:
                raise error(_describe(ex), spans[k]) from ex

        return run_body

    def _stmt(self, s, sc: _Scope) -> Optional[Closure]:
        method = self.handler("_s_", s)
        if method is None:
            raise self._error(f"the interpreter does not know the statement {type(s).__name__}", s.span)
        tile_ops = (N.Copy, N.Fill, N.Gemm, N.Reduce, N.Cumsum, N.Alloc, N.Kernel, N.Parallel)
        if sc.in_parallel and isinstance(s, tile_ops):
            what = type(s).__name__
            raise self._error(
                f"{what} cannot appear inside a T.Parallel loop (tile operations run on whole tiles, at block level)",
                s.span,
            )
        if sc.in_parallel and isinstance(s, N.Atomic) and isinstance(s.value, N.Region):
            raise self._error("a tile atomic cannot appear inside a T.Parallel loop; use the element form", s.span)
        return method(self, s, sc)

    def _s_Hint(self, s, sc):
        return None  # hints change speed, never results

    def _s_Kernel(self, s: N.Kernel, sc):
        grid = [self._expr(g, sc) for g in s.grid]
        names = [v.name for v in s.block_vars]
        makers = [np_dtype(v.dtype).type for v in s.block_vars]
        body = self._body(s.body, sc)
        span = s.span
        error = self._error

        def run_kernel(fr):
            dims = [int(g(fr)) for g in grid]
            if any(d < 0 for d in dims):
                raise error(f"negative grid size {tuple(dims)}", span)
            blocks = 1
            for d in dims:
                blocks *= d
            if blocks > MAX_BLOCKS:
                raise error(
                    f"the grid {tuple(dims)} has {blocks} blocks; the reference interpreter runs at "
                    f"most {MAX_BLOCKS} per launch (one after another, in Python): use a smaller grid "
                    f"(more work per block) or a compiled backend",
                    span,
                )
            global_bufs = dict(fr.bufs)
            vars_ = fr.vars
            # Blocks run one after another, the first grid dimension fastest (CUDA's x).
            for rev in itertools.product(*[range(d) for d in reversed(dims)]):
                block = rev[::-1]
                for name, make, value in zip(names, makers, block):
                    vars_[name] = make(value)
                fr.block = block
                fr.bufs = dict(global_bufs)  # allocations belong to one block
                body(fr)
            fr.bufs = global_bufs

        return run_kernel

    def _s_Alloc(self, s: N.Alloc, sc):
        buf = s.buffer
        name, dt = buf.name, np_dtype(buf.dtype)
        fill = fill_value(buf.dtype)
        error = self._error
        span = s.span

        def check(shape) -> int:
            # estimated before allocating: a size beyond the free memory is the kernel's mistake,
            # said at its line, never an empty MemoryError (or the machine swapping)
            nbytes = dt.itemsize
            for n in shape:
                nbytes *= n
            if nbytes > _free_memory():
                raise error(
                    f"allocating {name} of shape {shape} ({buf.dtype}) needs {nbytes / 2**30:.1f} GiB, "
                    f"more than the {_free_memory() / 2**30:.1f} GiB of memory free",
                    span,
                )
            return nbytes

        def allocate(shape):
            nbytes = check(shape)
            try:
                return np.full(shape, fill, dt)
            except MemoryError:
                raise error(
                    f"out of memory allocating {name} of shape {shape} ({buf.dtype}, {nbytes / 2**30:.2f} GiB)", span
                ) from None

        static = tuple(d for d in buf.shape if isinstance(d, int))
        if len(static) == len(buf.shape):
            shape = static
            check(shape)  # once; every block then allocates directly

            def alloc(fr):
                fr.bufs[name] = np.full(shape, fill, dt)

            return alloc
        dims = [self._expr(d, sc) if isinstance(d, N.Expr) else (lambda fr, d=d: d) for d in buf.shape]

        def alloc_dynamic(fr):
            fr.bufs[name] = allocate(tuple(int(d(fr)) for d in dims))

        return alloc_dynamic

    def _s_Let(self, s: N.Let, sc: _Scope):
        value = self._as(s.value, s.var.dtype, sc)
        name = s.var.name
        if sc.in_parallel and self._varies(s.value, sc):
            sc.varying.add(name)

            def let_array(fr):
                v = value(fr)
                if isinstance(v, np.ndarray) and v.base is not None:
                    v = v.copy()  # a view of a buffer must not see later stores
                fr.vars[name] = v

            return let_array

        def let(fr):
            fr.vars[name] = value(fr)

        return let

    def _s_For(self, s: N.For, sc: _Scope):
        name = s.var.name
        make = np_dtype(s.var.dtype).type
        begin = self._as(s.begin, s.var.dtype, sc)
        extent = self._as(s.extent, s.var.dtype, sc)
        inner = sc.child()
        varying_bounds = sc.in_parallel and (self._varies(s.begin, sc) or self._varies(s.extent, sc))
        if varying_bounds:
            inner.varying.add(name)
        body = self._body(s.body, inner)
        if not varying_bounds:

            def loop(fr):
                b = int(begin(fr))
                vars_ = fr.vars
                for k in range(b, b + int(extent(fr))):
                    vars_[name] = make(k)
                    body(fr)

            return loop

        def masked_loop(fr):
            # Bounds differ per parallel element: run to the largest active extent, masking the rest.
            b, n = begin(fr), np.asarray(extent(fr))
            saved = fr.mask
            active = n if saved is None else np.where(saved, n, 0)
            steps = int(active.max()) if active.size else 0
            try:
                for t in range(steps):
                    fr.vars[name] = b + make(t)
                    live = n > t
                    fr.mask = live if saved is None else (saved & live)
                    body(fr)
            finally:
                fr.mask = saved

        return masked_loop

    def _s_Parallel(self, s: N.Parallel, sc: _Scope):
        extents = tuple(int(e) for e in s.extents)
        axes = {v.name: k for k, v in enumerate(s.vars)}
        index_arrays = []
        for k, v in enumerate(s.vars):
            shape = [1] * len(extents)
            shape[k] = extents[k]
            arr = np.arange(extents[k], dtype=np_dtype(v.dtype)).reshape(shape)
            arr.flags.writeable = False
            index_arrays.append((v.name, arr))
        inner = _Scope(axes, extents, varying=set(axes) | sc.varying)
        body = self._body(s.body, inner)

        def parallel(fr):
            vars_ = fr.vars
            for name, arr in index_arrays:
                vars_[name] = arr
            fr.space = extents
            fr.mask = None
            try:
                body(fr)
            finally:
                fr.space = None
                fr.mask = None

        return parallel

    def _s_While(self, s: N.While, sc: _Scope):
        cond = self._as(s.cond, "bool", sc)
        body = self._body(s.body, sc.child())

        def loop(fr):
            while cond(fr):
                body(fr)

        if not (sc.in_parallel and self._varies(s.cond, sc)):
            return loop

        def masked_loop(fr):
            # Each T.Parallel iteration (a thread of per-thread code) runs its own loop: iterate
            # while some active iteration's condition holds, the body masked to those; an
            # iteration whose condition failed once has left its loop for good.
            saved = fr.mask
            try:
                while True:
                    c = cond(fr)
                    if not isinstance(c, np.ndarray):
                        if not c:
                            break
                    else:
                        live = c if fr.mask is None else fr.mask & c
                        if not live.any():
                            break
                        fr.mask = live
                    body(fr)
            finally:
                fr.mask = saved

        return masked_loop

    def _s_If(self, s: N.If, sc: _Scope):
        cond = self._as(s.cond, "bool", sc)
        then_body = self._body(s.then_body, sc.child())
        else_body = self._body(s.else_body, sc.child()) if s.else_body else None

        if not (sc.in_parallel and self._varies(s.cond, sc)):

            def branch(fr):
                if cond(fr):
                    then_body(fr)
                elif else_body is not None:
                    else_body(fr)

            return branch

        def masked_branch(fr):
            c = cond(fr)
            if not isinstance(c, np.ndarray):
                if c:
                    then_body(fr)
                elif else_body is not None:
                    else_body(fr)
                return
            saved = fr.mask
            try:
                m = c if saved is None else saved & c
                if m.any():
                    fr.mask = m
                    then_body(fr)
                if else_body is not None:
                    m = ~c if saved is None else saved & ~c
                    if m.any():
                        fr.mask = m
                        else_body(fr)
            finally:
                fr.mask = saved

        return masked_branch

    # ---------------------------------------------------------- element stores

    def _s_Store(self, s: N.Store, sc: _Scope):
        buf = s.buffer
        name, span = buf.name, s.span
        value = self._as(s.value, buf.dtype, sc)
        index_fns = [self._as_index(i, sc) for i in s.indices]
        varies = sc.in_parallel and (any(self._varies(i, sc) for i in s.indices) or self._varies(s.value, sc))
        if not varies:
            check = self._scalar_checker(buf, span, s.indices)

            def store(fr):
                if fr.mask is not None and not np.any(fr.mask):
                    return
                arr = fr.bufs[name]
                idx = tuple([int(f(fr)) for f in index_fns])
                check(arr, idx, fr)
                arr[idx] = value(fr)

            return store

        general = self._general_store(s, index_fns, value)
        plan = self._slice_plan(s.indices, sc)
        if plan is None or sorted(a for a, _ in plan if a >= 0) != list(range(len(sc.extents))):
            return general
        # Every parallel axis appears once: the store is a (possibly transposed) slice assignment.
        extents = sc.extents
        view_axes = [a for a, _ in plan if a >= 0]
        perm = None if view_axes == sorted(view_axes) else tuple(view_axes)
        slicer = self._slicer(plan, extents)

        def slice_store(fr):
            arr = fr.bufs[name]
            key = slicer(fr, arr.shape)
            if key is None:
                return general(fr)
            v = value(fr)
            view = arr[key]
            # Without a transpose the view's shape is `extents`: assignment and copyto broadcast
            # the value and the mask to it themselves (np.broadcast_to first cost a third of a
            # store on small tiles).
            if perm is not None and isinstance(v, np.ndarray) and v.ndim:
                v = np.broadcast_to(v, extents).transpose(perm)
            mask = fr.mask
            if mask is None:
                view[...] = v
            else:
                m = mask if perm is None else np.broadcast_to(mask, extents).transpose(perm)
                np.copyto(view, v, casting="unsafe", where=m)

        return slice_store

    def _general_store(self, s: N.Store, index_fns, value):
        name, span = s.buffer.name, s.span
        raise_oob = self._oob_raiser(s.buffer, span, s.indices)

        def scatter(fr):
            arr = fr.bufs[name]
            parts = [f(fr) for f in index_fns] + [value(fr)]
            mask = fr.mask
            if mask is not None:
                parts.append(mask)
            parts = list(np.broadcast_arrays(*parts))
            m = parts.pop() if mask is not None else None
            v = parts.pop()
            bad = _bad_indices(arr, parts)
            if bad is not None:
                active = bad if m is None else bad & m
                if active.any():
                    raise_oob(fr, arr, parts, active)
            if m is not None:
                parts = [p[m] for p in parts]
                v = v[m]
            arr[tuple(parts)] = v

        return scatter

    # ---------------------------------------------------------- tile operations

    def _region(self, r: N.Region, sc: _Scope):
        """(buffer name, starts closure returning a list of ints, extents)."""
        fns = [self._as_index(s, sc) for s in r.starts]
        consts = [s for s in r.starts if isinstance(s, N.Const)]
        if len(consts) == len(r.starts):
            const = [int(s.value) for s in consts]

            def starts(fr):
                return const
        else:

            def starts(fr):
                return [int(f(fr)) for f in fns]

        return r.buffer.name, starts, tuple(int(e) for e in r.extents)

    def _check_pairing(self, a: N.Region, b: N.Region, span, what: str):
        if a.squeezed_shape() != b.squeezed_shape():
            raise self._error(
                f"{what}: the regions have shapes {tuple(a.extents)} and {tuple(b.extents)}, "
                f"which do not pair (after squeezing unit dimensions)",
                span,
            )

    def _s_Copy(self, s: N.Copy, sc):
        self._check_pairing(s.src, s.dst, s.span, "T.copy")
        sname, sstarts, sext = self._region(s.src, sc)
        dname, dstarts, dext = self._region(s.dst, sc)
        reshape = sext != dext
        ddt = s.dst.buffer.dtype
        needs_convert = s.src.buffer.dtype != ddt

        def copy(fr):
            tile = read_tile(fr.bufs[sname], sstarts(fr), sext)
            if reshape:
                tile = tile.reshape(dext)
            if needs_convert:
                tile = convert(tile, ddt)
            write_tile(fr.bufs[dname], dstarts(fr), dext, tile)

        return copy

    def _s_Fill(self, s: N.Fill, sc):
        dname, dstarts, dext = self._region(s.dst, sc)
        value = self._as(s.value, s.dst.buffer.dtype, sc)

        def fill(fr):
            write_tile(fr.bufs[dname], dstarts(fr), dext, value(fr))

        return fill

    def _s_Gemm(self, s: N.Gemm, sc):
        regions = []
        for r, label in ((s.a, "A"), (s.b, "B"), (s.c, "C")):
            name, starts, ext = self._region(r, sc)
            if len(r.matrix_shape()) != 2:  # the same matrix axes as the type checker and backends
                raise self._error(f"T.gemm: {label} must be a 2-D tile, got extents {ext}", s.span)
            regions.append((name, starts, ext))
        (an, ast, aext), (bn, bst, bext), (cn, cst, cext) = regions
        a2, b2, c2 = s.a.matrix_shape(), s.b.matrix_shape(), s.c.matrix_shape()
        m, ka = (a2[1], a2[0]) if s.transpose_a else a2
        kb, n = (b2[1], b2[0]) if s.transpose_b else b2
        if ka != kb or (m, n) != tuple(c2):
            raise self._error(
                f"T.gemm: shapes do not agree: A {a2}{' (transposed)' if s.transpose_a else ''}, "
                f"B {b2}{' (transposed)' if s.transpose_b else ''}, C {c2}",
                s.span,
            )
        acc = _acc_dtype(s.a.buffer.dtype, s.b.buffer.dtype)
        cdt = s.c.buffer.dtype
        ta, tb, clear = s.transpose_a, s.transpose_b, s.clear_accum

        def gemm(fr):
            a = read_tile(fr.bufs[an], ast(fr), aext).reshape(a2).astype(acc)
            b = read_tile(fr.bufs[bn], bst(fr), bext).reshape(b2).astype(acc)
            prod = (a.T if ta else a) @ (b.T if tb else b)  # exact products for <= fp32 inputs
            carr = fr.bufs[cn]
            cstarts = cst(fr)
            if not clear:
                prod += read_tile(carr, cstarts, cext).reshape(c2)
            write_tile(carr, cstarts, cext, convert(prod, cdt).reshape(cext))

        return gemm

    def _s_Reduce(self, s: N.Reduce, sc):
        src, dst, dim, kind = s.src, s.dst, s.dim, s.kind
        sname, dname = src.name, dst.name
        if dim < 0:
            dim += src.ndim  # Python-style: -1 is the last dimension
        if not 0 <= dim < src.ndim:
            raise self._error(f"reduce dim {dim} is out of range for {sname} with {src.ndim} dimensions", s.span)
        sshape = src.static_shape()
        dshape = dst.static_shape()
        if sshape is not None and dshape is not None:
            want = sshape[:dim] + sshape[dim + 1 :]
            keep = sshape[:dim] + (1,) + sshape[dim + 1 :]
            if dshape not in (want, keep) and int(np.prod(dshape)) != int(np.prod(want)):
                raise self._error(f"T.reduce_{kind}: {dname} has shape {dshape}, expected {want}", s.span)
        acc = _acc_dtype(src.dtype, dst.dtype)
        ddt, clear = dst.dtype, s.clear
        absolute = kind in ("abssum", "absmax")
        combine = {"sum": np.add, "abssum": np.add, "max": np.maximum, "absmax": np.maximum, "min": np.minimum}[kind]

        def reduce(fr):
            x = fr.bufs[sname].astype(acc)
            if absolute:
                x = np.abs(x)
            r = combine.reduce(x, axis=dim)
            darr = fr.bufs[dname]
            r = r.reshape(darr.shape)
            if not clear:
                r = combine(darr.astype(acc), r)
            darr[...] = convert(r, ddt)

        return reduce

    def _s_Cumsum(self, s: N.Cumsum, sc):
        sname, dname, dim, reverse = s.src.name, s.dst.name, s.dim, s.reverse
        if dim < 0:
            dim += s.src.ndim
        if not 0 <= dim < s.src.ndim:
            raise self._error(f"cumsum dim {dim} is out of range for {sname}", s.span)
        acc = _acc_dtype(s.src.dtype, s.dst.dtype)
        ddt = s.dst.dtype

        def cumsum(fr):
            x = fr.bufs[sname].astype(acc)
            if reverse:
                r = np.flip(np.cumsum(np.flip(x, dim), axis=dim), dim)
            else:
                r = np.cumsum(x, axis=dim)
            darr = fr.bufs[dname]
            darr[...] = convert(r.reshape(darr.shape), ddt)

        return cumsum

    def _s_Atomic(self, s: N.Atomic, sc: _Scope):
        ufunc = _ATOMIC_UFUNC[s.kind]
        dname = s.dst.buffer.name
        ddt = s.dst.buffer.dtype
        if isinstance(s.value, N.Region):
            self._check_pairing(s.value, s.dst, s.span, f"T.atomic_{s.kind}")
            vname, vstarts, vext = self._region(s.value, sc)
            _, dstarts, dext = self._region(s.dst, sc)

            def atomic_tile(fr):
                val = convert(read_tile(fr.bufs[vname], vstarts(fr), vext).reshape(dext), ddt)
                part = tile_view(fr.bufs[dname], dstarts(fr), dext)
                if part is None:
                    return  # entirely outside: dropped
                view, inside = part
                if inside is not None:
                    val = val[inside]
                view[...] = ufunc(view, val)

            return atomic_tile

        if any(e != 1 for e in s.dst.extents):
            raise self._error(
                f"T.atomic_{s.kind} of a scalar value needs a single-element destination, "
                f"got extents {tuple(s.dst.extents)}",
                s.span,
            )
        value = self._as(s.value, ddt, sc)
        index_fns = [self._as_index(i, sc) for i in s.dst.starts]
        buf = s.dst.buffer
        if not sc.in_parallel:
            check = self._scalar_checker(buf, s.span, s.dst.starts)

            def atomic_scalar(fr):
                arr = fr.bufs[dname]
                idx = tuple([int(f(fr)) for f in index_fns])
                check(arr, idx, fr)
                arr[idx] = ufunc(arr[idx], value(fr))

            return atomic_scalar

        raise_oob = self._oob_raiser(buf, s.span, s.dst.starts)

        def atomic_elements(fr):
            # Each parallel iteration performs one update; duplicates accumulate (ufunc.at).
            arr = fr.bufs[dname]
            space = fr.space
            parts = [np.broadcast_to(f(fr), space) for f in index_fns]
            v = np.broadcast_to(value(fr), space)
            m = None if fr.mask is None else np.broadcast_to(fr.mask, space)
            bad = _bad_indices(arr, parts)
            if bad is not None:
                active = bad if m is None else bad & m
                if active.any():
                    raise_oob(fr, arr, parts, active)
            if m is not None:
                parts = [p[m] for p in parts]
                v = v[m]
            else:
                parts = [p.reshape(-1) for p in parts]
                v = v.reshape(-1)
            ufunc.at(arr, tuple(parts), v)

        return atomic_elements

    def _s_Print(self, s: N.Print, sc: _Scope):
        msg = s.msg
        if isinstance(s.value, N.Buffer):
            bname = s.value.name

            def print_buffer(fr):
                _emit(fr.block, msg, f"{bname} =\n{fr.bufs[bname]}")

            return print_buffer
        value = self._expr(s.value, sc)

        def print_value(fr):
            v = value(fr)
            if fr.space is not None and isinstance(v, np.ndarray):
                v = np.broadcast_to(v, fr.space)
                if fr.mask is not None:
                    v = v[np.broadcast_to(fr.mask, fr.space)]
            elif fr.mask is not None and not np.any(fr.mask):
                return
            _emit(fr.block, msg, v)

        return print_value

    # -------------------------------------------------------------- expressions

    def _varies(self, e, sc: _Scope) -> bool:
        """Whether `e` can differ between iterations of the enclosing T.Parallel."""
        if not sc.varying:
            return False
        for node in walk(e):
            if isinstance(node, N.Var) and node.name in sc.varying:
                return True
        return False

    def _as(self, e, dtype: str, sc: _Scope) -> Closure:
        f = self._expr(e, sc)
        if e.dtype == dtype:
            return f

        def cast(fr):
            return convert(f(fr), dtype)

        return cast

    def _as_index(self, e, sc: _Scope) -> Closure:
        return self._expr(e, sc)

    def _expr(self, e, sc: _Scope) -> Closure:
        method = self.handler("_e_", e)
        if method is None:
            raise self._error(
                f"the interpreter does not know the expression {type(e).__name__}", getattr(e, "span", None)
            )
        return method(self, e, sc)

    def _e_Const(self, e: N.Const, sc):
        v = scalar(e.dtype, e.value)

        def const(fr):
            return v

        return const

    def _e_Var(self, e: N.Var, sc):
        name, span, error = e.name, e.span, self._error

        def var(fr):
            try:
                return fr.vars[name]
            except KeyError:
                raise error(f"variable {name} is used before it has a value", span) from None

        return var

    def _e_Cast(self, e: N.Cast, sc):
        return self._as(e.value, e.dtype, sc)

    def _e_BinOp(self, e: N.BinOp, sc):
        op = e.op
        if op in ("and", "or"):
            return self._logic(e, sc)
        if op in _COMPARE:
            work = promote(e.a.dtype, e.b.dtype)
        else:
            work = e.dtype
        bool_arith = work == "bool" and op in ("+", "-", "*", "/", "//", "%", "pow", "min", "max")
        if bool_arith:
            work = "int32"
        fa, fb = self._as(e.a, work, sc), self._as(e.b, work, sc)
        fn: Callable[[Any, Any], Any]
        if op in _COMPARE:
            fn = _COMPARE[op]
        elif op == "/":
            fn = operator.truediv if is_float(work) else _int_truediv
        elif op == "pow":
            fn = np.power if is_float(work) else _int_pow
        elif op in _ARITH:
            fn = _ARITH[op]
        else:
            raise self._error(f"the interpreter does not know the operator {op!r}", e.span)
        if bool_arith or (e.dtype != work and op not in _COMPARE):
            out = e.dtype

            def binop_convert(fr):
                return convert(fn(fa(fr), fb(fr)), out)

            return binop_convert

        def binop(fr):
            return fn(fa(fr), fb(fr))

        return binop

    def _logic(self, e: N.BinOp, sc):
        fa, fb = self._as(e.a, "bool", sc), self._as(e.b, "bool", sc)
        is_and = e.op == "and"

        def logic(fr):
            x = fa(fr)
            if not isinstance(x, np.ndarray):
                if is_and:
                    return fb(fr) if x else x
                return x if x else fb(fr)
            # Vector form: evaluate the right side only where it decides the result.
            saved = fr.mask
            live = x if is_and else ~x
            fr.mask = live if saved is None else saved & live
            try:
                y = fb(fr)
            finally:
                fr.mask = saved
            return np.logical_and(x, y) if is_and else np.logical_or(x, y)

        return logic

    def _e_UnaryOp(self, e: N.UnaryOp, sc):
        if e.op == "not":
            fa = self._as(e.a, "bool", sc)
            return lambda fr: np.logical_not(fa(fr))
        if e.op == "neg":
            if e.dtype == "bool":
                fa = self._as(e.a, "bool", sc)
                return lambda fr: fa(fr)  # -True is nonzero, so it converts back to True
            fa = self._as(e.a, e.dtype, sc)
            return lambda fr: operator.neg(fa(fr))
        if e.op == "~":
            fa = self._as(e.a, e.dtype, sc)
            return lambda fr: np.invert(fa(fr))
        raise self._error(f"the interpreter does not know the unary operator {e.op!r}", e.span)

    def _e_Call(self, e: N.Call, sc):
        if e.func not in _MATH:
            raise self._error(f"the interpreter does not know the function {e.func!r}", e.span)
        if len(e.args) != 1:
            raise self._error(f"T.{e.func} takes one argument, got {len(e.args)}", e.span)
        fn = _MATH[e.func]
        out = e.dtype
        if out in ("float32", "float64"):
            fa = self._as(e.args[0], out, sc)
            return lambda fr: fn(fa(fr))
        if out in ("float16", "bfloat16"):
            # Evaluate in float32 and round once (numpy's half loops do the same).
            fa = self._as(e.args[0], "float32", sc)
            return lambda fr: convert(fn(fa(fr)), out)
        fa = self._as(e.args[0], out, sc)
        if e.func == "abs":
            return lambda fr: np.abs(fa(fr))
        if e.func in ("floor", "ceil"):
            return fa  # integers are already whole
        return lambda fr: convert(fn(np.asarray(fa(fr), dtype=np.float64)), out)

    def _e_Select(self, e: N.Select, sc):
        fc = self._as(e.cond, "bool", sc)
        fa, fb = self._as(e.a, e.dtype, sc), self._as(e.b, e.dtype, sc)

        def select(fr):
            c = fc(fr)
            if not isinstance(c, np.ndarray):
                return fa(fr) if c else fb(fr)
            saved = fr.mask
            try:
                fr.mask = c if saved is None else saved & c
                x = fa(fr)
                fr.mask = ~c if saved is None else saved & ~c
                y = fb(fr)
            finally:
                fr.mask = saved
            return np.where(c, x, y)

        return select

    def _e_Load(self, e: N.Load, sc: _Scope):
        buf = e.buffer
        name, span = buf.name, e.span
        index_fns = [self._as_index(i, sc) for i in e.indices]
        if len(index_fns) != buf.ndim:
            raise self._error(f"{name} has {buf.ndim} dimensions but is indexed with {len(index_fns)}", span)
        convert_to = e.dtype if e.dtype != buf.dtype else None
        load = self._load_closure(e, sc, index_fns)
        if convert_to is None:
            return load
        return lambda fr: convert(load(fr), convert_to)

    def _load_closure(self, e: N.Load, sc: _Scope, index_fns):
        buf = e.buffer
        name, span = buf.name, e.span
        if not (sc.in_parallel and any(self._varies(i, sc) for i in e.indices)):
            check = self._scalar_checker(buf, span, e.indices)
            zero = scalar(buf.dtype, 0)
            if len(index_fns) == 1:
                (f0,) = index_fns

                def load1(fr):
                    arr = fr.bufs[name]
                    i = int(f0(fr))
                    if 0 <= i < arr.shape[0]:
                        return arr[i]
                    if fr.mask is not None and not np.any(fr.mask):
                        return zero
                    check(arr, (i,), fr)

                return load1

            def load(fr):
                arr = fr.bufs[name]
                idx = tuple([int(f(fr)) for f in index_fns])
                for i, n in zip(idx, arr.shape):
                    if not 0 <= i < n:
                        if fr.mask is not None and not np.any(fr.mask):
                            return zero  # no element is active: nothing is read
                        check(arr, idx, fr)
                return arr[idx]

            return load

        raise_oob = self._oob_raiser(buf, span, e.indices)

        def gather(fr):
            arr = fr.bufs[name]
            parts = list(np.broadcast_arrays(*[f(fr) for f in index_fns]))
            mask = fr.mask
            bad = _bad_indices(arr, parts)
            if bad is not None:
                active = bad if mask is None else bad & mask
                if active.any():
                    raise_oob(fr, arr, parts, active)
                # Masked-off elements are never used; read element 0 in their place.
                bad_full = np.broadcast_to(bad, parts[0].shape)
                parts = [np.where(bad_full, 0, p) for p in parts]
            return arr[tuple(parts)]

        plan = self._slice_plan(e.indices, sc)
        if plan is None:
            return gather
        view_axes = [a for a, _ in plan if a >= 0]
        order = sorted(range(len(view_axes)), key=lambda k: view_axes[k])
        perm = None if order == list(range(len(view_axes))) else tuple(order)
        present = set(view_axes)
        nd = len(sc.extents)
        expand = None if len(present) == nd else tuple(slice(None) if a in present else None for a in range(nd))
        slicer = self._slicer(plan, sc.extents)

        def slice_load(fr):
            arr = fr.bufs[name]
            key = slicer(fr, arr.shape)
            if key is None:
                return gather(fr)
            v = arr[key]
            if perm is not None:
                v = v.transpose(perm)
            if expand is not None:
                v = v[expand]
            return v

        return slice_load

    # ---------------------------------------------------------- index helpers

    def _slice_plan(self, indices, sc: _Scope):
        """Per index: (axis, offset closure) for `pvar + invariant`, (-1, closure) for invariant.

        None when some index is another function of the parallel variables, or
        a parallel variable is used twice (a diagonal): those need a gather.
        """
        plan, used = [], set()
        for ix in indices:
            if not self._varies(ix, sc):
                plan.append((-1, self._as_index(ix, sc)))
                continue
            axis, offset = self._affine(ix, sc)
            if axis is None or axis in used:
                return None
            used.add(axis)
            plan.append((axis, offset))
        return plan

    def _affine(self, ix, sc: _Scope):
        axes = sc.axes
        if axes is None:  # not inside a T.Parallel: no axis to map to
            return None, None
        if isinstance(ix, N.Var) and ix.name in axes:
            return axes[ix.name], None
        if isinstance(ix, N.BinOp) and ix.op in ("+", "-"):
            a, b = ix.a, ix.b
            if isinstance(a, N.Var) and a.name in axes and not self._varies(b, sc):
                f = self._as_index(b, sc)
                if ix.op == "+":
                    return axes[a.name], f
                return axes[a.name], (lambda fr: -int(f(fr)))
            if ix.op == "+" and isinstance(b, N.Var) and b.name in axes and not self._varies(a, sc):
                return axes[b.name], self._as_index(a, sc)
        return None, None

    @staticmethod
    def _slicer(plan, extents):
        """A function (frame, buffer shape) -> numpy key, or None when the slice leaves the buffer."""
        steps = [(axis, off, extents[axis] if axis >= 0 else 1) for axis, off in plan]
        if all(axis >= 0 and off is None for axis, off, _ in steps):
            # Every index is a bare parallel variable: the key depends on the buffer's shape only.
            keys: Dict[Tuple[int, ...], Optional[tuple]] = {}

            def shape_slicer(fr, shape):
                key = keys.get(shape, keys)
                if key is keys:
                    key = keys[shape] = (
                        None
                        if any(ext > n for (_, _, ext), n in zip(steps, shape))
                        else tuple(slice(0, ext) for _, _, ext in steps)
                    )
                return key

            return shape_slicer

        def slicer(fr, shape):
            key: List[Union[int, slice]] = []
            for (axis, off, ext), n in zip(steps, shape):
                o = int(off(fr)) if off is not None else 0
                if axis >= 0:
                    if o < 0 or o + ext > n:
                        return None
                    key.append(slice(o, o + ext))
                else:
                    if o < 0 or o >= n:
                        return None
                    key.append(o)
            return tuple(key)

        return slicer

    def _scalar_checker(self, buf: N.Buffer, span, index_exprs=()):
        name, error = buf.name, self._error
        names = _var_names(index_exprs)

        def check(arr, idx, fr):
            for axis, (i, n) in enumerate(zip(idx, arr.shape)):
                if not 0 <= i < n:
                    raise error(
                        f"index out of bounds: {name}[{', '.join(str(int(k)) for k in idx)}] but {name} "
                        f"has shape {tuple(arr.shape)} (dimension {axis} index {int(i)} is outside "
                        f"[0, {n})){_context(fr, names)}",
                        span,
                    )

        return check

    def _oob_raiser(self, buf: N.Buffer, span, index_exprs=()):
        name, error = buf.name, self._error
        names = _var_names(index_exprs)

        def raise_oob(fr, arr, parts, bad):
            *parts, bad = np.broadcast_arrays(*parts, bad)
            where = tuple(np.argwhere(bad)[0])
            idx = [int(p[where]) for p in parts]
            axis = next(k for k, (i, n) in enumerate(zip(idx, arr.shape)) if not 0 <= i < n)
            raise error(
                f"index out of bounds: {name}[{', '.join(map(str, idx))}] but {name} has shape "
                f"{tuple(arr.shape)} (dimension {axis} index {idx[axis]} is outside [0, {arr.shape[axis]}))"
                f"{_context(fr, names, where, bad.shape)}",
                span,
            )

        return raise_oob


def _var_names(exprs) -> Tuple[str, ...]:
    """Names of the variables in `exprs`, in first-use order (for error messages)."""
    seen: Dict[str, None] = {}
    for e in exprs:
        for node in walk(e):
            if isinstance(node, N.Var):
                seen.setdefault(node.name, None)
    return tuple(seen)


def _context(fr, names, where=None, shape=None) -> str:
    """' where i=3, k=1, in block (0, 2)': the values that produced a bad index."""
    values = []
    for n in names:
        v = fr.vars.get(n)
        if v is None:
            continue
        if isinstance(v, np.ndarray):
            if where is None or v.ndim > len(shape):
                continue
            v = np.broadcast_to(v, np.broadcast_shapes(v.shape, shape))[where]
        values.append(f"{n}={v}")
    text = f" where {', '.join(values)}," if values else ""
    return f"{text} in block {tuple(int(b) for b in fr.block)}"


def _bad_indices(arr, parts):
    """None when every index is inside `arr`, else the bool array of bad elements."""
    bad = None
    for p, n in zip(parts, arr.shape):
        if p.size and (p.min() < 0 or p.max() >= n):
            b = (p < 0) | (p >= n)
            bad = b if bad is None else bad | b
    return bad


def _emit(block, msg, value) -> None:
    """T.print output: the block index, the message, the value."""
    head = f"[block {tuple(int(b) for b in block)}]"
    if msg:
        head += f" {msg}"
    text = str(value)
    sep = "\n" if "\n" in text else " "
    sys.stdout.write(f"{head}:{sep}{text}\n")


def _describe(ex: Exception) -> str:
    return f"{type(ex).__name__}: {ex}"


def _dtype_name(dt) -> str:
    try:
        return tile_dtype(dt)
    except KeyError:
        return str(dt)


def _shape_text(shape) -> str:
    return "(" + ", ".join(s.name if isinstance(s, N.Var) else str(s) for s in shape) + ")"
