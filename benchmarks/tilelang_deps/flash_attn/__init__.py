"""A plain-torch stand-in for the two flash_attn functions TileLang's examples check against.

THIS IS NOT flash_attn. flash_attn (github.com/Dao-AILab/flash-attention) is CUDA-only; on a
host without a GPU, `benchmarks/tilelang_examples.py --deps benchmarks/tilelang_deps` puts this
folder on the examples' path, so their `import flash_attn` gets these functions, written by
tilecore from flash_attn 2's documented semantics (the docstrings of its
`flash_attn_interface.py`), in float32 torch on the CPU:

* `softmax_scale` defaults to 1/sqrt(headdim);
* GQA/MQA: query head h reads key/value head h // (nheads / nheads_k);
* `causal=True` aligns the mask to the bottom-right corner: query i of a sequence with
  seqlen_q queries and seqlen_k keys keeps keys j <= i + seqlen_k - seqlen_q; a row with no
  key kept gives a zero output;
* `flash_attn_varlen_func`: sequences packed along dim 0, bounded by `cu_seqlens_q/k`;
* `flash_attn_with_kvcache`: each batch entry reads the first `cache_seqlens[b]` keys of its
  cache row (`cache_batch_idx` picks the row), or of the pages `block_table[b]` lists
  (page_block_size a multiple of 256, as documented);
* scores and the softmax are computed in float32 (flash_attn accumulates in float32), the
  output is rounded to q's dtype; the optional log-sum-exp is float32 (-inf for an empty row).

Only the options those examples use, and the documented core above, are implemented; dropout,
sliding windows, softcapping, ALiBi, appending new keys to the cache, rotary embeddings and
attention-probability outputs raise NotImplementedError naming the option.
"""

from __future__ import annotations

import math
from typing import Optional, Union

import torch

STAND_IN = "tilecore's plain-torch stand-in for flash_attn 2 (benchmarks/tilelang_deps), not flash_attn"
__version__ = "2.stand-in"

__all__ = ["flash_attn_varlen_func", "flash_attn_with_kvcache"]


def _unsupported(**options) -> None:
    """NotImplementedError for each option given a value other than flash_attn's default."""
    for name, (value, default) in options.items():
        if value is not None and value != default:
            raise NotImplementedError(f"flash_attn stand-in: {name}={value!r} is not implemented (only {default!r})")


def _check_dtypes(q, k, v) -> None:
    if q.dtype not in (torch.float16, torch.bfloat16):
        raise TypeError(f"FlashAttention only supports fp16 and bf16 data types, got q of {q.dtype}")
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise TypeError(f"query, key and value must have the same dtype ({q.dtype}, {k.dtype}, {v.dtype})")
    if q.shape[-2] % k.shape[-2]:
        raise ValueError(f"number of query heads ({q.shape[-2]}) must be divisible by key/value heads ({k.shape[-2]})")


