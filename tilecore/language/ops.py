"""The kernel-body operations of the language (`T.copy`, `T.gemm`, `T.exp`, ...).

These functions exist so that `T.copy` is a real attribute with TileLang's
signature and a docstring: the frontend reads the kernel's Python source and
turns each call into Tile IR, binding the arguments against the signature
below. Called as ordinary Python (outside a `@T.prim_func` body) they raise a
`KernelOnlyError` that says so. A few (`T.ceildiv`, `T.max`, `T.min`) also
compute on plain Python numbers, which is how they are evaluated at parse time.
"""

from __future__ import annotations

import builtins
import functools
import typing
from typing import Any, Callable, Protocol

from ..diagnostics import TileError
from .tensor import GemmWarpPolicy


class _Intrinsic(Protocol):
    """A kernel-body operation: what the frontend reads from the function object."""

    __tile_intrinsic__: str  # the operation's name ("copy")
    __tile_python__: Callable[..., Any]  # only where plain Python numbers compute at once

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Raise KernelOnlyError (or compute on plain numbers)."""


class KernelOnlyError(TileError, RuntimeError):
    """A kernel-body operation was called as ordinary Python."""


def _kernel_only(func):
    """Mark `func` as a kernel-body operation the frontend translates."""
    name = func.__name__

    @functools.wraps(func)
    def outside(*args, **kwargs):
        raise KernelOnlyError(
            f"T.{name}(...) can only be used inside the body of a @T.prim_func function; "
            "tilecore translates that body to Tile IR instead of running it as Python"
        )

    intrinsic = typing.cast(_Intrinsic, outside)
    intrinsic.__tile_intrinsic__ = name
    return intrinsic


def _is_python_number(value) -> bool:
    """A number known at parse time: int, float or a numpy scalar (not a kernel value)."""
    if isinstance(value, (int, float)):
        return True
    return type(value).__module__ == "numpy" and hasattr(value, "item") and getattr(value, "ndim", 1) == 0


def _plain_number(value):
    """numpy scalars as the Python int/float they hold (np.int64(4) -> 4)."""
    return value.item() if type(value).__module__ == "numpy" else value


def _kernel_or_python(func):
    """Like _kernel_only, but plain Python numbers are computed at once (parse time)."""
    marked = _kernel_only(func)

    @functools.wraps(func)
    def on_python_values(*args):
        if all(_is_python_number(a) for a in args):
            return func(*(_plain_number(a) for a in args))
        return marked(*args)

    intrinsic = typing.cast(_Intrinsic, on_python_values)
    intrinsic.__tile_intrinsic__ = func.__name__
    intrinsic.__tile_python__ = func
    return intrinsic


# ----------------------------------------------------------------------------- kernel and memory


@_kernel_only
def Kernel(*blocks, threads=128):  # noqa: N802
    """`with T.Kernel(gx, gy, threads=128) as (bx, by):` a grid of 1-3 dims of independent blocks."""


@_kernel_only
def get_thread_binding(dim=0):
    """The thread's index along `dim` of the block's `threads=` (0 along a dimension it lacks).

    As the whole condition `if T.get_thread_binding() < 32: A else: B` it splits the block into
    two thread groups; any other use makes the kernel body per-thread code that runs on every
    thread in statement lockstep (docs/semantics.md "Per-thread code")."""


@_kernel_only
def sync_threads(barrier_id=None, arrive_count=None):
    """A barrier of the block's threads. Per-thread code already runs in statement lockstep, so
    where every thread reaches it, it changes nothing; inside a branch only some threads take it
    is an error (docs/semantics.md "Per-thread code")."""


@_kernel_only
def alloc_shared(shape, dtype, scope="shared.dyn"):
    """A tile in memory shared by the block's threads."""


@_kernel_only
def alloc_fragment(shape, dtype, scope="local.fragment"):
    """A tile held in registers, spread over the block's threads by the backend."""


@_kernel_only
def alloc_local(shape, dtype, scope="local"):
    """A per-thread local tile."""


@_kernel_only
def alloc_var(dtype, init=None, scope="local.var"):
    """A scalar variable: read as `v`, written as `v = ...` (shape (1,))."""


@_kernel_only
def alloc_global(shape, dtype, scope="global"):
    """Scratch global memory shared by the T.Kernel blocks of one prim_func (before them)."""


# ----------------------------------------------------------------------------- tile operations


