"""The tile language: `import tilecore.language as T`.

TileLang-compatible surface (DESIGN.md, "The language"). `@T.prim_func`
parses the decorated function at once into a `tilecore.ir.PrimFunc`; the other
names are either Python-level objects (`T.Tensor`, `T.dynamic`, dtypes,
`T.GemmWarpPolicy`) or kernel-body operations that only mean something inside
a prim_func (see `tilecore.language.ops`).
"""

from __future__ import annotations

import sys

from .dtypes import (  # noqa: F401,A004
    DType,
    bfloat16,
    bool,
    dtype,
    float,
    float8_e4m3fn,
    float8_e5m2,
    float16,
    float32,
    float64,
    int4,
    int8,
    int16,
    int32,
    int64,
    tfloat32,
    uint8,
)
from .layout import Fragment, Layout  # noqa: F401
from .ops import (  # noqa: F401,A004  # noqa: F401
    Cast,
    Kernel,
    KernelOnlyError,
    Parallel,
    Persistent,
    Pipelined,
    Serial,
    abs,
    alloc_fragment,
    alloc_global,
    alloc_local,
    alloc_shared,
    alloc_var,
    annotate_layout,
    assume,
    atomic_add,
    atomic_max,
    atomic_min,
    c2d_im2col,
    cast,
    ceil,
    ceildiv,
    clamp,
    clear,
    const,
    copy,
    cos,
    cumsum,
    disable_warp_group_reg_alloc,
    empty,
    exp,
    exp2,
    fill,
    floor,
    floordiv,
    floormod,
    gemm,
    get_thread_binding,
    if_then_else,
    im2col,
    infinity,
    log,
    log2,
    macro,
    make_swizzled_layout,
    max,
    min,
    pow,
    print,
    reduce_absmax,
    reduce_abssum,
    reduce_max,
    reduce_min,
    reduce_sum,
    rsqrt,
    serial,
    sigmoid,
    sin,
    sqrt,
    sync_threads,
    tanh,
    unroll,
    use_swizzle,
    vectorized,
)
from .tensor import (  # noqa: F401
    Buffer,
    FragmentBuffer,
    GemmWarpPolicy,
    LocalBuffer,
    SharedBuffer,
    Tensor,
    TensorType,
    dynamic,
    symbolic,
)


def prim_func(func):
    """Parse `func` into a `tilecore.ir.PrimFunc` now.

    Names the body uses are looked up in the function's closure, then the
    locals of the code that applies the decorator (the factory), then its
    globals; their Python values are constants of the kernel.
    """
    from ..diagnostics import TileCompileError
    from ..frontend import parse_function

    try:
        return parse_function(func, caller_locals=sys._getframe(1).f_locals)
    except TileCompileError as err:
        # The message already points at the user's line; the frontend's frames are noise.
        raise err.with_traceback(None) from None


def __getattr__(name):
    from .unsupported import unsupported_name_error

    error = unsupported_name_error(name)  # a TileLang dtype, or a primitive an installed backend declares
    if error is not None:
        raise error
    raise AttributeError(f"module 'tilecore.language' has no attribute {name!r}")
