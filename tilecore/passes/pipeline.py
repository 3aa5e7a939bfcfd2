"""The pass pipeline: core passes in a fixed order, backend passes at named points.

Guarantees:
* core passes run in this order, with the named points between them:
    after_parse   fragment_extents   check_types   int4_storage   after_check   simplify   after_simplify
    bounds   after_bounds   check_features  loops  memory_plan
    layout_inference   after_layout   before_codegen
  (check_features runs after bounds because a proven copy no longer needs the
  "partial_tiles" feature);
* passes inserted at one point run in insertion order; `replace(name, pass_)`
  swaps a core pass for a backend's variant (e.g. MemoryPlanPass(multi_buffer=True));
* with `TILECORE_DUMP_IR=dir` (or the option `dump_ir`), the IR after every
  pass is written as `NN-passname.py` (DSL text, runnable) and
  `NN-passname.json` (the JSON form), `00-input.*` being the input;
* a pass that returns something other than a PrimFunc is a clear error naming
  the pass.

A pass is any callable `(func, ctx) -> func` with a `name` attribute (a plain
function's `__name__` is used when it has none).
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..ir import nodes as N

POINTS = ("after_parse", "after_check", "after_simplify", "after_bounds", "after_layout", "before_codegen")

Pass = Callable[[N.PrimFunc, "PassContext"], N.PrimFunc]


@dataclass
class PassContext:
    """What every pass sees besides the function.

    backend: the tilecore.plugin.Backend compiled for (None: no backend checks).
    target: the full target string ("cuda:sm_90a"). options: compile options.
    source: the user's file text (for diagnostics). analyses: results that
    passes leave for later passes and for codegen ("bounds", "memory_plan",
    "liveness", "layout", ...).
    """

    backend: Any = None
    target: Optional[str] = None
    options: Dict[str, Any] = field(default_factory=dict)
    source: str = ""
    analyses: Dict[str, Any] = field(default_factory=dict)


def pass_name(pass_) -> str:
    """The display name of a pass (its `name`, else its function name)."""
    name = getattr(pass_, "name", None) or getattr(pass_, "__name__", None) or type(pass_).__name__
    return str(name)


class Pipeline:
    """An ordered list of passes with named insertion points for backend passes."""

    def __init__(self, core: Optional[List[Tuple[str, Any]]] = None):
        # entries: ("point", name) markers and ("pass", callable), in order
        self._entries: List[Tuple[str, Any]] = []
        if core is not None:
            self._entries = list(core)
        self._slots: Dict[str, List[Pass]] = {p: [] for p in POINTS}

    # -- building

    def insert(self, point: str, pass_: Pass) -> None:
        """Run `pass_` at `point` (one of POINTS), after passes already inserted there."""
        if point not in POINTS:
            raise ValueError(f"unknown pipeline point {point!r}; expected one of {', '.join(POINTS)}")
        if not callable(pass_):
            raise TypeError(f"a pass must be a callable (func, ctx) -> func, got {pass_!r}")
        self._slots[point].append(pass_)

    def replace(self, name: str, pass_: Pass) -> None:
        """Run `pass_` instead of the core pass called `name` (same place in the order)."""
        if not callable(pass_):
            raise TypeError(f"a pass must be a callable (func, ctx) -> func, got {pass_!r}")
        for i, (kind, value) in enumerate(self._entries):
            if kind == "pass" and pass_name(value) == name:
                self._entries[i] = ("pass", pass_)
                return
        core = [pass_name(v) for k, v in self._entries if k == "pass"]
        raise ValueError(f"no core pass named {name!r}; the core passes are {', '.join(core)}")

    def passes(self) -> List[Pass]:
        """All passes in the order they run."""
        out: List[Pass] = []
        for kind, value in self._entries:
            if kind == "point":
                out.extend(self._slots[value])
            else:
                out.append(value)
        return out

    def names(self) -> List[str]:
        return [pass_name(p) for p in self.passes()]

    # -- running

    def run(self, func: N.PrimFunc, ctx: Optional[PassContext] = None) -> N.PrimFunc:
        """Run every pass in order and return the final function."""
        # the last step's function (or `func` when there is no pass)
        return functools.reduce(lambda _, step: step[1], self._run(func, ctx, keep=False), func)

    def trace(self, func: N.PrimFunc, ctx: Optional[PassContext] = None) -> List[Tuple[str, N.PrimFunc]]:
        """[("input", func), (pass_name, func_after_pass), ...] for `tile trace`.

        If a pass raises, the exception gets a `partial_trace` attribute with
        the steps that completed, so a trace can still show how far it got.
        """
        steps: List[Tuple[str, N.PrimFunc]] = []
        try:
            for step in self._run(func, ctx, keep=True):
                steps.append(step)
        except Exception as err:
            err.partial_trace = steps  # type: ignore[attr-defined]  # any exception a pass raises
            raise
        return steps

    def _run(self, func, ctx, keep):
        ctx = ctx if ctx is not None else PassContext(source=func.source)
        if not ctx.source:
            ctx.source = func.source
        dump_dir = ctx.options.get("dump_ir") or os.environ.get("TILECORE_DUMP_IR")
        if dump_dir:
            _dump(dump_dir, 0, "input", func)
        yield "input", func
        for index, pass_ in enumerate(self.passes(), start=1):
            name = pass_name(pass_)
            result = pass_(func, ctx)
            if not isinstance(result, N.PrimFunc):
                raise TypeError(f"pass {name!r} returned {type(result).__name__}, expected a PrimFunc")
            if result.source != func.source and not result.source:
                # dataclasses.replace keeps `source`; a pass that rebuilt the
                # function from scratch must not lose the user's text.
                import dataclasses

                result = dataclasses.replace(result, source=func.source)
            func = result
            if dump_dir:
                _dump(dump_dir, index, name, func)
            yield name, func


def _dump(directory: str, index: int, name: str, func: N.PrimFunc) -> None:
    """Write the IR after a pass as DSL text and JSON (each when its module exists)."""
    os.makedirs(directory, exist_ok=True)
    stem = os.path.join(directory, f"{index:02d}-{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}")
    try:
        from ..ir.printer import to_source
    except ImportError:  # the printer is optional here: dump a structural repr instead
        text = f"# tilecore.ir.printer is not available; structural dump\n{func!r}\n"
    else:
        text = to_source(func)
    where = f" ({func.span.file}:{func.span.line})" if func.span.line else ""
    # Which kernel this is: every compile writes the same file names into the folder.
    text = f"# {func.name}{where} after {'parsing' if index == 0 else 'pass ' + name}\n{text}"
    with open(stem + ".py", "w", encoding="utf-8") as f:
        f.write(text)
    try:
        from ..ir.serialize import dumps
    except ImportError:
        return
    with open(stem + ".json", "w", encoding="utf-8") as f:
        f.write(dumps(func))


def default_pipeline() -> Pipeline:
    """The core pipeline (see the module docstring for the order)."""
    from .bounds import bounds
    from .check_features import check_features
    from .check_types import check_types
    from .fragment_extents import fragment_extents
    from .int4_storage import int4_storage
    from .layout_inference import layout_inference
    from .loops import loops
    from .memory_plan import memory_plan
    from .simplify import simplify

    return Pipeline(
        [
            ("point", "after_parse"),
            ("pass", fragment_extents),
            ("pass", check_types),
            ("pass", int4_storage),
            ("point", "after_check"),
            ("pass", simplify),
            ("point", "after_simplify"),
            ("pass", bounds),
            ("point", "after_bounds"),
            ("pass", check_features),
            ("pass", loops),
            ("pass", memory_plan),
            ("pass", layout_inference),
            ("point", "after_layout"),
            ("point", "before_codegen"),
        ]
    )