@_kernel_only
def copy(src, dst, coalesced_width=None, disable_tma=False, eviction_policy=None):
    """Copy a region to a region, converting dtypes; extents come from the other side.

    `coalesced_width`, `disable_tma` and `eviction_policy` are TileLang's
    code-generation hints; they are accepted so kernels port unchanged and
    have no effect on the result (backends choose their own copy strategy).
    """


@_kernel_only
def im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad, eviction_policy=None, annotations=None):
    """Fill the 2-D tile `col` with the im2col patches of the NHWC image `img` for a 2-D
    convolution (square `kernel`, `stride`, `dilation`, `pad`): row i is output pixel
    nhw_step * rows + i, column j is patch element (kh * kernel + kw) * C + c with
    c_step * cols + j; zero where the window lies in the padding or past the image.
    `eviction_policy` and `annotations` are hints with no effect on the result."""


@_kernel_only
def c2d_im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad, eviction_policy=None, annotations=None):
    """TileLang's older name of `T.im2col`."""


@_kernel_only
def fill(buffer, value):
    """Set every element of a buffer or region to `value`."""


@_kernel_only
def clear(buffer):
    """Set every element of a buffer or region to zero."""


@_kernel_only
def gemm(
    A,
    B,
    C,
    transpose_A=False,
    transpose_B=False,  # noqa: N803
    policy=GemmWarpPolicy.Square,
    clear_accum=False,
    k_pack=1,
    wg_wait=0,
):
    """C (+)= op(A) @ op(B), accumulating in C's dtype.

    `k_pack` and `wg_wait` (TileLang's instruction-selection hints) are
    accepted for compatibility and have no effect on the result.
    """


@_kernel_only
def reduce_sum(buffer, out, dim=-1, clear=True):
    """out = sum of buffer along dim (added to out when clear=False)."""


@_kernel_only
def reduce_max(buffer, out, dim=-1, clear=True):
    """out = max of buffer along dim (combined with out when clear=False)."""


@_kernel_only
def reduce_min(buffer, out, dim=-1, clear=True):
    """out = min of buffer along dim (combined with out when clear=False)."""


@_kernel_only
def reduce_abssum(buffer, out, dim=-1, clear=True):
    """out = sum of |buffer| along dim."""


@_kernel_only
def reduce_absmax(buffer, out, dim=-1, clear=True):
    """out = max of |buffer| along dim."""


@_kernel_only
def cumsum(src, dst=None, dim=0, reverse=False):
    """Inclusive prefix sum along dim (in place when dst is omitted)."""


@_kernel_only
def atomic_add(dst, value, memory_order=None, return_prev=False, use_tma=False):
    """Atomically add an element (`C[i, j]`, scalar) or a tile (`C[r, c]`, buffer) into global memory.

    `memory_order` ("relaxed", "acquire", ...) and `use_tma` are accepted as hints: each
    atomic is indivisible and no other ordering between blocks is defined (semantics.md).
    `return_prev=True` (the old value) is not supported."""


@_kernel_only
def atomic_max(dst, value, memory_order=None, return_prev=False, use_tma=False):
    """Atomic maximum, element or tile form (see atomic_add)."""


@_kernel_only
def atomic_min(dst, value, memory_order=None, return_prev=False, use_tma=False):
    """Atomic minimum, element or tile form (see atomic_add)."""


# ----------------------------------------------------------------------------- loops


@_kernel_only
def Parallel(*extents):  # noqa: N802
    """`for i, j in T.Parallel(M, N):` independent iterations over a tile's index space."""


@_kernel_only
def Pipelined(start, stop=None, num_stages=0, order=None, stage=None, sync=None, group=None):  # noqa: N802
    """A sequential loop the backend may software-pipeline with `num_stages` stages.

    `order`, `stage`, `sync` and `group` (TileLang's manual pipeline schedule)
    are accepted for compatibility; the backend picks its own schedule, which
    never changes results.
    """


@_kernel_only
def Persistent(domain, wave_size, index, group_size=8):  # noqa: N802
    """`for bx, by in T.Persistent([tiles_x, tiles_y], wave_size, block_id, group_size=8):`
    TileLang's persistent tile loop: block `index` of `wave_size` blocks visits tiles index,
    index + wave_size, ... of the domain, in groups of `group_size` along its last dimension
    (docs/semantics.md); a sequential loop over the waves.
    """


@_kernel_only
def serial(start, stop=None, step=None):
    """A sequential loop, like `range` (step 1 only)."""


