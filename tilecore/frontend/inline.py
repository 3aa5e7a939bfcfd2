"""Calls inlined into the kernel: `@T.macro` functions, and Python helpers given kernel values.

    @T.macro
    def rescale(tile, factor):             # statements and values, inlined at every call
        for i, j in T.Parallel(4, 8):
            tile[i, j] = tile[i, j] * factor

    def allowed(i, j, block):              # a plain helper: run at parse time on Python values,
        return i // block >= j // block    # inlined when it is given kernel values

The callee's body is translated where it is called, in its own scope: its
parameters are bound to the call's arguments (buffers, kernel values or Python
values), and its names are looked up in its own closure and globals, as Python
would. A final `return value` gives the call's value; the statements before it are
emitted before the statement that makes the call. Recursion is an error.
"""

from __future__ import annotations

import ast
import inspect
from typing import Optional

from ..diagnostics import TileCompileError
from ..ir import nodes as N
from .evaluator import Evaluator
from .scope import Scopes

MAX_DEPTH = 32


def _is_inlinable(func) -> bool:
    return (
        inspect.isfunction(func)
        and not getattr(func, "__tile_intrinsic__", None)
        and not getattr(func, "__tile_type__", False)
    )


class InlineCalls(Evaluator):
    """Parser mixin: inline macros and helpers called with kernel values."""

    pending: list  # statements that must run before the current statement
    inline_depth: int = 0

    # What this mixin uses of the Parser (declarations; parser.Parser defines them).
    def fresh(self, base: str) -> str:
        """A new name starting with `base`."""
        raise NotImplementedError

    def body(self, stmts, scope_kind=None) -> N.Body:
        """The statements `stmts`, translated in a new scope."""
        raise NotImplementedError

    def python_call(self, func, node: ast.Call):
        if not _is_inlinable(func):
            return super().python_call(func, node)
        values = self._argument_values(node)
        if getattr(func, "__tile_macro__", False) or any(isinstance(v, N.Expr) for v in values):
            # the values just computed are reused: evaluating each argument again doubled the work
            # (and the pending statements) per nesting level, so 14 nested helper calls took minutes
            plain = [a for a in node.args if not isinstance(a, ast.Starred)] + [
                k.value for k in node.keywords if k.arg is not None
            ]
            known = {id(a): v for a, v in zip(plain, values)} if len(plain) == len(values) else {}
            return self.inline_call(func, node, known)
        if any(isinstance(v, N.Buffer) for v in values):
            # buffers only: a helper that reads .shape/.dtype runs in Python; one that uses
            # T.* operations on them (KernelOnlyError) is inlined
            from ..language.ops import KernelOnlyError

            args, kwargs = self.call_arguments(node)
            try:
                return func(*args, **kwargs)
            except KernelOnlyError:
                return self.inline_call(func, node)
            except TileCompileError:
                raise
            except Exception as exc:
                raise self.error(f"evaluating this at parse time failed: {type(exc).__name__}: {exc}", node) from None
        return super().python_call(func, node)

    def _argument_values(self, node: ast.Call) -> list:
        values = [self.eval(a.value if isinstance(a, ast.Starred) else a) for a in node.args]
        return values + [self.eval(k.value) for k in node.keywords if k.arg is not None]

    def inline_call(self, func, node: ast.Call, known: Optional[dict] = None):
        """Translate `func`'s body here; its statements go to `self.pending`, its value is returned.
        known: {id(argument AST node): its value} for arguments the caller already evaluated."""
        from .eager import function_node

        if self.inline_depth >= MAX_DEPTH:
            raise self.error(
                f"{func.__name__}() is inlined {MAX_DEPTH} levels deep: recursion cannot be inlined into a kernel", node
            )
        fn_node, filename, source = function_node(func)
        bound = self.bind_arguments(func, node, func.__name__)
        known = known or {}
        values = {
            name: known[id(value)] if id(value) in known else self.eval(value)  # in the caller's scope
            for name, value in bound.items()
        }
        from .parser import _environment

        saved = (self.scopes, self.filename, self.source)
        self.scopes = Scopes(_environment(func, None))
        self.filename, self.source = filename, source
        self.inline_depth += 1
        try:
            for name, value in values.items():
                self.scopes.bind(name, value, self.span(node))
            stmts = list(fn_node.body)
            result = None
            last = stmts[-1] if stmts else None
            ret = last if isinstance(last, ast.Return) else None
            if ret is not None:
                stmts.pop()
            for s in (n for st in stmts for n in ast.walk(st)):
                if isinstance(s, ast.Return):
                    raise self.error(
                        f"{func.__name__}(): only a final `return` can be inlined into "
                        "a kernel (write the value with T.if_then_else)",
                        s,
                    )
            self.pending.extend(self.body(stmts))
            if ret is not None and ret.value is not None:
                result = self.eval(ret.value)
                if isinstance(result, N.Expr) and not isinstance(result, (N.Const, N.Var)):
                    result = self._bind_result(result, func.__name__, ret)
        finally:
            self.scopes, self.filename, self.source = saved
            self.inline_depth -= 1
        return result

    def _bind_result(self, value: N.Expr, name: str, node):
        """A returned kernel value, bound to a name so it is computed once, where the call is."""
        var = N.Var(self.fresh(f"{name}_result"), value.dtype, self.span(node))
        self.pending.append(N.Let(var, value, self.span(node)))
        return var

    def flush_pending(self, method, node):
        """Run one statement's translation; statements inlined calls made come first."""
        saved, self.pending = self.pending, []
        try:
            stmts = method(node)
            return self.pending + list(stmts)
        finally:
            self.pending = saved


__all__ = ["InlineCalls"]
