"""The tilelang_examples harness's flash_attn stand-in (benchmarks/tilelang_deps) against a
naive float64 softmax(scale * Q K^T) V, written out per sequence, head and query row."""

from __future__ import annotations

import importlib.util
import math
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PATH = os.path.join(_ROOT, "benchmarks", "tilelang_deps", "flash_attn", "__init__.py")
_spec = importlib.util.spec_from_file_location("flash_attn_stand_in", _PATH)
fa = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fa)

EPS = {torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}


def naive_attention(q, k, v, scale, causal):
    """One sequence in float64: q (sq, H, d), k (sk, Hk, d), v (sk, Hk, dv) -> (out (sq, H, dv), lse (H, sq)).
    Query head h reads key head h // (H // Hk); with causal, query i keeps keys j <= i + sk - sq."""
    q, k, v = (np.asarray(x.double()) for x in (q, k, v))
    sq, heads, _ = q.shape
    sk, heads_k, dv = v.shape
    out = np.zeros((sq, heads, dv))
    lse = np.full((heads, sq), -np.inf)
    for h in range(heads):
        kv = h // (heads // heads_k)
        for i in range(sq):
            keep = [j for j in range(sk) if not causal or j <= i + sk - sq]
            if not keep:
                continue
            s = np.array([scale * float(q[i, h] @ k[j, kv]) for j in keep])
            w = np.exp(s - s.max())
            lse[h, i] = s.max() + math.log(w.sum())
            out[i, h] = (w / w.sum()) @ v[keep, kv]
    return out, lse


def _close(got, want, dtype, values):
    """Output rounded once to `dtype` from a float32 computation: within a few of its ulps."""
    bound = float(values.abs().max()) if values.numel() else 1.0
    np.testing.assert_allclose(got.double().numpy(), want, rtol=0, atol=4 * EPS[dtype] * max(bound, 1.0))


heads_st = st.tuples(st.integers(1, 2), st.integers(1, 3))  # (key heads, query heads per key head)
dtype_st = st.sampled_from([torch.float16, torch.bfloat16])
scale_st = st.one_of(st.none(), st.floats(0.05, 2.0))


def _randn(gen, *shape, dtype):
    return torch.randn(*shape, generator=gen).to(dtype)


@settings(max_examples=30, deadline=None)
@given(
    seqlens=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=3),
    heads=heads_st,
    dims=st.tuples(st.integers(1, 8), st.integers(1, 8)),
    dtype=dtype_st,
    causal=st.booleans(),
    scale=scale_st,
    seed=st.integers(0, 2**16),
)
def test_varlen_matches_the_naive_formula_per_sequence(seqlens, heads, dims, dtype, causal, scale, seed):
    gen = torch.Generator().manual_seed(seed)
    heads_k, group = heads
    d, dv = dims
    lq, lk = [a for a, _ in seqlens], [b for _, b in seqlens]
    q = _randn(gen, sum(lq), heads_k * group, d, dtype=dtype)
    k = _randn(gen, sum(lk), heads_k, d, dtype=dtype)
    v = _randn(gen, sum(lk), heads_k, dv, dtype=dtype)
    cu_q = torch.tensor(np.cumsum([0] + lq), dtype=torch.int32)
    cu_k = torch.tensor(np.cumsum([0] + lk), dtype=torch.int32)
    out = fa.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(lq), max(lk), 0.0, softmax_scale=scale, causal=causal)
    assert out.dtype == dtype and out.shape == (sum(lq), heads_k * group, dv)
    used = 1 / math.sqrt(d) if scale is None else scale
    want = [
        naive_attention(q[cu_q[b] : cu_q[b + 1]], k[cu_k[b] : cu_k[b + 1]], v[cu_k[b] : cu_k[b + 1]], used, causal)[0]
        for b in range(len(seqlens))
    ]
    _close(out, np.concatenate(want), dtype, v)


