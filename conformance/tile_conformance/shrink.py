"""Shrinking a failing program to a minimal one.

Programs come from hypothesis strategies as knobs; once one fails, it is
reduced with hypothesis's own shrinker: `hypothesis.find` over a strategy of
*smaller variants* of the failing knobs (each knob either keeps its failing
value or takes a simpler one: a subtree of the expression, a smaller extent or
tile, float32 instead of bfloat16, a loop kind without pipelining, ...) with
the condition "still fails the same way". hypothesis minimises towards the
simplest variants; the search is repeated from the result until nothing
shrinks further or the budget (backend runs, seconds) is spent. Every
candidate is a complete program run on the backend and on the reference
interpreter, so the minimal program is a real failing program, not a guess.
"""

from __future__ import annotations

import copy
import time
from typing import Callable, Dict, List, Optional, Tuple

from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample, Unsatisfiable

from . import exprs as X
from .programs import Unbuildable

_SIMPLER_CHOICES: Dict[str, List[object]] = {
    "loop": ["serial"],
    "stage": ["fragment", "direct"],
    "out_stage": ["fragment", "direct"],
    "src_scope": ["fragment"],
    "scope": ["fragment"],
    "a_scope": ["shared"],
    "mode": ["clear"],
    "form": ["point"],
    "kind": ["sum", "add", "max"],
    "num_stages": [1],
    "threads": [32, 128],
}
_FLAGS = ("dyn", "ta", "tb", "reverse", "inplace", "with_else", "use_var", "block_if", "swizzle", "print")
# and a copy's leading dimensions (rank 3 and 4) drop out, and the opt-in parts (an fp8 conversion, `while`)
_FALSE_FIRST = _FLAGS + ("batch", "heads") + ("fp8", "fp8_exact", "while")
_SIZES = ("M", "N", "K", "bm", "bn", "bk", "rows", "sub_rows")
_DTYPE_PREFERENCE = ("float32", "int32", "float16", "float64", "int8", "int64", "int16", "bfloat16", "uint8", "bool")


def _simpler_dtypes(d: str) -> List[str]:
    """Preferred dtypes of the same kind (float for float, int for int): no new conversions appear."""
    from tilecore.ir.types import is_float

    if d not in _DTYPE_PREFERENCE or d == "bool":
        return []
    return [x for x in _DTYPE_PREFERENCE[: _DTYPE_PREFERENCE.index(d)] if is_float(x) == is_float(d) and x != "bool"]


