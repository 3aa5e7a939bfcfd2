"""Type and shape checking of a PrimFunc, with diagnostics at the culprit.

Guarantee: a function that passes `check(func)` is well formed for every later
pass, the interpreter and the backends:

* parameters are global tensors with positive static dims or declared dynamic
  dims; shared/fragment/local/var buffers are allocated only inside the
  T.Kernel (never outside, never inside a T.Parallel) and are never parameters;
* every buffer and variable is defined before use, in scope, and names are unique;
* regions and element accesses have one index per dimension, integer indices,
  positive static extents; constant indices lie inside the buffer (element
  accesses of any buffer, tile regions of non-global buffers; tile regions of
  global tensors may hang over the edge: those reads give 0, writes drop);
* T.copy sides have equal squeezed shapes; T.gemm shapes are (M,K)x(K,N)->(M,N)
  after transposes, inputs share one dtype and the accumulator is one the
  inputs allow (see GEMM_ACCUMULATORS), C is not a global tensor;
* reductions/cumsum dims are in range and shapes agree; atomics target global
  memory; tile operations are not placed inside T.Parallel.

Every problem raises TileCompileError(message, span, func.source) with the span
of the most specific node available (an index, a region, then the statement).
The frontend calls `check(func)` at the end of parsing.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple, TypeGuard

from ..diagnostics import TileCompileError
from ..ir import nodes as N
from ..ir.span import Span
from ..ir.types import DTYPES, FLOAT_DTYPES, INT_DTYPES, is_float
from .simplify import as_int

# input dtype -> accumulator dtypes T.gemm accepts (never narrower than the inputs)
GEMM_ACCUMULATORS: Dict[str, Tuple[str, ...]] = {
    "float16": ("float16", "float32", "float64"),
    "bfloat16": ("bfloat16", "float32", "float64"),
    "float32": ("float32", "float64"),
    "float64": ("float64",),
    "int8": ("int32", "int64"),
    "uint8": ("int32", "int64"),
    "int16": ("int32", "int64"),
    "int32": ("int32", "int64"),
    "int64": ("int64",),
    # fp8 products are exact in float32 (docs/semantics.md "fp8")
    "float8_e4m3fn": ("float32", "float64"),
    "float8_e5m2": ("float32", "float64"),
    # int4 tiles multiply as int8 ones (docs/semantics.md "int4")
    "int4": ("int32", "int64"),
}

BLOCK_LOCAL_SCOPES = ("shared", "fragment", "local", "var")
TILE_OPS = (N.Copy, N.Fill, N.Gemm, N.Reduce, N.Cumsum)
_OP_NAMES = {
    N.Copy: "T.copy",
    N.Fill: "T.fill",
    N.Gemm: "T.gemm",
    N.Reduce: "T.reduce",
    N.Cumsum: "T.cumsum",
    N.Atomic: "T.atomic",
    N.Alloc: "T.alloc",
}
_ALLOC_NAMES = {
    "shared": "T.alloc_shared",
    "fragment": "T.alloc_fragment",
    "local": "T.alloc_local",
    "var": "T.alloc_var",
    "global": "a global allocation",
}


def _has_line(span: object) -> TypeGuard[Span]:
    return span is not None and getattr(span, "line", 0) > 0


def _fmt_shape(shape: Sequence) -> str:
    inner = ", ".join(s.name if isinstance(s, N.Var) else str(s) for s in shape)
    return f"({inner}{',' if len(shape) == 1 else ''})"


def _op_name(stmt) -> str:
    if isinstance(stmt, N.Reduce):
        return f"T.reduce_{stmt.kind}"
    if isinstance(stmt, N.Atomic):
        return f"T.atomic_{stmt.kind}"
    if isinstance(stmt, N.Fill):
        return "T.fill"
    return _OP_NAMES.get(type(stmt), type(stmt).__name__)


class _Checker:
    def __init__(self, func: N.PrimFunc):
        self.func = func
        self.buffers: List[Dict[str, N.Buffer]] = [{}]
        self.vars: List[Dict[str, N.Var]] = [{}]
        self.all_names: Dict[str, N.Span] = {}
        self.stmt: Optional[N.Stmt] = None
        self.in_kernel = False
        self.in_parallel = False

    # -- errors

    def error(self, message: str, *nodes) -> TileCompileError:
        span = None
        for n in nodes:
            s = n if isinstance(n, N.Span) else getattr(n, "span", None)
            if _has_line(s):
                span = s
                break
        if span is None:
            for fallback in (self.stmt, self.func):
                if fallback is not None and _has_line(fallback.span):
                    span = fallback.span
                    break
        return TileCompileError(message, span, self.func.source)

    # -- scopes

    def push(self):
        self.buffers.append({})
        self.vars.append({})

    def pop(self):
        self.buffers.pop()
        self.vars.pop()

    def declare_name(self, name: str, node) -> None:
        if name in self.all_names:
            raise self.error(f"name {name!r} is defined twice; names must be unique in a kernel", node)
        self.all_names[name] = getattr(node, "span", N.NO_SPAN)

    def define_buffer(self, buf: N.Buffer, node) -> None:
        self.declare_name(buf.name, node)
        self.buffers[-1][buf.name] = buf

    def define_var(self, var: N.Var, node) -> None:
        self.declare_name(var.name, node)
        if var.dtype not in DTYPES:
            raise self.error(f"variable {var.name} has unknown dtype {var.dtype!r}", var, node)
        self.vars[-1][var.name] = var

    def lookup_buffer(self, buf: N.Buffer, use) -> N.Buffer:
        for scope in reversed(self.buffers):
            found = scope.get(buf.name)
            if found is not None:
                if found != buf:
                    raise self.error(
                        f"buffer {buf.name} is used with shape {_fmt_shape(buf.shape)} "
                        f"{buf.dtype} {buf.scope} but was declared as "
                        f"{_fmt_shape(found.shape)} {found.dtype} {found.scope}",
                        use,
                    )
                return found
        if buf.scope in BLOCK_LOCAL_SCOPES and not self.in_kernel:
            raise self.error(f"{buf.scope} buffer {buf.name} cannot be used outside T.Kernel", use)
        raise self.error(f"buffer {buf.name} is used before it is defined (or outside its scope)", use)

    def lookup_var(self, var: N.Var) -> None:
        for scope in reversed(self.vars):
            if var.name in scope:
                return
        raise self.error(f"variable {var.name} is used before it is defined (or outside its scope)", var)

    # -- expressions

    def expr(self, e: N.Expr, role: str = "expression") -> None:
        if not isinstance(e, N.Expr):
            raise self.error(f"{role} must be an expression, got {type(e).__name__}", e)
        if e.dtype not in DTYPES:
            raise self.error(f"{role} has unknown dtype {e.dtype!r}", e)
        if isinstance(e, N.Const):
            if isinstance(e.value, float) and not is_float(e.dtype):
                raise self.error(f"constant {e.value!r} is a float but has dtype {e.dtype}", e)
        elif isinstance(e, N.Var):
            self.lookup_var(e)
        elif isinstance(e, N.BinOp):
            self.expr(e.a, role)
            self.expr(e.b, role)
            if e.op not in N.BINARY_OPS:
                raise self.error(f"unknown operator {e.op!r}", e)
            if e.op in N.COMPARE_OPS + N.LOGIC_OPS and e.dtype != "bool":
                raise self.error(f"a comparison gives bool, but this one is typed {e.dtype}", e)
            if e.op in ("&", "|", "^", "<<", ">>"):
                for side in (e.a, e.b):
                    if is_float(side.dtype):
                        raise self.error(f"operator {e.op} needs integer operands, got {side.dtype}", side, e)
        elif isinstance(e, N.UnaryOp):
            self.expr(e.a, role)
            if e.op not in N.UNARY_OPS:
                raise self.error(f"unknown unary operator {e.op!r}", e)
            if e.op == "~" and is_float(e.a.dtype):
                raise self.error(f"operator ~ needs an integer operand, got {e.a.dtype}", e)
        elif isinstance(e, N.Call):
            if e.func not in N.MATH_FUNCS:
                raise self.error(f"unknown math function T.{e.func}", e)
            if len(e.args) != 1:
                raise self.error(f"T.{e.func} takes one argument, got {len(e.args)}", e)
            self.expr(e.args[0], role)
            if e.func != "abs" and e.args[0].dtype not in FLOAT_DTYPES:
                raise self.error(
                    f"T.{e.func} needs a float argument, got {e.args[0].dtype} (use T.cast first)", e.args[0], e
                )
        elif isinstance(e, N.Cast):
            self.expr(e.value, role)
        elif isinstance(e, N.Select):
            self.expr(e.cond, "condition")
            self.expr(e.a, role)
            self.expr(e.b, role)
            if is_float(e.cond.dtype):
                raise self.error(f"T.if_then_else condition must be bool, got {e.cond.dtype}", e.cond, e)
        elif isinstance(e, N.Load):
            self.element_access(e.buffer, e.indices, e)
        else:
            raise self.error(f"unknown expression node {type(e).__name__}", e)

    def index(self, idx: N.Expr, buf: N.Buffer, dim: int, node) -> Optional[int]:
        """Check one index expression; return its value when it is a constant."""
        self.expr(idx, "index")
        if idx.dtype not in INT_DTYPES and idx.dtype != "bool":
            raise self.error(f"index {dim} of {buf.name} must be an integer, got {idx.dtype}", idx, node)
        return as_int(idx)

    def element_access(self, buf: N.Buffer, indices: Tuple[N.Expr, ...], node) -> None:
        buf = self.lookup_buffer(buf, node)
        if len(indices) != buf.ndim:
            raise self.error(
                f"{buf.name} has {buf.ndim} dimension{'s' if buf.ndim != 1 else ''} "
                f"but is indexed with {len(indices)} index{'es' if len(indices) != 1 else ''}",
                node,
            )
        for d, idx in enumerate(indices):
            value = self.index(idx, buf, d, node)
            size = buf.shape[d]
            if value is not None and isinstance(size, int) and not 0 <= value < size:
                raise self.error(
                    f"index {value} is out of range for dimension {d} of {buf.name} (size {size})", idx, node
                )

    def region(self, r: N.Region, stmt, role: str) -> N.Buffer:
        if not isinstance(r, N.Region):
            raise self.error(f"{_op_name(stmt)} {role} must be a buffer region, got {type(r).__name__}", stmt)
        buf = self.lookup_buffer(r.buffer, r)
        if len(r.starts) != buf.ndim or len(r.extents) != buf.ndim:
            raise self.error(
                f"region of {buf.name} has {len(r.starts)} starts and {len(r.extents)} "
                f"extents but {buf.name} has {buf.ndim} dimensions",
                r,
                stmt,
            )
        for d, (start, extent) in enumerate(zip(r.starts, r.extents)):
            if not isinstance(extent, int) or isinstance(extent, bool) or extent <= 0:
                raise self.error(
                    f"extent {extent!r} of dimension {d} of {buf.name} must be a positive constant", r, stmt
                )
            value = self.index(start, buf, d, r)
            size = buf.shape[d]
            if buf.scope == "global" or value is None or not isinstance(size, int):
                continue  # tile regions may hang over the edge of global tensors (predicated)
            if not 0 <= value < size:
                raise self.error(
                    f"index {value} is out of range for dimension {d} of {buf.name} (size {size})", start, r, stmt
                )
            if value + extent > size:
                raise self.error(
                    f"region {value}:{value + extent} exceeds dimension {d} of {buf.name} (size {size})", start, r, stmt
                )
        return buf

    # -- statements

    def body(self, body: Tuple[N.Stmt, ...], new_scope: bool = True) -> None:
        if new_scope:
            self.push()
        for s in body:
            self.statement(s)
        if new_scope:
            self.pop()

    def statement(self, s: N.Stmt) -> None:
        outer = self.stmt
        self.stmt = s
        try:
            method = getattr(self, "stmt_" + type(s).__name__, None)
            if method is None:
                raise self.error(f"unknown statement node {type(s).__name__}", s)
            if isinstance(s, TILE_OPS) and self.in_parallel:
                raise self.error(
                    f"{_op_name(s)} is a tile operation and cannot appear inside T.Parallel "
                    f"(T.Parallel bodies are per element)",
                    s,
                )
            if not self.in_kernel and not isinstance(s, (N.Kernel, N.Let, N.Hint)):
                if isinstance(s, N.Alloc):
                    raise self.error(
                        f"{_ALLOC_NAMES.get(s.buffer.scope, 'T.alloc')} buffer {s.buffer.name} "
                        f"must be allocated inside `with T.Kernel(...)`",
                        s,
                    )
                raise self.error(f"{_op_name(s)} must be inside `with T.Kernel(...)`", s)
            method(s)
        finally:
            self.stmt = outer

    def stmt_Alloc(self, s: N.Alloc) -> None:
        buf = s.buffer
        if buf.scope not in BLOCK_LOCAL_SCOPES:
            raise self.error(
                f"buffer {buf.name} has scope {buf.scope!r}; kernels allocate only "
                f"{', '.join(BLOCK_LOCAL_SCOPES)} buffers",
                s,
            )
        if self.in_parallel:
            raise self.error(
                f"{_ALLOC_NAMES[buf.scope]} cannot be used inside T.Parallel (allocate {buf.name} before the loop)", s
            )
        if buf.dtype not in DTYPES:
            raise self.error(f"buffer {buf.name} has unknown dtype {buf.dtype!r}", s)
        if not buf.shape:
            raise self.error(f"buffer {buf.name} needs at least one dimension", s)
        for d, size in enumerate(buf.shape):
            if not isinstance(size, int) or isinstance(size, bool):
                raise self.error(
                    f"dimension {d} of {buf.scope} buffer {buf.name} must be a constant, "
                    f"got {size.name if isinstance(size, N.Var) else size!r}",
                    s,
                )
            if size <= 0:
                raise self.error(f"dimension {d} of {buf.name} must be positive, got {size}", s)
        if buf.scope == "var" and tuple(buf.shape) != (1,):
            raise self.error(f"T.alloc_var buffer {buf.name} must have shape (1,)", s)
        self.define_buffer(buf, s)

    def stmt_Store(self, s: N.Store) -> None:
        self.element_access(s.buffer, s.indices, s)
        self.expr(s.value, "stored value")

    def stmt_Let(self, s: N.Let) -> None:
        self.expr(s.value, "value")
        self.define_var(s.var, s)

    def stmt_For(self, s: N.For) -> None:
        if s.kind not in N.LOOP_KINDS:
            raise self.error(f"unknown loop kind {s.kind!r}", s)
        for role, e in (("loop start", s.begin), ("loop extent", s.extent)):
            self.expr(e, role)
            if e.dtype not in INT_DTYPES:
                raise self.error(f"{role} must be an integer, got {e.dtype}", e, s)
        if s.num_stages < 0:
            raise self.error(f"num_stages must be >= 0, got {s.num_stages}", s)
        self.push()
        self.define_var(s.var, s)
        self.body(s.body)
        self.pop()

    def stmt_Parallel(self, s: N.Parallel) -> None:
        if len(s.vars) != len(s.extents):
            raise self.error(f"T.Parallel has {len(s.extents)} extents but binds {len(s.vars)} variables", s)
        for d, ext in enumerate(s.extents):
            if not isinstance(ext, int) or isinstance(ext, bool) or ext <= 0:
                raise self.error(f"T.Parallel extent {d} must be a positive constant, got {ext!r}", s)
        self.push()
        for v in s.vars:
            self.define_var(v, s)
        outer, self.in_parallel = self.in_parallel, True
        self.body(s.body)
        self.in_parallel = outer
        self.pop()

    def stmt_If(self, s: N.If) -> None:
        self.expr(s.cond, "condition")
        if is_float(s.cond.dtype):
            raise self.error(f"if condition must be bool, got {s.cond.dtype}", s.cond, s)
        self.body(s.then_body)
        self.body(s.else_body)

    def stmt_While(self, s: N.While) -> None:
        self.expr(s.cond, "condition")
        if s.cond.dtype != "bool":
            raise self.error(f"while condition must be bool, got {s.cond.dtype}", s.cond, s)
        # inside T.Parallel (per-thread code: frontend/simt.py) each iteration runs its own loop
        self.push()
        self.body(s.body)
        self.pop()

    def stmt_Kernel(self, s: N.Kernel) -> None:
        if self.in_kernel:
            raise self.error("T.Kernel cannot be nested inside another T.Kernel", s)
        if not s.grid:
            raise self.error("T.Kernel needs at least one grid extent", s)
        if len(s.block_vars) != len(s.grid):
            raise self.error(f"T.Kernel has {len(s.grid)} grid extents but binds {len(s.block_vars)} block indices", s)
        for d, g in enumerate(s.grid):
            self.expr(g, "grid extent")
            if g.dtype not in INT_DTYPES:
                raise self.error(f"grid extent {d} must be an integer, got {g.dtype}", g, s)
            value = as_int(g)
            if value is not None and value <= 0:
                raise self.error(f"grid extent {d} must be positive, got {value}", g, s)
        for t in s.threads:
            if not isinstance(t, int) or isinstance(t, bool) or t <= 0:
                raise self.error(f"threads must be positive constants, got {t!r}", s)
        self.push()
        for v in s.block_vars:
            self.define_var(v, s)
        self.in_kernel = True
        self.body(s.body)
        self.in_kernel = False
        self.pop()

    def stmt_Copy(self, s: N.Copy) -> None:
        src = self.region(s.src, s, "source")
        dst = self.region(s.dst, s, "destination")
        a, b = s.src.squeezed_shape(), s.dst.squeezed_shape()
        if a != b:
            raise self.error(
                f"T.copy shape mismatch: source {src.name} region has shape "
                f"{_fmt_shape(s.src.extents)} (squeezed {_fmt_shape(a)}) but destination "
                f"{dst.name} region has shape {_fmt_shape(s.dst.extents)} (squeezed "
                f"{_fmt_shape(b)})",
                s,
                s.dst,
            )

    def stmt_Fill(self, s: N.Fill) -> None:
        self.region(s.dst, s, "destination")
        self.expr(s.value, "fill value")

    def _gemm_shape(self, r: N.Region, buf: N.Buffer, role: str, s) -> Tuple[int, int]:
        shape = r.matrix_shape()  # batch-like unit dims of a 3-D stage buffer dropped
        if len(shape) != 2:
            raise self.error(f"T.gemm operand {role} ({buf.name}) must be 2-D, got shape {_fmt_shape(r.extents)}", r, s)
        return shape[0], shape[1]

    def stmt_Gemm(self, s: N.Gemm) -> None:
        bufs = {}
        for role, r in (("A", s.a), ("B", s.b), ("C", s.c)):
            bufs[role] = self.region(r, s, role)
        a, b, c = bufs["A"], bufs["B"], bufs["C"]
        for role, r in (("A", s.a), ("B", s.b)):
            if bufs[role].scope == "global":
                raise self.error(
                    f"T.gemm operand {role} ({bufs[role].name}) is a global tensor; copy it "
                    f"into a shared or fragment tile first",
                    r,
                    s,
                )
        if c.scope not in ("fragment", "local", "shared"):
            raise self.error(
                f"T.gemm accumulator C ({c.name}) must be a fragment, local or shared buffer, not a {c.scope} tensor",
                s.c,
                s,
            )
        am, ak = self._gemm_shape(s.a, a, "A", s)
        if s.transpose_a:
            am, ak = ak, am
        bk, bn = self._gemm_shape(s.b, b, "B", s)
        if s.transpose_b:
            bk, bn = bn, bk
        cm, cn = self._gemm_shape(s.c, c, "C", s)
        ta = "A^T" if s.transpose_a else "A"
        tb = "B^T" if s.transpose_b else "B"
        if ak != bk:
            raise self.error(
                f"T.gemm shape mismatch: {ta} ({a.name}) is ({am}, {ak}) and {tb} ({b.name}) "
                f"is ({bk}, {bn}): the inner dimensions {ak} and {bk} differ",
                s,
                s.b,
            )
        if (cm, cn) != (am, bn):
            raise self.error(
                f"T.gemm shape mismatch: {ta} @ {tb} is ({am}, {bn}) but C ({c.name}) is ({cm}, {cn})", s, s.c
            )
        if a.dtype != b.dtype:
            raise self.error(
                f"T.gemm dtype mismatch: A ({a.name}) is {a.dtype} but B ({b.name}) is "
                f"{b.dtype}; both inputs must have the same dtype",
                s.b,
                s,
            )
        allowed = GEMM_ACCUMULATORS.get(a.dtype)
        if allowed is None:
            raise self.error(f"T.gemm does not accept {a.dtype} inputs", s.a, s)
        if c.dtype not in allowed:
            raise self.error(
                f"T.gemm accumulator C ({c.name}) is {c.dtype} but {a.dtype} inputs "
                f"accumulate in {' or '.join(allowed)}",
                s.c,
                s,
            )

    def stmt_Reduce(self, s: N.Reduce) -> None:
        if s.kind not in N.REDUCE_KINDS:
            raise self.error(f"unknown reduction kind {s.kind!r}", s)
        src = self.lookup_buffer(s.src, s)
        dst = self.lookup_buffer(s.dst, s)
        name = _op_name(s)
        for buf, role in ((src, "source"), (dst, "destination")):
            if buf.scope == "global":
                raise self.error(f"{name} {role} {buf.name} is a global tensor; reduce a shared or fragment tile", s)
            if buf.dtype == "bool":
                raise self.error(f"{name} {role} {buf.name} is bool; reductions need numbers", s)
        if not -src.ndim <= s.dim < src.ndim:
            raise self.error(
                f"{name} dim={s.dim} is out of range for {src.name} with {src.ndim} "
                f"dimension{'s' if src.ndim != 1 else ''}",
                s,
            )
        dim = s.dim % src.ndim
        removed = tuple(src.shape[:dim]) + tuple(src.shape[dim + 1 :])
        kept = tuple(src.shape[:dim]) + (1,) + tuple(src.shape[dim + 1 :])
        ok = tuple(dst.shape) in (removed, kept) or (not removed and tuple(dst.shape) == (1,))
        if not ok:
            raise self.error(
                f"{name} shape mismatch: reducing {src.name} {_fmt_shape(src.shape)} over "
                f"dim {dim} gives {_fmt_shape(removed)} but {dst.name} is "
                f"{_fmt_shape(dst.shape)}",
                s,
            )

    def stmt_Cumsum(self, s: N.Cumsum) -> None:
        src = self.lookup_buffer(s.src, s)
        dst = self.lookup_buffer(s.dst, s)
        for buf, role in ((src, "source"), (dst, "destination")):
            if buf.scope == "global":
                raise self.error(f"T.cumsum {role} {buf.name} is a global tensor; scan a shared or fragment tile", s)
            if buf.dtype == "bool":
                raise self.error(f"T.cumsum {role} {buf.name} is bool; scans need numbers", s)
        if not -src.ndim <= s.dim < src.ndim:
            raise self.error(
                f"T.cumsum dim={s.dim} is out of range for {src.name} with {src.ndim} "
                f"dimension{'s' if src.ndim != 1 else ''}",
                s,
            )
        if tuple(src.shape) != tuple(dst.shape):
            raise self.error(
                f"T.cumsum shape mismatch: {src.name} is {_fmt_shape(src.shape)} but "
                f"{dst.name} is {_fmt_shape(dst.shape)}",
                s,
            )

    def stmt_Atomic(self, s: N.Atomic) -> None:
        if s.kind not in N.ATOMIC_KINDS:
            raise self.error(f"unknown atomic kind {s.kind!r}", s)
        name = _op_name(s)
        dst = self.region(s.dst, s, "destination")
        if dst.scope != "global":
            raise self.error(
                f"{name} needs a global tensor as destination, but {dst.name} is a {dst.scope} buffer", s.dst, s
            )
        if dst.dtype == "bool":
            raise self.error(f"{name} destination {dst.name} is bool; atomics need numbers", s.dst, s)
        if isinstance(s.value, N.Region):
            if self.in_parallel:
                raise self.error(f"tile-wide {name} cannot appear inside T.Parallel", s)
            src = self.region(s.value, s, "value")
            if s.value.squeezed_shape() != s.dst.squeezed_shape():
                raise self.error(
                    f"{name} shape mismatch: value {src.name} region is "
                    f"{_fmt_shape(s.value.squeezed_shape())} but destination {dst.name} "
                    f"region is {_fmt_shape(s.dst.squeezed_shape())}",
                    s,
                    s.value,
                )
        else:
            self.expr(s.value, "atomic value")
            if any(e != 1 for e in s.dst.extents):
                raise self.error(
                    f"{name} with a scalar value needs a single element destination, got "
                    f"region {_fmt_shape(s.dst.extents)} of {dst.name}",
                    s.dst,
                    s,
                )

    def stmt_Print(self, s: N.Print) -> None:
        if isinstance(s.value, N.Buffer):
            self.lookup_buffer(s.value, s)
        else:
            self.expr(s.value, "printed value")

    def stmt_Hint(self, s: N.Hint) -> None:
        for b in s.buffers:
            self.lookup_buffer(b, s)

    # -- function

    def scalar_params(self, f: N.PrimFunc, dyn) -> None:
        """Each scalar parameter: an int32 dynamic variable at its own place among the parameters."""
        positions = set()
        count = len(f.params) + len(f.scalar_params)
        for position, v in f.scalar_params:
            if dyn.get(v.name) != v or v.dtype != "int32":
                raise self.error(
                    f"scalar parameter {v.name} must be an int32 variable listed in {f.name}'s dynamic variables", v, f
                )
            if not 0 <= position < count or position in positions:
                raise self.error(
                    f"scalar parameter {v.name} has the position {position}, not a free "
                    f"place among the {count} parameters",
                    v,
                    f,
                )
            positions.add(position)

    def function(self) -> None:
        f = self.func
        dyn = {}
        for v in f.dyn_vars:
            if v.dtype not in INT_DTYPES:
                raise self.error(f"dynamic dimension {v.name} must be an integer, got {v.dtype}", v, f)
            self.define_var(v, v)
            dyn[v.name] = v
        for p in f.params:
            if not isinstance(p, N.Buffer):
                raise self.error(f"parameter {p!r} of {f.name} is not a tensor", f)
            if p.scope != "global":
                raise self.error(
                    f"parameter {p.name} is a {p.scope} buffer; kernel parameters must be "
                    f"global tensors (T.Tensor) and {p.scope} buffers are allocated inside "
                    f"T.Kernel",
                    p,
                    f,
                )
            if p.dtype not in DTYPES:
                raise self.error(f"parameter {p.name} has unknown dtype {p.dtype!r}", p, f)
            for d, size in enumerate(p.shape):
                if isinstance(size, N.Var):
                    if size.name not in dyn:
                        raise self.error(
                            f"dimension {d} of {p.name} uses {size.name}, which is not a "
                            f"declared dynamic dimension (T.dynamic)",
                            p,
                            f,
                        )
                elif not isinstance(size, int) or isinstance(size, bool) or size <= 0:
                    raise self.error(
                        f"dimension {d} of {p.name} must be a positive int or a T.dynamic dimension, got {size!r}", p, f
                    )
            self.define_buffer(p, p)
        self.scalar_params(f, dyn)
        kernels = [s for s in f.body if isinstance(s, N.Kernel)]
        if not kernels:
            raise self.error(f"{f.name} has no `with T.Kernel(...)` block", f)
        if len(kernels) > 1:
            raise self.error(
                f"{f.name} has {len(kernels)} T.Kernel blocks and other statements "
                "outside them; beside several T.Kernel blocks only T.alloc_global "
                "scratch may stand",
                kernels[1],
            )
        self.body(f.body, new_scope=False)


# ----------------------------------------------------------------------------- structure

# What each field of each node must hold. Checked before anything else so that
# IR built by a buggy frontend, plugin or JSON file is a clear error, not a crash.
_E, _ES, _BUF, _REG, _BODY, _INT, _INTS, _STR, _BOOL, _VAR, _VARS, _SHAPE = (
    "expression",
    "tuple of expressions",
    "Buffer",
    "Region",
    "tuple of statements",
    "int",
    "tuple of ints",
    "str",
    "bool",
    "Var",
    "tuple of Vars",
    "shape (tuple of ints and Vars)",
)
_SCHEMA = {
    N.Const: {"value": "number", "dtype": _STR},
    N.Var: {"name": _STR, "dtype": _STR},
    N.BinOp: {"op": _STR, "a": _E, "b": _E, "dtype": _STR},
    N.UnaryOp: {"op": _STR, "a": _E, "dtype": _STR},
    N.Call: {"func": _STR, "args": _ES, "dtype": _STR},
    N.Cast: {"value": _E, "dtype": _STR},
    N.Select: {"cond": _E, "a": _E, "b": _E, "dtype": _STR},
    N.Load: {"buffer": _BUF, "indices": _ES, "dtype": _STR},
    N.Buffer: {"name": _STR, "shape": _SHAPE, "dtype": _STR, "scope": _STR},
    N.Region: {"buffer": _BUF, "starts": _ES, "extents": _INTS},
    N.Alloc: {"buffer": _BUF},
    N.Store: {"buffer": _BUF, "indices": _ES, "value": _E},
    N.Let: {"var": _VAR, "value": _E},
    N.For: {"var": _VAR, "begin": _E, "extent": _E, "kind": _STR, "body": _BODY, "num_stages": _INT},
    N.Parallel: {"vars": _VARS, "extents": _INTS, "body": _BODY},
    N.If: {"cond": _E, "then_body": _BODY, "else_body": _BODY},
    N.While: {"cond": _E, "body": _BODY},
    N.Kernel: {"grid": _ES, "block_vars": _VARS, "threads": _INTS, "body": _BODY},
    N.Copy: {"src": _REG, "dst": _REG, "predicated": _BOOL},
    N.Fill: {"dst": _REG, "value": _E},
    N.Gemm: {
        "a": _REG,
        "b": _REG,
        "c": _REG,
        "transpose_a": _BOOL,
        "transpose_b": _BOOL,
        "clear_accum": _BOOL,
        "policy": _STR,
    },
    N.Reduce: {"kind": _STR, "src": _BUF, "dst": _BUF, "dim": _INT, "clear": _BOOL},
    N.Cumsum: {"src": _BUF, "dst": _BUF, "dim": _INT, "reverse": _BOOL},
    N.Atomic: {"kind": _STR, "dst": _REG, "value": "expression or Region"},
    N.Print: {"value": "expression or Buffer", "msg": _STR},
    N.Hint: {"kind": _STR, "buffers": "tuple of Buffers", "params": "tuple of (name, value) pairs"},
    N.PrimFunc: {
        "name": _STR,
        "params": "tuple of Buffers",
        "body": _BODY,
        "dyn_vars": _VARS,
        "scalar_params": "tuple of (position, Var) pairs",
    },
}


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _fits(kind: str, x) -> bool:
    if kind == _E:
        return isinstance(x, N.EXPR_TYPES)
    if kind == _BUF:
        return isinstance(x, N.Buffer)
    if kind == _REG:
        return isinstance(x, N.Region)
    if kind == _VAR:
        return isinstance(x, N.Var)
    if kind == _INT:
        return _is_int(x)
    if kind == _STR:
        return isinstance(x, str)
    if kind == _BOOL:
        return isinstance(x, bool)
    if kind == "number":
        return isinstance(x, (int, float, bool))
    if kind == "expression or Region":
        return isinstance(x, N.EXPR_TYPES + (N.Region,))
    if kind == "expression or Buffer":
        return isinstance(x, N.EXPR_TYPES + (N.Buffer,))
    if not isinstance(x, tuple):
        return False
    if kind == _ES:
        return all(isinstance(i, N.EXPR_TYPES) for i in x)
    if kind == _BODY:
        return all(isinstance(i, N.STMT_TYPES) for i in x)
    if kind == _INTS:
        return all(_is_int(i) for i in x)
    if kind == _VARS:
        return all(isinstance(i, N.Var) for i in x)
    if kind == _SHAPE:
        return all(_is_int(i) or isinstance(i, N.Var) for i in x)
    if kind == "tuple of Buffers":
        return all(isinstance(i, N.Buffer) for i in x)
    if kind == "tuple of (position, Var) pairs":
        return all(isinstance(i, tuple) and len(i) == 2 and _is_int(i[0]) and isinstance(i[1], N.Var) for i in x)
    if kind == "tuple of (name, value) pairs":
        return all(isinstance(i, tuple) and len(i) == 2 and isinstance(i[0], str) for i in x)
    raise AssertionError(kind)


def check_structure(func: N.PrimFunc) -> None:
    """Raise TileCompileError if any node field holds the wrong kind of value."""
    source = getattr(func, "source", "") if isinstance(func, N.PrimFunc) else ""
    if not isinstance(func, N.PrimFunc):
        raise TileCompileError(f"expected a tilecore PrimFunc, got {type(func).__name__}")
    stack = [(func, func.span)]
    while stack:
        node, near = stack.pop()
        own = getattr(node, "span", None)
        if _has_line(own):
            near = own
        for name, kind in _SCHEMA[type(node)].items():
            value = getattr(node, name)
            if not _fits(kind, value):
                raise TileCompileError(
                    f"malformed Tile IR: {type(node).__name__}.{name} must be a {kind}, "
                    f"got {type(value).__name__} {value!r:.60}",
                    near,
                    source,
                )
            items = value if isinstance(value, tuple) else (value,)
            for item in items:
                if type(item) in _SCHEMA:
                    stack.append((item, near))


def check(func: N.PrimFunc) -> None:
    """Raise TileCompileError at the culprit if `func` is malformed, ill-typed or ill-shaped."""
    check_structure(func)
    if func.is_multi_stage and all(N.is_stage_stmt(s) for s in func.body):
        for stage in func.split_stages():  # several T.Kernel blocks: each checked as its own function
            _Checker(stage).function()
    else:
        _Checker(func).function()


class CheckTypesPass:
    """The pipeline form of `check`: verifies and returns the function unchanged."""

    name = "check_types"

    def __call__(self, func: N.PrimFunc, ctx) -> N.PrimFunc:
        check(func)
        from .init_check import warn_uninitialized_reads
        from .parallel_check import check_parallel_races

        check_parallel_races(func)

        warn_uninitialized_reads(func)  # undefined, not illegal: a warning at the user's line
        return func


check_types = CheckTypesPass()
