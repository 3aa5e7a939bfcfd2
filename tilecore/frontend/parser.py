"""The kernel parser: a `@T.prim_func` function's source -> `tilecore.ir.PrimFunc`.

Statements are translated one by one. Python-level statements (assignments of
Python values, `if`/`for` over Python values, asserts) run at parse time;
everything that touches kernel values becomes Tile IR with the span of the
user's source. Names are made unique per PrimFunc (a rebound name `x` becomes
`x_1`), so printing the IR and parsing it again gives an equal IR.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import functools
import importlib.util
import itertools
import linecache
from typing import List, Optional, Tuple

from ..diagnostics import TileCompileError
from ..ir import nodes as N
from ..ir.visitor import substitute, walk
from ..language.dtypes import DType
from ..language.tensor import InvalidTensorType, TensorType
from . import exprs as E
from .evaluator import BIN_OPS, COMPARE_OPS, Evaluated, is_ir
from .inline import InlineCalls
from .simt import SYNC_HINT, ThreadBindings, finish_kernel_body
from .tileops import TileOps

ALLOC_SCOPES = {
    "alloc_shared": "shared",
    "alloc_fragment": "fragment",
    "alloc_local": "local",
    "alloc_var": "var",
    "alloc_global": "global",
}
# scalar parameters are integers, read wherever a T.dynamic dimension may stand (grid extents,
# loop bounds, indices); the 32-bit width is what every backend's launch passes
SCALAR_PARAM_DTYPES = ("int32",)
LOOP_KINDS = {
    "serial": "serial",
    "unroll": "unroll",
    "Pipelined": "pipelined",
    "vectorized": "serial",
}  # T.vectorized: a hint; its meaning is the sequential loop


class Parser(InlineCalls, TileOps):
    """Translates one function definition; `parse()` returns the PrimFunc."""

    def __init__(self, fn_node: ast.FunctionDef, filename: str, source: str, env: dict, annotations=None):
        super().__init__(filename, source, env)
        self.fn_node = fn_node
        self.annotations = annotations or {}
        self.used_names: set = set()
        self.in_kernel = False
        self.kernel_threads: Tuple[int, ...] = (1,)  # threads= of the T.Kernel being parsed
        self.thread_bindings = ThreadBindings((1,))  # its T.get_thread_binding() uses (simt.py)
        self.pending: list = []  # statements of inlined calls, emitted before the current one

    # ------------------------------------------------------------------ names

    def fresh(self, base: str) -> str:
        """A name unused in this PrimFunc: `base`, else base_1, base_2, ..."""
        name = base
        for n in itertools.count(1):
            if name not in self.used_names:
                break
            name = f"{base}_{n}"
        self.used_names.add(name)
        return name

    def new_var(self, name: str, dtype: str, node) -> N.Var:
        var = N.Var(self.fresh(name), dtype, self.span(node))
        self.scopes.bind(name, var, self.span(node))
        return var

    # ------------------------------------------------------------------ function

    def parse(self) -> N.PrimFunc:
        params = self.parse_params()
        body = self.body(self.fn_node.body)
        if not any(isinstance(s, N.Kernel) for s in body):
            raise self.error("a prim_func must contain a `with T.Kernel(...)` block (found none)", self.fn_node)
        return N.PrimFunc(
            self.fn_node.name,
            params,
            body,
            tuple(self.dyn_vars.values()),
            self.source,
            self.def_span(),
            tuple(self.scalar_params),
        )

    def def_span(self) -> N.Span:
        node = self.fn_node
        return N.Span(
            self.filename, node.lineno, node.col_offset, node.lineno, node.col_offset + len("def ") + len(node.name)
        )

    def parse_params(self):
        args = self.fn_node.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults:
            raise self.error("kernel parameters must be plain `name: T.Tensor(shape, dtype)`", self.fn_node)
        params = []
        self.scalar_params = []
        for arg in args.args:
            ttype = self.param_type(arg, self.annotations.get(arg.arg))
            if not isinstance(ttype, str):  # a str: the dtype of a scalar parameter
                for dim in ttype.shape:
                    if isinstance(dim, N.Var):
                        self.add_dynamic(dim, arg)
            params.append((arg, ttype))
        buffers = []
        for position, (arg, ttype) in enumerate(params):
            if arg.arg in self.used_names:
                raise self.error(f"the parameter '{arg.arg}' has the name of a T.dynamic dimension", arg)
            if isinstance(ttype, str):
                var = N.Var(self.fresh(arg.arg), ttype, self.span(arg))
                self.dyn_vars[var.name] = var
                self.scopes.bind(arg.arg, var, self.span(arg))
                self.scalar_params.append((position, var))
                continue
            shape = tuple(self.dyn_vars[d.name] if isinstance(d, N.Var) else d for d in ttype.shape)
            buf = N.Buffer(self.fresh(arg.arg), shape, ttype.dtype, "global", self.span(arg))
            self.scopes.bind(arg.arg, buf, self.span(arg))
            buffers.append(buf)
        return tuple(buffers)

    def param_type(self, arg: ast.arg, evaluated):
        """The TensorType of a tensor parameter, or the dtype (a str) of a scalar one."""
        if arg.annotation is None:
            raise self.error(f"the parameter '{arg.arg}' needs a type: `{arg.arg}: T.Tensor(shape, dtype)`", arg)
        ttype = evaluated
        # a string annotation (from __future__ import annotations)
        if not isinstance(ttype, (TensorType, InvalidTensorType)):
            self.in_signature = True
            try:
                ttype = self.eval(arg.annotation)
            finally:
                self.in_signature = False
        if isinstance(ttype, InvalidTensorType):
            raise self.error(f"the parameter '{arg.arg}': {ttype.error}", arg.annotation)
        if isinstance(ttype, DType):
            return self.scalar_param_dtype(arg, ttype)
        if not isinstance(ttype, TensorType):
            raise self.error(
                f"the parameter '{arg.arg}' must be a T.Tensor(shape, dtype) or an integer "
                f"scalar (`{arg.arg}: T.int32`), got {E.describe(ttype)}",
                arg.annotation,
            )
        if ttype.data is not None:
            raise self.error(
                f"the parameter '{arg.arg}' is annotated as a view (T.Tensor(shape, dtype, "
                "data)); a view is made inside the kernel from a parameter's .data",
                arg.annotation,
            )
        if ttype.scope != "global":
            raise self.error(
                f"the parameter '{arg.arg}' is a {ttype.scope} buffer, but a kernel "
                "parameter must be a global T.Tensor: declare it as T.Tensor and "
                f"copy it into a T.alloc_{ttype.scope} inside T.Kernel",
                arg.annotation,
            )
        return ttype

    def scalar_param_dtype(self, arg: ast.arg, dtype) -> str:
        """The dtype of a scalar parameter `n: T.int32` (a value passed at each call)."""
        if str(dtype) not in SCALAR_PARAM_DTYPES:
            raise self.error(
                f"the scalar parameter '{arg.arg}' has dtype {dtype}; scalar parameters "
                f"must be {' or '.join(SCALAR_PARAM_DTYPES)} (pass other values as a "
                "one-element T.Tensor, or as a closure value when fixed)",
                arg.annotation,
            )
        return str(dtype)

    def add_dynamic(self, var: N.Var, node) -> None:
        known = self.dyn_vars.get(var.name)
        if known is None:
            self.used_names.add(var.name)
            self.dyn_vars[var.name] = N.Var(var.name, var.dtype, self.span(node))
        elif known.dtype != var.dtype:
            raise self.error(
                f"the dynamic dimension '{var.name}' is used with dtypes {known.dtype} and {var.dtype}", node
            )

    # ------------------------------------------------------------------ statements

    def body(self, stmts, scope_kind=None) -> N.Body:
        """Translate a statement list, in a new scope when `scope_kind` is given."""
        if scope_kind:
            self.scopes.push(scope_kind)
        out: List[N.Stmt] = []
        try:
            for i, stmt in enumerate(stmts):
                if isinstance(stmt, ast.Return) and i == len(stmts) - 1 and stmt.value is None and not self.in_kernel:
                    continue
                out.extend(self.stmt(stmt))
        finally:
            if scope_kind:
                self.scopes.pop()
        return tuple(out)

    def stmt(self, node) -> List[N.Stmt]:
        method = self.handler("stmt_", node)
        if method is None:
            raise self.unsupported(node)
        try:
            stmts = self.flush_pending(method.__get__(self), node)
        except E.ExprTypeError as exc:
            raise self.error(str(exc), node) from None
        if stmts and not self.in_kernel and not all(N.is_stage_stmt(s) for s in stmts):
            raise self.error(
                "this statement must be inside `with T.Kernel(...)`: only Python-level code may come before the kernel",
                node,
            )
        return stmts

    def stmt_Pass(self, node):
        return []

    def stmt_Return(self, node):
        raise self.error("return is not allowed inside a kernel body", node)

    def stmt_Assert(self, node):
        test = self.eval(node.test)
        if is_ir(test):
            raise self.error(
                "assert on kernel values is not supported; asserts run at parse time on Python values", node
            )
        if not test:
            msg = self.py_value(node.msg, "the assert message") if node.msg else ast.unparse(node.test)
            raise self.error(f"assertion failed: {msg}", node)
        return []

    def stmt_Expr(self, node: ast.Expr):
        value = node.value
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            return []  # docstring
        if not isinstance(value, ast.Call):
            raise self.error("this expression has no effect", node)
        func = self.eval(value.func)
        name = getattr(func, "__tile_intrinsic__", None)
        if name is None:
            result = self.python_call(func, value)
            if is_ir(result):
                raise self.error("this expression has no effect", node)
            return []
        handler = getattr(self, "stmt_op_" + name, None)
        if handler is None:
            if hasattr(self, "expr_op_" + name):
                raise self.error(f"T.{name}(...) computes a value; assign it or use it", node)
            raise self.error(self.misplaced_intrinsic(name), node)
        if not self.in_kernel:
            raise self.error(f"T.{name} must be inside `with T.Kernel(...)`", node)
        return handler(self.bind_arguments(func, value, name), value)

    # ------------------------------------------------------------------ assignment

    def stmt_Assign(self, node: ast.Assign):
        if len(node.targets) != 1:
            return self.chained_assign(node)
        target = node.targets[0]
        if isinstance(target, ast.Name) and isinstance(node.value, ast.Call) and self.alloc_call(node.value):
            return self.alloc(target, node.value, node)
        if isinstance(target, ast.Name):
            return self.assign_name(target, node.value, node)
        if isinstance(target, ast.Subscript):
            return self.store(target, self.eval(node.value), node)
        if isinstance(target, (ast.Tuple, ast.List)):
            values = self.py_value(node.value, "a value unpacked into several names")
            names = [t for t in target.elts if isinstance(t, ast.Name)]
            if len(names) != len(target.elts):
                raise self.error("only names can be unpacked into", target)
            try:
                values = list(values)
            except TypeError:
                raise self.error(f"cannot unpack {E.describe(values)} into {len(names)} name(s)", node) from None
            if len(values) != len(names):
                raise self.error(f"cannot unpack {len(values)} values into {len(names)} names", node)
            out = []
            for name, value in zip(names, values):
                out.extend(self.bind_value(name, Evaluated(value, node.value), node))
            return out
        raise self.unsupported(target)

    def chained_assign(self, node: ast.Assign):
        """`a = b = value` of a Python value binds every name (parse time); kernel values cannot."""
        value = self.eval(node.value)
        targets = [t for t in node.targets if isinstance(t, ast.Name)]
        if is_ir(value) or len(targets) != len(node.targets):
            raise self.error(
                "chained assignment (a = b = ...) is only supported for Python values bound to names", node
            )
        out = []
        for target in targets:
            out.extend(self.bind_value(target, Evaluated(value, node.value), node))
        return out

    def alloc_call(self, node):
        """The intrinsic name when `node` is a T.alloc_* call, else None."""
        if not isinstance(node, ast.Call):
            return None
        name = getattr(self.eval(node.func), "__tile_intrinsic__", None)
        return name if name in ALLOC_SCOPES else None

    def assign_name(self, target: ast.Name, value_node, node):
        current = self.scopes.lookup(target.id)
        if isinstance(current, N.Buffer) and current.scope == "var":
            return self.store_var(current, self.eval(value_node), node)
        if isinstance(current, N.Buffer) and self.in_kernel:
            value = self.eval_raw(value_node)
            if not isinstance(value, N.Buffer):
                what = "tensor parameter" if current.scope == "global" else f"{current.scope} buffer"
                raise self.error(
                    f"'{target.id}' is a {what}; assigning {E.describe(value)} to the name would "
                    f"not change its contents: write elements ({target.id}[i] = ...) or use "
                    f"T.fill / T.clear / T.copy",
                    node,
                )
            if not (value.scope == "var"):
                return self.bind_value(target, Evaluated(value, value_node), node)
        return self.bind_value(target, value_node, node)

    def bind_value(self, target: ast.Name, value_node, node):
        """`name = value`: a Let for kernel values, a parse-time binding otherwise."""
        name = target.id
        value = self.eval_raw(value_node)
        if isinstance(value, N.Buffer) and value.scope == "var":
            value = self.eval(value_node)
        kind = self.scopes.outer_runtime_kind(name)
        if kind is not None:
            span = self.scopes.binding_span(name)
            line = span.line if span is not None else "?"
            raise self.error(
                f"'{name}' is assigned inside a {kind} body but was defined outside it "
                f"(line {line}); kernel values are immutable, so this would not change "
                f"'{name}' in the next iteration or after the {kind}: use a new name, or "
                f"`{name} = T.alloc_var(dtype)` before the {kind} for a value that "
                "changes",
                target,
            )
        if isinstance(value, N.Expr) and self.in_kernel:
            var = self.new_var(name, value.dtype, target)
            if not any(isinstance(e, N.Load) for e in walk(value)):
                self.pure_lets[var.name] = substitute(value, self.pure_lets)
            return [N.Let(var, value, self.span(node))]
        self.scopes.bind(name, value, self.span(target))
        return []

    def stmt_AugAssign(self, node: ast.AugAssign):
        op, fn = BIN_OPS[type(node.op)]
        target = node.target
        if isinstance(target, ast.Subscript):
            current = self.eval(target)
            value = self.scalar(self.eval(node.value), node.value)
            return self.store(target, E.binary(op, current, value, self.span(node)), node)
        if not isinstance(target, ast.Name):
            raise self.unsupported(target)
        current = self.eval(target)
        value = self.scalar(self.eval(node.value), node.value)
        if is_ir(current) or is_ir(value):
            new = E.binary(op, current, value, self.span(node))
        else:
            new = self.python_op(fn, (current, value), node)
        binding = self.scopes.lookup(target.id)
        if isinstance(binding, N.Buffer) and binding.scope == "var":
            return self.store_var(binding, new, node)
        return self.bind_value(target, Evaluated(new, node), node)

    def stmt_AnnAssign(self, node: ast.AnnAssign):
        if node.value is None or not isinstance(node.target, ast.Name):
            raise self.error("an annotated assignment needs a name and a value: `x: T.float32 = ...`", node)
        dtype = self.dtype(node.annotation, "the annotation")
        value = E.cast(self.scalar(self.eval(node.value), node.value), dtype, self.span(node.value))
        if isinstance(value, N.Cast) and value.value.dtype == dtype:
            value = value.value
        return self.bind_value(node.target, Evaluated(value, node.value), node)

    def store(self, target: ast.Subscript, value, node):
        buffer = self.eval_raw(target.value)
        if not isinstance(buffer, N.Buffer):
            raise self.error("only buffer elements can be assigned to in a kernel", target)
        items = self.subscript_items(target)
        if any(isinstance(i, ast.Slice) for i in items):
            raise self.error(
                "assigning to a slice is not supported; use T.fill, T.copy or a T.Parallel loop over the elements",
                target,
            )
        indices = tuple(self.index(i) for i in items)
        self.check_indices(buffer, indices, target)
        value = E.as_expr(self.scalar(value, node), self.span(node), like=buffer.dtype)
        return [N.Store(buffer, indices, value, self.span(node))]

    def store_var(self, buffer: N.Buffer, value, node):
        value = E.as_expr(self.scalar(value, node), self.span(node), like=buffer.dtype)
        zero = E.const(0, "int32", self.span(node))
        return [N.Store(buffer, (zero,), value, self.span(node))]

    def alloc(self, target: ast.Name, call: ast.Call, node):
        func = self.eval(call.func)
        name = func.__tile_intrinsic__
        scope = ALLOC_SCOPES[name]
        if scope == "global" and self.in_kernel:
            raise self.error(
                "T.alloc_global must come before the `with T.Kernel(...)` blocks: it is "
                "scratch memory the kernels of this prim_func share",
                node,
            )
        if scope != "global" and not self.in_kernel:
            raise self.error(
                f"T.{name} must be inside `with T.Kernel(...)`: shared, fragment, local "
                "and var buffers belong to one block",
                node,
            )
        args = self.bind_arguments(func, call, name)
        dtype = self.dtype(args["dtype"])
        shape = (1,) if scope == "var" else self.shape(args["shape"], "the shape of " + name)
        buf = N.Buffer(self.fresh(target.id), shape, dtype, scope, self.span(node))
        self.scopes.bind(target.id, buf, self.span(target))
        stmts = [N.Alloc(buf, self.span(node))]
        if scope == "var" and args.get("init") is not None:
            stmts += self.store_var(buf, self.eval(args["init"]), node)
        return stmts

    # ------------------------------------------------------------------ control flow

    def stmt_If(self, node: ast.If):
        split = self.thread_split(node.test)
        if split is not None:  # a thread-group split: resolved (or made per-thread code) by simt.py
            stmt = N.If(
                E.to_bool(self.expr(node.test)),
                self.body(node.body, "if"),
                self.body(node.orelse, "if"),
                self.span(node),
            )
            self.thread_bindings.splits[id(stmt)] = (stmt, *split)
            return [stmt]
        test = self.scalar(self.eval(node.test), node.test)
        if not is_ir(test):
            return list(self.body(node.body if test else node.orelse))
        then_body = self.body(node.body, "if")
        else_body = self.body(node.orelse, "if")
        return [N.If(E.to_bool(test), then_body, else_body, self.span(node))]

    def stmt_While(self, node: ast.While):
        """`while cond:` in a kernel: a run-time loop whose condition is re-read every iteration."""
        if node.orelse:
            raise self.error("unsupported Python construct in a kernel: while-else", node)
        if not self.in_kernel:
            raise self.error("a `while` loop belongs inside `with T.Kernel(...)`", node)
        test = self.scalar(self.eval(node.test), node.test)
        if not is_ir(test):
            raise self.error(
                f"the condition of a kernel `while` loop must be a run-time value (read from a "
                f"buffer or a T.alloc_var), got {E.describe(test)}: a Python-level condition would "
                f"be evaluated once, while parsing; keep the loop state in a T.alloc_var",
                node.test,
            )
        self.scopes.push("while loop")
        try:
            body = self.body(node.body)
        finally:
            self.scopes.pop()
        return [N.While(E.to_bool(test), body, self.span(node))]

    def thread_split(self, test) -> Optional[Tuple[bool, bool]]:
        """For `T.get_thread_binding(dim) <op> c` (c known at parse time): whether some threads
        of the block take the `if` branch and whether some take the `else` branch; else None."""
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
            return None
        sides = ((test.left, test.comparators[0], False), (test.comparators[0], test.left, True))
        for call, other, flipped in sides:
            if not isinstance(call, ast.Call):
                continue
            func = self.eval(call.func)
            if getattr(func, "__tile_intrinsic__", None) != "get_thread_binding":
                continue
            if any(scope.kind == "parallel" for scope in self.scopes.stack):
                raise self.error("a thread-group split cannot be inside T.Parallel", test)
            dim = self.py_int(self.bind_arguments(func, call, "get_thread_binding")["dim"], "dim", minimum=0)
            threads = self.kernel_threads[dim] if dim < len(self.kernel_threads) else 1
            mark = len(self.pending)
            bound = self.eval(other)
            if is_ir(bound):  # a run-time bound: per-thread code (simt.py), the test evaluated again
                del self.pending[mark:]
                return None
            if isinstance(bound, bool) or not isinstance(bound, (int, float)):
                raise self.error(f"a thread-group split compares with a number, got {bound!r}", other)
            compare = COMPARE_OPS[type(test.ops[0])][1]
            taken = sum(1 for t in range(threads) if (compare(bound, t) if flipped else compare(t, bound)))
            return taken > 0, taken < threads
        return None

    def stmt_With(self, node: ast.With):
        if len(node.items) != 1:
            raise self.error("a kernel `with` takes exactly one T.Kernel(...)", node)
        item = node.items[0]
        call = item.context_expr
        func = self.eval(call.func) if isinstance(call, ast.Call) else None
        if not isinstance(call, ast.Call) or getattr(func, "__tile_intrinsic__", None) != "Kernel":
            raise self.error("the only `with` in a kernel is `with T.Kernel(...) as ...`", node)
        if self.in_kernel:
            raise self.error("T.Kernel cannot be nested", node)
        args = self.bind_arguments(func, call, "Kernel")
        grid = args["blocks"]
        if not 1 <= len(grid) <= 3:
            raise self.error(f"T.Kernel takes 1 to 3 grid dimensions, got {len(grid)}", call)
        grid_exprs = tuple(self.grid_extent(g) for g in grid)
        threads = self.threads(args["threads"])
        names = self.kernel_names(item.optional_vars, len(grid), node)
        self.in_kernel = True
        self.kernel_threads = threads
        self.thread_bindings = ThreadBindings(threads)
        self.scopes.push("kernel")
        try:
            block_vars = tuple(self.new_var(n, "int32", t) for n, t in names)
            body = finish_kernel_body(self.body(node.body), self.thread_bindings, self.fresh, self.source)
        finally:
            self.scopes.pop()
            self.in_kernel = False
        return [N.Kernel(grid_exprs, block_vars, threads, body, self.span(call))]

    def thread_index(self, dim: int, node) -> N.Expr:
        """`T.get_thread_binding(dim)`: the thread's index along `dim` of threads= (a placeholder
        that simt.py rewrites), or 0 along a dimension with one thread."""
        if not self.in_kernel:
            raise self.error("T.get_thread_binding() must be inside `with T.Kernel(...)`", node)
        if any(scope.kind == "parallel" for scope in self.scopes.stack):
            raise self.error(
                "T.get_thread_binding() cannot be used inside T.Parallel: its iterations are already "
                "spread over the block's threads; write per-thread code with T.serial loops outside it",
                node,
            )
        threads = self.kernel_threads[dim] if dim < len(self.kernel_threads) else 1
        if threads == 1:
            return E.const(0, "int32", self.span(node))
        var = self.thread_bindings.vars.get(dim)
        if var is None:
            var = N.Var(self.fresh(f"thread_index_{dim}"), "int32", self.span(node))
            self.thread_bindings.vars[dim] = var
        return dataclasses.replace(var, span=self.span(node))

    def stmt_op_sync_threads(self, args, node):
        return [N.Hint(SYNC_HINT, (), (), self.span(node))]

    def grid_extent(self, node):
        value = self.eval(node)
        if isinstance(value, int) and not isinstance(value, bool) and value <= 0:
            raise self.error(f"a grid dimension must be positive, got {value}", node)
        return self.index(Evaluated(value, getattr(node, "node", node)))

    def threads(self, node):
        value = self.py_value(node, "threads")
        dims = tuple(value) if isinstance(value, (tuple, list)) else (value,)
        if not 1 <= len(dims) <= 3 or any(isinstance(d, bool) or not isinstance(d, int) or d <= 0 for d in dims):
            raise self.error(f"threads must be a positive int or 1-3 positive ints, got {value!r}", node)
        return dims

    def kernel_names(self, target, ndim: int, node):
        """(name, ast node) for each block index of `with T.Kernel(...) as target`."""
        if target is None:
            return [(n, node) for n in ("bx", "by", "bz")[:ndim]]
        elts = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
        names = [t for t in elts if isinstance(t, ast.Name)]
        if len(names) != len(elts):
            raise self.error("the block indices must be names: `as bx` or `as (bx, by)`", target)
        if len(elts) != ndim:
            raise self.error(f"T.Kernel has {ndim} grid dimension(s) but {len(elts)} block index name(s)", target)
        return [(t.id, t) for t in names]

    # ------------------------------------------------------------------ loops

    def stmt_For(self, node: ast.For):
        if node.orelse:
            raise self.error("unsupported Python construct in a kernel: for-else", node)
        it = node.iter
        if isinstance(it, ast.Call):
            func = self.eval(it.func)
            name = getattr(func, "__tile_intrinsic__", None)
            if name == "Parallel":
                return self.parallel_loop(node, self.bind_arguments(func, it, name))
            if name == "Persistent":
                return self.persistent_loop(node, self.bind_arguments(func, it, name))
            if name in LOOP_KINDS:
                return self.serial_loop(node, LOOP_KINDS[name], self.bind_arguments(func, it, name))
            if func is builtins.range:
                return self.range_loop(node, it)
        return self.python_loop(node)

    def loop_target(self, node: ast.For) -> ast.Name:
        if not isinstance(node.target, ast.Name):
            raise self.error("the loop variable must be a single name", node.target)
        return node.target

    def range_loop(self, node: ast.For, call: ast.Call):
        if call.keywords or not 1 <= len(call.args) <= 3:
            raise self.error("range() takes 1 to 3 positional arguments", call)
        args = {
            "start": call.args[0],
            "stop": call.args[1] if len(call.args) > 1 else None,
            "step": call.args[2] if len(call.args) > 2 else None,
        }
        return self.serial_loop(node, "serial", args)

    def serial_loop(self, node: ast.For, kind: str, args):
        if args.get("step") is not None:
            step = self.eval(args["step"])
            if is_ir(step) or step != 1:
                raise self.error(
                    f"loops with a step other than 1 are not supported (got step "
                    f"{E.describe(step) if is_ir(step) else step}); loop over the "
                    "count and multiply instead",
                    args["step"],
                )
        begin, extent = self.loop_bounds(args["start"], args["stop"])
        stages = 0
        if kind == "pipelined":
            stages = self.py_int(args["num_stages"], "num_stages", minimum=0)
        target = self.loop_target(node)
        self.scopes.push("loop")
        try:
            var = self.new_var(target.id, extent.dtype, target)
            body = self.body(node.body)
        finally:
            self.scopes.pop()
        return [N.For(var, begin, extent, kind, body, stages, self.span(node))]

    def loop_bounds(self, start, stop):
        """(begin, extent) of `(start)` or `(start, stop)`; `a, a + e` gives extent e exactly."""
        if stop is None:
            return E.const(0, "int32", self.span(start)), self.index(start)
        a, b = self.eval(start), self.eval(stop)
        if not is_ir(a) and not is_ir(b):
            extent = self.python_op(lambda: b - a, (), stop)
            return self.index(Evaluated(a, start)), self.index(Evaluated(extent, stop))
        begin, end = self.index(Evaluated(a, start)), self.index(Evaluated(b, stop))
        if isinstance(end, N.BinOp) and end.op == "+" and end.a == begin:
            return begin, end.b
        return begin, E.binary("-", end, begin, self.span(stop))

    def parallel_loop(self, node: ast.For, args):
        extents = tuple(self.py_int(e, "a T.Parallel extent", minimum=1) for e in args["extents"])
        if not extents:
            raise self.error("T.Parallel needs at least one extent", node.iter)
        elts = node.target.elts if isinstance(node.target, (ast.Tuple, ast.List)) else [node.target]
        targets = [t for t in elts if isinstance(t, ast.Name)]
        if len(targets) != len(elts) or len(targets) != len(extents):
            raise self.error(
                f"T.Parallel with {len(extents)} extent(s) needs {len(extents)} loop variable name(s)", node.target
            )
        self.scopes.push("parallel")
        try:
            loop_vars = tuple(self.new_var(t.id, "int32", t) for t in targets)
            body = self.body(node.body)
        finally:
            self.scopes.pop()
        return [N.Parallel(loop_vars, extents, body, self.span(node))]

    def persistent_loop(self, node: ast.For, args):
        """`for v0, .., vn in T.Persistent(domain, wave_size, index, group_size=8)` as a serial loop
        over the waves w: tile t = w * wave_size + index of the domain grouped as
        [ceildiv(last, g), d0, .., d(n-2), g] (row-major, g = max(1, min(group_size, last))), its
        coordinates bound to the loop names, the body run when t is inside the grouped domain and
        the last coordinate inside the domain (docs/semantics.md, TileLang's definition)."""
        span = self.span(node)

        def b(op, x, y):
            return E.binary(op, x, y, span)

        def ceildiv(x, y):
            return b("//", b("-", b("+", x, y), 1), y)

        values = self.eval(args["domain"])
        if not isinstance(values, (list, tuple)) or not values:
            raise self.error(
                "T.Persistent needs a non-empty list of tile counts, e.g. [T.ceildiv(M, bm), T.ceildiv(N, bn)]",
                args["domain"],
            )
        try:
            domain = [E.index_expr(v, span) for v in values]
        except E.ExprTypeError as exc:
            raise self.error(str(exc), args["domain"]) from None
        wave, index = self.index(args["wave_size"]), self.index(args["index"])
        group_node = args.get("group_size")
        group = self.index(group_node) if group_node is not None else E.const(8, "int32", span)
        group = b("max", 1, b("min", group, domain[-1]))
        grouped = [ceildiv(domain[-1], group)] + domain[:-1] + [group]
        padded = grouped[0]
        for g in grouped[1:]:
            padded = b("*", padded, g)
        elts = node.target.elts if isinstance(node.target, (ast.Tuple, ast.List)) else [node.target]
        targets = [t for t in elts if isinstance(t, ast.Name)]
        if len(targets) != len(elts) or len(targets) != len(domain):
            raise self.error(
                f"T.Persistent over {len(domain)} dimension(s) needs {len(domain)} loop variable name(s)", node.target
            )
        wave_var = N.Var(self.fresh("persistent_wave"), "int32", span)
        tile = N.Var(self.fresh("persistent_tile"), "int32", span)
        idxs: List[N.Expr] = [E.const(0, "int32", span)] * len(grouped)
        rem: N.Expr = tile
        for i in range(len(grouped) - 1, 0, -1):
            idxs[i], rem = b("%", rem, grouped[i]), b("//", rem, grouped[i])
        idxs[0] = rem
        coords = idxs[1:-1] + [b("+", b("*", idxs[0], group), idxs[-1])]
        self.scopes.push("loop")
        try:
            lets: List[N.Stmt] = [N.Let(tile, b("+", b("*", wave_var, wave), index), span)]
            for t, value in zip(targets, coords):  # each at its name's position in the source
                lets.append(N.Let(self.new_var(t.id, "int32", t), value, self.span(t)))
            inside = b("and", b("<", tile, padded), b("<", coords[-1], domain[-1]))
            body = self.body(node.body)
        finally:
            self.scopes.pop()
        stmts = tuple(lets) + (N.If(inside, body, (), span),)
        return [N.For(wave_var, E.const(0, "int32", span), ceildiv(padded, wave), "serial", stmts, 0, span)]

    def python_loop(self, node: ast.For):
        """`for x in <Python iterable>`: unrolled at parse time."""
        values = self.py_value(node.iter, "the iterable of a Python for loop")
        try:
            values = list(values)
        except TypeError:
            raise self.error(
                f"cannot loop over {E.describe(values)}; use range, T.serial, T.Parallel, T.Pipelined or T.unroll",
                node.iter,
            ) from None
        out = []
        for value in values:
            out.extend(self.assign_target(node.target, value, node))
            out.extend(self.body(node.body))
        return out

    def assign_target(self, target, value, node):
        if isinstance(target, ast.Name):
            self.scopes.bind(target.id, value, self.span(target))
            return []
        if isinstance(target, (ast.Tuple, ast.List)):
            values = list(value)
            if len(values) != len(target.elts):
                raise self.error(f"cannot unpack {len(values)} values into {len(target.elts)} names", target)
            return [s for t, v in zip(target.elts, values) for s in self.assign_target(t, v, node)]
        raise self.unsupported(target)


# ----------------------------------------------------------------------------- entry points


def _find_function(tree: ast.AST, name: str, first_line: int):
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            lines = [node.lineno] + [d.lineno for d in node.decorator_list]
            if first_line in lines:
                return node
    return None


@functools.lru_cache(maxsize=32)
def _parse_file(filename: str, source: str) -> ast.Module:
    """The AST of a source file (cached: a factory re-parses its kernel on every call)."""
    return ast.parse(source, filename)


MAX_EXPR_DEPTH = 128  # nested operations in one expression (~150 is where the first backend runs out of stack)


def check_expression_depth(node: ast.AST, filename: str, source: str) -> None:
    """Refuse an expression nested deeper than MAX_EXPR_DEPTH (e.g. hundreds of chained `+`), with
    the line, before any recursive pass or backend meets it (never a RecursionError)."""
    stack = [(node, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, ast.expr):
            depth += 1
            if depth > MAX_EXPR_DEPTH:
                raise TileCompileError(
                    f"expression nested more than {MAX_EXPR_DEPTH} operations deep; split it into several "
                    f"statements (e.g. accumulate partial sums in a T.alloc_var)",
                    N.Span(filename, item.lineno, item.col_offset),
                    source,
                )
        else:
            depth = 0
        stack.extend((child, depth) for child in ast.iter_child_nodes(item))


def _environment(func, caller_locals) -> dict:
    """Names visible to the kernel body: builtins < globals < the factory's locals < closure."""
    env = dict(vars(builtins))
    env.update(func.__globals__)
    if caller_locals:
        env.update(caller_locals)
    for name, cell in zip(func.__code__.co_freevars, func.__closure__ or ()):
        try:
            env[name] = cell.cell_contents
        except ValueError:  # a name assigned later in the enclosing function
            continue
    return env


def parse_function(func, caller_locals=None) -> N.PrimFunc:
    """Parse a Python function decorated with `@T.prim_func` into a PrimFunc."""
    code = getattr(func, "__code__", None)
    if code is None:
        raise TypeError(f"@T.prim_func decorates a function, got {func!r}")
    filename = code.co_filename
    lines = linecache.getlines(filename, func.__globals__)
    source = "".join(lines)
    if not source:
        raise TileCompileError(
            f"cannot read the source of {func.__name__} from {filename}; @T.prim_func needs the function's source file",
            N.Span(filename, code.co_firstlineno),
        )
    try:
        tree = _parse_file(filename, source)
    except SyntaxError as exc:
        raise TileCompileError(
            f"cannot parse {filename}: {exc.msg}", N.Span(filename, exc.lineno or 0, (exc.offset or 1) - 1), source
        ) from None
    node = _find_function(tree, func.__name__, code.co_firstlineno)
    if node is None:
        raise TileCompileError(
            f"cannot find the definition of {func.__name__} in {filename} "
            "(was the file changed after it was imported?)",
            N.Span(filename, code.co_firstlineno),
            source,
        )
    check_expression_depth(node, filename, source)
    prim = Parser(
        node, filename, source, _environment(func, caller_locals), getattr(func, "__annotations__", {})
    ).parse()
    _run_type_check(prim)
    return prim


def _run_type_check(func: N.PrimFunc) -> None:
    """Surface type/shape errors at definition when the passes package provides the check."""
    if importlib.util.find_spec("tilecore.passes.check_types") is None:
        return
    from ..passes import check_types

    check = getattr(check_types, "check", None)
    if check is not None:
        check(func)


_source_counter = itertools.count()


def parse_source(text: str, name=None, env=None) -> N.PrimFunc:
    """Run DSL source text (as written by the printer) and return its PrimFunc.

    `name` picks the function when the text defines several; `env` adds
    names to the module namespace the text runs in.
    """
    filename = f"<tilecore-source-{next(_source_counter)}>"
    lines = text.splitlines(keepends=True)
    linecache.cache[filename] = (len(text), None, lines, filename)
    namespace = {"__name__": "__tilecore_source__", **(env or {})}
    try:
        exec(compile(text, filename, "exec", dont_inherit=True), namespace)
    finally:
        linecache.cache.pop(filename, None)
    funcs = {k: v for k, v in namespace.items() if isinstance(v, N.PrimFunc)}
    if name is not None:
        return funcs[name]
    if len(funcs) != 1:
        raise ValueError(f"the source defines {len(funcs)} prim_funcs; pass name=")
    return next(iter(funcs.values()))
