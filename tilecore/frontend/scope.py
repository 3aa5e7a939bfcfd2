"""Name bindings while parsing a kernel: Python values, IR variables and buffers.

A new scope opens for each run-time body (the kernel, a loop, a branch of a
run-time `if`); Python-level `if`/`for` stay in the current scope, as in Python.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ..ir import nodes as N

MISSING = object()


@dataclass
class Scope:
    """One body's bindings: name -> (value, span of the binding)."""

    kind: str  # "function", "kernel", "loop", "parallel", "if"
    bindings: Dict[str, Tuple[Any, N.Span]] = field(default_factory=dict)


class Scopes:
    """The stack of scopes plus the Python environment underneath it."""

    def __init__(self, env: Dict[str, Any]):
        self.env = env
        self.stack: List[Scope] = [Scope("function")]
        # names whose run-time body ended: name -> (kind of body, span of binding)
        self.expired: Dict[str, Tuple[str, N.Span]] = {}
        # names rebound inside a run-time `if` that also have an outer binding: after the
        # `if` their value depends on the branch taken, so reading them is an error
        self.diverged: Dict[str, N.Span] = {}

    def push(self, kind: str) -> None:
        self.stack.append(Scope(kind))

    def pop(self) -> None:
        scope = self.stack.pop()
        for name, (_, span) in scope.bindings.items():
            if self.find(name) is None:
                self.expired[name] = (scope.kind, span)
            else:
                self.diverged[name] = span

    @property
    def innermost(self) -> Scope:
        return self.stack[-1]

    def find(self, name: str) -> Optional[Scope]:
        """The innermost scope binding `name`, or None."""
        for scope in reversed(self.stack):
            if name in scope.bindings:
                return scope
        return None

    def lookup(self, name: str):
        """The bound value, the Python environment's value, or MISSING."""
        scope = self.find(name)
        if scope is not None:
            return scope.bindings[name][0]
        return self.env.get(name, MISSING)

    def binding_span(self, name: str) -> Optional[N.Span]:
        scope = self.find(name)
        return scope.bindings[name][1] if scope is not None else None

    def bind(self, name: str, value, span: N.Span) -> None:
        self.innermost.bindings[name] = (value, span)
        self.expired.pop(name, None)
        self.diverged.pop(name, None)

    def outer_runtime_kind(self, name: str) -> Optional[str]:
        """If binding `name` now would shadow a value from outside the current loop body
        (so it could not carry over to the next iteration), the kind of loop; else None.
        Rebinding inside an `if` is allowed; reading the name after the `if` is not."""
        kind = self.innermost.kind
        if kind in ("function", "kernel", "if") or name in self.innermost.bindings:
            return None
        return kind if self.find(name) is not None else None