def _smaller_ints(v: int) -> List[int]:
    out = [1, 2, v // 2, v - 1]
    return sorted({x for x in out if 0 < x < v})


def _expr_variants(e) -> List:
    out = []
    if isinstance(e, list) and e[0] != "in":
        out.extend(X.subtrees(e))
        out.append(["in", 0])
    if isinstance(e, list) and e[0] == "in" and e[1] != 0:
        out.append(["in", 0])
    return out


def variants(knobs: dict) -> List[Tuple[str, list]]:
    """For each knob, the simpler values it may take (its current value excluded)."""
    out = []
    for key, value in knobs.items():
        if key in ("family", "input_seed", "allowed_dtypes"):
            continue
        cands: list = []
        if key == "expr":
            cands = _expr_variants(value)
        elif key in _FALSE_FIRST and value:
            cands = [False]
        elif key == "clear_accum" and not value:
            cands = [True]
        elif key in _SIZES and isinstance(value, int):
            cands = _smaller_ints(value)
        elif key in _SIMPLER_CHOICES:
            cands = [c for c in _SIMPLER_CHOICES[key] if c != value]
        elif key.endswith("dtype") and isinstance(value, str):
            cands = _simpler_dtypes(value)
        elif key in ("in_dtypes", "dtypes", "scopes", "forms") and isinstance(value, list):
            # lists: shorten (inputs) or simplify one element at a time
            if key == "in_dtypes" and len(value) > 1:
                cands.append(value[:1])
            for i, v in enumerate(value):
                simpler = {"scopes": ["fragment"], "forms": ["point"]}.get(key)
                if simpler is None:
                    simpler = _simpler_dtypes(v)
                for s in simpler:
                    if s != v:
                        cands.append(value[:i] + [s] + value[i + 1 :])
        elif key == "init" and value not in (0, 0.0):
            cands = [0]
        elif key == "thr" and value != 0.0:
            cands = [0.0]
        elif key == "fill_value" and value != 0:
            cands = [0]
        if cands:
            out.append((key, cands))
    return out


def _variant_space(knobs: dict):
    """(strategy, choices of the failing knobs) for the variants of `knobs`.

    Each knob is drawn with `st.sampled_from([simplest, ..., failing value])`;
    hypothesis shrinks a sampled_from towards its first element, so
    minimisation moves every knob as far towards simple as the failure allows.
    The failing knobs themselves are the choice sequence "last element of
    every list", which is stored in an in-memory example database so that
    hypothesis starts from the known failure instead of searching for one.
    """
    parts = []
    choices = []
    for key, cands in sorted(variants(knobs), key=lambda kv: kv[0]):
        elements = list(cands) + [knobs[key]]
        parts.append((key, st.sampled_from(elements)))
        choices.append(len(elements) - 1)

    @st.composite
    def strat(draw):
        k = copy.deepcopy(knobs)
        for key, part in parts:
            k[key] = draw(part)
        return k

    return strat(), tuple(choices)


class Shrinker:
    """Minimise failing knobs under a budget; `check(knobs) -> bool` says "still fails the same way"."""

    def __init__(self, check: Callable[[dict], bool], max_runs: int = 80, max_seconds: float = 120.0, seed: int = 0):
        self.check = check
        self.max_runs = max_runs
        self.max_seconds = max_seconds
        self.seed = seed
        self.runs = 0
        self.method = ""
        self.seconds = 0.0
        self._memo: Dict[str, bool] = {}
        self._deadline = 0.0

    def _key(self, knobs: dict) -> str:
        return repr(sorted(knobs.items()))

    def _fails(self, knobs: dict) -> bool:
        key = self._key(knobs)
        if key in self._memo:
            return self._memo[key]
        if self.runs >= self.max_runs or time.monotonic() > self._deadline:
            return False
        self.runs += 1
        try:
            result = bool(self.check(knobs))
        except Unbuildable:
            result = False
        self._memo[key] = result
        return result

    def _hypothesis_round(self, best: dict, round_: int) -> Optional[dict]:
        import random

        from hypothesis.database import InMemoryExampleDatabase, choices_to_bytes

        strategy, choices = _variant_space(best)
        if not choices:
            return None
        db = InMemoryExampleDatabase()
        key = b"tile-conformance-shrink"
        db.save(key, choices_to_bytes(choices))
        try:
            return find(
                strategy,
                self._fails,
                settings=settings(
                    database=db,
                    max_examples=max(1, self.max_runs),
                    deadline=None,
                    phases=[Phase.reuse, Phase.generate, Phase.shrink],
                    suppress_health_check=list(HealthCheck),
                ),
                random=random.Random(self.seed + round_),
                database_key=key,
            )
        except (NoSuchExample, Unsatisfiable):
            return None

    def _greedy_round(self, best: dict) -> Optional[dict]:
        for key, cands in variants(best):
            for c in cands:
                k = copy.deepcopy(best)
                k[key] = c
                if self._fails(k):
                    return k
        return None

    def _budget_left(self) -> bool:
        return self.runs < self.max_runs and time.monotonic() < self._deadline

    def shrink(self, knobs: dict) -> dict:
        """The smallest failing knobs found (at worst `knobs` itself).

        hypothesis's shrinker first (from the known failure, see _variant_space),
        then one-knob-at-a-time greedy steps until no single simplification
        still fails (or the budget is spent), so the result is locally minimal.
        """
        started = time.monotonic()
        self._deadline = started + self.max_seconds
        self._memo[self._key(knobs)] = True
        best = knobs
        methods = []
        for round_ in range(6):
            if not self._budget_left():
                break
            found = self._hypothesis_round(best, round_)
            if found is None or self._key(found) == self._key(best):
                break
            methods.append("hypothesis")
            best = found
        while self._budget_left():
            found = self._greedy_round(best)
            if found is None:
                break
            methods.append("greedy")
            best = found
        self.method = "+".join(dict.fromkeys(methods)) or "none"
        self.seconds = time.monotonic() - started
        return best


def program_size(knobs: dict) -> int:
    """A rough size used to report how much shrinking achieved."""
    n = X.expr_size(knobs.get("expr"))
    for key in _SIZES:
        v = knobs.get(key)
        if isinstance(v, int):
            n += v
    return n