def attend(q, k, v, softmax_scale: float, causal: bool):
    """One sequence: q (seqlen_q, nheads, d), k (seqlen_k, nheads_k, d), v (seqlen_k, nheads_k, dv)
    -> (out float32 (seqlen_q, nheads, dv), lse float32 (nheads, seqlen_q))."""
    group = q.shape[1] // k.shape[1]
    k = k.float().repeat_interleave(group, dim=1)
    v = v.float().repeat_interleave(group, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q.float(), k) * softmax_scale
    if causal:
        seqlen_q, seqlen_k = q.shape[0], k.shape[0]
        rows = torch.arange(seqlen_q).unsqueeze(1)
        cols = torch.arange(seqlen_k).unsqueeze(0)
        scores = scores.masked_fill(cols > rows + (seqlen_k - seqlen_q), float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    # exp(-inf - -inf) is NaN: rows with no key kept get weight 0 (a zero output)
    weights = torch.where(torch.isfinite(lse).unsqueeze(-1), torch.exp(scores - lse.unsqueeze(-1)), 0.0)
    return torch.einsum("hqk,khd->qhd", weights, v), lse


def _scale(q, softmax_scale):
    return 1.0 / math.sqrt(q.shape[-1]) if softmax_scale is None else float(softmax_scale)


def _bounds(cu_seqlens, max_seqlen, what: str):
    if cu_seqlens.dtype != torch.int32:
        raise TypeError(f"cu_seqlens_{what} must be int32, got {cu_seqlens.dtype}")
    bounds = [int(x) for x in cu_seqlens.tolist()]
    lengths = [b - a for a, b in zip(bounds, bounds[1:])]
    if any(n < 0 for n in lengths) or any(n > max_seqlen for n in lengths):
        raise ValueError(f"cu_seqlens_{what} gives lengths {lengths}, outside [0, max_seqlen_{what}={max_seqlen}]")
    return bounds


def flash_attn_varlen_func(
    q,
    k,
    v,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
    block_table=None,
):
    """Attention over packed sequences: q (total_q, nheads, d), k/v (total_k, nheads_k, d[v]);
    sequence b is rows cu_seqlens_q[b]:cu_seqlens_q[b+1] of q and likewise of k, v.
    Returns out (total_q, nheads, dv) in q's dtype. `deterministic` concerns flash_attn's
    backward pass only."""
    _unsupported(
        dropout_p=(float(dropout_p), 0.0),
        window_size=(tuple(window_size), (-1, -1)),
        softcap=(float(softcap), 0.0),
        alibi_slopes=(None if alibi_slopes is None else "given", None),
        return_attn_probs=(bool(return_attn_probs), False),
        block_table=(None if block_table is None else "given", None),
    )
    _check_dtypes(q, k, v)
    starts_q = _bounds(cu_seqlens_q, max_seqlen_q, "q")
    starts_k = _bounds(cu_seqlens_k, max_seqlen_k, "k")
    if len(starts_q) != len(starts_k):
        raise ValueError(f"cu_seqlens_q has {len(starts_q)} entries, cu_seqlens_k {len(starts_k)}")
    scale = _scale(q, softmax_scale)
    out = torch.zeros(q.shape[0], q.shape[1], v.shape[-1], dtype=q.dtype, device=q.device)
    for (q0, q1), (k0, k1) in zip(zip(starts_q, starts_q[1:]), zip(starts_k, starts_k[1:])):
        out[q0:q1] = attend(q[q0:q1], k[k0:k1], v[k0:k1], scale, causal)[0].to(q.dtype)
    return out


def _cache_keys(k_cache, v_cache, b: int, length: int, cache_batch_idx, block_table):
    """The first `length` keys and values batch entry b reads from the cache."""
    if block_table is None:
        row = b if cache_batch_idx is None else int(cache_batch_idx[b])
        return k_cache[row, :length], v_cache[row, :length]
    page = k_cache.shape[1]
    pages = block_table[b, : -(-length // page)].long()
    keys = k_cache[pages].reshape(-1, *k_cache.shape[2:])[:length]
    values = v_cache[pages].reshape(-1, *v_cache.shape[2:])[:length]
    return keys, values


def flash_attn_with_kvcache(
    q,
    k_cache,
    v_cache,
    k=None,
    v=None,
    rotary_cos=None,
    rotary_sin=None,
    cache_seqlens: Optional[Union[int, torch.Tensor]] = None,
    cache_batch_idx: Optional[torch.Tensor] = None,
    cache_leftpad: Optional[torch.Tensor] = None,
    block_table: Optional[torch.Tensor] = None,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    rotary_interleaved=True,
    alibi_slopes=None,
    num_splits=0,
    return_softmax_lse=False,
):
    """Decoding attention over a KV cache: q (batch, seqlen_q, nheads, d); k_cache/v_cache
    (batch_cache, seqlen_cache, nheads_k, d[v]), or (num_blocks, page_block_size, nheads_k, d[v])
    with block_table (batch, max_blocks_per_seq). Batch entry b attends to the first
    cache_seqlens[b] keys (all of them when None). Returns out (batch, seqlen_q, nheads, dv) in
    q's dtype, and with return_softmax_lse also lse (batch, nheads, seqlen_q) in float32.
    `num_splits` only changes how flash_attn divides the work."""
    given = {"k": k, "v": v, "rotary_cos": rotary_cos, "rotary_sin": rotary_sin, "cache_leftpad": cache_leftpad}
    _unsupported(
        **{name: (None if value is None else "given", None) for name, value in given.items()},
        window_size=(tuple(window_size), (-1, -1)),
        softcap=(float(softcap), 0.0),
        alibi_slopes=(None if alibi_slopes is None else "given", None),
    )
    _check_dtypes(q, k_cache, v_cache)
    batch = q.shape[0]
    if block_table is not None:
        if cache_batch_idx is not None:
            raise ValueError("cache_batch_idx cannot be used with a paged KV cache (block_table)")
        if k_cache.shape[1] % 256:
            raise ValueError(f"page_block_size must be a multiple of 256, got {k_cache.shape[1]}")
        capacity = block_table.shape[1] * k_cache.shape[1]
    else:
        capacity = k_cache.shape[1]
    if cache_seqlens is None:
        lengths = [capacity] * batch
    elif isinstance(cache_seqlens, int):
        lengths = [cache_seqlens] * batch
    else:
        lengths = [int(n) for n in cache_seqlens.tolist()]
    if any(n < 0 or n > capacity for n in lengths):
        raise ValueError(f"cache_seqlens {lengths} outside [0, {capacity}] (the cache's capacity)")
    scale = _scale(q, softmax_scale)
    out = torch.zeros(*q.shape[:3], v_cache.shape[-1], dtype=q.dtype, device=q.device)
    lse = torch.zeros(batch, q.shape[2], q.shape[1], dtype=torch.float32, device=q.device)
    for b in range(batch):
        keys, values = _cache_keys(k_cache, v_cache, b, lengths[b], cache_batch_idx, block_table)
        out_b, lse[b] = attend(q[b], keys, values, scale, causal)
        out[b] = out_b.to(q.dtype)
    return (out, lse) if return_softmax_lse else out
