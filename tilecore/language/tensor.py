"""Parameter annotations and Python-level objects of the language.

`T.Tensor(shape, dtype)` annotates a kernel parameter; `T.dynamic(name)` makes a
symbolic dimension; `T.GemmWarpPolicy` names the warp-partition hints of gemm.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Tuple, Union

from ..ir import nodes as N
from ..ir.types import INT_DTYPES, normalize_dtype


@dataclass(frozen=True)
class TensorType:
    """The annotation `T.Tensor(shape, dtype)`: shape entries are ints or `T.dynamic` vars."""

    shape: Tuple[Union[int, N.Var], ...]
    dtype: str
    scope: str = "global"

    def __repr__(self) -> str:
        return f"T.Tensor({self.shape}, {self.dtype!r})"


def _tensor_type(shape, dtype, scope: str) -> TensorType:
    if isinstance(shape, (int, N.Var)):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"a tensor shape must be a tuple of ints or T.dynamic dims, got {shape!r}")
    dims = []
    for dim in shape:
        if isinstance(dim, bool) or not isinstance(dim, (int, N.Var)):
            raise TypeError(f"a tensor dimension must be an int or a T.dynamic dim, got {dim!r}")
        if isinstance(dim, int) and dim <= 0:
            raise ValueError(f"a tensor dimension must be positive, got {dim}")
        dims.append(dim)
    return TensorType(tuple(dims), normalize_dtype(dtype), scope)


def Tensor(shape, dtype="float32") -> TensorType:  # noqa: N802  (TileLang spelling)
    """Annotate a global tensor parameter: `A: T.Tensor((M, K), "float16")`."""
    return _tensor_type(shape, dtype, "global")


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
