"""Tile IR: plain, immutable dataclasses.

Every node carries a `span` (where the user wrote it); spans never take part in
equality, so an IR printed to DSL text and parsed again compares equal.

Conventions that every consumer (passes, interpreter, backends) relies on:
* names of buffers and variables are unique inside one PrimFunc;
* tile-op regions are explicit: `Region.extents` are known ints (the frontend
  resolves "extents from the other side" and slices);
* a statement body is a tuple of statements (there is no Seq node).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Tuple, Union

from .span import NO_SPAN as NO_SPAN  # re-exported
from .span import Span as Span  # re-exported
from .version import TILE_IR_VERSION as TILE_IR_VERSION  # re-exported


def _span() -> Any:
    """A `span` field default: NO_SPAN, left out of equality and repr."""
    return field(default=NO_SPAN, compare=False, repr=False)


# ----------------------------------------------------------------------------- expressions


class Expr:
    """Base class of scalar expressions. Every expression has a `dtype`."""

    dtype: str
    span: Span


@dataclass(frozen=True)
class Const(Expr):
    value: Union[int, float, bool]
    dtype: str
    span: Span = _span()


@dataclass(frozen=True)
class Var(Expr):
    """A scalar variable: block index, loop variable, dynamic dimension or let binding."""

    name: str
    dtype: str = "int32"
    span: Span = _span()


# Binary operators. Arithmetic ops produce `dtype`; comparisons produce bool.
ARITH_OPS = ("+", "-", "*", "/", "//", "%", "min", "max", "pow", "&", "|", "^", "<<", ">>")
COMPARE_OPS = ("<", "<=", ">", ">=", "==", "!=")
LOGIC_OPS = ("and", "or")
BINARY_OPS = ARITH_OPS + COMPARE_OPS + LOGIC_OPS


@dataclass(frozen=True)
class BinOp(Expr):
    """`a op b`. `//` and `%` are floor division / floor modulo (Python semantics)."""

    op: str
    a: Expr
    b: Expr
    dtype: str
    span: Span = _span()


UNARY_OPS = ("neg", "not", "~")


@dataclass(frozen=True)
class UnaryOp(Expr):
    op: str
    a: Expr
    dtype: str
    span: Span = _span()


# Math intrinsics (one argument unless noted). Result dtype = argument dtype.
MATH_FUNCS = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "sigmoid", "sin", "cos", "floor", "ceil", "abs")


@dataclass(frozen=True)
class Call(Expr):
    """A math intrinsic from MATH_FUNCS applied to `args`."""

    func: str
    args: Tuple[Expr, ...]
    dtype: str
    span: Span = _span()


@dataclass(frozen=True)
class Cast(Expr):
    value: Expr
    dtype: str
    span: Span = _span()


@dataclass(frozen=True)
class Select(Expr):
    """`T.if_then_else(cond, a, b)`: both sides may be evaluated."""

    cond: Expr
    a: Expr
    b: Expr
    dtype: str
    span: Span = _span()


@dataclass(frozen=True)
class Load(Expr):
    """An element read `buffer[indices]`."""

    buffer: "Buffer"
    indices: Tuple[Expr, ...]
    dtype: str
    span: Span = _span()


# ----------------------------------------------------------------------------- buffers

SCOPES = ("global", "shared", "fragment", "local", "var")


@dataclass(frozen=True)
class Buffer:
    """A tensor parameter (scope global) or an allocation inside the kernel.

    `shape` entries are ints or Vars (dynamic dims, global buffers only).
    Scope "var" is `T.alloc_var`: shape (1,), read and written as a scalar.
    """

    name: str
    shape: Tuple[Union[int, Var], ...]
    dtype: str
    scope: str = "global"
    span: Span = _span()

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def static_shape(self) -> Optional[Tuple[int, ...]]:
        """The shape as ints, or None when a dimension is dynamic (a `T.dynamic` Var)."""
        if all(isinstance(s, int) for s in self.shape):
            return tuple(int(d) for d in self.shape if isinstance(d, int))
        return None

    def static_dims(self) -> Tuple[int, ...]:
        """The shape of a buffer known to be static (block-local tiles always are); a dynamic
        dimension here is an internal error (ValueError)."""
        shape = self.static_shape()
        if shape is None:
            raise ValueError(f"buffer {self.name!r} has a dynamic shape {self.shape} where a static one is needed")
        return shape


@dataclass(frozen=True)
class Region:
    """A rectangular part of a buffer: `starts` (exprs) and `extents` (ints).

    A tile copy between two regions pairs their non-unit extents in order
    (unit dimensions squeezed); the frontend checks that they agree.
    """

    buffer: Buffer
    starts: Tuple[Expr, ...]
    extents: Tuple[int, ...]
    span: Span = _span()

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(self.extents)

    def squeezed_shape(self) -> Tuple[int, ...]:
        return tuple(e for e in self.extents if e != 1)

    def matrix_axes(self) -> Tuple[int, ...]:
        """The axes a T.gemm operand multiplies over: unit axes dropped, first ones first, while more
        than two remain, so a 2-D tile keeps both axes even when one has extent 1 (a 32 x 1 tile)."""
        axes = list(range(len(self.extents)))
        while len(axes) > 2 and any(self.extents[a] == 1 for a in axes):
            axes.remove(next(a for a in axes if self.extents[a] == 1))
        return tuple(axes)

    def matrix_shape(self) -> Tuple[int, ...]:
        """The extents of `matrix_axes` (two for a well-formed T.gemm operand)."""
        return tuple(self.extents[a] for a in self.matrix_axes())


# ----------------------------------------------------------------------------- statements


class Stmt:
    span: Span


Body = Tuple[Stmt, ...]


@dataclass(frozen=True)
class Alloc(Stmt):
    """Allocate `buffer` (shared / fragment / local / var) for the rest of the block."""

    buffer: Buffer
    span: Span = _span()


@dataclass(frozen=True)
class Store(Stmt):
    """`buffer[indices] = value` (value converted to the buffer's dtype)."""

    buffer: Buffer
    indices: Tuple[Expr, ...]
    value: Expr
    span: Span = _span()


@dataclass(frozen=True)
class Let(Stmt):
    """`var = value`: binds `var` for the rest of the enclosing body."""

    var: Var
    value: Expr
    span: Span = _span()


LOOP_KINDS = ("serial", "unroll", "pipelined")


@dataclass(frozen=True)
class For(Stmt):
    """A sequential loop `for var in [begin, begin + extent)`.

    kind "pipelined" (T.Pipelined) may be software-pipelined by a backend with
    `num_stages`; "unroll" may be unrolled. Results never depend on the kind.
    """

    var: Var
    begin: Expr
    extent: Expr
    kind: str
    body: Body
    num_stages: int = 0
    span: Span = _span()


@dataclass(frozen=True)
class Parallel(Stmt):
    """`for i, j in T.Parallel(M, N)`: independent iterations over a tile's index space."""

    vars: Tuple[Var, ...]
    extents: Tuple[int, ...]
    body: Body
    span: Span = _span()


@dataclass(frozen=True)
class If(Stmt):
    cond: Expr
    then_body: Body
    else_body: Body = ()
    span: Span = _span()


@dataclass(frozen=True)
class While(Stmt):
    """`while cond: body`: the body runs while `cond` (re-read before every iteration) holds."""

    cond: Expr
    body: Body
    span: Span = _span()


@dataclass(frozen=True)
class Kernel(Stmt):
    """`with T.Kernel(*grid, threads=) as (bx, by, ...)`: a grid of independent blocks."""

    grid: Tuple[Expr, ...]
    block_vars: Tuple[Var, ...]
    threads: Tuple[int, ...]
    body: Body
    span: Span = _span()


@dataclass(frozen=True)
class Copy(Stmt):
    """Tile copy with dtype conversion. Out-of-bounds global reads give 0; writes are dropped."""

    src: Region
    dst: Region
    # True until the bounds pass proves both regions inside their buffers;
    # a backend must guard (zero-fill reads, drop writes) while it is True.
    predicated: bool = True
    span: Span = _span()


@dataclass(frozen=True)
class Fill(Stmt):
    """`T.fill(dst, value)` (and `T.clear(dst)` as value 0)."""

    dst: Region
    value: Expr
    span: Span = _span()


@dataclass(frozen=True)
class Gemm(Stmt):
    """C (+)= op(A) @ op(B): exact products in the inputs' dtype, accumulation in C's dtype."""

    a: Region
    b: Region
    c: Region
    transpose_a: bool = False
    transpose_b: bool = False
    clear_accum: bool = False
    policy: str = "square"
    span: Span = _span()


REDUCE_KINDS = ("sum", "max", "min", "abssum", "absmax")


@dataclass(frozen=True)
class Reduce(Stmt):
    """dst = reduce(src, dim) (clear) or dst = combine(dst, reduce(src, dim)).

    dst has src's shape with `dim` removed (or kept as 1).
    """

    kind: str
    src: Buffer
    dst: Buffer
    dim: int
    clear: bool = True
    span: Span = _span()


@dataclass(frozen=True)
class Cumsum(Stmt):
    """Inclusive prefix sum of src along `dim` into dst (may be the same buffer)."""

    src: Buffer
    dst: Buffer
    dim: int
    reverse: bool = False
    span: Span = _span()


ATOMIC_KINDS = ("add", "max", "min")


@dataclass(frozen=True)
class Atomic(Stmt):
    """Atomic read-modify-write of global memory.

    Element form: `dst` has all extents 1 and `value` is an Expr (inside a
    T.Parallel its starts vary per element). Tile form: `value` is a Region of
    the same squeezed shape as `dst`.
    """

    kind: str
    dst: Region
    value: Union[Expr, Region]
    span: Span = _span()


@dataclass(frozen=True)
class Print(Stmt):
    """`T.print(value, msg=)`: a scalar expression or a whole buffer."""

    value: Union[Expr, Buffer]
    msg: str = ""
    span: Span = _span()


@dataclass(frozen=True)
class Hint(Stmt):
    """A performance hint that never changes results.

    kind "use_swizzle": params (("panel_size", int), ("enable", bool)).
    kind "annotate_layout": buffers named, params (("layout", "swizzled"),).
    """

    kind: str
    buffers: Tuple[Buffer, ...] = ()
    params: Tuple[Tuple[str, Union[int, float, bool, str]], ...] = ()
    span: Span = _span()


# ----------------------------------------------------------------------------- function


@dataclass(frozen=True)
class PrimFunc:
    """A kernel: tensor parameters, the dynamic dims they use, and a body holding one Kernel.

    A body may also hold several Kernels (launched one after the other, each seeing the
    global writes of those before it), preceded by Allocs of scope "global" (`T.alloc_global`
    scratch they share). Passes and backends only ever see one Kernel: `split_stages`
    makes one single-Kernel PrimFunc per stage, the scratch buffers added as parameters.
    """

    name: str
    params: Tuple[Buffer, ...]
    body: Body
    dyn_vars: Tuple[Var, ...] = ()
    source: str = field(default="", compare=False, repr=False)  # the user's file text, for diagnostics
    span: Span = _span()
    # scalar parameters (`n: T.int32`), as (position among all parameters, the Var): each Var is
    # also one of `dyn_vars`, bound from the call's argument instead of from a tensor's shape
    scalar_params: Tuple[Tuple[int, Var], ...] = ()

    @property
    def is_multi_stage(self) -> bool:
        """Whether the body holds `T.alloc_global` scratch or more than one Kernel."""
        return bool(self.scratch) or sum(isinstance(s, Kernel) for s in self.body) > 1

    @property
    def scratch(self) -> Tuple[Buffer, ...]:
        """The `T.alloc_global` scratch buffers of the body, in order."""
        return tuple(s.buffer for s in self.body if isinstance(s, Alloc) and s.buffer.scope == "global")

    def split_stages(self) -> Tuple["PrimFunc", ...]:
        """One single-Kernel PrimFunc per Kernel of the body, in launch order, each taking the
        parameters and then the scratch buffers (`name__stage<k>`)."""
        params = self.params + self.scratch
        kernels = [s for s in self.body if isinstance(s, Kernel)]
        if len(kernels) == 1 and not self.scratch:
            return (self,)
        return tuple(
            PrimFunc(
                f"{self.name}__stage{k}", params, (kernel,), self.dyn_vars, self.source, self.span, self.scalar_params
            )
            for k, kernel in enumerate(kernels)
        )

    @property
    def scalar_names(self) -> Tuple[str, ...]:
        """The names of the scalar parameters, in parameter order."""
        return tuple(v.name for _, v in self.scalar_params)

    @property
    def kernel(self) -> Kernel:
        for s in self.body:
            if isinstance(s, Kernel):
                return s
        raise ValueError(f"{self.name} has no T.Kernel")


def is_stage_stmt(stmt: Stmt) -> bool:
    """Whether `stmt` may stand in a PrimFunc's body: a Kernel, or a global scratch Alloc."""
    return isinstance(stmt, Kernel) or (isinstance(stmt, Alloc) and stmt.buffer.scope == "global")


EXPR_TYPES = (Const, Var, BinOp, UnaryOp, Call, Cast, Select, Load)
STMT_TYPES = (
    Alloc,
    Store,
    Let,
    For,
    Parallel,
    If,
    While,
    Kernel,
    Copy,
    Fill,
    Gemm,
    Reduce,
    Cumsum,
    Atomic,
    Print,
    Hint,
)
