"""Launch grids as Python source, so GPU launchers size a grid without TVM.

The GPU backends store each grid dimension of the Tile IR kernel as a small
Python expression over the bindings dict `b` (dynamic dimensions by name);
their launchers evaluate it at every call.
"""

from __future__ import annotations


def grid_expr_source(expr) -> str:
    """A Tile IR grid expression as Python source over the bindings dict `b`."""
    from ..ir import nodes as N  # codegen time only: a cached launch never builds the node classes

    if isinstance(expr, N.Const):
        return repr(int(expr.value))
    if isinstance(expr, N.Var):
        return f"b[{expr.name!r}]"
    if isinstance(expr, N.BinOp) and expr.op in ("+", "-", "*", "//", "%"):
        return f"({grid_expr_source(expr.a)} {expr.op} {grid_expr_source(expr.b)})"
    if isinstance(expr, N.BinOp) and expr.op in ("min", "max"):
        return f"{expr.op}({grid_expr_source(expr.a)}, {grid_expr_source(expr.b)})"
    if isinstance(expr, N.Cast):
        return f"({grid_expr_source(expr.value)})"
    raise ValueError(f"grid expression {expr!r} is not supported")


def grid_function(sources):
    """A callable `bindings -> grid tuple` from the stored grid sources (no TVM needed)."""
    code = "lambda b: (" + ", ".join(sources) + ",)"
    return eval(code, {"__builtins__": {}, "max": max, "min": min})  # noqa: S307 (our own expressions)
