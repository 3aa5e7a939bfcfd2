"""benchmarks/cuda_bench.py's `interleaved`: the timing that issue 12's GPU bars use, checked here
against a simulated card whose clock drifts as it heats (no GPU needed: `bench` is replaced)."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "cuda_bench.py")


def load_cuda_bench():
    """benchmarks/cuda_bench.py as a fresh module, the sys.path entries it adds undone."""
    spec = importlib.util.spec_from_file_location("cuda_bench_under_test", BENCH)
    module = importlib.util.module_from_spec(spec)
    saved = list(sys.path)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved
    return module


@pytest.fixture
def cuda_bench():
    return load_cuda_bench()


class DriftingCard:
    """Each burst a little slower than the last (a card heating at its power cap); a function's
    first call costs `cold_ms` more (kernel selection and loading)."""

    def __init__(self, base_ms: dict, drift: float, cold_ms: float = 0.0):
        self.base_ms, self.drift, self.cold_ms = base_ms, drift, cold_ms
        self.bursts, self.seen, self.log = 0, set(), []

    def bench(self, fn, warmup=10, iters=50, reps=1):
        name = fn()  # the simulated kernels return their names
        per_call = self.base_ms[name] * (1 + self.drift * self.bursts)
        if name not in self.seen:
            self.seen.add(name)
            per_call += self.cold_ms / reps
        self.bursts += 1
        self.log.append((name, reps))
        return per_call


def test_pairs_alternate_peer_first_then_build_first(cuda_bench, monkeypatch):
    card = DriftingCard({"mine": 1.0, "peer": 1.0}, drift=0.0)
    monkeypatch.setattr(cuda_bench, "bench", card.bench)
    cuda_bench.interleaved(lambda: "mine", lambda: "peer", pairs=4)
    timed_bursts = [name for name, _ in card.log[4:]]  # after the peer's first call, sizing and warm bursts
    assert timed_bursts == ["peer", "mine", "mine", "peer"] * 2


def test_bursts_are_sized_after_the_peers_first_call(cuda_bench, monkeypatch):
    card = DriftingCard({"mine": 1.5, "peer": 2.0}, drift=0.0, cold_ms=500.0)
    monkeypatch.setattr(cuda_bench, "bench", card.bench)
    timed = cuda_bench.interleaved(lambda: "mine", lambda: "peer", pairs=2, burst_ms=20.0)
    assert timed["reps"] == 10  # 20 ms of 2 ms calls, not sized by the 500 ms first call
    assert {reps for _, reps in card.log[4:]} == {10}


@settings(max_examples=60, deadline=None)
@given(
    mine=st.floats(0.05, 5.0),
    peer=st.floats(0.05, 5.0),
    drift=st.floats(-0.01, 0.02),
    half_pairs=st.integers(1, 12),
)
def test_an_even_drift_cancels_in_abba_pairs(mine, peer, drift, half_pairs):
    module = load_cuda_bench()  # one per example: hypothesis runs the body many times per fixture
    card = DriftingCard({"mine": mine, "peer": peer}, drift=drift)
    module.bench = card.bench
    timed = module.interleaved(lambda: "mine", lambda: "peer", pairs=2 * half_pairs)
    assert timed["peer_ms"] / timed["ms"] == pytest.approx(peer / mine, rel=1e-9)
    assert len(timed["pair_ratios"]) == 2 * half_pairs
    assert timed["pair_ratios"] == sorted(timed["pair_ratios"])


def test_the_older_peer_around_build_timing_is_what_drift_biases(cuda_bench, monkeypatch):
    """Why the bars moved to `interleaved`: with builds between two peer timings (a group of
    `cuda_prebuilt.py run`), a drifting card favours one side; the pairs do not."""
    card = DriftingCard({"mine": 1.0, "peer": 1.0, "other": 1.0}, drift=0.02)
    monkeypatch.setattr(cuda_bench, "bench", card.bench)
    before = cuda_bench.bench(lambda: "peer")
    mine = cuda_bench.bench(lambda: "mine")
    cuda_bench.bench(lambda: "other")  # the next build of the group
    after = cuda_bench.bench(lambda: "peer")
    assert (before + after) / 2 / mine > 1.005  # equal kernels, yet "mine" looks 1% faster
    timed = cuda_bench.interleaved(lambda: "mine", lambda: "peer", pairs=8)
    assert timed["peer_ms"] / timed["ms"] == pytest.approx(1.0, rel=1e-9)
