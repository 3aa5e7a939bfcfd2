"""Lowering rule tables and intrinsic tables, built from the plugins' hooks.

A backend built on the lowering toolkit (`tilecore.lowering`) lowers each tile op
by trying an ordered list of rules: the rules that plugins contributed through
`tilecore_lowering_rules`, then the toolkit's portable lowering. A rule may decline
an instance (return `NotImplemented`); the next rule is tried. So the choice
between, say, two tensor-core GEMMs of one vendor and a portable loop is an ordered
list that a third party can read and extend (`RuleTable.describe()`).

Pure Python: importing this does not import TVM.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Tuple

if TYPE_CHECKING:  # documentation types only: importing them must not import TVM
    from ..ir import nodes as N
    from ..lowering.simt_plan import PlanContext
    from ..lowering.target import TargetDescription
    from .backend import Backend
    from .manager import TilecorePluginManager

# `rule(lowering, stmt)`: emits the statement and returns None, or returns NotImplemented.
Rule = Callable[[Any, Any], Any]

# The ops the SIMT toolkit dispatches through the rule table (statement class names, plus
# "Pipelined" for a `T.Pipelined` loop and "Kernel" for the grid / thread binding).
SIMT_OPS = ("Kernel", "Gemm", "Copy", "Fill", "Reduce", "Cumsum", "Atomic", "Print", "Pipelined")


class LoweringRule:
    """Base class of a lowering rule; a plain callable `rule(lowering, stmt)` works too.

    Subclass it when the rule must take part in planning (choose a gemm accumulator's
    register layout, claim the instances it will lower, change the shared-memory
    layout of its operands) before any code is emitted.
    """

    #: shown by `RuleTable.describe()`; defaults to the class name
    name: str = ""

    def accumulator_layout(
        self, gemm: N.Gemm, warps: int, prefer_rows: bool, existing: Any, target: TargetDescription
    ) -> Any:
        """The register layout this rule wants for `gemm`'s accumulator, or None.

        :param gemm: a `tilecore.ir.nodes.Gemm` whose accumulator is a register fragment.
        :param warps: warps per block (`threads // target.warp_size`).
        :param prefer_rows: whether a row reduction reads the accumulator (one warp per row
            block reduces without crossing warps).
        :param existing: the layout another gemm already gave this accumulator, or None.
        :param target: the `tilecore.lowering.target.TargetDescription`.
        :returns: a layout from `tilecore.lowering.simt_layout`, or None to leave the
            choice to the next rule. Only Gemm rules are asked.
        """
        return None

    def plan(self, ctx: PlanContext) -> None:
        """Refine the kernel plan before code is emitted (optional).

        :param ctx: a `tilecore.lowering.simt_plan.PlanContext` (`ctx.plan`, `ctx.kernel`,
            `ctx.threads`, `ctx.target`). Record what this rule will lower in
            `ctx.plan.claims[self.name]` and change only the layouts of buffers it lowers.
        :returns: None.
        """

    def __call__(self, lowering: Any, stmt: Any) -> Any:
        """Emit `stmt` with `lowering`'s IR builder, or return `NotImplemented` to decline.

        A rule must decide before it emits anything: a rule that declines leaves no trace.
        """
        return NotImplemented

    def issue(self, lowering: Any, stmt: Any, in_flight: int) -> Any:
        """Start `stmt` and return before it completes, or return `NotImplemented` to decline.

        A schedule that overlaps an asynchronous op with other work (a plugin's schedule may issue
        a gemm, let other threads use the matrix units, and only then wait) lowers the op through
        `issue` and later `retire`, trying the op's rules in the same order as `__call__`. The
        default runs `__call__` (the op completes at once).

        :param in_flight: how many of this op's asynchronous groups may still be running when
            `issue` returns (each `issue` starts one group).
        :returns: None, or `NotImplemented` to leave the op to the next rule.
        """
        return self(lowering, stmt)

    def retire(self, lowering: Any, stmt: Any) -> None:
        """Wait until `stmt`, started by this rule's `issue`, has completed and its results can be
        read (the default has nothing to wait for)."""
        return None


@dataclass(frozen=True)
class _Entry:
    priority: int
    order: int
    name: str
    rule: Rule


class RuleTable:
    """Ordered lowering rules per tile op (see the module docstring).

    `add(op, rule, priority=...)` inserts a rule: higher priority first, equal
    priorities in the order they were added. `table[op] = rule` replaces the op's
    rules with this one (what the cpu and npu backends' dict-style rules do).
    """

    def __init__(self) -> None:
        self._entries: Dict[str, List[_Entry]] = {}
        self._order = 0

    def add(self, op: str, rule: Rule, *, priority: int = 0, name: Optional[str] = None) -> None:
        """Add `rule` for tile op `op` (e.g. "Gemm"); vendors use priority 0, overrides a higher one."""
        if not callable(rule):
            raise TypeError(f"a lowering rule for {op!r} must be callable, got {rule!r}")
        self._order += 1
        label = name or getattr(rule, "name", "") or getattr(rule, "__name__", "") or type(rule).__name__
        entries = self._entries.setdefault(op, [])
        entries.append(_Entry(-priority, self._order, label, rule))
        entries.sort(key=lambda e: (e.priority, e.order))

    def __setitem__(self, op: str, rule: Rule) -> None:
        self._entries.pop(op, None)
        self.add(op, rule)

    def __getitem__(self, op: str) -> Tuple[Rule, ...]:
        return tuple(e.rule for e in self._entries.get(op, ()))

    def get(self, op: str, default: Optional[Rule] = None) -> Optional[Rule]:
        """The op's single highest-priority rule (the dict-style view), or `default`."""
        entries = self._entries.get(op)
        return entries[0].rule if entries else default

    def __contains__(self, op: object) -> bool:
        return isinstance(op, str) and bool(self._entries.get(op))

    def __iter__(self) -> Iterator[str]:
        return iter(op for op, entries in self._entries.items() if entries)

    def remove(self, op: str, name: str) -> None:
        """Drop the rule called `name` from `op` (KeyError when there is none)."""
        entries = self._entries.get(op, [])
        kept = [e for e in entries if e.name != name]
        if len(kept) == len(entries):
            raise KeyError(f"no lowering rule {name!r} for {op!r}; rules: {[e.name for e in entries]}")
        self._entries[op] = kept

    def all_rules(self) -> List[Rule]:
        """Every rule once, in op order then rule order (what planning walks)."""
        seen: set[int] = set()
        out: List[Rule] = []
        for op in sorted(self._entries, key=lambda o: (SIMT_OPS + (o,)).index(o)):
            for e in self._entries[op]:
                if id(e.rule) not in seen:
                    seen.add(id(e.rule))
                    out.append(e.rule)
        return out

    def describe(self) -> Dict[str, List[str]]:
        """{op: [rule name, ...]} in the order they are tried (the portable lowering comes last)."""
        return {op: [e.name for e in entries] for op, entries in self._entries.items() if entries}


def collect_lowering_tables(
    backend: Backend,
    manager: Optional[TilecorePluginManager] = None,
) -> Tuple[RuleTable, Dict[Tuple[str, Any], Any]]:
    """Run `tilecore_lowering_rules` and `tilecore_intrinsics` for `backend`.

    :param backend: the `tilecore.plugin.Backend` being compiled for.
    :param manager: the plugin manager (default: the process's).
    :returns: (RuleTable, intrinsic dict) as every plugin left them. An exception a hook
        raises propagates: a broken rule set is an error, never silently dropped.
    """
    if manager is None:
        from .manager import get_plugin_manager

        manager = get_plugin_manager()
    rules = RuleTable()
    table: Dict[Tuple[str, Any], Any] = {}
    manager.hook.tilecore_lowering_rules(backend=backend, rules=rules)
    manager.hook.tilecore_intrinsics(backend=backend, table=table)
    return rules, table
