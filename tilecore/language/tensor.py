"""Parameter annotations and Python-level objects of the language.

`T.Tensor(shape, dtype)` annotates a kernel parameter; `T.dynamic(name)` makes a
symbolic dimension; `T.GemmWarpPolicy` names the warp-partition hints of gemm.
"""

from __future__ import annotations

import enum
import operator
from dataclasses import dataclass
from typing import List, Tuple, Union

from ..ir import nodes as N
from ..ir.types import INT_DTYPES, normalize_dtype


@dataclass(frozen=True)
class TensorType:
    """The annotation `T.Tensor(shape, dtype)`: shape entries are ints or `T.dynamic` vars."""

    shape: Tuple[Union[int, N.Var], ...]
    dtype: str
    scope: str = "global"
    data: object = None  # `A.data` of another tensor: a view of its elements (inside a kernel only)

    def __repr__(self) -> str:
        return f"T.Tensor({self.shape}, {self.dtype!r})"


@dataclass(frozen=True)
class InvalidTensorType:
    """`T.Tensor(...)` with a bad shape or dtype.

    Python evaluates annotations before `@T.prim_func` sees the function, so
    raising there would give a bare traceback; instead the frontend reports
    `error` at the annotation, with file, line and caret.
    """

    error: str

    def __repr__(self) -> str:
        return f"<invalid T.Tensor: {self.error}>"


MAX_DIM = 2**63 - 1  # sizes are int64 at most everywhere (numpy, DLPack, TVM)


def _tensor_type(shape, dtype, scope: str):
    """A TensorType, or an InvalidTensorType saying what is wrong with `shape` or `dtype`."""
    try:
        return TensorType(_dims(shape), normalize_dtype(dtype), scope)
    except (TypeError, ValueError) as err:
        return InvalidTensorType(str(err))


def _dims(shape) -> Tuple[Union[int, N.Var], ...]:
    if isinstance(shape, (N.Var, int)) or _is_integer(shape):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"a tensor shape must be a tuple of ints or T.dynamic dims, got {shape!r}")
    dims: List[Union[int, N.Var]] = []
    for dim in shape:
        if isinstance(dim, N.Var):
            dims.append(dim)
            continue
        if not _is_integer(dim):
            raise TypeError(f"a tensor dimension must be an int or a T.dynamic dim, got {dim!r}")
        dim = operator.index(dim)  # numpy integers become ints
        if dim <= 0:
            raise ValueError(
                f"a tensor dimension must be positive, got {dim} in shape "
                f"{tuple(shape)} (for sizes that may be 0 at run time, use T.dynamic)"
            )
        if dim > MAX_DIM:
            raise ValueError(f"a tensor dimension must be below 2**63, got {dim}")
        dims.append(dim)
    return tuple(dims)


def _is_integer(value) -> bool:
    """True for ints and numpy integers; False for bools, floats and everything else."""
    if isinstance(value, (bool, float)) or type(value).__name__ in ("bool_", "bool"):
        return False
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


class _TensorAnnotation:
    """`T.Tensor(shape, dtype)` / `T.Tensor[shape, dtype]`: the type of a global tensor parameter.

    Built at parse time, even from a bare T.dynamic dim (`T.Tensor((n), dtype)` is `(n,)`)."""

    __tile_type__ = True
    __name__ = __qualname__ = "Tensor"

    def __call__(self, shape, dtype="float32", data=None):
        """Annotate a global tensor parameter: `A: T.Tensor((M, K), "float16")`.

        Inside a kernel, `T.Tensor(shape, dtype, A.data)` is a view of tensor A's elements
        with another shape (see docs/semantics.md, "Buffer views")."""
        ttype = _tensor_type(shape, dtype, "global")
        if data is not None and isinstance(ttype, TensorType):
            return TensorType(ttype.shape, ttype.dtype, ttype.scope, data)
        return ttype

    def __getitem__(self, key):
        """TileLang's subscript spelling `T.Tensor[(M, K), "float16"]` (dtype defaults to float32)."""
        shape, dtype = (
            key
            if isinstance(key, tuple) and len(key) == 2 and not _is_integer(key[1]) and not isinstance(key[1], N.Var)
            else (key, "float32")
        )
        return self(shape, dtype)

    def __repr__(self) -> str:
        return "T.Tensor"


Tensor = _TensorAnnotation()
Buffer = Tensor


def SharedBuffer(shape, dtype="float32") -> TensorType:  # noqa: N802
    """A shared-memory tile type (TileLang macros); not allowed as a kernel parameter."""
    return _tensor_type(shape, dtype, "shared")


def FragmentBuffer(shape, dtype="float32") -> TensorType:  # noqa: N802
    """A register-fragment tile type (TileLang macros); not allowed as a kernel parameter."""
    return _tensor_type(shape, dtype, "fragment")


def LocalBuffer(shape, dtype="float32") -> TensorType:  # noqa: N802
    """A per-thread local tile type; not allowed as a kernel parameter."""
    return _tensor_type(shape, dtype, "local")


def dynamic(name: str, dtype="int32") -> N.Var:
    """A symbolic dimension, bound at launch from the shapes of the arguments."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"T.dynamic needs a Python identifier as its name, got {name!r}")
    dtype = normalize_dtype(dtype)
    if dtype not in INT_DTYPES:
        raise ValueError(f"T.dynamic dims must have an integer dtype, got {dtype}")
    return N.Var(name, dtype)


symbolic = dynamic


class GemmWarpPolicy(enum.Enum):
    """How T.gemm spreads the tile over warps; a speed hint, never a change of result."""

    Square = "square"
    FullRow = "full_row"
    FullCol = "full_col"


POLICIES = tuple(p.value for p in GemmWarpPolicy)


def normalize_policy(policy) -> str:
    """The IR spelling of a gemm policy given as a GemmWarpPolicy or a string."""
    if isinstance(policy, GemmWarpPolicy):
        return policy.value
    if isinstance(policy, str):
        key = policy.lower().replace("-", "_")
        key = {"fullrow": "full_row", "fullcol": "full_col"}.get(key, key)
        if key in POLICIES:
            return key
    raise ValueError(f"unknown gemm policy {policy!r}; use T.GemmWarpPolicy.Square, FullRow or FullCol")
