"""The math accuracy contract: how far, in ULPs of the result, a backend's math function may be
from the reference interpreter's, per function and dtype.

As the OpenCL and Vulkan specifications publish for their builtins. An entry
bounds |backend - reference| <= ulps * ulp(reference) over the whole domain
(the `math` family sweeps it, see edges.SWEEPS), with the special values
(NaN, +-inf, the sign of infinities) exact. It covers the reference's own
error too: the interpreter evaluates float32/float64 functions with numpy
(within 1-2 ulp of the exact value) and float16/bfloat16 ones in float32,
rounded once. ulp(x) is the spacing of the result dtype's floats at |x|,
the subnormal spacing below the smallest normal: flushing subnormal results
to zero is not allowed by the default table.

A backend that declares `fast_math` in its capabilities, or runs with a
compile option that declares it (Option.declares), is held to FAST_MATH_ULPS
instead (hardware approximations: subnormals may flush, a few thousand float32
ulp), in the `math` family and in the error analysis of expressions alike
(programs.build applies `fast_math_tables` to programs whose knobs say so).
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator, Optional

_FAST_MATH = contextvars.ContextVar("tile_conformance_fast_math", default=False)

FUNCS = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "sigmoid", "sin", "cos", "floor", "ceil", "abs")
EXACT = ("floor", "ceil", "abs")

_WIDE = {
    "exp": 4,
    "exp2": 4,
    "log": 4,
    "log2": 4,
    "sqrt": 1,
    "rsqrt": 2,
    "tanh": 6,
    "sigmoid": 6,
    "sin": 4,
    "cos": 4,
    "floor": 0,
    "ceil": 0,
    "abs": 0,
}
_NARROW = {f: (0 if f in EXACT else 1 if f == "sqrt" else 2) for f in FUNCS}

ULPS = {
    "float32": dict(_WIDE),
    "float64": dict(_WIDE),
    "float16": dict(_NARROW),
    "bfloat16": dict(_NARROW),
}

FAST_MATH_ULPS = {
    "float32": {f: (0 if f in EXACT else 3 if f == "sqrt" else 8192) for f in FUNCS},
    "float64": dict(_WIDE),
    "float16": {f: (0 if f in EXACT else 4) for f in FUNCS},
    "bfloat16": {f: (0 if f in EXACT else 2) for f in FUNCS},
}


def ulps(func: str, dtype: str, fast_math: Optional[bool] = None) -> float:
    """Allowed distance of `func` on `dtype` from the reference, in ulps of the result
    (`fast_math` None: the table `fast_math_tables` chose, else the default one)."""
    table = FAST_MATH_ULPS if (_FAST_MATH.get() if fast_math is None else fast_math) else ULPS
    return float(table.get(dtype, ULPS["float32"]).get(func, 8))


@contextlib.contextmanager
def fast_math_tables(on: bool) -> Iterator[None]:
    """Within the block, `ulps` answers from the fast-math table when `on`."""
    token = _FAST_MATH.set(bool(on))
    try:
        yield
    finally:
        _FAST_MATH.reset(token)


def table_markdown(fast_math: bool = False) -> str:
    """The table as Markdown (docs/semantics.md and the report print it)."""
    table = FAST_MATH_ULPS if fast_math else ULPS
    dtypes = ("float16", "bfloat16", "float32", "float64")
    lines = ["| function | " + " | ".join(dtypes) + " |", "|---|" + "---:|" * len(dtypes)]
    for f in FUNCS:
        lines.append(f"| {f} | " + " | ".join(f"{table[d][f]:g}" for d in dtypes) + " |")
    return "\n".join(lines)
