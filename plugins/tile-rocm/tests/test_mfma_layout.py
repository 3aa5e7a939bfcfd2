"""The MFMA layouts' index arithmetic, checked in plain Python against the documented lane
mapping of v_mfma_*_16x16x* (no GPU needed): every accumulator element is owned exactly once,
a 16x16 MFMA emulated per lane with those layouts computes A @ B, and row vectors line up
with the rows of the accumulator registers."""

import itertools

import numpy as np
import pytest

pytest.importorskip("tvm")
from tile_rocm.mfma import WAVE, MfmaLayout, MfmaRowLayout  # noqa: E402


@pytest.mark.parametrize("M,N,waves", [(64, 64, 4), (64, 64, 2), (128, 64, 4), (32, 128, 2), (16, 16, 1)])
def test_every_accumulator_element_has_one_owner(M, N, waves):
    lay = MfmaLayout.choose_waves(M, N, waves)
    owners = {}
    for t in range(waves * WAVE):
        for it in itertools.product(*map(range, lay.iter_space())):
            (i, j), local = lay.coords(t, it)
            assert 0 <= local < lay.local_size
            assert (i, j) not in owners
            owners[(i, j)] = (t, local)
    assert len(owners) == M * N


@pytest.mark.parametrize("kw", [4, 8])
def test_emulated_mfma_with_these_layouts_computes_the_product(kw):
    """Lane L supplies A[L%16][(L//16)*kw + e] and B[(L//16)*kw + e][L%16]; the hardware sums
    over k and lane L receives D[(L//16)*4 + r][L%16] (AMD's MFMA 16x16 convention)."""
    rng = np.random.default_rng(0)
    M = N = 32
    K = 4 * kw
    waves = 4
    lay = MfmaLayout.choose_waves(M, N, waves)
    A = rng.integers(-3, 4, (M, K))
    Bm = rng.integers(-3, 4, (K, N))
    acc = np.zeros((waves * WAVE, lay.local_size), dtype=np.int64)
    for w in range(waves):
        for mi, ni in itertools.product(range(lay.MI), range(lay.NI)):
            r0 = (w // lay.wn) * (M // lay.wm) + mi * 16
            c0 = (w % lay.wn) * (N // lay.wn) + ni * 16
            a_lane = np.array([[A[r0 + L % 16, (L // 16) * kw + e] for e in range(kw)] for L in range(WAVE)])
            b_lane = np.array([[Bm[(L // 16) * kw + e, c0 + L % 16] for e in range(kw)] for L in range(WAVE)])
            # the matrix unit: rebuild the 16 x K and K x 16 tiles from the lanes, multiply
            At = np.zeros((16, K), np.int64)
            Bt = np.zeros((K, 16), np.int64)
            for L in range(WAVE):
                At[L % 16, (L // 16) * kw : (L // 16 + 1) * kw] = a_lane[L]
                Bt[(L // 16) * kw : (L // 16 + 1) * kw, L % 16] = b_lane[L]
            D = At @ Bt
            for L in range(WAVE):
                for r in range(4):
                    acc[w * WAVE + L, (mi * lay.NI + ni) * 4 + r] = D[(L // 16) * 4 + r, L % 16]
    C = np.zeros((M, N), np.int64)
    for t in range(waves * WAVE):
        for it in itertools.product(*map(range, lay.iter_space())):
            (i, j), local = lay.coords(t, it)
            C[i, j] = acc[t, local]
    assert (C == A @ Bm).all()


def test_row_vectors_line_up_with_accumulator_rows():
    lay = MfmaLayout.choose_waves(64, 64, 2, whole_rows=True)
    assert lay.wn == 1
    row = MfmaRowLayout(lay.M, lay.wm, lay.wn)
    assert row.matches(lay)
    for t in range(2 * WAVE):
        for it in itertools.product(*map(range, lay.iter_space())):
            (i, _j), _ = lay.coords(t, it)
            mi, _ni, r = it
            (ri,), rlocal = row.coords(t, (mi, r))
            assert ri == i and rlocal == lay.row_local(it)
        # the 16 lanes that share a row differ only in the low 4 lane bits (the xor 1..8 butterfly)
        lane = t % WAVE
        for m in (1, 2, 4, 8):
            other = (t - lane) + (lane ^ m)
            assert row.coords(other, (0, 0))[0] == row.coords(t, (0, 0))[0]
