"""Paged attention in plain torch: the CPU backend and the oracle for the Triton kernels.

Layout (shared with `attention_triton`):
- KV cache per layer: `k_cache`, `v_cache` of shape [num_blocks, block_size, kv_heads, head_dim].
- A step is one flat ("varlen") batch of T new tokens from B sequences, decodes first:
  sequence b owns new tokens query_start_loc[b] : query_start_loc[b+1] and, after this
  step, seq_lens[b] tokens of context (cached prefix + new tokens). Its new token i sits
  at position seq_lens[b] - query_len[b] + i and attends to context positions <= that.
- slot_mapping[t] = block * block_size + offset is where new token t's K/V is written.

This module owns the math only; it never allocates cache blocks or reads requests.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass
class AttentionMetadata:
    """Everything attention needs about one step's flat batch (see module docstring)."""

    query_start_loc: torch.Tensor  # [B+1] int32, on the model's device
    seq_lens: torch.Tensor  # [B] int32, context length after this step
    block_tables: torch.Tensor  # [B, max_blocks] int32; unused entries are 0
    slot_mapping: torch.Tensor  # [T] int64
    num_decodes: int  # sequences 0..num_decodes-1 have exactly one new token
    max_query_len: int
    max_seq_len: int
    query_lens_cpu: list[int]  # host copies, for loops that must not sync the device
    seq_lens_cpu: list[int]

    @property
    def num_seqs(self) -> int:
        return len(self.seq_lens_cpu)


def write_kv_cache(
    key: torch.Tensor,  # [T, kv_heads, head_dim]
    value: torch.Tensor,
    k_cache: torch.Tensor,  # [num_blocks, block_size, kv_heads, head_dim]
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,  # [T] int64
) -> None:
    """Store the new tokens' keys and values at their slots."""
    kv_heads, head_dim = k_cache.shape[2], k_cache.shape[3]
    k_cache.view(-1, kv_heads, head_dim).index_copy_(0, slot_mapping, key.to(k_cache.dtype))
    v_cache.view(-1, kv_heads, head_dim).index_copy_(0, slot_mapping, value.to(v_cache.dtype))


def paged_attention(
    query: torch.Tensor,  # [T, heads, head_dim]
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    meta: AttentionMetadata,
    scale: float,
) -> torch.Tensor:
    """Causal attention of every new token over its sequence's cached context -> [T, heads, head_dim].

    The new tokens' K/V must already be in the cache (`write_kv_cache`). Grouped-query
    attention: heads must be a multiple of kv_heads.
    """
    out = torch.empty_like(query)
    nd = meta.num_decodes
    if nd:
        out[:nd] = _decode_attention(query[:nd], k_cache, v_cache, meta, scale)
    starts = meta.query_start_loc.tolist() if meta.num_seqs > nd else []
    for b in range(nd, meta.num_seqs):
        lo, hi = starts[b], starts[b + 1]
        out[lo:hi] = _prefill_attention(
            query[lo:hi], k_cache, v_cache, meta.block_tables[b], meta.seq_lens_cpu[b], scale
        )
    return out


def _gather_context(cache: torch.Tensor, block_table: torch.Tensor, length: int) -> torch.Tensor:
    """The first `length` cached tokens of the sequences whose block tables are given.

    block_table [..., max_blocks] -> [..., length, kv_heads, head_dim].
    """
    block_size = cache.shape[1]
    num_blocks = -(-length // block_size)
    gathered = cache[block_table[..., :num_blocks].long()]  # [..., nb, bs, kvh, d]
    shape = gathered.shape
    flat = gathered.reshape(*shape[:-4], shape[-4] * shape[-3], shape[-2], shape[-1])
    return flat[..., :length, :, :]


def _decode_attention(query, k_cache, v_cache, meta: AttentionMetadata, scale: float):
    """One new token per sequence: all decodes in one padded SDPA call."""
    nd = meta.num_decodes
    lengths = meta.seq_lens[:nd]
    max_len = max(meta.seq_lens_cpu[:nd])
    tables = meta.block_tables[:nd]
    keys = _gather_context(k_cache, tables, max_len).transpose(1, 2)  # [nd, kvh, L, d]
    values = _gather_context(v_cache, tables, max_len).transpose(1, 2)
    positions = torch.arange(max_len, device=query.device)
    mask = (positions[None, :] < lengths[:, None].to(positions.dtype))[:, None, None, :]
    q = query.unsqueeze(2)  # [nd, heads, 1, d]
    out = F.scaled_dot_product_attention(
        q, keys.to(q.dtype), values.to(q.dtype), attn_mask=mask, scale=scale,
        enable_gqa=q.shape[1] != keys.shape[1],
    )
    return out.squeeze(2)


def _prefill_attention(query, k_cache, v_cache, block_table, seq_len: int, scale: float):
    """New tokens of one sequence over its cached prefix plus themselves."""
    q_len = query.shape[0]
    keys = _gather_context(k_cache, block_table, seq_len).transpose(0, 1)  # [kvh, L, d]
    values = _gather_context(v_cache, block_table, seq_len).transpose(0, 1)
    q = query.transpose(0, 1)  # [heads, q_len, d]
    gqa = q.shape[0] != keys.shape[0]
    if q_len == seq_len:
        out = F.scaled_dot_product_attention(
            q, keys.to(q.dtype), values.to(q.dtype), is_causal=True, scale=scale, enable_gqa=gqa
        )
    else:
        prefix = seq_len - q_len
        rows = torch.arange(q_len, device=q.device)[:, None] + prefix
        mask = torch.arange(seq_len, device=q.device)[None, :] <= rows
        out = F.scaled_dot_product_attention(
            q, keys.to(q.dtype), values.to(q.dtype), attn_mask=mask, scale=scale, enable_gqa=gqa
        )
    return out.transpose(0, 1)
