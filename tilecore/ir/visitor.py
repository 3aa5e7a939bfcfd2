"""Generic traversal and rewriting of Tile IR (nodes are immutable dataclasses)."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

from . import nodes as N

_CHILD_CACHE: Dict[type, Tuple[str, ...]] = {}


def _child_fields(cls: type) -> Tuple[str, ...]:
    names = _CHILD_CACHE.get(cls)
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(cls) if f.name not in ("span", "source"))
        _CHILD_CACHE[cls] = names
    return names


def _is_node(x: object) -> bool:
    return dataclasses.is_dataclass(x) and not isinstance(x, type) and not isinstance(x, N.Span)


def children(node: Any) -> Iterator[Any]:
    """Direct child nodes (expressions, statements, buffers, regions) of `node`."""
    for name in _child_fields(type(node)):
        value = getattr(node, name)
        if _is_node(value):
            yield value
        elif isinstance(value, tuple):
            for item in value:
                if _is_node(item):
                    yield item
                elif isinstance(item, tuple):  # Hint params
                    continue


def walk(node: Any) -> Iterator[Any]:
    """Pre-order iteration over `node` and everything below it."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        kids = list(children(n))
        stack.extend(reversed(kids))


def walk_stmts(body: Iterable[N.Stmt]) -> Iterator[N.Stmt]:
    """Every statement in a body, pre-order, descending into nested bodies."""
    for s in body:
        yield s
        for name in ("body", "then_body", "else_body"):
            sub = getattr(s, name, None)
            if isinstance(sub, tuple):
                yield from walk_stmts(sub)


_DispatchCache = Dict[Tuple[str, type], Optional[Callable[..., Any]]]


def _dispatch_cache(owner: type) -> _DispatchCache:
    """`owner`'s own handler cache (made on first use; subclasses never share their parent's)."""
    cache: Optional[_DispatchCache] = owner.__dict__.get("_tile_dispatch_cache")
    if cache is None:
        cache = {}
        owner._tile_dispatch_cache = cache  # type: ignore[attr-defined]
    return cache


def dispatch_method(owner: type, prefix: str, node_type: type) -> Optional[Callable[..., Any]]:
    """`owner`'s function named `prefix + node_type.__name__`, or None; looked up once per class.

    The cache lives on `owner` itself (not in a module-level table), so visitor
    classes made on the fly are freed with their cache.
    """
    cache = _dispatch_cache(owner)
    key = (prefix, node_type)
    if key not in cache:
        cache[key] = getattr(owner, prefix + node_type.__name__, None)
    return cache[key]


class Dispatcher:
    """Base of every IR walk that handles node class `C` in a method named `<prefix>C`.

    One walk may use several prefixes (say `stmt_` and `expr_`). Handlers are
    found by the node's exact class name and cached per visitor class, so a
    dispatch costs one dict lookup.
    """

    _tile_dispatch_cache: _DispatchCache = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._tile_dispatch_cache = {}  # every visitor class caches its own handlers

    def handler(self, prefix: str, node: object) -> Optional[Callable[..., Any]]:
        """The unbound handler of `node` for `prefix` (call it as `h(self, node, ...)`), or None."""
        key = (prefix, type(node))
        try:
            return self._tile_dispatch_cache[key]
        except KeyError:
            return dispatch_method(type(self), prefix, type(node))

    def dispatch(self, prefix: str, node: object, *args: Any) -> Any:
        """Call `self.<prefix><ClassName>(node, *args)`; `no_handler` decides when there is none."""
        try:
            method = self._tile_dispatch_cache[(prefix, type(node))]
        except KeyError:
            method = dispatch_method(type(self), prefix, type(node))
        if method is None:
            return self.no_handler(prefix, node, *args)
        return method(self, node, *args)

    def no_handler(self, prefix: str, node: object, *args: Any) -> Any:
        """What `dispatch` does for a node class without a handler: a TypeError naming both."""
        raise TypeError(f"{type(self).__name__} has no {prefix}{type(node).__name__}")


class Transformer(Dispatcher):
    """Rebuilds a tree bottom-up; override `visit_<ClassName>` to rewrite nodes.

    A visit method receives the node with its children already transformed and
    returns the replacement. Statement visitors may return a tuple of
    statements, which is spliced into the enclosing body (an empty tuple
    deletes the statement).
    """

    def __call__(self, node: Any) -> Any:
        return self.visit(node)

    def visit(self, node: Any) -> Any:
        if isinstance(node, tuple):
            return self.visit_body(node)
        if not _is_node(node):
            return node
        node = self.generic(node)
        method = self.handler("visit_", node)
        return method(self, node) if method else node

    def visit_body(self, body: Iterable[Any]) -> Tuple[Any, ...]:
        out: List[Any] = []
        for s in body:
            r = self.visit(s)
            if isinstance(r, tuple):
                out.extend(r)
            elif r is not None:
                out.append(r)
        return tuple(out)

    def generic(self, node: Any) -> Any:
        changes: Dict[str, Any] = {}
        for name in _child_fields(type(node)):
            value = getattr(node, name)
            if _is_node(value):
                new = self.visit(value)
            elif isinstance(value, tuple) and value and any(_is_node(v) for v in value):
                if isinstance(value[0], N.Stmt):
                    new = self.visit_body(value)
                else:
                    new = tuple(self.visit(v) for v in value)
            else:
                continue
            if new is not value and new != value:
                changes[name] = new
        return dataclasses.replace(node, **changes) if changes else node


def substitute(node: Any, mapping: Dict[str, Any]) -> Any:
    """Replace Vars (by name) with expressions throughout `node`."""

    class _Sub(Transformer):
        def visit_Var(self, v: N.Var) -> Any:
            return mapping.get(v.name, v)

    return _Sub().visit(node)


def map_exprs(node: Any, fn: Callable[[N.Expr], Any]) -> Any:
    """Apply `fn` to every expression node bottom-up (fn returns a replacement or the node)."""

    class _Map(Transformer):
        def visit(self, n: Any) -> Any:
            r = super().visit(n)
            if isinstance(r, N.Expr):
                return fn(r)
            return r

    return _Map().visit(node)