@settings(max_examples=30, deadline=None)
@given(
    batch=st.integers(1, 3),
    seqlen_q=st.integers(1, 3),
    cache=st.integers(1, 8),
    heads=heads_st,
    dims=st.tuples(st.integers(1, 8), st.integers(1, 8)),
    dtype=dtype_st,
    causal=st.booleans(),
    scale=scale_st,
    data=st.data(),
)
def test_kvcache_reads_the_first_cache_seqlens_keys_of_its_row(
    batch, seqlen_q, cache, heads, dims, dtype, causal, scale, data
):
    heads_k, group = heads
    d, dv = dims
    gen = torch.Generator().manual_seed(data.draw(st.integers(0, 2**16)))
    rows = batch + data.draw(st.integers(0, 2))
    lengths = data.draw(st.lists(st.integers(0, cache), min_size=batch, max_size=batch))
    row_of = data.draw(st.one_of(st.none(), st.permutations(range(rows)).map(lambda p: p[:batch])))
    q = _randn(gen, batch, seqlen_q, heads_k * group, d, dtype=dtype)
    k_cache = _randn(gen, rows, cache, heads_k, d, dtype=dtype)
    v_cache = _randn(gen, rows, cache, heads_k, dv, dtype=dtype)
    out, lse = fa.flash_attn_with_kvcache(
        q,
        k_cache,
        v_cache,
        cache_seqlens=torch.tensor(lengths, dtype=torch.int32),
        cache_batch_idx=None if row_of is None else torch.tensor(row_of, dtype=torch.int32),
        softmax_scale=scale,
        causal=causal,
        return_softmax_lse=True,
    )
    assert out.shape == (batch, seqlen_q, heads_k * group, dv) and lse.shape == (batch, heads_k * group, seqlen_q)
    used = 1 / math.sqrt(d) if scale is None else scale
    for b in range(batch):
        row = b if row_of is None else row_of[b]
        n = lengths[b]
        want, want_lse = naive_attention(q[b], k_cache[row, :n], v_cache[row, :n], used, causal)
        _close(out[b], want, dtype, v_cache)
        np.testing.assert_allclose(lse[b].double().numpy(), want_lse, rtol=1e-5, atol=1e-5)


@settings(max_examples=10, deadline=None)
@given(
    batch=st.integers(1, 2),
    heads=heads_st,
    dtype=dtype_st,
    data=st.data(),
)
def test_paged_kvcache_reads_the_pages_of_the_block_table_in_order(batch, heads, dtype, data):
    heads_k, group = heads
    page, d = 256, 4
    per_seq = data.draw(st.integers(1, 2))
    gen = torch.Generator().manual_seed(data.draw(st.integers(0, 2**16)))
    pages = data.draw(st.permutations(range(batch * per_seq + 1)))
    table = torch.tensor(pages[: batch * per_seq], dtype=torch.int32).reshape(batch, per_seq)
    lengths = data.draw(st.lists(st.integers(0, per_seq * page), min_size=batch, max_size=batch))
    q = _randn(gen, batch, 1, heads_k * group, d, dtype=dtype)
    k_cache = _randn(gen, len(pages), page, heads_k, d, dtype=dtype)
    v_cache = _randn(gen, len(pages), page, heads_k, d, dtype=dtype)
    out = fa.flash_attn_with_kvcache(
        q, k_cache, v_cache, cache_seqlens=torch.tensor(lengths, dtype=torch.int32), block_table=table
    )
    for b in range(batch):
        keys = torch.cat([k_cache[int(p)] for p in table[b]])[: lengths[b]]
        values = torch.cat([v_cache[int(p)] for p in table[b]])[: lengths[b]]
        _close(out[b], naive_attention(q[b], keys, values, 1 / math.sqrt(d), False)[0], dtype, v_cache)


def test_the_documented_bottom_right_causal_masks():
    """flash_attn's docstring: seqlen_q=2, seqlen_k=5 keeps 11110 / 11111; seqlen_q=5, seqlen_k=2
    keeps nothing in rows 0-2 (zero output), then 10 and 11. One-hot values read the mask off."""
    for seqlen_q, seqlen_k, mask in ((2, 5, [[1, 1, 1, 1, 0], [1] * 5]), (5, 2, [[0, 0]] * 3 + [[1, 0], [1, 1]])):
        q = torch.zeros(seqlen_q, 1, 1, dtype=torch.float16)
        k = torch.zeros(seqlen_k, 1, 1, dtype=torch.float16)
        v = torch.eye(seqlen_k, dtype=torch.float16).unsqueeze(1)
        cu_q = torch.tensor([0, seqlen_q], dtype=torch.int32)
        cu_k = torch.tensor([0, seqlen_k], dtype=torch.int32)
        out = fa.flash_attn_varlen_func(q, k, v, cu_q, cu_k, seqlen_q, seqlen_k, causal=True)[:, 0]
        kept = torch.tensor(mask, dtype=torch.float32)
        expected = kept / kept.sum(-1, keepdim=True).clamp(min=1)
        torch.testing.assert_close(out.float(), expected, atol=1e-3, rtol=0)


def test_options_it_does_not_implement_are_refused_by_name():
    q = torch.zeros(1, 1, 1, 8, dtype=torch.float16)
    cache = torch.zeros(1, 4, 1, 8, dtype=torch.float16)
    with pytest.raises(NotImplementedError, match="softcap"):
        fa.flash_attn_with_kvcache(q, cache, cache, softcap=30.0)
    with pytest.raises(NotImplementedError, match="dropout_p"):
        cu = torch.tensor([0, 1], dtype=torch.int32)
        fa.flash_attn_varlen_func(q[0], cache[0], cache[0], cu, cu, 1, 1, 0.1)
    with pytest.raises(TypeError, match="fp16 and bf16"):
        fa.flash_attn_with_kvcache(q.float(), cache.float(), cache.float())
