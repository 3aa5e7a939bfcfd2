"""The layout-inference fixpoint engine; the per-op rules come from the backend.

Guarantees:
* rules are looked up by statement class name ("Gemm", "Copy", "Reduce",
  "Parallel", ...); a rule `(stmt, layouts, ctx) -> {buffer_name: layout}`
  sees the layouts known so far and returns the layouts the op implies;
* the engine sweeps the kernel body in program order, merging each proposed
  layout into what is known (`merge_layouts`), until a whole sweep changes
  nothing; statements without a rule are skipped, so with no rules (the
  reference backend) the pass is a no-op that records an empty result;
* two incompatible layouts for one buffer are a TileCompileError at the op
  that proposed the second one, naming both layouts and where the first came
  from; a rule set that keeps changing layouts (never converges) is an error
  too, never an endless loop;
* the function itself is unchanged: `ctx.analyses["layout"]` is a LayoutResult
  (buffer name -> layout, and which statement decided each).

Rules come from, in order (later ones override): the plugin hook
`tilecore_layout_rules(backend, rules)`, `ctx.options["layout_rules"]`, and
the `rules` given to LayoutInferencePass(rules=...).

Layouts are any hashable values with equality; a layout may define
`merge(other) -> layout | None` to combine with a compatible one (None: conflict).
FragmentLayout is a generic value type for "which thread holds which element".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from ..diagnostics import TileCompileError
from ..ir import nodes as N
from ..ir.visitor import substitute, walk_stmts

Rule = Callable[[N.Stmt, Mapping[str, Any], Any], Optional[Mapping[str, Any]]]


# ----------------------------------------------------------------------------- layout values


class Layout:
    """Base class for layouts: value equality; merge is equality unless overridden."""

    def merge(self, other: "Layout") -> Optional["Layout"]:
        return self if self == other else None


@dataclass(frozen=True)
class FragmentLayout(Layout):
    """How a tile is spread over threads, as index maps over the tile's shape.

    For an element at index `vars` (one Var per dimension of `shape`),
    `thread` gives the owning thread and `local` its index inside that
    thread's registers. `replicate` > 1 means each element is held by that many
    threads (thread + k * thread_extent for k < replicate), as after a
    reduction broadcast.
    """

    shape: Tuple[int, ...]
    vars: Tuple[N.Var, ...]
    thread: N.Expr
    local: Tuple[N.Expr, ...]
    replicate: int = 1
    thread_extent: int = 0

    def apply(self, indices) -> Tuple[int, Tuple[int, ...]]:
        """(thread, local indices) holding the element at integer `indices`."""
        from .simplify import as_int

        mapping = {v.name: N.Const(int(i), v.dtype) for v, i in zip(self.vars, indices)}
        thread = as_int(substitute(self.thread, mapping))
        found = [as_int(substitute(e, mapping)) for e in self.local]
        local = tuple(x for x in found if x is not None)
        if thread is None or len(local) != len(found):
            raise ValueError(f"layout index map does not evaluate to integers at {tuple(indices)}")
        return thread, local

    def is_bijective(self) -> bool:
        """Whether distinct elements land in distinct (thread, local) slots (checked exhaustively)."""
        import itertools

        seen = set()
        for idx in itertools.product(*(range(s) for s in self.shape)):
            slot = self.apply(idx)
            if slot in seen:
                return False
            seen.add(slot)
        return True

    def merge(self, other):
        if self == other:
            return self
        if (
            isinstance(other, FragmentLayout)
            and self.shape == other.shape
            and self.thread == other.thread
            and self.local == other.local
            and self.thread_extent == other.thread_extent
        ):
            # the same placement, replicated more or less: the wider replication serves both
            return self if self.replicate >= other.replicate else other
        return None


def merge_layouts(old: Any, new: Any) -> Optional[Any]:
    """Combine two layouts proposed for one buffer; None when they conflict."""
    if old == new:
        return old
    merge = getattr(old, "merge", None)
    if merge is not None:
        merged = merge(new)
        if merged is not None:
            return merged
    merge = getattr(new, "merge", None)
    if merge is not None:
        return merge(old)
    return None


# ----------------------------------------------------------------------------- the engine


@dataclass
class LayoutResult:
    """Inferred layouts by buffer name, the statement that decided each, and sweep count."""

    layouts: Dict[str, Any] = field(default_factory=dict)
    decided_by: Dict[str, N.Stmt] = field(default_factory=dict)
    iterations: int = 0

    def __getitem__(self, name: str):
        return self.layouts[name]

    def __contains__(self, name: str) -> bool:
        return name in self.layouts

    def get(self, name: str, default=None):
        return self.layouts.get(name, default)


def _describe(stmt: N.Stmt) -> str:
    line = stmt.span.line
    return f"{type(stmt).__name__} at line {line}" if line else type(stmt).__name__


def infer_layouts(
    func: N.PrimFunc, rules: Mapping[str, Rule], ctx=None, max_sweeps: Optional[int] = None
) -> LayoutResult:
    """Run the fixpoint; raise TileCompileError on a conflict or without convergence."""
    result = LayoutResult()
    source = getattr(ctx, "source", "") or func.source
    if not rules:
        return result
    stmts = [s for s in walk_stmts(func.body) if type(s).__name__ in rules]
    if not stmts:
        return result
    # A monotone rule set changes each buffer's layout a bounded number of
    # times; this cap only catches rules that oscillate.
    limit = max_sweeps if max_sweeps is not None else 2 * len(stmts) + 8
    while True:
        result.iterations += 1
        changed = False
        for stmt in stmts:
            proposed = rules[type(stmt).__name__](stmt, dict(result.layouts), ctx) or {}
            for name, layout in proposed.items():
                old = result.layouts.get(name)
                if old is None:
                    result.layouts[name] = layout
                    result.decided_by[name] = stmt
                    changed = True
                    continue
                merged = merge_layouts(old, layout)
                if merged is None:
                    raise TileCompileError(
                        f"layout conflict for {name}: this op needs {layout!r} but {name} already has "
                        f"{old!r} (from {_describe(result.decided_by[name])})",
                        stmt.span,
                        source,
                    )
                if merged != old:
                    result.layouts[name] = merged
                    result.decided_by[name] = stmt
                    changed = True
        if not changed:
            return result
        if result.iterations >= limit:
            raise TileCompileError(
                f"layout inference did not converge after {result.iterations} sweeps "
                f"(the backend's layout rules keep changing their answer)",
                func.kernel.span if any(isinstance(s, N.Kernel) for s in func.body) else func.span,
                source,
            )


def collect_rules(
    backend, options: Optional[Mapping[str, Any]] = None, extra: Optional[Mapping[str, Rule]] = None
) -> Dict[str, Rule]:
    """Rules from the plugin hook, then ctx options, then `extra` (later wins)."""
    rules: Dict[str, Rule] = {}
    if backend is not None:
        from ..plugin.manager import get_plugin_manager

        get_plugin_manager().call(
            "tilecore_layout_rules", what=f"for backend {backend.name!r}", backend=backend, rules=rules
        )
    if options and options.get("layout_rules"):
        rules.update(options["layout_rules"])
    if extra:
        rules.update(extra)
    return rules


class LayoutInferencePass:
    """Infer layouts with the backend's rules; results in ctx.analyses["layout"]."""

    name = "layout_inference"

    def __init__(self, rules: Optional[Mapping[str, Rule]] = None):
        self.rules = dict(rules or {})

    def __call__(self, func: N.PrimFunc, ctx) -> N.PrimFunc:
        rules = collect_rules(getattr(ctx, "backend", None), getattr(ctx, "options", None), self.rules)
        ctx.analyses["layout"] = infer_layouts(func, rules, ctx)
        return func


layout_inference = LayoutInferencePass()
