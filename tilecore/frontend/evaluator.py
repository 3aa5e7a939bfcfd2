"""Expression evaluation: a Python AST expression -> a Python value or Tile IR.

Operations whose operands are all Python values run in Python at parse time
(the meta-programming model); as soon as a kernel value (an IR expression)
takes part, the result is IR built by `tilecore.frontend.exprs`.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import operator
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, List, Union

from ..diagnostics import TileCompileError, UnsupportedFeatureError
from ..ir import nodes as N
from ..ir.types import DTypeError, normalize_dtype
from ..ir.visitor import Dispatcher
from . import exprs as E
from .scope import MISSING, Scopes

BIN_OPS = {
    ast.Add: ("+", operator.add),
    ast.Sub: ("-", operator.sub),
    ast.Mult: ("*", operator.mul),
    ast.Div: ("/", operator.truediv),
    ast.FloorDiv: ("//", operator.floordiv),
    ast.Mod: ("%", operator.mod),
    ast.Pow: ("pow", operator.pow),
    ast.BitAnd: ("&", operator.and_),
    ast.BitOr: ("|", operator.or_),
    ast.BitXor: ("^", operator.xor),
    ast.LShift: ("<<", operator.lshift),
    ast.RShift: (">>", operator.rshift),
    ast.MatMult: ("@", operator.matmul),
}
COMPARE_OPS = {
    ast.Lt: ("<", operator.lt),
    ast.LtE: ("<=", operator.le),
    ast.Gt: (">", operator.gt),
    ast.GtE: (">=", operator.ge),
    ast.Eq: ("==", operator.eq),
    ast.NotEq: ("!=", operator.ne),
    ast.Is: (None, operator.is_),
    ast.IsNot: (None, operator.is_not),
    ast.In: (None, lambda a, b: a in b),
    ast.NotIn: (None, lambda a, b: a not in b),
}
UNARY_OPS = {
    ast.USub: ("neg", operator.neg),
    ast.Not: ("not", operator.not_),
    ast.Invert: ("~", operator.invert),
    ast.UAdd: (None, operator.pos),
}

# What to call Python constructs the kernel language does not have.
UNSUPPORTED = {
    "While": "a while loop",
    "Try": "a try statement",
    "TryStar": "a try statement",
    "Break": "break",
    "Continue": "continue",
    "Lambda": "a lambda",
    "ListComp": "a list comprehension",
    "SetComp": "a set comprehension",
    "DictComp": "a dict comprehension",
    "GeneratorExp": "a generator expression",
    "FunctionDef": "a nested function definition",
    "AsyncFunctionDef": "a nested function definition",
    "ClassDef": "a class definition",
    "Yield": "yield",
    "YieldFrom": "yield",
    "Await": "await",
    "NamedExpr": "an assignment expression (:=)",
    "Delete": "del",
    "Global": "global",
    "Nonlocal": "nonlocal",
    "Import": "an import",
    "ImportFrom": "an import",
    "Raise": "raise",
    "AsyncFor": "async for",
    "AsyncWith": "async with",
    "Match": "a match statement",
    "Set": "a set literal",
}


@dataclass(frozen=True)
class Evaluated:
    """An intrinsic argument already evaluated (it came from `*args` or `**kwargs`)."""

    value: Any
    node: ast.AST


# f-string conversions (`!s`, `!r`, `!a`) by ast.FormattedValue.conversion code
_CONVERSIONS: Dict[int, Callable[[Any], str]] = {115: str, 114: repr, 97: ascii}


def _unchanged(value: Any) -> Any:
    return value


def python_scalar(value):
    """numpy scalars (np.int64(4), np.float32(0.5), np.bool_) as the Python number they hold.

    Factory arguments often come from numpy (shapes, scales); as Python numbers
    they follow the literal rules (a literal adopts the other operand's dtype).
    """
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        return value.item()
    return value


def is_ir(value) -> bool:
    """Whether `value` is a kernel value (IR) rather than a Python value."""
    return isinstance(value, (N.Expr, N.Buffer))


class Evaluator(Dispatcher):
    """Evaluates expressions against the scopes (AST class `C` by `eval_C`); the Parser adds
    statements on top."""

    def __init__(self, filename: str, source: str, env: dict):
        self.filename = filename
        self.source = source
        self.scopes = Scopes(env)
        self.dyn_vars: dict = {}
        self.in_signature = False  # evaluating parameter annotations: dims are being declared
        # Let-bound names whose value reads no memory -> that value, names inside it expanded:
        # slice extents such as `kv_start:kv_end` of two such names simplify through them
        self.pure_lets: dict = {}

    # ------------------------------------------------------------------ diagnostics

    def span(self, node) -> N.Span:
        """The source span of an AST node (or of an Evaluated argument's node)."""
        if isinstance(node, Evaluated):
            node = node.node
        line = getattr(node, "lineno", 0)
        return N.Span(
            self.filename,
            line,
            getattr(node, "col_offset", 0),
            getattr(node, "end_lineno", line) or line,
            getattr(node, "end_col_offset", 0) or 0,
        )

    def error(self, message: str, node) -> TileCompileError:
        return TileCompileError(message, self.span(node), self.source)

    def unsupported(self, node) -> TileCompileError:
        name = type(node).__name__
        what = UNSUPPORTED.get(name, f"the Python construct {name}")
        return self.error(f"unsupported Python construct in a kernel: {what}", node)

    # ------------------------------------------------------------------ entry points

    def eval(self, node) -> Any:
        """Evaluate an AST expression (or an already Evaluated / default argument)."""
        if isinstance(node, Evaluated):
            return node.value
        if not isinstance(node, ast.AST):
            return node  # a default value from an intrinsic's signature
        method = self.handler("eval_", node)
        if method is None:
            raise self.unsupported(node)
        try:
            return python_scalar(method(self, node))
        except E.ExprTypeError as exc:
            raise self.error(str(exc), node) from None

    def expr(self, node, like=None) -> N.Expr:
        """Evaluate to an IR expression (Python numbers become constants)."""
        value = self.eval(node)
        try:
            return E.as_expr(value, self.span(node), like)
        except E.ExprTypeError as exc:
            raise self.error(str(exc), node) from None

    def index(self, node) -> N.Expr:
        """Evaluate to an integer IR expression."""
        try:
            return E.index_expr(self.eval(node), self.span(node))
        except E.ExprTypeError as exc:
            raise self.error(str(exc), node) from None

    def py_value(self, node, what: str):
        """Evaluate to a Python value known at parse time."""
        value = self.eval(node)
        if is_ir(value):
            raise self.error(f"{what} must be known at parse time, got {E.describe(value)}", node)
        return value

    def py_int(self, node, what: str, minimum=None) -> int:
        value = self.py_value(node, what)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(f"{what} must be an int, got {value!r}", node)
        if minimum is not None and value < minimum:
            raise self.error(f"{what} must be at least {minimum}, got {value}", node)
        return value

    def py_bool(self, node, what: str) -> bool:
        value = self.py_value(node, what)
        if not isinstance(value, (bool, int)):
            raise self.error(f"{what} must be True or False, got {value!r}", node)
        return bool(value)

    def dtype(self, node, what: str = "the dtype") -> str:
        value = self.py_value(node, what)
        try:
            return normalize_dtype(value)
        except DTypeError as exc:
            raise self.error(str(exc), node) from None

    def shape(self, node, what: str) -> tuple:
        value = self.py_value(node, what)
        dims = value if isinstance(value, (tuple, list)) else (value,)
        for dim in dims:
            if isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0:
                shown = ", ".join(
                    d.name if isinstance(d, N.Var) else E.describe(d) if is_ir(d) else repr(d) for d in dims
                )
                raise self.error(f"{what} must be positive ints known at parse time, got ({shown})", node)
        return tuple(dims)

    def buffer(self, node, what: str) -> N.Buffer:
        """Evaluate to a buffer (a bare name, not an element or region)."""
        value = self.eval_raw(node)
        if not isinstance(value, N.Buffer):
            raise self.error(f"{what} must be a buffer, got {E.describe(value)}", node)
        return value

    def eval_Lambda(self, node: ast.Lambda):
        """A lambda given to T.Layout / T.Fragment (their index maps) is a Python function made at
        parse time; it sees the Python environment and the names bound so far, and never runs in
        the kernel. Anywhere else a lambda is unsupported."""
        if not getattr(self, "layout_arguments", False):
            raise self.unsupported(node)
        namespace = dict(self.scopes.env)
        for scope in self.scopes.stack:
            namespace.update({k: v for k, (v, _) in scope.bindings.items()})
        code = compile(ast.fix_missing_locations(ast.Expression(node)), self.filename, "eval")
        return eval(code, namespace)  # noqa: S307  (the user's own source text)

    def eval_raw(self, node):
        """Like eval, but a T.alloc_var name gives its buffer instead of its value."""
        if isinstance(node, ast.Name):
            return python_scalar(self.lookup(node))
        return self.eval(node)

    # ------------------------------------------------------------------ names

    def lookup(self, node: ast.Name):
        name = node.id
        if name in self.scopes.diverged:
            line = self.scopes.diverged[name].line
            raise self.error(
                f"'{name}' was reassigned inside a run-time `if` (line {line}), so after "
                "the `if` its value depends on the branch taken: use T.alloc_var for "
                "a value that changes, or a new name",
                node,
            )
        value = self.scopes.lookup(name)
        if value is MISSING:
            if name in self.scopes.expired:
                kind, span = self.scopes.expired[name]
                raise self.error(
                    f"'{name}' is only defined inside the {kind} body where it is "
                    f"assigned (line {span.line}); Tile IR values do not outlive "
                    "their body: use T.alloc_var for a value that does",
                    node,
                )
            raise self.error(f"undefined name '{name}'", node)
        if isinstance(value, N.Var) and self.scopes.find(name) is None and not self.in_signature:
            value = self.dynamic_var(value, node)
        if isinstance(value, N.Expr):
            # every Expr subclass is a frozen dataclass (the base is not, so that each keeps its
            # own field order); typeshed's replace() accepts only a statically known dataclass
            return replace(value, span=self.span(node))  # type: ignore[type-var]
        return value

    def dynamic_var(self, var: N.Var, node) -> N.Var:
        """A T.dynamic dim used in the body: it must be a dimension of a parameter."""
        if var.name not in self.dyn_vars:
            raise self.error(
                f"the dynamic dimension '{var.name}' is not a dimension of any "
                "parameter of this kernel, so its value is unknown at launch",
                node,
            )
        return self.dyn_vars[var.name]

    def eval_Name(self, node: ast.Name):
        value = self.lookup(node)
        if isinstance(value, N.Buffer) and value.scope == "var":
            return self.load(value, (E.const(0, "int32", self.span(node)),), node)
        return value

    def eval_Constant(self, node: ast.Constant):
        return node.value

    def eval_Attribute(self, node: ast.Attribute):
        base = self.eval_raw(node.value)
        if isinstance(base, N.Buffer):
            if node.attr in ("shape", "dtype", "ndim", "name", "scope"):
                return getattr(base, node.attr)
            if node.attr == "data" and base.scope == "global":
                from .views import BufferData

                return BufferData(base)
            raise self.error(
                f"a buffer has no attribute '{node.attr}' in a kernel "
                "(use .shape, .dtype, .ndim; .data of a global tensor for a view)",
                node,
            )
        if isinstance(base, N.Expr):
            raise self.error(f"a kernel value has no attribute '{node.attr}'", node)
        try:
            return getattr(base, node.attr)
        except UnsupportedFeatureError as err:  # a TileLang primitive a backend declares: named, at the user's line
            raise UnsupportedFeatureError(err.backend, err.feature, self.span(node), self.source) from None
        except AttributeError:
            owner = getattr(base, "__name__", type(base).__name__)
            raise self.error(f"'{owner}' has no attribute '{node.attr}'", node) from None

    # ------------------------------------------------------------------ operators

    def python_op(self, fn, args, node):
        """Apply a Python operator at parse time, reporting failures at `node`."""
        try:
            return fn(*args)
        except TileCompileError:
            raise  # already points at the user's source (a kernel parsed inside a helper)
        except Exception as exc:  # a user's Python error, shown at their line
            raise self.error(f"evaluating this at parse time failed: {type(exc).__name__}: {exc}", node) from None

    def scalar(self, value, node):
        if isinstance(value, N.Buffer):
            raise self.error(
                f"{E.describe(value)} is a whole tile, not a scalar: index it "
                "(inside T.Parallel) or use a tile operation",
                node,
            )
        return value

    def eval_BinOp(self, node: ast.BinOp):
        a, b = self.scalar(self.eval(node.left), node.left), self.scalar(self.eval(node.right), node.right)
        op, fn = BIN_OPS[type(node.op)]
        if not is_ir(a) and not is_ir(b):
            return self.python_op(fn, (a, b), node)
        if op == "@":
            raise self.error("'@' is not defined on kernel values; use T.gemm on tiles", node)
        return E.binary(op, a, b, self.span(node))

    def eval_UnaryOp(self, node: ast.UnaryOp):
        a = self.scalar(self.eval(node.operand), node.operand)
        op, fn = UNARY_OPS[type(node.op)]
        if not is_ir(a):
            return self.python_op(fn, (a,), node)
        if op is None:
            return a
        return E.unary(op, a, self.span(node))

    def eval_BoolOp(self, node: ast.BoolOp):
        is_and = isinstance(node.op, ast.And)
        result = self.scalar(self.eval(node.values[0]), node.values[0])
        for operand in node.values[1:]:
            if not is_ir(result) and (not result if is_and else result):
                return result  # Python short-circuit at parse time
            value = self.scalar(self.eval(operand), operand)
            if not is_ir(result) and not is_ir(value):
                result = value
            else:
                result = E.binary("and" if is_and else "or", result, value, self.span(node))
        return result

    def eval_Compare(self, node: ast.Compare):
        left = self.scalar(self.eval(node.left), node.left)
        result: Any = True  # True, then a Python bool or a kernel value
        for op_node, right_node in zip(node.ops, node.comparators):
            right = self.scalar(self.eval(right_node), right_node)
            op, fn = COMPARE_OPS[type(op_node)]
            if not is_ir(left) and not is_ir(right):
                part = self.python_op(fn, (left, right), node)
            elif op is None:
                raise self.error("'is' and 'in' only work on Python values at parse time", node)
            else:
                part = E.binary(op, left, right, self.span(node))
            if result is True:
                result = part
            elif is_ir(result) or is_ir(part):
                result = E.binary("and", result, part, self.span(node))
            else:
                result = result and part
            left = right
        return result

    def eval_IfExp(self, node: ast.IfExp):
        test = self.scalar(self.eval(node.test), node.test)
        if not is_ir(test):
            return self.eval(node.body if test else node.orelse)
        a, b = self.eval(node.body), self.eval(node.orelse)
        return E.select(test, self.scalar(a, node.body), self.scalar(b, node.orelse), self.span(node))

    # ------------------------------------------------------------------ containers

    def elements(self, nodes) -> list:
        out = []
        for elt in nodes:
            if isinstance(elt, ast.Starred):
                out.extend(self.py_value(elt.value, "a starred value"))
            else:
                out.append(self.eval(elt))
        return out

    def eval_Tuple(self, node):
        return tuple(self.elements(node.elts))

    def eval_List(self, node):
        return self.elements(node.elts)

    def eval_Dict(self, node):
        if any(k is None for k in node.keys):
            raise self.unsupported(node)
        return {self.eval_raw(k): self.eval_raw(v) for k, v in zip(node.keys, node.values)}

    def eval_Slice(self, node: ast.Slice):
        parts = [None if p is None else self.py_value(p, "a slice bound") for p in (node.lower, node.upper, node.step)]
        return slice(*parts)

    def eval_JoinedStr(self, node: ast.JoinedStr) -> str:
        out: List[str] = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                out.append(str(part.value))
                continue
            if not isinstance(part, ast.FormattedValue):
                raise self.error("unsupported f-string part", part)
            value = self.py_value(part.value, "a value in an f-string")
            value = _CONVERSIONS.get(part.conversion, _unchanged)(value)
            spec = self.eval(part.format_spec) if part.format_spec else ""
            out.append(self.python_op(format, (value, spec), part))
        return "".join(out)

    # ------------------------------------------------------------------ subscripts

    def eval_Subscript(self, node: ast.Subscript):
        base = self.eval_raw(node.value)
        if isinstance(base, N.Buffer):
            items = self.subscript_items(node)
            if any(isinstance(i, ast.Slice) for i in items):
                raise self.error(
                    f"the slice {ast.unparse(node)} is a region: regions are only "
                    "allowed as arguments of tile operations (T.copy, T.fill, "
                    "T.gemm, ...); inside T.Parallel index single elements",
                    node,
                )
            return self.load(base, tuple(self.index(i) for i in items), node)
        if is_ir(base):
            raise self.error("a scalar kernel value cannot be indexed", node)
        key = self.eval(node.slice)
        if is_ir(key):
            raise self.error(
                f"{E.describe(base)} cannot be indexed by a kernel value (Python containers are indexed at parse time)",
                node.slice,
            )
        return self.python_op(operator.getitem, (base, key), node)

    @staticmethod
    def subscript_items(node: ast.Subscript) -> list:
        items = node.slice
        return list(items.elts) if isinstance(items, ast.Tuple) else [items]

    def check_indices(self, buffer: N.Buffer, indices, node) -> None:
        """Element access: one index per dimension, constants inside the shape."""
        if len(indices) != buffer.ndim:
            raise self.error(f"{buffer.name} has {buffer.ndim} dimension(s) but is indexed with {len(indices)}", node)
        for axis, (idx, dim) in enumerate(zip(indices, buffer.shape)):
            if isinstance(idx, N.Const) and isinstance(dim, int) and not 0 <= idx.value < dim:
                raise self.error(
                    f"index {idx.value} is out of range for dimension {axis} of {buffer.name} (size {dim})", node
                )

    def load(self, buffer: N.Buffer, indices, node) -> N.Load:
        self.check_indices(buffer, indices, node)
        return N.Load(buffer, tuple(indices), buffer.dtype, self.span(node))

    # ------------------------------------------------------------------ calls

    def bind_arguments(self, func, node: ast.Call, name: str) -> dict:
        """Bind a call's AST arguments to `func`'s signature (defaults applied)."""
        args: List[Union[ast.expr, Evaluated]] = []
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                args.extend(Evaluated(v, arg) for v in self.py_value(arg.value, "a starred argument"))
            else:
                args.append(arg)
        kwargs: Dict[str, Union[ast.expr, Evaluated]] = {}
        for kw in node.keywords:
            if kw.arg is None:
                extra = self.py_value(kw.value, "a ** argument")
                kwargs.update({k: Evaluated(v, kw.value) for k, v in extra.items()})
            else:
                kwargs[kw.arg] = kw.value
        try:
            bound = inspect.signature(func).bind(*args, **kwargs)
        except TypeError as exc:
            raise self.error(f"T.{name}(): {exc}", node) from None
        bound.apply_defaults()
        return bound.arguments

    def eval_Call(self, node: ast.Call):
        if isinstance(node.func, ast.Attribute) and node.func.attr == "astype" and is_ir(self.eval(node.func.value)):
            return self.astype_call(node)
        func = self.eval(node.func)
        name = getattr(func, "__tile_intrinsic__", None)
        if name is not None:
            return self.intrinsic_expr(func, name, node)
        from ..language.layout import Layout

        if isinstance(func, type) and issubclass(func, Layout):
            self.layout_arguments = True
            try:
                return self.python_call(func, node)
            finally:
                self.layout_arguments = False
        if any(func is builtin for builtin in BUILTIN_ON_IR):
            args = self.elements(node.args)
            if any(is_ir(a) for a in args):
                if node.keywords:
                    raise self.error(f"{func.__name__}() takes no keyword arguments here", node)
                return self.builtin_on_ir(func, args, node)
        return self.python_call(func, node)

    def call_arguments(self, node: ast.Call):
        """(positional values, keyword values) of a call, evaluated."""
        args = self.elements(node.args)
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                kwargs.update(self.py_value(kw.value, "a ** argument"))
            else:
                kwargs[kw.arg] = self.eval(kw.value)
        return args, kwargs

    def python_call(self, func, node: ast.Call):
        """Call a Python function at parse time; kernel values cannot be passed to it."""
        args, kwargs = self.call_arguments(node)
        if isinstance(func, N.PrimFunc):
            raise self.error(
                f"a kernel cannot call another kernel ({func.name} is a @T.prim_func): "
                "inline its body, or write the shared part as Python code that runs "
                "at parse time",
                node,
            )
        if any(
            is_ir(v) and not (getattr(func, "__tile_type__", False) and isinstance(v, N.Var))
            for v in list(args) + list(kwargs.values())
        ):
            fname = getattr(func, "__name__", None) or f"a {type(func).__name__} object"
            raise self.error(
                f"cannot pass kernel values to the Python function {fname}(): only "
                "T.* operations run in the kernel; Python functions run at parse "
                "time on Python values",
                node,
            )
        return self.python_op(lambda: func(*args, **kwargs), (), node)

    def builtin_on_ir(self, func, args, node):
        span = self.span(node)
        if func in (builtins.max, builtins.min) and len(args) >= 2:
            result = args[0]
            for arg in args[1:]:
                result = E.binary(func.__name__, self.scalar(result, node), self.scalar(arg, node), span)
            return result
        if func is builtins.abs and len(args) == 1:
            return E.math_call("abs", args[0], span)
        if func in (builtins.float, builtins.int, builtins.bool) and len(args) == 1:
            return E.cast(args[0], {float: "float32", int: "int32", bool: "bool"}[func], span)
        raise self.error(f"{func.__name__}() cannot take these kernel values", node)

    def intrinsic_expr(self, func, name: str, node: ast.Call):
        """A T.* call in expression position."""
        handler = getattr(self, "expr_op_" + name, None)
        if handler is None:
            if name.startswith("atomic_") and any(
                k.arg == "return_prev" and not (isinstance(k.value, ast.Constant) and not k.value.value)
                for k in node.keywords
            ):  # `old = T.atomic_add(x, 1, return_prev=True)`: named as the missing feature
                raise self.return_prev_unsupported(name, node)
            raise self.error(self.misplaced_intrinsic(name), node)
        python_impl = getattr(func, "__tile_python__", None)
        if python_impl is not None and not node.keywords:
            args = self.elements(node.args)
            if not any(is_ir(a) for a in args):
                return self.python_op(python_impl, args, node)
        if name == "dtype_call":
            return self.expr_op_dtype_call(func, node)
        return handler(self.bind_arguments(func, node, name), node)

    def return_prev_unsupported(self, name: str, node: ast.AST) -> UnsupportedFeatureError:
        """The error for `T.<name>(..., return_prev=True)` (an atomic's old value), statement or value."""
        return UnsupportedFeatureError(
            "tilecore", f"T.{name}(..., return_prev=True) (the old value)", self.span(node), self.source
        )

    @staticmethod
    def misplaced_intrinsic(name: str) -> str:
        if name.startswith("alloc_"):
            return f"T.{name}(...) must be assigned to a name: `buf = T.{name}(...)`"
        if name in ("Parallel", "Pipelined", "serial", "unroll", "vectorized"):
            return f"T.{name}(...) is a loop: use it as `for i in T.{name}(...):`"
        if name == "Kernel":
            return "T.Kernel(...) opens the kernel: use it as `with T.Kernel(...) as bx:`"
        if name == "make_swizzled_layout":
            return "T.make_swizzled_layout(buf) is only meaningful inside T.annotate_layout({...})"
        return f"T.{name}(...) is a statement and has no value"

    # ------------------------------------------------------------------ expression intrinsics

    def expr_op_dtype_call(self, func, node: ast.Call):
        if len(node.args) != 1 or node.keywords:
            raise self.error(f"T.{func}(value) takes exactly one argument", node)
        value = self.scalar(self.eval(node.args[0]), node.args[0])
        if isinstance(value, str):  # T.float32("-inf"): non-finite constants
            try:
                value = float(value)
            except ValueError:
                raise self.error(f"T.{func}({value!r}): not a number", node) from None
        return E.cast(value, str(func), self.span(node))

    def math_op(self, name: str, args: dict, node):
        return E.math_call(name, self.scalar(self.eval(args["x"]), node), self.span(node))

    def binary_op(self, op: str, a, b, node):
        a, b = self.scalar(self.eval(a), node), self.scalar(self.eval(b), node)
        if not is_ir(a) and not is_ir(b):
            a = E.as_expr(a, self.span(node))
        return E.binary(op, a, b, self.span(node))

    def expr_op_pow(self, args, node):
        return self.binary_op("pow", args["x"], args["y"], node)

    def expr_op_max(self, args, node):
        return self.binary_op("max", args["a"], args["b"], node)

    def expr_op_min(self, args, node):
        return self.binary_op("min", args["a"], args["b"], node)

    def expr_op_ceildiv(self, args, node):
        a, b = self.index(args["a"]), self.eval(args["b"])
        span = self.span(node)
        return E.binary("//", E.binary("-", E.binary("+", a, b, span), 1, span), b, span)

    def expr_op_cast(self, args, node):
        value = self.scalar(self.eval(args["value"]), node)
        return E.cast(value, self.dtype(args["dtype"]), self.span(node))

    def expr_op_Cast(self, args, node):  # noqa: N802  (TVM's T.Cast(dtype, value))
        return self.expr_op_cast(args, node)

    def expr_op_floordiv(self, args, node):
        return self.binary_op("//", args["a"], args["b"], node)

    def expr_op_floormod(self, args, node):
        return self.binary_op("%", args["a"], args["b"], node)

    def expr_op_get_thread_binding(self, args, node):
        dim = self.py_int(args["dim"], "dim", minimum=0)
        return self.thread_index(dim, node)

    def thread_index(self, dim: int, node) -> N.Expr:
        """The thread's index along `dim` (the parser's: it knows the kernel's threads=)."""
        raise self.error("T.get_thread_binding() must be inside `with T.Kernel(...)`", node)

    def expr_op_clamp(self, args, node):
        low = self.binary_op("max", args["x"], args["lo"], node)
        return self.binary_op("min", Evaluated(low, node), args["hi"], node)

    def astype_call(self, node: ast.Call):
        """`value.astype(dtype)` on a kernel value: a cast (TileLang's method spelling)."""
        if not isinstance(node.func, ast.Attribute) or len(node.args) != 1 or node.keywords:
            raise self.error("astype takes one argument: value.astype(dtype)", node)
        value = self.scalar(self.eval(node.func.value), node)
        return E.cast(value, self.dtype(node.args[0]), self.span(node))

    def expr_op_if_then_else(self, args, node):
        cond = self.scalar(self.eval(args["cond"]), node)
        a = self.scalar(self.eval(args["then_expr"]), node)
        b = self.scalar(self.eval(args["else_expr"]), node)
        if not is_ir(cond):
            return a if cond else b
        return E.select(cond, a, b, self.span(node))

    def expr_op_infinity(self, args, node):
        return E.infinity(self.dtype(args["dtype"]), self.span(node))


BUILTIN_ON_IR = (builtins.max, builtins.min, builtins.abs, builtins.float, builtins.int, builtins.bool)


def _add_math_ops():
    for name in N.MATH_FUNCS:

        def handler(self, args, node, _name=name):
            return self.math_op(_name, args, node)

        handler.__name__ = "expr_op_" + name
        handler.__doc__ = f"T.{name}(x)"
        setattr(Evaluator, handler.__name__, handler)


_add_math_ops()
