"""Seeded draws for the program generator: a small subset of hypothesis's strategy API.

Programs must be the same on every machine whatever else is installed.
hypothesis's own generation mixes in numeric constants it collects from every
imported non-site-packages module (editable plugins included) and changes
between releases, so the generator draws from `random.Random` seeded by a
string instead (Python's string seeding is SHA-512 based: independent of hash
randomisation and stable across versions). The strategies keep hypothesis's
spelling (`composite`, `sampled_from`, `integers`, ...), and `as_hypothesis`
turns any of them into a real hypothesis strategy that draws its Random from
hypothesis (`st.randoms`), for property tests that want hypothesis's control.
"""

from __future__ import annotations

import functools
import random
from typing import Any, Callable, Sequence


class Strategy:
    """A recipe `rng -> value`."""

    def __init__(self, fn: Callable[[random.Random], Any]):
        self.fn = fn

    def draw(self, rng: random.Random):
        return self.fn(rng)

    def map(self, f) -> "Strategy":
        return Strategy(lambda rng: f(self.fn(rng)))


def composite(f):
    """`@composite def s(draw, *args)`: `s(*args)` is a Strategy, as in hypothesis."""

    @functools.wraps(f)
    def make(*args, **kwargs) -> Strategy:
        def run(rng):
            return f(lambda s: s.draw(rng), *args, **kwargs)

        return Strategy(run)

    return make


def sampled_from(items: Sequence) -> Strategy:
    items = list(items)
    if not items:
        raise ValueError("sampled_from of an empty sequence")
    return Strategy(lambda rng: items[rng.randrange(len(items))])


def integers(lo: int, hi: int) -> Strategy:
    return Strategy(lambda rng: rng.randint(int(lo), int(hi)))


def booleans() -> Strategy:
    return Strategy(lambda rng: rng.random() < 0.5)


def just(value) -> Strategy:
    return Strategy(lambda rng: value)


def one_of(*strategies: Strategy) -> Strategy:
    return Strategy(lambda rng: strategies[rng.randrange(len(strategies))].draw(rng))


def builds(f, *strategies: Strategy) -> Strategy:
    return Strategy(lambda rng: f(*(s.draw(rng) for s in strategies)))


def weighted(pairs: Sequence) -> Strategy:
    """Pick a value with a weight: `weighted([(3, "a"), (1, "b")])`."""
    total = float(sum(w for w, _ in pairs))

    def pick(rng):
        x = rng.random() * total
        for w, v in pairs:
            x -= w
            if x < 0:
                return v
        return pairs[-1][1]

    return Strategy(pick)


def rng_for(*parts) -> random.Random:
    """A Random seeded by the parts (e.g. seed, program index, family): same parts, same draws."""
    return random.Random(":".join(str(p) for p in parts))


def as_hypothesis(strategy: Strategy):
    """The same recipe as a hypothesis strategy (hypothesis supplies and replays the Random)."""
    from hypothesis import strategies as hst

    return hst.randoms(use_true_random=False).map(strategy.draw)
