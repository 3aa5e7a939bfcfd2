"""Compile options: each backend declares the options its codegen reads, the core checks them.

A backend lists `Option`s in `Backend.options`; `tilecore.compile(f, target,
**options)` accepts exactly those plus the core's own (`CORE_OPTIONS`), checks
each value's type and allowed values, fills in the defaults, and hands the
result to the backend's codegen. The cache key is computed from that validated
dict, so a misspelled option (``sourse="asm"``) is an error naming the valid
ones instead of a silently different kernel, and two spellings of one value
share one cache entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterable, Optional, Tuple

from ..diagnostics import TileError


class OptionError(TileError):
    """An unknown compile option, or a value of the wrong type or outside its choices."""


@dataclass(frozen=True)
class Option:
    """One compile option: its name, Python type (bool, int, float or str), default, and
    optionally the values allowed and a one-line description for messages and docs.

    `declares`: capabilities that hold while the option is on (a true value) and not otherwise,
    e.g. ("fast_math",): math functions are then certified against the looser fast-math accuracy
    table (`tile conformance BACKEND --option NAME=true`)."""

    name: str
    type: type
    default: Any
    doc: str = ""
    choices: Tuple[Any, ...] = ()
    optional: bool = False  # None is also accepted (and means "not set")
    declares: Tuple[str, ...] = ()

    def describe(self) -> str:
        allowed = "|".join(repr(c) for c in self.choices) if self.choices else self.type.__name__
        return f"{self.name} ({allowed}, default {self.default!r})"

    def check(self, value: Any, backend_name: str) -> Any:
        """The value as the codegen receives it; raise OptionError when it does not fit."""
        if value is None and self.optional:
            return None
        ok = isinstance(value, self.type) and not (self.type is int and isinstance(value, bool))
        if self.type is float and isinstance(value, int) and not isinstance(value, bool):
            value, ok = float(value), True
        if not ok:
            raise OptionError(
                f"compile option {self.name}={value!r} for backend {backend_name!r} must be "
                f"a {self.type.__name__}, not {type(value).__name__}"
            )
        if self.choices and value not in self.choices:
            raise OptionError(
                f"compile option {self.name}={value!r} for backend {backend_name!r} must be "
                f"one of {', '.join(repr(c) for c in self.choices)}"
            )
        return value


# Options every backend accepts (handled by the core's pipeline).
CORE_OPTIONS: Tuple[Option, ...] = (
    Option("dump_ir", str, None, "write the IR after every pass into this folder", optional=True),
)
# Filled in by the core itself; never passed by the user as options.
RESERVED = ("target", "out_idx")


def validate_options(backend_name: str, declared: Optional[Iterable[Option]], given: Dict[str, Any]) -> Dict[str, Any]:
    """Every declared option with its checked value (defaults filled in); raise OptionError for
    an unknown name, naming the valid ones."""
    specs = {o.name: o for o in CORE_OPTIONS}
    specs.update({o.name: o for o in (declared or ())})
    out: Dict[str, Any] = {}
    for name, value in given.items():
        spec = specs.get(name)
        if spec is None:
            valid = ", ".join(specs[n].describe() for n in sorted(specs))
            why = " (it is set by compile's own argument)" if name in RESERVED else ""
            raise OptionError(
                f"unknown compile option {name!r} for backend {backend_name!r}{why}; valid options: {valid}"
            )
        out[name] = spec.check(value, backend_name)
    for name, spec in specs.items():
        out.setdefault(name, spec.default)
    return out