@_kernel_only
def unroll(start, stop=None, step=None):
    """A sequential loop the backend may unroll (step 1 only)."""


# ----------------------------------------------------------------------------- expressions


def _unary(name, doc):
    def func(x):
        pass

    func.__name__ = func.__qualname__ = name
    func.__doc__ = doc
    return _kernel_only(func)


exp = _unary("exp", "e ** x")
exp2 = _unary("exp2", "2 ** x")
log = _unary("log", "natural logarithm")
log2 = _unary("log2", "base-2 logarithm")
sqrt = _unary("sqrt", "square root")
rsqrt = _unary("rsqrt", "1 / sqrt(x)")
tanh = _unary("tanh", "hyperbolic tangent")
sigmoid = _unary("sigmoid", "1 / (1 + exp(-x))")
sin = _unary("sin", "sine")
cos = _unary("cos", "cosine")
floor = _unary("floor", "round down")
ceil = _unary("ceil", "round up")
abs = _unary("abs", "absolute value")  # noqa: A001


@_kernel_only
def pow(x, y):  # noqa: A001
    """x ** y."""


@_kernel_or_python
def max(a, b):  # noqa: A001
    """The larger of a and b."""
    return builtins.max(a, b)


@_kernel_or_python
def min(a, b):  # noqa: A001
    """The smaller of a and b."""
    return builtins.min(a, b)


@_kernel_or_python
def ceildiv(a, b):
    """ceil(a / b) for integers: the number of tiles of size b covering a."""
    if not (isinstance(a, int) and isinstance(b, int)):
        raise TypeError(f"T.ceildiv needs integers, got {a!r} and {b!r}")
    return -(-a // b)


@_kernel_only
def cast(value, dtype):
    """value converted to dtype."""


@_kernel_only
def if_then_else(cond, then_expr, else_expr):
    """then_expr where cond holds, else else_expr (both sides may be evaluated)."""


@_kernel_only
def infinity(dtype):
    """+inf in dtype (write -T.infinity(dtype) for -inf)."""


# ----------------------------------------------------------------------------- hints and debugging


@_kernel_only
def print(obj, msg=""):  # noqa: A001
    """Print a scalar expression or a whole buffer when the kernel runs."""


@_kernel_only
def use_swizzle(panel_size=8, order="row", enable=True):
    """Hint: visit blocks in panels for L2 reuse (never changes results)."""


@_kernel_only
def annotate_layout(layout_map):
    """Hint: `T.annotate_layout({buf: T.make_swizzled_layout(buf)})` (never changes results)."""


@_kernel_only
def make_swizzled_layout(buffer):
    """The swizzled layout of a shared buffer, for T.annotate_layout."""


# ----------------------------------------------------------------------------- eager style


@_kernel_only
def const(names):
    """`M, N = T.const("M, N")`: sizes fixed for one compilation of an eager-style kernel.

    Given to `.compile(M=...)`, or read from the shapes of the arrays a call passes.
    """


@_kernel_only
def empty(shape, dtype="float32"):
    """`C = T.empty(shape, dtype)`: an output of an eager-style kernel, allocated by the launcher."""


# ----------------------------------------------------------------------------- TileLang aliases and hints


@_kernel_or_python
def floordiv(a, b):
    """`a // b` (floor division), TileLang's spelling."""
    return a // b


@_kernel_or_python
def floormod(a, b):
    """`a % b` (floor modulo), TileLang's spelling."""
    return a % b


@_kernel_only
def Cast(dtype, value):  # noqa: N802  (TVM's spelling: dtype first)
    """`T.cast(value, dtype)` with TVM's argument order."""


@_kernel_only
def clamp(x, lo, hi):
    """`T.min(T.max(x, lo), hi)`: x limited to [lo, hi] (NaN stays NaN)."""


@_kernel_only
def vectorized(start, stop=None, step=None):
    """A sequential loop the backend may vectorize (a hint; step 1 only)."""


Serial = serial  # TileLang accepts both spellings


@_kernel_only
def disable_warp_group_reg_alloc():
    """TileLang's register-allocation hint for warp groups: accepted, no effect."""


@_kernel_only
def assume(cond):
    """A promise that `cond` holds, for the optimizer; tilecore does not use it (no effect)."""


def macro(func):
    """`@T.macro`: a function whose body is inlined into the kernel at each call
    (tilecore.frontend.inline); its parameters may be buffers, kernel values or Python values."""
    func.__tile_macro__ = True
    return func
